"""The circle notebooks 05 (half-spaces on the target's jumps), 06 (overlap kernels) and 08 (ReLU
beside DLGN, on 06's circle runs): their targets, run sets and the tables they print.

- **Targets** (``target_params``, ``circle_data``): three random steps targets drawn with target
  seeds ``TARGET_SEED + k`` and one mixture drawn with ``TARGET_SEED`` (``data.random_circle_target``).
- **Run sets**: ``smooth_configs`` (05: the DLGN without and with gate biases) and
  ``overlap_configs`` (06, and 08 through ``overlap_sizes``: DLGN, ReLU net, frozen-gate DLGN). One
  function per run set, so notebooks that share runs share cache entries by construction.
- **Tables**: the final fit (``final_fit``), soft- against hard-gate fit (``fidelity_grid``,
  ``fidelity_summary``), init against trained (``init_vs_trained``), 05's steps quantities
  (``steps_summary``), the per-arc times of the mixture (``arc_times``, ``fit_times``) and the
  frozen-gate control (``frozen_ratio``).
- **Figures and sliders**: 05's state figure, 06's kernel panels and their epoch sliders.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .. import circle, config, data, fidelity, runs as runs_module, text, widgets
from ..plots import MODEL_NAMES
from ..plots import circle as circle_plots

__all__ = ["KINDS", "SETTINGS", "STEPS", "alignment_rises", "arc_times", "check_runs", "chosen_epochs",
           "circle_data", "distance_baselines", "ends_of", "fidelity_grid", "fidelity_summary", "final_fit",
           "fit_times", "fit_times_text", "frozen_pairs", "frozen_ratio", "frozen_ratio_text", "get_or_train",
           "init_vs_trained", "jump_lines", "kernel_figure", "kernel_slider", "left_out_lines", "overlap_configs",
           "overlap_sizes", "per_run", "rise_table", "seed_ratios", "seed_rises", "smooth_configs",
           "snapshot_tables", "state_figure", "state_slider", "steps_seed_values", "steps_summary", "target_lines",
           "target_params", "times_table", "with_state"]

#: The three step targets on the circle (05, 06): one, two and three jumps.
STEPS = ("steps 1", "steps 2", "steps 3")
TARGETS = STEPS + ("mixture",)
#: Notebook 05's two settings: model options of the DLGN.
SETTINGS = {"no gate bias": {}, "gate bias": {"gate_bias": True}}
#: Notebook 06's models (08 compares the first two; the frozen-gate DLGN is the kernel-regime control).
KINDS = ("dlgn", "relu", "dlgn_frozen")
FIT_COLUMNS = ["train loss", "train metric", "test metric"]
ARCS = ("smooth", "rough")


# --------------------------------------------------------------------------- targets and run sets

def target_params(target_seed: int) -> dict[str, dict]:
    """The random targets by name: ``steps k`` drawn with ``target_seed + k - 1``, the mixture with
    ``target_seed``."""
    params = {name: data.random_circle_target("steps", target_seed + k) for k, name in enumerate(STEPS)}
    params["mixture"] = data.random_circle_target("mixture", target_seed)
    return params


def circle_data(cfg) -> dict[str, config.DataSpec]:
    """The circle data sets by target name, ``cfg.n_train`` training angles, targets of
    ``cfg.target_seed``."""
    return {name: config.DataSpec.make("circle", target=name.split()[0], n_train=cfg.n_train, **params)
            for name, params in target_params(cfg.target_seed).items()}


def smooth_configs(cfg) -> dict[tuple, config.RunConfig]:
    """Notebook 05's runs, keyed (target, setting, seed): the DLGN without and with gate biases."""
    specs = circle_data(cfg)
    return {(target, setting, seed): cfg.run(specs[target], config.ModelSpec.make("dlgn", cfg.widths, **options),
                                             name=f"DLGN, {setting}, circle-{target} (seed {seed})").replace(seed=seed)
            for target in TARGETS for setting, options in SETTINGS.items() for seed in cfg.seeds}


def overlap_sizes(cfg) -> config.NotebookConfig:
    """The sizes of notebook 06's runs: ``cfg`` itself in 06; in 08, 06's sizes with 08's seed,
    target seed and number of seeds."""
    if cfg.notebook == "06":
        return cfg
    sizes = config.for_notebook("06", cfg.profile, seed=cfg.seed, n_seeds=cfg.n_seeds)
    return dataclasses.replace(sizes, target_seed=cfg.target_seed)


def overlap_configs(cfg) -> dict[tuple, config.RunConfig]:
    """Notebook 06's runs (08 trains its own seeds with it), keyed (target, kind, seed): DLGN, ReLU
    net and frozen-gate DLGN on every target. ``cfg``: notebook 06's or 08's sizes."""
    cfg = overlap_sizes(cfg)
    specs = circle_data(cfg)
    return {(target, kind, seed): cfg.run(specs[target], config.ModelSpec.make(kind, cfg.widths),
                                          name=f"{MODEL_NAMES[kind]} on circle-{target} (seed {seed})").replace(seed=seed)
            for target in TARGETS for kind in KINDS for seed in cfg.seeds}


def get_or_train(configs: Mapping[tuple, config.RunConfig]) -> dict:
    """The runs of a run set (trained together where missing, else read from the cache), same keys."""
    return dict(zip(configs, runs_module.get_or_train_many(list(configs.values()))))


def target_lines(specs: Mapping[str, config.DataSpec]) -> str:
    """One line per target: its parameters (not its name or grid size), rounded to 3 decimals."""
    lines = []
    for name, spec in specs.items():
        params = {k: v for k, v in spec.kwargs().items() if k not in ("target", "n_train")}
        lines.append(f"{name}: " + "; ".join(f"{k} {np.round(v, 3).tolist()}" for k, v in params.items()))
    return text.wrap("\n".join(lines))


def distance_baselines(params: Mapping[str, dict]) -> pd.DataFrame:
    """Per steps target: the uniform-placement distance and the antipodal floor (rad)."""
    marks = {t: params[t]["discontinuities"] for t in STEPS}
    return pd.DataFrame({"uniform distance": {t: circle.uniform_distance(m) for t, m in marks.items()},
                         "antipodal floor": {t: circle.antipodal_distance_floor(m) for t, m in marks.items()}})


def jump_lines(params: Mapping[str, dict]) -> str:
    """Notebook 05's description of its targets: the steps targets' jumps, the mixture's arcs."""
    lines = [f"{name}: jumps at θ = " + ", ".join(f"{a:.3f}" for a in params[name]["discontinuities"])
             for name in STEPS]
    smooth, rough = params["mixture"]["smooth"], params["mixture"]["rough"]
    lines.append(f"mixture: smooth arc {smooth[0]:.3f} → {smooth[1]:.3f} "
                 f"({circle.ccw_length(smooth) / (2 * np.pi):.0%} of the circle), rough arc {rough[0]:.3f} → {rough[1]:.3f}")
    return text.wrap("\n".join(lines))


# --------------------------------------------------------------------------- tables

def final_fit(runs: Mapping[tuple, object], columns: Sequence[str], names: Mapping = MODEL_NAMES) -> pd.DataFrame:
    """Mean over seeds of each run's final train loss, train metric and test metric.

    ``runs`` is keyed by tuples whose last element is the seed; the other elements name the rows
    (``columns``), in the order they first appear; model kinds are shown by ``names``.
    """
    rows = [{**{c: names.get(v, v) for c, v in zip(columns, key[:-1])}, "seed": key[-1],
             **{c: run.final(c.replace(" ", "_")) for c in FIT_COLUMNS}} for key, run in runs.items()]
    return pd.DataFrame(rows).groupby(list(columns), sort=False)[FIT_COLUMNS].mean()


def check_runs(runs: Mapping[tuple, object], float64: bool = False) -> dict:
    """``fidelity.check_run`` of every run, same keys."""
    return {key: fidelity.check_run(run, float64=float64) for key, run in runs.items()}


def fidelity_grid(checks: Mapping[tuple, fidelity.Fidelity], columns: Sequence[str]) -> pd.DataFrame:
    """One cell per run, "soft / hard agree|DISAGREE" (3 decimals); rows: the key less its seed
    (named ``columns``), in key order; columns: the seeds."""
    frame = pd.DataFrame([{**dict(zip(columns, key[:-1])), "seed": key[-1],
                           "soft / hard": f"{f.soft:.3f} / {f.hard:.3f} " + ("agree" if f.agrees else "DISAGREE")}
                          for key, f in checks.items()])
    table = frame.pivot(index=list(columns), columns="seed", values="soft / hard")
    order = list(dict.fromkeys(tuple(key[:-1]) for key in checks))
    return table.loc[order]


def fidelity_summary(checks: Mapping[tuple, fidelity.Fidelity], names: Mapping = MODEL_NAMES) -> pd.DataFrame:
    """Per (target, model): mean soft and hard fit over seeds, runs that agree, runs. Keys
    (target, kind, seed)."""
    frame = pd.DataFrame([{"target": t, "model": names[k], "seed": s, "soft": f.soft, "hard": f.hard,
                           "agrees": f.agrees} for (t, k, s), f in checks.items()])
    return frame.groupby(["target", "model"], sort=False).agg(
        soft=("soft", "mean"), hard=("hard", "mean"), agree=("agrees", "sum"), runs=("agrees", "size"))


def left_out_lines(checks: Mapping[tuple, fidelity.Fidelity], settings: Sequence[str]) -> str:
    """Notebook 05: per setting, the steps runs whose hard gates disagree; the mixture's agreeing runs."""
    lines = []
    for setting in settings:
        steps_runs = [key for key in checks if key[0] in STEPS and key[1] == setting]
        out = [key for key in steps_runs if not checks[key].agrees]
        lines.append(f"{setting}: {len(out)} of {len(steps_runs)} steps runs left out of S1–S3"
                     + (" (" + ", ".join(f"{t} seed {seed}" for t, _, seed in out) + ")" if out else ""))
    mixture = [f.agrees for key, f in checks.items() if key[0] == "mixture"]
    lines.append(f"mixture: {sum(mixture)} of {len(mixture)} runs agree (not used by M1–M2 either way)")
    return text.wrap("\n".join(lines))


def snapshot_tables(runs: Mapping[tuple, object], measure, columns: Sequence[str], epochs=None) -> pd.DataFrame:
    """``circle.snapshot_table`` of every run, keys as ``columns``, one frame. ``measure`` is one
    function or a callable ``measure(key)`` → function when given as a dict-like ``{key: fn}``;
    ``epochs(run)`` picks the snapshots (default: all).

    Kept in the analysis cache (:func:`dlgn_lib.runs.cached_table`) when every measure is a library function (or
    a ``functools.partial`` of one); a lambda or a notebook's own function is measured every time.
    """
    measures = {key: measure[key] if isinstance(measure, Mapping) else measure for key in runs}
    picked = {key: None if epochs is None else list(epochs(run)) for key, run in runs.items()}

    def compute():
        frames = [circle.snapshot_table(run, measures[key], epochs=picked[key], **dict(zip(columns, key)))
                  for key, run in runs.items()]
        return pd.concat(frames, ignore_index=True)

    names = [runs_module.function_name(measures[key]) for key in runs]
    if None in names:
        return compute()
    params = {"keys": [list(key) for key in runs], "columns": list(columns), "measures": names,
              "epochs": [picked[key] for key in runs]}
    return runs_module.cached_table("studies.circle.snapshot_tables", params, runs.values(), compute)


def ends_of(run) -> list[int]:
    """A run's first and last snapshot epochs (for ``snapshot_tables``)."""
    return [0, run.epochs[-1]]


def with_state(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows at epoch 0 ("init") and at the frame's last epoch ("trained"), with a ``state`` column."""
    last = frame["epoch"].max()
    picked = frame[frame["epoch"].isin([0, last])]
    return picked.assign(state=np.where(picked["epoch"] == 0, "init", "trained"))


def init_vs_trained(frame: pd.DataFrame, columns: Sequence[str], by: Sequence[str] = ("model",),
                    names: Mapping | None = MODEL_NAMES) -> pd.DataFrame:
    """Mean over runs of ``columns`` at init (epoch 0) and at the last epoch, per ``by`` and state;
    the first level's kinds shown by ``names``."""
    table = with_state(frame).groupby([*by, "state"], sort=False)[list(columns)].mean()
    return table.rename(index=names, level=0) if names else table


def per_run(frame: pd.DataFrame) -> pd.DataFrame:
    """Label each run by target and seed, so that ``plots.circle.epoch_curves`` draws one thin line
    per run."""
    return frame.assign(seed=frame["target"] + ", seed " + frame["seed"].astype(str))


def steps_summary(ends: pd.DataFrame, floors: Mapping[str, float], settings: Sequence[str] = tuple(SETTINGS),
                  steps: Sequence[str] = STEPS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Notebook 05's S1–S3 quantities from the init and trained rows of the agreeing steps runs
    (columns target, setting, seed, state, weighted distance, purity, rotated purity, tolerant
    share, rotated tolerant share).

    Per (setting, target): the runs, the S1 distance ratio of the seed means (trained / init with gate
    biases, ``circle.ratio_above_floor`` without), and the S2 / S3 gains (excess over random rotation,
    trained minus init, mean over seeds); a target without runs has NaN. Returns that table and its
    mean over targets per setting.
    """
    ends = ends.assign(**{"purity excess": ends["purity"] - ends["rotated purity"],
                          "tolerant excess": ends["tolerant share"] - ends["rotated tolerant share"]})
    rows = []
    for (setting, target), part in ends.groupby(["setting", "target"], sort=False):
        distance = part.groupby("state")["weighted distance"].mean()
        ratio = (distance["trained"] / distance["init"] if setting == "gate bias"
                 else circle.ratio_above_floor(distance["trained"], distance["init"], floors[target]))
        per_seed = part.pivot(index="seed", columns="state", values=["purity excess", "tolerant excess"])
        rows.append({"setting": setting, "target": target, "runs": len(per_seed), "distance ratio": ratio,
                     **{f"{what} gain": (per_seed[f"{what} excess"]["trained"] - per_seed[f"{what} excess"]["init"]).mean()
                        for what in ("purity", "tolerant")}})
    table = pd.DataFrame(rows, columns=["setting", "target", "runs", "distance ratio", "purity gain", "tolerant gain"])
    table = table.set_index(["setting", "target"]).reindex(
        pd.MultiIndex.from_product([list(settings), list(steps)], names=["setting", "target"]))
    table["runs"] = table["runs"].fillna(0).astype(int)
    means = table.groupby(level="setting", sort=False)[["distance ratio", "purity gain", "tolerant gain"]].mean()
    return table, means


def steps_seed_values(ends: pd.DataFrame, floors: Mapping[str, float], setting: str) -> pd.DataFrame:
    """Notebook 05's S1–S3 per seed under rule v3, one setting, from the init and trained rows of
    its steps runs (``steps_summary``'s columns).

    One row per seed that has runs in ``ends`` (seeds in order), with the number of its runs
    (``runs``); ``distance trained`` and ``distance init``: the sums over its runs of the
    importance-weighted boundary distance minus the floor (the target's ``floors`` entry without
    gate biases, 0 with them), whose ratio of means over seeds is S1; ``purity gain`` and
    ``tolerant gain``: the mean over its runs of the excess over random rotation, trained minus init
    (S2, S3).
    """
    part = ends[ends["setting"] == setting]
    columns = ["runs", "distance trained", "distance init", "purity gain", "tolerant gain"]
    rows = []
    for seed, runs in part.groupby("seed", sort=True):
        wide = runs.pivot(index="target", columns="state",
                          values=["weighted distance", "purity", "rotated purity", "tolerant share",
                                  "rotated tolerant share"])
        floor = (np.array([floors[t] for t in wide.index], dtype=float) if setting == "no gate bias"
                 else np.zeros(len(wide)))

        def gain(what, rotated):
            return float(((wide[what]["trained"] - wide[rotated]["trained"])
                          - (wide[what]["init"] - wide[rotated]["init"])).mean())

        rows.append({"seed": seed, "runs": len(wide),
                     "distance trained": float((wide["weighted distance"]["trained"] - floor).sum()),
                     "distance init": float((wide["weighted distance"]["init"] - floor).sum()),
                     "purity gain": gain("purity", "rotated purity"),
                     "tolerant gain": gain("tolerant share", "rotated tolerant share")})
    return pd.DataFrame(rows, columns=["seed", *columns]).set_index("seed")


def seed_ratios(times: pd.DataFrame, group: str, what: str) -> np.ndarray:
    """One smooth / rough ratio per seed (``times_table`` rows of ``group``); a seed on which neither
    arc gets there counts as inf (``median_ratio`` takes their median)."""
    return times.loc[group, f"{what} ratio"].fillna(np.inf).to_numpy(dtype=float)


def arc_times(part: pd.DataFrame, fit_fraction: float, rise_fraction: float) -> dict[str, float]:
    """Notebook 05, one mixture run: per arc the epochs to ``fit_fraction`` of the initial loss (fit)
    and the sustained-rise epoch of the soft path mass density (rise), and the ratios smooth / rough."""
    row = {}
    for arc in ARCS:
        row[f"fit {arc}"] = circle.epochs_to_fraction_of_initial(part["epoch"], part[f"loss {arc}"], fit_fraction)
        row[f"rise {arc}"] = circle.sustained_rise_epoch(part["epoch"], part[f"soft path mass {arc}"], rise_fraction)
    row["fit ratio"] = circle.time_ratio(row["fit smooth"], row["fit rough"])
    row["rise ratio"] = circle.time_ratio(row["rise smooth"], row["rise rough"])
    return row


def fit_times(part: pd.DataFrame, fit_fraction: float) -> dict[str, float]:
    """Notebooks 06 and 08, one mixture run: per arc the epochs to ``fit_fraction`` of the initial
    loss, their ratio smooth / rough, and the final loss per arc."""
    part = part.sort_values("epoch")
    row = {f"fit {arc}": circle.epochs_to_fraction_of_initial(part["epoch"], part[f"loss {arc}"], fit_fraction)
           for arc in ARCS}
    row["fit ratio"] = circle.time_ratio(row["fit smooth"], row["fit rough"])
    row.update({f"final loss {arc}": float(part[f"loss {arc}"].iloc[-1]) for arc in ARCS})
    return row


def times_table(mixture: pd.DataFrame, by: Sequence[str], times, *args, names: Mapping | None = None) -> pd.DataFrame:
    """``times(part, *args)`` (``arc_times`` or ``fit_times``) of every run of the mixture table,
    indexed by ``by`` (the last of them the seed); the first level's kinds shown by ``names``."""
    rows = [{**dict(zip(by, key)), **times(part, *args)} for key, part in mixture.groupby(list(by), sort=False)]
    table = pd.DataFrame(rows)
    if names:
        table[by[0]] = table[by[0]].map(lambda v: names.get(v, v))
    return table.set_index(list(by))


def fit_times_text(times: pd.DataFrame) -> str:
    """``fit_times`` rows as printed by 06 and 08: times to 1 decimal, ratios to 3, losses as x.xxe-xx."""
    return text.table(times.round({c: 3 if "ratio" in c else 1 for c in times.columns if "loss" not in c}),
                      formatters={c: "{:.2e}".format for c in times.columns if "loss" in c})


def median_ratio(times: pd.DataFrame, group: str, what: str) -> float:
    """Median over seeds of a smooth / rough ratio; a seed on which neither arc gets there counts as inf."""
    return float(np.median(seed_ratios(times, group, what)))


def frozen_ratio(times: pd.DataFrame, frozen: str = MODEL_NAMES["dlgn_frozen"]) -> pd.DataFrame:
    """Per model: the final rough-arc loss, mean over seeds, and the frozen-gate DLGN's over it."""
    rough = times.groupby(level="model", sort=False)["final loss rough"].mean()
    return pd.DataFrame({"final rough-arc loss": rough, "frozen-gate / model": rough[frozen] / rough})


def frozen_ratio_text(table: pd.DataFrame) -> str:
    """The frozen-gate ratio table as 05 prints it (losses in scientific notation)."""
    return text.table(table, formatters={"final rough-arc loss": "{:.3e}".format, "frozen-gate / model": "{:.3g}".format})


def alignment_rises(steps: pd.DataFrame) -> pd.DataFrame:
    """Per run (model, target, seed): the centred alignment at the last snapshot minus at the first."""
    ends = steps.sort_values("epoch").groupby(["model", "target", "seed"], sort=False)["centred"].agg(["first", "last"])
    return (ends["last"] - ends["first"]).rename("rise").reset_index()


def seed_rises(rises: pd.DataFrame, kind: str, kept=None) -> pd.DataFrame:
    """Notebook 06's K1 per seed (rule v3): the mean rise over a model's steps runs of that seed,
    only the runs in ``kept`` ((target, kind, seed) keys; None: every run), and their number.
    Seeds with no such run are left out."""
    mine = rises[rises["model"] == kind]
    if kept is not None:
        mine = mine[[(t, kind, s) in kept for t, s in zip(mine["target"], mine["seed"])]]
    by_seed = mine.groupby("seed")["rise"]
    return pd.DataFrame({"rise": by_seed.mean(), "runs": by_seed.size()})


def frozen_pairs(mixture: pd.DataFrame, kind: str, at: str, frozen: str = "dlgn_frozen") -> np.ndarray:
    """Notebook 06's K3 per seed (rule v3): (frozen-gate DLGN's rough-arc loss, the model's) of the
    same seed, at the last snapshot (``at="last"``) or at the init (``"first"``); one row per seed
    in the order of the seeds. Feeds ``intervals.bootstrap(..., "ratio of means")``."""
    if at not in ("first", "last"):
        raise ValueError(f"at={at!r}: choose 'first' (the init) or 'last' (the end of training)")
    losses = (mixture.sort_values("epoch").groupby(["model", "seed"], sort=False)["loss rough"].agg(at))
    seeds = sorted(set(losses[kind].index) & set(losses[frozen].index))
    return np.array([[losses[frozen][s], losses[kind][s]] for s in seeds], dtype=float)


def rise_table(rises: pd.DataFrame, names: Mapping = MODEL_NAMES) -> pd.DataFrame:
    """Mean rise per model and target, the mean over all a model's runs, and their number."""
    by_model = rises.groupby("model", sort=False)["rise"]
    return (rises.pivot_table(index="model", columns="target", values="rise", aggfunc="mean", sort=False)
            .reindex(columns=list(STEPS)).assign(**{"mean over runs": by_model.mean(), "n": by_model.size()})
            .rename(index=names))


def chosen_epochs(snapshots: Sequence[int], wants: Sequence[float] = (0, 10, 60, None)) -> list[int]:
    """The snapshot epochs nearest to ``wants`` (None: the last), sorted, without repeats."""
    return sorted({min(snapshots, key=lambda e: abs(e - (snapshots[-1] if want is None else want)))
                   for want in wants})


# --------------------------------------------------------------------------- figures and sliders

def state_figure(runs: Mapping[tuple, object], name: str, setting: str, epoch: int, seed: int):
    """Notebook 05: ``plots.circle.smooth_state`` of one run at one snapshot."""
    run = runs[name, setting, seed]
    return circle_plots.smooth_state(run.model_at(epoch), run.dataset(),
                                     title=f"DLGN, {setting}, {name} target, epoch {epoch} (seed {seed})")


def kernel_panels(runs: Mapping[tuple, object], target: str, epochs: Sequence[int], seed: int,
                  kinds: Sequence[str] = KINDS, names: Mapping = MODEL_NAMES):
    """The sorted training angles and the cosine overlap kernel of each model kind at each epoch,
    keyed (model name, "epoch e")."""
    theta = np.sort(runs[target, kinds[0], seed].dataset().meta["theta_train"].numpy())
    return theta, {(names[k], f"epoch {e}"): circle_plots.cosine_kernel_on_angles(runs[target, k, seed].model_at(e), theta)
                   for k in kinds for e in epochs}


def kernel_figure(runs: Mapping[tuple, object], target: str, epochs: Sequence[int], seed: int, title: str,
                  kinds: Sequence[str] = KINDS, by_epoch: bool = False):
    """``plots.circle.kernel_heatmaps`` of ``kernel_panels`` with the target's arcs; ``by_epoch``:
    one row per epoch instead of per model."""
    theta, panels = kernel_panels(runs, target, epochs, seed, kinds)
    if by_epoch:
        panels = {(e, m): K for (m, e), K in panels.items()}
    arcs = circle.target_arcs(runs[target, kinds[0], seed].dataset())
    return circle_plots.kernel_heatmaps(panels, theta, arcs=arcs, title=title)


def state_slider(runs: Mapping[tuple, object], shown: Mapping[str, str], seed: int, title: str):
    """Notebook 05's panel: target (``shown``: label → target name), setting and epoch of seed ``seed``."""
    epochs = runs[next(iter(shown.values())), next(iter(SETTINGS)), seed].epochs
    return widgets.figure_panel(
        lambda target, setting, epoch: state_figure(runs, shown[target], setting, epoch, seed),
        {"target": widgets.dropdown([(name, key) for key, name in shown.items()], "target"), "setting": widgets.dropdown(list(SETTINGS), "setting"),
         "epoch": widgets.epoch_selector(epochs)}, title=title)


def kernel_slider(runs: Mapping[tuple, object], seed: int, title: str):
    """Notebook 06's panel: any target, any snapshot, the three models' kernels."""
    epochs = runs["mixture", KINDS[0], seed].epochs
    return widgets.figure_panel(
        lambda target, epoch: kernel_figure(runs, target, [epoch], seed, f"{target} target", by_epoch=True),
        {"target": widgets.dropdown(list(TARGETS), "target"), "epoch": widgets.epoch_selector(epochs)}, title=title)
