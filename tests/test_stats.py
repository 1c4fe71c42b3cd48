"""rlsweep.results.stats against hand-computed values on small arrays."""

import numpy as np
import pytest
import scipy.stats

from rlsweep.results import stats as S

FAST = {"n_resamples": 2000, "seed": 0}


def test_iqm_is_the_mean_of_the_middle_half():
    # 8 scores; the 2 lowest and 2 highest are dropped: mean(3, 4, 5, 6).
    x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 100.0]])
    assert S.iqm(x) == pytest.approx(4.5)
    assert S.iqm(x) == pytest.approx(scipy.stats.trim_mean(x.ravel(), 0.25))
    assert S.mean(x) == pytest.approx(128 / 8)
    # Median of the per-game means (4, 28), as rliable: not the median of all 8 scores (4.5).
    assert S.median(x) == pytest.approx(16.0)
    # 20 scores, where trimming 25% (5 each end: the middle ten, all 0) and 20% (4: -100 and
    # 50 kept too) differ.
    y = np.array([-1000.0] * 4 + [-100.0] + [0.0] * 10 + [50.0] + [1000.0] * 4).reshape(4, 5)
    assert S.iqm(y) == pytest.approx(0.0)
    assert scipy.stats.trim_mean(y.ravel(), 0.2) == pytest.approx(-50 / 12)


def test_optimality_gap_counts_only_the_shortfall_below_one():
    x = np.array([[0.5, 1.2], [0.0, 0.9]])
    # game 0: (0.5 + 1.0) / 2; game 1: (0 + 0.1) / 2 (1.2 earns no credit above 1)
    assert S.optimality_gap(x) == pytest.approx((0.75 + 0.05) / 2)


def test_probability_of_improvement_counts_ties_half():
    x = np.array([[1.0, 0.0], [2.0, 0.0]])
    y = np.array([[1.0, 1.0], [0.0, 1.0]])
    # game 0: pairs (1,1) tie, (1,0), (2,1), (2,0) -> 3.5 / 4; game 1: X never wins -> 0.
    assert S.probability_of_improvement(x, y) == pytest.approx(0.4375)
    assert S.probability_of_improvement(y, x) == pytest.approx(1 - 0.4375)
    assert S.probability_of_improvement(x, x) == pytest.approx(0.5)
    u = scipy.stats.mannwhitneyu(x[:, 0], y[:, 0]).statistic
    assert S.probability_of_improvement(x[:, :1], y[:, :1]) == pytest.approx(u / 4)


def test_probability_of_improvement_ci():
    x = np.array([[0.9, 0.8], [1.0, 0.7], [0.95, 0.75]])
    iv = S.probability_of_improvement_ci(x, x - 0.5, **FAST)
    assert (iv.value, iv.low, iv.high) == (1.0, 1.0, 1.0)
    iv = S.probability_of_improvement_ci(x, x[::-1] + [[0.0, 0.01]] * 3, **FAST)
    assert 0 <= iv.low <= iv.value <= iv.high <= 1
    with pytest.raises(ValueError, match="same games"):
        S.probability_of_improvement(x, x[:, :1])


def test_ci_contains_the_estimate_and_shrinks_with_more_runs():
    rng = np.random.default_rng(1)
    widths = []
    for runs in (5, 80):
        x = rng.normal([0.2, 0.5, 0.8], 0.1, size=(runs, 3))
        for name in S.STATISTICS:
            iv = S.interval(x, name, **FAST)
            assert iv.low <= iv.value <= iv.high, name
        ivs = [S.interval(x, s, **FAST) for s in ("mean", "iqm")]
        widths.append([iv.high - iv.low for iv in ivs])
    (mean5, iqm5), (mean80, iqm80) = widths
    assert mean80 < mean5 / 2 and iqm80 < iqm5  # ~1/sqrt(runs) for the mean


def test_two_runs_give_the_range_as_ci():
    # Resamples of (a, b) have mean a, (a+b)/2 or b; a and b each have chance 1/4 > 2.5%.
    [iv] = S.per_game_mean(np.array([[0.2], [0.4]]), **FAST)
    assert (iv.value, iv.low, iv.high) == pytest.approx((0.3, 0.2, 0.4))


def test_bootstrap_is_stratified_by_game():
    # Two games on very different scales: pooled resampling would swing the mean by ~50.
    g0 = np.linspace(0.0, 0.01, 6)
    x = np.stack([g0, 100 + g0], axis=1)
    iv = S.interval(x, "mean", **FAST)
    assert iv.value == pytest.approx(50.005)
    assert iv.high - iv.low < 0.01

    def check(*games, axis=-1):
        assert np.isin(games[0], g0).all() and np.isin(games[1], 100 + g0).all()
        return np.mean([g.mean(axis=-1) for g in games], axis=0)

    S.stratified_bootstrap([x[:, 0], x[:, 1]], check, **FAST)


def test_deterministic_given_a_seed():
    x = np.random.default_rng(0).uniform(size=(6, 4))
    a = S.aggregate(x, n_resamples=500, seed=3)
    assert a == S.aggregate(x, n_resamples=500, seed=3)
    assert a != S.aggregate(x, n_resamples=500, seed=4)


def test_nan_raises_and_one_run_has_no_ci():
    with pytest.raises(ValueError, match="non-finite"):
        S.iqm(np.array([[0.1, np.nan], [0.2, 0.3]]))
    iv = S.interval(np.array([[0.1, 0.3]]), "mean", **FAST)
    assert iv.value == pytest.approx(0.2) and not iv.has_ci


def test_games_with_different_numbers_of_runs():
    # Mean weighs games equally: (mean(0, 1) + mean(10)) / 2; IQM pools all three scores.
    ragged = [np.array([0.0, 1.0]), np.array([10.0])]
    assert S.mean(ragged) == pytest.approx(5.25)
    assert S.iqm(ragged) == pytest.approx(scipy.stats.trim_mean([0.0, 1.0, 10.0], 0.25))
    assert not S.interval(ragged, "mean", **FAST).has_ci  # game 1 cannot be resampled

    # With two or more runs each, each game is resampled from its own runs, at its own size.
    games = [np.array([0.0, 1.0, 2.0]), np.array([10.0, 11.0, 12.0, 13.0, 14.0])]

    def check(a, b):
        assert a.shape == (2000, 3) and b.shape == (2000, 5)
        assert np.isin(a, games[0]).all() and np.isin(b, games[1]).all()
        assert len(np.unique(a)) == 3 and len(np.unique(b)) == 5
        return S._mean(a, b)

    low, high = S.stratified_bootstrap(games, check, **FAST)
    assert low < S.mean(games) < high


def test_generalization_gap():
    test = np.array([[0.1, 0.5], [0.3, 0.7]])
    iv = S.generalization_gap(test + [[0.2, 0.4]], test, **FAST)
    assert (iv.value, iv.low, iv.high) == pytest.approx((0.3, 0.3, 0.3))
    with pytest.raises(ValueError, match="same runs"):
        S.generalization_gap(test, test[:1])


def test_pointwise_mean():
    v = np.array([[0.0, 2.0], [1.0, 1.0]])
    m, lo, hi = S.pointwise_mean(v, **FAST)
    assert m.tolist() == [1.0, 1.0] and lo.tolist() == [0.0, 1.0] and hi.tolist() == [2.0, 1.0]
    m, lo, hi = S.pointwise_mean(v[:, :1])
    assert m.tolist() == [0.0, 1.0] and np.isnan(lo).all() and np.isnan(hi).all()
    # Each point's band: the 95% percentile bootstrap of its runs' mean (SciPy's, as rliable's).
    runs = np.array([[0.1, 0.5, 0.2, 0.9, 0.4, 0.3]])
    _, lo, hi = S.pointwise_mean(runs, **FAST)
    ci = scipy.stats.bootstrap(
        (runs,),
        np.mean,
        n_resamples=2000,
        vectorized=True,
        axis=-1,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    assert (lo[0], hi[0]) == pytest.approx((ci.low[0], ci.high[0]))


def test_mean_difference_resamples_x_and_y_independently():
    x, y = np.array([[0.0], [1.0]]), np.array([[10.0], [10.0]])
    # X's resampled means: 0, 0.5, 1 (chances 1/4, 1/2, 1/4); Y's always 10.
    iv = S.mean_difference(x, y, **FAST)
    assert (iv.value, iv.low, iv.high) == pytest.approx((-9.5, -10.0, -9.0))
    # The same runs on both sides: a paired resampling would give 0 every time; an independent
    # one (rliable's for a pair) spreads around 0.
    z = np.array([[0.0], [1.0], [2.0]])
    iv = S.mean_difference(z, z, **FAST)
    assert iv.value == 0 and iv.low < 0 < iv.high


def test_mean_difference_takes_unequal_runs_and_says_when_there_is_no_ci():
    # Per game: X - Y = mean(1, 2, 3) - mean(0, 1) = 1.5; and (10, 12) - (11, 11) = 0.
    iv = S.mean_difference([[1.0, 2.0, 3.0], [10.0, 12.0]], [[0.0, 1.0], [11.0, 11.0]], **FAST)
    assert iv.value == pytest.approx(0.75) and iv.low < 0.75 < iv.high
    one = S.mean_difference([[1.0]], [[0.0, 1.0]], **FAST)  # X has a single run
    assert one.value == pytest.approx(0.5) and not one.has_ci
    with pytest.raises(ValueError, match="same games"):
        S.mean_difference([[1.0, 2.0]], [[1.0, 2.0], [3.0, 4.0]])
