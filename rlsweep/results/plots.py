"""The report's figures, written to PNG files. The only module that imports matplotlib (Agg
backend: files only, no display); the numbers come from `rlsweep.results.tables` and
`rlsweep.results.stats`. Every `plot_*` function draws one figure into `path`
(`learning_curves_figure` returns its figure, for tests to read); one color per variant, the same in
every figure.

Figures stay readable at any number of variants: beyond MAX_SERIES, curves show the top
TOP_COLOURED in colour and the rest in grey without legend entries, and no figure grows taller
than PAGE_HEIGHT. A search's figures of score against its hyperparameters and of its history
are Optuna's (`optuna.visualization.matplotlib`), drawn from the study `rlsweep.results.importance`
builds of its trials.
"""

from __future__ import annotations

import ast
import math
import textwrap
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.category import UnitData  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedLocator,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
)

from rlsweep import formatting  # noqa: E402
from rlsweep import metrics as M  # noqa: E402
from rlsweep.results import stats as S  # noqa: E402
from rlsweep.results.results import Experiment  # noqa: E402
from rlsweep.results.tables import (  # noqa: E402
    AGGREGATE_NAMES,
    MIN_CI_RUNS,
    REPORT_RESAMPLES,
    on_grid,
    points,
    ranking,
)

CURVE_POINTS = 100
"""Env-step grid points of learning curves whose runs evaluated at different points (they are
interpolated onto a shared grid: `tables.on_grid`)."""
DPI = 110
MAX_SERIES = 12
"""Variants a figure draws each in its own colour with a legend entry; beyond, TOP_COLOURED."""
TOP_COLOURED = 10
"""Beyond MAX_SERIES: the best variants in colour (`tables.ranking`), the rest grey."""
PAGE_HEIGHT = 10.0
"""Inches: no figure is taller (a page, margins aside)."""
MARKED_POINTS = 20
"""A coloured curve of at most this many points (its evaluations, where its runs evaluated at
the same iterations) marks each: a grid's curve (CURVE_POINTS) is never marked."""
GREY = "0.65"
GREY_POINTS = 30
"""The same for a grey curve (a mean line only: fewer points, as many curves)."""
BAND_ALPHA = 0.12
"""A CI band's fill: light enough to see the other bands and curves through it."""


def colors(variants: list[str]) -> dict[str, tuple]:
    """One color per variant, the same in every plot: tab10's, its grey made near-black (grey
    is for the variants beyond the top ones, `learning_curves_figure`)."""
    cmap = plt.get_cmap("tab10")
    palette = [to_rgba("0.15") if i == 7 else cmap(i) for i in range(10)]
    return {v: palette[i % 10] for i, v in enumerate(variants)}


def _steps_axis(ax) -> None:
    """Env steps on x, from 0 (call after drawing), and room right of the last point: a single
    evaluation (one point) sits inside the axes, not half clipped at their edge."""
    ax.set_xlabel("env steps")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: formatting.steps(x)))
    ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
    if ax.has_data():
        right = max(ax.get_xlim()[1], 1.05 * ax.dataLim.x1)
        ax.set_xlim(0, right)


def _n_label(ns: list[int]) -> str:
    """`2 seeds`, `1–3 seeds`: runs per game of a variant."""
    lo, hi = min(ns), max(ns)
    return (f"{lo}" if lo == hi else f"{lo}–{hi}") + (" seed" if hi == 1 else " seeds")


def highlighted(exp: Experiment) -> list[str]:
    """The variants a figure draws in colour: all of them up to MAX_SERIES, else the
    TOP_COLOURED best (`tables.ranking`)."""
    if len(exp.variants) <= MAX_SERIES:
        return list(exp.variants)
    return list(ranking(exp)["variant"].head(TOP_COLOURED))


def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _empty(path: Path, text: str) -> None:
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    _save(fig, path)


def plot_learning_curves(
    exp: Experiment,
    path: Path,
    *,
    n_resamples: int = REPORT_RESAMPLES,
    seed: int = 0,
    highlight: list[str] | None = None,
    raw: bool = False,
) -> None:
    """`learning_curves_figure`, written to `path`."""
    fig = learning_curves_figure(
        exp, n_resamples=n_resamples, seed=seed, highlight=highlight, raw=raw
    )
    _save(fig, path)


def learning_curves_figure(
    exp: Experiment,
    *,
    n_resamples: int = REPORT_RESAMPLES,
    seed: int = 0,
    highlight: list[str] | None = None,
    raw: bool = False,
) -> Figure:
    """Per game: mean normalized return (`raw`: return) over seeds vs env steps, training
    levels (dashed) and unseen levels (solid), one color per variant, with light 95% bootstrap
    bands edged in the curve's color and style where a variant has MIN_CI_RUNS runs or more.
    Both are drawn alike, from the iterations that evaluated (`test/fresh`; the rows between
    repeat the last evaluation) at the points its runs share (`tables.on_grid`: their
    evaluations where they evaluated at the same iterations, else a grid they all cover);
    runs with a single evaluation are a point, and a curve of measured evaluations marks each
    (up to MARKED_POINTS). A variant without a finished run on a game is
    drawn from its unfinished runs as far as they have got (a study between sittings), its
    legend entry counting them. A variant a panel cannot draw is named in it, and so are
    variants whose curves coincide (one would hide the other).

    `highlight`: the variants in colour with a legend entry (default `highlighted`: all up to
    MAX_SERIES, else the TOP_COLOURED best); the others are drawn grey, unseen levels only,
    without bands or legend entries. The figure is at most PAGE_HEIGHT tall."""
    highlight = highlighted(exp) if highlight is None else highlight
    train_metric, test_metric = (
        (M.TRAIN_RETURN, M.TEST_RETURN) if raw else (M.TRAIN_RETURN_NORM, M.TEST_RETURN_NORM)
    )
    # The runs the tables count for this metric: raw returns count a mode without
    # normalization constants too (all its normalized returns are NaN).
    runs_of = exp.all_runs(metric=test_metric)
    so_far = exp.all_runs(highlight, unfinished=True)
    drawn_so_far = dict.fromkeys(highlight, 0)  # unfinished runs drawn, per variant
    others = [v for v in exp.variants if v not in set(highlight) and any(runs_of[v].values())]
    ncols = min(4, max(1, len(exp.games)))
    nrows = -(-max(1, len(exp.games)) // ncols)
    width = max(4.2 * ncols, 8.4)  # room for the legend when there are few games
    legend_h = 0.3 * (-(-(len(highlight) + 3) // 2)) + 0.4
    row_h = min(3.2, (PAGE_HEIGHT - 0.6 - legend_h) / nrows)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(width, min(PAGE_HEIGHT, row_h * nrows + 0.6 + legend_h)),
        squeeze=False,
        layout="constrained",
    )
    for ax in axes.flat[len(exp.games) :]:
        ax.axis("off")
    palette = colors(highlight)
    # The top of a search: each by its rank in the report's table (#1 the best), so that the
    # legend stays a few lines where labels name several hyperparameters each.
    name = {v: f"#{i}" if others else v for i, v in enumerate(highlight, 1)}
    ran = set(zip(exp.final["variant"], exp.final["game"], strict=True))
    marks = False  # some curve marks its points: the legend then shows the markers too
    for ax, game in zip(axes.flat, exp.games, strict=False):
        for v in others:  # underneath, in grey: where the rest of the search lies
            runs = runs_of[v].get(game, [])
            g = on_grid([points(r, test_metric, True) for r in runs], GREY_POINTS)
            if g is not None:
                x, values = g
                ax.plot(
                    x,
                    values.mean(axis=-1),
                    color=GREY,
                    lw=0.6,
                    alpha=0.5,
                    zorder=1,
                    **_marker("-", len(x) == 1, small=True),
                )
        missing = []
        curves: dict[str, list[tuple[str, np.ndarray, np.ndarray]]] = {}  # by style, drawn
        same: dict[str, dict[str, list[str]]] = {}  # curves drawn over an earlier variant's
        for v, color in palette.items():
            runs = runs_of[v].get(game, [])
            unfinished = not runs
            if unfinished:
                runs = [r for r in so_far[v].get(game, []) if r[M.TEST_FRESH].any()]
            drawn = False
            for metric, style in ((train_metric, "--"), (test_metric, "-")):
                g = on_grid([points(r, metric, fresh_only=True) for r in runs], CURVE_POINTS)
                if g is None:
                    continue
                x, values = g
                if (first := _drawn_over(curves.setdefault(style, []), x, values)) is not None:
                    same.setdefault(v, {}).setdefault(first, []).append(style)
                curves[style].append((v, x, values))
                if values.shape[1] >= MIN_CI_RUNS:
                    m, lo, hi = S.pointwise_mean(values, n_resamples=n_resamples, seed=seed)
                else:  # too few runs for a CI: the mean alone
                    m = values.mean(axis=-1)
                    lo = hi = np.full_like(m, np.nan)
                marked = len(x) <= MARKED_POINTS  # the evaluations themselves: each a marker
                marker = _marker(style, marked, small=len(x) > 1)
                ax.plot(x, m, style, color=color, zorder=3, **marker)
                if len(x) > 1 and np.isfinite(lo).all():
                    ax.fill_between(
                        x,
                        lo,
                        hi,
                        facecolor=to_rgba(color, BAND_ALPHA),
                        edgecolor=to_rgba(color, 0.6),
                        linewidth=0.8,
                        linestyle=style,
                        zorder=2,
                    )
                elif np.isfinite(lo[0]):
                    ax.errorbar(
                        x, m, [m - lo, hi - m], fmt="none", color=color, capsize=3, alpha=0.6
                    )
                drawn = True
                marks |= marked
            if drawn and unfinished:
                drawn_so_far[v] += len(runs)
            if not drawn:
                if (v, game) not in ran:
                    why = "not run on this game"
                elif not runs:
                    why = "no run evaluated yet"
                else:
                    why = "its runs share no evaluated steps"
                missing.append((why, name[v]))
        notes = [
            f"Not drawn, {why}: {_few([n for w, n in missing if w == why])}"
            for why in dict.fromkeys(w for w, _ in missing)
        ]
        notes += [
            f"{name[first]} and {name[v]} coincide ({_levels(styles)}): the same scores at every "
            "evaluation, one curve over the other"
            for v, firsts in same.items()
            for first, styles in firsts.items()
        ]
        if notes:
            note = "\n".join(textwrap.fill(n, 60) for n in notes)
            ax.text(0.02, 0.98, note, transform=ax.transAxes, fontsize=7, va="top", color="0.3")
        ax.set_title(game)
        _steps_axis(ax)
        ax.set_ylabel("return" if raw else "normalized return")
        ax.grid(alpha=0.3)
    scores = exp.all_scores(test_metric, variants=palette)
    handles = [
        plt.Line2D(
            [],
            [],
            color=c,
            label=textwrap.fill(
                f"{name[v]} (n={_n_label([len(s) for s in scores[v]])}"
                + (f"; {k} unfinished, so far" if (k := drawn_so_far[v]) else "")
                + ")",
                60,
            ),
        )
        for v, c in palette.items()
    ]
    if others:
        handles.append(
            plt.Line2D([], [], color=GREY, lw=0.6, label=f"{len(others)} others (unseen levels)")
        )
    handles += [
        plt.Line2D([], [], color="gray", ls="--", label="training levels", **_marker("--", marks)),
        plt.Line2D([], [], color="gray", ls="-", label="unseen levels", **_marker("-", marks)),
    ]
    _fit_legend(fig, handles)
    band = f"95% bootstrap CI from {MIN_CI_RUNS}+ runs"
    top = (
        f"; top {len(highlight)} of {len(exp.variants):,} in colour (#k: its rank in report.md)"
        if others
        else ""
    )
    title = f"Learning curves: mean over seeds, {band}{top}"
    fig.suptitle(textwrap.fill(title, int(11 * width)), fontsize=11)  # ~11 characters an inch
    return fig


def _drawn_over(
    drawn: list[tuple[str, np.ndarray, np.ndarray]], x: np.ndarray, values: np.ndarray
) -> str | None:
    """The variant among those `drawn` (variant, x, its runs' values) whose curve and band
    these runs' would cover exactly: the same env steps and, at each, the same scores. A variant
    that changes nothing its trials read (a setting the game never exercises) draws such a
    curve, and would vanish under the other without a word."""
    ordered = np.sort(values, axis=-1)
    for variant, x0, values0 in drawn:
        if (
            x0.shape == x.shape
            and values0.shape == values.shape
            and np.array_equal(x0, x)
            and np.allclose(np.sort(values0, axis=-1), ordered, rtol=0, atol=1e-9)
        ):
            return variant
    return None


def _few(names: list[str], most: int = 4) -> str:
    """`names` joined, the first `most` of them and how many more: a panel's note stays a few
    lines however many variants it names."""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _levels(styles: list[str]) -> str:
    """The levels a list of curve styles stands for: '--' training, '-' unseen."""
    names = {"--": "training levels", "-": "unseen levels"}
    return " and ".join(names[s] for s in styles)


def _marker(style: str, point: bool, small: bool = False) -> dict:
    """A measured point's marker: hollow for training levels ('--'), filled for unseen ones."""
    if not point:
        return {}
    return {"marker": "o", "fillstyle": "none" if style == "--" else "full"} | (
        {"markersize": 3} if small else {}
    )


def _fit_legend(fig: Figure, handles: list, fontsize: float | None = None) -> None:
    """A legend below the panels in as many columns as fit the figure's width."""
    renderer = fig.canvas.get_renderer()
    for ncol in range(len(handles), 0, -1):
        legend = fig.legend(
            handles=handles, loc="outside lower center", ncol=ncol, frameon=False, fontsize=fontsize
        )
        if ncol == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            return
        legend.remove()


def plot_aggregates(
    aggs: dict[str, dict[str, S.Interval]],
    path: Path,
    *,
    colors: dict[str, tuple],
    n_resamples: int = REPORT_RESAMPLES,
) -> None:
    """`aggregates_figure`, written to `path`."""
    if not aggs:
        _empty(path, "no variant finished on every game")
        return
    _save(aggregates_figure(aggs, colors=colors, n_resamples=n_resamples), path)


MIN_AGGREGATE_SPAN = 0.1
"""The least span of an aggregates panel's axis, in normalized score: near-random policies
0.0006 apart were drawn at its two ends, a separation the table's -0.017 for all of them did
not show."""


def aggregates_figure(
    aggs: dict[str, dict[str, S.Interval]],
    *,
    colors: dict[str, tuple],
    n_resamples: int = REPORT_RESAMPLES,
) -> Figure:
    """rliable-style interval plot: one panel per aggregate metric, one row per variant (a
    report passes a bounded set: a search's top ones), its CI a bar in its colour and its
    estimate a black tick. A variant without a CI (a game with fewer than MIN_CI_RUNS runs) is
    its point estimate, a tick in its colour, marked "no CI". At most PAGE_HEIGHT tall."""
    variants = list(aggs)
    fig, axes = plt.subplots(
        1,
        len(AGGREGATE_NAMES),
        figsize=(3.4 * len(AGGREGATE_NAMES), min(PAGE_HEIGHT, 1.4 + 0.5 * len(variants))),
        layout="constrained",
    )
    some_ci = any(a.has_ci for v in variants for a in aggs[v].values())
    for ax, (key, title) in zip(axes, AGGREGATE_NAMES.items(), strict=True):
        for i, v in enumerate(variants):
            iv = aggs[v][key]
            if iv.has_ci:
                ax.barh(i, iv.high - iv.low, left=iv.low, height=0.6, color=colors[v], alpha=0.6)
            elif some_ci:  # (where none has one, the title says so once)
                ax.annotate(
                    "no CI",
                    (iv.value, i),
                    xytext=(4, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=7,
                    color="0.3",
                )
            # Without a bar, the tick carries the variant's colour (its curves' colour).
            tick = "black" if iv.has_ci else colors[v]
            ax.plot([iv.value, iv.value], [i - 0.3, i + 0.3], color=tick, lw=2)
        ax.set_yticks(range(len(variants)), variants if ax is axes[0] else [""] * len(variants))
        ax.set_ylim(-0.6, len(variants) - 0.4)
        ax.invert_yaxis()
        ax.set_title(title + ("\n(lower is better)" if key == "optimality_gap" else ""))
        ax.set_xlabel("normalized score")
        ax.grid(axis="x", alpha=0.3)
        # Bars are "sticky" (no auto margins): pad by hand so zero-width CIs stay visible.
        xs = [
            x
            for v in variants
            for x in (aggs[v][key].low, aggs[v][key].high, aggs[v][key].value)
            if np.isfinite(x)
        ]
        if xs:
            lo, hi = min(xs), max(xs)
            if hi - lo < MIN_AGGREGATE_SPAN:  # near-equal scores are not spread over the panel
                mid = (lo + hi) / 2
                lo, hi = mid - MIN_AGGREGATE_SPAN / 2, mid + MIN_AGGREGATE_SPAN / 2
            pad = 0.1 * (hi - lo)
            ax.set_xlim(lo - pad, hi + pad)
    cis = (
        f"95% stratified bootstrap CIs ({n_resamples} resamples; none where a game has < "
        f"{MIN_CI_RUNS} runs)"
        if some_ci
        else f"no CIs: every variant has < {MIN_CI_RUNS} runs of some game"
    )
    fig.suptitle(f"Unseen-level score at the end of training: {cis}", fontsize=10)
    return fig


def plot_sample_efficiency(
    curves: dict[str, tuple[np.ndarray, list[S.Interval]]], path: Path, colors: dict[str, tuple]
) -> None:
    """`sample_efficiency_figure`, written to `path`."""
    _save(sample_efficiency_figure(curves, colors), path)


def sample_efficiency_figure(
    curves: dict[str, tuple[np.ndarray, list[S.Interval]]], colors: dict[str, tuple]
) -> Figure:
    """IQM vs env steps per variant (`tables.sample_efficiency`): a line through the estimates
    with its CI a band, where it has one (MIN_CI_RUNS runs of every game); the title says
    which, and where others have a band, the legend names the variants without one."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    some_ci = any(iv.has_ci for _, ivs in curves.values() for iv in ivs)
    for v, (x, ivs) in curves.items():
        color = colors[v]
        y = [iv.value for iv in ivs]
        band = any(iv.has_ci for iv in ivs)
        label = v if band or not some_ci else f"{v} (no CI)"
        ax.plot(x, y, color=color, label=label, marker="o" if len(x) == 1 else None)
        if band:
            ax.fill_between(
                x,
                [iv.low for iv in ivs],
                [iv.high for iv in ivs],
                facecolor=to_rgba(color, BAND_ALPHA),
                edgecolor=to_rgba(color, 0.6),
                linewidth=0.8,
            )
    _steps_axis(ax)
    ax.set_ylabel("IQM normalized return (unseen levels)")
    title = "Sample efficiency: IQM over seeds × games"
    if some_ci:
        title += f"\nbands: 95% bootstrap CIs (none where a game has < {MIN_CI_RUNS} runs)"
    elif curves:  # the same rule as aggregates_figure's
        title += f"\nno CI bands: every variant has < {MIN_CI_RUNS} runs of some game"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if curves:  # below the axes: ten long labels inside would cover the curves
        _fit_legend(fig, ax.get_legend_handles_labels()[0], fontsize=8)
    else:
        ax.text(0.5, 0.5, "no variant finished on every game", ha="center", transform=ax.transAxes)
    return fig


def plot_importance(scores: dict[str, pd.Series], path: Path) -> None:
    """One horizontal bar chart per sweep: fANOVA importance of each sampled parameter."""
    height = 0.9 + 0.45 * sum(len(s) for s in scores.values()) + 0.5 * len(scores)
    fig, axes = plt.subplots(
        len(scores), 1, figsize=(6.4, min(PAGE_HEIGHT, height)), layout="constrained", squeeze=False
    )
    for ax, (sweep, s) in zip(axes[:, 0], scores.items(), strict=True):
        s = s.sort_values()
        ax.barh(range(len(s)), s.to_numpy(), color="tab:blue", alpha=0.8)
        ax.set_yticks(range(len(s)), s.index)
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of the score's variance explained (fANOVA)")
        ax.set_title(f"{sweep}: hyperparameter importance", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    _save(fig, path)


# --- a search's figures: Optuna's, from the study of its trials ---------------------------


def _optuna_figure(draw, study) -> Figure:
    """Optuna's matplotlib figure of `study` (`draw(study)` returns its axes), its
    experimental-API warning silenced: the figure is the same either way; so is matplotlib's
    about a panel whose trials all took one value (it widens the axis, as it says)."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", "Attempting to set identical low and high", UserWarning)
        axes = draw(study)
    first = axes.flat[0] if isinstance(axes, np.ndarray) else axes
    return first.figure


def plot_search_params(study, path: Path) -> None:
    """`search_params_figure`, written to `path` (a note where no trial finished)."""
    if not study.trials:
        _empty(path, "no finished configuration with every searched value")
        return
    _save(search_params_figure(study), path)


def search_params_figure(study) -> Figure:
    """Score against each searched hyperparameter, a panel each, every configuration a point
    (`tables.configurations`, the study's trials) coloured by when its first trial ran:
    Optuna's `plot_slice` (log x where the space is log, the choices of a categorical one side
    by side), its colour bar in whole numbers, its choices as
    written (Optuna's are `repr`s: 'gap' in quotes) and its log axes labelled at a few
    readable steps (`_log_ticks`)."""
    from optuna.visualization.matplotlib import plot_slice

    fig = _optuna_figure(plot_slice, study)
    n = len(study.trials[0].distributions)
    fig.set_size_inches(min(16.0, max(6.4, 3.2 * n + 1.2)), 4.2)
    fig.suptitle(
        "Final unseen-level score (normalized) against each searched hyperparameter", fontsize=11
    )
    for ax in fig.axes:
        if ax.get_ylabel() == "Objective Value":
            ax.set_ylabel("normalized return (unseen levels)")
        if ax.get_ylabel() == "Trial":  # the colour bar
            ax.set_ylabel("configuration (order run)")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            continue
        if isinstance(ax.xaxis.get_units(), UnitData):  # a choice's panel: categorical units
            shown = ax.xaxis.get_major_formatter()
            ax.xaxis.set_major_formatter(
                FuncFormatter(lambda x, pos, shown=shown: _unquoted(shown(x, pos)))
            )
        elif ax.get_xscale() == "log":
            _log_ticks(ax.xaxis)
    return fig


def _unquoted(label: str) -> str:
    """A choice as written, from Optuna's `repr` of it: 'gap' -> gap, '[16, 32]' -> [16, 32]."""
    try:
        return str(ast.literal_eval(label))
    except (ValueError, SyntaxError):
        return label


def _log_ticks(axis) -> None:
    """Labels on a log axis that do not overlap (matplotlib labels each minor tick of a short
    span: 2e-4 to 9e-4 side by side): where it spans 2 decades or more, at decades
    (matplotlib's, a few); else at 1, 2 and 5 of each decade; else (a span between two of
    those) at plain steps. Minor ticks unlabelled; values as `formatting.significant` writes
    them (1e-4, 2e-4, 0.001)."""
    lo, hi = sorted(axis.get_view_interval())
    if math.log10(hi / lo) >= 2:
        locator = LogLocator(numticks=5)
    else:
        decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        ticks = [m * 10.0**d for d in decades for m in (1, 2, 5) if lo <= m * 10.0**d <= hi]
        locator = FixedLocator(ticks) if len(ticks) >= 2 else MaxNLocator(3)
    axis.set_major_locator(locator)
    axis.set_major_formatter(FuncFormatter(lambda x, _pos: formatting.significant(x)))
    axis.set_minor_formatter(NullFormatter())


def plot_search_history(study, path: Path) -> None:
    """The search's history: each configuration's score (the study's trials:
    `tables.configurations`) in the order their first trials ran, and the best so far:
    Optuna's `plot_optimization_history`."""
    from optuna.visualization.matplotlib import plot_optimization_history

    if not study.trials:
        _empty(path, "no finished configuration with every searched value")
        return
    fig = _optuna_figure(plot_optimization_history, study)
    fig.set_size_inches(8.0, 4.2)
    ax = fig.axes[0]
    ax.set_title("Search history: each configuration's final unseen-level score", fontsize=11)
    ax.set_xlabel("configuration (order its first trial ran)")
    ax.set_ylabel("normalized return (unseen levels)")
    legend = ax.get_legend()
    if legend is not None:  # Optuna's words for them
        for text in legend.get_texts():
            text.set_text(
                {"Objective Value": "a configuration", "Best Value": "best so far"}.get(
                    text.get_text(), text.get_text()
                )
            )
    fig.set_layout_engine("constrained")  # its legend sits right of the axes: keep it inside
    _save(fig, path)
