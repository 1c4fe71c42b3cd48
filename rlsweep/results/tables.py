"""Numbers and markdown tables from a loaded experiment (`rlsweep.results.results.Experiment`).

Pure: no files, no plotting (`rlsweep.results.plots` draws, `rlsweep.results.report` writes). Scores
are normalized returns of finished trials; CIs are 95% percentile bootstrap CIs, stratified by game
(`rlsweep.results.stats`). A statistic over fewer than MIN_CI_RUNS runs of some game has no CI: a
bootstrap of two runs that happen to agree gives an "interval" of width 0, which is no
confidence interval. Its cell shows the point estimate alone and says so.

Every table reads the scores of all its variants from one pass over the trials
(`Experiment.all_scores`), so a report's work grows linearly with its trials. A search's report
ranks its configurations (`ranking`, `top_table`); pairwise tables stay among a few variants
(`rlsweep.results.report` chooses which).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rlsweep import formatting
from rlsweep import metrics as M
from rlsweep.results import results as R
from rlsweep.results import stats as S
from rlsweep.results.results import Experiment
from rlsweep.spec.spec import Reference

REPORT_RESAMPLES = 2000
"""Bootstrap resamples of a report (fewer than `stats.N_RESAMPLES`: a report draws many CIs)."""
EFFICIENCY_POINTS = 30
"""Env-step points of the sample-efficiency curve where runs evaluated at different points."""
ALIGNED = 0.05
"""Runs' i-th evaluations at most this share of the spacing apart count as the same point."""
AGGREGATE_NAMES = {
    name: "IQM" if name == "iqm" else name.replace("_", " ").capitalize() for name in S.STATISTICS
}
"""The title of each aggregate metric a report shows (`stats.STATISTICS`, in its order)."""
MIN_CI_RUNS = 3
"""Runs per game a CI needs. rliable's advice (Agarwal et al. 2021) is intervals from enough
runs; a percentile bootstrap over 2 runs takes 3 values at most (both runs' mean and either
run alone) and over 1 run none: such "CIs" are not shown."""
NO_CI = f"no CI: a game has < {MIN_CI_RUNS} runs"


def fmt(x: float) -> str:
    return f"{x:.3f}"


def too_few(n: int) -> str:
    """Why a cell of `n` runs shows no CI."""
    return f"{formatting.plural(n, 'run')}: too few for a CI"


def enough_runs(scores: S.Scores) -> bool:
    """Every game has MIN_CI_RUNS runs or more: a CI over these scores may be shown."""
    return all(len(g) >= MIN_CI_RUNS for g in S.per_game(scores))


def admitted(iv: S.Interval, *scores: S.Scores) -> S.Interval:
    """`iv` as a report shows it: without its CI unless every game of every one of `scores`
    has MIN_CI_RUNS runs (stats' own rule, 2 runs, keeps rliable's numbers)."""
    if iv.has_ci and not all(enough_runs(s) for s in scores):
        return S.Interval(iv.value, np.nan, np.nan)
    return iv


def interval(scores: S.Scores, statistic: str, **kw) -> S.Interval:
    """`stats.interval` (a name in `stats.STATISTICS`), its CI only from MIN_CI_RUNS runs per
    game: below that, the point estimate alone, and no bootstrap drawn."""
    if not enough_runs(scores):
        return S.Interval(float(S.STATISTICS[statistic](*S.per_game(scores))), np.nan, np.nan)
    return S.interval(scores, statistic, **kw)


def aggregates(
    scores: dict[str, list[np.ndarray]], *, n_resamples: int = REPORT_RESAMPLES, seed: int = 0
) -> dict[str, dict[str, S.Interval]]:
    """`stats.aggregate` of each variant's scores (variants with a run on every game), CIs only
    from MIN_CI_RUNS runs per game."""
    kw = {"n_resamples": n_resamples, "seed": seed}
    return {
        v: {name: interval(sc, name, **kw) for name in S.STATISTICS}
        for v, sc in scores.items()
        if R.complete(sc)
    }


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
    (mean [95% CI], or the mean alone below MIN_CI_RUNS runs, saying so), and an IQM
    row; then a note saying how to read it. Every variant has a column, "—" where it has no
    finished run."""
    kw = {"n_resamples": n_resamples, "seed": seed}
    scores = exp.all_scores()
    cells: dict[tuple[str, str], tuple[S.Interval, int] | None] = {}
    for v in exp.variants:
        for g, runs in zip(exp.games, scores[v], strict=True):
            cells[g, v] = (interval([runs], "mean", **kw), len(runs)) if len(runs) else None
    max_n = max((c[1] for c in cells.values() if c), default=0)

    def cell(c: tuple[S.Interval, int] | None) -> str:
        if c is None:
            return "—"
        iv, n = c
        if not iv.has_ci:
            return f"{fmt(iv.value)} ({too_few(n)})"
        # [lo, hi], not ± a half-width: a percentile bootstrap's interval of a few runs is
        # rarely symmetric (0.583 [0.250, 0.750] is no 0.583 ± 0.250).
        text = interval_text(iv)
        return f"{text} (n={n})" if n < max_n else text

    lines = [
        "| game | " + " | ".join(exp.variants) + " |",
        "| :--- | " + " | ".join("---:" for _ in exp.variants) + " |",
    ]
    for g in exp.games:
        lines.append(f"| {g} | " + " | ".join(cell(cells[g, v]) for v in exp.variants) + " |")
    agg = []
    for v in exp.variants:
        if not R.complete(scores[v]):
            agg.append("—")
            continue
        iv = interval(scores[v], "iqm", **kw)
        agg.append(interval_text(iv) + ("" if iv.has_ci else f" ({NO_CI})"))
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
    if unstarted := sum(exp.unstarted.values()):
        not_counted.append(f"{unstarted} not started")
    by = ", ".join(f"`{p}`" for p in exp.by) or "nothing (one variant)"
    if exp.split:
        added = ", ".join(f"`{p}`" for p in exp.split)
        by += f" ({added} added: trials differ in {'them' if len(exp.split) > 1 else 'it'}, "
        by += "and a column holds one config)"
    lines += [
        "",
        f"Normalized return on unseen levels (`{M.TEST_RETURN_NORM}`) at the end of training; "
        f"columns by {by}.",
        "Cells: mean over seeds [95% bootstrap CI]; (n=k): fewer finished "
        f"seeds than the fullest cell; (k runs: too few for a CI): fewer than {MIN_CI_RUNS} "
        "runs, the mean alone (a bootstrap of 2 runs that agree gives a CI of width 0); —: no "
        "finished seed.",
        "IQM: interquartile mean of all seeds × games [95% CI, bootstrap stratified by game, "
        f"where every game has {MIN_CI_RUNS}+ runs]; — where a game has no finished seed.",
        f"Percentile bootstrap, {n_resamples} resamples, seed {seed}. Counted: "
        f"{formatting.plural(n_counted, 'finished trial')}; "
        f"not counted: {', '.join(not_counted) or 'none'}.",
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
    """P(row > column) for every pair of `variants` (complete ones): with its CI where both
    have MIN_CI_RUNS runs per game, else the estimate alone, saying why, as every table does.
    Quadratic in `variants`: a report passes a bounded set (an ablation's variants, a search's
    top few)."""
    kw = {"n_resamples": n_resamples, "seed": seed}
    scores = exp.all_scores(variants=variants)

    def cell(x: str, y: str) -> str:
        a, b = scores[x], scores[y]
        if not (enough_runs(a) and enough_runs(b)):
            return f"{fmt(S.probability_of_improvement(a, b))} ({NO_CI})"
        return interval_text(S.probability_of_improvement_ci(a, b, **kw))

    rows = [[x] + ["" if x == y else cell(x, y) for y in variants] for x in variants]
    return md_table(["X \\ Y", *variants], rows)


def gap_table(
    exp: Experiment, variants: Sequence[str], *, n_resamples: int = REPORT_RESAMPLES, seed: int = 0
) -> list[str]:
    """Training-level minus unseen-level score per variant, [95% CI] where every game has
    MIN_CI_RUNS or more runs (a stratified bootstrap resamples runs within each game), else the
    mean alone, saying why."""
    rows = []
    trains = exp.all_scores(M.TRAIN_RETURN_NORM, variants)
    tests = exp.all_scores(M.TEST_RETURN_NORM, variants)
    for v in variants:
        train, test = trains[v], tests[v]
        ok = [np.isfinite(t) for t in train]  # trials whose trainable scored no training levels
        if not all(o.any() for o in ok):
            continue
        train = [t[o] for t, o in zip(train, ok, strict=True)]
        test = [t[o] for t, o in zip(test, ok, strict=True)]
        if enough_runs(train):
            gap = S.generalization_gap(train, test, n_resamples=n_resamples, seed=seed)
        else:
            diff = [a - b for a, b in zip(train, test, strict=True)]
            gap = S.Interval(S.mean(diff), np.nan, np.nan)
        text = interval_text(gap) + ("" if gap.has_ci else f" ({NO_CI})")
        rows.append([v, text, str(sum(int(o.sum()) for o in ok))])
    return md_table(["variant", "train − test [95% CI]", "runs"], rows) if rows else []


# --- a search's tables: its configurations ranked ------------------------------------------


def ranking(exp: Experiment) -> pd.DataFrame:
    """Every variant with a finished run, best first, from one pass over the counted trials:
    `variant`, `score` (mean over the games it ran of its per-game mean unseen-level score:
    rliable's mean where it ran every game), `runs`, `games` (how many it ran), `seeds` and
    `trials` (sorted lists). Ties keep the variants' order."""
    c = exp.counted
    cols = ["variant", "score", "runs", "games", "seeds", "trials"]
    if c.empty:
        return pd.DataFrame(columns=cols)
    g = c.groupby("variant", sort=False)
    out = pd.DataFrame(
        {
            "score": configuration_scores(c),
            "runs": g.size(),
            "games": g["game"].nunique(),
            "seeds": g["seed"].agg(lambda x: sorted(set(x), key=_seed_order)),
            "trials": g["trial_id"].agg(sorted),
        }
    )
    order = {v: i for i, v in enumerate(exp.variants)}
    out["order"] = [order.get(v, len(order)) for v in out.index]
    out = out.sort_values(["score", "order"], ascending=[False, True], kind="stable")
    return out.drop(columns="order").rename_axis("variant").reset_index()[cols]


def configuration_scores(counted: pd.DataFrame) -> pd.Series:
    """Each variant's (configuration's) score, as `ranking` ranks it: the mean over the games
    it ran of its mean unseen-level score over seeds."""
    per_game = counted.groupby(["variant", "game"], sort=False)[M.TEST_RETURN_NORM].mean()
    return per_game.groupby(level="variant", sort=False).mean()


def configurations(counted: pd.DataFrame, params: Sequence[str]) -> pd.DataFrame:
    """One row per configuration of a search's counted trials, in the order its first trial
    started (`trial_order`): `variant`, its `params` and, as `test/return_norm`, its score
    (`configuration_scores`): what a search's figures and importances plot, not its trials,
    whose games and seeds score apart."""
    first = counted.loc[trial_order(counted).sort_values().index].drop_duplicates("variant")
    scores = configuration_scores(counted)
    columns = list(dict.fromkeys(["variant", *params]))  # `--by variant` searches by label
    out = first[columns].assign(**{M.TEST_RETURN_NORM: first["variant"].map(scores)})
    return out.reset_index(drop=True)


def _seed_order(seed: Any) -> tuple[bool, Any]:
    """Seeds in numeric order (2 before 10), any that is no number after them, as text."""
    number = isinstance(seed, int | float | np.number) and not isinstance(seed, bool)
    return (not number, seed if number else str(seed))


def top_table(
    exp: Experiment,
    ranked: pd.DataFrame,
    top: int,
    *,
    n_resamples: int = REPORT_RESAMPLES,
    seed: int = 0,
) -> list[str]:
    """The `top` rows of `ranking`: rank, configuration, score, its 95% CI where every game it
    ran has MIN_CI_RUNS+ runs (the seeds repeat; else "—" and how many runs it has), seeds,
    games and trials."""
    head = ranked.head(top)
    scores = exp.all_scores(variants=head["variant"])
    kw = {"n_resamples": n_resamples, "seed": seed}
    rows = []
    for i, r in enumerate(head.itertuples(), start=1):
        ran = [g for g in scores[r.variant] if len(g)]
        iv = interval(ran, "mean", **kw)
        fewest = min(len(g) for g in ran)
        ci = f"[{fmt(iv.low)}, {fmt(iv.high)}]" if iv.has_ci else f"— ({too_few(fewest)})"
        trials = ", ".join(r.trials[:2]) + (f" (+{len(r.trials) - 2})" if len(r.trials) > 2 else "")
        # "seed 0", not a bare "0" beside the games' count: which seeds, not how many
        seeds = ("seed " if len(r.seeds) == 1 else "seeds ") + ", ".join(map(str, r.seeds))
        rows.append([str(i), r.variant, fmt(iv.value), ci, seeds, str(r.games), trials])
    header = ["rank", "configuration", "score", "95% CI", "seeds", "games", "trials"]
    return md_table(header, rows)


def trial_order(final: pd.DataFrame) -> pd.Series:
    """Each trial's place in the order the search started them: Tune numbers its trials
    (`<game>_s<seed>_<experiment>_<00042>`), and dir names sort by game first; by sweep, then
    that number, then the name (trials without one)."""
    number = pd.to_numeric(
        final["trial_id"].astype(str).str.extract(r"_(\d+)$")[0], errors="coerce"
    )
    keys = pd.DataFrame(
        {"sweep": final["sweep"].astype(str), "n": number, "id": final["trial_id"].astype(str)}
    )
    ordered = keys.sort_values(["sweep", "n", "id"], kind="stable", na_position="last").index
    return pd.Series(range(len(final)), index=ordered).reindex(final.index)


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


# --- an ablation's raw returns: published numbers beside them, and differences ------------

SPLIT_METRICS = {"train": M.TRAIN_RETURN, "test": M.TEST_RETURN}
"""A reference's `split` -> the raw return rlsweep measures on those levels."""
SPLIT_NAMES = {"train": "training", "test": "unseen"}


def _md(text: str | None) -> str:
    return (text or "").replace("|", "\\|")


def _published(r: Reference | None) -> list[str]:
    """A reference's columns: its number, env steps, runs, source and note."""
    if r is None:
        return [""] * 5
    return [
        formatting.published(r.value, r.error, r.error_kind),
        formatting.steps(r.budget),
        formatting.seeds(r.seeds),
        _md(r.source),
        _md(r.note),
    ]


NOT_RUN = "not run here"
"""rlsweep's cell of a game the sweep did not run, beside a published number of it."""


def reference_table(
    exp: Experiment,
    references: Sequence[Reference],
    *,
    n_resamples: int = REPORT_RESAMPLES,
    seed: int = 0,
) -> list[str]:
    """Final raw returns per game, variant and levels (training, unseen): rlsweep's mean over
    seeds [95% CI], its runs and their mean env steps; and each published number of
    `references` (a spec's `reference:`) in columns of its own, on the row of its game, variant
    and levels, never in the statistics. A reference without a variant (context) gets a row of
    its own, as does one whose variant the table splits further (`A, lr=0.0001`, `A, lr=0.0005`:
    a `space:` beside the variants); a game the sweep does not run (a reference kept through a
    `--games` cut: in no trial nor in its spec's games) gets its references' rows alone, marked
    `NOT_RUN`, not a row of no finished runs per variant. The published columns only where
    there are references."""
    games = list(dict.fromkeys([*exp.games, *(r.game for r in references)]))
    kw = {"n_resamples": n_resamples, "seed": seed}
    ours: dict[tuple[str, str | None, str], list[str]] = {}
    for split, metric in SPLIT_METRICS.items():
        scores = exp.all_scores(metric, exp.variants, games)
        done = R.finished(exp.final, metric, pooled=exp.pooled, quiet=True)
        steps = done.groupby(["variant", "game"])[M.ENV_STEPS].mean()
        for v in exp.variants:
            for game, runs in zip(games, scores[v], strict=True):
                if not len(runs):
                    ours[game, v, split] = ["—", "0", ""]
                    continue
                iv = interval([runs], "mean", **kw)
                text = interval_text(iv) if iv.has_ci else f"{fmt(iv.value)} ({too_few(len(runs))})"
                ours[game, v, split] = [text, str(len(runs)), formatting.steps(steps[v, game])]
    published_only = [r.variant for r in references if r.variant and r.variant not in exp.variants]
    rows = []
    planned = {g for spec in exp.specs.values() for g in spec.games}  # started or not yet
    for game in games:
        ran = game in exp.games or game in planned
        for v in [*exp.variants, *dict.fromkeys(published_only), None]:
            for split in SPLIT_METRICS:
                refs = [r for r in references if (r.game, r.variant, r.split) == (game, v, split)]
                if (v not in exp.variants or not ran) and not refs:  # a published number alone
                    continue
                label = [game, "(context)" if v is None else _md(v), SPLIT_NAMES[split]]
                for i, r in enumerate(refs or [None]):
                    # rlsweep's cells once per game, variant and levels, however many references
                    cells = ours.get((game, v, split), [""] * 3) if i == 0 else [""] * 3
                    if not ran and v in exp.variants and i == 0:
                        cells = [NOT_RUN, "", ""]
                    rows.append(label + cells + (_published(r) if references else []))
    header = ["game", "variant", "levels", "rlsweep: mean [95% CI]", "runs", "env steps"]
    if references:
        header += ["published", "at env steps", "its runs", "source", "note"]
    return md_table(header, rows)


def difference_table(
    exp: Experiment,
    x: str,
    others: Sequence[str],
    *,
    n_resamples: int = REPORT_RESAMPLES,
    seed: int = 0,
) -> list[str]:
    """Variant `x` against each of `others`, per game, on training and on unseen levels (final
    raw returns): mean(X) − mean(Y) [95% CI] (`stats.mean_difference`: X's and Y's runs
    resampled independently within the game) and P(X > Y) [95% CI], CIs where both have
    MIN_CI_RUNS runs or more, else the point estimate alone, saying why; "—" where either has
    no finished run."""
    kw = {"n_resamples": n_resamples, "seed": seed}
    variants = [x, *others]
    scores = {split: exp.all_scores(metric, variants) for split, metric in SPLIT_METRICS.items()}
    rows = []
    alike: dict[str, list[str]] = {}  # per other variant, where its runs scored as x's
    for gi, game in enumerate(exp.games):
        for split in SPLIT_METRICS:
            a = scores[split][x][gi]
            for y in others:
                b = scores[split][y][gi]
                pair = f"{_md(x)} − {_md(y)}"
                if not (len(a) and len(b)):
                    rows.append([game, SPLIT_NAMES[split], pair, "—", "—", f"{len(a)}, {len(b)}"])
                    continue
                if len(a) > 1 and np.array_equal(np.sort(a), np.sort(b)):
                    alike.setdefault(y, []).append(f"{game} {SPLIT_NAMES[split]}")
                diff = admitted(S.mean_difference([a], [b], **kw), [a], [b])
                better = admitted(S.probability_of_improvement_ci([a], [b], **kw), [a], [b])
                why = too_few(min(len(a), len(b)))
                rows.append(
                    [
                        game,
                        SPLIT_NAMES[split],
                        pair,
                        interval_text(diff) + ("" if diff.has_ci else f" ({why})"),
                        interval_text(better) + ("" if better.has_ci else f" ({why})"),
                        f"{len(a)}, {len(b)}",
                    ]
                )
    header = [
        "game",
        "levels",
        "X − Y",
        "mean(X) − mean(Y) [95% CI]",
        "P(X > Y) [95% CI]",
        "runs X, Y",
    ]
    notes = [
        f"{_md(x)} and {_md(y)} scored the same on every run ({', '.join(where)}): each "
        "variant's evaluations play the same levels with the same random draws, so policies "
        "that act alike, as near-random ones do, score alike."
        for y, where in alike.items()
    ]
    return md_table(header, rows) + (["", *notes] if notes else [])


# --- curves on a shared env-step grid -----------------------------------------------------


def points(run: pd.DataFrame, metric: str, fresh_only: bool) -> tuple[np.ndarray, np.ndarray]:
    """A run's (env steps, metric) points; `fresh_only`: the iterations that evaluated."""
    x = run[M.ENV_STEPS].to_numpy(dtype=float)
    y = run[metric].to_numpy(dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    if fresh_only:
        ok &= run[M.TEST_FRESH].to_numpy(dtype=bool)
    return x[ok], y[ok]


def on_grid(
    runs: list[tuple[np.ndarray, np.ndarray]], k: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The runs' values at env-step points they share: (points, values (points, runs)).

    Runs that evaluated at the same points (the same iterations of the same schedule: their
    i-th points lie within ALIGNED of the spacing of each other, a few env steps apart as
    batches overshoot) give those points as measured, at their mean env steps, as far as every
    run reached. Others are linearly interpolated onto k points that every run covers; runs of
    one point each that share no stretch give one point, at their mean env steps. None if the
    runs share no stretch of env steps."""
    runs = [r for r in runs if len(r[0])]
    if not runs:
        return None
    n = min(len(x) for x, _ in runs)
    xs = np.stack([x[:n] for x, _ in runs])
    at = xs.mean(axis=0)
    spacing = np.diff(at).min() if n > 1 else at[0]
    if np.ptp(xs, axis=0).max() <= ALIGNED * spacing:
        return at, np.stack([y[:n] for _, y in runs], axis=-1)
    lo, hi = max(x[0] for x, _ in runs), min(x[-1] for x, _ in runs)
    if lo > hi and all(len(x) == 1 for x, _ in runs):
        return np.array([np.mean([x[0] for x, _ in runs])]), np.array([[y[0] for _, y in runs]])
    if lo > hi:
        return None
    grid = np.linspace(lo, hi, k if hi > lo else 1)
    return grid, np.stack([np.interp(grid, x, y) for x, y in runs], axis=-1)


def sample_efficiency(
    exp: Experiment,
    variant: str,
    *,
    n_resamples: int = REPORT_RESAMPLES,
    seed: int = 0,
    runs: list[pd.DataFrame] | None = None,
) -> tuple[np.ndarray, list[S.Interval]] | None:
    """IQM over all seeds x games of the unseen-level score at shared env-step points, CIs from
    MIN_CI_RUNS runs per game. `runs`: the variant's (`Experiment.all_runs`), if at hand."""
    runs = exp.runs(variant) if runs is None else runs
    found = [(r["game"].iloc[0], points(r, M.TEST_RETURN_NORM, True)) for r in runs]
    g = on_grid([p for _, p in found], EFFICIENCY_POINTS)
    if g is None:
        return None
    grid, values = g
    games = np.array([gm for gm, _ in found], dtype=object)
    out = []
    for row in values:
        per_game = [row[games == game] for game in exp.games]
        out.append(interval(per_game, "iqm", n_resamples=n_resamples, seed=seed))
    return grid, out
