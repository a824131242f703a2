"""Sign tests and effect tables of the sensitivity maps, against scipy's exact binomial test."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dlgn_lib import sensitivity


@pytest.mark.parametrize("effects", [[1, 2, 3, 4, 5], [1, -2, 3, 4, 5], [-1, -2, 3, 0.5, -0.1],
                                     [0.2, 0.0, 0.3, np.nan, -0.4, 0.9, 1.0], [-1, -1, -1]])
def test_sign_test_equals_the_exact_binomial_test(effects):
    values = np.array(effects, dtype=float)
    kept = values[~np.isnan(values) & (values != 0)]
    want = stats.binomtest(int((kept > 0).sum()), len(kept), 0.5, alternative="greater").pvalue
    assert sensitivity.sign_test(effects) == pytest.approx(want, rel=1e-12)


def test_five_positive_seeds_give_one_in_thirty_two():
    assert sensitivity.sign_test([0.1] * 5) == 1 / 32
    assert sensitivity.sign_test([]) == 1.0 and sensitivity.sign_test([0, 0]) == 1.0


def test_effect_table_per_cell():
    frame = pd.DataFrame({"beta": [4] * 5 + [30] * 5, "seed": list(range(5)) * 2,
                          "gain": [0.1, 0.2, 0.3, 0.4, 0.5, 0.1, -0.2, 0.3, -0.4, math.inf]})
    table = sensitivity.effect_table(frame, ["beta"], "gain")
    assert table["beta"].tolist() == [4, 30]
    assert table["median"].tolist() == pytest.approx([0.3, 0.1])
    assert table["positive"].tolist() == [5, 3] and table["n"].tolist() == [5, 5]
    assert table["p"].tolist() == pytest.approx([1 / 32, 16 / 32])
    assert table["significant"].tolist() == [True, False]


def test_effect_table_names_bad_input():
    frame = pd.DataFrame({"beta": [4, 4], "seed": [0, 0], "gain": [0.1, 0.2]})
    with pytest.raises(ValueError, match="repeat"):
        sensitivity.effect_table(frame, ["beta"], "gain")
    with pytest.raises(ValueError, match=r"\['init'\]"):
        sensitivity.effect_table(frame, ["init"], "gain")


def test_effect_heatmaps_mark_significance_and_frame_the_registered_cell():
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.patches import Rectangle
    from dlgn_lib.plots import sensitivity as plot
    frame = pd.DataFrame([{"beta": b, "bias": g, "seed": s, "gain": (0.2 if b == 4 else -0.1) + 0.01 * s}
                          for b in (4, 30) for g in ("off", "on") for s in range(5)])
    table = sensitivity.effect_table(frame, ["beta", "bias"], "gain")
    fig = plot.effect_heatmaps({"gain": table}, ["bias"], ["beta"], registered={"beta": 4, "bias": "on"})
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert sum("*" in t for t in texts) == 2 and sum("5/5" in t for t in texts) == 2
    assert len([p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]) == 1


def test_infinite_effects_are_shown_not_blank():
    import matplotlib
    matplotlib.use("Agg")
    from dlgn_lib.plots import sensitivity as plot
    frame = pd.DataFrame([{"beta": b, "seed": s, "lead": (math.inf if b == 4 else 0.5 + s)} for b in (4, 30) for s in range(5)])
    table = sensitivity.effect_table(frame, ["beta"], "lead")
    assert table["median"].tolist()[0] == math.inf
    fig = plot.effect_heatmaps({"lead": table}, ["beta"], ["beta"])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any(t.startswith("+∞*") for t in texts)
