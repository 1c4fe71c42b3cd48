"""The report's figures, written to PNG files. The only module that imports matplotlib (Agg
backend: files only, no display); the numbers come from `rlsweep.tables` and `rlsweep.stats`.
Every function draws one figure into `path`; one color per variant, the same in every figure.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import EngFormatter, MaxNLocator  # noqa: E402

from rlsweep import metrics as M  # noqa: E402
from rlsweep import stats as S  # noqa: E402
from rlsweep.results import Experiment  # noqa: E402
from rlsweep.tables import AGGREGATE_NAMES, N_RESAMPLES, on_grid, points  # noqa: E402

CURVE_POINTS = 100
"""Env-step grid points of learning curves (runs are interpolated onto a shared grid)."""
DPI = 110


def colors(variants: list[str]) -> dict[str, tuple]:
    """One color per variant, the same in every plot."""
    cmap = plt.get_cmap("tab10")
    return {v: cmap(i % 10) for i, v in enumerate(variants)}


def _steps_axis(ax) -> None:
    ax.set_xlabel("env steps")
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 25M, not 25000000
    ax.xaxis.set_major_locator(MaxNLocator(5))


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
    exp: Experiment, path: Path, *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> None:
    """Per game: mean normalized return over seeds vs env steps, training levels (dashed) and
    unseen levels (solid), with 95% bootstrap bands, one color per variant."""
    ncols = min(4, max(1, len(exp.games)))
    nrows = -(-max(1, len(exp.games)) // ncols)
    width = max(4.2 * ncols, 8.4)  # room for the legend when there are few games
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width, 3.2 * nrows + 1.0), squeeze=False, layout="constrained"
    )
    for ax in axes.flat[len(exp.games) :]:
        ax.axis("off")
    palette = colors(exp.variants)
    for ax, game in zip(axes.flat, exp.games, strict=False):
        for v, color in palette.items():
            runs = exp.runs(v, game)
            for metric, fresh, style, alpha in (
                (M.TRAIN_RETURN_NORM, False, "--", 0.08),
                (M.TEST_RETURN_NORM, True, "-", 0.2),
            ):
                g = on_grid([points(r, metric, fresh) for r in runs], CURVE_POINTS)
                if g is None:
                    continue
                x, values = g
                m, lo, hi = S.pointwise_mean(values, n_resamples=n_resamples, seed=seed)
                ax.plot(x, m, style, color=color, marker="o" if len(x) == 1 else None)
                ax.fill_between(x, lo, hi, color=color, alpha=alpha, linewidth=0)
        ax.set_title(game)
        _steps_axis(ax)
        ax.set_ylabel("normalized return")
        ax.grid(alpha=0.3)
    handles = [
        plt.Line2D([], [], color=c, label=f"{v} (n={_n_label(exp, v)})") for v, c in palette.items()
    ]
    handles += [
        plt.Line2D([], [], color="gray", ls="--", label="training levels"),
        plt.Line2D([], [], color="gray", ls="-", label="unseen levels"),
    ]
    ncol = max(1, min(len(handles), int(width // 3.4)))
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
    fig.suptitle("Learning curves: mean over seeds, 95% bootstrap CI")
    _save(fig, path)


def plot_aggregates(
    aggs: dict[str, dict[str, S.Interval]],
    path: Path,
    *,
    colors: dict[str, tuple],
    n_resamples: int = N_RESAMPLES,
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
