"""Numbers and markdown tables from a loaded experiment (`rlsweep.results.Experiment`).

Pure: no files, no plotting (`rlsweep.plots` draws, `rlsweep.report` writes). Scores are
normalized returns of finished trials; CIs are 95% percentile bootstrap CIs, stratified by game
(`rlsweep.stats`). A statistic over fewer than two runs of some game has no CI: its cell shows
the point estimate alone and says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from rlsweep import formatting
from rlsweep import metrics as M
from rlsweep import results as R
from rlsweep import stats as S
from rlsweep.results import Experiment

REPORT_RESAMPLES = 2000
"""Bootstrap resamples of a report (fewer than `stats.N_RESAMPLES`: a report draws many CIs)."""
EFFICIENCY_POINTS = 30
"""Env-step points of the sample-efficiency curve."""
AGGREGATE_NAMES = {
    "mean": "Mean",
    "median": "Median",
    "iqm": "IQM",
    "optimality_gap": "Optimality gap",
}
NO_CI = "no CI: a game has < 2 runs"


def fmt(x: float) -> str:
    return f"{x:.3f}"


def interval_text(iv: S.Interval) -> str:
    """`value [low, high]`, or the value alone when there is no CI."""
    return f"{fmt(iv.value)} [{fmt(iv.low)}, {fmt(iv.high)}]" if iv.has_ci else fmt(iv.value)


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(["---"] * len(header)) + " |",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def usd_text(x: float) -> str:
    """Dollars with cents; sub-cent amounts (test-sized trials) to 4 significant digits."""
    return f"${x:,.2f}" if x >= 0.01 or x == 0 else f"${x:.4g}".replace("e-0", "e-")


# --- the score table (table.md) -----------------------------------------------------------


def score_table(exp: Experiment, *, n_resamples: int = REPORT_RESAMPLES, seed: int = 0) -> str:
    """Markdown: rows = games, columns = variants, cells = final unseen-level score over seeds
    (mean ± CI half-width), and an IQM row; then a note saying how to read it. Every variant
    has a column, "—" where it has no finished run."""
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
        text = f"{fmt(iv.value)} ± {fmt(iv.half_width)}" if iv.has_ci else fmt(iv.value)
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
        agg.append(
            interval_text(S.interval(exp.scores(v), "iqm", n_resamples=n_resamples, seed=seed))
        )
    lines.append("| **IQM** | " + " | ".join(agg) + " |")

    counts = exp.final["status"].value_counts()
    n_counted = len(exp.counted)
    not_counted = [f"{counts.get(s, 0)} {s}" for s in (R.ERROR, R.INCOMPLETE) if counts.get(s, 0)]
    notes = norm_notes(exp.final)
    terminated = exp.final["status"] == R.TERMINATED
    uncalibrated = int((terminated & notes.notna()).sum())
    repeated = len(exp.repeats)
    dropped = int(terminated.sum()) - n_counted - uncalibrated - repeated
    if dropped:
        not_counted.append(f"{dropped} TERMINATED without an unseen-level score")
    if uncalibrated:
        not_counted.append(f"{uncalibrated} TERMINATED in a mode without normalization constants")
    if repeated:
        not_counted.append(f"{repeated} repeating a counted trial's config and seed")
    by = ", ".join(f"`{p}`" for p in exp.by) or "nothing (one variant)"
    if exp.split:
        added = ", ".join(f"`{p}`" for p in exp.split)
        by += f" ({added} added: trials differ in {'them' if len(exp.split) > 1 else 'it'}, "
        by += "and a column holds one config)"
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


def norm_notes(final: pd.DataFrame) -> pd.Series:
    """Per trial: why it has no normalized scores (a mode without reference constants), or
    None."""
    notes = [R.trial_normalization_note(r) for _, r in final.iterrows()]
    return pd.Series(notes, index=final.index, dtype=object)


# --- report.md's tables: each a list of markdown lines, [] when there is nothing to show ---


def aggregates_table(aggs: dict[str, dict[str, S.Interval]]) -> list[str]:
    return md_table(
        ["variant", *AGGREGATE_NAMES.values()],
        [[v, *(interval_text(a[k]) for k in AGGREGATE_NAMES)] for v, a in aggs.items()],
    )


def improvement_table(
    exp: Experiment, variants: Sequence[str], *, n_resamples: int = REPORT_RESAMPLES, seed: int = 0
) -> list[str]:
    """P(row > column) with its CI, for every pair of `variants` (complete ones)."""
    kw = {"n_resamples": n_resamples, "seed": seed}
    rows = [
        [x]
        + [
            ""
            if x == y
            else interval_text(S.probability_of_improvement_ci(exp.scores(x), exp.scores(y), **kw))
            for y in variants
        ]
        for x in variants
    ]
    return md_table(["X \\ Y", *variants], rows)


def gap_table(
    exp: Experiment, variants: Sequence[str], *, n_resamples: int = REPORT_RESAMPLES, seed: int = 0
) -> list[str]:
    """Training-level minus unseen-level score per variant, [95% CI] where every game has two
    or more runs (a stratified bootstrap resamples runs within each game: one run gives no
    spread), else the mean alone, saying why."""
    rows = []
    for v in variants:
        train, test = exp.scores(v, M.TRAIN_RETURN_NORM), exp.scores(v, M.TEST_RETURN_NORM)
        ok = [np.isfinite(t) for t in train]  # trials whose trainable scored no training levels
        if not all(o.any() for o in ok):
            continue
        gap = S.generalization_gap(
            [t[o] for t, o in zip(train, ok, strict=True)],
            [t[o] for t, o in zip(test, ok, strict=True)],
            n_resamples=n_resamples,
            seed=seed,
        )
        text = interval_text(gap) + ("" if gap.has_ci else f" ({NO_CI})")
        rows.append([v, text, str(sum(int(o.sum()) for o in ok))])
    return md_table(["variant", "train − test [95% CI]", "runs"], rows) if rows else []


def not_counted_table(exp: Experiment) -> list[str]:
    """The trials left out of every number, with why."""
    left = exp.final[~exp.final.index.isin(exp.counted.index)]
    repeats = exp.repeats
    return md_table(
        ["sweep", "trial", "variant", "status", "iteration", "env steps / budget", "why"],
        [
            [
                r.sweep,
                r.trial_id,
                r.variant,
                r.status,
                str(r.iteration),
                f"{formatting.count(r.env_steps)} / "
                f"{formatting.count(getattr(r, 'total_env_steps', np.nan))}",
                _why(r, repeats.get(r.Index)).replace("|", "\\|"),
            ]
            for r in left.itertuples()
        ],
    )


def _why(r, repeats: str | None = None) -> str:
    if repeats is not None:
        return f"repeats {repeats} (same config and seed): counted once"
    if r.error:
        return r.error
    if r.status == R.TERMINATED:
        return R.trial_normalization_note(r._asdict()) or "no unseen-level score"
    if r.iteration == 0:
        return "no results yet (not started or interrupted at once)"
    return "stopped before its budget (running, interrupted or stopped early)"


# --- curves on a shared env-step grid -----------------------------------------------------


def points(run: pd.DataFrame, metric: str, fresh_only: bool) -> tuple[np.ndarray, np.ndarray]:
    """A run's (env steps, metric) points; `fresh_only`: the iterations that evaluated."""
    rows = run[run[M.TEST_FRESH]] if fresh_only else run
    x = rows[M.ENV_STEPS].to_numpy(dtype=float)
    y = rows[metric].to_numpy(dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


def on_grid(
    runs: list[tuple[np.ndarray, np.ndarray]], k: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Runs linearly interpolated onto k env-step points that every run covers: (grid,
    values (k, runs)). Runs of one point each (one evaluation: a smoke run) give one point, at
    their mean env steps (asynchronous algorithms end a few steps apart). None if the runs
    share no stretch of env steps."""
    runs = [r for r in runs if len(r[0])]
    if not runs:
        return None
    lo, hi = max(x[0] for x, _ in runs), min(x[-1] for x, _ in runs)
    if lo > hi and all(len(x) == 1 for x, _ in runs):
        return np.array([np.mean([x[0] for x, _ in runs])]), np.array([[y[0] for _, y in runs]])
    if lo > hi:
        return None
    grid = np.linspace(lo, hi, k if hi > lo else 1)
    return grid, np.stack([np.interp(grid, x, y) for x, y in runs], axis=-1)


def sample_efficiency(
    exp: Experiment, variant: str, *, n_resamples: int = REPORT_RESAMPLES, seed: int = 0
) -> tuple[np.ndarray, list[S.Interval]] | None:
    """IQM over all seeds x games of the unseen-level score at shared env-step points."""
    runs = [(r["game"].iloc[0], points(r, M.TEST_RETURN_NORM, True)) for r in exp.runs(variant)]
    g = on_grid([p for _, p in runs], EFFICIENCY_POINTS)
    if g is None:
        return None
    grid, values = g
    games = [gm for gm, _ in runs]
    out = []
    for row in values:
        per_game = [row[[i for i, gm in enumerate(games) if gm == game]] for game in exp.games]
        out.append(S.interval(per_game, "iqm", n_resamples=n_resamples, seed=seed))
    return grid, out
