"""Run bundles carry the analysis cache (dlgn_lib.runs.cached_table): a table measured on the teacher's runs is
served on the class machine from the imported bundle without being measured again, and an analysis member
that is altered, misnamed or oversized refuses the bundle whole with nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dlgn_lib import runs
from dlgn_lib.record import bundle
from fingerprint import tree
from run_cache_helpers import bundle_members, cache_dir, small_config, write_tar  # noqa: F401  (cache_dir: an autouse fixture)


def _weight_norms(trained) -> pd.DataFrame:
    """A measurement of the runs: the norm of each gating layer at each snapshot."""
    rows = [{"seed": run.config.seed, "epoch": epoch, "layer": name, "norm": float(state[name].norm())}
            for run in trained for epoch, state in sorted(run.snapshots.items())
            for name in state if name.startswith("gating.")]
    return pd.DataFrame(rows)


def _measured(trained, calls: list) -> pd.DataFrame:
    def compute():
        calls.append(1)
        return _weight_norms(trained)
    return runs.cached_table("tests.weight_norms", {"layers": "gating"}, trained, compute)


@pytest.fixture
def teacher(cache_dir, monkeypatch, tmp_path):
    """A cache with two runs and one table measured on them; its bundle at ``tmp_path/course.tar.gz``."""
    monkeypatch.delenv("DLGN_ANALYSIS_CACHE", raising=False)
    trained = [runs.get_or_train(small_config(seed), verbose=False) for seed in (0, 1)]
    calls = []
    _measured(trained, calls)
    assert calls == [1] and len(runs.analysis_entries()) == 1
    file = tmp_path / "course.tar.gz"
    bundle.export(file)
    return trained, file


_members, _write_tar = bundle_members, write_tar


def _analysis(members: dict[str, bytes]) -> str:
    (name,) = [n for n in members if n.startswith("analyses/")]
    return name


def test_a_table_is_served_from_the_imported_bundle_without_measuring_again(teacher, tmp_path, monkeypatch, capsys):
    trained, file = teacher
    members = _members(file)
    assert json.loads(members["bundle.json"])["analyses"] == [_analysis(members).split("/")[1]]
    into = tmp_path / "class-cache"
    report = bundle.import_bundle(file, into)
    assert len(report.imported) == 2 and report.analyses == {"imported": [_analysis(members).split("/")[1]]}
    assert "imported 1 analyses" in report.text()

    monkeypatch.setenv("DLGN_RUNS_DIR", str(into))      # the class machine: its runs and tables come from the bundle
    loaded = [runs.load(run.config, into) for run in trained]
    calls = []
    served = _measured(loaded, calls)
    assert calls == [], "the table was measured again instead of being served from the bundle"
    pd.testing.assert_frame_equal(served, _weight_norms(loaded), check_exact=True)   # measured here, independently

    again = bundle.import_bundle(file, into)                # a valid local analysis is kept
    assert again.analyses == {"present": [_analysis(members).split("/")[1]]}
    local = runs.analysis_entries(into)[0]
    local.write_text("{damaged")
    assert bundle.import_bundle(file, into).analyses == {"replaced": [local.name]}
    assert runs.check_analysis(local)["key"][:32] == local.stem.split("-")[1]
    assert bundle.main(["export", str(tmp_path / "again.tar.gz")]) == 0
    assert "wrote 2 entries and 1 analyses" in capsys.readouterr().out


def test_an_analysis_of_other_library_code_is_left_out(teacher, tmp_path, monkeypatch):
    _, file = teacher
    monkeypatch.setattr(runs, "_CODE_HASH", "f" * 64)       # the class machine runs other code
    into = tmp_path / "class-cache"
    report = bundle.import_bundle(file, into)
    assert len(report.imported) == 2 and list(report.analyses) == ["other code"]
    assert "1 of other library code left out" in report.text()
    assert not (into / runs.ANALYSIS_FOLDER).exists() or not list((into / runs.ANALYSIS_FOLDER).iterdir())


def _refused(file: Path, into: Path, match: str) -> None:
    before = tree(into)
    with pytest.raises(bundle.BundleError, match=match):
        bundle.import_bundle(file, into)
    assert tree(into) == before, "a refused bundle writes nothing"
    assert not [p for p in into.iterdir() if p.name.startswith(".tmp")]


def test_a_tampered_misnamed_or_oversized_analysis_refuses_the_bundle(teacher, tmp_path, monkeypatch):
    _, file = teacher
    members = _members(file)
    name = _analysis(members)
    into = tmp_path / "class-cache"
    into.mkdir()

    entry = json.loads(members[name])
    norms = next(c for c in entry["table"]["columns"] if c["name"] == "norm")
    norms["values"][0] += 1.0                                # the table changed, its SHA-256 not
    _write_tar(tmp_path / "tampered.tar.gz", {**members, name: json.dumps(entry).encode()})
    _refused(tmp_path / "tampered.tar.gz", into, "does not match its checksum.*refused whole, nothing was imported")

    other = f"analyses/{name.split('/')[1][:17]}{'0' * 32}.json"   # a valid name, not this entry's key
    _write_tar(tmp_path / "renamed.tar.gz", {**{k: v for k, v in members.items() if k != name}, other: members[name]})
    _refused(tmp_path / "renamed.tar.gz", into, "name does not match its code and key")

    for stranger in ("analyses/notes.json", f"{name}.sh", "analyses/../evil.json", f"analyses/x/{name[9:]}"):
        _write_tar(tmp_path / "stranger.tar.gz", {**members, stranger: members[name]})
        _refused(tmp_path / "stranger.tar.gz", into, "not part of a run bundle|leaves the bundle's folder")

    _write_tar(tmp_path / "not-json.tar.gz", {**members, name: b"\x80not json"})
    _refused(tmp_path / "not-json.tar.gz", into, "not a valid analysis entry")

    monkeypatch.setattr(runs, "MAX_ANALYSIS_BYTES", len(members[name]) - 1)
    _refused(file, into, f"member {name} claims {len(members[name]):,} bytes, over the bound")
