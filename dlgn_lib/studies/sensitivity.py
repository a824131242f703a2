"""Notebook 11: the sensitivity map of claim C5 over a grid of settings on the circle.

* the grid's targets (``steps_params``, ``mixture_params``, ``target_name``) and models
  (``model_spec``), and its run set (``grid_configs``): the cells with the group's initialisation,
  β 4 and the random targets are notebook 05's configs, so they share its cache entries;
* ``measure_effects``: one row of effects per run (``dl.circle.steps_effects`` or
  ``mixture_effects``), with the cell's factors;
* ``effect_tables``: ``dl.sensitivity.effect_table`` of every effect.
"""
from __future__ import annotations

import pandas as pd

from .. import config, data

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
    from .. import circle
    rows = []
    for (kind, *cell, seed), run in runs.items():
        effects = circle.steps_effects(run, n_rotations) if kind == "steps" else circle.mixture_effects(run)
        rows.append({"kind": kind, **dict(zip(FACTORS, cell)), "seed": seed, **effects})
    return pd.DataFrame(rows)


def effect_tables(effects: pd.DataFrame) -> dict:
    """``dl.sensitivity.effect_table`` of every effect of ``EFFECTS``, over the ``FACTORS``."""
    from .. import sensitivity
    return {name: sensitivity.effect_table(effects[effects["kind"] == kind], FACTORS, name)
            for kind, names in EFFECTS.items() for name in names}
