"""Notebooks 00–03 (the plane): path sums, top paths, the midway comparison, bent neurons.

What the notebooks that train small networks on 2-D sets measure and show, beyond the general
tools of ``dlgn_lib.paths`` and ``dlgn_lib.plots``:

* 00: soft against hard gates: ``with_beta`` (a copy of a DLGN with another β),
  ``soft_hard_accuracies`` (test accuracy per β and with hard gates), ``balanced_gate`` and
  ``soft_vs_hard`` (the β slider's panel);
* 01: ``max_path_sum_error`` (the explicit path sum against the forward pass), ``path_sum_errors``
  (that error over every snapshot of runs, as a table), ``worst_over_seeds`` (the same table's
  worst case over seeds: the rules v3 checks), ``top_path_regions`` (the slider's panel);
* 02: ``model_spec`` (the five models at matched widths), ``dataset_label``, ``gap_table``;
* 03: ``bent_share`` (how many neurons per layer bend), ``partitions_at`` (the slider's panel), and
  the verdict's numbers: ``half_space_disagreements``, ``worst_area_z``, ``tiling_error``, per seed
  by ``region_checks`` and as worst cases over seeds by ``worst_region_checks``.
"""
from __future__ import annotations

import copy
import math
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from .. import config, paths, runs as runs_module

__all__ = ["bent_share", "dataset_label", "gap_table", "model_spec", "partitions_at", "path_sum_errors",
           "seed_gaps", "soft_hard_accuracies", "soft_vs_hard", "top_path_regions", "worst_over_seeds"]

# --------------------------------------------------------------------------- 00: soft and hard gates


def with_beta(model, beta: float):
    """A copy of the DLGN ``model`` whose soft gates are ``σ(beta · η)``; the model is unchanged."""
    if not beta > 0:
        raise ValueError(f"beta={beta!r} must be positive")
    copied = copy.deepcopy(model)
    copied.beta = float(beta)
    return copied


@torch.no_grad()
def _accuracy(model, x, y, hard: bool) -> float:
    return ((model(x, hard=hard)[:, 0] >= 0) == (y > 0)).double().mean().item()


def soft_hard_accuracies(model, dataset, betas) -> pd.DataFrame:
    """Test accuracy of a DLGN evaluated with soft gates ``σ(β η)`` at each of ``betas`` and with
    hard gates ``1(η ≥ 0)`` (columns ``gates``, ``beta``, ``test accuracy``; beta is NaN for hard)."""
    x, y = dataset.x_test.to(next(model.parameters()).dtype), dataset.y_test
    rows = [{"gates": "soft", "beta": float(b), "test accuracy": _accuracy(with_beta(model, b), x, y, False)}
            for b in betas]
    rows.append({"gates": "hard", "beta": math.nan, "test accuracy": _accuracy(model, x, y, True)})
    return pd.DataFrame(rows)


@torch.no_grad()
def balanced_gate(model, x: torch.Tensor, layer: int = 1) -> int:
    """The unit of ``layer`` (1-based) whose hard gate is on for the share of inputs ``x`` nearest
    one half: a gate whose line runs through the data."""
    eta = model.gate_preactivations(x)[layer - 1]
    return int(((eta >= 0).double().mean(0) - 0.5).abs().argmin())


def soft_vs_hard(run, beta: float, *, layer: int = 1, unit: int | None = None, resolution: int = 120):
    """The β slider's panel of notebook 00, for a trained DLGN run (its best-validation model).

    Panels: (1) a gate as a function of its pre-activation, ``σ(β η)`` against ``σ(β_train η)``
    and ``1(η ≥ 0)``; (2) that gate of ``layer`` (``unit``; default :func:`balanced_gate`) over
    the plane, soft at ``beta``, with its line; (3) the decision function with soft gates at
    ``beta``; (4) with hard gates. Panels 3 and 4 give the test accuracy.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from ..plots import planes as plane_plots

    trained = run.model_at("best").double()
    model, ds = with_beta(trained, beta), run.dataset()
    x, y = ds.x_test.double(), ds.y_test
    box = plane_plots.data_box(ds)
    unit = balanced_gate(trained, ds.x_train.double(), layer) if unit is None else unit
    # 2 × 2, at most 6.4 inches wide: the book shows it (and its slider's frames) at full size.
    fig, grid = plt.subplots(2, 2, figsize=(6.4, 6.3), constrained_layout=True)
    axes = grid.ravel()

    eta = np.linspace(-2.0, 2.0, 401)
    ax = axes[0]
    ax.plot(eta, (eta >= 0).astype(float), color="black", lw=1.6, label="hard: 1[η ≥ 0]")
    ax.plot(eta, 1 / (1 + np.exp(-trained.beta * eta)), color="0.6", lw=1.2, ls="--",
            label=f"soft, β = {trained.beta:g} (training)")
    ax.plot(eta, 1 / (1 + np.exp(-beta * eta)), color="#e66101", lw=2.0, label=f"soft, β = {beta:g}")
    ax.set_xlabel("gating pre-activation η")
    ax.set_ylabel("gate value")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.set_title("a gate: soft σ(βη) and hard")

    xx, yy = np.meshgrid(np.linspace(box[0], box[1], resolution), np.linspace(box[3], box[2], resolution))
    grid = torch.tensor(np.stack([xx.ravel(), yy.ravel()], 1), dtype=torch.float64)
    with torch.no_grad():
        gate = model.gates(grid, hard=False)[layer - 1][:, unit].numpy().reshape(xx.shape)
    ax = axes[1]
    ax.imshow(gate, extent=box, cmap=ListedColormap(plt.get_cmap("Oranges")(np.linspace(0.0, 0.8, 256))),
              vmin=0, vmax=1, interpolation="bilinear")
    V, c = paths.effective_hyperplanes(model)[layer - 1]
    plane_plots.draw_lines(ax, V[unit:unit + 1].detach().numpy(), c[unit:unit + 1].detach().numpy(), box,
                           color="black", lw=1.0)
    ax.set_title(f"gate {unit + 1} of layer {layer} at β = {beta:g}\n(white 0 … orange 1; line: η = 0)",
                 fontsize=9)

    for ax, hard in zip(axes[2:], (False, True)):
        plane_plots.draw_decision_function(ax, model, box, resolution=resolution, hard=hard)
        for label, color in zip((-1, 1), plane_plots.LABEL_COLORS):
            mask = (y * label > 0).numpy()
            ax.scatter(x[mask, 0], x[mask, 1], s=7, c=color, edgecolors="white", linewidths=0.3)
        what = "hard gates 1[η ≥ 0]" if hard else f"soft gates, β = {beta:g}"
        ax.set_title(f"decision function, {what}\ntest acc {_accuracy(model, x, y, hard):.3f}", fontsize=9)
    for ax in axes[1:]:
        ax.set_xlim(box[0], box[1])
        ax.set_ylim(box[2], box[3])
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
    return fig


# --------------------------------------------------------------------------- 01: paths


def max_path_sum_error(model, x: torch.Tensor, hard: bool, dtype=torch.float64) -> float:
    """Largest |explicit path sum − forward pass| of ``model`` at inputs ``x``, both in ``dtype``
    (the model is converted in place)."""
    model = model.to(dtype)
    x = x.to(dtype)
    with torch.no_grad():
        return (paths.path_sum(model, x, hard=hard) - model(x, hard=hard)).abs().max().item()


def path_sum_errors(runs: dict, x: torch.Tensor) -> pd.DataFrame:
    """Per run (``name → run``) and gate mode (soft and hard for runs whose name starts with
    "DLGN", hard only otherwise): the largest float64 error over every saved epoch, and the final
    model's float32 error (columns ``model``, ``gates``, ``epochs checked``, ``max error float64``,
    ``max error float32 (final)``)."""
    rows = []
    for name, run in runs.items():
        for hard in ([False, True] if name.startswith("DLGN") else [True]):
            errors64 = [max_path_sum_error(run.model_at(e), x, hard) for e in run.epochs]
            error32 = max_path_sum_error(run.model_at(), x, hard, torch.float32)
            rows.append({"model": name, "gates": "hard" if hard else "soft", "epochs checked": len(run.epochs),
                         "max error float64": max(errors64), "max error float32 (final)": error32})
    return pd.DataFrame(rows)


def worst_over_seeds(per_seed: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """The worst case over seeds of ``path_sum_errors`` tables (``seed → table``): per model and
    gate mode, the number of seeds, the snapshots checked in all, and the largest errors."""
    rows = pd.concat([table.assign(seed=seed) for seed, table in per_seed.items()], ignore_index=True)
    return (rows.groupby(["model", "gates"], sort=False)
            .agg(**{"seeds": ("seed", "nunique"), "snapshots checked": ("epochs checked", "sum"),
                    "max error float64": ("max error float64", "max"),
                    "max error float32 (final)": ("max error float32 (final)", "max")})
            .reset_index())


def top_path_regions(run, epoch, n: int = 8):
    """The ``n`` largest paths of ``run``'s model at ``epoch`` (float64), with their regions."""
    from ..plots import regions as region_plots
    model = run.model_at(epoch).double()
    top = paths.top_paths(model, n)
    return region_plots.path_regions(model, [p for p, _ in top], run.dataset(), scores=[s for _, s in top])


# --------------------------------------------------------------------------- 02: midway


def model_spec(kind: str, widths) -> config.ModelSpec:
    """Notebook 02's model of ``kind`` at ``widths``: the DLGN variants with gate biases."""
    gate_options = {} if kind in ("dln", "relu") else {"gate_bias": True}
    return config.ModelSpec.make(kind, widths, **gate_options)


def dataset_label(run, odt_label: str) -> str:
    """A plane run's set name ("moons"); ``odt_label`` for any other data."""
    params = dict(run.config.data.params)
    return params["name"] if run.config.data.name == "plane" else odt_label


#: The gaps of notebook 02: column name → (model, model subtracted).
GAPS = {"DLGN − DLN": ("dlgn", "dln"), "DLGN − ReLU": ("dlgn", "relu"),
        "DLGN − frozen-gate": ("dlgn", "dlgn_frozen"), "DLGN-SF − DLGN": ("dlgn_sf", "dlgn")}


def gap_table(table: pd.DataFrame, rows, names: dict) -> pd.DataFrame:
    """Differences of mean accuracies (``GAPS``) per row of an ``accuracy_table``; ``names`` maps a
    model kind to its column ("dlgn" → "DLGN")."""
    from .. import tables

    def mean(row, kind):
        return tables.cell(table, row, names[kind])
    return pd.DataFrame({gap: [mean(r, a) - mean(r, b) for r in rows] for gap, (a, b) in GAPS.items()},
                        index=list(rows))


def seed_gaps(runs: Sequence, label, row, first: str, second: str, metric: str = "test_metric_at_best") -> np.ndarray:
    """Notebook 02 under rule v3: per seed, ``metric`` of the ``first`` kind's run minus the
    ``second`` kind's run of the same seed, on the runs with ``label(run) == row``; seeds in order.

    Raises:
        ValueError: the two kinds were not run on the same seeds, or a kind has two runs of a seed.
    """
    from .. import tables
    values: dict[tuple[str, int], float] = {}
    for run in runs:
        kind = run.config.model.kind
        if label(run) != row or kind not in (first, second):
            continue
        key = (kind, run.config.seed)
        if key in values:
            raise ValueError(f"{row}: two {kind} runs of seed {key[1]}; pick one per seed first")
        values[key] = tables.run_metric(run, metric)
    seeds = {kind: sorted(s for k, s in values if k == kind) for kind in (first, second)}
    if not seeds[first] or seeds[first] != seeds[second]:
        raise ValueError(f"{row}: {first} and {second} must have runs of the same seeds, "
                         f"got {seeds[first]} and {seeds[second]}")
    return np.array([values[first, s] - values[second, s] for s in seeds[first]])


# --------------------------------------------------------------------------- 03: regions


def bent_share(model, x: torch.Tensor, degrees: float = 1.0) -> list[float]:
    """Per layer, the share (rounded to 3 digits) of neurons whose local hyperplane direction
    (``paths.local_hyperplanes``) turns by more than ``degrees`` over the inputs ``x``: the largest
    angle between a neuron's unit direction at an input and its mean unit direction."""
    shares = []
    for A, _ in paths.local_hyperplanes(model, x):
        unit = A / A.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        cos_to_mean = (unit * unit.mean(0, keepdim=True)).sum(-1) / unit.mean(0).norm(dim=-1).clamp_min(1e-12)
        spread = torch.rad2deg(torch.arccos(cos_to_mean.clamp(-1, 1))).amax(0)
        shares.append(round((spread > degrees).double().mean().item(), 3))
    return shares


def partitions_at(runs, epoch, resolution: int = 200):
    """The slider's panel of notebook 03: both runs' (DLGN, ReLU) gate-pattern partitions at
    ``epoch``, in float64."""
    from ..plots import regions as region_plots
    a, b = runs
    return region_plots.partition_comparison(a.model_at(epoch).double(), b.model_at(epoch).double(),
                                             a.dataset(), resolution=resolution)


def _paths_inside(sets: list[torch.Tensor]) -> torch.Tensor:
    """Per input, how many paths have each of their units in its layer's set (bool (N, m_ℓ) per
    layer): the product over layers of the set sizes, int64 (N,)."""
    count = sets[0].sum(1)
    for units in sets[1:]:
        count = count * units.sum(1)
    return count


@torch.no_grad()
def half_space_disagreements(models, x: torch.Tensor) -> int:
    """Over the ``models`` (e.g. every snapshot of a run), the inputs ``x`` and every path: how
    often the half-space test (``paths.half_space_gates``, effective hyperplanes alone) differs
    from the hard path gate computed by the gating network (claim C3: never).

    No path is enumerated: at an input, the paths inside by the half-space test number
    ``|H| = Π_ℓ |H^ℓ|`` (``H^ℓ`` the units of layer ℓ whose half-space holds), those open by the
    gating network ``|G|`` alike, those open by both ``|H ∩ G| = Π_ℓ |H^ℓ ∩ G^ℓ|``; the two tests
    differ on ``|H| + |G| − 2 |H ∩ G|`` paths. Hard gates are 0/1, so a path gate is on when each
    of its units' gates is.
    """
    disagreements = 0
    for model in models:
        for xs in torch.split(x, max(1, paths.MAX_ENTRIES // sum(model.widths))):
            half = paths.half_space_gates(model, xs)
            gate = [g > 0 for g in model.gates(xs, hard=True)]
            both = [h & g for h, g in zip(half, gate)]
            disagreements += int((_paths_inside(half) + _paths_inside(gate) - 2 * _paths_inside(both)).sum())
    return disagreements


def worst_area_z(model, x_uniform: torch.Tensor, box) -> float:
    """The largest, over paths, distance between a path region's exact area share of ``box``
    (``paths.path_regions_2d``: the polygons of ``paths.path_region_polygon``, clipped once per
    shared prefix) and the share of the uniform points ``x_uniform`` inside it
    (``paths.path_gate_mean``), in binomial standard errors (the variance floored at 1/n, for
    regions of area near 0 or 1)."""
    n = x_uniform.shape[0]
    box_area = paths.polygon_area(paths.box_polygon(box))
    sampled = paths.path_gate_mean(model, x_uniform, hard=True).cpu().numpy()   # share of points in each region
    exact = np.zeros(model.widths)
    for path, polygon in paths.path_regions_2d(model, box).items():       # empty regions: area 0
        exact[path] = paths.polygon_area(polygon)
    exact /= box_area
    se = np.sqrt(np.maximum(exact * (1 - exact), 1.0 / n) / n)
    return max(0.0, float((np.abs(exact - sampled) / se).max()))


def tiling_error(model, box) -> float:
    """|Σ area of the gate-pattern cells / area of ``box`` − 1|: 0 when the cells tile the box."""
    box_area = paths.polygon_area(paths.box_polygon(box))
    return abs(sum(paths.polygon_area(p) for p in paths.gate_pattern_cells_2d(model, box).values()) / box_area - 1)


def region_checks(run, x_uniform: torch.Tensor, x_data: torch.Tensor, box) -> dict:
    """Claim C3's three numbers for one DLGN run: the half-space test against the hard path gate
    at every snapshot on ``x_uniform`` and ``x_data`` (disagreements), and, for the final model,
    ``worst_area_z`` on ``x_uniform`` and ``tiling_error`` of ``box``."""
    return _region_checks(run, x_uniform, x_data, box, half_space_disagreements, worst_area_z, tiling_error)


def _region_checks(run, x_uniform, x_data, box, disagreements, area_z, tiling) -> dict:
    """``region_checks`` with its three measures given (the path-by-path reference passes its own)."""
    final = run.model_at().double()
    x_all = torch.cat([x_uniform, x_data]).double()
    return {"seed": run.config.seed, "snapshots": len(run.epochs),
            "disagreements": disagreements((run.model_at(e).double() for e in run.epochs), x_all),
            "worst area z": area_z(final, x_uniform.double(), box),
            "tiling error": tiling(final, box)}


def region_check_table(runs: Sequence, x_uniform: torch.Tensor, x_data: torch.Tensor, box) -> pd.DataFrame:
    """``region_checks`` of every run, one row each (kept in the analysis cache, ``dlgn_lib.runs.cached_table``)."""
    runs = list(runs)
    params = {"x_uniform": runs_module.tensor_hash(x_uniform), "x_data": runs_module.tensor_hash(x_data), "box": [float(b) for b in box]}
    return runs_module.cached_table("studies.planes.region_check_table", params, runs,
                      lambda: pd.DataFrame([region_checks(run, x_uniform, x_data, box) for run in runs]))


def worst_region_checks(table: pd.DataFrame) -> dict:
    """The rules v3 statistics of ``region_checks`` rows over seeds: disagreements summed, the
    area z and the tiling error at their worst, with the number of seeds."""
    return {"seeds": int(table["seed"].nunique()), "disagreements": int(table["disagreements"].sum()),
            "worst area z": float(table["worst area z"].max()), "tiling error": float(table["tiling error"].max())}
