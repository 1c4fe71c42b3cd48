"""rlsweep.formatting: env steps and durations as every console line, table and plot writes them."""

import math

import pytest

from rlsweep.formatting import count, duration, steps


@pytest.mark.parametrize(
    "n, text",
    [(0, "0"), (500, "500"), (1024, "1.02k"), (2500, "2.5k"), (200_000, "200k")]
    + [(350_000, "350k"), (1_200_000, "1.2M"), (2_621_440, "2.62M"), (25_000_000, "25M")]
    + [(1.5e9, "1.5B"), (999_999, "1M"), (999.6, "1k"), (0.2, "0")],
)
def test_steps_read_as_people_say_them(n, text):
    assert steps(n) == text


@pytest.mark.parametrize("unknown", [None, math.nan, math.inf, "n/a"])
def test_unknown_steps_read_as_a_question_mark(unknown):
    assert steps(unknown) == "?"


def test_duration():
    assert [duration(s) for s in (0.4, 45, 59.6, 151, 3599.6, 3720)] == [
        "0s",
        "45s",
        "1m00s",
        "2m31s",
        "1h00m",
        "1h02m",
    ]


def test_count_is_exact():
    assert [count(n) for n in (3001, 4000.0, 25_000_000)] == ["3,001", "4,000", "25,000,000"]
    assert [count(n) for n in (None, math.nan, math.inf, "n/a")] == ["?"] * 4
