"""rlsweep.results.stats against rliable 1.2.0's own numbers (tests/fixtures/rliable_1.2.0.json,
made by tests/fixtures/make_rliable_fixture.py in a venv of its own: rliable cannot be installed
here).

Point estimates must equal rliable's. CIs are checked twice:
- exactly, at every seed in the fixture (100 per matrix and per difference of means, 20 per
  probability of improvement): `stratified_bootstrap` draws the indices rliable's bootstraps
  draw after `np.random.seed(seed)`, in the same order, and takes the same percentiles, so the
  bounds agree to rounding (measured: 2.2e-16 at worst);
- statistically, on a stream the fixture has not seen (seed OTHER_SEED): bootstrap bounds from
  different streams differ by Monte Carlo noise only, so each bound must lie within
  `_tolerance` of rliable's, which is set from how much rliable's own bounds move across its
  seeds at the same `reps` (the fixture's `ci_spread` and `ci_by_seed`).
"""

import json
from pathlib import Path

import numpy as np
import pytest

from rlsweep.results import stats as S

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "rliable_1.2.0.json").read_text())
REPS = FIXTURE["reps"]
CI_SEED = FIXTURE["ci_seed"]
AGGREGATES = FIXTURE["aggregates"]
PAIRS = FIXTURE["probability_of_improvement"]
DIFFERENCES = FIXTURE["difference"]

POINT_TOL = 1e-9
EXACT_TOL = 1e-12  # same draws, same percentiles: only summation order differs
OTHER_SEED = 12345  # not among the fixture's seeds
MC_SIGMAS = 4.0


def _tolerance(spread: float, by_seed: list[float]) -> float:
    """How far a bound from another stream may fall from rliable's bound at CI_SEED.

    Two streams' bounds differ with standard deviation sqrt(2) * spread (spread: the standard
    deviation of rliable's bound across its seeds, 0.0004 to 0.012 here at 10,000 reps); allow
    MC_SIGMAS of those. But with few runs the bootstrap distribution is discrete, a bound sits on
    one of its atoms and now and then jumps a whole atom step (0.004 to 0.08 here), rarely enough
    to leave the standard deviation small: so allow at least the range the bound spanned across
    rliable's seeds. Measured over 1,000 streams the fixture has not seen (seeds 10,000 to 10,999),
    4 sigmas alone let 75 of them fail some of the 28 bounds (6 sigmas: 61, all atom jumps);
    this tolerance let 2 (3 bounds of 28,000, each an atom jump no fixture seed made)."""
    return max(MC_SIGMAS * np.sqrt(2) * spread, max(by_seed) - min(by_seed), EXACT_TOL)


def test_fixture_is_rliable_1_2_0():
    assert FIXTURE["versions"]["rliable"] == "1.2.0"
    assert FIXTURE["method"] == "percentile" and not FIXTURE["task_bootstrap"]
    assert FIXTURE["confidence"] == S.CONFIDENCE
    assert FIXTURE["difference_versions"]["rliable"] == "1.2.0"
    for c in [*AGGREGATES.values(), *PAIRS.values(), *DIFFERENCES.values()]:
        assert OTHER_SEED not in c["seeds"] and CI_SEED in c["seeds"]


@pytest.mark.parametrize("case", AGGREGATES)
def test_aggregate_point_estimates_are_rliables(case):
    c = AGGREGATES[case]
    x = np.array(c["scores"])
    got = {name: float(fn(*S.per_game(x))) for name, fn in S.STATISTICS.items()}
    assert got == pytest.approx(c["point"], abs=POINT_TOL, rel=0)
    assert S.median(x) == pytest.approx(c["point"]["median"], abs=POINT_TOL, rel=0)


@pytest.mark.parametrize("case", PAIRS)
def test_probability_of_improvement_point_estimate_is_rliables(case):
    c = PAIRS[case]
    x, y = np.array(c["x"]), np.array(c["y"])
    assert S.probability_of_improvement(x, y) == pytest.approx(c["point"], abs=POINT_TOL, rel=0)


def test_median_is_the_median_of_game_means_not_of_all_scores():
    # The old rlsweep median pooled all runs x games; rliable's differs on these matrices.
    for case in ("5x3", "10x1"):
        c = AGGREGATES[case]
        pooled = float(np.median(np.array(c["scores"])))
        assert abs(pooled - c["point"]["median"]) > 0.01, case


@pytest.mark.parametrize("case", AGGREGATES)
def test_aggregate_cis_are_rliables_at_every_seed(case):
    c = AGGREGATES[case]
    x = np.array(c["scores"])
    for i, seed in enumerate(c["seeds"]):
        got = S.aggregate(x, n_resamples=REPS, seed=seed)
        for name, iv in got.items():
            assert [iv.low, iv.high] == pytest.approx(
                c["ci_by_seed"][name][i], abs=EXACT_TOL, rel=0
            ), (name, seed)
            assert iv.value == pytest.approx(c["point"][name], abs=POINT_TOL, rel=0)


@pytest.mark.parametrize("case", PAIRS)
def test_probability_of_improvement_cis_are_rliables_at_every_seed(case):
    c = PAIRS[case]
    x, y = np.array(c["x"]), np.array(c["y"])
    for i, seed in enumerate(c["seeds"]):
        iv = S.probability_of_improvement_ci(x, y, n_resamples=REPS, seed=seed)
        assert [iv.low, iv.high] == pytest.approx(c["ci_by_seed"][i], abs=EXACT_TOL, rel=0), seed


def _within_noise(
    got: S.Interval, ci: list[float], spread: list[float], by_seed: list[list[float]]
) -> None:
    for i, (bound, want) in enumerate(zip((got.low, got.high), ci, strict=True)):
        tol = _tolerance(spread[i], [b[i] for b in by_seed])
        assert abs(bound - want) <= tol, (bound, want, tol)


@pytest.mark.parametrize("case", AGGREGATES)
def test_aggregate_cis_agree_with_rliable_on_another_stream(case):
    c = AGGREGATES[case]
    i = c["seeds"].index(CI_SEED)
    assert c["ci"] == {name: c["ci_by_seed"][name][i] for name in c["ci"]}
    got = S.aggregate(np.array(c["scores"]), n_resamples=REPS, seed=OTHER_SEED)
    for name, iv in got.items():
        _within_noise(iv, c["ci"][name], c["ci_spread"][name], c["ci_by_seed"][name])


@pytest.mark.parametrize("case", PAIRS)
def test_probability_of_improvement_ci_agrees_with_rliable_on_another_stream(case):
    c = PAIRS[case]
    x, y = np.array(c["x"]), np.array(c["y"])
    got = S.probability_of_improvement_ci(x, y, n_resamples=REPS, seed=OTHER_SEED)
    _within_noise(got, c["ci"], c["ci_spread"], c["ci_by_seed"])


@pytest.mark.parametrize("case", DIFFERENCES)
def test_mean_difference_is_rliables_at_every_seed(case):
    """mean(X) − mean(Y) with rliable's independent bootstrap of the pair, as rliable computes
    `aggregate_mean(x) - aggregate_mean(y)` through `get_interval_estimates`."""
    c = DIFFERENCES[case]
    x, y = np.array(c["x"]), np.array(c["y"])
    for i, seed in enumerate(c["seeds"]):
        iv = S.mean_difference(x, y, n_resamples=REPS, seed=seed)
        assert iv.value == pytest.approx(c["point"], abs=POINT_TOL, rel=0)
        assert [iv.low, iv.high] == pytest.approx(c["ci_by_seed"][i], abs=EXACT_TOL, rel=0), seed


@pytest.mark.parametrize("case", DIFFERENCES)
def test_mean_difference_agrees_with_rliable_on_another_stream(case):
    c = DIFFERENCES[case]
    got = S.mean_difference(np.array(c["x"]), np.array(c["y"]), n_resamples=REPS, seed=OTHER_SEED)
    _within_noise(got, c["ci"], c["ci_spread"], c["ci_by_seed"])
