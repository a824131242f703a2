"""dlgn_lib.files: atomic writes that leave the old file whole, refusals as one line (README "Reliability")."""
import os
import subprocess
import sys

import pytest

from dlgn_lib import files


def _listing(folder):
    return sorted(p.name for p in folder.iterdir() if p.name != ".filler")


def test_a_write_onto_a_full_disk_keeps_the_old_file_byte_for_byte_and_leaves_no_temporary(full_folder):
    record = full_folder / "record.json"
    record.write_text('{"kept": true}\n')
    full_folder.fill()
    with pytest.raises(files.Refusal, match=r"cannot write .*record\.json: No space left on device; it is unchanged"):
        files.write_atomic(record, '{"new": "x"}' * 20000)
    assert record.read_text() == '{"kept": true}\n'
    assert _listing(full_folder) == ["record.json"]


def test_ctrl_c_in_the_middle_of_a_write_leaves_the_old_file_and_no_temporary(tmp_path):
    record = tmp_path / "r.txt"
    record.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with files.temporary_path(record) as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt
    assert record.read_text() == "old" and _listing(tmp_path) == ["r.txt"]


def test_a_write_replaces_the_file_and_keeps_its_mode(tmp_path):
    record = tmp_path / "r.txt"
    record.write_text("old")
    os.chmod(record, 0o640)
    files.write_atomic(record, "new ✓")
    assert record.read_text() == "new ✓" and record.stat().st_mode & 0o777 == 0o640
    assert _listing(tmp_path) == ["r.txt"]


def test_paths_that_are_files_or_folders_where_the_other_is_wanted_are_refused(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(files.Refusal, match="afile is a file, not a folder"):
        files.write_atomic(tmp_path / "afile" / "x.json", "{}")
    with pytest.raises(files.Refusal, match="is a folder, not a file"):
        files.write_atomic(tmp_path, "{}")
    with pytest.raises(files.Refusal, match="is a file, not a folder"):
        files.writable_folder(tmp_path / "afile")


@pytest.mark.parametrize("text, kind, message", [
    (None, dict, r"is missing \(the spread record\)"), ("{oops", dict, r"is not valid JSON \(the spread record\): Expecting property name"),
    ("[1]", dict, r"holds a JSON list, not a dict \(the spread record\)"),
    ('{"a": 1}', list, r"holds a JSON dict, not a list \(the spread record\)")])
def test_json_records_are_refused_naming_the_file_and_the_reason(tmp_path, text, kind, message):
    path = tmp_path / "spread.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(files.Refusal, match=rf"spread\.json {message}"):
        files.read_json(path, kind, "the spread record")


@pytest.mark.parametrize("raw", ["²", "0", "-1", "1.5", "abc", "٣"])
def test_integer_variables_accept_ascii_digits_only_and_name_the_variable(raw):
    with pytest.raises(files.Refusal, match=r"DLGN_X=.* is not allowed; use a whole number ≥ 1 \(default 1\)"):
        files.env_int("DLGN_X", 1, environ={"DLGN_X": raw})
    assert files.env_int("DLGN_X", 1, environ={"DLGN_X": " 12 "}) == 12
    assert files.env_int("DLGN_X", 3, environ={}) == 3


def test_float_and_choice_variables_name_the_variable_and_the_allowed_values():
    with pytest.raises(files.Refusal, match=r"DLGN_HEARTBEAT_S='abc' is not allowed; use a number ≥ 0"):
        files.env_float("DLGN_HEARTBEAT_S", 30.0, environ={"DLGN_HEARTBEAT_S": "abc"})
    assert files.env_float("DLGN_HEARTBEAT_S", 30.0, environ={"DLGN_HEARTBEAT_S": "0.5"}) == 0.5
    with pytest.raises(files.Refusal, match="DLGN_NUMERICS='bogus' is not allowed; use one of pinned, native"):
        files.env_choice("DLGN_NUMERICS", "pinned", ("pinned", "native"), environ={"DLGN_NUMERICS": "bogus"})


def test_a_command_answers_refusals_oserrors_and_ctrl_c_with_one_line(capsys):
    def main(argv=None):
        raise {"refuse": files.Refusal("x.json is missing"), "os": FileNotFoundError(2, "No such file", "/nowhere/y"),
               "ctrl-c": KeyboardInterrupt("01 finished; rerun with --only 03")}[argv[0]]
    main.__module__ = "dlgn_lib.record.demo"
    wrapped = files.command(main)
    assert wrapped(["refuse"]) == 1
    assert capsys.readouterr().err == "python -m dlgn_lib.record.demo: error: x.json is missing\n"
    assert wrapped(["os"]) == 1
    assert capsys.readouterr().err == "python -m dlgn_lib.record.demo: error: /nowhere/y: No such file\n"
    assert wrapped(["ctrl-c"]) == 130
    assert capsys.readouterr().err == "python -m dlgn_lib.record.demo: interrupted: 01 finished; rerun with --only 03\n"


def test_every_command_line_of_the_package_is_wrapped_by_the_shared_helper():
    import ast
    from pathlib import Path
    root = Path(files.__file__).parent
    unwrapped = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "main":
                names = {getattr(d, "attr", getattr(d, "id", None)) for d in node.decorator_list}
                if "command" not in names:
                    unwrapped.append(str(path.relative_to(root.parent)))
    assert unwrapped == [], f"main() not wrapped by dlgn_lib.files.command: {unwrapped}"


def test_a_command_run_with_python_dash_m_names_its_module_not_main(tmp_path):
    done = subprocess.run([sys.executable, "-m", "dlgn_lib.record.report", "record", str(tmp_path / "missing")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr == f"python -m dlgn_lib.record.report: error: {tmp_path / 'missing'} does not exist\n"


def test_environment_sets_variables_for_a_block_and_restores_them(monkeypatch):
    monkeypatch.setenv("DLGN_T_SET", "before")
    monkeypatch.delenv("DLGN_T_UNSET", raising=False)
    with pytest.raises(RuntimeError):
        with files.environment(DLGN_T_SET="inside", DLGN_T_UNSET="new"):
            assert os.environ["DLGN_T_SET"] == "inside" and os.environ["DLGN_T_UNSET"] == "new"
            raise RuntimeError
    assert os.environ["DLGN_T_SET"] == "before" and "DLGN_T_UNSET" not in os.environ
