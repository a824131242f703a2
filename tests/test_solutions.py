"""teaching/SOLUTIONS.md: every snippet's output is generated, and the prose quotes only what was printed."""
import pytest

from dlgn_lib.record import reproduce, solutions

TEXT = """# Solutions

<!-- output:about -->
(none yet)
<!-- /output:about -->

## 00 · Primer

### 1. First

<details><summary>Solution</summary>

```python
print(0.25 * 4)
```

The value is 1.0, not 4.

</details>

### 2. Second, no code

Read 3.5 off the figure.

## 01 · Paths

Set-up:

```python
x = 2
```

### 1. Two snippets

```python
print(x + 0.5)
```

```python
print("ratio", x / 3)
```

Both: 2.5 and 0.667.
"""


def test_parse_finds_snippets_with_ids_in_file_order():
    exercises = solutions.parse(TEXT)
    assert [(e.notebook, e.number, len(e.snippets)) for e in exercises] == [
        ("00", 0, 0), ("00", 1, 1), ("00", 2, 0), ("01", 0, 1), ("01", 1, 2)]
    assert [s.id for s in solutions.snippets(TEXT)] == ["00.1", "01.0", "01.1", "01.1.2"]
    assert solutions.snippets(TEXT)[0].code == "print(0.25 * 4)\n"


def test_outputs_are_written_once_and_replaced_in_place():
    text = solutions.with_outputs(TEXT, {"00.1": "1.0\n", "01.1": "2.5\n", "01.1.2": "ratio 0.667\n"})
    by_id = {s.id: s.output for s in solutions.snippets(text)}
    assert by_id == {"00.1": "1.0\n", "01.0": None, "01.1": "2.5\n", "01.1.2": "ratio 0.667\n"}
    again = solutions.with_outputs(text, {"01.1": "2.75\n"})
    assert again.count("<!-- output:01.1 -->") == 1 and again.count("<!-- /output:01.1 -->") == 1
    assert {s.id: s.output for s in solutions.snippets(again)}["01.1"] == "2.75\n"
    assert solutions.with_outputs(text, {"00.1": "1.0\n", "01.1": "2.5\n", "01.1.2": "ratio 0.667\n"}) == text
    assert solutions.with_outputs(TEXT, {"00.1": ""}).count("(prints nothing)") == 1


def test_check_names_a_number_the_snippets_did_not_print():
    text = solutions.with_outputs(TEXT, {"00.1": "1.0\n", "01.0": "", "01.1": "2.5\n", "01.1.2": "ratio 0.667\n"})
    both = ["00", "01"]
    assert solutions.problems(text, both) == []
    assert solutions.problems(text.replace("not 4.", "not 16."), both) == [
        "not printed by the snippets: 00.1: 16 in 'The value is 1.0, not 16.'"]
    planted = text.replace("The value is 1.0", "The value is 1.03")
    assert solutions.problems(planted, both) == ["not printed by the snippets: 00.1: 1.03 in 'The value is 1.03, not 4.'"]
    missing = solutions.with_outputs(TEXT, {"00.1": "1.0\n"})
    assert any(p.startswith("01.1: no output block") for p in solutions.problems(missing, both))


def test_the_committed_solutions_pass_the_check():
    """Every notebook whose outputs were regenerated (its line in the about block) passes; the file
    names the others, and they are exactly the ones not regenerated."""
    text = solutions.SOLUTIONS.read_text()
    done = solutions.regenerated(text)
    assert {"00", "01"} <= set(done)
    assert solutions.problems(text) == []
    waiting = sorted({s.id[:2] for s in solutions.snippets(text)} - set(done))
    assert ("*Regenerated so far:" in text) == bool(waiting), "the file says which solutions are not regenerated"
    if waiting:
        note = text[text.index("*Regenerated so far:"):].split("\n\n")[0]
        assert all(n in note.split(".")[0] for n in done), note


def test_the_check_only_passes_notebooks_it_covers():
    text = solutions.with_outputs(TEXT, {"00.1": "1.0\n"})
    text = text.replace("(none yet)\n", "- 00: made at code x\n- 01: made at code x\n")
    assert solutions.regenerated(text) == ["00", "01"]
    assert any(p.startswith("01.0: no output block") for p in solutions.problems(text))
    assert solutions.problems(text, ["00"]) == []


def test_rerunning_one_notebooks_snippets_prints_the_committed_outputs(tmp_path, monkeypatch):
    """The command, run again for notebook 01 (whose snippets are cheap), prints what the file
    holds: every word equal, every number within the notebook's measured tolerance (docs/spread.json)."""
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(tmp_path / "figures"))
    copy = tmp_path / "SOLUTIONS.md"
    copy.write_text(solutions.SOLUTIONS.read_text())
    assert solutions.run(["01"], path=copy, say=lambda *_: None) == []
    committed = {s.id: s.output for s in solutions.snippets(solutions.SOLUTIONS.read_text()) if s.id.startswith("01")}
    rerun = {s.id: s.output for s in solutions.snippets(copy.read_text()) if s.id.startswith("01")}
    assert set(committed) == set(rerun) and len(committed) >= 4
    record = reproduce.load_record()
    rel = record["notebooks"]["01"]["summary"]["largest_relative_spread"]
    for sid in committed:
        ref_skeleton, ref_numbers = reproduce.split(committed[sid])
        new_skeleton, new_numbers = reproduce.split(rerun[sid])
        assert new_skeleton == ref_skeleton, sid
        for a, b in zip(ref_numbers, new_numbers):
            allowed = max(reproduce.TOLERANCE_FACTOR * rel * max(abs(a.value), abs(b.value)), a.unit, b.unit)
            assert abs(a.value - b.value) <= allowed, f"{sid}: {a.text} -> {b.text} (allowed {allowed:.3g})"
