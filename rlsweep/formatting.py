"""Numbers as rlsweep writes them for people: env steps and durations, one way everywhere (the
console, `rlsweep plan`, reports and plots). Imports nothing of rlsweep, so the progress view
and `rlsweep plan` stay cheap to load."""

from __future__ import annotations

import math

_STEP_UNITS = (("B", 1e9), ("M", 1e6), ("k", 1e3))


def steps(n: object) -> str:
    """Env steps as people say them, to three significant digits: 500, 2.5k, 350k, 2.62M, 25M,
    1.5B (never an SI prefix below one, as in "200m" for 0.2 steps); "?" when unknown (None,
    NaN)."""
    try:
        x = float(n)
    except (TypeError, ValueError):
        return "?"
    if not math.isfinite(x):
        return "?"
    x = float(f"{x:.3g}")  # rounded before the unit is chosen: 999,999 reads 1M, not 1e+03k
    for unit, scale in _STEP_UNITS:
        if abs(x) >= scale:
            return f"{x / scale:g}{unit}"
    return f"{x:.0f}"


def count(n: object) -> str:
    """A count in full where the last unit matters (a trial 1 step short of its budget):
    3,001; "?" when unknown (None, NaN)."""
    try:
        return f"{int(n):,}"
    except (TypeError, ValueError, OverflowError):
        return "?"


def duration(seconds: float) -> str:
    """`1h02m`, `2m31s`, `45s`: whole seconds, the two largest units."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"
