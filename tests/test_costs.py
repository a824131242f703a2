"""The cost ledger: each stretch of time goes to the innermost kind, and the totals reach a file at exit."""
import json
import subprocess
import sys

import pytest

from dlgn_lib import costs


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only when told, and a fresh ledger."""
    now = [100.0]
    monkeypatch.setattr(costs.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(costs, "_seconds", dict.fromkeys(costs.KINDS, 0.0))
    monkeypatch.setattr(costs, "_stack", [])
    return now


def test_inner_blocks_are_counted_once_as_their_own_kind(clock):
    with costs.spent("analysis"):
        clock[0] += 2            # analysis
        with costs.spent("training"):
            clock[0] += 5        # training inside the analysis
            with costs.spent("io"):
                clock[0] += 1    # saving the run
            clock[0] += 3        # training again
        clock[0] += 0.5          # analysis again
    clock[0] += 10               # outside: counted nowhere
    assert costs._seconds == {"analysis": 2.5, "training": 8.0, "io": 1.0}


def test_an_error_inside_still_closes_the_block(clock):
    with pytest.raises(RuntimeError):
        with costs.spent("io"):
            clock[0] += 4
            raise RuntimeError("disk")
    assert costs._seconds["io"] == 4 and costs._stack == []


def test_as_a_decorator_and_unknown_kinds(clock):
    @costs.spent("training")
    def train():
        clock[0] += 7
    train()
    train()
    assert costs._seconds["training"] == 14
    with pytest.raises(ValueError, match="cost kind 'plotting'"):
        with costs.spent("plotting"):
            pass


def test_totals_reach_the_named_file_when_the_process_ends(tmp_path):
    out = tmp_path / "costs.json"
    code = "import time; from dlgn_lib import costs\nwith costs.spent('io'):\n    time.sleep(0.2)\n"
    subprocess.run([sys.executable, "-c", code], check=True, env={**__import__("os").environ,
                                                                    "DLGN_COSTS_FILE": str(out)})
    got = json.loads(out.read_text())
    assert set(got) == {*costs.KINDS, "wall"}
    assert 0.2 <= got["io"] <= got["wall"] and got["training"] == 0
