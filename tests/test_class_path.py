"""The class path (teaching/): every exercise a notebook sets has a worked solution in SOLUTIONS.md,
and every number the course guide quotes outside its generated blocks is what its source says now:
a committed notebook's output (named by notebook and cell), the full record, the solutions' own
outputs, the code's settings, or a computation redone here. A number typed into the guide with no
source below fails the last test."""
from __future__ import annotations

import ast
import json
import re
from functools import lru_cache

import nbformat
import numpy as np
import pytest
import torch

import dlgn_lib as dl
from dlgn_lib import config, intervals, locations, verdict
from dlgn_lib.plots import planes
from dlgn_lib.record import full_results, report, slides, solutions

NOTEBOOKS = locations.REPO_ROOT / "notebooks"
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten",
         11: "eleven", 12: "twelve"}
#: A number as prose quotes one (as ``solutions`` reads the solutions' prose).
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?")
#: "05 ex. 3", "00 ex. 1 and 3", "07 ex. 1 and 5": the guide's references to exercises.
EXERCISES = re.compile(r"\b(\d\d) ex\. (\d+(?:(?:, (?!\d\d ex\.)| and )\d+)*)")
#: Numbers in the guide that no notebook prints: what each one is.
NOT_FROM_AN_OUTPUT = {
    "arXiv 2404.04312": "the paper's identifier",
    "about 6 GB with PyTorch": "the size of an installed environment",
    "127.0.0.1": "the address JupyterLab listens on",
    "05_seed1.ipynb -p PROFILE quick -p SEED 1": "an example command",
    "DLGN_QUIET=1": "a setting",
    "widths=(4, 4, 4)": "an example of overriding a size",
    "beta=30": "an example of a model option",
    "1 + M + M(M-1)/2": "a formula (03 ex. 2)",
    "28×28 image": "Fashion-MNIST's image size",
    "1280×720": "the slide size the browser test holds the class deck to",
}


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("−", "-")).strip()


@lru_cache(maxsize=None)
def prose() -> str:
    """The course guide outside its generated blocks, whitespace collapsed, minus signs plain."""
    text = report.COURSE_GUIDE.read_text()
    return _flat(re.sub(r"<!-- report:(\w+) -->.*?<!-- /report:\1 -->", " ", text, flags=re.S))


@lru_cache(maxsize=None)
def notebook(nb_id: str):
    return nbformat.read(next(NOTEBOOKS.glob(f"{nb_id}_*.ipynb")), as_version=4)


def printed(nb_id: str, marker: str) -> tuple[int, str]:
    """``(cell index, printed text)`` of the first code cell of notebook ``nb_id`` that prints ``marker``."""
    for i, cell in enumerate(notebook(nb_id).cells):
        if cell.cell_type == "code":
            text = "".join(o.get("text") or o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", []))
            if marker in text:
                return i, text
    raise AssertionError(f"notebook {nb_id}: no cell prints {marker!r}")


def parameters(nb_id: str) -> dict:
    """The values of a notebook's parameters cell as committed."""
    cell = next(c for c in notebook(nb_id).cells if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(cell.source, namespace)
    return namespace


def solution_output(sid: str) -> str:
    output = {s.id: s.output for s in solutions.snippets(solutions.SOLUTIONS.read_text())}[sid]
    assert output, f"SOLUTIONS.md: snippet {sid} has no output"
    return output


@lru_cache(maxsize=None)
def record() -> dict:
    return json.loads(full_results.FULL_RECORD.read_text())["notebooks"]


def full_check(nb_id: str, name: str) -> dict:
    return next(c for v in record()[nb_id]["verdicts"] for c in v["checks"] if c["name"] == name)


def ids(numbers) -> str:
    """Notebook ids as the guide lists them: runs of three or more as "05–07", the rest by commas."""
    numbers, parts, i = sorted(int(n) for n in numbers), [], 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        parts += [f"{numbers[i]:02d}–{numbers[j]:02d}"] if j - i >= 2 else [f"{n:02d}" for n in numbers[i:j + 1]]
        i = j + 1
    return ", ".join(parts)


def listed(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


# --- each source and what the guide must say it says ------------------------------------------------

def xor_by_hand():
    src = "\n".join(c.source for c in notebook("00").cells if c.cell_type == "code")
    angles = ast.literal_eval(re.search(r"^ANGLES = (\(.*?\))", src, re.M).group(1))
    assert 'dl.data.load("plane", name="xor", n=cfg.n, seed=SEED)' in src, "notebook 00 draws XOR otherwise now"
    seed = parameters("00")["SEED"]
    xor = dl.data.load("plane", name="xor", n=config.for_notebook("00", "quick", seed=seed).n, seed=seed)
    accuracy = []
    for depth in (1, 2):   # as planes.hand_dlgn_figure titles its right panel
        model = planes.hand_dlgn(angles, depth, xor.x_train, xor.y_train)
        with torch.no_grad():
            accuracy.append(f"{float(((model(xor.x_train.double())[:, 0] >= 0) == (xor.y_train > 0)).double().mean()):.2f}")
    where = "notebook 00's build-by-hand figures (planes.hand_dlgn on its XOR data, train accuracy)"
    return [(f"XOR (train accuracy: one layer {accuracy[0]}, two layers {accuracy[1]})", where),
            (f"With normals at {angles[0]:g}°, {angles[1]:g}°, {angles[2]:g}°, one layer reaches train accuracy "
             f"{accuracy[0]} and two layers reach {accuracy[1]}", where)]


def path_sum_errors():
    i, text = printed("01", "max error float64")
    values = re.findall(r"\d\.\de[-+]\d+", text)
    # float64 and float32 side by side, or (the table split to fit the column) float32 in a block below
    side_by_side = any("float64" in line and "float32" in line for line in text.splitlines())
    rows = np.array(values).reshape(-1, 2) if side_by_side else np.array(values).reshape(2, -1).T
    orders = []
    for column in zip(*rows):   # float64, float32: every row within one power of ten of the order quoted
        logs = np.log10([float(v) for v in column])
        orders.append(int(np.round(logs.mean())))
        assert np.all(np.abs(logs - orders[-1]) < 1), f"notebook 01, cell {i}: errors {column} are not of one order"
    where = f"notebook 01, cell {i} (the path-sum table's max errors)"
    return [(f"float64 error 1e{orders[0]}", where),
            (f"Error 1e{orders[0]} in float64 and 1e{orders[1]} in float32, at every epoch", where)]


def sd1_gap():
    i, table = printed("02", "odt SD-I (d=")
    lines = table.splitlines()
    row = next(k for k, line in enumerate(lines) if line.startswith("odt SD-I (d="))
    header = next(lines[k] for k in range(row - 1, -1, -1) if lines[k].strip() and "±" not in lines[k])
    ends = [m.end() for m in re.finditer(r"\d\.\d+ ± \d\.\d+", lines[row])]   # pandas aligns names and values right
    values = {header[a:b].strip(): lines[row][a:b].split()[-3] for a, b in zip([0] + ends[:-1], ends)}
    assert {"DLGN", "frozen-gate DLGN"} <= set(values), f"notebook 02, cell {i}: no such columns in {header!r}"
    d = re.search(r"\(d=(\d+)\)", lines[row]).group(1)
    j, checks = printed("02", "DLGN − frozen-gate DLGN = ")
    gap = re.search(r"\(d=\d+\): DLGN − frozen-gate DLGN = (\S+),", checks).group(1)
    full_gap = full_check("02", f"odt SD-I (d={d}): DLGN − frozen-gate DLGN")["value"]
    passes = config.for_notebook("02", "quick").odt_epochs
    return [(f"In d = {d} (the group's SD-I) learned gates win by {gap} after {passes} passes (DLGN {values['DLGN']} "
             f"against frozen-gate DLGN {values['frozen-gate DLGN']}), and by {full_gap} under `full`",
             f"notebook 02, cells {i} (accuracy table) and {j} (verdict), the full record's check, 02's odt_epochs")]


def panel_epochs():
    i, text = printed("05", "profile quick")
    epochs = re.search(r"\bepochs=(\d+)", text).group(1)
    return [(f"05's panel on the steps target, epoch 0 → {epochs}", f"notebook 05, cell {i} (its sizes under quick)")]


def notebook_parameters():
    assert all({"PROFILE", "SEED"} <= set(p) for p in config.NOTEBOOK_PARAMETERS.values())
    having = {name: [nb for nb, p in config.NOTEBOOK_PARAMETERS.items() if name in p]
              for name in ("SEEDS", "EPOCHS", "TARGET_SEED")}
    return [(f"`SEEDS` ({ids(having['SEEDS'])}), `EPOCHS` ({ids(having['EPOCHS'])}) and `TARGET_SEED` "
             f"({ids(having['TARGET_SEED'])})", "config.NOTEBOOK_PARAMETERS")]


def seeds_and_rules():
    with_verdict = [nb for nb, what in config.QUICK_IS.items() if what != "no verdict"]
    counts = {config.for_notebook(nb, profile).sizes[k] for nb in with_verdict for profile in config.PROFILES
              for k in ("n_seeds", "odt_seeds") if k in config.for_notebook(nb, profile).sizes}
    rules = {nb: full_results.current_rule(nb) for nb in with_verdict}
    now, older = max(rules.values()), sorted(nb for nb, v in rules.items() if v < max(rules.values()))
    seeds = f"{min(counts)}–{max(counts)} seeds"
    where = "the sizes of the notebooks with a verdict (config), their registered rules, intervals.LEVEL"
    return [(f"The verdicts now, under rules v{now} ({listed(older)}, whose checks are identities, still run rules "
             f"v{min(rules.values())}; each check a statistic over {seeds} with a {intervals.LEVEL * 100:.0f} % interval", where),
            (f"every verdict is taken over {seeds} with an interval (rules v{now})", where),
            (f"how rules v{now} decide", where)]


def init_outputs():
    cfg = config.for_notebook("10", "quick", seed=parameters("10")["SEED"])
    runs = dl.studies.nodes.configs_for("SD-I", "dlgn", cfg.seeds, cfg.epochs, cfg.n_snapshots)
    data = dl.train.load_dataset(next(iter(runs.values())).data)
    size = {}
    for convention in ("he", "group"):
        means = []
        for c in runs.values():
            spec = config.ModelSpec.make(c.model.kind, c.model.widths, **{**c.model.kwargs(), "convention": convention})
            with torch.no_grad():
                means.append(dl.train.make_model(c.replace(model=spec), data)(data.x_train).abs().mean().item())
        size[convention] = f"{np.median(means):.1g}"
    where = "notebook 10's SD-I DLGN at init (dl.train.make_model), mean |output| on the training points, median over its seeds"
    return [(f"notebook 10's DLGN initialised this way starts with outputs of about {size['he']} in size", where),
            (f"u¹ = U¹·1 (outputs of about {size['group']})", where)]


def hard_gates_at_beta_4():
    line = next(x for x in solution_output("06.6").splitlines() if re.match(r"β\s+4:", x))
    soft, hard, n = re.search(r"soft R² (\S+ to \S+), hard R² (\S+ to \S+), \d+ of (\d+) agree", line).groups()
    return [(f"over 06's {WORDS[int(n)]} seeds hard R² {hard}, soft {soft}; 06 ex. 6", "SOLUTIONS.md, output 06.6")]


def frozen_gates_on_the_rough_arc():
    dlgn, relu = (full_check("06", f"{m}, K3 mixture: frozen-gate DLGN / {m} final rough-arc loss")["value"]
                  for m in ("DLGN", "ReLU"))
    return [(f"the frozen-gate DLGN's final loss there is, on average, {dlgn} times the DLGN's and {relu} times the "
             "ReLU net's", "the full record, 06's K3 checks")]


def clusters_epochs():
    sizes = {p: config.for_notebook("07", p).epochs for p in config.PROFILES}
    v2 = next(r for r in verdict.registered_rules("07") if r["version"] == 2)
    before = re.search(r"(\d+) epochs under quick", v2["replaces"]).group(1)
    assert config.QUICK_IS["07"] == "smoke test"
    return [(f"{before} epochs stopped at the onset", "07's rule v2, what it replaced"),
            (f"Now {sizes['full']} epochs under `full` ({sizes['quick']} under `quick`, a smoke test)", "07's sizes (config)")]


def boundary_ratios():
    history = {e["setting"]: e["verdict"] for e in verdict.earlier_verdicts("05")}
    v2 = next(v for s, v in history.items() if "full, rule v2" in s)
    assert all("NOT SUPPORTED" in v for s, v in history.items() if "rule v2" in s or "rule v3" in s)
    assert next(v["word"] for v in record()["05"]["verdicts"]) == "NOT SUPPORTED"
    a, b, bar = re.search(r"boundary ratio (\S+) / (\S+) \(bar (\S+)\)", v2).groups()
    s1 = [c for v in record()["05"]["verdicts"] for c in v["checks"] if c["name"].startswith("S1 ")]
    assert {c["threshold"] for c in s1} == {bar}
    return [(f"05 is still NOT SUPPORTED under rules v2, v3 and v4", "05's verdict history and the full record"),
            (f"(under v2's `full` run {a} and {b} of the distance left, under v4's {s1[0]['value']} and {s1[1]['value']}, "
             f"bar {bar})", "05's verdict history (v2, full) and the full record's S1 checks")]


def sensitivity_settings():
    i, text = printed("11", " cells × ")
    cells = re.search(r"(\d+) cells × \d+ seeds", text).group(1)
    return [(f"notebook 11 shows over {cells} settings", f"notebook 11, cell {i}")]


def longer_training():
    short, long = re.findall(r"^(\d+) epochs:$", solution_output("07.6"), re.M)
    assert int(short) == config.for_notebook("07", "quick").epochs
    passes = config.for_notebook("09", "quick").odt_epochs
    assert f"at {passes} passes" in solution_output("09.4")
    return [(f"On odt, {long} epochs instead of {short}", "SOLUTIONS.md, output 07.6"),
            (f"On SD-I all models still learn after {passes} passes (09)", "SOLUTIONS.md, output 09.4")]


def set_up():
    fmnist = listed(nb for nb, s in config.NOTEBOOK_SIZES.items() if "fmnist_per_class" in s["quick"])
    python = re.search(r"python=(\d+\.\d+)", (locations.REPO_ROOT / "environment.yml").read_text()).group(1)
    cores = {m["machine"]["cores"] for m in record().values()}
    assert len(cores) == 1
    n = len(list(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))
    return [(f"Notebooks {fmnist} use Fashion-MNIST", "the notebooks' sizes (config)"),
            (f"prepares Fashion-MNIST for {fmnist}", "the notebooks' sizes (config)"),
            (f"(Python {python},", "environment.yml"),
            (f"### Timing ({cores.pop()}-core CPU)", "the full record's machines"),
            (f"{WORDS[n].capitalize()} notebooks that rebuild", "notebooks/")]


def class_path():
    rows = re.findall(r"\| (\d+)–(\d+) \|", prose())
    assert rows and rows[0][0] == "0" and all(a[1] == b[0] for a, b in zip(rows, rows[1:])), rows
    return [(f"(the class path: {', '.join(slides.CLASS_PATH)})", "slides.CLASS_PATH"),
            (f"--only {' '.join(slides.CLASS_PATH)}", "slides.CLASS_PATH"),
            (f"## A {rows[-1][1]}-minute class", "the class table's minutes")] + [
            (f"| {a}–{b} |", "the class table's minutes, one after the other") for a, b in rows]


SOURCES = [xor_by_hand, path_sum_errors, sd1_gap, panel_epochs, notebook_parameters, seeds_and_rules, init_outputs,
           hard_gates_at_beta_4, frozen_gates_on_the_rough_arc, clusters_epochs, boundary_ratios,
           sensitivity_settings, longer_training, set_up, class_path]


@lru_cache(maxsize=None)
def quotes(source) -> tuple:
    return tuple(source())


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.__name__)
def test_the_guide_quotes_what_its_source_says(source):
    for phrase, where in quotes(source):
        assert _flat(phrase) in prose(), f"course guide: {phrase!r} is not there; {where} says so now"


def test_every_number_in_the_guide_has_a_source():
    """Strip every checked phrase, the numbers that are not outputs and the references to notebooks
    and exercises: no number is left (one-digit counts and list numbers aside)."""
    text = prose()
    for phrase in [p for source in SOURCES for p, _ in quotes(source)] + list(NOT_FROM_AN_OUTPUT):
        text = text.replace(_flat(phrase), " ")
    text = EXERCISES.sub(" ", text)
    notebooks = {p.name[:2] for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    left = [n for n in (m.rstrip(",") for m in NUMBER.findall(text)) if len(n) > 1 and n not in notebooks]
    assert left == [], f"numbers in teaching/course_guide.md with no source in tests/test_class_path.py: {left}"


# --- exercises and solutions ------------------------------------------------------------------------

def exercises_set(nb_id: str) -> list[int]:
    cell = next(c for c in notebook(nb_id).cells if "exercises" in c.metadata.get("tags", []))
    return [int(n) for n in re.findall(r"^(\d+)\. ", cell.source, re.M)]


def test_every_exercise_of_every_notebook_has_a_worked_solution():
    solved: dict[str, list[int]] = {}
    for exercise in solutions.parse(solutions.SOLUTIONS.read_text()):
        if exercise.number:
            assert exercise.snippets and all(s.output for s in exercise.snippets), f"{exercise.heading}: no output"
            solved.setdefault(exercise.notebook, []).append(exercise.number)
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        assert solved.get(path.name[:2]) == exercises_set(path.name[:2]), f"{path.name}: exercises without a solution"


def test_the_exercises_the_guide_assigns_exist_and_are_solved():
    refs = [(nb, int(k)) for nb, ks in EXERCISES.findall(prose()) for k in re.findall(r"\d+", ks)]
    assert ("10", 2) in refs and ("11", 2) in refs
    solved = {(e.notebook, e.number) for e in solutions.parse(solutions.SOLUTIONS.read_text()) if e.snippets}
    for nb, k in refs:
        assert k in exercises_set(nb), f"the guide assigns {nb} ex. {k}, which notebook {nb} does not set"
        assert (nb, k) in solved, f"the guide assigns {nb} ex. {k}, which SOLUTIONS.md does not solve"


def test_what_fails_now_names_every_claim_the_full_record_does_not_support():
    section = report.COURSE_GUIDE.read_text().split("What fails now")[1].split("Suggestions for class")[0]
    named = set(re.findall(r"^- \*\*(\d\d)\*\*", section, re.M))
    failing = {nb for nb, m in record().items() for v in m.get("verdicts", []) if v["word"] == "NOT SUPPORTED"}
    assert failing and failing <= named, f"not named under 'What fails now': {sorted(failing - named)}"
