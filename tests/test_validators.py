import math

import pytest

from rlsweep.validators import check_num_gpus, is_int, is_number


@pytest.mark.parametrize(
    ("value", "minimum", "ok"),
    [(3, None, True), (0, 0, True), (-1, 0, False), (True, None, False), (2.0, None, False)],
)
def test_is_int_refuses_bools_and_floats(value, minimum, ok):
    assert is_int(value, minimum) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [(1, True), (0.5, True), (False, False), (math.nan, False), (math.inf, False), ("1", False)],
)
def test_is_number_is_finite_and_not_a_bool(value, ok):
    assert is_number(value) is ok


@pytest.mark.parametrize(
    ("num_gpus", "ok"),
    [(0, True), (0.125, True), (1, True), (2, True), (3.0, True), (1.5, False), (2.5, False)],
)
def test_num_gpus_is_a_fraction_of_one_gpu_or_whole_gpus(num_gpus, ok):
    """Ray's rule: a trial holds a fraction 0 < x <= 1 of one GPU, or whole GPUs."""
    assert check_num_gpus(num_gpus) is ok
