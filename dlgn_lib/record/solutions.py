"""The worked solutions' numbers, regenerated: ``python -m dlgn_lib.record.solutions run [--only NN …]``.

``run`` executes each notebook (``quick``) in a fresh kernel with the ```` ```python ```` snippets of
its solutions in ``teaching/SOLUTIONS.md`` appended as cells, and writes what each printed into its
``<!-- output:ID -->`` block (ID ``NN.k``, ``NN.0`` for set-up, ``NN.k.2`` for a second snippet),
and the notebook's line in the ``about`` block. ``check`` (no execution): every snippet has its block,
and every number a solution's prose quotes is one its snippets printed or its code or heading sets.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .. import locations
from ..files import Refusal, command, environment, write_atomic

__all__ = ["main"]

SOLUTIONS = locations.REPO_ROOT / "teaching" / "SOLUTIONS.md"
NOTEBOOKS_DIR = locations.REPO_ROOT / "notebooks"

_SECTION = re.compile(r"^## (\d{2}) · .*$", re.M)
_EXERCISE = re.compile(r"^### (\d+)\. .*$", re.M)
_SNIPPET = re.compile(r"^```python\n(.*?)^```\n", re.M | re.S)
_BLOCK = re.compile(r"\n?<!-- output:([\w.]+) -->\n.*?<!-- /output:\1 -->\n", re.S)
_OUTPUT = re.compile(r"\n?<!-- output:([\w.]+) -->\n```text\n(.*?)```\n<!-- /output:\1 -->\n", re.S)
#: A number as prose quotes one: digits with optional thousands commas, decimals and sign.
_NUMBER = re.compile(r"(?<![\w.])[−-]?\d[\d,]*(?:\.\d+)?(?:e[−-]?\d+)?")
#: The markers of the ``about`` block; ``run`` refuses a file without exactly one such block.
_ABOUT = ("<!-- output:about -->", "<!-- /output:about -->")
#: The run cache's own lines (loaded / training / trained): they say what the cache held, not what
#: the solution computes, so the output blocks leave them out.
_CACHE_LINE = re.compile(r"^(?:loaded run .*|training .* for \d+ epochs|trained .* in [\d.]+ s"
                         r"|\d+ runs?: \d+ loaded from the cache, \d+ trained(?: in [\d.]+ s)?)$")


@dataclass
class Snippet:
    id: str            # "00.1", "05.0", "02.2.2"
    code: str
    end: int           # offset in the file just after the snippet's closing fence
    output: str | None  # the text in its output block, None when it has none


@dataclass
class Exercise:
    notebook: str
    number: int        # 0: the notebook's set-up text before its first exercise
    heading: str
    text: str          # the exercise's whole text (heading to the next one)
    snippets: list[Snippet] = field(default_factory=list)


def parse(text: str) -> list[Exercise]:
    """The exercises of a SOLUTIONS.md text, with their snippets and output blocks, in file order."""
    sections = list(_SECTION.finditer(text))
    exercises = []
    for section, stop in zip(sections, [s.start() for s in sections[1:]] + [len(text)]):
        starts = [(0, section.group(0), section.end())] + [
            (int(h.group(1)), h.group(0), h.start()) for h in _EXERCISE.finditer(text, section.end(), stop)]
        for (number, heading, start), end in zip(starts, [s[2] for s in starts[1:]] + [stop]):
            exercise = Exercise(section.group(1), number, heading, text[start:end])
            for k, m in enumerate(_SNIPPET.finditer(text, start, end)):
                sid = f"{exercise.notebook}.{number}" + (f".{k + 1}" if k else "")
                block = _OUTPUT.match(text, m.end())
                exercise.snippets.append(Snippet(sid, m.group(1), m.end(),
                                                 block.group(2) if block and block.group(1) == sid else None))
            exercises.append(exercise)
    return exercises


def snippets(text: str) -> list[Snippet]:
    return [s for e in parse(text) for s in e.snippets]


def with_outputs(text: str, printed: dict[str, str]) -> str:
    """``text`` with the output block of every snippet in ``printed`` written (added or replaced)."""
    for snippet in sorted(snippets(text), key=lambda s: s.end, reverse=True):
        if snippet.id in printed:
            old = _BLOCK.match(text, snippet.end)
            stop = old.end() if old and old.group(1) == snippet.id else snippet.end
            body = printed[snippet.id] or "(prints nothing)"
            body += "" if body.endswith("\n") else "\n"
            block = f"\n<!-- output:{snippet.id} -->\n```text\n{body}```\n<!-- /output:{snippet.id} -->\n"
            text = text[:snippet.end] + block + text[stop:]
    return text


# --- check: no execution ----------------------------------------------------------------------

def _numbers(text: str) -> set[str]:
    return {m.group(0).replace("−", "-").replace(",", "").lstrip("-") for m in _NUMBER.finditer(text)}


def regenerated(text: str) -> list[str]:
    """The notebooks whose outputs ``run`` has written (their lines in the ``about`` block)."""
    body = re.search(r"<!-- output:about -->\n(.*?)<!-- /output:about -->", text, re.S)
    return sorted(m.group(1) for m in re.finditer(r"^- (\d{2}): ", body.group(1) if body else "", re.M))


def problems(text: str, notebooks: list[str] | None = None) -> list[str]:
    """What ``check`` reports for ``notebooks`` (default: those ``run`` has regenerated): snippets
    without an output block, and each number (of two digits or more) a solution's prose quotes that
    its snippets did not print, nor its code or heading set."""
    notebooks = regenerated(text) if notebooks is None else notebooks
    found = [f"{s.id}: no output block (run `python -m dlgn_lib.record.solutions run`)" for s in snippets(text)
             if s.output is None and s.id[:2] in notebooks]
    for exercise in parse(text):
        if not exercise.snippets or exercise.notebook not in notebooks:
            continue
        known = _numbers(exercise.heading) | {n for s in exercise.snippets for n in _numbers(s.code + (s.output or ""))}
        prose = _BLOCK.sub("\n", exercise.text.replace(exercise.heading, "", 1))
        for line in re.sub(r"^```.*?^```\n", "", prose, flags=re.M | re.S).splitlines():
            found += [f"not printed by the snippets: {exercise.notebook}.{exercise.number}: {number} in "
                      f"{line.strip()[:100]!r}" for number in sorted(_numbers(line) - known) if len(number) > 1]
    return found


# --- run: execute the notebooks with their snippets --------------------------------------------

class SnippetFailed(RuntimeError):
    pass


def run_notebook(notebook: Path, items: list[Snippet]) -> dict[str, str]:
    """Execute ``notebook`` with ``items`` appended as cells (figures to a scratch folder); what each printed.
    Raises :class:`SnippetFailed` naming the cell that failed, ``KeyboardInterrupt`` on Ctrl-C."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from .series import CURRENT_INTERPRETER_KERNEL, _KernelManager
    nb = nbformat.read(notebook, as_version=4)
    first = len(nb.cells)
    nb.cells += [nbformat.v4.new_code_cell(s.code, metadata={"solution": s.id}) for s in items]
    failed = None
    with (tempfile.TemporaryDirectory(prefix="dlgn-solutions-") as scratch,
          open(Path(scratch) / "kernel.log", "w+") as log):
        client = NotebookClient(nb, kernel_name=CURRENT_INTERPRETER_KERNEL, kernel_manager_class=_KernelManager,
                                resources={"metadata": {"path": str(notebook.parent)}}, timeout=None)
        try:
            with environment(DLGN_FIGURES_DIR=scratch):   # the kernel inherits it
                client.execute(stderr=log)
        except Exception as exc:
            failed = exc
        # nbclient's own Ctrl-C handler shuts the kernel down, fails in its own ways ("Kernel died")
        # and leaves this behind; the kernel's complaints about being shut down are not shown.
        if hasattr(client, "_async_cleanup_kernel_future"):
            raise KeyboardInterrupt
        log.seek(0)
        sys.stderr.write(log.read())
    if isinstance(failed, CellExecutionError):
        where = next((c.metadata.get("solution", f"notebook cell {i}") for i, c in enumerate(nb.cells)
                      if any(o.get("output_type") == "error" for o in c.get("outputs", []))), "a cell")
        last = re.sub(r"\x1b\[[0-9;]*m", "", str(failed)).strip().splitlines()[-1]   # without terminal colours
        raise SnippetFailed(f"{notebook.name}: {where} failed: {last[:300]}") from None
    if failed is not None:
        raise failed
    return {cell.metadata["solution"]: _printed_text(cell) for cell in nb.cells[first:]}


def _printed_text(cell) -> str:
    """A cell's stdout and the plain text of its result, in order, without the run cache's lines."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            parts.append(output["text"])
        elif output.get("output_type") == "execute_result" and "text/plain" in output.get("data", {}):
            parts.append(output["data"]["text/plain"] + "\n")
    return "".join(line for line in "".join(parts).splitlines(keepends=True)
                   if not _CACHE_LINE.match(line.rstrip("\n")))


def _with_about(text: str, nb_id: str) -> str:
    """``text`` with notebook ``nb_id``'s line of the ``about`` block written: code version, date,
    machine and code path of its outputs."""
    from .. import numerics
    from . import provenance
    head, rest = text.split(_ABOUT[0])
    body, tail = rest.split(_ABOUT[1])
    lines = {line[2:4]: line for line in body.strip().splitlines() if line.startswith("- ")}
    lines[nb_id] = (f"- {nb_id}: made at code {provenance.code_version()} on {time.strftime('%Y-%m-%d')}, "
                    f"{provenance.machine_label()}, {numerics.mode()} code path")
    return f"{head}{_ABOUT[0]}\n" + "\n".join(lines[k] for k in sorted(lines)) + f"\n{_ABOUT[1]}{tail}"


def run(only: list[str] | None = None, path: Path = SOLUTIONS, notebooks_dir: Path = NOTEBOOKS_DIR,
        say=print) -> list[str]:
    """Regenerate the output blocks (of the notebooks in ``only``, or all), the file rewritten
    atomically after each notebook; returns the failures."""
    text = _read(path)
    if any(text.count(marker) != 1 for marker in _ABOUT):
        raise Refusal(f"{locations.display_path(path)}: needs exactly one {' … '.join(_ABOUT)} block; nothing written")
    by_notebook = defaultdict(list)
    for snippet in snippets(text):
        by_notebook[snippet.id[:2]].append(snippet)
    if unknown := sorted(set(only or ()) - set(by_notebook)):
        raise Refusal(f"--only: no solutions for notebook(s) {', '.join(unknown)} in {locations.display_path(path)}; "
                      f"available: {', '.join(sorted(by_notebook))}")
    notebooks = {nb_id: min(Path(notebooks_dir).glob(f"{nb_id}_*.ipynb"), default=None)
                 for nb_id in sorted(by_notebook) if not only or nb_id in only}
    if missing := [nb_id for nb_id, notebook in notebooks.items() if notebook is None]:
        raise Refusal(f"{locations.display_path(notebooks_dir)} has no notebook {', '.join(missing)} "
                      f"(NN_*.ipynb) to run the solutions of; nothing written")
    failures, done = [], []
    try:
        for nb_id, notebook in notebooks.items():
            t = time.perf_counter()
            say(f"{notebook.name}: the notebook, then {len(by_notebook[nb_id])} snippet(s) …")
            try:
                printed = run_notebook(notebook, by_notebook[nb_id])
            except SnippetFailed as exc:
                failures.append(str(exc))
                say(f"  FAILED: {exc}")
                continue
            text = with_outputs(_read(path), printed)   # re-read: write only this notebook's blocks
            write_atomic(path, _with_about(text, nb_id))
            done.append(nb_id)
            say(f"  {len(printed)} output block(s) written in {time.perf_counter() - t:.0f} s")
    except KeyboardInterrupt:
        rest = [nb_id for nb_id in notebooks if nb_id not in done]
        raise KeyboardInterrupt(f"{', '.join(done) or 'no notebook'} written, {locations.display_path(path)} is whole"
                                + (f"; rerun with --only {' '.join(rest)}" if rest else "")) from None
    return failures


def _read(path: Path) -> str:
    path = Path(path)
    if not path.is_file():
        raise Refusal(f"{locations.display_path(path)} {'is a folder, not a file' if path.is_dir() else 'is missing'} "
                      "(the worked solutions)")
    return path.read_text()


@command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.solutions``."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.solutions", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="execute the notebooks with their solution snippets; write the outputs")
    r.add_argument("--only", nargs="+", metavar="NN", help="notebook ids (default: all)")
    sub.add_parser("check", help="exit 1 when a snippet has no output or prose quotes a number not printed")
    args = parser.parse_args(argv)
    if args.command == "run":
        failures = run(args.only, SOLUTIONS, NOTEBOOKS_DIR)
        for failure in failures:
            print(f"error: {failure}", file=sys.stderr)
        return 1 if failures else 0
    text = _read(SOLUTIONS)
    if found := problems(text):
        print("\n".join(found), file=sys.stderr)
        return 1
    done = regenerated(text)
    waiting = sorted({s.id[:2] for s in snippets(text)} - set(done))
    n = sum(s.id[:2] in done for s in snippets(text))
    print(f"notebooks {', '.join(done)}: {n} snippets, each with its output; every number in their prose was printed"
          + (f"; not regenerated yet: {', '.join(waiting)}" if waiting else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
