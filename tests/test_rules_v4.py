"""Rules v4 (reconstruction §8.2): claims in parts, the registry against the config, planted outcomes.

The combination rule is checked on planted checks whose outcomes are known by construction; the
multiplicity correction against a simulation of true parts at their bars.
"""
import json
import re

import numpy as np
import pytest

from dlgn_lib import config, intervals, parts, verdict
from dlgn_lib.text import TEXT_WIDTH, logical_lines
from dlgn_lib.studies import relu as relu_study

from tests.test_verdict import _code_of


def _pass(name):
    return verdict.exact_check(name, 1.0, 5, ">=", 0.5)


def _fail(name):
    return verdict.exact_check(name, 0.0, 5, ">=", 0.5)


def _open(name):
    return verdict.undecided_check(name, ">=", 0.5, "planted")


def _part(label, checks, kind="all", sensitive=()):
    return parts.Part("CX", label, f"part {label}", tuple(checks), kind, frozenset(sensitive))


# --- the registry and the config are one source ---------------------------------------------------

def test_every_v4_rule_states_the_settings_the_config_runs_under_both_profiles():
    registered = {r["notebook"]: r for r in parts.registry()["rules"]}
    assert sorted(registered) == sorted(config.RULES_V4), "a v4 rule per notebook with v4 settings, and no other"
    for notebook, rule in registered.items():
        for profile in config.PROFILES:
            assert rule["profiles"][profile] == config.RULES_V4[notebook][profile], (notebook, profile)
            seed, n = rule["profiles"][profile]["seed"], rule["profiles"][profile]["n_seeds"]
            assert f"SEED = {seed}" in rule["seeds"] and f"{seed}-{seed + n - 1}" in rule["seeds"], (notebook, profile)


def test_the_registry_states_what_quick_runs_where_a_later_commit_cut_it():
    # 07 and 10 quick were cut after their v3 registration (77f66d2): the registry says so now.
    by = {(r["notebook"], r["version"]): r for r in verdict.registered_rules()}
    sizes = config.NOTEBOOK_SIZES
    assert f"{sizes['07']['quick']['epochs']} epochs on {sizes['07']['quick']['fmnist_per_class'][0]}" in by[("07", 3)]["amended"]
    assert f"{sizes['10']['quick']['epochs']} of the protocol's passes" in by[("10", 3)]["amended"]


def test_no_v4_bar_moves_from_v3():
    v3 = {r["notebook"]: r for r in verdict.registered_rules() if r["version"] == 3}
    for rule in parts.registry()["rules"]:
        earlier = v3[rule["notebook"]]["thresholds"]
        for name, value in rule["thresholds"].items():
            assert earlier.get(name) == value, f"{rule['notebook']} {name}: v3 {earlier.get(name)} vs v4 {value}"
        code = _code_of(rule["notebook"])   # and the notebook's constants are those bars
        for name, value in rule["thresholds"].items():
            found = re.findall(rf"^{name}\s*=\s*([-+0-9.eE]+)", code, flags=re.M)
            assert found and float(found[0]) == value, (rule["notebook"], name)


def test_v4_seeds_are_fresh():
    used = []
    for rule in verdict.registered_rules():
        if rule["version"] >= 4:
            continue
        used += [(int(a), int(b)) for a, b in re.findall(r"\b(\d{3,4})-(\d{3,4})\b", rule["seeds"])]
    for notebook, profiles in config.RULES_V4.items():
        for profile, s in profiles.items():
            for start in {s["seed"], s.get("target_seed", s["seed"])}:
                span = (start, start + max(s["n_seeds"], s.get("odt_seeds", 0)) - 1)
                clash = [u for u in used if u[0] <= span[1] and span[0] <= u[1]]
                assert not clash, f"{notebook} {profile}: v4 seeds {span} overlap earlier rules' seeds {clash}"


def test_v4_rules_carry_the_files_their_registration_commit_must_hold():
    for rule in parts.registry()["rules"]:
        files = rule["files"]
        assert files["rule_cell"].startswith(f"notebooks/{rule['notebook']}_") and files["config"] == "dlgn_lib/config.py"
        assert "dlgn_lib/intervals.py" in files["estimators"] and "dlgn_lib/parts.py" in files["estimators"]


def _printed_checks(notebook: str) -> list:
    """The checks a committed notebook prints, as named (``[pass] name = ...``)."""
    from dlgn_lib import locations
    path = next((locations.REPO_ROOT / "notebooks").glob(f"{notebook}_*.ipynb"))
    import nbformat
    from dlgn_lib.record import executed
    names = []
    for line in executed._stdout_lines(nbformat.read(path, as_version=4)):   # a wrapped check read as one line
        m = re.match(r"\s*\[(?:pass|FAIL|inconclusive)\] (.*?) = ", line)
        if m:
            names.append(m.group(1))
    return names


def test_every_registered_part_finds_exactly_its_checks_among_those_the_notebooks_print():
    relu_rows = [f"{row} {metric.format(depth=6)}: {relu_study.MODEL_NAMES[k]}"
                 for row, _, metric, _ in relu_study.ROWS for k in relu_study.KINDS]
    new_in_v4 = [f"{d}: ReLU share on a node (mean over layers), {s}" for d in ("SD-I", "SD-II") for s in ("trained", "init")]
    printed = {nb: [_pass(n) for n in _printed_checks(nb)] for nb in ("01", "02", "03", "04", "05", "06", "07", "10")}
    printed["08"] = [_pass(n) for n in relu_rows]
    printed["10"] += [_pass(n) for n in new_in_v4 if not any(c.name.startswith(n) for c in printed["10"])]
    for claim in parts.registry()["claims"]:
        assembled = parts.assemble(claim, printed)
        assert assembled and all(p.word == parts.HOLDS for p in assembled), claim
    with pytest.raises(ValueError, match=r"part C6 \(b\).*matches 0 measured checks"):
        parts.assemble("C6", {"07": [c for c in printed["07"] if "directions" not in c.name]})


# --- the combination on planted outcomes ----------------------------------------------------------

@pytest.mark.parametrize("words,expected", [
    (["HOLDS", "HOLDS"], ("HOLDS", 2, 2)),
    (["HOLDS", "DOES NOT HOLD"], ("HOLDS IN PART", 1, 2)),
    (["HOLDS", "INCONCLUSIVE", "DOES NOT HOLD"], ("HOLDS IN PART", 1, 3)),
    (["DOES NOT HOLD", "DOES NOT HOLD"], ("DOES NOT HOLD", 0, 2)),
    (["DOES NOT HOLD", "INCONCLUSIVE"], ("INCONCLUSIVE", 0, 2)),
    (["INCONCLUSIVE"], ("INCONCLUSIVE", 0, 1)),
    (["HOLDS", parts.NOT_SHOWN], ("HOLDS", 1, 1)),
    ([parts.NOT_SHOWN], ("INCONCLUSIVE", 0, 0)),
])
def test_a_claims_bottom_line_counts_its_parts(words, expected):
    assert parts.claim_word(words) == expected


def test_a_part_holds_only_when_every_check_passes_and_the_line_names_the_parts():
    a = _part("a", [_pass("x"), _pass("y")])
    b = _part("b", [_pass("z"), _fail("w")])
    c = _part("c", [_pass("v"), _open("u")])
    assert (a.word, b.word, c.word) == (parts.HOLDS, parts.DOES_NOT_HOLD, parts.INCONCLUSIVE)
    line = parts.bottom_line("CX", [a, b, c])
    assert line == "CX: HOLDS IN PART (1 of 3: (a) holds; (b) does not hold; (c) inconclusive)"
    with pytest.raises(ValueError, match="unknown part words"):
        parts.claim_word(["SUPPORTED"])
    with pytest.raises(ValueError, match="has no checks"):
        _part("d", [])


def test_a_machine_sensitive_check_makes_its_part_inconclusive():
    planted = [_pass("stable"), _pass("moves across CPUs")]
    assert _part("a", planted).word == parts.HOLDS
    part = _part("a", planted, sensitive={"moves across CPUs"})
    assert part.word == parts.INCONCLUSIVE and "machine-sensitive, counted inconclusive: moves across CPUs" in part.line()
    # a failing check that is machine-sensitive cannot make the part fail either
    assert _part("b", [_pass("stable"), _fail("f")], sensitive={"f"}).word == parts.INCONCLUSIVE


def test_like_for_like_counts_a_pair_only_where_the_dlgn_shows_the_effect():
    shown = (_pass("R1: DLGN"), _pass("R1: ReLU"))
    relu_differs = (_pass("R2: DLGN"), _fail("R2: ReLU"))
    dlgn_without = (_fail("R3: DLGN"), _fail("R3: ReLU"))
    dlgn_open = (_open("R4: DLGN"), _pass("R4: ReLU"))
    assert _part("a", [shown, dlgn_without], "like for like").word == parts.HOLDS
    assert _part("b", [shown, relu_differs], "like for like").word == parts.DOES_NOT_HOLD
    assert _part("c", [dlgn_without], "like for like").word == parts.NOT_SHOWN
    assert _part("d", [shown, dlgn_open], "like for like").word == parts.INCONCLUSIVE


def test_a_seed_without_a_value_is_counted_not_dropped():
    values = np.array([0.30, 0.32, 0.31, 0.33, 0.29, 0.31, 0.30, 0.32, 0.31, np.nan])
    counted = parts.check("R6 planted", values, ">=", 0.1)
    dropped = parts.check("R6 planted", values[:-1], ">=", 0.1)
    assert counted.estimate.n == 10 and counted.estimate.missing == 1
    assert counted.estimate.low <= dropped.estimate.low and counted.estimate.high >= dropped.estimate.high
    assert (counted.estimate.low, counted.estimate.high) != (dropped.estimate.low, dropped.estimate.high)
    # with fewer than two seeds that have a value the check has none: inconclusive, with the count
    lone = parts.check("R6 planted", [0.3, np.nan, np.nan, np.nan, np.nan], ">=", 0.1)
    assert lone.outcome == verdict.INCONCLUSIVE and "4 of 5 seeds have no value" in " ".join(lone.line().split())


def test_a_v4_check_is_refused_when_it_already_passes_at_initialisation():
    with pytest.raises(verdict.RuleError, match="already passes at initialisation"):
        parts.check("planted", [0.5, 0.6, 0.55, 0.52, 0.58], ">=", 0.1, init=[0.5, 0.6, 0.55, 0.52, 0.58])


# --- multiplicity ----------------------------------------------------------------------------------

def test_the_corrected_level_turns_a_marginal_failure_into_inconclusive():
    rng = np.random.default_rng(7)
    # five seeds whose mean sits just below the bar: the 90 % interval fails, the 97.5 % one straddles
    values = 0.95 + 0.05 * rng.standard_normal(5)
    c = parts.check("planted", values, ">=", values.mean() + 1.9 * values.std(ddof=1) / np.sqrt(5) * 1.2)
    assert c.outcome == verdict.FAIL
    wide = intervals.estimate(values, "mean", level=1 - 0.1 / 4)
    assert wide.high >= c.threshold, "the planted value must straddle at the corrected level"
    assert not parts.fails_corrected(c, 4) and parts.fails_corrected(c, 1)
    assert _part("a", [c, _pass("b"), _pass("c"), _pass("d")]).word == parts.INCONCLUSIVE


def test_a_true_part_at_its_bars_rarely_reads_does_not_hold():
    # k true checks, each with its true mean exactly at its bar (the hardest true case): the
    # corrected rule keeps a false DOES NOT HOLD near 5 % of parts; uncorrected it approaches k · 5 %
    rng = np.random.default_rng(11)
    k, reps, n = 4, 300, 5
    false_corrected = false_plain = 0
    for _ in range(reps):
        checks = [parts.check(f"c{i}", rng.standard_normal(n), ">=", 0.0) for i in range(k)]
        false_plain += any(c.outcome == verdict.FAIL for c in checks)
        false_corrected += _part("a", checks).word == parts.DOES_NOT_HOLD
    assert false_corrected / reps <= 0.08, false_corrected / reps
    assert false_plain > false_corrected
    assert parts.family_error(k)["false does not hold, uncorrected"] == pytest.approx(0.2)


def test_a_check_whose_outcome_moves_in_the_spread_record_is_machine_sensitive():
    from dlgn_lib.record import reproduce
    record = {"notebooks": {"07": {"checks": {
        "odt: DLGN effective directions of layer 6, trained": {"committed": "pass", "pinned @ A": "pass", "native @ B": "inconclusive"},
        "odt: DLGN extra growth Δ of the score, layer 1 → 6": {"committed": "pass", "pinned @ A": "pass", "native @ B": "pass"},
        "a check with one number": {"committed": True, "pinned @ A": True, "native @ B": False}}}}}
    sensitive = reproduce.sensitive_checks("07", record)
    assert sensitive == {"odt: DLGN effective directions of layer 6, trained", "a check with one number"}
    checks = {"07": [_pass("fashion_mnist: DLGN extra growth Δ"), _pass("odt: DLGN extra growth Δ of the score, layer 1 → 6"),
                     _pass("fashion_mnist: DLGN effective directions of layer 6, trained"),
                     _pass("odt: DLGN effective directions of layer 6, trained")]}
    words = [p.word for p in parts.assemble("C6", checks, sensitive)]
    assert words == [parts.HOLDS, parts.INCONCLUSIVE]
    assert parts.bottom_line("C6", parts.assemble("C6", checks, sensitive)) == \
        "C6: HOLDS IN PART (1 of 2: (a) holds; (b) inconclusive)"


def test_notebook_10_holds_the_relu_net_to_the_dlgns_statistic_and_bars_under_v4():
    import pandas as pd
    from dlgn_lib.studies import nodes as nodes_study
    rows = []
    for seed in range(5):
        for layer in (1, 2, 3):
            for kind, trained in (("dlgn", 0.4), ("relu", 0.05)):
                rows += [dict(dataset="SD-I", model=kind, state="init", layer=layer, seed=seed, share=0.0),
                         dict(dataset="SD-I", model=kind, state="trained", layer=layer, seed=seed,
                              share=trained + 0.01 * seed + 0.002 * layer)]
    checks = nodes_study.checks_v4(pd.DataFrame(rows), ("SD-I",), 0.2, 0.02)
    names = {k: [c.name for c in cs] for k, cs in checks.items()}
    assert [n.replace("ReLU", "DLGN") for n in names["relu"]] == names["dlgn"]
    assert [c.threshold for c in checks["relu"]] == [c.threshold for c in checks["dlgn"]]
    # the DLGN's share (0.4 + ...) passes; the ReLU net's (0.05 + ...) fails the same bar
    assert [c.outcome for c in checks["dlgn"]] == [verdict.PASS, verdict.PASS]
    assert [c.outcome for c in checks["relu"]] == [verdict.FAIL, verdict.PASS]
    mean = np.mean([0.05 + 0.01 * s + 0.002 * l for s in range(5) for l in (1, 2, 3)])
    assert checks["relu"][0].value == pytest.approx(mean)
    part = parts.Part("C7", "g", "units on the nodes", tuple(zip(checks["dlgn"], checks["relu"])), "like for like")
    assert part.word == parts.DOES_NOT_HOLD


def test_a_median_with_too_few_seeds_for_the_corrected_level_does_not_fail_its_part():
    # 5 seeds give a 90 % order-statistic interval, but none at 1 - 0.10 / 4 (it needs 7): unbounded
    c = parts.check("planted median", [2.0, 2.1, 2.2, 2.3, 2.4], "<", 1.0, statistic="median")
    assert c.outcome == verdict.FAIL and intervals.median_minimum(1 - 0.1 / 4) == 7
    assert not parts.fails_corrected(c, 4) and parts.fails_corrected(c, 1)


def test_a_notebook_prints_the_parts_it_decides_with_the_correction_of_the_whole_part(capsys):
    # 05 decides 2 of C5 (a)'s 6 checks (with 10), all 4 of (b), and 4 of (c)'s 5 (with 06)
    names = ["S1 steps, no gate bias: x", "S1 steps, gate bias: x", "S2 steps, no gate bias: x", "S2 steps, gate bias: x",
             "S3 steps, no gate bias: x", "S3 steps, gate bias: x", "M1 mixture, no gate bias: x", "M1 mixture, gate bias: x",
             "M2 mixture, no gate bias: x", "M2 mixture, gate bias: x"]
    checks = [_fail(n) if n.startswith("S1") else _pass(n) for n in names]
    found = {p.label: (p.word, p.registered, others) for p, others in parts.local("C5", "05", checks)}
    assert found == {"a": (parts.DOES_NOT_HOLD, 6, ["10"]), "b": (parts.HOLDS, 4, []), "c": (parts.HOLDS, 5, ["06"])}
    parts.show("C5", "05", checks, sensitive={"M2 mixture, gate bias: x"})
    printed = capsys.readouterr().out.splitlines()
    assert max(map(len, printed)) <= TEXT_WIDTH
    out = logical_lines(printed, re.compile("^PART "))   # each part's line as one, as the record reads it
    assert out[0].startswith("PART C5 (a) DOES NOT HOLD: boundaries settle") and out[0].endswith("(2 of its 6 checks here; with 10)")
    assert out[1].startswith("PART C5 (b) HOLDS:") and out[1].endswith("(4 checks here)")
    assert out[2].startswith("PART C5 (c) INCONCLUSIVE:") and "machine-sensitive: M2 mixture, gate bias: x" in out[2]


def test_a_notebook_at_rules_v4_runs_the_registered_seeds_and_counts_under_both_profiles():
    assert config.AT_RULES_V4 <= set(config.RULES_V4)
    for notebook in config.AT_RULES_V4:
        code = _code_of(notebook)
        for profile in config.PROFILES:
            v4, sizes = config.RULES_V4[notebook][profile], config.NOTEBOOK_SIZES[notebook][profile]
            for key in ("n_seeds", "odt_seeds"):
                if key in v4:
                    assert sizes[key] == v4[key], (notebook, profile, key)
        for name, key in (("SEED", "seed"), ("TARGET_SEED", "target_seed")):
            if key in config.RULES_V4[notebook]["full"]:
                found = re.findall(rf"^{name}\s*=\s*(\d+)", code, flags=re.M)
                assert found == [str(config.RULES_V4[notebook]["full"][key])], (notebook, name, found)
        assert ("dl.parts.check(" in code or "checks_v4(" in code or "rules=4" in code), notebook   # v4 intervals
        assert "dl.verdict.seed_check(" not in code and f'dl.parts.show("C' in code, notebook
        smoke = config.RULES_V4[notebook]["quick"].get("smoke")
        if smoke is not None:
            assert (config.QUICK_IS[notebook] == "smoke test") == smoke, notebook
        current = verdict.registered_rules(notebook)[-1]
        assert current["version"] == 4 and current["profiles"] == config.RULES_V4[notebook]


@pytest.mark.parametrize("kind", parts.KINDS)
def test_words_combined_across_notebooks_equal_the_part_read_on_all_its_checks_at_once(kind):
    # every assignment of outcomes to a part's checks split over two notebooks: combining the two
    # local words gives the word of the whole part
    import itertools
    makers = {"pass": _pass, "fail": _fail, "open": _open}
    slots = 3
    for outcomes in itertools.product(makers, repeat=2 * slots if kind == "like for like" else slots):
        if kind == "all":
            items = [makers[o](f"c{i}") for i, o in enumerate(outcomes)]
        else:
            items = [(makers[outcomes[2 * i]](f"d{i}"), makers[outcomes[2 * i + 1]](f"r{i}")) for i in range(slots)]
        whole = _part("a", items, kind)
        halves = [parts.Part("CX", "a", "part a", tuple(h), kind, registered=len(items)) for h in (items[:1], items[1:])]
        got = parts.combine(kind, [h.word for h in halves], any(h.dlgn_undecided for h in halves))
        assert got == whole.word, (outcomes, [h.word for h in halves])


def test_the_readme_reads_each_claim_by_parts_from_the_full_records_of_its_notebooks():
    import nbformat
    from dlgn_lib.record import executed, full_results, readme_blocks
    # a planted executed 07 under full: its part lines as dl.parts.show prints them
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="PART C6 (a) HOLDS: clustering grows (2 checks here)\n"
                                     "PART C6 (b) DOES NOT HOLD: several clusters (2 checks here)\n"
                                     "SMOKE TEST PART C6 (a) HOLDS: read by a smoke test, never recorded\n")])]
    found = executed.parts_of(nb)
    assert found == [{"claim": "C6", "label": "a", "word": "HOLDS", "dlgn_undecided": False},
                     {"claim": "C6", "label": "b", "word": "DOES NOT HOLD", "dlgn_undecided": False}]
    record = {"notebooks": {"07": {"rule": 4, "parts": found, "verdicts": []}}}
    assert full_results.part_words("C6", record) == {"a": ("HOLDS", []), "b": ("DOES NOT HOLD", [])}
    assert readme_blocks.claim_by_parts("C6", record) == ("*HOLDS IN PART* (1 of 2)", ["(a) HOLDS", "(b) **DOES NOT HOLD**"])
    # a part decided in two notebooks is pending while one of them has no v4 full record
    record["notebooks"]["05"] = {"rule": 4, "verdicts": [], "parts": [
        {"claim": "C5", "label": "c", "word": "HOLDS", "dlgn_undecided": False}]}
    assert full_results.part_words("C5", record)["c"] == ("pending", ["06"])
    record["notebooks"]["06"] = {"rule": 3, "verdicts": [], "parts": []}   # a v3 record does not count
    assert full_results.part_words("C5", record)["c"] == ("pending", ["06"])
    record["notebooks"]["06"] = {"rule": 4, "verdicts": [], "parts": [
        {"claim": "C5", "label": "c", "word": "INCONCLUSIVE", "dlgn_undecided": False}]}
    assert full_results.part_words("C5", record)["c"] == ("INCONCLUSIVE", [])
    # C1 is decided by rule v3's worst cases, read from the recorded checks
    checks = [{"name": f"max |path sum - forward|, {n}", "value": "1e-14", "op": "<=", "threshold": "1e-10",
               "outcome": "pass"} for n in ("DLGN, value input ones, soft gates", "DLGN, value input ones, hard gates",
                                             "DLGN, value input x, soft gates", "DLGN, value input x, hard gates",
                                             "ReLU, no biases, hard gates")]
    record["notebooks"]["01"] = {"rule": 3, "verdicts": [{"claim": "C1", "profile": "full", "word": "SUPPORTED",
                                                          "n_pass": 5, "n_checks": 5, "checks": checks}]}
    assert full_results.part_words("C1", record) == {"a": ("HOLDS", [])}
    checks[2]["outcome"] = "fail"
    assert full_results.part_words("C1", record) == {"a": ("DOES NOT HOLD", [])}


@pytest.mark.parametrize("claim,notebook,local,expected", [
    # a check failing at the correction of the whole part decides it; a holding part waits for the others
    ("C5", "05", [("a", "DOES NOT HOLD", False), ("c", "HOLDS", False)],
     {"a": ("DOES NOT HOLD", ["10"]), "c": ("pending", ["06"])}),
    # like for like: an undecided DLGN check leaves the part inconclusive, whatever the others show
    ("C7", "06", [("e", "INCONCLUSIVE", True), ("c", "HOLDS", False)],
     {"e": ("INCONCLUSIVE", ["08"]), "c": ("pending", ["08"])}),
])
def test_a_part_decided_in_one_notebook_is_read_before_the_others_ran(claim, notebook, local, expected):
    from dlgn_lib.record import full_results, readme_blocks
    record = {"notebooks": {notebook: {"rule": 4, "verdicts": [], "parts": [
        {"claim": claim, "label": label, "word": word, "dlgn_undecided": undecided} for label, word, undecided in local]}}}
    words = full_results.part_words(claim, record)
    assert {label: words[label] for label in expected} == expected
    if claim == "C5":
        assert "(a) **DOES NOT HOLD** (decided before 10 ran)" in readme_blocks.claim_by_parts(claim, record)[1]


def _entry(parts_words, outcomes, cpu="6/167/1"):
    """A planted full record entry of 07 under rule v4: its part lines and its checks' outcomes."""
    checks = [{"name": name, "op": ">=", "outcome": o, "over": "mean over 5 seeds", "threshold": "0.1", "value": "1"}
              for name, o in outcomes.items()]
    return {"rule": 4, "machine": {"cpu_family_model_stepping": cpu}, "code_path": "numerics: native",
            "verdicts": [{"claim": "C6", "profile": "full", "word": "x", "n_pass": 0, "n_checks": len(checks),
                          "checks": checks}],
            "parts": [{"claim": "C6", "label": label, "word": word, "dlgn_undecided": False}
                      for label, word in parts_words.items()]}


_C6 = {"g_f": "fashion_mnist: DLGN extra growth Δ of the score, layer 1 → 6",
       "g_o": "odt: DLGN extra growth Δ of the score, layer 1 → 6",
       "n_f": "fashion_mnist: DLGN effective directions of layer 6, trained",
       "n_o": "odt: DLGN effective directions of layer 6, trained"}


def test_a_part_read_differently_by_the_full_records_of_two_cpus_is_machine_sensitive_and_inconclusive():
    from dlgn_lib.record import full_results, readme_blocks
    one = _entry({"a": "HOLDS", "b": "DOES NOT HOLD"},
                 {_C6["g_f"]: "pass", _C6["g_o"]: "pass", _C6["n_f"]: "fail", _C6["n_o"]: "pass"})
    record = {"notebooks": {"07": one}}
    assert full_results.part_words("C6", record) == {"a": ("HOLDS", []), "b": ("DOES NOT HOLD", [])}
    assert full_results.sensitive_parts("C6", record) == set()
    # a second CPU where the failing check is only inconclusive: (b) reads differently, so it is inconclusive
    other = _entry({"a": "HOLDS", "b": "INCONCLUSIVE"},
                   {_C6["g_f"]: "pass", _C6["g_o"]: "pass", _C6["n_f"]: "inconclusive", _C6["n_o"]: "pass"}, "25/1/1")
    record["notebooks"]["07"] = {**one, "other_machines": [other]}
    assert full_results.part_words("C6", record) == {"a": ("HOLDS", []), "b": ("INCONCLUSIVE", [])}
    assert full_results.sensitive_parts("C6", record) == {"b"}
    assert readme_blocks.claim_by_parts("C6", record)[1][1].startswith(
        "(b) *INCONCLUSIVE* (machine-sensitive: the CPUs' full records differ): ")
    # both CPUs say DOES NOT HOLD, but each through another check: no check fails on both, so inconclusive
    other = _entry({"a": "HOLDS", "b": "DOES NOT HOLD"},
                   {_C6["g_f"]: "pass", _C6["g_o"]: "pass", _C6["n_f"]: "pass", _C6["n_o"]: "fail"}, "25/1/1")
    record["notebooks"]["07"] = {**one, "other_machines": [other]}
    assert full_results.part_words("C6", record)["b"] == ("INCONCLUSIVE", [])
    # the same check fails on both: the part does not hold on either CPU
    other = _entry({"a": "HOLDS", "b": "DOES NOT HOLD"},
                   {_C6["g_f"]: "pass", _C6["g_o"]: "pass", _C6["n_f"]: "fail", _C6["n_o"]: "inconclusive"}, "25/1/1")
    record["notebooks"]["07"] = {**one, "other_machines": [other]}
    assert full_results.part_words("C6", record)["b"] == ("DOES NOT HOLD", [])


def test_another_machines_full_run_is_kept_beside_the_record_and_must_be_of_the_same_rule(tmp_path, monkeypatch):
    import nbformat
    from dlgn_lib import files
    from dlgn_lib.record import full_results, provenance
    monkeypatch.setattr(provenance, "code_version", lambda: "abc1234")
    folder = tmp_path / "run"
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"parameters": {"PROFILE": "full"}, "duration": 12.0}
    nb.cells = [nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="numerics: native\nPART C6 (a) HOLDS: grows (2 checks here)\n"
        "  [pass] x = 1  (threshold: >= 0.5)\nVERDICT C6 [full]: SUPPORTED (1 of 1 checks pass)\n")])]
    nbformat.write(nb, folder / "07_clusters.ipynb")
    record = tmp_path / "full_results.json"
    record.write_text(json.dumps({"notebooks": {"07": {"rule": 3, "note": "v3"}}}))
    with pytest.raises(files.Refusal, match="record this machine's run first"):
        full_results.record_full(folder, record, another_machine=True)
    assert json.loads(record.read_text()) == {"notebooks": {"07": {"rule": 3, "note": "v3"}}}, "nothing written"
    full_results.record_full(folder, record)
    full_results.record_full(folder, record, another_machine=True)
    full_results.record_full(folder, record, another_machine=True)   # the same machine again replaces its entry
    entry = json.loads(record.read_text())["notebooks"]["07"]
    assert entry["rule"] == 4 and len(entry["other_machines"]) == 1
    assert entry["other_machines"][0]["parts"] == [{"claim": "C6", "label": "a", "word": "HOLDS", "dlgn_undecided": False}]
    full_results.record_full(folder, record)   # a new record of the same rule keeps the other machines' runs
    assert len(json.loads(record.read_text())["notebooks"]["07"]["other_machines"]) == 1
