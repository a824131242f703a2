"""Audit of the pre-registration discipline (reconstruction §8): from the git history, was each
verdict rule of ``dlgn_lib/verdict_rules.json`` committed before any result made under it?

    python -m dlgn_lib.record.audit [--repo PATH]

One line per rule (its registration commit, its first results, whether every result strictly follows the
registration, later edits of its entry, whether the registration carried the rule cell, config and estimators,
required from v4), then a summary; docs/guide.md ("The pre-registration audit") defines each term. Exit status 1
on a violation, 2 with a one-line error when git, the repository, its full history or the registry is missing.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

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


class Change(NamedTuple):
    """One path a commit changed against its first parent: blob ids before and after (None: no such file)."""
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

    def lacking(self) -> list[str]:
        return [name for name, value in (("rule cell", self.rule_cell), ("config", self.config),
                                         ("estimators", self.estimators)) if value != "yes"]

    @property
    def complete(self) -> bool:
        return not self.lacking()


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
    def incomplete(self) -> bool:
        """A rule of version >= 4 whose registration commit lacks its rule cell, config or estimators."""
        return self.version >= FILES_REQUIRED_FROM and self.carried is not None and not self.carried.complete

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
            c = self.carried
            text += f"; registration carried rule cell {c.rule_cell}, config {c.config}, estimators {c.estimators}"
            if self.incomplete:
                text += (f": INCOMPLETE (a v{FILES_REQUIRED_FROM}+ registration must carry its rule cell, config and "
                         f"estimators; lacks {', '.join(c.lacking())}")
                text += f"; missing {', '.join(c.missing)})" if c.missing else ")"
        return text


# --- git -------------------------------------------------------------------------------------------

def _git(repo: Path, *args: str, check: bool = True) -> bytes | None:
    """git's output in ``repo``; when it fails, AuditError naming the command (None without ``check``)."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    except FileNotFoundError:
        raise AuditError("git is not installed (no 'git' on PATH)") from None
    if done.returncode == 0:
        return done.stdout
    if not check:
        return None
    message = done.stderr.decode(errors="replace").strip().splitlines()
    raise AuditError(f"git {args[0]} failed in {repo}: {message[-1] if message else f'exit {done.returncode}'}")


def _repository_root(path: Path) -> Path:
    """The top folder of the git repository holding ``path``; AuditError when there is none, when
    its history is shallow (older commits missing) or when it has no commit yet."""
    if not path.is_dir():
        raise AuditError(f"{path} is not a folder")
    top = _git(path, "rev-parse", "--show-toplevel", check=False)
    if top is None:
        raise AuditError(f"not in a git repository: {path.resolve()}")
    root = Path(top.decode().strip())
    if _git(root, "rev-parse", "--is-shallow-repository").decode().strip() == "true":
        raise AuditError(f"the history of {root} is shallow (a partial clone of its commits); the audit needs "
                         "all of it: run 'git fetch --unshallow' first")
    if _git(root, "rev-parse", "--verify", "-q", "HEAD", check=False) is None:
        raise AuditError(f"the repository {root} has no commits yet")
    return root


class History:
    """HEAD's history, parents before children, from one ``git log``: each commit's changed paths
    with their blob ids (raw diffs against the first parent; merges list no changes: what they
    bring was changed by the commits they merge), and which commits are ancestors of which."""

    def __init__(self, repo: Path):
        self.repo = repo
        self.commits: list[Commit] = []
        self.changes: dict[str, list[Change]] = {}   # sha → changed paths
        self.ancestors: dict[str, int] = {}          # sha → bitset of proper ancestors (by index)
        self.index: dict[str, int] = {}              # sha → position (oldest 0)
        out = _git(repo, "-c", "core.quotepath=off", "log", "--topo-order", "--reverse", "--raw", "--no-abbrev",
                   "--no-renames", "-z", "--format=%x01%H %P%x02%cs", "HEAD").decode("utf-8", errors="surrogateescape")
        tokens = iter(out.split("\0"))
        for token in tokens:
            token = token.lstrip("\n")
            if token.startswith("\x01"):
                ids, date = token[1:].split("\x02")
                sha, *parents = ids.split()
                self.ancestors[sha] = 0
                for p in parents:   # listed before their children (--topo-order --reverse)
                    self.ancestors[sha] |= self.ancestors[p] | (1 << self.index[p])
                self.index[sha] = len(self.commits)
                self.commits.append(Commit(sha, date.strip()))
                self.changes[sha] = []
            elif token.startswith(":"):   # ":mode mode old new status", then the path
                old, new = (blob if blob.strip("0") else None for blob in token.split()[2:4])   # zeros: no file
                self.changes[sha].append(Change(next(tokens), old, new))

    def is_strictly_after(self, later: str, earlier: str) -> bool:
        """Whether commit ``earlier`` is a proper ancestor of ``later``."""
        return bool(self.ancestors[later] >> self.index[earlier] & 1)

    def touching(self, predicate) -> list[tuple[Commit, Change]]:
        """Every (commit, change) whose path satisfies ``predicate``, oldest first."""
        return [(c, ch) for c in self.commits for ch in self.changes[c.sha] if predicate(ch.path)]

    def iter_blobs(self, blob_ids):
        """(id, contents) of each blob, read one at a time from one ``git cat-file --batch``."""
        ids = sorted(set(blob_ids))
        if not ids:
            return
        with tempfile.TemporaryFile() as request:
            request.write("".join(f"{blob_id}\n" for blob_id in ids).encode())
            request.seek(0)
            with subprocess.Popen(["git", "-C", str(self.repo), "cat-file", "--batch"], stdin=request,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
                for blob_id in ids:
                    header = proc.stdout.readline().split()
                    if not header or header[-1] == b"missing":
                        raise AuditError(f"blob {blob_id} cannot be read from {self.repo} (a partial clone?)")
                    yield blob_id, proc.stdout.read(int(header[2]) + 1)[:-1]   # each blob ends in a newline


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
    if isinstance(registry, dict) and {"notebook", "claim", "version"} <= set(registry):
        return [registry]
    values = registry.values() if isinstance(registry, dict) else registry if isinstance(registry, list) else []
    return [r for value in values for r in _rule_entries(value)]


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
        outputs = cell.get("outputs", []) if cell.get("cell_type") == "code" else []
        for output in (o for o in outputs if o.get("output_type") == "stream"):
            for line in "".join(output.get("text", "")).splitlines():
                if m := RULE_LINE.match(line):
                    for claim in claim_key(m.group(1)):
                        versions[claim] = max(versions.get(claim, 1), int(m.group(2)))
                elif m := RESULT_LINE.match(line):
                    claims.add(m.group(1))
    return {(claim, versions.get(claim, 1)) for claim in claims}


def _rule_cell_sources(notebook: dict | None) -> list[str]:
    """The sources of a notebook's rule cells: those tagged ``rule``, else the code cells calling
    ``verdict.rules(`` (notebooks from before the tags)."""
    cells = [(c, "".join(c.get("source", ""))) for c in (notebook or {}).get("cells", [])]
    return ([source for c, source in cells if RULE_TAG in c.get("metadata", {}).get("tags", [])]
            or [source for c, source in cells if c.get("cell_type") == "code" and RULE_CALL in source])


def _as_list(value) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else [str(v) for v in value]


def _json(blob: bytes | None, where: str):
    try:
        return None if blob is None else json.loads(blob)
    except ValueError:
        print(f"audit: warning: {where} is not valid JSON; read as holding nothing", file=sys.stderr)
        return None


def audit(repo: Path | str = ".") -> list[Finding]:
    """Audit every rule of the registry (the working tree's ``verdict_rules.json``, else HEAD's)
    against the history of HEAD; one Finding per rule, in the registry's order."""
    root = _repository_root(Path(repo))
    history = History(root)
    registry_changes = history.touching(lambda p: p == RULES_PATH)
    full_changes = history.touching(lambda p: p == FULL_RECORD_PATH)
    current_file, at_head = root / RULES_PATH, registry_changes[-1][1].new if registry_changes else None
    if not current_file.is_file() and at_head is None:
        raise AuditError(f"no {RULES_PATH} in {root} (neither in the working tree nor at HEAD)")
    blobs = dict(history.iter_blobs(ch.new for _, ch in registry_changes + full_changes if ch.new))
    current = _rules_of(current_file.read_bytes(), str(current_file)) if current_file.is_file() else \
        _rules_of(blobs[at_head], f"{RULES_PATH} at HEAD")
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

    # results: (notebook, version) → (commit, claim) pairs; claim None: a full run, under every claim
    results: dict[tuple[str, int], list[tuple[Commit, str | None]]] = {}
    for commit, change in full_changes:
        record = _json(blobs.get(change.new), f"{FULL_RECORD_PATH} at {commit.short}")
        entries = record.get("notebooks") if isinstance(record, dict) else None
        for nb, entry in entries.items() if isinstance(entries, dict) else ():
            if nb in notebooks and isinstance(entry, dict) and isinstance(entry.get("rule"), int):
                results.setdefault((nb, entry["rule"]), []).append((commit, None))

    notebook_changes = history.touching(lambda p: (m := NOTEBOOK_PATH.match(p)) is not None and m.group(1) in notebooks)
    held: dict[str, set[tuple[str, int]]] = {}   # notebook blob → (claim, version) results it holds
    for blob_id, contents in history.iter_blobs(ch.new for _, ch in notebook_changes if ch.new):
        parsed = _json(contents, f"notebook blob {blob_id[:12]}")
        held[blob_id] = _notebook_results(parsed) if isinstance(parsed, dict) else set()
    notebook_paths: dict[str, set[str]] = {}
    for commit, change in notebook_changes:
        nb = NOTEBOOK_PATH.match(change.path).group(1)
        notebook_paths.setdefault(nb, set()).add(change.path)
        for claim, version in held.get(change.new, ()):
            results.setdefault((nb, version), []).append((commit, claim))

    findings = []
    for rule in current:
        nb, claims, version = key = rule_key(rule)
        ordered = sorted({c for c, claim in results.get((nb, version), []) if claim is None or claim in claims},
                         key=lambda c: history.index[c.sha])
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

    stated_cell = _as_list(files.get("rule_cell"))
    touched = [changed[p] for p in stated_cell or sorted(notebook_paths) if p in changed]
    blobs = dict(history.iter_blobs(b for ch in touched for b in (ch.old, ch.new) if b))
    moved = any(_rule_cell_sources(_json(blobs.get(ch.old), f"{ch.path} before {registration.short}"))
                != _rule_cell_sources(_json(blobs.get(ch.new), f"{ch.path} at {registration.short}")) for ch in touched)
    rule_cell = "yes" if moved else \
        "no (notebook touched, rule cell unchanged)" if touched else "no (notebook untouched)"
    missing = [] if moved else list(stated_cell)

    config_paths = _as_list(files.get("config")) or [CONFIG_PATH]
    config = "yes" if all(p in changed for p in config_paths) else "no"
    missing += [p for p in config_paths if p not in changed and "config" in files]

    stated = _as_list(files.get("estimators"))
    carried = [p for p in stated if p in changed]
    missing += [p for p in stated if p not in changed]
    estimators = "not stated" if not stated else "yes" if carried == stated else "no" if not carried else \
        f"partly ({len(carried)} of {len(stated)})"
    return Carried(rule_cell, config, estimators, tuple(missing))


# --- command ---------------------------------------------------------------------------------------

def summary(findings: list[Finding]) -> list[str]:
    """The summary lines below the per-rule lines."""
    n = len(findings)
    without = sum(f.first_results is None for f in findings)
    order = [f for f in findings if f.order_violated]
    changed = [f for f in findings if f.amended]
    incomplete = [f for f in findings if f.incomplete]
    no_cell = sum(f.carried is not None and f.carried.rule_cell != "yes" for f in findings)
    no_config = sum(f.carried is not None and f.carried.config != "yes" for f in findings)
    bad = sum(f.violation for f in findings)
    names = lambda fs: f" ({', '.join(f.key for f in fs)})" if fs else ""
    return [f"{n} rules: {n - without} with results, {without} without yet; "
            f"{sum(f.registration is None for f in findings)} not committed",
            f"order: {len(order)} rules with results before or in their registration commit{names(order)}",
            f"entries changed after their registration (other than status): {len(changed)}{names(changed)}",
            f"registration contents: rule cell not carried by {no_cell}, config not carried by {no_config}; "
            f"{len(incomplete)} incomplete registrations of v{FILES_REQUIRED_FROM}+ rules{names(incomplete)}",
            f"audit: FAILED, {bad} rules in violation" if bad else "audit: passed"]


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
    print("\n".join([*(f.line() for f in findings), *summary(findings)]))
    return 1 if any(f.violation for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
