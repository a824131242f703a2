"""Audit of the pre-registration discipline (reconstruction §8): from the git history, was each
verdict rule of ``dlgn_lib/verdict_rules.json`` committed before any result made under it?

    python -m dlgn_lib.record.audit [--repo PATH]

A record tool: it reads the history and the rules registry, and no science module imports it.

Definitions (one rule is a ``(notebook, claim, version)`` entry of ``verdict_rules.json``):

registration commit
    The oldest commit (parents before children, ``git log --topo-order``) whose
    ``verdict_rules.json`` holds an entry with that notebook, claim and version (in its ``rules``
    list or in a list of rules nested in another object, as rules v4's). Claims compare
    as sets ("C5, C7" is "C7, C5"). A rule of the working tree's file that no commit holds is
    reported as not committed.

results under a rule
    A commit carries results under rule vN of notebook NN when either
    (1) the committed outputs of ``notebooks/NN_*.ipynb`` (any name the history gave it) print a
        verdict or smoke-test line of one of the rule's claims (a stream output line starting
        ``VERDICT C5 [`` or ``SMOKE TEST C5 [``) while the same outputs name vN as that claim's
        rule: the rule cell's ``dl.verdict.rules("NN")`` prints ``C5 rule vN (registered ...``
        for every registered rule of the notebook, so a claim's version is the highest one its
        printed rule lines name, and 1 where they name none (the notebook's first rule, stated
        in the notebook: the rule cell printed "its rules are the first ones", or outputs made
        before the registry existed). Verdict lines do not name their version; the rule cell's
        output beside them does. As ``dl.verdict.rules`` reads the working tree's registry, an
        output naming vN was made with vN in that file, committed or not.
    (2) ``docs/full_results.json``'s entry for NN says ``"rule": N`` (its full run was made under
        vN). An entry without ``rule`` (recorded before rules v3) is attributed to no rule.

first results commit
    The oldest commit of the whole history carrying results under the rule, before or after its
    registration. The order is violated when some commit carrying results under the rule is not
    a strict descendant of the registration commit: results before it, on a branch without it,
    or in the registration commit itself (the rule must be committed first, then its results).

contents of the registration commit
    rule cell: whether the registration commit changed the source of the notebook's rule cell
    (the cells tagged ``rule``; in notebooks from before the tags, the code cell calling
    ``verdict.rules(``), in the notebook the rule's ``files.rule_cell`` names, else
    ``notebooks/NN_*.ipynb``. A commit that changed only the notebook's outputs or other cells
    did not carry the rule cell. config: whether it changed ``files.config`` (default
    ``dlgn_lib/config.py``). estimators: whether it changed every file of
    ``files.estimators``; "not stated" for a rule without them.

entry changes
    Later commits that changed a rule's entry other than its ``status`` (and ``files``) are named
    on its line: a rule edited after its registration is not the rule that was registered.

A rule of version 4 or later must carry all three in its registration commit; one without a
``files.estimators`` list cannot show that it did, and is flagged too. Earlier rules are
reported, not judged, on their contents (they were registered before the requirement).

Output: one line per rule, then a summary. Exit status 1 when a rule's order is violated or a
rule of version >= 4 has an incomplete registration; 0 otherwise; 2 with a one-line error when
git is missing, the folder is not in a git repository, its history is shallow or has no commits,
or the registry is missing or unreadable.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from dlgn_lib import verdict
from ..files import command

__all__ = ["main"]

RULES_PATH = f"dlgn_lib/{verdict.RULES_FILE.name}"
FULL_RECORD_PATH = "docs/full_results.json"
CONFIG_PATH = "dlgn_lib/config.py"
NOTEBOOK_PATH = re.compile(r"^notebooks/(\d\d)_[^/]*\.ipynb$")
#: Rules from this version on must name and carry their rule cell, config and estimators.
FILES_REQUIRED_FROM = 4

#: ``dl.verdict.rules`` prints each registered rule as ``C5, C7 rule v3 (registered 2026-12-02, ...``.
RULE_LINE = re.compile(r"^([A-Z]\w*(?:, [A-Z]\w*)*) rule v(\d+) \(registered ")
#: A verdict line (``verdict.Verdict.text``) or a smoke-test line (``verdict.smoke_line``) of a claim.
RESULT_LINE = re.compile(rf"^(?:VERDICT|{re.escape(verdict.SMOKE_MARK)}) ([A-Z]\w*) \[")
RULE_TAG = "rule"
#: Keys of a rule's entry that may change after its registration: its status (registered → measured),
#: and the files its registration commit carried, which say where the rule is and change nothing of it.
BOOKKEEPING = ("status", "files")
RULE_CALL = "verdict.rules("


class AuditError(Exception):
    """The audit cannot run (no git, no repository, a shallow history, no registry); one line."""


@dataclass(frozen=True)
class Commit:
    sha: str
    date: str   # committer date, YYYY-MM-DD

    @property
    def short(self) -> str:
        return self.sha[:7]

    def __str__(self) -> str:
        return f"{self.short} ({self.date})"


@dataclass(frozen=True)
class Change:
    """One path changed by a commit (against its first parent): blob ids before and after, None
    where the path did not exist."""
    path: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class Carried:
    """What a rule's registration commit changed: its rule cell, config and estimators."""
    rule_cell: str        # "yes", "no (notebook untouched)", "no (notebook touched, rule cell unchanged)"
    config: str           # "yes" or "no"
    estimators: str       # "yes", "no", "partly (k of n)" or "not stated"
    missing: tuple[str, ...] = ()   # files stated in "files" that the commit did not change

    @property
    def complete(self) -> bool:
        return self.rule_cell == "yes" and self.config == "yes" and self.estimators == "yes"

    def lacking(self) -> list[str]:
        return [name for name, value in (("rule cell", self.rule_cell), ("config", self.config),
                                         ("estimators", self.estimators)) if value != "yes"]

    def text(self) -> str:
        return f"rule cell {self.rule_cell}, config {self.config}, estimators {self.estimators}"


@dataclass(frozen=True)
class Finding:
    """The audit of one rule (``audit``)."""
    notebook: str
    claim: str
    version: int
    registration: Commit | None           # None: in no commit (only in the working tree's file)
    first_results: Commit | None          # None: no results under the rule anywhere in the history
    early_results: Commit | None = None   # oldest results commit not strictly after the registration
    carried: Carried | None = None        # None when not committed
    amended: tuple[Commit, ...] = ()      # later commits that changed the rule's entry (not its status)

    @property
    def key(self) -> str:
        return f"{self.notebook} {self.claim} v{self.version}"

    @property
    def order_violated(self) -> bool:
        return self.early_results is not None

    @property
    def needs_files(self) -> bool:
        return self.version >= FILES_REQUIRED_FROM

    @property
    def incomplete(self) -> bool:
        """A rule of version >= 4 whose registration commit lacks its rule cell, config or estimators."""
        return self.needs_files and self.carried is not None and not self.carried.complete

    @property
    def violation(self) -> bool:
        return self.order_violated or self.incomplete

    def line(self) -> str:
        registered = f"registered {self.registration}" if self.registration else \
            f"not committed (only in the working tree's {RULES_PATH})"
        first = f"first results {self.first_results.short}" if self.first_results else "first results none"
        if self.early_results is None:
            order = "order ok" if self.first_results else "order ok (no results yet)"
        elif self.registration is None:
            order = f"ORDER VIOLATED (results at {self.early_results} under a rule no commit holds)"
        elif self.early_results.sha == self.registration.sha:
            order = "ORDER VIOLATED (results in the registration commit itself)"
        else:
            order = f"ORDER VIOLATED (results at {self.early_results}, not after the registration)"
        text = f"{self.key}: {registered}, {first}: {order}"
        if self.amended:
            text += f" (entry changed after its registration at {', '.join(c.short for c in self.amended)})"
        if self.carried is not None:
            text += f"; registration carried {self.carried.text()}"
            if self.incomplete:
                lacking = ", ".join(self.carried.lacking())
                text += (f": INCOMPLETE (a v{FILES_REQUIRED_FROM}+ registration must carry its rule cell, config and "
                         f"estimators; lacks {lacking}")
                text += f"; missing {', '.join(self.carried.missing)})" if self.carried.missing else ")"
        return text


# --- git -------------------------------------------------------------------------------------------

def _git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True)
    except FileNotFoundError:
        raise AuditError("git is not installed (no 'git' on PATH)") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise AuditError(f"git {args[0]} failed in {repo}: {message[-1] if message else f'exit {done.returncode}'}")
    return done.stdout


def _repository_root(path: Path) -> Path:
    """The top folder of the git repository holding ``path``; AuditError when there is none, when
    its history is shallow (older commits missing) or when it has no commit yet."""
    path = Path(path)
    if not path.is_dir():
        raise AuditError(f"{path} is not a folder")
    try:
        done = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True)
    except FileNotFoundError:
        raise AuditError("git is not installed (no 'git' on PATH)") from None
    if done.returncode != 0:
        raise AuditError(f"not in a git repository: {path.resolve()}")
    root = Path(done.stdout.decode().strip())
    if _git(root, "rev-parse", "--is-shallow-repository").decode().strip() == "true":
        raise AuditError(f"the history of {root} is shallow (a partial clone of its commits); the audit needs "
                         "all of it: run 'git fetch --unshallow' first")
    if subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"],
                      capture_output=True).returncode != 0:
        raise AuditError(f"the repository {root} has no commits yet")
    return root


@dataclass
class History:
    """HEAD's history, parents before children: each commit's changed paths with their blob ids,
    and which commits are ancestors of which."""
    repo: Path
    commits: list[Commit] = field(default_factory=list)
    changes: dict[str, list[Change]] = field(default_factory=dict)     # sha → changed paths
    ancestors: dict[str, int] = field(default_factory=dict)            # sha → bitset of proper ancestors
    index: dict[str, int] = field(default_factory=dict)                # sha → position (oldest 0)

    @classmethod
    def load(cls, repo: Path) -> "History":
        """One ``git log`` over the whole history (raw diffs against the first parent; merges list no
        changes: what they bring was changed by the commits they merge)."""
        out = _git(repo, "-c", "core.quotepath=off", "log", "--topo-order", "--reverse", "--raw", "--no-abbrev",
                   "--no-renames", "-z", "--format=%x01%H %P%x02%cs", "HEAD").decode("utf-8", errors="surrogateescape")
        history = cls(Path(repo))
        tokens = out.split("\0")
        i, sha = 0, None
        while i < len(tokens):
            token = tokens[i].lstrip("\n")
            if token.startswith("\x01"):
                ids, date = token[1:].split("\x02")
                sha, *parents = ids.split()
                bits = 0
                for p in parents:
                    if p in history.index:   # a parent outside HEAD's log cannot happen: ancestors come first
                        bits |= history.ancestors[p] | (1 << history.index[p])
                history.index[sha] = len(history.commits)
                history.ancestors[sha] = bits
                history.commits.append(Commit(sha, date.strip()))
                history.changes[sha] = []
            elif token.startswith(":") and sha is not None:
                meta = token[1:].split()
                old, new, path = meta[2], meta[3], tokens[i + 1]
                zero = set("0")
                history.changes[sha].append(Change(path, None if set(old) <= zero else old,
                                                   None if set(new) <= zero else new))
                i += 1
            i += 1
        return history

    def is_strictly_after(self, later: str, earlier: str) -> bool:
        """Whether commit ``earlier`` is a proper ancestor of ``later``."""
        return bool(self.ancestors[later] >> self.index[earlier] & 1)

    def touching(self, predicate) -> list[tuple[Commit, Change]]:
        """Every (commit, change) whose path satisfies ``predicate``, oldest first."""
        return [(c, ch) for c in self.commits for ch in self.changes[c.sha] if predicate(ch.path)]

    def read_blobs(self, blob_ids) -> dict[str, bytes]:
        """The contents of blobs by id (``iter_blobs``)."""
        return dict(self.iter_blobs(blob_ids))

    def iter_blobs(self, blob_ids):
        """(id, contents) of each blob, read as they come from one ``git cat-file --batch``."""
        ids = sorted(set(blob_ids))
        if not ids:
            return
        with tempfile.TemporaryFile() as request:
            request.write(("\n".join(ids) + "\n").encode())
            request.seek(0)
            try:
                proc = subprocess.Popen(["git", "-C", str(self.repo), "cat-file", "--batch"], stdin=request,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            except FileNotFoundError:
                raise AuditError("git is not installed (no 'git' on PATH)") from None
            try:
                for blob_id in ids:
                    header = proc.stdout.readline().split()
                    if not header or header[-1] == b"missing":
                        raise AuditError(f"blob {blob_id} cannot be read from {self.repo} (a partial clone?)")
                    size = int(header[2])
                    contents = proc.stdout.read(size)
                    proc.stdout.read(1)   # the newline after each blob
                    yield blob_id, contents
            finally:
                proc.stdout.close()
                proc.wait()


# --- reading rules and results ---------------------------------------------------------------------

def claim_key(claim: str) -> tuple[str, ...]:
    """A rule's claims as a sorted tuple: "C7, C5" → ("C5", "C7")."""
    return tuple(sorted(c.strip() for c in str(claim).split(",") if c.strip()))


def rule_key(rule: dict) -> tuple[str, tuple[str, ...], int]:
    return str(rule["notebook"]), claim_key(rule["claim"]), int(rule["version"])


def _rule_entries(registry) -> list[dict]:
    """Every rule of a registry, in the file's order: each object with a notebook, claim and version,
    wherever it sits (the top-level ``rules`` list, or a list inside another object, such as
    rules v4's ``{"v4": {"rules": [...]}}``)."""
    if isinstance(registry, dict):
        if {"notebook", "claim", "version"} <= set(registry):
            return [registry]
        return [r for value in registry.values() for r in _rule_entries(value)]
    if isinstance(registry, list):
        return [r for value in registry for r in _rule_entries(value)]
    return []


def _rules_of(text: bytes | str, where: str) -> list[dict]:
    try:
        registry = json.loads(text)
        if not isinstance(registry, dict) or not isinstance(registry.get("rules"), list):
            raise KeyError("rules")
        rules = _rule_entries(registry)
        for r in rules:
            rule_key(r)
    except (ValueError, KeyError, TypeError) as e:
        raise AuditError(f"{where}: not a readable rules registry ({type(e).__name__}: {e})") from None
    return rules


def _notebook_results(notebook: dict) -> set[tuple[str, int]]:
    """The (claim, rule version) pairs a notebook's committed outputs hold results under: its
    verdict and smoke-test lines, each under the highest version the printed rule lines name for
    its claim (1 where they name none)."""
    versions: dict[str, int] = {}
    claims: set[str] = set()
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") != "stream":
                continue
            text = output.get("text", "")
            for line in ("".join(text) if isinstance(text, list) else text).splitlines():
                if m := RULE_LINE.match(line):
                    for claim in claim_key(m.group(1)):
                        versions[claim] = max(versions.get(claim, 1), int(m.group(2)))
                elif m := RESULT_LINE.match(line):
                    claims.add(m.group(1))
    return {(claim, versions.get(claim, 1)) for claim in claims}


def _rule_cell_sources(notebook: dict | None) -> list[str]:
    """The sources of a notebook's rule cells: those tagged ``rule``, else the code cells calling
    ``verdict.rules(`` (notebooks from before the tags)."""
    if notebook is None:
        return []
    cells = notebook.get("cells", [])
    source = lambda c: "".join(c.get("source", "")) if isinstance(c.get("source"), list) else c.get("source", "")
    tagged = [source(c) for c in cells if RULE_TAG in c.get("metadata", {}).get("tags", [])]
    return tagged or [source(c) for c in cells if c.get("cell_type") == "code" and RULE_CALL in source(c)]


def _as_list(value) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _json(blob: bytes | None, where: str):
    if blob is None:
        return None
    try:
        return json.loads(blob)
    except ValueError:
        print(f"audit: warning: {where} is not valid JSON; read as holding nothing", file=sys.stderr)
        return None


def audit(repo: Path | str = ".") -> list[Finding]:
    """Audit every rule of the registry (the working tree's ``verdict_rules.json``, else HEAD's)
    against the history of HEAD; one Finding per rule, in the registry's order."""
    root = _repository_root(Path(repo))
    history = History.load(root)

    # the registry at every commit that changed it
    registry_changes = history.touching(lambda p: p == RULES_PATH)
    full_changes = history.touching(lambda p: p == FULL_RECORD_PATH)
    current_file = root / RULES_PATH
    if current_file.is_file():
        current = _rules_of(current_file.read_bytes(), str(current_file))
    elif registry_changes and registry_changes[-1][1].new is not None:
        current = None   # read below from HEAD's blob
    else:
        raise AuditError(f"no {RULES_PATH} in {root} (neither in the working tree nor at HEAD)")

    notebooks = {str(r["notebook"]) for r in (current or [])}
    blobs = history.read_blobs([ch.new for _, ch in registry_changes + full_changes if ch.new])
    if current is None:
        current = _rules_of(blobs[registry_changes[-1][1].new], f"{RULES_PATH} at HEAD")
        notebooks = {str(r["notebook"]) for r in current}

    # registration: the oldest commit whose registry holds the rule; later changes of its entry
    registered: dict[tuple, Commit] = {}
    bodies: dict[tuple, dict] = {}
    amended: dict[tuple, list[Commit]] = {}
    for commit, change in registry_changes:
        if change.new is None:
            continue
        try:
            rules = _rules_of(blobs[change.new], f"{RULES_PATH} at {commit.short}")
        except AuditError as e:
            print(f"audit: warning: {e}; read as holding no rule", file=sys.stderr)
            continue
        for r in rules:
            key = rule_key(r)
            body = {k: v for k, v in r.items() if k not in BOOKKEEPING}
            registered.setdefault(key, commit)
            if key in bodies and bodies[key] != body:
                amended.setdefault(key, []).append(commit)
            bodies[key] = body

    # results: (notebook, claim, version) → commits, oldest first
    results: dict[tuple[str, str, int], list[Commit]] = {}
    full_versions: dict[str, list[tuple[Commit, int]]] = {}
    for commit, change in full_changes:
        record = _json(blobs.get(change.new), f"{FULL_RECORD_PATH} at {commit.short}") if change.new else None
        entries = record.get("notebooks", {}) if isinstance(record, dict) else {}
        for nb in notebooks:
            entry = entries.get(nb) if isinstance(entries, dict) else None
            if isinstance(entry, dict) and isinstance(entry.get("rule"), int):
                full_versions.setdefault(nb, []).append((commit, entry["rule"]))

    notebook_changes = history.touching(lambda p: (m := NOTEBOOK_PATH.match(p)) is not None and m.group(1) in notebooks)
    held: dict[str, set[tuple[str, int]]] = {}   # notebook blob → (claim, version) results it holds
    for blob_id, contents in history.iter_blobs(ch.new for _, ch in notebook_changes if ch.new):
        parsed = _json(contents, f"notebook blob {blob_id[:12]}")
        held[blob_id] = _notebook_results(parsed) if isinstance(parsed, dict) else set()
    for commit, change in notebook_changes:
        nb = NOTEBOOK_PATH.match(change.path).group(1)
        for claim, version in held.get(change.new, ()) if change.new else ():
            results.setdefault((nb, claim, version), []).append(commit)

    notebook_paths: dict[str, set[str]] = {}
    for _, change in notebook_changes:
        notebook_paths.setdefault(NOTEBOOK_PATH.match(change.path).group(1), set()).add(change.path)

    findings = []
    for rule in current:
        nb, claims, version = key = rule_key(rule)
        commits = {c.sha: c for claim in claims for c in results.get((nb, claim, version), [])}
        commits.update({c.sha: c for c, v in full_versions.get(nb, []) if v == version})
        ordered = sorted(commits.values(), key=lambda c: history.index[c.sha])
        registration = registered.get(key)
        early = next((c for c in ordered if registration is None
                      or not history.is_strictly_after(c.sha, registration.sha)), None)
        carried = None if registration is None else _carried(history, registration, rule, notebook_paths.get(nb, set()))
        findings.append(Finding(nb, ", ".join(claims), version, registration, ordered[0] if ordered else None,
                                early, carried, tuple(amended.get(key, ()))))
    return findings


def _carried(history: History, registration: Commit, rule: dict, notebook_paths: set[str]) -> Carried:
    """What the registration commit changed of the rule's files (``files`` key, else defaults)."""
    files = rule.get("files") if isinstance(rule.get("files"), dict) else {}
    changed = {ch.path: ch for ch in history.changes[registration.sha]}
    missing = []

    cell_paths = _as_list(files.get("rule_cell")) or sorted(notebook_paths)
    touched = [p for p in cell_paths if p in changed]
    if not touched:
        rule_cell = "no (notebook untouched)"
        missing += _as_list(files.get("rule_cell"))
    else:
        pairs = [(changed[p].old, changed[p].new) for p in touched]
        blobs = history.read_blobs([b for pair in pairs for b in pair if b])
        moved = any(_rule_cell_sources(_json(blobs.get(old), f"{p} before {registration.short}") if old else None)
                    != _rule_cell_sources(_json(blobs.get(new), f"{p} at {registration.short}") if new else None)
                    for p, (old, new) in zip(touched, pairs))
        rule_cell = "yes" if moved else "no (notebook touched, rule cell unchanged)"
        if not moved:
            missing += _as_list(files.get("rule_cell"))

    config_paths = _as_list(files.get("config")) or [CONFIG_PATH]
    config = "yes" if all(p in changed for p in config_paths) else "no"
    missing += [p for p in config_paths if p not in changed and "config" in files]

    estimators_paths = _as_list(files.get("estimators"))
    if not estimators_paths:
        estimators = "not stated"
    else:
        carried = [p for p in estimators_paths if p in changed]
        missing += [p for p in estimators_paths if p not in changed]
        estimators = "yes" if len(carried) == len(estimators_paths) else \
            "no" if not carried else f"partly ({len(carried)} of {len(estimators_paths)})"
    return Carried(rule_cell, config, estimators, tuple(missing))


# --- command ---------------------------------------------------------------------------------------

def summary(findings: list[Finding]) -> list[str]:
    """The summary lines below the per-rule lines."""
    n = len(findings)
    order = [f for f in findings if f.order_violated]
    incomplete = [f for f in findings if f.incomplete]
    without = [f for f in findings if f.first_results is None]
    uncommitted = [f for f in findings if f.registration is None]
    no_cell = [f for f in findings if f.carried and f.carried.rule_cell != "yes"]
    no_config = [f for f in findings if f.carried and f.carried.config != "yes"]
    names = lambda fs: ", ".join(f.key for f in fs)
    lines = [f"{n} rules: {n - len(without)} with results, {len(without)} without yet; "
             f"{len(uncommitted)} not committed"]
    lines.append(f"order: {len(order)} rules with results before or in their registration commit"
                 + (f" ({names(order)})" if order else ""))
    changed = [f for f in findings if f.amended]
    lines.append(f"entries changed after their registration (other than status): {len(changed)}"
                 + (f" ({names(changed)})" if changed else ""))
    lines.append(f"registration contents: rule cell not carried by {len(no_cell)}, config not carried by "
                 f"{len(no_config)}; {len(incomplete)} incomplete registrations of v{FILES_REQUIRED_FROM}+ rules"
                 + (f" ({names(incomplete)})" if incomplete else ""))
    bad = [f for f in findings if f.violation]
    lines.append(f"audit: {'FAILED, ' + str(len(bad)) + ' rules in violation' if bad else 'passed'}")
    return lines


@command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.audit`` (the module's docstring says what it does)."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=Path("."),
                        help="a folder in the git repository to audit (default: the current folder)")
    args = parser.parse_args(argv)
    try:
        findings = audit(args.repo)
    except AuditError as e:
        print(f"audit: error: {e}", file=sys.stderr)
        return 2
    for finding in findings:
        print(finding.line())
    for line in summary(findings):
        print(line)
    return 1 if any(f.violation for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
