"""The course guide's 90-minute class, walked as a teacher and a class machine would:
``python -m dlgn_lib.record.classwalk [--only 00 01 03 05] [--workdir DIR] [--workers N] [--record]``.

Each step is timed, run as a child process with ``DLGN_RUNS_DIR`` and ``DLGN_FIGURES_DIR`` under the
work folder (default: a new folder under the build folder). The teacher runs the class path
(``slides.CLASS_PATH``) into an empty run cache, exports it (``runs export --profile quick``) and
makes the book and the slides; a class machine imports the bundle into a second empty cache and
runs the class path again, which must train nothing and leave the imported runs unchanged (the tables
it had to measure are counted). A ``--workdir`` that is a file or not empty, an unknown notebook and
slides that cannot get their npm packages are refused before any step. ``--record`` writes
``docs/class_walk.json``, from which the course guide's table is generated (``report write``).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import nbformat

from .. import files, locations
from ..files import Refusal, command

__all__ = ["main"]

RECORD = locations.REPO_ROOT / "docs" / "class_walk.json"
#: A run-cache summary line of ``runs.get_or_train_many`` ("24 runs: 20 loaded from the cache, 4 trained …").
_SUMMARY = re.compile(r"\b(\d+) runs?: (\d+) loaded from the cache, (\d+) trained\b")
_LOADED = re.compile(r"^loaded run ", re.M)
_TRAINED = re.compile(r"^trained ", re.M)   # "training …" announces the run that "trained …" ends


class WalkFailed(Refusal):
    """A step of the walk failed; the message names the step and ends with its output's tail."""


def cache_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under a run cache (none if it is missing): relative path -> (size, modification time in ns)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def cache_counts(nb) -> dict[str, int]:
    """Runs a notebook reported loaded and trained, from its printed summary lines ("N runs: a loaded
    from the cache, b trained") and single-run lines ("loaded run …", "trained …")."""
    text = "\n".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                     for out in cell.get("outputs", []) if out.get("output_type") == "stream")
    summaries = [(int(m[2]), int(m[3])) for m in _SUMMARY.finditer(text)]
    return {"loaded": sum(a for a, _ in summaries) + len(_LOADED.findall(text)),
            "trained": sum(b for _, b in summaries) + len(_TRAINED.findall(text))}


def _run(name: str, args: list[str], env: dict[str, str], say) -> float:
    """Run one step's child process; its seconds, or WalkFailed naming the step."""
    say(f"{name}: {' '.join(args)}")
    start = time.perf_counter()
    try:
        proc = subprocess.run(args, env=env, cwd=locations.REPO_ROOT, capture_output=True, text=True)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"step {name!r} was stopped after {time.perf_counter() - start:.0f} s") from None
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        output = proc.stdout + proc.stderr
        raise WalkFailed(f"step {name!r} failed (exit {proc.returncode}) after {seconds:.0f} s:\n{output[-3000:]}")
    say(f"  {seconds:.0f} s")
    return seconds


def walk(only=None, workdir: Path | None = None, workers: int | None = None, say=print) -> dict:
    """Walk the class path (see the module docstring); returns the record (not written)."""
    from . import slides
    from .series import select_notebooks
    try:
        notebooks = [locations.notebook_id(p) for p in select_notebooks(locations.find_notebooks(),
                                                                         only or slides.CLASS_PATH)]
    except ValueError as exc:
        raise Refusal(str(exc)) from None
    if workdir is not None:
        workdir = files.writable_folder(workdir)
        if any(workdir.iterdir()):
            raise Refusal(f"--workdir {locations.display_path(workdir)} is not empty: the walk needs empty run caches")
    for package in slides.VENDOR:   # whether npm's registry answers is left to step 3: probing it can take a minute
        name, version = package.rsplit("@", 1)
        tarball = locations.build_dir() / "vendor" / f"{name.replace('/', '-')}-{version}.tgz"
        if not tarball.is_file() and shutil.which("npm") is None:
            raise Refusal(f"the slides (step 3) need {locations.display_path(tarball)} and npm is not installed to "
                          f"fetch {package}: install Node.js/npm or copy the tarball there; nothing was run")
    made = workdir is None
    workdir = workdir or Path(tempfile.mkdtemp(prefix="class-walk-", dir=files.writable_folder(locations.build_dir())))
    try:
        return _walk(notebooks, workdir, workers, say)
    except KeyboardInterrupt as exc:
        if made:
            shutil.rmtree(workdir, ignore_errors=True)
        kept = "removed" if made else "kept; empty it"
        raise KeyboardInterrupt(f"{exc}; the work folder {locations.display_path(workdir)} is {kept} and "
                                "the walk can run again") from None


def _walk(notebooks: list[str], workdir: Path, workers: int | None, say) -> dict:
    """The five steps in ``workdir`` (checked and empty); the record."""
    from .. import numerics
    from . import bench, provenance
    from .executed import seconds_of
    teacher, klass, bundle = workdir / "teacher-runs", workdir / "class-runs", workdir / "class-runs.tar.gz"
    base = {**os.environ, "DLGN_FIGURES_DIR": str(workdir / "figures")}   # each step sets its DLGN_RUNS_DIR
    py = sys.executable
    series = [py, "-m", "dlgn_lib.record.series", "run", "--only", *notebooks]
    series += ["--workers", str(workers)] if workers else []
    run_series = "python -m dlgn_lib.record.series run --only " + " ".join(notebooks)
    steps = []   # (name, command, seconds, what it did)
    load_start = bench.load_average()
    checkout = checkout_state()

    env = {**base, "DLGN_RUNS_DIR": str(teacher)}
    seconds = _run("teacher, train", series + ["--output", str(workdir / "teacher-notebooks")], env, say)
    taught = [cache_counts(nb) for nb in _executed(workdir / "teacher-notebooks", notebooks).values()]
    steps.append(("teacher: run the class path into an empty run cache (trains its runs)", run_series, seconds,
                  f"{sum(c['trained'] for c in taught)} runs trained, {sum(c['loaded'] for c in taught)} loaded"))
    seconds = _run("teacher, export", [py, "-m", "dlgn_lib.runs", "export", str(bundle), "--profile", "quick"], env,
                   say)
    with tarfile.open(bundle, "r:gz") as tar:
        about = json.load(tar.extractfile("bundle.json"))
    steps.append(("teacher: export the runs as one bundle", "python -m dlgn_lib.runs export class-runs.tar.gz "
                  "--profile quick", seconds, f"{len(about['entries'])} entries and {len(about['analyses'])} "
                  f"analyses, {bundle.stat().st_size / 1e6:.1f} MB, {stat.filemode(bundle.stat().st_mode)}"))
    seconds = _run("teacher, book", [py, "docs/book/build.py", str(workdir / "book")], env, say)
    steps.append(("teacher: build the book", "make book", seconds, ""))
    seconds = _run("teacher, slides", [py, "-m", "dlgn_lib.record.slides", "--out", str(workdir / "slides")], env, say)
    made = sorted((workdir / "slides").glob("*.slides.html"))
    slides = sum(page.read_text().count("<section") for page in made)
    steps.append(("teacher: make the slides", "make slides", seconds,
                  f"{len(made)} deck{'s' * (len(made) != 1)}, {slides} slides"))

    env = {**base, "DLGN_RUNS_DIR": str(klass)}
    seconds = _run("class, import", [py, "-m", "dlgn_lib.runs", "import", str(bundle)], env, say)
    before, tables = _split(cache_state(klass))
    steps.append(("class machine: import the bundle into an empty run cache",
                  "python -m dlgn_lib.runs import class-runs.tar.gz", seconds,
                  f"{len(before)} run files, {len(tables)} analyses"))
    seconds = _run("class, run", series + ["--output", str(workdir / "class-notebooks")], env, say)
    executed = _executed(workdir / "class-notebooks", notebooks)
    counts = {nb: cache_counts(executed[nb]) for nb in notebooks}
    after, measured = _split(cache_state(klass))
    if after != before or any(c["trained"] for c in counts.values()):
        changed = sorted(set(after.items()) ^ set(before.items()))
        raise WalkFailed("step 'class, run' trained or wrote runs although the bundle holds them: "
                         f"{ {nb: c for nb, c in counts.items() if c['trained']} }; cache files changed: {changed[:5]}")
    steps.append(("class machine: run the class path from the imported cache", run_series, seconds,
                  f"{sum(c['loaded'] for c in counts.values())} runs loaded, 0 trained; the cache's "
                  f"{len(after)} run files unchanged; {len(set(measured) - set(tables))} analyses added"))
    info = provenance.machine()
    return {
        "date": datetime.date.today().isoformat(),
        "code_version": provenance.code_version(),
        "checkout": checkout,
        "machine": provenance.machine_label(info),
        "cores": info["cores"],
        "numerics": numerics.status()["numerics"],
        "load_average": {"start": load_start, "end": bench.load_average()},
        "workers": workers,
        "notebooks": notebooks,
        "steps": [{"name": n, "command": c, "seconds": round(s, 1), "detail": d} for n, c, s, d in steps],
        "class_notebook_seconds": {nb: round(seconds_of(executed[nb]), 1) for nb in notebooks},
    }


def _executed(folder: Path, notebooks: list[str]) -> dict:
    """The executed notebooks in ``folder`` by id."""
    return {nb: nbformat.read(next(folder.glob(f"{nb}_*.ipynb")), as_version=4) for nb in notebooks}


def _split(state: dict) -> tuple[dict, dict]:
    """A cache's files (``cache_state``): those of its runs, and those of its analyses folder."""
    from ..runs import ANALYSIS_FOLDER
    tables = {path: v for path, v in state.items() if path.startswith(ANALYSIS_FOLDER + "/")}
    return {path: v for path, v in state.items() if path not in tables}, tables


def checkout_state() -> str:
    """Whether the walk ran in a clean checkout (``git status --porcelain`` prints nothing for
    tracked or unignored files) or in one with local changes."""
    try:
        proc = subprocess.run(["git", "status", "--porcelain"], cwd=locations.REPO_ROOT,
                              capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    changed = [line for line in proc.stdout.splitlines() if line.strip()]
    return "a clean checkout" if not changed else f"a checkout with {len(changed)} changed or new file(s)"


def load_record(path: Path = RECORD) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def table(record: dict | None) -> str:
    """The course guide's table of the walk, from the record."""
    if not record:
        return "No walk recorded yet: run `python -m dlgn_lib.record.classwalk --record`."
    rows = ["| step | command | seconds | what it did |", "|---|---|---|---|"]
    rows += [f"| {s['name']} | `{s['command']}` | {s['seconds']:,.0f} | {s['detail'] or '—'} |"
             for s in record["steps"]]
    each = ", ".join(f"{nb} {s:,.0f} s" for nb, s in record["class_notebook_seconds"].items())
    workers = f"{record['workers']} worker(s)" if record.get("workers") else "the runner's default workers"
    empty, imported = (next(s["seconds"] for s in record["steps"] if s["name"].startswith(who))
                       for who in ("teacher: run", "class machine: run"))
    return "\n".join(rows + [
        "",
        f"From the imported bundle the class path ran in {imported / empty:.0%} of its time from an empty run cache "
        f"({imported:,.0f} s against {empty:,.0f} s). "
        f"On the class machine each notebook took (its cells' time): {each}. Walked on {record['date']} in "
        f"{record.get('checkout', 'a checkout')} at code {record['code_version']}, {record['machine']}, "
        f"{record['cores']} cores, {record['numerics']} code path, "
        f"{workers}; load average (1, 5, 15 min) {record['load_average']['start']} at the start, "
        f"{record['load_average']['end']} at the end."])


@command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.classwalk`` (the module's docstring says what it does)."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.classwalk", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NN", help="notebook ids (default: the class path, 00 01 03 05)")
    parser.add_argument("--workdir", type=Path, help="an empty or new folder for the caches, bundle, book and slides")
    parser.add_argument("--workers", type=int, help="worker processes of the series runner (default: its own)")
    parser.add_argument("--record", action="store_true", help=f"write {locations.display_path(RECORD)}")
    args = parser.parse_args(argv)
    record = walk(args.only, args.workdir, args.workers)
    print(table(record))
    if args.record:
        files.write_atomic(RECORD, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(f"recorded in {locations.display_path(RECORD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
