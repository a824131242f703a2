"""The pre-registration audit (dlgn_lib.record.audit): planted histories in a throw-away git repository,
then the project's own history."""
import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlgn_lib.record import audit

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def rule(notebook="05", claim="C5", version=3, **extra):
    entry = {"notebook": notebook, "claim": claim, "version": version, "registered": "2026-12-02",
             "status": "registered", "statement": f"{claim} rule v{version}", "thresholds": {"BAR": 0.5},
             "settings": "s", "seeds": "SEED = 3000", "targets": "t", "replaces": "v2", "why": "w"}
    entry.update(extra)
    return entry


def cell(cell_type, source, tags=(), lines=None):
    c = {"cell_type": cell_type, "metadata": {"tags": list(tags)} if tags else {}, "source": source}
    if cell_type == "code":
        c["execution_count"] = None
        c["outputs"] = [{"output_type": "stream", "name": "stdout", "text": [f"{line}\n" for line in lines]}] \
            if lines else []
    return c


class Repo:
    """A git repository in a temporary folder with the project's layout: a rules registry,
    notebooks and the full record, committed in the order a test plants."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q")
        self.git("config", "user.name", "Auditor")
        self.git("config", "user.email", "auditor@example.org")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args) -> str:
        return subprocess.run(["git", *args], cwd=self.path, check=True, capture_output=True, text=True).stdout

    def write(self, path: str, text: str):
        (self.path / path).parent.mkdir(parents=True, exist_ok=True)
        (self.path / path).write_text(text)

    def rules(self, *entries):
        self.write(audit.RULES_PATH, json.dumps({"about": "rules", "rules": list(entries)}, indent=1))

    def notebook(self, nb="05", name="smooth", bar=0.5, rule_lines=(), result_lines=()):
        """A notebook whose rule cell sets BAR and printed ``rule_lines``, whose verdict cell printed
        ``result_lines`` (no outputs when both are empty)."""
        cells = [cell("code", 'PROFILE = "quick"\nSEED = 3000', ["parameters"]),
                 cell("markdown", "The rule.", ["rule"]),
                 cell("code", f'BAR = {bar}\ndl.verdict.rules("{nb}")', ["rule"], list(rule_lines)),
                 cell("code", 'dl.verdict.verdict("C5", checks, cfg.profile)', ["verdict"], list(result_lines))]
        self.write(f"notebooks/{nb}_{name}.ipynb", json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                                               "nbformat_minor": 5}, indent=1))

    def full(self, **rules):
        """docs/full_results.json with an entry per notebook ("n05": 3 → notebook 05 under rule v3;
        None → an entry with no rule)."""
        notebooks = {k[1:]: {"notebook": k[1:], "verdicts": [], **({} if v is None else {"rule": v})}
                     for k, v in rules.items()}
        self.write(audit.FULL_RECORD_PATH, json.dumps({"about": "full", "notebooks": notebooks}))

    def commit(self, message="c", *paths) -> str:
        self.git("add", "-A", *paths)
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD").strip()


V3_LINE = "C5 rule v3 (registered 2026-12-02, registered): C5 rule v3"
V2_LINE = "C5 rule v2 (registered 2026-11-30, measured): C5 rule v2"
SMOKE = "SMOKE TEST C5 [quick] (quick cannot decide C5: why; the full result is not recorded)"
VERDICT = "VERDICT C5 [quick]: SUPPORTED (3 of 3 checks pass, 0 fail, 0 inconclusive)"


@pytest.fixture(autouse=True)
def _own_git(monkeypatch):
    """git commands address the planted repository, not one named by the environment."""
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def repo(tmp_path):
    return Repo(tmp_path / "repo")


def plant_v2(repo):
    """Rule v2 of 05 registered, then its results: in order."""
    repo.rules(rule(version=2))
    repo.notebook()
    repo.commit("register C5 v2")
    repo.notebook(rule_lines=[V2_LINE], result_lines=[VERDICT])
    repo.commit("05 under v2")


def only(findings, key):
    (finding,) = [f for f in findings if f.key == key]
    return finding


def test_a_rule_registered_before_its_results_is_in_order(repo, capsys):
    plant_v2(repo)
    repo.full(n05=None)                              # an entry recorded before rules v3 names no rule
    repo.commit("a full record without a rule version")
    repo.rules(rule(version=2), rule(version=3))
    repo.notebook(bar=0.6)                           # the rule cell with the new bar, outputs cleared
    registration = repo.commit("register C5 v3")
    repo.notebook(bar=0.6, rule_lines=[V2_LINE, V3_LINE], result_lines=[SMOKE])
    results = repo.commit("05 under v3")
    repo.full(n05=3)
    full = repo.commit("full run under v3")

    v3 = only(audit.audit(repo.path), "05 C5 v3")
    assert (v3.registration.sha, v3.first_results.sha) == (registration, results)
    assert not v3.order_violated and not v3.violation
    assert (v3.carried.rule_cell, v3.carried.config, v3.carried.estimators) == ("yes", "no", "not stated")
    assert audit.main(["--repo", str(repo.path)]) == 0
    out = capsys.readouterr().out
    assert f"05 C5 v3: registered {registration[:7]} (" in out
    assert f"first results {results[:7]}: order ok; registration carried rule cell yes, config no, " \
           "estimators not stated" in out
    assert "audit: passed" in out
    assert full   # the full record's later entry is a later result, not the first


def test_results_committed_before_their_registration_are_a_violation(repo, capsys):
    plant_v2(repo)
    # run with v3 in the working tree's registry, outputs committed first
    repo.notebook(bar=0.6, rule_lines=[V2_LINE, V3_LINE], result_lines=[SMOKE])
    early = repo.commit("05 under v3", "notebooks")
    repo.rules(rule(version=2), rule(version=3))
    registration = repo.commit("register C5 v3 (late)")

    findings = audit.audit(repo.path)
    v3, v2 = only(findings, "05 C5 v3"), only(findings, "05 C5 v2")
    assert v3.order_violated and v3.early_results.sha == early == v3.first_results.sha
    assert v3.registration.sha == registration
    assert not v2.violation
    assert audit.main(["--repo", str(repo.path)]) == 1
    out = capsys.readouterr().out
    assert f"05 C5 v3: registered {registration[:7]}" in out
    assert f"ORDER VIOLATED (results at {early[:7]}" in out
    assert "order: 1 rules with results before or in their registration commit (05 C5 v3)" in out
    assert "audit: FAILED, 1 rules in violation" in out


def test_a_full_record_made_before_the_registration_is_a_violation(repo):
    plant_v2(repo)
    repo.full(n05=3)
    early = repo.commit("a full run under v3 recorded first")
    repo.rules(rule(version=2), rule(version=3))
    repo.commit("register v3")
    v3 = only(audit.audit(repo.path), "05 C5 v3")
    assert v3.order_violated and v3.early_results.sha == early


def test_results_in_the_registration_commit_itself_are_a_violation(repo, capsys):
    repo.rules(rule(version=3))
    repo.notebook(rule_lines=[V3_LINE], result_lines=[SMOKE])
    together = repo.commit("register v3 with its results")
    v3 = only(audit.audit(repo.path), "05 C5 v3")
    assert v3.registration.sha == v3.first_results.sha == v3.early_results.sha == together
    assert v3.order_violated
    assert audit.main(["--repo", str(repo.path)]) == 1
    assert "ORDER VIOLATED (results in the registration commit itself)" in capsys.readouterr().out


def test_outputs_under_the_previous_rule_are_not_results_of_the_new_one(repo):
    plant_v2(repo)
    repo.rules(rule(version=2), rule(version=3))
    repo.notebook(rule_lines=[V2_LINE], result_lines=[VERDICT])   # stale v2 outputs, re-committed
    repo.commit("register v3, the outputs still v2's")
    repo.notebook(rule_lines=[V2_LINE], result_lines=[VERDICT, "noise"])
    repo.commit("v2 outputs again")
    v3 = only(audit.audit(repo.path), "05 C5 v3")
    assert v3.first_results is None and not v3.violation
    assert "first results none: order ok (no results yet)" in v3.line()


def test_outputs_naming_no_rule_are_under_the_first_rule(repo):
    first_ones = "notebook 10: its rules are the first ones, stated in the notebook"
    repo.notebook(nb="10", name="nodes", rule_lines=[first_ones], result_lines=[VERDICT])
    early = repo.commit("10 with results, rule in the notebook only")
    repo.rules(rule(notebook="10", claim="C5, C7", version=1))
    repo.commit("register 10's first rule")
    v1 = only(audit.audit(repo.path), "10 C5, C7 v1")
    assert v1.order_violated and v1.first_results.sha == early


def v4_files(config="dlgn_lib/config.py"):
    return {"rule_cell": "notebooks/05_smooth.ipynb", "config": config,
            "estimators": ["dlgn_lib/studies/circle.py", "dlgn_lib/circle.py"]}


def plant_v4(repo, carry_config: bool, carry_estimators=("dlgn_lib/studies/circle.py", "dlgn_lib/circle.py"),
             files=True):
    repo.rules(rule(version=3))
    repo.notebook()
    repo.write("dlgn_lib/config.py", "SIZES = 1\n")
    repo.write("dlgn_lib/studies/circle.py", "def estimate(): return 1\n")
    repo.write("dlgn_lib/circle.py", "X = 1\n")
    repo.commit("v3")
    repo.rules(rule(version=3), rule(version=4, **({"files": v4_files()} if files else {})))
    repo.notebook(bar=0.7)
    if carry_config:
        repo.write("dlgn_lib/config.py", "SIZES = 2\n")
    for path in carry_estimators:
        repo.write(path, (repo.path / path).read_text() + "# v4\n")
    return repo.commit("register v4")


def test_a_v4_registration_without_its_config_change_is_flagged(repo, capsys):
    plant_v4(repo, carry_config=False)
    v4 = only(audit.audit(repo.path), "05 C5 v4")
    assert not v4.order_violated and v4.incomplete and v4.violation
    assert (v4.carried.rule_cell, v4.carried.config, v4.carried.estimators) == ("yes", "no", "yes")
    assert v4.carried.missing == ("dlgn_lib/config.py",)
    assert audit.main(["--repo", str(repo.path)]) == 1
    out = capsys.readouterr().out
    assert "registration carried rule cell yes, config no, estimators yes: INCOMPLETE" in out
    assert "lacks config; missing dlgn_lib/config.py" in out


def test_a_complete_v4_registration_passes(repo):
    plant_v4(repo, carry_config=True)
    v4 = only(audit.audit(repo.path), "05 C5 v4")
    assert v4.carried.complete and not v4.violation
    assert audit.main(["--repo", str(repo.path)]) == 0


def test_a_v4_registration_missing_an_estimator_or_stating_none_is_flagged(repo):
    plant_v4(repo, carry_config=True, carry_estimators=("dlgn_lib/circle.py",))
    v4 = only(audit.audit(repo.path), "05 C5 v4")
    assert v4.carried.estimators == "partly (1 of 2)" and v4.incomplete
    assert v4.carried.missing == ("dlgn_lib/studies/circle.py",)


def test_a_v4_rule_without_files_cannot_show_its_estimators(repo):
    plant_v4(repo, carry_config=True, files=False)
    v4 = only(audit.audit(repo.path), "05 C5 v4")
    assert v4.carried.estimators == "not stated" and v4.carried.config == "yes" and v4.incomplete


def test_a_registration_that_touches_only_the_notebooks_outputs_does_not_carry_its_rule_cell(repo):
    plant_v2(repo)
    repo.rules(rule(version=2), rule(version=3))
    repo.notebook()                                   # outputs cleared, rule cell as it was
    repo.commit("register v3")
    v3 = only(audit.audit(repo.path), "05 C5 v3")
    assert v3.carried.rule_cell == "no (notebook touched, rule cell unchanged)"


def test_results_on_a_branch_without_the_registration_are_a_violation(repo):
    plant_v2(repo)
    repo.git("checkout", "-q", "-b", "results")
    repo.notebook(bar=0.6, rule_lines=[V2_LINE, V3_LINE], result_lines=[SMOKE])
    side = repo.commit("v3 results on a branch whose registry lacks v3")
    repo.git("checkout", "-q", "-")
    repo.rules(rule(version=2), rule(version=3))
    repo.commit("register v3")
    repo.git("merge", "-q", "--no-edit", "results")
    v3 = only(audit.audit(repo.path), "05 C5 v3")
    assert v3.order_violated and v3.early_results.sha == side


def test_a_rule_only_in_the_working_tree_is_reported_not_committed(repo):
    plant_v2(repo)
    repo.rules(rule(version=2), rule(version=3))      # not committed
    v3 = only(audit.audit(repo.path), "05 C5 v3")
    assert v3.registration is None and v3.carried is None and not v3.violation
    assert "not committed (only in the working tree's dlgn_lib/verdict_rules.json)" in v3.line()


def test_rules_listed_in_a_nested_generation_are_audited(repo):
    plant_v2(repo)
    registry = {"about": "rules", "rules": [rule(version=2)],
                "v4": {"about": "rules v4", "rules": [rule(version=4, files=v4_files())]}}
    repo.write(audit.RULES_PATH, json.dumps(registry))
    registration = repo.commit("register v4 in its own list")
    v4 = only(audit.audit(repo.path), "05 C5 v4")
    assert v4.registration.sha == registration and v4.incomplete


def test_an_entry_edited_after_its_registration_is_named(repo):
    repo.rules(rule(version=3))
    repo.commit("register")
    repo.rules(rule(version=3, status="measured"))
    repo.commit("status only")
    repo.rules(rule(version=3, status="measured", thresholds={"BAR": 0.4}))
    edited = repo.commit("bar moved")
    v3 = only(audit.audit(repo.path), "05 C5 v3")
    assert [c.sha for c in v3.amended] == [edited]
    assert f"(entry changed after its registration at {edited[:7]})" in v3.line()


def test_errors_are_one_line_without_a_traceback(tmp_path, monkeypatch, capsys):
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert audit.main(["--repo", str(plain)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("audit: error: not in a git repository") and err.count("\n") == 1

    empty = Repo(tmp_path / "empty")
    assert audit.main(["--repo", str(empty.path)]) == 2
    assert "has no commits yet" in capsys.readouterr().err

    source = Repo(tmp_path / "source")
    source.rules(rule(version=2))
    source.commit("one")
    source.rules(rule(version=2), rule(version=3))
    source.commit("two")
    subprocess.run(["git", "clone", "-q", "--depth", "1", source.path.as_uri(), str(tmp_path / "shallow")],
                   check=True, capture_output=True)
    assert audit.main(["--repo", str(tmp_path / "shallow")]) == 2
    err = capsys.readouterr().err
    assert "is shallow" in err and err.count("\n") == 1

    no_git = tmp_path / "bin"
    no_git.mkdir()
    monkeypatch.setenv("PATH", str(no_git))
    assert audit.main(["--repo", str(source.path)]) == 2
    assert capsys.readouterr().err == "audit: error: git is not installed (no 'git' on PATH)\n"


def test_no_module_of_the_package_imports_the_audit():
    importers = []
    for path in sorted((ROOT / "dlgn_lib").rglob("*.py")):
        if path.name == "audit.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)] \
                if isinstance(node, ast.ImportFrom) else []
            if any(re.search(r"(^|\.)audit($|\.)", n) for n in names):
                importers.append(str(path.relative_to(ROOT)))
    assert not importers, f"the audit is a record tool; imported by {importers}"


# --- the project's own history -------------------------------------------------------------------

def _full_history() -> bool:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return False
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True)
    return shallow.returncode == 0 and shallow.stdout.strip() == "false"


@pytest.mark.skipif(not _full_history(), reason="needs the repository's full git history")
def test_the_projects_rules_were_each_registered_before_their_results():
    done = subprocess.run([sys.executable, "-m", "dlgn_lib.record.audit", "--repo", str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    lines = done.stdout.splitlines()
    data = json.loads((ROOT / audit.RULES_PATH).read_text())
    # the top-level rules, then those of a later generation's own list (rules v4: {"v4": {"rules": [...]}})
    registry = data["rules"] + [r for v in data.values() if isinstance(v, dict) for r in v.get("rules", [])]
    findings = audit.audit(ROOT)
    assert [f.key for f in findings] == [f"{r['notebook']} {', '.join(audit.claim_key(r['claim']))} v{r['version']}"
                                         for r in registry]
    for f in findings:
        assert any(line.startswith(f"{f.key}: ") for line in lines), f"{f.key} not listed"
    status = {audit.rule_key(r): r["status"] for r in registry}
    earlier = [f for f in findings if f.version < audit.FILES_REQUIRED_FROM]
    assert earlier
    for f in earlier:
        assert f.registration is not None, f"{f.key} is in no commit"
        assert not f.order_violated, f.line()
        if status[(f.notebook, audit.claim_key(f.claim), f.version)] == "measured":
            assert f.first_results is not None, f"{f.key} is measured but has no results in the history"
        # the registration commit is where the rule entered the registry: its parent lacks it
        before = subprocess.run(["git", "show", f"{f.registration.sha}~1:{audit.RULES_PATH}"], cwd=ROOT,
                                capture_output=True, text=True)
        keys = {audit.rule_key(r) for r in json.loads(before.stdout)["rules"]} if before.returncode == 0 else set()
        assert (f.notebook, audit.claim_key(f.claim), f.version) not in keys
