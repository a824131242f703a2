"""dlgn_lib.record.classwalk: the class path's walk counts loads and trainings right, notices a cache that
changed, refuses to start on a used folder, and its record is what the course guide shows."""
import json
import os
import re

import nbformat
import pytest

from dlgn_lib import files
from dlgn_lib.record import classwalk, report


def _notebook(*texts):
    nb = nbformat.v4.new_notebook()
    for text in texts:
        cell = nbformat.v4.new_code_cell("pass")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells.append(cell)
    nb.cells.append(nbformat.v4.new_markdown_cell("24 runs: 24 loaded from the cache, 3 trained (prose, not output)"))
    return nb


def test_counts_add_summary_lines_and_single_run_lines():
    nb = _notebook("24 runs: 20 loaded from the cache, 4 trained in 31.2 s\n",
                   "loaded run DLGN seed 0 [abc]\nloaded run ReLU seed 0 [def]\n",
                   "training DLGN seed 1 [123] for 60 epochs\ntrained DLGN seed 1 in 2.0 s\n",
                   "1 run: 1 loaded from the cache, 0 trained\n")
    # by hand: 20 + 2 + 1 loaded; 4 + 1 trained ("training …" announces the run that "trained …" ends)
    assert classwalk.cache_counts(nb) == {"loaded": 23, "trained": 5}
    assert classwalk.cache_counts(_notebook("nothing about the cache\n")) == {"loaded": 0, "trained": 0}


def test_cache_state_sees_a_new_entry_and_a_rewritten_file(tmp_path):
    (tmp_path / "a" ).mkdir()
    (tmp_path / "a" / "run.pt").write_bytes(b"12345")
    before = classwalk.cache_state(tmp_path)
    assert before == {"a/run.pt": (5, (tmp_path / "a" / "run.pt").stat().st_mtime_ns)}
    assert classwalk.cache_state(tmp_path) == before
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text("{}")
    assert set(classwalk.cache_state(tmp_path)) == {"a/run.pt", "b/manifest.json"}
    (tmp_path / "b" / "manifest.json").unlink()
    st = (tmp_path / "a" / "run.pt").stat()
    os.utime(tmp_path / "a" / "run.pt", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert classwalk.cache_state(tmp_path) != before
    assert classwalk.cache_state(tmp_path / "missing") == {}


def test_the_class_run_tells_run_files_from_analyses(tmp_path):
    (tmp_path / "0123456789abcdef0123").mkdir()
    (tmp_path / "0123456789abcdef0123" / "run.pt").write_bytes(b"run")
    (tmp_path / "analyses").mkdir()
    (tmp_path / "analyses" / "a-b.json").write_text("{}")
    run_files, tables = classwalk._split(classwalk.cache_state(tmp_path))
    assert set(run_files) == {"0123456789abcdef0123/run.pt"} and set(tables) == {"analyses/a-b.json"}


def test_the_walk_refuses_a_used_folder_and_an_unknown_notebook_before_running_anything(tmp_path):
    (tmp_path / "left-over").write_text("x")
    with pytest.raises(files.Refusal, match="not empty"):
        classwalk.walk(["01"], tmp_path, say=lambda line: pytest.fail(f"a step ran: {line}"))
    with pytest.raises(files.Refusal, match="99"):
        classwalk.walk(["99"], tmp_path / "new", say=lambda line: pytest.fail(f"a step ran: {line}"))
    assert not (tmp_path / "new").exists() or not any((tmp_path / "new").iterdir())


def test_a_failing_step_is_named_with_its_output(tmp_path, monkeypatch):
    monkeypatch.setattr(classwalk.sys, "executable", "false")
    with pytest.raises(classwalk.WalkFailed, match="step 'teacher, train' failed"):
        classwalk.walk(["01"], tmp_path / "w", say=lambda line: None)


def test_the_course_guide_shows_the_recorded_walk():
    record = classwalk.load_record()
    guide = report.COURSE_GUIDE.read_text()
    assert classwalk.table(record) in guide
    if record is not None:
        assert record["notebooks"] == ["00", "01", "03", "05"]
        named = [s["name"] for s in record["steps"]]
        assert named[0].startswith("teacher: run") and named[-1].startswith("class machine: run")
        assert "0 trained" in record["steps"][-1]["detail"]
        assert "analyses added" in record["steps"][-1]["detail"]
        assert set(record["class_notebook_seconds"]) == set(record["notebooks"])
        # the bundle a class reads is readable by everyone
        export = next(s for s in record["steps"] if "export" in s["name"])
        assert export["detail"].endswith("-rw-r--r--")
        assert re.search(r"entries and [1-9]\d* analyses", export["detail"]), "the bundle carries the tables"


def test_the_table_of_a_record_quotes_its_numbers():
    record = {"date": "2026-12-03", "code_version": "abc1234", "machine": "CPU X", "cores": 2, "numerics": "pinned",
              "load_average": {"start": "0.1, 0.2, 0.3", "end": "1.0, 1.1, 1.2"}, "workers": None,
              "notebooks": ["01"], "class_notebook_seconds": {"01": 9.6},
              "steps": [{"name": "teacher: run", "command": "c", "seconds": 1234.4, "detail": "7 runs trained"},
                        {"name": "class machine: run", "command": "d", "seconds": 20.0, "detail": ""}]}
    text = classwalk.table(json.loads(json.dumps(record)))
    assert "| teacher: run | `c` | 1,234 | 7 runs trained |" in text
    assert "| class machine: run | `d` | 20 | — |" in text
    assert "01 10 s" in text and "abc1234" in text and "1.0, 1.1, 1.2 at the end" in text
    # 20.0 s of 1,234.4 s is 1.6 %: the class run's share of the run from an empty cache
    assert "ran in 2% of its time from an empty run cache (20 s against 1,234 s)" in text
    assert classwalk.table(None).startswith("No walk recorded yet")


def test_the_record_says_whether_the_checkout_was_clean(tmp_path, monkeypatch):
    import subprocess
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("a\n")
    subprocess.run(git + ["add", "a.txt"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "a"], check=True)
    monkeypatch.setattr(classwalk.locations, "REPO_ROOT", tmp_path)
    assert classwalk.checkout_state() == "a clean checkout"
    (tmp_path / "a.txt").write_text("b\n")
    (tmp_path / "new.txt").write_text("n\n")
    assert classwalk.checkout_state() == "a checkout with 2 changed or new file(s)"
    monkeypatch.setattr(classwalk.locations, "REPO_ROOT", tmp_path / "nowhere")
    assert classwalk.checkout_state() == "not a git checkout"
