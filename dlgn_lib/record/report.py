"""Numbers in prose, generated from executed notebooks: nothing measured is copied by hand.

Writes the blocks between ``<!-- report:NAME -->`` and ``<!-- /report:NAME -->`` in README, ``docs/record.md``,
``docs/guide.md``, ``docs/reconstruction.md``, ``teaching/course_guide.md`` and each notebook's ``finds`` and
``results`` cells, from the committed notebooks (``quick``) and ``docs/full_results.json`` (``full``)::

    python -m dlgn_lib.record.report record build/notebooks   # refresh the full record
    python -m dlgn_lib.record.report write                    # rewrite every generated block
    python -m dlgn_lib.record.report check                    # exit 1 when a block disagrees, or a
                                                              # runtime is typed into prose by hand
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from .. import locations
from . import full_results, guide_blocks, notebook_blocks, readme_blocks
from .executed import FULL_RECORD, _notebooks
from ..files import Refusal, command, write_atomic

__all__ = ["main"]


README = locations.REPO_ROOT / "README.md"
COURSE_GUIDE = locations.REPO_ROOT / "teaching" / "course_guide.md"
RECORD_PAGE = locations.REPO_ROOT / "docs" / "record.md"
GUIDE = locations.REPO_ROOT / "docs" / "guide.md"
RECONSTRUCTION = locations.REPO_ROOT / "docs" / "reconstruction.md"


def _replace_block(text: str, name: str, body: str, where: str) -> str:
    begin, end = f"<!-- report:{name} -->", f"<!-- /report:{name} -->"
    if text.count(begin) != 1 or text.count(end) != 1:
        raise Refusal(f"{where}: needs exactly one {begin} … {end} block")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def generated(record: Path = FULL_RECORD) -> dict[Path, str]:
    """Every generated text as it should read now, path -> whole text."""
    from . import bench, classwalk, reproduce
    data, full = full_results.measured(record=record), full_results.full_record(record)
    spread = reproduce.load_record()
    blocks = {
        README: {"bottom": readme_blocks.short_table(data, full), "layers": readme_blocks.layers_table()},
        RECORD_PAGE: {"parts": readme_blocks.bottom_lines_table(data, full, "../notebooks/"),
                      "claims": readme_blocks.claims_table(data, "../notebooks/"),
                      "times": readme_blocks.times_table(data, series=full.get("series", {})),
                      "history": readme_blocks.history_table(),
                      "spread": readme_blocks.spread_table(spread),
                      "protocol": readme_blocks.protocol_table(full)},
        GUIDE: {"bench": readme_blocks.bench_table(*bench.load_record()) if bench.RECORD.exists() else
                "No benchmark record yet: run `python -m dlgn_lib.record.bench --series --record`."},
        RECONSTRUCTION: {"tolerances": readme_blocks.tolerance_table(spread)},
        COURSE_GUIDE: {"times": readme_blocks.times_table(data, live=True),
                       "verdicts": guide_blocks.verdicts_by_notebook_table(data),
                       "classwalk": classwalk.table(classwalk.load_record())}}
    out = {}
    for path, bodies in blocks.items():
        out[path] = path.read_text()
        for name, body in bodies.items():
            out[path] = _replace_block(out[path], name, body, str(path))
    for nb_id, path in _notebooks(full_results.NOTEBOOKS_DIR).items():
        nb = nbformat.read(path, as_version=4)
        for name, body in (("results", notebook_blocks.results_block(data[nb_id], spread, full)),
                           ("finds", notebook_blocks.finds_block(data[nb_id], full))):
            cell = notebook_blocks.tagged_cell(nb, name)
            cell.source = _replace_block(cell.source, name, body, str(path))
        out[path] = nbformat.writes(nb) + "\n"
    return out


def stale(record: Path = FULL_RECORD) -> list[Path]:
    """Files whose generated blocks disagree with the executed notebooks and the full record."""
    return [path for path, text in generated(record).items() if path.read_text() != text]


def write(record: Path = FULL_RECORD) -> list[Path]:
    """Rewrite the generated blocks that are out of date, each file atomically; returns the files changed."""
    changed = {path: text for path, text in generated(record).items() if path.read_text() != text}
    for path, text in changed.items():
        write_atomic(path, text)
    return list(changed)


#: A time as prose quotes one: a number followed by a unit of time.
_RUNTIME = re.compile(r"\b\d[\d,.]*\s?(?:s|min|minutes|seconds|h|hours)\b")


#: Times in the prose that are settings or targets of the code, not measurements.
NOT_MEASURED = (
    "a line every 30 s",                     # DLGN_HEARTBEAT_S's default
    "saying so after 3 s",                   # runs.py: a waiting process says so after this long
    "at most 10 minutes on 2 cores",         # reconstruction §6's targets
    "at most 2 minutes from a warm one",
)


def typed_runtimes(notebooks_dir: Path = full_results.NOTEBOOKS_DIR) -> list[str]:
    """Times typed into prose by hand (``file: text``), outside the generated blocks and ``NOT_MEASURED``."""
    texts = {path: path.read_text() for path in (README, COURSE_GUIDE, RECONSTRUCTION, GUIDE, RECORD_PAGE)}
    for path in sorted(Path(notebooks_dir).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        texts[path] = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    found = []
    for path, text in texts.items():
        text = re.sub(r"<!-- report:(\w+) -->.*?<!-- /report:\1 -->", "", text, flags=re.S)
        for phrase in NOT_MEASURED:
            text = text.replace(phrase, "")
        for m in _RUNTIME.finditer(text):
            line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end()) % (len(text) + 1)]
            found.append(f"{locations.display_path(path)}: {m.group(0)!r} in {line.strip()[:120]!r}")
    return found


#: A measured number as prose would quote one: a decimal (not a section number such as §8.2) or a percentage.
_MEASURED = re.compile(r"(?<![§\d.])\d+\.\d+|\b\d+(?:\.\d+)?\s?%")


def typed_numbers(page: Path = RECORD_PAGE) -> list[str]:
    """Measured numbers typed by hand on the record's page: every one belongs in a generated block."""
    text = re.sub(r"<!-- report:(\w+) -->.*?<!-- /report:\1 -->", "", page.read_text(), flags=re.S)
    text = text.replace("with its 90 %", "")   # the rules' interval level, a setting (reconstruction §8.1)
    return [f"{locations.display_path(page)}: {m.group(0)!r} in "
            f"{text[text.rfind(chr(10), 0, m.start()) + 1:text.find(chr(10), m.end())].strip()[:120]!r}"
            for m in _MEASURED.finditer(text)]


@command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.report``."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.report", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record the verdicts and runtimes of notebooks executed with PROFILE=full")
    rec.add_argument("folder", type=Path)
    rec.add_argument("--another-machine", action="store_true",
                     help="the folder is the same rule's full run on another CPU or code path: keep it beside the "
                          "record (a check whose outcome differs is machine-sensitive) instead of replacing it")
    sub.add_parser("write", help="rewrite every generated block")
    sub.add_parser("check", help="exit 1 when a generated block disagrees with the executed notebooks")
    args = parser.parse_args(argv)
    if args.command == "record":
        try:
            full_results.record_full(args.folder, FULL_RECORD, another_machine=args.another_machine)
        except KeyboardInterrupt:
            raise KeyboardInterrupt(f"nothing recorded, {locations.display_path(FULL_RECORD)} is unchanged; rerun "
                                    f"`python -m dlgn_lib.record.report record {args.folder}`") from None
        found = sorted(_notebooks(args.folder))
        what = "as another machine's run of" if args.another_machine else "for"
        print(f"recorded {what} {len(found)} notebooks ({', '.join(found)}) in {locations.display_path(FULL_RECORD)}")
    elif args.command == "write":
        changed = write(record=FULL_RECORD)
        print("rewritten: " + (", ".join(locations.display_path(p) for p in changed) or "nothing (all current)"))
    else:
        behind, typed, numbers = stale(record=FULL_RECORD), typed_runtimes(), typed_numbers()
        if behind:
            print("out of date (run `python -m dlgn_lib.record.report write`): "
                  + ", ".join(locations.display_path(p) for p in behind), file=sys.stderr)
        for place in typed:
            print(f"a runtime typed by hand (quote the generated runtime table instead): {place}", file=sys.stderr)
        for place in numbers:
            print(f"a measured number typed by hand on the record's page (generate it): {place}", file=sys.stderr)
        if behind or typed or numbers:
            return 1
        print("every generated block agrees with the executed notebooks; no runtime or measured number is typed by hand")
    return 0


if __name__ == "__main__":
    sys.exit(main())
