"""The report's figures, written to PNG files. The only module that imports matplotlib (Agg
backend: files only, no display); the numbers come from `rlsweep.tables` and `rlsweep.stats`.
Every `plot_*` function draws one figure into `path` (`learning_curves_figure` returns its
figure, for tests to read); one color per variant, the same in every figure.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from rlsweep import formatting  # noqa: E402
from rlsweep import metrics as M  # noqa: E402
from rlsweep import stats as S  # noqa: E402
from rlsweep.results import Experiment  # noqa: E402
from rlsweep.tables import AGGREGATE_NAMES, REPORT_RESAMPLES, on_grid, points  # noqa: E402

CURVE_POINTS = 100
"""Env-step grid points of learning curves (runs are interpolated onto a shared grid)."""
DPI = 110


def colors(variants: list[str]) -> dict[str, tuple]:
    """One color per variant, the same in every plot."""
    cmap = plt.get_cmap("tab10")
    return {v: cmap(i % 10) for i, v in enumerate(variants)}


def _steps_axis(ax) -> None:
    """Env steps on x, from 0 (call after drawing: a single point then sits at its steps)."""
    ax.set_xlabel("env steps")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: formatting.steps(x)))
    ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
    if ax.has_data():
        ax.set_xlim(left=0)


def _n_label(exp: Experiment, variant: str) -> str:
    ns = [len(s) for s in exp.scores(variant)]
    lo, hi = min(ns), max(ns)
    return (f"{lo}" if lo == hi else f"{lo}–{hi}") + (" seed" if hi == 1 else " seeds")


def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _empty(path: Path, text: str) -> None:
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    _save(fig, path)


def plot_learning_curves(
    exp: Experiment, path: Path, *, n_resamples: int = REPORT_RESAMPLES, seed: int = 0
) -> None:
    """`learning_curves_figure`, written to `path`."""
    _save(learning_curves_figure(exp, n_resamples=n_resamples, seed=seed), path)


def learning_curves_figure(
    exp: Experiment, *, n_resamples: int = REPORT_RESAMPLES, seed: int = 0
) -> Figure:
    """Per game: mean normalized return over seeds vs env steps, training levels (dashed) and
    unseen levels (solid), with 95% bootstrap bands, one color per variant. Both are drawn
    alike, from the iterations that evaluated (`test/fresh`; the rows between repeat the last
    evaluation), each run interpolated linearly onto env steps all runs cover; runs with a
    single evaluation are a point. A variant a panel cannot draw is named in it."""
    ncols = min(4, max(1, len(exp.games)))
    nrows = -(-max(1, len(exp.games)) // ncols)
    width = max(4.2 * ncols, 8.4)  # room for the legend when there are few games
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width, 3.2 * nrows + 1.0), squeeze=False, layout="constrained"
    )
    for ax in axes.flat[len(exp.games) :]:
        ax.axis("off")
    palette = colors(exp.variants)
    single = False  # some curve is a single point: the legend then shows the markers too
    for ax, game in zip(axes.flat, exp.games, strict=False):
        missing = []
        for v, color in palette.items():
            runs = exp.runs(v, game)
            drawn = False
            for metric, style, alpha in (
                (M.TRAIN_RETURN_NORM, "--", 0.08),
                (M.TEST_RETURN_NORM, "-", 0.2),
            ):
                g = on_grid([points(r, metric, fresh_only=True) for r in runs], CURVE_POINTS)
                if g is None:
                    continue
                x, values = g
                m, lo, hi = S.pointwise_mean(values, n_resamples=n_resamples, seed=seed)
                ax.plot(x, m, style, color=color, **_marker(style, len(x) == 1))
                ax.fill_between(x, lo, hi, color=color, alpha=alpha, linewidth=0)
                if len(x) == 1 and np.isfinite(lo[0]):
                    ax.errorbar(
                        x, m, [m - lo, hi - m], fmt="none", color=color, capsize=3, alpha=0.6
                    )
                drawn = True
                single |= len(x) == 1
            if not drawn:
                why = "no finished run" if not runs else "its runs share no evaluated env steps"
                missing.append(f"{v} ({why})")
        if missing:
            note = textwrap.fill("Not drawn: " + "; ".join(missing), 60)
            ax.text(0.02, 0.98, note, transform=ax.transAxes, fontsize=7, va="top", color="0.3")
        ax.set_title(game)
        _steps_axis(ax)
        ax.set_ylabel("normalized return")
        ax.grid(alpha=0.3)
    handles = [
        plt.Line2D([], [], color=c, label=textwrap.fill(f"{v} (n={_n_label(exp, v)})", 60))
        for v, c in palette.items()
    ]
    handles += [
        plt.Line2D([], [], color="gray", ls="--", label="training levels", **_marker("--", single)),
        plt.Line2D([], [], color="gray", ls="-", label="unseen levels", **_marker("-", single)),
    ]
    _fit_legend(fig, handles)
    fig.suptitle("Learning curves: mean over seeds, 95% bootstrap CI")
    return fig


def _marker(style: str, point: bool) -> dict:
    """A single point's marker: hollow for training levels ('--'), filled for unseen ones."""
    if not point:
        return {}
    return {"marker": "o", "fillstyle": "none" if style == "--" else "full"}


def _fit_legend(fig: Figure, handles: list) -> None:
    """A legend below the panels in as many columns as fit the figure's width."""
    renderer = fig.canvas.get_renderer()
    for ncol in range(len(handles), 0, -1):
        legend = fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
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
    """rliable-style interval plot: one panel per aggregate metric, one row per variant."""
    variants = list(aggs)
    if not variants:
        _empty(path, "no variant finished on every game")
        return
    fig, axes = plt.subplots(
        1,
        len(AGGREGATE_NAMES),
        figsize=(3.4 * len(AGGREGATE_NAMES), 1.4 + 0.5 * len(variants)),
        layout="constrained",
    )
    for ax, (key, title) in zip(axes, AGGREGATE_NAMES.items(), strict=True):
        for i, v in enumerate(variants):
            iv = aggs[v][key]
            if iv.has_ci:
                ax.barh(i, iv.high - iv.low, left=iv.low, height=0.6, color=colors[v], alpha=0.6)
            ax.plot([iv.value, iv.value], [i - 0.3, i + 0.3], color="black", lw=2)
        ax.set_yticks(range(len(variants)), variants if ax is axes[0] else [""] * len(variants))
        ax.set_ylim(-0.6, len(variants) - 0.4)
        ax.invert_yaxis()
        ax.set_title(title + (" (lower is better)" if key == "optimality_gap" else ""))
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
            pad = 0.1 * (max(xs) - min(xs)) or 0.05
            ax.set_xlim(min(xs) - pad, max(xs) + pad)
    fig.suptitle(
        f"Unseen-level score at the end of training: 95% stratified bootstrap CIs "
        f"({n_resamples} resamples)",
        fontsize=10,
    )
    _save(fig, path)


def plot_sample_efficiency(
    curves: dict[str, tuple[np.ndarray, list[S.Interval]]], path: Path, colors: dict[str, tuple]
) -> None:
    """IQM vs env steps per variant (`tables.sample_efficiency`), with its CI band."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    for v, (x, ivs) in curves.items():
        color = colors[v]
        y = [iv.value for iv in ivs]
        ax.plot(x, y, color=color, label=v, marker="o" if len(x) == 1 else None)
        ax.fill_between(
            x, [iv.low for iv in ivs], [iv.high for iv in ivs], color=color, alpha=0.15, linewidth=0
        )
    _steps_axis(ax)
    ax.set_ylabel("IQM normalized return (unseen levels)")
    ax.set_title("Sample efficiency: IQM over seeds × games, 95% CI", fontsize=10)
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no variant finished on every game", ha="center", transform=ax.transAxes)
    _save(fig, path)


def plot_importance(scores: dict[str, pd.Series], path: Path) -> None:
    """One horizontal bar chart per sweep: fANOVA importance of each sampled parameter."""
    fig, axes = plt.subplots(
        len(scores),
        1,
        figsize=(6.4, 0.9 + 0.45 * sum(len(s) for s in scores.values()) + 0.5 * len(scores)),
        layout="constrained",
        squeeze=False,
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
