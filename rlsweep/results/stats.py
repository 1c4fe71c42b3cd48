"""Aggregate statistics with confidence intervals over runs x games of normalized scores.

The method is that of Agarwal et al. (2021), "Deep RL at the Edge of the Statistical Precipice",
and the numbers are those of its library, rliable 1.2.0: point estimates (mean, median,
interquartile mean, optimality gap, probability of improvement) with 95% *stratified* bootstrap
percentile confidence intervals — runs are resampled with replacement within each game, never
across games, so games with very different score spreads keep their own variability.

Definitions (rliable's `metrics`): mean = mean over games of the per-game mean over runs;
median = median over games of the per-game means (not the median of all scores); IQM = 25%
trimmed mean of all runs x games scores pooled; optimality gap = 1 − mean of min(score, 1);
probability of improvement P(X > Y) = per game, the chance a run of X beats a run of Y (ties
count half: the Mann-Whitney U / (n_x n_y)), averaged over games; the difference of X and Y =
mean(X) − mean(Y).

CIs are those of rliable's `get_interval_estimates` (arch's percentile method over its
`StratifiedBootstrap`, or `StratifiedIndependentBootstrap` for a pair X, Y, with
`task_bootstrap=False`): with the same `n_resamples` as its `reps`, and `seed` as in
`np.random.seed(seed)` before the call (rliable draws its indices from NumPy's global legacy
RNG; its `random_state` argument does not reach them), they are the same numbers, because
`stratified_bootstrap` draws the same indices in the same order. `tests/test_stats_rliable.py`
checks this against a fixture made by rliable itself. We reimplement rather than import
rliable because it cannot share rlsweep's environment: it needs arch < 8, which works only beside
pandas < 3, while Ray 2.60 brings pandas 3.

Inputs: a 2-D array shaped (runs, games), or a sequence with one 1-D array of runs per game (for
games with different numbers of finished runs, which rliable does not take: there mean, median
and optimality gap weigh every game the same, and IQM pools all scores). NaN raises
`ValueError`: callers drop or mark errored trials first (see `rlsweep.results.results`). A CI needs
at least two runs in every game; otherwise its bounds are NaN. Everything is deterministic given
`seed`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.stats
from numpy.typing import ArrayLike

Scores = np.ndarray | Sequence[ArrayLike]
"""(runs, games) array, or one 1-D array of runs per game."""

N_RESAMPLES = 10_000
"""Bootstrap resamples of an interval whose caller names none."""
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A point estimate and its confidence interval (bounds NaN when it cannot be computed)."""

    value: float
    low: float
    high: float

    @property
    def has_ci(self) -> bool:
        return bool(np.isfinite(self.low) and np.isfinite(self.high))


# --- inputs ---------------------------------------------------------------------------------


def per_game(scores: Scores) -> list[np.ndarray]:
    """Split scores into one float array of runs per game; reject NaN/inf and empty games."""
    if isinstance(scores, np.ndarray):
        if scores.ndim != 2:
            raise ValueError(f"scores must be (runs, games); got shape {scores.shape}")
        games = [scores[:, g].astype(float) for g in range(scores.shape[1])]
    else:
        games = [np.asarray(g, dtype=float).reshape(-1) for g in scores]
    if not games:
        raise ValueError("scores hold no games")
    for g, runs in enumerate(games):
        if runs.size == 0:
            raise ValueError(f"game {g} has no runs")
        if not np.isfinite(runs).all():
            raise ValueError(
                f"game {g} has non-finite scores {runs.tolist()}; drop or mark errored trials first"
            )
    return games


# --- statistics ---------------------------------------------------------------------------
# Each takes one array per game whose last axis is runs (leading axes: bootstrap resamples), so
# the same function gives the point estimate and, vectorized, the bootstrap distribution.


def _pooled(games: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate(games, axis=-1)


def _mean(*games: np.ndarray) -> np.ndarray:
    # rliable's aggregate_mean: the mean over games of each game's mean over runs.
    return np.mean([g.mean(axis=-1) for g in games], axis=0)


def _median(*games: np.ndarray) -> np.ndarray:
    # rliable's aggregate_median: the median over games of each game's mean over runs.
    return np.median([g.mean(axis=-1) for g in games], axis=0)


def _iqm(*games: np.ndarray) -> np.ndarray:
    # rliable's aggregate_iqm: mean of the middle 50% of all runs x games scores (25% trimmed
    # from each end).
    return scipy.stats.trim_mean(_pooled(games), 0.25, axis=-1)


def _optimality_gap(*games: np.ndarray) -> np.ndarray:
    # rliable's aggregate_optimality_gap (gamma 1): how far below a normalized score of 1 the
    # runs fall; scores above 1 earn no credit.
    return 1.0 - _mean(*(np.minimum(g, 1.0) for g in games))


def _improvement(*games: np.ndarray) -> np.ndarray:
    # First half: X's games, second half: Y's. Per game P(X > Y) over all run pairs, ties 0.5,
    # which is the Mann-Whitney U statistic / (n * m) as in rliable; then the mean over games.
    k = len(games) // 2
    probs = []
    for x, y in zip(games[:k], games[k:], strict=True):
        xx, yy = x[..., :, None], y[..., None, :]
        probs.append(((xx > yy) + 0.5 * (xx == yy)).mean(axis=(-2, -1)))
    return np.mean(probs, axis=0)


def _difference(*games: np.ndarray) -> np.ndarray:
    # First half: X's games, second half: Y's. rliable's aggregate_mean of X minus that of Y.
    k = len(games) // 2
    return _mean(*games[:k]) - _mean(*games[k:])


STATISTICS: dict[str, Callable[..., np.ndarray]] = {
    "mean": _mean,
    "median": _median,
    "iqm": _iqm,
    "optimality_gap": _optimality_gap,
}
"""The aggregate metrics a report shows, by name."""


def mean(scores: Scores) -> float:
    return float(_mean(*per_game(scores)))


def median(scores: Scores) -> float:
    """Median over games of each game's mean score (rliable's "median of sample means")."""
    return float(_median(*per_game(scores)))


def iqm(scores: Scores) -> float:
    """Interquartile mean: `scipy.stats.trim_mean(all_scores, 0.25)`."""
    return float(_iqm(*per_game(scores)))


def optimality_gap(scores: Scores) -> float:
    """1 − mean of min(score, 1): 0 when every run reaches a normalized score of 1."""
    return float(_optimality_gap(*per_game(scores)))


def probability_of_improvement(x: Scores, y: Scores) -> float:
    """P(X > Y): chance that a run of variant X beats a run of Y on the same game, averaged
    over games (ties count half)."""
    return float(_improvement(*_two_variants(x, y)))


# --- bootstrap ------------------------------------------------------------------------------


def _resample_indices(
    lengths: Sequence[int], sets: Sequence[int], n_resamples: int, seed: int
) -> list[np.ndarray]:
    """Bootstrap draws of run indices: one (n_resamples, runs) array per game.

    Drawn as rliable 1.2.0 draws them after `np.random.seed(seed)`: for each resample, for each
    score set (consecutive games: all of them, or X's then Y's), `np.random.choice(runs,
    (runs, games))`, i.e. one legacy-RandomState integer per (run, game) slot, runs-major. A game
    with fewer runs than its set's longest has no slot in the missing rows (rliable only takes
    full matrices). Legacy draws are sequential, so one call yields rliable's per-resample calls.
    """
    highs, owner, start = [], [], 0
    for size in sets:
        n = np.asarray(lengths[start : start + size])
        _, game = np.nonzero(np.arange(n.max())[:, None] < n)  # (run, game) slots, runs-major
        highs.append(n[game])
        owner.append(start + game)
        start += size
    draws = np.random.RandomState(seed).randint(
        0, np.concatenate(highs), size=(n_resamples, sum(map(len, highs)))
    )
    games = np.concatenate(owner)
    return [draws[:, games == g] for g in range(len(lengths))]


def stratified_bootstrap(
    samples: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray],
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    sets: Sequence[int] | None = None,
) -> tuple[float, float]:
    """Percentile CI of `statistic(*samples)`, resampling each sample (a game's runs) with
    replacement independently of the others. NaN bounds if a sample has fewer than 2 runs.

    `sets`: how many consecutive samples form each score set (default: one set of all), e.g.
    (k, k) for X's and Y's k games. It only orders the draws, as rliable's independent
    bootstrap of a pair orders them, so the same `seed` gives rliable's CI exactly."""
    if min(len(s) for s in samples) < 2:
        return np.nan, np.nan
    sets = (len(samples),) if sets is None else tuple(sets)
    if sum(sets) != len(samples):
        raise ValueError(f"sets {sets} do not add up to the {len(samples)} samples")
    indices = _resample_indices([len(s) for s in samples], sets, n_resamples, seed)
    values = statistic(*(s[i] for s, i in zip(samples, indices, strict=True)))
    alpha = (1 - confidence) / 2  # as arch's conf_int: np.percentile, linear interpolation
    low, high = np.percentile(values, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def interval(
    scores: Scores,
    statistic: str | Callable[..., np.ndarray],
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    sets: Sequence[int] | None = None,
) -> Interval:
    """A statistic (a name in STATISTICS, or a per-game function) with its stratified CI
    (`sets`: see `stratified_bootstrap`)."""
    fn = STATISTICS[statistic] if isinstance(statistic, str) else statistic
    games = per_game(scores)
    low, high = stratified_bootstrap(
        games, fn, n_resamples=n_resamples, confidence=confidence, seed=seed, sets=sets
    )
    return Interval(float(fn(*games)), low, high)


def aggregate(
    scores: Scores,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> dict[str, Interval]:
    """Mean, median, IQM and optimality gap, each with its CI (same resamples for all)."""
    return {
        name: interval(scores, fn, n_resamples=n_resamples, confidence=confidence, seed=seed)
        for name, fn in STATISTICS.items()
    }


def per_game_mean(
    scores: Scores,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> list[Interval]:
    """Mean over runs of each game, with the bootstrap CI over its runs."""
    return [
        interval([g], _mean, n_resamples=n_resamples, confidence=confidence, seed=seed)
        for g in per_game(scores)
    ]


def probability_of_improvement_ci(
    x: Scores,
    y: Scores,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """P(X > Y) with a CI resampling X's and Y's runs independently within each game."""
    return _pair_interval(_improvement, x, y, n_resamples, confidence, seed)


def mean_difference(
    x: Scores,
    y: Scores,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """mean(X) − mean(Y) (each the mean over games of the per-game mean over runs), with a CI
    resampling X's and Y's runs independently within each game: rliable's
    `StratifiedIndependentBootstrap` of the pair, as for `probability_of_improvement_ci`. X and
    Y need not have the same runs (unlike `generalization_gap`, which pairs them). NaN bounds
    where X or Y has fewer than 2 runs in some game."""
    return _pair_interval(_difference, x, y, n_resamples, confidence, seed)


def _pair_interval(
    statistic: Callable[..., np.ndarray],
    x: Scores,
    y: Scores,
    n_resamples: int,
    confidence: float,
    seed: int,
) -> Interval:
    """`statistic` of X's games then Y's, with the CI of rliable's independent bootstrap of a
    pair (X's draws, then Y's)."""
    games = _two_variants(x, y)
    return interval(
        games,
        statistic,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
        sets=(len(games) // 2,) * 2,
    )


def generalization_gap(
    train: Scores,
    test: Scores,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """Mean of train − test per run (same runs, same order), with its stratified CI: how much
    better a policy does on its training levels than on unseen ones."""
    tr, te = per_game(train), per_game(test)
    if [len(g) for g in tr] != [len(g) for g in te]:
        raise ValueError("train and test must hold the same runs of the same games")
    diff = [a - b for a, b in zip(tr, te, strict=True)]
    return interval(diff, _mean, n_resamples=n_resamples, confidence=confidence, seed=seed)


def pointwise_mean(values: ArrayLike, *, n_resamples: int = N_RESAMPLES, seed: int = 0):
    """Mean over runs at each point of a curve, with a bootstrap CI per point.

    values: (points, runs), finite. Returns (mean, low, high) arrays of length points; the
    bounds are NaN with fewer than two runs. One vectorized bootstrap for all points."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 2 or not np.isfinite(v).all():
        raise ValueError("values must be a finite (points, runs) array")
    m = v.mean(axis=-1)
    if v.shape[1] < 2:
        nan = np.full_like(m, np.nan)
        return m, nan, nan.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.stats.DegenerateDataWarning)
        res = scipy.stats.bootstrap(
            (v,),
            np.mean,
            n_resamples=n_resamples,
            vectorized=True,
            axis=-1,
            confidence_level=CONFIDENCE,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    return m, np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)


def _two_variants(x: Scores, y: Scores) -> list[np.ndarray]:
    gx, gy = per_game(x), per_game(y)
    if len(gx) != len(gy):
        raise ValueError(f"X has {len(gx)} games, Y has {len(gy)}; compare on the same games")
    return [*gx, *gy]
