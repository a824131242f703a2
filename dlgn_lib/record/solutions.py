"""The worked solutions' numbers, regenerated: ``python -m dlgn_lib.record.solutions run [--only NN …]``.

``teaching/SOLUTIONS.md`` holds, for each exercise, one or more snippets (the ```` ```python ````
blocks of its folded solution) and, right below each, what that snippet printed, between markers
``<!-- output:ID -->`` and ``<!-- /output:ID -->`` that nothing else edits (ID: ``NN.k`` for
exercise k of notebook NN, ``NN.0`` for a notebook's set-up snippet, ``NN.k.2`` for a second
snippet of one exercise). A block ``<!-- output:about -->`` says, per notebook, when, where and at
which code version its outputs were made.

``run`` executes each notebook as committed (``quick``) in a fresh kernel with its snippets
appended as cells, in order, and writes what each snippet printed into its block (without the run
cache's "loaded run" / "trained … in … s" lines, which depend on what the cache held). Figures go
to a scratch folder; new runs go through the run cache. A notebook or snippet that fails leaves every
block of that notebook as it was and is reported.

``check`` needs no execution: every snippet has its block, and every number that a solution's
prose quotes (outside code and outputs) is one its snippets printed, or one its code or heading
sets. ``tests/test_solutions.py`` runs both: the check on the committed file, and ``run`` for one
notebook compared with the committed blocks within the notebook's measured tolerance.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .. import locations
from ..files import Refusal, command, write_atomic

__all__ = ["main"]

SOLUTIONS = locations.REPO_ROOT / "teaching" / "SOLUTIONS.md"
NOTEBOOKS_DIR = locations.REPO_ROOT / "notebooks"

_SECTION = re.compile(r"^## (\d{2}) · .*$", re.M)
_EXERCISE = re.compile(r"^### (\d+)\. .*$", re.M)
_SNIPPET = re.compile(r"^```python\n(.*?)^```\n", re.M | re.S)
_BLOCK = re.compile(r"\n?<!-- output:([\w.]+) -->\n.*?<!-- /output:\1 -->\n", re.S)
#: A number as prose quotes one: digits with optional thousands commas, decimals and sign.
_NUMBER = re.compile(r"(?<![\w.])[−-]?\d[\d,]*(?:\.\d+)?(?:e[−-]?\d+)?")


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
    for i, section in enumerate(sections):
        stop = sections[i + 1].start() if i + 1 < len(sections) else len(text)
        heads = list(_EXERCISE.finditer(text, section.end(), stop))
        starts = [(0, section.group(0), section.end())] + [(int(h.group(1)), h.group(0), h.start()) for h in heads]
        for j, (number, heading, start) in enumerate(starts):
            end = starts[j + 1][2] if j + 1 < len(starts) else stop
            exercise = Exercise(section.group(1), number, heading, text[start:end])
            for k, m in enumerate(_SNIPPET.finditer(text, start, end)):
                sid = f"{exercise.notebook}.{number}" + (f".{k + 1}" if k else "")
                block = re.compile(rf"\n?<!-- output:{re.escape(sid)} -->\n```text\n(.*?)```\n<!-- /output:{re.escape(sid)} -->\n",
                                   re.S).match(text, m.end())
                exercise.snippets.append(Snippet(sid, m.group(1), m.end(), block.group(1) if block else None))
            exercises.append(exercise)
    return exercises


def snippets(text: str) -> list[Snippet]:
    return [s for e in parse(text) for s in e.snippets]


def _output_block(sid: str, printed: str) -> str:
    """The block of one snippet: a blank line, the markers and the printed text as a text fence."""
    body = printed or "(prints nothing)"
    body += "" if body.endswith("\n") else "\n"
    return f"\n<!-- output:{sid} -->\n```text\n{body}```\n<!-- /output:{sid} -->\n"


def with_outputs(text: str, printed: dict[str, str]) -> str:
    """``text`` with the output block of every snippet in ``printed`` written (added or replaced)."""
    for snippet in sorted(snippets(text), key=lambda s: s.end, reverse=True):
        if snippet.id in printed:
            old = _BLOCK.match(text, snippet.end)
            stop = old.end() if old and old.group(1) == snippet.id else snippet.end
            text = text[:snippet.end] + _output_block(snippet.id, printed[snippet.id]) + text[stop:]
    return text


# --- check: no execution ----------------------------------------------------------------------

def _numbers(text: str) -> set[str]:
    return {m.group(0).replace("−", "-").replace(",", "").lstrip("-") for m in _NUMBER.finditer(text)}


def _prose(exercise: Exercise) -> str:
    """The exercise's text without its heading, code blocks and output blocks."""
    text = exercise.text.replace(exercise.heading, "", 1)
    text = _BLOCK.sub("\n", text)
    return re.sub(r"^```.*?^```\n", "", text, flags=re.M | re.S)


def _unprinted_numbers(text: str) -> list[str]:
    """Numbers a solution's prose quotes that none of its snippets printed (nor its code or heading
    sets, nor a one-digit count): ``"NN.k: number in 'line'"`` for each one."""
    found = []
    for exercise in parse(text):
        if not exercise.snippets:
            continue
        known = _numbers(exercise.heading) | {n for s in exercise.snippets for n in _numbers(s.code)}
        known |= {n for s in exercise.snippets for n in _numbers(s.output or "")}
        for line in _prose(exercise).splitlines():
            for number in sorted(_numbers(line) - known):
                if re.fullmatch(r"\d", number):
                    continue
                found.append(f"{exercise.notebook}.{exercise.number}: {number} in {line.strip()[:100]!r}")
    return found


def regenerated(text: str) -> list[str]:
    """The notebooks whose outputs ``run`` has written (their lines in the ``about`` block)."""
    body = re.search(r"<!-- output:about -->\n(.*?)<!-- /output:about -->", text, re.S)
    return sorted(m.group(1) for m in re.finditer(r"^- (\d{2}): ", body.group(1) if body else "", re.M))


def problems(text: str, notebooks: list[str] | None = None) -> list[str]:
    """What ``check`` reports for ``notebooks`` (default: those ``run`` has regenerated): snippets
    without an output block, and prose numbers their snippets did not print."""
    notebooks = regenerated(text) if notebooks is None else notebooks
    missing = [f"{s.id}: no output block (run `python -m dlgn_lib.record.solutions run`)" for s in snippets(text)
               if s.output is None and s.id[:2] in notebooks]
    return missing + [f"not printed by the snippets: {place}" for place in _unprinted_numbers(text)
                      if place[:2] in notebooks]


# --- run: execute the notebooks with their snippets --------------------------------------------

class SnippetFailed(RuntimeError):
    pass


def run_notebook(notebook: Path, items: list[Snippet]) -> dict[str, str]:
    """Execute ``notebook`` (as committed) with ``items`` appended as cells; returns what each printed.
    Figures go to a scratch folder removed at the end, Ctrl-C included; the kernel's own messages
    are shown after it ends, except on Ctrl-C.

    Raises:
        SnippetFailed: the notebook or a snippet raised; names the cell and the error.
        KeyboardInterrupt: Ctrl-C (nbclient's own handler shuts the kernel down and fails in its
            own ways, "Kernel died"; it leaves ``_async_cleanup_kernel_future`` behind).
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from .series import CURRENT_INTERPRETER_KERNEL, _KernelManager
    nb = nbformat.read(notebook, as_version=4)
    first = len(nb.cells)
    for snippet in items:
        nb.cells.append(nbformat.v4.new_code_cell(snippet.code, metadata={"solution": snippet.id}))
    failed = None
    with (tempfile.TemporaryDirectory(prefix="dlgn-solutions-") as scratch,
          open(Path(scratch) / "kernel.log", "w+") as log):
        client = NotebookClient(nb, kernel_name=CURRENT_INTERPRETER_KERNEL, kernel_manager_class=_KernelManager,
                                resources={"metadata": {"path": str(notebook.parent)}}, timeout=None)
        before = os.environ.get("DLGN_FIGURES_DIR")
        os.environ["DLGN_FIGURES_DIR"] = scratch   # the kernel inherits it; figures/ stays untouched
        try:
            client.execute(stderr=log)
        except Exception as exc:
            failed = exc
        finally:
            if before is None:
                os.environ.pop("DLGN_FIGURES_DIR", None)
            else:
                os.environ["DLGN_FIGURES_DIR"] = before
        if hasattr(client, "_async_cleanup_kernel_future"):
            raise KeyboardInterrupt   # the kernel's complaints about being shut down are not shown
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


#: Lines of the run cache's own (loaded / training / trained, with seconds): they say what the cache
#: held when the snippet ran, not what the solution computes, so the output blocks leave them out.
_CACHE_LINE = re.compile(r"^(?:loaded run .*|training .* for \d+ epochs|trained .* in [\d.]+ s"
                         r"|\d+ runs?: \d+ loaded from the cache, \d+ trained(?: in [\d.]+ s)?)$")


def _printed_text(cell) -> str:
    """What a cell shows as text: its stdout and the plain text of its result, in order, without
    the run cache's lines (``_CACHE_LINE``)."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            parts.append(output["text"])
        elif output.get("output_type") == "execute_result" and "text/plain" in output.get("data", {}):
            parts.append(output["data"]["text/plain"] + "\n")
    lines = "".join(parts).splitlines(keepends=True)
    return "".join(line for line in lines if not _CACHE_LINE.match(line.rstrip("\n")))


def _about_line(nb_id: str) -> str:
    """The about block's line of one notebook: code version, date, machine and code path of its outputs."""
    from .. import numerics
    from . import provenance
    return (f"- {nb_id}: made at code {provenance.code_version()} on {time.strftime('%Y-%m-%d')}, "
            f"{provenance.machine_label()}, {numerics.mode()} code path")


#: The markers of the ``about`` block; ``run`` refuses a file without exactly one such block.
_ABOUT = ("<!-- output:about -->", "<!-- /output:about -->")


def _with_about(text: str, nb_id: str) -> str:
    """``text`` with notebook ``nb_id``'s line of the ``about`` block written (the block must exist)."""
    begin, end = _ABOUT
    head, rest = text.split(begin)
    body, tail = rest.split(end)
    lines = {line[2:4]: line for line in body.strip().splitlines() if line.startswith("- ")}
    lines[nb_id] = _about_line(nb_id)
    return f"{head}{begin}\n" + "\n".join(lines[k] for k in sorted(lines)) + f"\n{end}{tail}"


def run(only: list[str] | None = None, path: Path = SOLUTIONS, notebooks_dir: Path = NOTEBOOKS_DIR,
        say=print) -> list[str]:
    """Regenerate the output blocks (of the notebooks in ``only``, or all), the file rewritten
    atomically after each notebook; returns the failures. A missing file or notebook is a
    :class:`Refusal` before anything runs; Ctrl-C says which notebooks were written and what to rerun."""
    text = _read(path)
    if any(text.count(marker) != 1 for marker in _ABOUT):
        raise Refusal(f"{locations.display_path(path)}: needs exactly one {' … '.join(_ABOUT)} block; nothing written")
    by_notebook: dict[str, list[Snippet]] = {}
    for snippet in snippets(text):
        by_notebook.setdefault(snippet.id[:2], []).append(snippet)
    unknown = sorted(set(only or ()) - set(by_notebook))
    if unknown:
        raise Refusal(f"--only: no solutions for notebook(s) {', '.join(unknown)} in {locations.display_path(path)}; "
                      f"available: {', '.join(sorted(by_notebook))}")
    chosen = {nb_id: items for nb_id, items in sorted(by_notebook.items()) if not only or nb_id in only}
    notebooks = {nb_id: next(iter(sorted(Path(notebooks_dir).glob(f"{nb_id}_*.ipynb"))), None) for nb_id in chosen}
    if missing := [nb_id for nb_id, notebook in notebooks.items() if notebook is None]:
        raise Refusal(f"{locations.display_path(notebooks_dir)} has no notebook {', '.join(missing)} "
                      f"(NN_*.ipynb) to run the solutions of; nothing written")
    failures, done = [], []
    try:
        for nb_id, items in chosen.items():
            t = time.perf_counter()
            say(f"{notebooks[nb_id].name}: the notebook, then {len(items)} snippet(s) …")
            try:
                printed = run_notebook(notebooks[nb_id], items)
            except SnippetFailed as exc:
                failures.append(str(exc))
                say(f"  FAILED: {exc}")
                continue
            text = with_outputs(_read(path), printed)   # re-read: write only this notebook's blocks
            write_atomic(path, _with_about(text, nb_id))
            done.append(nb_id)
            say(f"  {len(printed)} output block(s) written in {time.perf_counter() - t:.0f} s")
    except KeyboardInterrupt:
        rest = [nb_id for nb_id in chosen if nb_id not in done]
        raise KeyboardInterrupt(f"{', '.join(done) or 'no notebook'} written, {locations.display_path(path)} is whole"
                                + (f"; rerun with --only {' '.join(rest)}" if rest else "")) from None
    return failures


def _read(path: Path) -> str:
    """The text of the solutions file; a :class:`Refusal` naming it when it is missing or a folder."""
    path = Path(path)
    if not path.is_file():
        raise Refusal(f"{locations.display_path(path)} {'is a folder, not a file' if path.is_dir() else 'is missing'} "
                      "(the worked solutions)")
    return path.read_text()


@command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.solutions`` (the module's docstring says what it does)."""
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
    found, done = problems(text), regenerated(text)
    for place in found:
        print(place, file=sys.stderr)
    if found:
        return 1
    waiting = sorted({s.id[:2] for s in snippets(text)} - set(done))
    n = sum(s.id[:2] in done for s in snippets(text))
    print(f"notebooks {', '.join(done)}: {n} snippets, each with its output; every number in their prose was printed"
          + (f"; not regenerated yet: {', '.join(waiting)}" if waiting else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
