"""Notebook 11: sensitivity maps of claims C5, C6 and C7 over grids of settings.

C5 on the circle:

* the grid's targets (``steps_params``, ``mixture_params``, ``target_name``) and models
  (``model_spec``), and its run set (``grid_configs``): the cells with the group's initialisation,
  β 4 and the random targets are notebook 05's configs, so they share its cache entries;
* ``measure_effects``: one row of effects per run (``dl.circle.steps_effects`` or
  ``mixture_effects``), with the cell's factors;
* ``effect_tables``: ``dl.sensitivity.effect_table`` of every effect.

C6 on odt (the group's SD-I, notebook 07's data): ``c6_configs`` (the DLGN over points, width,
initialisation and depth) and ``c6_effects`` (07's two measures per run: the extra growth Δ of the
clustering score and the deepest layer's effective directions above the rule's bar).

C7 on the circle: ``c7_configs`` (the ReLU net and the DLGN over initialisation, width and target;
the DLGN cells at the C5 grid's width are its runs) and ``c7_effects`` (08's circle rows R1–R4
per run, measured the same way for both models).

The effects of every map are positive in the claimed direction; ``map_tables`` gives their
``dl.sensitivity.effect_table``.
"""
from __future__ import annotations

import pandas as pd

from .. import circle, clusters, compare, config, data, protocol, runs as runs_module
from . import clusters as clusters_study

__all__ = ["C6_EFFECTS", "C6_FACTORS", "C7_EFFECTS", "C7_FACTORS", "EFFECTS", "c6_configs", "c6_effects",
           "c7_configs", "c7_effects", "effect_tables", "grid_configs", "map_tables", "measure_effects"]

#: The factors of a cell, in the order of its key (after the target kind, before the seed).
FACTORS = ["n_train", "init", "beta", "bias", "target"]
#: The effects measured per run, by target kind.
EFFECTS = {"steps": ["boundary", "purity gain", "tolerant gain"], "mixture": ["fit lead", "mass lead"]}


def steps_params(target, target_seed: int) -> dict:
    """Data parameters of a steps target: ``{}`` for "default", else the random target of seed
    ``target_seed + target``."""
    return {} if target == "default" else data.random_circle_target("steps", target_seed + target)


def mixture_params(target, target_seed: int) -> dict:
    """As ``steps_params``, for a mixture target."""
    return {} if target == "default" else data.random_circle_target("mixture", target_seed + target)


def target_name(target, target_seed: int) -> str:
    """"default", or "random <seed>" for the random target ``target``."""
    return "default" if target == "default" else f"random {target_seed + target}"


def model_spec(init: str, beta: float, bias: bool, widths) -> config.ModelSpec:
    """The grid's DLGN. β 4 is the model's default and gate biases are off by default: both are
    left implicit, so these cells are notebook 05's configs and share its cache entries."""
    options = {"convention": init, **({} if beta == 4.0 else {"beta": beta}), **({"gate_bias": True} if bias else {})}
    return config.ModelSpec.make("dlgn", widths, **options)


def grid_configs(cfg, target_seed: int) -> dict:
    """The grid's runs, keyed ``(kind, n_train, init, beta, "on"/"off", target name, seed)``, over
    ``cfg``'s steps and mixture targets, ``n_trains``, ``inits``, ``betas``, ``biases`` and ``seeds``."""
    grid = {}
    for kind, targets, params in (("steps", cfg.steps_targets, steps_params),
                                  ("mixture", cfg.mixture_targets, mixture_params)):
        for n_train in cfg.n_trains:
            for target in targets:
                spec = config.DataSpec.make("circle", target=kind, n_train=n_train, **params(target, target_seed))
                for init in cfg.inits:
                    for beta in cfg.betas:
                        for bias in cfg.biases:
                            for seed in cfg.seeds:
                                cell = (kind, n_train, init, beta, "on" if bias else "off",
                                        target_name(target, target_seed), seed)
                                grid[cell] = cfg.run(spec, model_spec(init, beta, bias, cfg.widths),
                                                     name=f"DLGN {cell}").replace(seed=seed)
    return grid


def measure_effects(runs: dict, n_rotations: int) -> pd.DataFrame:
    """One row per run of ``grid_configs``' keys: ``kind``, the ``FACTORS``, ``seed`` and the run's
    effects (``dl.circle.steps_effects`` with ``n_rotations`` rotations, or ``mixture_effects``)."""
    def compute():
        rows = []
        for (kind, *cell, seed), run in runs.items():
            effects = circle.steps_effects(run, n_rotations) if kind == "steps" else circle.mixture_effects(run)
            rows.append({"kind": kind, **dict(zip(FACTORS, cell)), "seed": seed, **effects})
        return pd.DataFrame(rows)
    return runs_module.cached_table("studies.sensitivity.measure_effects", {"keys": [list(k) for k in runs], "n_rotations": n_rotations},
                      runs.values(), compute)


def map_tables(effects: pd.DataFrame, factors, effects_by_kind) -> dict:
    """``dl.sensitivity.effect_table`` over ``factors`` of every effect of ``effects_by_kind``
    (target kind → effect names), each on the rows of its kind."""
    from .. import sensitivity
    return {name: sensitivity.effect_table(effects[effects["kind"] == kind], factors, name)
            for kind, names in effects_by_kind.items() for name in names}


def effect_tables(effects: pd.DataFrame) -> dict:
    """``dl.sensitivity.effect_table`` of every effect of ``EFFECTS``, over the ``FACTORS``."""
    return map_tables(effects, FACTORS, EFFECTS)


# --------------------------------------------------------------------------- C6: clustering on odt

#: The factors of a C6 cell, in the order of its key (after "odt", before the seed).
C6_FACTORS = ["points", "width", "init", "depth"]
#: The C6 effects per run (one kind of data: odt).
C6_EFFECTS = {"odt": ["extra growth Δ", "directions above the bar"]}


def c6_configs(cfg) -> dict:
    """The C6 grid's DLGN runs on SD-I, keyed ``("odt", points, width, init, depth, seed)`` over
    ``cfg.c6_points`` (None: all 40,000), ``c6_widths``, ``inits``, ``c6_depths`` and ``seeds``,
    trained as notebook 07 trains (``c6_epochs`` epochs, ``c6_lr``, batch ``c6_batch_size``; only
    init and the end are read, so two snapshots)."""
    grid = {}
    for points in cfg.c6_points:
        spec = protocol.data_spec("SD-I", points)
        for width in cfg.c6_widths:
            for init in cfg.inits:
                for depth in cfg.c6_depths:
                    model = config.ModelSpec.make("dlgn", (width,) * depth, convention=init)
                    for seed in cfg.seeds:
                        cell = ("odt", spec.kwargs()["n_total"], width, init, depth, seed)
                        grid[cell] = config.RunConfig(data=spec, model=model, epochs=cfg.c6_epochs, lr=cfg.c6_lr,
                                                      batch_size=cfg.c6_batch_size, n_snapshots=2, seed=seed,
                                                      name=f"DLGN {cell}")
    return grid


def c6_run_effects(run, threshold: float, min_directions: float) -> dict[str, float]:
    """One DLGN run's C6 effects, positive in the claimed direction (notebook 07's measures):
    ``extra growth Δ`` = (s_L − s_1) trained − (s_L − s_1) at init of the clustering score at
    ``threshold``, and ``directions above the bar`` = the deepest layer's effective directions
    after training − ``min_directions`` (07's guard against collapse)."""
    tables = {state: clusters.layer_table(clusters_study.unit_normals(run.model_at(run.epochs[-1] if epoch is None else epoch)),
                                          threshold)
              for state, epoch in clusters_study.STATES.items()}
    growth = {state: float(t["score"].iloc[-1] - t["score"].iloc[0]) for state, t in tables.items()}
    return {"extra growth Δ": growth["trained"] - growth["init"],
            "directions above the bar": float(tables["trained"]["n_directions"].iloc[-1]) - min_directions}


def c6_effects(runs: dict, threshold: float, min_directions: float) -> pd.DataFrame:
    """One row per run of ``c6_configs``' keys: ``kind``, the ``C6_FACTORS``, ``seed`` and
    ``c6_run_effects``."""
    return pd.DataFrame([{"kind": kind, **dict(zip(C6_FACTORS, cell)), "seed": seed,
                          **c6_run_effects(run, threshold, min_directions)}
                         for (kind, *cell, seed), run in runs.items()])


# --------------------------------------------------------------------------- C7: the ReLU net beside the DLGN

#: The factors of a C7 cell, in the order of its key (after the target kind, before the seed).
C7_FACTORS = ["model", "init", "width", "target"]
#: The C7 effects per run, by target kind: notebook 08's circle rows R1–R4.
C7_EFFECTS = {"steps": ["R1 switches settle", "R3 alignment rise"],
              "mixture": ["R2 rough switch rise", "R4 fit lead"]}
#: The models side by side (run kinds and their names in the maps).
C7_MODELS = {"relu": "ReLU", "dlgn": "DLGN"}


def c7_configs(cfg, target_seed: int) -> dict:
    """The C7 grid's runs, keyed ``(kind, model, init, width, target name, seed)``: both models
    over ``inits``, ``c7_widths`` (the first ``n_trains``, the C5 grid's targets), with the C5
    grid's run sizes. The DLGN is the C5 grid's (β 4, no gate biases): at its width these are its
    runs."""
    grid = {}
    n_train = cfg.n_trains[0]
    for kind, targets, params in (("steps", cfg.steps_targets, steps_params),
                                  ("mixture", cfg.mixture_targets, mixture_params)):
        for target in targets:
            spec = config.DataSpec.make("circle", target=kind, n_train=n_train, **params(target, target_seed))
            for model, shown in C7_MODELS.items():
                for init in cfg.inits:
                    for width in cfg.c7_widths:
                        widths = (width,) * len(cfg.widths)
                        spec_model = (model_spec(init, 4.0, False, widths) if model == "dlgn"
                                      else config.ModelSpec.make("relu", widths, convention=init))
                        for seed in cfg.seeds:
                            cell = (kind, shown, init, width, target_name(target, target_seed), seed)
                            grid[cell] = cfg.run(spec, spec_model, name=f"{shown} {cell}").replace(seed=seed)
    return grid


def c7_run_effects(run, kind: str, n_grid: int, fit_fraction: float = 0.1) -> dict[str, float]:
    """One circle run's C7 effects (DLGN or ReLU net), positive in the direction of 08's rows:

    - steps: ``R1 switches settle`` = 1 − the mean switch distance to the jumps trained / init
      (``compare.switch_metrics`` on an ``n_grid``-angle grid), ``R3 alignment rise`` = the centred
      overlap-kernel alignment trained − init;
    - mixture: ``R2 rough switch rise`` = the rough arc's share of switches trained − init,
      ``R4 fit lead`` = log(rough / smooth epochs to ``fit_fraction`` of the arc's initial loss)
      (``circle.fit_lead``; 08's R4 is the smooth / rough ratio, below 1 where this is positive).
    """
    dataset = run.dataset()
    ends = [run.model_at(epoch).double() for epoch in (0, run.epochs[-1])]
    switches = [compare.switch_metrics(model, dataset, n_grid) for model in ends]
    if kind == "steps":
        centred = [circle.kernel_alignments(model, dataset.meta["theta_train"], dataset.y_train, {})["centred"]
                   for model in ends]
        return {"R1 switches settle": 1.0 - switches[1]["switch distance"] / switches[0]["switch distance"],
                "R3 alignment rise": centred[1] - centred[0]}
    if kind == "mixture":
        return {"R2 rough switch rise": switches[1]["switch share rough"] - switches[0]["switch share rough"],
                "R4 fit lead": circle.fit_lead(run, fit_fraction)}
    raise ValueError(f"kind={kind!r}: C7 effects are measured on 'steps' or 'mixture' targets")


def c7_effects(runs: dict, n_grid: int) -> pd.DataFrame:
    """One row per run of ``c7_configs``' keys: ``kind``, the ``C7_FACTORS``, ``seed`` and
    ``c7_run_effects``."""
    return runs_module.cached_table("studies.sensitivity.c7_effects", {"keys": [list(k) for k in runs], "n_grid": n_grid},
                      runs.values(),
                      lambda: pd.DataFrame([{"kind": kind, **dict(zip(C7_FACTORS, cell)), "seed": seed,
                                             **c7_run_effects(run, kind, n_grid)}
                                            for (kind, *cell, seed), run in runs.items()]))
