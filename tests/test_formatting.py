"""rlsweep.formatting: env steps and durations as every console line, table and plot writes them."""

import math

import numpy as np
import pytest

from rlsweep.formatting import count, duration, plural, steps


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
    # issue 40: from three days on, days; from a year on, years; with separators
    assert duration(3 * 86_400 - 60) == "71h59m"
    assert duration(684 * 3600) == "28.5 days"
    assert duration(233_429 * 3600 + 13 * 60) == "26.6 years"
    assert duration(2_000 * 365.25 * 86_400) == "2,000 years"
    # unknown, as steps and count read it: a trial that never reported, a killed run
    assert [duration(s) for s in (None, math.nan, math.inf)] == ["?"] * 3


@pytest.mark.parametrize(
    "n, text",
    [(1, "1 trial"), (0, "0 trials"), (8, "8 trials"), (1200, "1,200 trials")]
    + [(1.0, "1 trial"), (0.5, "0.5 trials"), (16.0, "16 trials")]
    # pandas' counts are numpy integers: whole numbers, with their thousands, not 1.2346e+06
    + [(np.int64(1), "1 trial"), (np.int64(1_234_567), "1,234,567 trials")],
)
def test_plural_says_the_noun_in_the_plural_unless_one(n, text):
    assert plural(n, "trial") == text


def test_count_is_exact():
    assert [count(n) for n in (3001, 4000.0, 25_000_000)] == ["3,001", "4,000", "25,000,000"]
    assert [count(n) for n in (None, math.nan, math.inf, "n/a")] == ["?"] * 4


def test_published_numbers_read_as_their_sources_print_them():
    from rlsweep.formatting import published, seeds

    # as written in the spec: YAML reads `6` as an int and `6.0` as a float
    assert [published(17.7), published(26.28), published(6), published(6.0)] == [
        "17.7",
        "26.28",
        "6",
        "6.0",
    ]
    assert published(np.float64(1e-5)) == "1e-05"
    assert published(16.46, 2.71) == "16.46 ± 2.71"
    assert published(16.46, 2.71, "std") == "16.46 ± 2.71 (std)"
    assert [seeds(1), seeds(3), seeds(None)] == ["single run", "3 seeds", "unknown"]


@pytest.mark.parametrize(
    "x, text",
    [
        (0.00022434347458680692, "2.24e-4"),
        (0.9980112570172737, "0.998"),
        (0.95, "0.95"),
        (5e-4, "5e-4"),
        (2048.0, "2050"),
        (123456.7, "1.23e5"),
        (-0.000123456, "-1.23e-4"),
        (99999.0, "1e5"),  # rounds to 1e5, and reads as 100000 does (it read "100000")
        (100000.0, "1e5"),
        (0.00099996, "0.001"),
    ],
)
def test_significant_is_3_digits_and_a_short_exponent(x, text):
    from rlsweep.formatting import significant

    assert significant(x) == text


def test_a_searched_value_reads_as_written_unless_sampled():
    from rlsweep.formatting import searched

    assert [searched(5e-4), searched(0.01), searched(3), searched(True)] == [
        "0.0005",  # a grid's value, as written
        "0.01",
        "3",
        "True",
    ]
    assert searched(0.00022434347458680692) == "2.24e-4"  # sampled: rounded
    assert searched(np.float32(0.9980112)) == "0.998" and searched(np.int64(4)) == "4"
    assert searched(0.99801125, digits=5) == "0.99801" and searched("gap") == "gap"


def test_a_rate_reads_to_the_unit_or_as_unknown():
    from rlsweep.formatting import rate

    assert [rate(13748.6), rate(np.float64(30272.2)), rate(0.4)] == ["13,749", "30,272", "0"]
    assert [rate(float("nan")), rate(None), rate(float("inf"))] == ["?", "?", "?"]


def test_a_duration_is_a_finite_time_written_whole():
    from rlsweep.formatting import parse_duration

    for bad in ("8m30x", "inf", "nan", "-5", "-5m", "1h 30m"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(bad)
    assert parse_duration(" 1h30M ") == 5400 and parse_duration("0") == 0
