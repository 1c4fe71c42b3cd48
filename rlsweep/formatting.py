"""Numbers as rlsweep writes them for people: env steps and durations, one way everywhere (the
console, `rlsweep plan`, reports and plots). Imports nothing of rlsweep, so the progress view
and `rlsweep plan` stay cheap to load."""

from __future__ import annotations

import contextlib
import math
import numbers
import re

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


def plural(n: float, what: str) -> str:
    """`n what`, `what` in the plural unless n is 1: `1 trial`, `1,200 iterations`, `0.5 GPUs`
    (numpy's integers, as pandas counts them, are whole numbers too)."""
    number = f"{int(n):,}" if isinstance(n, numbers.Integral) else f"{n:,g}"
    return f"{number} {what}{'' if n == 1 else 's'}"


def count(n: object) -> str:
    """A count in full where the last unit matters (a trial 1 step short of its budget):
    3,001; "?" when unknown (None, NaN)."""
    try:
        return f"{int(n):,}"
    except (TypeError, ValueError, OverflowError):
        return "?"


def rate(x: object) -> str:
    """A rate (env steps/s) to the unit: 13,749; "?" when unknown (None, NaN)."""
    try:
        return f"{round(float(x)):,}"
    except (TypeError, ValueError, OverflowError):
        return "?"


DAYS_FROM_S = 3 * 86_400
"""Durations from this long on read in days (`9.7 days`), from a year on in years: `233429h13m`
is not read at a glance as 26.6 years."""
YEAR_S = 365.25 * 86_400


def duration(seconds: float | None) -> str:
    """`1h02m`, `2m31s`, `45s`: whole seconds, the two largest units; from three days on, days
    (`28.5 days`), and from a year on, years (`26.6 years`, `1,234 years`), with separators;
    "?" when unknown (None, NaN)."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    if s >= YEAR_S:
        years = s / YEAR_S
        return f"{years:,.1f} years" if years < 100 else f"{years:,.0f} years"
    if s >= DAYS_FROM_S:
        return f"{s / 86_400:,.1f} days"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> float:
    """Seconds in a duration as people write it, `duration`'s way and more: `8m30s`, `1h`,
    `2h30m`, `1d`, `90s`, or a plain number of seconds (`540`). ValueError otherwise."""
    t = text.strip().lower()
    with contextlib.suppress(ValueError):
        seconds = float(t)
        if math.isfinite(seconds) and seconds >= 0:  # not inf, nan nor -5
            return seconds
        t = ""  # refused below
    parts = _DURATION.findall(t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise ValueError(f"not a duration: {text!r} (e.g. 8m30s, 2h, 540)")
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def significant(x: float, digits: int = 3) -> str:
    """A searched value as people read it: `digits` significant digits, scientific below 1e-3
    and from 1e5 on, with a short exponent: 0.998, 2.24e-4, 1.5e6 (never 0.00022434347...)."""
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    rounded = float(f"{x:.{digits}g}")  # the notation is the rounded value's: 99999 is 1e5
    if 1e-3 <= abs(rounded) < 1e5:
        return f"{rounded:g}"  # plain: 2050, not 2.05e+03
    mantissa, exp = f"{x:.{digits - 1}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exp)}"


def searched(v: object, digits: int = 3) -> str:
    """A config value as a variant's label and the progress view show it: as written, unless it
    is a float with more than `digits` significant digits (a sampled one), which is rounded
    (`significant`): `lr=0.0005` from a grid, `lr=2.24e-4` sampled."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or isinstance(v, numbers.Integral):
        return f"{v}"
    if not math.isfinite(v) or float(f"{v:.{digits}g}") == v:
        return f"{v}"  # a grid's value (0.0005, 0.01) reads as it was written
    return significant(float(v), digits)


def published(value: float, error: float | None = None, kind: str | None = None) -> str:
    """A published number as its source printed it: `17.7`, `16.46 ± 2.71`, `16.46 ± 2.71 (std)`
    (`kind`: what the ± is, where said)."""
    text = _as_written(value) if error is None else f"{_as_written(value)} ± {_as_written(error)}"
    return f"{text} ({kind})" if kind and error is not None else text


def _as_written(x: float) -> str:
    """A number as YAML read it from its text: `7` an int, `7.0` and `2.70` floats (`7.0`,
    `2.7`: a float keeps its point, not its trailing zeros)."""
    return str(int(x)) if isinstance(x, numbers.Integral) else str(float(x))


def seeds(n: int | None) -> str:
    """How many runs a published number is over: `single run`, `3 seeds`; `unknown` (None)."""
    if n is None:
        return "unknown"
    return "single run" if n == 1 else f"{n:,} seeds"
