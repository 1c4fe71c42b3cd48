"""The value checks every config, spec and launcher validates with (one definition each).

YAML and JSON give `true`/`false` as Python bools, and `bool` is a subclass of `int`: every
check here refuses bools, so `num_envs: true` is an error rather than 1.
"""

from __future__ import annotations

import math


def is_int(v: object, minimum: int | None = None) -> bool:
    """An int that is not a bool, and >= `minimum` when given."""
    return isinstance(v, int) and not isinstance(v, bool) and (minimum is None or v >= minimum)


def is_number(v: object) -> bool:
    """A finite int or float that is not a bool."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def check_num_gpus(num_gpus: float) -> bool:
    """Ray's rule for a trial's GPUs: a fraction of one GPU (0 < x <= 1), or a whole number."""
    return num_gpus == 0 or 0 < num_gpus <= 1 or float(num_gpus).is_integer()
