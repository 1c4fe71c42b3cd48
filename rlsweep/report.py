"""`rlsweep report`: turn experiment dirs into a table, plots and one markdown report.

Only finished trials (status TERMINATED with a finite unseen-level score, see
`rlsweep.results`) enter any number or plot; errored and incomplete ones are listed instead.
Variants are the values of the `by` parameter(s) — by default the swept parameters. Scores are
normalized returns; CIs are 95% percentile bootstrap CIs, stratified by game (`rlsweep.stats`).
This is the only module that imports matplotlib (Agg backend: files only, no display).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import EngFormatter, MaxNLocator  # noqa: E402

from rlsweep import metrics as M  # noqa: E402
from rlsweep import results as R  # noqa: E402
from rlsweep import stats as S  # noqa: E402
from rlsweep import storage  # noqa: E402

N_RESAMPLES = 2000
CURVE_POINTS = 100
"""Env-step grid points of learning curves (runs are interpolated onto a shared grid)."""
EFFICIENCY_POINTS = 30
AGGREGATE_NAMES = {
    "mean": "Mean",
    "median": "Median",
    "iqm": "IQM",
    "optimality_gap": "Optimality gap",
}
FILES = (
    "scores.csv",
    "final.csv",
    "table.md",
    "learning_curves.png",
    "aggregates.png",
    "sample_efficiency.png",
    "report.md",
)
"""Always written (plus scores.parquet when pyarrow is installed)."""


@dataclass
class Experiment:
    """Loaded results with a `variant` label per trial; `counted` = the finished trials."""

    curves: pd.DataFrame
    final: pd.DataFrame
    by: list[str]
    variants: list[str]
    games: list[str]

    @property
    def counted(self) -> pd.DataFrame:
        return R.finished(self.final)

    def scores(self, variant: str, metric: str = M.TEST_RETURN_NORM) -> list[np.ndarray]:
        """Finished runs' final `metric` per game (games in order; empty if none finished)."""
        c = self.counted
        c = c[c["variant"] == variant].sort_values(["seed", "trial_id"])
        return [c.loc[c["game"] == g, metric].to_numpy(dtype=float) for g in self.games]

    def complete(self, variant: str) -> bool:
        """Has at least one finished run on every game (aggregates need the same games)."""
        return all(len(s) for s in self.scores(variant))


# --- variants -----------------------------------------------------------------------------


def choose_by(final: pd.DataFrame, by: Sequence[str] | None) -> list[str]:
    """The variant parameters: `by` if given (checked), else the swept parameters; with none
    swept and several sweeps, the sweep itself."""
    known = [*R.param_columns(final), "sweep"]
    if by:
        for p in by:
            if p not in known:
                raise ValueError(
                    f"--by {p}: not a parameter of these trials; swept: "
                    f"{', '.join(R.swept_params(final)) or 'none'}; all: {', '.join(known)}"
                )
        return list(by)
    swept = R.swept_params(final)
    if not swept and final["sweep"].nunique() > 1:
        return ["sweep"]
    return swept


def _sort_key(v: object) -> tuple[int, float, str]:
    if isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def label_variants(df: pd.DataFrame, by: list[str]) -> tuple[pd.Series, list[str]]:
    """A `p=v, q=w` label per row, and the labels in value order."""
    if not by:
        return pd.Series("all", index=df.index), ["all"]
    combos = df[by].drop_duplicates()
    combos = sorted(combos.itertuples(index=False), key=lambda t: [_sort_key(v) for v in t])

    def label(values: Iterable[object]) -> str:
        return ", ".join(f"{p}={v}" for p, v in zip(by, values, strict=True))

    labels = df[by].apply(lambda r: label(r.tolist()), axis=1)
    return labels, list(dict.fromkeys(label(c) for c in combos))


def load(paths: Sequence[str | Path], by: Sequence[str] | None = None) -> Experiment:
    curves = R.load_curves(paths)
    final = R.final_scores(curves)
    by_ = choose_by(final, by)
    final["variant"], variants = label_variants(final, by_)
    curves["variant"] = (
        curves[["sweep", "trial_id"]]
        .merge(final[["sweep", "trial_id", "variant"]], how="left")["variant"]
        .to_numpy()
    )
    games = sorted(final["game"].dropna().astype(str).unique())
    return Experiment(curves, final, by_, variants, games)


# --- the table ----------------------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:.3f}"


def score_table(exp: Experiment, *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> str:
    """Markdown: rows = games, columns = variants, cells = final unseen-level score over seeds
    (mean ± CI half-width), and an IQM row; then a note saying how to read it."""
    cells: dict[tuple[str, str], tuple[S.Interval, int] | None] = {}
    for v in exp.variants:
        for g, runs in zip(exp.games, exp.scores(v), strict=True):
            cells[g, v] = (
                (S.per_game_mean([runs], n_resamples=n_resamples, seed=seed)[0], len(runs))
                if len(runs)
                else None
            )
    max_n = max((c[1] for c in cells.values() if c), default=0)

    def cell(c: tuple[S.Interval, int] | None) -> str:
        if c is None:
            return "—"
        iv, n = c
        text = f"{_fmt(iv.value)} ± {_fmt(iv.half_width)}" if iv.has_ci else _fmt(iv.value)
        return f"{text} (n={n})" if n < max_n or not iv.has_ci else text

    lines = [
        "| game | " + " | ".join(exp.variants) + " |",
        "| :--- | " + " | ".join("---:" for _ in exp.variants) + " |",
    ]
    for g in exp.games:
        lines.append(f"| {g} | " + " | ".join(cell(cells[g, v]) for v in exp.variants) + " |")
    agg = []
    for v in exp.variants:
        if not exp.complete(v):
            agg.append("—")
            continue
        iv = S.interval(exp.scores(v), "iqm", n_resamples=n_resamples, seed=seed)
        agg.append(
            f"{_fmt(iv.value)} [{_fmt(iv.low)}, {_fmt(iv.high)}]" if iv.has_ci else _fmt(iv.value)
        )
    lines.append("| **IQM** | " + " | ".join(agg) + " |")

    counts = exp.final["status"].value_counts()
    n_counted = len(exp.counted)
    not_counted = [f"{counts.get(s, 0)} {s}" for s in (R.ERROR, R.INCOMPLETE) if counts.get(s, 0)]
    notes = _norm_notes(exp.final)
    terminated = exp.final["status"] == R.TERMINATED
    uncalibrated = int((terminated & notes.notna()).sum())
    dropped = int(terminated.sum()) - n_counted - uncalibrated
    if dropped:
        not_counted.append(f"{dropped} TERMINATED without an unseen-level score")
    if uncalibrated:
        not_counted.append(f"{uncalibrated} TERMINATED in a mode without normalization constants")
    by = ", ".join(f"`{p}`" for p in exp.by) or "nothing (one variant)"
    lines += [
        "",
        f"Normalized return on unseen levels (`{M.TEST_RETURN_NORM}`) at the end of training; "
        f"columns by {by}.",
        "Cells: mean over seeds ± half-width of its 95% bootstrap CI; (n=k): fewer finished "
        "seeds than the fullest cell, or too few for a CI; —: no finished seed.",
        "IQM: interquartile mean of all seeds × games [95% CI, bootstrap stratified by game]; "
        "— where a game has no finished seed.",
        f"Percentile bootstrap, {n_resamples} resamples, seed {seed}. Counted: {n_counted} "
        f"finished trials; not counted: {', '.join(not_counted) or 'none'}.",
    ]
    lines += [
        f"Not normalized (NaN, shown as —): {note}; raw returns (`{M.TEST_RETURN}`) are in "
        "final.csv."
        for note in dict.fromkeys(notes.dropna())
    ]
    return "\n".join(lines) + "\n"


def _norm_notes(final: pd.DataFrame) -> pd.Series:
    """Per trial: why it has no normalized scores (a mode without reference constants), or
    None."""
    notes = [R.normalization_note(r) for _, r in final.iterrows()]
    return pd.Series(notes, index=final.index, dtype=object)


# --- curves -------------------------------------------------------------------------------


def _points(run: pd.DataFrame, metric: str, fresh_only: bool) -> tuple[np.ndarray, np.ndarray]:
    rows = run[run[M.TEST_FRESH]] if fresh_only else run
    x = rows[M.ENV_STEPS].to_numpy(dtype=float)
    y = rows[metric].to_numpy(dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


def _on_grid(
    runs: list[tuple[np.ndarray, np.ndarray]], k: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Runs linearly interpolated onto k env-step points that every run covers: (grid,
    values (k, runs)). None if the runs share no stretch of env steps."""
    runs = [r for r in runs if len(r[0])]
    if not runs:
        return None
    lo, hi = max(x[0] for x, _ in runs), min(x[-1] for x, _ in runs)
    if lo > hi:
        return None
    grid = np.linspace(lo, hi, k if hi > lo else 1)
    return grid, np.stack([np.interp(grid, x, y) for x, y in runs], axis=-1)


def _counted_runs(exp: Experiment, variant: str, game: str | None = None) -> list[pd.DataFrame]:
    c = exp.counted
    c = c[(c["variant"] == variant) & ((c["game"] == game) if game is not None else True)]
    keys = set(zip(c["sweep"], c["trial_id"], strict=True))
    cur = exp.curves
    mask = [k in keys for k in zip(cur["sweep"], cur["trial_id"], strict=True)]
    return [run for _, run in cur[mask].groupby(["game", "seed", "trial_id"], dropna=False)]


def _colors(variants: list[str]) -> dict[str, tuple]:
    """One color per variant, the same in every plot."""
    cmap = plt.get_cmap("tab10")
    return {v: cmap(i % 10) for i, v in enumerate(variants)}


def _steps_axis(ax) -> None:
    ax.set_xlabel("env steps")
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 25M, not 25000000
    ax.xaxis.set_major_locator(MaxNLocator(5))


def plot_learning_curves(exp: Experiment, path: Path, *, n_resamples: int, seed: int) -> None:
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
    for ax, game in zip(axes.flat, exp.games, strict=False):
        for v, color in _colors(exp.variants).items():
            runs = _counted_runs(exp, v, game)
            for metric, fresh, style, alpha in (
                (M.TRAIN_RETURN_NORM, False, "--", 0.08),
                (M.TEST_RETURN_NORM, True, "-", 0.2),
            ):
                g = _on_grid([_points(r, metric, fresh) for r in runs], CURVE_POINTS)
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
        plt.Line2D([], [], color=c, label=f"{v} (n={_n_label(exp, v)})")
        for v, c in _colors(exp.variants).items()
    ]
    handles += [
        plt.Line2D([], [], color="gray", ls="--", label="training levels"),
        plt.Line2D([], [], color="gray", ls="-", label="unseen levels"),
    ]
    ncol = max(1, min(len(handles), int(width // 3.4)))
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
    fig.suptitle("Learning curves: mean over seeds, 95% bootstrap CI")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _n_label(exp: Experiment, variant: str) -> str:
    ns = [len(s) for s in exp.scores(variant)]
    lo, hi = min(ns), max(ns)
    return (f"{lo}" if lo == hi else f"{lo}–{hi}") + (" seed" if hi == 1 else " seeds")


def plot_aggregates(
    aggs: dict[str, dict[str, S.Interval]],
    path: Path,
    *,
    colors: dict[str, tuple],
    n_resamples: int,
) -> None:
    """rliable-style interval plot: one panel per aggregate metric, one row per variant."""
    variants = list(aggs)
    if not variants:
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, "no variant finished on every game", ha="center", va="center")
        fig.savefig(path, dpi=110)
        plt.close(fig)
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
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sample_efficiency(
    exp: Experiment, variant: str, *, n_resamples: int, seed: int
) -> tuple[np.ndarray, list[S.Interval]] | None:
    """IQM over all seeds x games of the unseen-level score at shared env-step points."""
    runs = [
        (r["game"].iloc[0], _points(r, M.TEST_RETURN_NORM, True))
        for r in _counted_runs(exp, variant)
    ]
    g = _on_grid([p for _, p in runs], EFFICIENCY_POINTS)
    if g is None:
        return None
    grid, values = g
    games = [gm for gm, _ in runs]
    out = []
    for row in values:
        per_game = [row[[i for i, gm in enumerate(games) if gm == game]] for game in exp.games]
        out.append(S.interval(per_game, "iqm", n_resamples=n_resamples, seed=seed))
    return grid, out


def plot_sample_efficiency(
    curves: dict[str, tuple[np.ndarray, list[S.Interval]]], path: Path, colors: dict[str, tuple]
) -> None:
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
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- the report ---------------------------------------------------------------------------


def default_out(paths: Sequence[str | Path]) -> Path:
    """`<dir>/report` for one dir; `<parent of the first>/<a>+<b>/report` for several. A URI
    (`s3://.../<sweep>`) stands for `results/<sweep>`: reports are written locally, where a
    local sweep's would be."""
    paths = [_local_dir(p) for p in paths]
    if len(paths) == 1:
        return paths[0] / "report"
    return paths[0].parent / "+".join(p.resolve().name for p in paths) / "report"


def _local_dir(path: str | Path) -> Path:
    if storage.is_uri(path):
        return Path("results", PurePosixPath(str(path).rstrip("/")).name)
    return Path(path)


def _write_frames(exp: Experiment, out: Path) -> list[str]:
    written = ["scores.csv", "final.csv"]
    exp.curves.to_csv(out / "scores.csv", index=False)
    exp.final.to_csv(out / "final.csv", index=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return written
    df = exp.curves.copy()
    for col in [c for c in df.columns if pd.api.types.is_object_dtype(df[c])]:
        # Mixed-type params (None, numbers, strings): Parquet needs one type per column.
        df[col] = df[col].map(lambda v: v if v is None else str(v))
    df.to_parquet(out / "scores.parquet", index=False)
    return [*written, "scores.parquet"]


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(["---"] * len(header)) + " |",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _iv(iv: S.Interval) -> str:
    return f"{_fmt(iv.value)} [{_fmt(iv.low)}, {_fmt(iv.high)}]" if iv.has_ci else _fmt(iv.value)


def build_report(
    paths: Sequence[str | Path],
    *,
    by: Sequence[str] | None = None,
    out: str | Path | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    prices: str | Path | None = None,
) -> Path:
    """Write the report files (FILES) into `out` (default: `default_out(paths)`); returns the
    path of report.md. `prices`: a price table for the cost section (default: the shipped
    `rlsweep/prices.yaml`)."""
    exp = load(paths, by)
    out = Path(out) if out is not None else default_out(paths)
    out.mkdir(parents=True, exist_ok=True)
    kw = {"n_resamples": n_resamples, "seed": seed}

    written = _write_frames(exp, out)
    table = score_table(exp, **kw)
    (out / "table.md").write_text(table)
    complete = [v for v in exp.variants if exp.complete(v)]
    aggs = {v: S.aggregate(exp.scores(v), **kw) for v in complete}
    plot_learning_curves(exp, out / "learning_curves.png", **kw)
    colors = _colors(exp.variants)
    plot_aggregates(aggs, out / "aggregates.png", colors=colors, n_resamples=n_resamples)
    eff = {v: e for v in complete if (e := sample_efficiency(exp, v, **kw)) is not None}
    plot_sample_efficiency(eff, out / "sample_efficiency.png", colors)

    sweeps = exp.final.groupby("sweep")["status"].value_counts().unstack(fill_value=0)
    md = [f"# Report: {', '.join(sweeps.index)}", ""]
    for sweep, counts in sweeps.iterrows():
        parts = ", ".join(f"{counts[s]} {s}" for s in R.STATUSES if s in counts and counts[s])
        n = int(counts.sum())
        md.append(f"- `{sweep}`: {n} trial{'s' * (n != 1)} ({parts})")
    md += ["", "## Unseen-level score", "", table, "## Aggregates", ""]
    if aggs:
        md += _md_table(
            ["variant", *AGGREGATE_NAMES.values()],
            [[v, *(_iv(a[k]) for k in AGGREGATE_NAMES)] for v, a in aggs.items()],
        )
        md += ["", "![aggregate metrics](aggregates.png)", ""]
    skipped = [v for v in exp.variants if v not in complete]
    if skipped:
        md += [f"Not aggregated (a game without finished runs): {', '.join(skipped)}.", ""]
    if len(complete) > 1:
        md += [
            "## Probability of improvement",
            "",
            "P(row > column): chance that a run of the row variant beats a run of the column "
            "variant on the same game, averaged over games, [95% CI].",
            "",
        ]
        rows = []
        for x in complete:
            rows.append(
                [x]
                + [
                    ""
                    if x == y
                    else _iv(S.probability_of_improvement_ci(exp.scores(x), exp.scores(y), **kw))
                    for y in complete
                ]
            )
        md += [*_md_table(["X \\ Y", *complete], rows), ""]
    gap_rows = []
    for v in complete:
        train, test = exp.scores(v, M.TRAIN_RETURN_NORM), exp.scores(v, M.TEST_RETURN_NORM)
        ok = [np.isfinite(t) for t in train]
        if all(o.any() for o in ok):
            gap = S.generalization_gap(
                [t[o] for t, o in zip(train, ok, strict=True)],
                [t[o] for t, o in zip(test, ok, strict=True)],
                **kw,
            )
            gap_rows.append([v, _iv(gap), str(sum(int(o.sum()) for o in ok))])
    if gap_rows:
        md += [
            "## Generalization gap",
            "",
            "Normalized return on training levels minus unseen levels at the end of training "
            "(mean over seeds × games [95% CI]; runs whose last iteration ended no training "
            "episode are left out).",
            "",
            *_md_table(["variant", "train − test", "runs"], gap_rows),
            "",
        ]
    md += [
        "## Learning curves",
        "",
        "Dashed: training levels; solid: unseen levels (evaluations only). Runs are "
        "interpolated onto the env steps all of them cover.",
        "",
        "![learning curves](learning_curves.png)",
        "",
        "## Sample efficiency",
        "",
        "![sample efficiency](sample_efficiency.png)",
        "",
    ]
    dirs = [d for p in paths for d in R.experiment_dirs(p)]
    md += importance_section(dirs, exp, out)
    md += cost_section(dirs, exp, prices)
    md += ["## Trials not counted", ""]
    left = exp.final[~exp.final.index.isin(exp.counted.index)]
    if len(left):
        md += _md_table(
            ["sweep", "trial", "variant", "status", "iteration", "env steps / budget", "why"],
            [
                [
                    r.sweep,
                    r.trial_id,
                    r.variant,
                    r.status,
                    str(r.iteration),
                    f"{_steps(r.env_steps)} / {_steps(getattr(r, 'total_env_steps', np.nan))}",
                    _why(r).replace("|", "\\|"),
                ]
                for r in left.itertuples()
            ],
        )
    else:
        md.append("None: every trial finished.")
    extra = ["importance.csv", "importance.png"] if "## Hyperparameter importance" in md else []
    files = [*written, *FILES[2:-1], *extra]
    md += ["", "## Files", "", *(f"- `{f}`" for f in files), ""]
    (out / "report.md").write_text("\n".join(md))
    return out / "report.md"


# --- per sweep: hyperparameter importance, cost -------------------------------------------


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
    fig.savefig(path, dpi=110)
    plt.close(fig)


def importance_section(dirs: Sequence[Path], exp: Experiment, out: Path) -> list[str]:
    """Importances of each sweep's sampled parameters (sweeps that sampled any)."""
    from rlsweep.importance import importances

    found: dict[str, pd.Series] = {}
    notes = []
    for d in dirs:
        spec = R.sweep_spec(d)
        if spec is None or not spec.sampled_keys:
            continue
        sweep = exp.counted[exp.counted["sweep"] == d.name]
        got = importances(spec, sweep, d)
        if got is None:
            notes.append(f"`{d.name}`: too few finished trials for importances.")
            continue
        found[d.name], source = got
        notes.append(f"`{d.name}`: from {source}.")
    if not found:
        return []
    table = pd.concat(found, names=["sweep", "param"]).reset_index()
    table.to_csv(out / "importance.csv", index=False)
    plot_importance(found, out / "importance.png")
    rows = [[r.sweep, r.param, _fmt(r.importance)] for r in table.itertuples()]
    return [
        "## Hyperparameter importance",
        "",
        "fANOVA (Optuna's importance module) over each sweep's sampled parameters: the share of "
        "the final unseen-level score's variance each explains.",
        "",
        *_md_table(["sweep", "parameter", "importance"], rows),
        "",
        *notes,
        "",
        "![hyperparameter importance](importance.png)",
        "",
    ]


def usd_text(x: float) -> str:
    """Dollars with cents; sub-cent amounts (test-sized trials) to 4 significant digits."""
    return f"${x:,.2f}" if x >= 0.01 or x == 0 else f"${x:.4g}".replace("e-0", "e-")


def cost_section(
    dirs: Sequence[Path], exp: Experiment, prices: str | Path | None = None
) -> list[str]:
    """$ per trial and per sweep, for sweeps that recorded the instance type they ran on."""
    from rlsweep import cost

    table = cost.load_prices(prices) if prices is not None else None

    lines = []
    for d in dirs:
        info = R.run_info(d)
        instance = info.get("instance_type")
        if not instance:
            continue
        spot = bool(info.get("spot"))
        trials = exp.final[exp.final["sweep"] == d.name]
        # a trial's resources as Ray held them (rlsweep.spec.trial_cpus: process + runners)
        cpus = trials.get("num_cpus", 1) + trials.get("num_env_runners", 0)
        gpus = trials.get("num_gpus", 0) * np.ones(len(trials))
        walls = trials[M.WALL_S].fillna(0.0)  # a trial that never reported ran ~0 s
        try:
            usd = [
                cost.trial_cost(w, c, g, instance, spot, table)
                for w, c, g in zip(walls, cpus * np.ones(len(trials)), gpus, strict=True)
            ]
        except cost.PriceError as e:  # e.g. a type missing from the price table
            lines.append(f"| {d.name} | {instance} | {len(trials)} | ? | ? ({e.message}) |")
            continue
        if not usd:
            continue
        lines.append(
            f"| {d.name} | {instance} ({'spot' if spot else 'on-demand'}) | {len(usd)} | "
            f"{usd_text(np.mean(usd))} | {usd_text(np.sum(usd))} |"
        )
    if not lines:
        return []
    return [
        "## Cost",
        "",
        "Each trial's wall time × its share of the instance (CPUs and GPUs it held) × the "
        "instance's $/h from the price table (`rlsweep/prices.yaml`: estimates, editable).",
        "",
        "| sweep | instance | trials | $ per trial (mean) | $ for the sweep |",
        "| :--- | :--- | ---: | ---: | ---: |",
        *lines,
        "",
    ]


def _why(r) -> str:
    if r.error:
        return r.error
    if r.status == R.TERMINATED:
        return R.normalization_note(r._asdict()) or "no unseen-level score"
    if r.iteration == 0:
        return "no results yet (not started or interrupted at once)"
    return "stopped before its budget (running, interrupted or stopped early)"


def _steps(x: object) -> str:
    try:
        return f"{int(x):,}"
    except (TypeError, ValueError):
        return "?"
