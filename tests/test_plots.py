"""rlsweep.plots: each figure is a real PNG, drawn from real intervals; the empty cases too.
(What the figures show is the numbers of rlsweep.tables/stats, tested there.)"""

import numpy as np
import pandas as pd
from PIL import Image

from rlsweep import plots
from rlsweep import stats as S


def _png(path) -> tuple[int, int]:
    assert path.read_bytes()[:4] == b"\x89PNG"
    with Image.open(path) as im:
        return im.size


def test_aggregates_grow_with_the_variants(tmp_path):
    iv = {k: S.Interval(0.5, 0.4, 0.6) for k in S.STATISTICS}
    no_ci = {k: S.Interval(0.5, np.nan, np.nan) for k in S.STATISTICS}
    colors = plots.colors(["a", "b", "c"])
    plots.plot_aggregates({"a": iv}, tmp_path / "one.png", colors=colors)
    plots.plot_aggregates({"a": iv, "b": no_ci, "c": iv}, tmp_path / "three.png", colors=colors)
    (w1, h1), (w3, h3) = _png(tmp_path / "one.png"), _png(tmp_path / "three.png")
    assert w1 == w3 and h3 > h1  # one row per variant
    plots.plot_aggregates({}, tmp_path / "none.png", colors=colors)
    _png(tmp_path / "none.png")


def test_sample_efficiency_and_importance(tmp_path):
    x = np.array([1000.0, 2000.0])
    ivs = [S.Interval(0.1, 0.0, 0.2), S.Interval(0.3, 0.2, 0.4)]
    plots.plot_sample_efficiency({"a": (x, ivs)}, tmp_path / "eff.png", plots.colors(["a"]))
    plots.plot_sample_efficiency({}, tmp_path / "eff0.png", {})
    _png(tmp_path / "eff.png"), _png(tmp_path / "eff0.png")
    scores = {
        "s1": pd.Series({"lr": 0.7, "gamma": 0.3}),
        "s2": pd.Series({"lr": 0.5, "gamma": 0.25, "entropy_coeff": 0.25}),
    }
    plots.plot_importance({"s1": scores["s1"]}, tmp_path / "imp1.png")
    plots.plot_importance(scores, tmp_path / "imp2.png")
    assert _png(tmp_path / "imp2.png")[1] > _png(tmp_path / "imp1.png")[1]  # a panel per sweep


def test_colors_are_stable_per_variant():
    c = plots.colors([f"v{i}" for i in range(12)])
    assert len(set(c.values())) == 10 and c["v0"] == c["v10"]  # tab10 cycles
    assert plots.colors(["v0", "v1"])["v1"] == c["v1"]
