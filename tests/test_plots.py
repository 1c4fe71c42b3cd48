"""rlsweep.results.plots: each figure is a real PNG, drawn from real intervals; the empty cases too.
(What the figures show is the numbers of rlsweep.results.tables/stats, tested there.) Learning
curves, aggregates and sample efficiency: what each panel draws, read from matplotlib's objects
(lines' data, bars, bands, markers, tick labels)."""

import json
import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex, to_rgb
from matplotlib.lines import Line2D
from PIL import Image

from rlsweep import metrics as M
from rlsweep.results import plots
from rlsweep.results import stats as S
from rlsweep.results import tables as T
from rlsweep.results.results import load_experiment


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


def test_aggregates_draw_each_ci_as_a_bar_and_each_estimate_as_a_tick():
    """Per panel (statistic) and variant: the CI [low, high] as a bar, the estimate as a black
    tick; a variant without a CI has no bar, says so, and its tick has its colour."""
    a = {k: S.Interval(0.5 + i, 0.4 + i, 0.7 + i) for i, k in enumerate(S.STATISTICS)}
    b = {k: S.Interval(0.2, np.nan, np.nan) for k in S.STATISTICS}
    colors = plots.colors(["a", "b"])
    fig = plots.aggregates_figure({"a": a, "b": b}, colors=colors)
    for ax, key in zip(fig.axes, plots.AGGREGATE_NAMES, strict=True):
        (bar,) = ax.patches  # b's row has none
        assert (bar.get_x(), bar.get_x() + bar.get_width()) == pytest.approx(
            (a[key].low, a[key].high)
        )
        assert bar.get_y() + bar.get_height() / 2 == pytest.approx(0)  # a's row
        ticks = [line.get_xdata() for line in ax.lines]
        assert [list(t) for t in ticks] == [[a[key].value] * 2, [0.2, 0.2]]
        assert [to_rgb(line.get_color()) for line in ax.lines] == [(0, 0, 0), to_rgb(colors["b"])]
        assert [t.get_text() for t in ax.texts] == ["no CI"]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["a", "b"]
    plt.close(fig)
    # Scores 0.0006 apart (near-random policies) are not spread across the panel: its axis
    # spans MIN_AGGREGATE_SPAN at least, centred on them.
    scores = {"Gap": -0.01716, "Baseline": -0.01657}
    near = {v: {k: S.Interval(x, np.nan, np.nan) for k in S.STATISTICS} for v, x in scores.items()}
    fig = plots.aggregates_figure(near, colors=plots.colors(list(near)))
    for ax in fig.axes:
        lo, hi = ax.get_xlim()
        assert hi - lo >= plots.MIN_AGGREGATE_SPAN and lo < -0.0172 and hi > -0.0166
    plt.close(fig)


def test_sample_efficiency_draws_the_iqm_and_its_band(tmp_path):
    x = np.array([1000.0, 2000.0])
    ivs = [S.Interval(0.1, 0.0, 0.2), S.Interval(0.3, 0.2, 0.4)]
    fig = plots.sample_efficiency_figure({"a": (x, ivs)}, plots.colors(["a"]))
    (ax,) = fig.axes
    (line,) = ax.lines
    assert list(line.get_xdata()) == [1000.0, 2000.0] and list(line.get_ydata()) == [0.1, 0.3]
    (band,) = ax.collections
    outline = band.get_paths()[0].vertices
    assert outline[:, 1].min() == pytest.approx(0.0) and outline[:, 1].max() == pytest.approx(0.4)
    assert {tuple(v) for v in outline} >= {
        (1000.0, 0.0),
        (2000.0, 0.2),
        (1000.0, 0.2),
        (2000.0, 0.4),
    }
    plt.close(fig)
    plots.plot_sample_efficiency({"a": (x, ivs)}, tmp_path / "eff.png", plots.colors(["a"]))
    plots.plot_sample_efficiency({}, tmp_path / "eff0.png", {})
    _png(tmp_path / "eff.png"), _png(tmp_path / "eff0.png")


def test_importance_has_a_panel_per_sweep(tmp_path):
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


# --- learning curves: what is drawn, read from matplotlib's objects -----------------------


def _trial_like_the_trainable(
    exp: Path,
    name: str,
    params: dict,
    steps: list[int],
    evals: set[int],
    score,
    raw: float = 1.0,
    budget: int | None = None,
) -> None:
    """A trial dir as `rlsweep.trial.trainable` writes it: scores measured on the iterations in
    `evals` (`score(iteration)` -> (train, test) normalized; raw returns `raw` times them),
    carried forward between them, NaN before the first. Its budget: the env steps it takes in
    4 iterations of 256 or 12 of 1,024 (the last iteration may take more), or `budget`."""
    d = exp / name
    d.mkdir(parents=True)
    budget = budget or {4: 1024, 12: 12288}[len(steps)]
    (d / "params.json").write_text(json.dumps({**params, "total_env_steps": budget}))
    train = test = math.nan
    rows = []
    for i, s in enumerate(steps, start=1):
        if i in evals:
            train, test = score(i)
        rows.append(
            {
                "training_iteration": i,
                M.ENV_STEPS: s,
                M.TRAIN_RETURN: raw * train,
                M.TRAIN_RETURN_NORM: train,
                M.TEST_RETURN: raw * test,
                M.TEST_RETURN_NORM: test,
                M.GAP_NORM: train - test,
                M.WALL_S: float(i),
                M.TEST_FRESH: i in evals,
            }
        )
    (d / "result.json").write_text("\n".join(map(json.dumps, rows)) + "\n")


def _ticks(ax) -> list[str]:
    """The x tick labels shown (within the axis' limits), after `fig.canvas.draw()`."""
    lo, hi = ax.get_xlim()
    return [t.get_text() for t in ax.get_xticklabels() if lo <= t.get_position()[0] <= hi]


def _panel_lines(ax) -> dict[tuple[str, str], Line2D]:
    """The panel's curves by (color, linestyle): '--' training levels, '-' unseen levels."""
    lines = [line for line in ax.get_lines() if line.get_linestyle() in ("--", "-")]
    return {(to_hex(line.get_color()), line.get_linestyle()): line for line in lines}


OTHER_PARAMS = {"lr": 5e-4, "entropy_coeff": 0.01, "distribution_mode": "easy", "widths": [16, 32]}


@pytest.fixture
def demo_like(tmp_path) -> Path:
    """The demo's shape: coinrun, framestack none vs gap, 2 seeds, 12 iterations of 1,024 env
    steps, evaluated every 6 iterations (so at 6,144 and 12,288 env steps only)."""
    exp = tmp_path / "demo"
    steps = [1024 * i for i in range(1, 13)]
    for fs, base in (("none", 0.1), ("gap", 0.3)):
        for seed in (0, 1):
            params = {"game": "coinrun", "seed": seed, "framestack": fs, **OTHER_PARAMS}
            score = lambda i, b=base, s=seed: (b + 0.05 * i + 0.01 * s, b + 0.02 * i)  # noqa: E731
            _trial_like_the_trainable(exp, f"coinrun_s{seed}_{fs}", params, steps, {6, 12}, score)
    return exp


def test_train_and_test_curves_are_drawn_alike_from_evaluations(demo_like):
    exp = load_experiment([demo_like])
    fig = plots.learning_curves_figure(exp, n_resamples=100)
    ax = fig.axes[0]
    assert ax.get_title() == "coinrun"
    palette = {v: to_hex(c) for v, c in plots.colors(exp.variants).items()}
    lines = _panel_lines(ax)
    for variant, base in (("framestack=none", 0.1), ("framestack=gap", 0.3)):
        train, test = lines[palette[variant], "--"], lines[palette[variant], "-"]
        x = train.get_xdata()
        # Both at the evaluations only (6,144 and 12,288: the seeds evaluated at the same
        # iterations), on the same env steps.
        np.testing.assert_array_equal(x, test.get_xdata())
        assert x.tolist() == [6144, 12288]
        # The evaluations as measured, a line between them, not the value carried over
        # iterations 7-11: the seeds' mean train score at 6 and 12 is base + 0.3 + 0.005 and
        # base + 0.6 + 0.005.
        np.testing.assert_allclose(train.get_ydata(), [base + 0.305, base + 0.605])
        np.testing.assert_allclose(test.get_ydata(), [base + 0.12, base + 0.24])
        # Each evaluation marked: hollow on training levels, filled on unseen ones.
        assert (train.get_marker(), train.get_fillstyle()) == ("o", "none")
        assert (test.get_marker(), test.get_fillstyle()) == ("o", "full")
    fig.canvas.draw()
    assert _ticks(ax) == ["0", "3k", "6k", "9k", "12k"]
    assert ax.get_xlim()[0] == 0
    plt.close(fig)


def test_a_run_with_one_evaluation_is_a_point_and_an_empty_cell_is_named(tmp_path):
    """A smoke run (1,024 env steps, evaluated once, at its end) whose seeds end a few steps
    apart, as asynchronous algorithms do: one point per variant at the seeds' mean env steps.
    A variant without a finished run is named in the panel, not silently left out."""
    exp_dir = tmp_path / "smoke"
    for seed, end in ((0, 1024), (1, 1040)):
        steps = [256, 512, 768, end]
        params = {"game": "leaper", "seed": seed, "variant": "Gap"}
        score = lambda i, s=seed: (0.2 + 0.1 * s, 0.1 + 0.1 * s)  # noqa: E731
        _trial_like_the_trainable(exp_dir, f"leaper_s{seed}_gap", params, steps, {4}, score)
    broken = exp_dir / "leaper_s0_none"
    broken.mkdir()
    (broken / "params.json").write_text(
        json.dumps({"game": "leaper", "seed": 0, "variant": "None", "total_env_steps": 1024})
    )
    (broken / "error.txt").write_text("RuntimeError: boom\n")
    exp = load_experiment([exp_dir])
    fig = plots.learning_curves_figure(exp, n_resamples=100)
    ax = fig.axes[0]
    gap = to_hex(plots.colors(exp.variants)["Gap"])
    lines = _panel_lines(ax)
    for style, y, fill in (("--", 0.25, "none"), ("-", 0.15, "full")):
        line = lines[gap, style]
        assert (line.get_marker(), line.get_fillstyle()) == ("o", fill)
        np.testing.assert_allclose(line.get_xdata(), [1032])
        np.testing.assert_allclose(line.get_ydata(), [y])
    assert len(lines) == 2  # nothing drawn for the variant None ...
    notes = [t.get_text().replace("\n", " ") for t in ax.texts]
    assert notes == ["Not drawn, no run evaluated yet: None"]  # ... the panel says so
    fig.canvas.draw()
    assert _ticks(ax) == ["0", "250", "500", "750", "1k"]  # never "200m"
    assert ax.get_xlim()[0] == 0 < 1032 < ax.get_xlim()[1]
    plt.close(fig)


def test_variants_whose_curves_coincide_are_named_in_the_panel(tmp_path):
    """A variant that changes nothing its trials read (shaping a one-reward game's reward under
    normalization) scores as the baseline does at every evaluation: its curves lie exactly over
    the baseline's. The panel says so, for the levels where they coincide: Other differs from
    Base on the training levels only."""
    exp_dir = tmp_path / "shaping"
    steps = [256, 512, 768, 1024]
    for variant, shift in (("Base", 0.0), ("Shaped", 0.0), ("Other", 0.05)):
        for seed in (0, 1, 2):
            # Other differs on the training levels only, at one evaluation.
            score = lambda i, s=seed, d=shift: (0.1 * s + (d if i == 4 else 0), 0.2 * s + i / 10)  # noqa: E731
            params = {"game": "leaper", "seed": seed, "variant": variant}
            name = f"leaper_s{seed}_{variant}"
            _trial_like_the_trainable(exp_dir, name, params, steps, {2, 4}, score)
    exp = load_experiment([exp_dir])
    fig = plots.learning_curves_figure(exp, n_resamples=100)
    notes = [t.get_text().replace("\n", " ") for t in fig.axes[0].texts]
    assert notes == [
        "Base and Other coincide (unseen levels): the same scores at every evaluation, one "
        "curve over the other "
        "Base and Shaped coincide (training levels and unseen levels): the same scores at "
        "every evaluation, one curve over the other"
    ]
    plt.close(fig)


def test_a_variant_not_run_on_a_game_is_named_as_such_a_few_at_a_time(tmp_path):
    """A panel names the variants it cannot draw by why: one never run on its game is not
    "no run evaluated yet" (a finished sweep's report said that of configurations a random
    search never ran there). Past four names, it counts the rest."""
    exp_dir = tmp_path / "apart"
    steps = [256, 512, 768, 1024]
    for i in range(6):
        game = "leaper" if i == 0 else "maze"
        params = {"game": game, "seed": 0, "variant": f"V{i}"}
        score = lambda _i, b=i: (0.1 * b, 0.05 * b)  # noqa: E731
        _trial_like_the_trainable(exp_dir, f"{game}_s0_v{i}", params, steps, {4}, score)
    exp = load_experiment([exp_dir])
    fig = plots.learning_curves_figure(exp, n_resamples=100)
    notes = {ax.get_title(): [t.get_text().replace("\n", " ") for t in ax.texts] for ax in fig.axes}
    assert notes["leaper"] == ["Not drawn, not run on this game: V1, V2, V3, V4 and 1 more"]
    assert notes["maze"] == ["Not drawn, not run on this game: V0"]
    plt.close(fig)


def test_a_variant_not_finished_anywhere_is_drawn_as_far_as_it_got_in_raw_returns(tmp_path):
    """A study between sittings: No Pool's runs are unfinished (12 of 24 iterations), so its
    curves come from them, as far as they got, and its legend entry counts them; Avg
    Pool's finished runs are drawn alone, its unfinished third seed left out. `raw`: returns
    as the runs reported them (here 40 times the normalized ones), on a `return` axis."""
    exp_dir = tmp_path / "study"
    score = lambda i: (0.01 * i, 0.005 * i)  # noqa: E731
    for seed, variant, iterations in ((0, "Avg Pool", 24), (1, "Avg Pool", 24),
                                      (2, "Avg Pool", 12), (0, "No Pool", 12),
                                      (1, "No Pool", 12)):  # fmt: skip
        params = {"game": "bigfish", "seed": seed, "variant": variant}
        name = f"bigfish_s{seed}_{variant.replace(' ', '_')}"
        steps = [1024 * i for i in range(1, iterations + 1)]
        evals = set(range(6, iterations + 1, 6))
        _trial_like_the_trainable(exp_dir, name, params, steps, evals, score, 40.0, 24576)
    exp = load_experiment([exp_dir])
    assert dict(exp.final.groupby("status").size()) == {"INCOMPLETE": 3, "TERMINATED": 2}
    assert exp.variants == ["Avg Pool", "No Pool"], exp.variants
    fig = plots.learning_curves_figure(exp, n_resamples=100, raw=True)
    ax = fig.axes[0]
    colors = plots.colors(exp.variants)
    lines = _panel_lines(ax)
    for variant, end in (("Avg Pool", 24576), ("No Pool", 12288)):
        test = lines[to_hex(colors[variant]), "-"]
        assert (test.get_xdata()[0], test.get_xdata()[-1]) == (6144, end)
        np.testing.assert_allclose(test.get_ydata()[[0, -1]], [40 * 0.03, 40 * end / 1024 * 0.005])
    assert ax.get_ylabel() == "return" and not ax.texts  # nothing left undrawn
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "Avg Pool (n=2 seeds)" in labels
    assert "No Pool (n=0 seeds; 2 unfinished, so far)" in labels
    plt.close(fig)
    normalized = plots.learning_curves_figure(exp, n_resamples=100)
    assert normalized.axes[0].get_ylabel() == "normalized return"
    plt.close(normalized)


def test_raw_curves_draw_the_runs_of_a_mode_without_normalization_constants(tmp_path):
    """Memory mode has no normalization constants (every `_norm` NaN): its finished runs are
    in the raw tables, and so in the raw curves and their legend's counts."""
    exp_dir = tmp_path / "memory"
    score = lambda i: (math.nan, math.nan)  # noqa: E731  (normalized: NaN)
    for seed, variant in ((0, "A"), (1, "A"), (0, "B")):
        params = {
            "game": "bigfish",
            "seed": seed,
            "variant": variant,
            "distribution_mode": "memory",
        }
        steps = [256 * i for i in range(1, 5)]
        _trial_like_the_trainable(
            exp_dir, f"bigfish_s{seed}_{variant}", params, steps, {2, 4}, score
        )
    for d in exp_dir.iterdir():  # raw returns of their own, as the trainable reports them
        rows = [json.loads(line) for line in (d / "result.json").read_text().splitlines()]
        for r in rows:
            r[M.TRAIN_RETURN], r[M.TEST_RETURN] = 2.0 * r["training_iteration"], 1.0
        (d / "result.json").write_text("\n".join(map(json.dumps, rows)) + "\n")
    exp = load_experiment([exp_dir])
    assert exp.counted.empty  # nothing to normalize
    fig = plots.learning_curves_figure(exp, n_resamples=100, raw=True)
    lines = _panel_lines(fig.axes[0])
    assert len(lines) == 4 and not fig.axes[0].texts  # both variants, both levels
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "A (n=2 seeds)" in labels and "B (n=1 seed)" in labels
    plt.close(fig)


def test_the_legend_fits_the_figure(demo_like):
    """Long variant labels (several parameters, as a pooled report has) wrap into fewer
    columns instead of running off the figure's edges."""
    by = ["framestack", *OTHER_PARAMS, "total_env_steps"]
    exp = load_experiment([demo_like], by=by)
    fig = plots.learning_curves_figure(exp, n_resamples=100)
    fig.canvas.draw()
    (legend,) = fig.legends
    box, page = legend.get_window_extent(), fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0, (box, page)
    assert len(legend.get_texts()) == len(exp.variants) + 2
    plt.close(fig)


# --- readable at any number of variants (issues 40 and 41) --------------------------------


@pytest.fixture
def three_seeds(tmp_path) -> Path:
    """demo_like with 3 seeds (enough for a CI) and framestack none, gap and stack."""
    exp = tmp_path / "three"
    steps = [1024 * i for i in range(1, 13)]
    for fs, base in (("none", 0.1), ("gap", 0.3), ("stack", 0.2)):
        for seed in (0, 1, 2):
            params = {"game": "coinrun", "seed": seed, "framestack": fs, **OTHER_PARAMS}
            score = lambda i, b=base, s=seed: (b + 0.05 * i + 0.02 * s, b + 0.02 * i + 0.03 * s)  # noqa: E731
            _trial_like_the_trainable(exp, f"coinrun_s{seed}_{fs}", params, steps, {6, 12}, score)
    return exp


def test_bands_are_light_with_edges_in_their_curves_style(three_seeds, demo_like):
    """Issue 40 (6): each variant one colour, training levels dashed and unseen solid, and
    each band light enough to see the others through, edged in its curve's colour and style
    (the demo's four overlapping bands could not be told apart). Two seeds: no band at all."""
    exp = load_experiment([three_seeds])
    fig = plots.learning_curves_figure(exp, n_resamples=100)
    ax = fig.axes[0]
    bands = ax.collections
    assert len(bands) == 2 * len(exp.variants)
    palette = {to_hex(c) for c in plots.colors(exp.variants).values()}
    styles = []
    for band in bands:
        face, edge = band.get_facecolor()[0], band.get_edgecolor()[0]
        assert face[3] <= 0.15 and edge[3] >= 0.5 and band.get_linewidth()[0] > 0
        assert to_hex(face, keep_alpha=False) == to_hex(edge, keep_alpha=False)
        assert to_hex(edge, keep_alpha=False) in palette
        offset, dashes = band.get_linestyle()[0]
        styles.append("--" if dashes else "-")
    assert sorted(styles) == ["-"] * 3 + ["--"] * 3
    plt.close(fig)
    fig = plots.learning_curves_figure(load_experiment([demo_like]), n_resamples=100)
    assert not fig.axes[0].collections  # 2 seeds: the means alone, too few runs for a CI
    plt.close(fig)


def test_sample_efficiency_says_whether_it_draws_ci_bands(three_seeds, demo_like):
    """A band only where a variant has a CI (MIN_CI_RUNS runs of every game), and the title
    says so: the demo's 2 seeds drew no band under a title of "95% CI"; where some variants
    have a band, the legend names those without one."""
    from rlsweep.results import tables as T

    def curves(path: Path) -> dict:
        exp = load_experiment([path])
        return {v: T.sample_efficiency(exp, v, n_resamples=100) for v in exp.variants}

    def drawn(curves: dict) -> tuple[str, list[str], int]:
        fig = plots.sample_efficiency_figure(curves, plots.colors(list(curves)))
        (ax,) = fig.axes
        (legend,) = fig.legends
        got = ax.get_title(), [t.get_text() for t in legend.get_texts()], len(ax.collections)
        plt.close(fig)
        return got

    two, three = curves(demo_like), curves(three_seeds)
    title, labels, bands = drawn(two)
    assert "95%" not in title and bands == 0 and labels == list(two)
    assert title.endswith(f"no CI bands: every variant has < {T.MIN_CI_RUNS} runs of some game")
    title, labels, bands = drawn(three)
    assert "95% bootstrap CIs" in title and bands == 3 and labels == list(three)
    title, labels, bands = drawn({"3 seeds": three["framestack=gap"], "2": two["framestack=gap"]})
    assert bands == 1 and labels == ["3 seeds", "2 (no CI)"]
    assert f"(none where a game has < {T.MIN_CI_RUNS} runs)" in title


def test_a_single_evaluation_is_drawn_inside_the_axes(tmp_path):
    """Issue 40 (6): the demo (one evaluation, at the end; asynchronous sampling ends each
    seed a few env steps apart, as its README table shows) drew its points half clipped at
    the right edge: two variants' points 20 env steps apart set the axis' data range."""
    exp_dir = tmp_path / "once"
    ends = {("gap", 0): 12393, ("gap", 1): 12434, ("none", 0): 12377, ("none", 1): 12380}
    for (fs, seed), end in ends.items():
        params = {"game": "coinrun", "seed": seed, "framestack": fs}
        steps = [1024 * i for i in range(1, 12)] + [end]
        score = lambda i, s=seed: (0.2 + 0.1 * s, 0.1 + 0.1 * s)  # noqa: E731
        _trial_like_the_trainable(exp_dir, f"coinrun_s{seed}_{fs}", params, steps, {12}, score)
    fig = plots.learning_curves_figure(load_experiment([exp_dir]), n_resamples=100)
    ax = fig.axes[0]
    fig.canvas.draw()
    points = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(points) == 4  # 2 variants x train, test
    box = ax.get_window_extent()
    for line in points:
        x = ax.transData.transform((line.get_xdata()[0], 0))[0]
        radius = line.get_markersize() / 2 * fig.dpi / 72
        assert box.x0 < x - radius and x + radius < box.x1, (x, radius, box)
    plt.close(fig)


def test_many_variants_top_ones_in_colour_with_3_significant_digits(tmp_path):
    """Issue 41: a search of 30 configurations draws the top TOP_COLOURED in colour with a
    legend entry each, named by its rank in the report's table (#1 the best: labels to 3
    significant digits, `gamma=0.998, lr=2.24e-4`, made a legend of ten such lines that
    squeezed the panels to a sliver), the other 20 in grey without one; the figure no taller
    than a page, its panels at least a third of it."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from report_scale import write_search

    exp = load_experiment([write_search(tmp_path, 30)])
    assert len(exp.variants) == 30
    for v in exp.variants:
        gamma, lr = re.fullmatch(r"gamma=(\S+), lr=(\S+)", v).groups()
        for value in (gamma, lr):  # 3 significant digits at most, never the full float
            assert len(re.sub(r"e-?\d+$|^0\.0*|\.", "", value)) <= 3, v
        assert re.fullmatch(r"\d(\.\d{1,2})?e-4", lr), v
    fig = plots.learning_curves_figure(exp, n_resamples=100)
    ax = fig.axes[0]
    top = plots.highlighted(exp)
    assert len(top) == plots.TOP_COLOURED
    lines = ax.get_lines()
    grey = [line for line in lines if line.get_color() == plots.GREY]
    assert len(grey) == 30 - plots.TOP_COLOURED
    coloured = {to_hex(line.get_color()) for line in lines if line not in grey}
    assert coloured == {to_hex(c) for c in plots.colors(top).values()}
    assert to_hex(plots.GREY) not in coloured
    (legend,) = fig.legends
    texts = [t.get_text().replace("\n", " ") for t in legend.get_texts()]
    assert top == list(T.ranking(exp)["variant"].head(plots.TOP_COLOURED))
    assert texts[: len(top)] == [f"#{i} (n=1 seed)" for i in range(1, len(top) + 1)]
    assert texts[len(top) :] == ["20 others (unseen levels)", "training levels", "unseen levels"]
    assert fig._suptitle.get_text().replace("\n", " ").endswith("(#k: its rank in report.md)")
    assert fig.get_size_inches()[1] <= plots.PAGE_HEIGHT
    fig.canvas.draw()
    assert ax.get_window_extent().height > fig.bbox.height / 3
    plt.close(fig)


def test_labels_that_agree_to_3_digits_get_more():
    """Labels are a variant's identity: two sampled values that round alike get the digits
    that tell them apart, and only they; a grid's values read as written."""
    from rlsweep.results.results import label_variants

    df = pd.DataFrame({"lr": [2.2434e-4, 2.2436e-4, 5.12345e-4, 5e-4], "framestack": ["gap"] * 4})
    labels, order = label_variants(df, ["lr", "framestack"])
    assert list(labels) == [
        "lr=2.243e-4, framestack=gap",
        "lr=2.244e-4, framestack=gap",
        "lr=5.12e-4, framestack=gap",
        "lr=0.0005, framestack=gap",
    ]
    assert order == [labels[0], labels[1], labels[3], labels[2]]


# --- a search's figures: Optuna's, made readable ---------------------------------------------


def _shown_labels(ax, axis: str = "x") -> list:
    """The tick labels drawn (non-empty, within the axis' limits; either side: a colour bar's
    are on its right), after `fig.canvas.draw()`."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = sorted(a.get_view_interval())
    ticks = a.get_major_ticks() + a.get_minor_ticks()
    return [
        label
        for t in ticks
        for label in (t.label1, t.label2)
        if label.get_visible() and label.get_text() and lo <= t.get_loc() <= hi
    ]


def test_search_params_reads_whole_trials_choices_as_written_and_log_axes_apart():
    """search_params.png of a search's first 3 trials: its colour bar numbered 0, 1, 2 (not
    0.25 steps), a choice as the spec writes it (gap, not 'gap' in quotes), lr on a log axis
    whose labels do not overlap (matplotlib labelled every minor tick of its one decade)."""
    from rlsweep.results.importance import report_study
    from rlsweep.spec.spec import SweepSpec

    space = {
        "lr": {"loguniform": [1e-4, 1e-3]},
        "framestack": {"choice": ["none", "stack", "gap"]},
        "widths": {"choice": [[16, 32, 32], [32, 64, 64]]},
    }
    spec = SweepSpec(name="s", space=space, search={"algorithm": "optuna"})
    final = pd.DataFrame(
        {
            "lr": [1.1e-4, 3.5e-4, 9e-4],
            "framestack": ["none", "stack", "gap"],
            "widths": ["[16, 32, 32]", "[32, 64, 64]", "[16, 32, 32]"],  # as results hold lists
            M.TEST_RETURN_NORM: [0.2, 0.5, 0.4],
        }
    )
    study = report_study(final, ["lr", "framestack", "widths"], [spec])
    fig = plots.search_params_figure(study)
    fig.canvas.draw()
    panels = {ax.get_xlabel(): ax for ax in fig.axes if ax.get_xlabel()}
    (bar,) = [ax for ax in fig.axes if ax.get_ylabel() == "configuration (order run)"]
    assert [t.get_text() for t in _shown_labels(bar, "y")] == ["0", "1", "2"]
    assert [t.get_text() for t in _shown_labels(panels["framestack"])] == ["none", "stack", "gap"]
    assert [t.get_text() for t in _shown_labels(panels["widths"])] == [
        "[16, 32, 32]",
        "[32, 64, 64]",
    ]
    lr = panels["lr"]
    assert lr.get_xscale() == "log"
    assert [t.get_text() for t in _shown_labels(lr)] == ["1e-4", "2e-4", "5e-4"]
    for ax in panels.values():
        boxes = [t.get_window_extent() for t in _shown_labels(ax)]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :]), (
            ax.get_xlabel(),
            [t.get_text() for t in _shown_labels(ax)],
        )
    plt.close(fig)


def test_the_sample_efficiency_curve_is_the_iqm_of_the_runs_at_each_point(tmp_path):
    """rliable's sample-efficiency curve: at each shared point the IQM over runs x games, not
    their mean (4 seeds scoring 0, 0, 0 and 1: IQM 0, mean 0.25)."""
    exp_dir = tmp_path / "eff"
    steps = [256, 512, 768, 1024]
    for seed in range(4):
        score = lambda i, s=seed: (0.5, float(s == 3))  # noqa: E731
        params = {"game": "leaper", "seed": seed, "variant": "A"}
        _trial_like_the_trainable(exp_dir, f"leaper_s{seed}_a", params, steps, {2, 4}, score)
    exp = load_experiment([exp_dir])  # one variant: its label is "all"
    grid, ivs = T.sample_efficiency(exp, exp.variants[0], n_resamples=100)
    assert grid.tolist() == [512, 1024]
    assert [iv.value for iv in ivs] == [0.0, 0.0]
