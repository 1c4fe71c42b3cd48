"""rlsweep.stats against rliable 1.2.0's own numbers (tests/fixtures/rliable_1.2.0.json, made by
tests/fixtures/make_rliable_fixture.py in a venv of its own: rliable cannot be installed here).

Point estimates must equal rliable's. CIs are checked twice:
- exactly, at every seed in the fixture: `stratified_bootstrap` draws the indices rliable's
  bootstraps draw after `np.random.seed(seed)`, in the same order, and takes the same
  percentiles, so the bounds agree to rounding (summation order);
- statistically, on a stream the fixture has not seen (seed OTHER_SEED): bootstrap bounds from
  different streams differ by Monte Carlo noise only, so each bound must lie within
  MC_SIGMAS standard deviations of that noise of rliable's, the standard deviation being the
  one the fixture measured across rliable's own seeds at the same `reps`.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from rlsweep import stats as S

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "rliable_1.2.0.json").read_text())
REPS = FIXTURE["reps"]
CI_SEED = FIXTURE["ci_seed"]
AGGREGATES = FIXTURE["aggregates"]
PAIRS = FIXTURE["probability_of_improvement"]

POINT_TOL = 1e-9
EXACT_TOL = 1e-12  # same draws, same percentiles: only summation order differs
OTHER_SEED = 12345  # not among the fixture's seeds
MC_SIGMAS = 4.0
"""A bound from one stream minus a bound from another has standard deviation sqrt(2) * spread
(spread: the standard deviation of rliable's bound across its seeds, in the fixture); 4 of
those is a two-sided 6e-5 chance per bound under a normal approximation, over the ~30 bounds
here, so a failure means a different method, not bad luck."""


def _tolerance(spread: float) -> float:
    return max(MC_SIGMAS * np.sqrt(2) * spread, EXACT_TOL)


def test_fixture_is_rliable_1_2_0():
    assert FIXTURE["versions"]["rliable"] == "1.2.0"
    assert FIXTURE["method"] == "percentile" and not FIXTURE["task_bootstrap"]
    assert FIXTURE["confidence"] == S.CONFIDENCE
    for c in [*AGGREGATES.values(), *PAIRS.values()]:
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


def _within_noise(got: S.Interval, ci: list[float], spread: list[float]) -> None:
    for bound, want, sd in zip((got.low, got.high), ci, spread, strict=True):
        assert abs(bound - want) <= _tolerance(sd), (bound, want, sd)


@pytest.mark.parametrize("case", AGGREGATES)
def test_aggregate_cis_agree_with_rliable_on_another_stream(case):
    c = AGGREGATES[case]
    i = c["seeds"].index(CI_SEED)
    assert c["ci"] == {name: c["ci_by_seed"][name][i] for name in c["ci"]}
    got = S.aggregate(np.array(c["scores"]), n_resamples=REPS, seed=OTHER_SEED)
    for name, iv in got.items():
        _within_noise(iv, c["ci"][name], c["ci_spread"][name])


@pytest.mark.parametrize("case", PAIRS)
def test_probability_of_improvement_ci_agrees_with_rliable_on_another_stream(case):
    c = PAIRS[case]
    x, y = np.array(c["x"]), np.array(c["y"])
    got = S.probability_of_improvement_ci(x, y, n_resamples=REPS, seed=OTHER_SEED)
    _within_noise(got, c["ci"], c["ci_spread"])
