"""Search-space primitives: few types, flags for the variations, validated at construction.

In a spec's `space:` section each parameter is one of

    lr: [1e-4, 5e-4]                         # a plain list: grid (every value is run)
    lr: {grid: [1e-4, 5e-4]}                 # the same, spelled out
    framestack: {choice: [none, gap]}        # sampled uniformly
    lr: {loguniform: [1e-5, 1e-3]}           # sampled on a log scale
    entropy_coeff: {uniform: [0, 0.02], q: 0.001}   # q: a multiple of q inside the range
    num_epochs: {int: [1, 4]}                # an integer in [1, 4], both ends included
    augment_p: {uniform: [0.1, 1.0], when: {augment: [crop_resize, translate]}}

`when:` makes a parameter conditional: in trials where the named parameter takes none of the
listed values, the parameter keeps its default (the trial records what actually ran).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rlsweep.errors import ConfigError
from rlsweep.spec.validators import is_number

KINDS = ("grid", "choice", "uniform", "loguniform", "int")

DEFAULT_MUTATIONS = ("lr", "entropy_coeff", "clip_param")
"""What PBT perturbs where `search.mutations` is not set: those of these the space samples."""


@dataclass(frozen=True)
class Param:
    """One searched parameter."""

    kind: str
    """grid | choice | uniform | loguniform | int."""
    values: tuple[Any, ...] = ()
    """grid and choice: the candidates."""
    low: float | None = None
    """Range kinds: lower bound (inclusive)."""
    high: float | None = None
    """Range kinds: upper bound (inclusive for int)."""
    q: float | None = None
    """Range kinds: samples are the multiples of q inside [low, high] (`bounds`), whichever
    searcher draws them."""
    when: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Active only when each named parameter takes one of the listed values."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError("", f"unknown kind {self.kind!r}; allowed: {', '.join(KINDS)}")
        if self.kind in ("grid", "choice"):
            if not self.values:
                raise ConfigError(self.kind, "got []; allowed: a non-empty list of values")
            keys = [(isinstance(v, bool), v) for v in self.values]  # true is no 1
            seen = [v for i, v in enumerate(self.values) if keys[i] in keys[:i]]
            if seen:  # a grid would run the same trials again; a choice would favour the value
                raise ConfigError(
                    "" if self.kind == "grid" else self.kind,  # a grid: most often a plain list
                    f"got {list(self.values)!r}: {seen[0]!r} is in it twice; allowed: distinct "
                    "values",
                )
            if self.low is not None or self.high is not None or self.q is not None:
                raise ConfigError(self.kind, "takes values only (no range or q)")
        else:
            lo, hi = self.low, self.high
            if not all(is_number(v) for v in (lo, hi)) or not lo < hi:
                raise ConfigError(self.kind, f"got [{lo}, {hi}]; allowed: [low, high], low < high")
            if self.kind == "loguniform" and lo <= 0:
                raise ConfigError(self.kind, f"got low {lo}; allowed: low > 0 on a log scale")
            if self.kind == "int" and not (float(lo).is_integer() and float(hi).is_integer()):
                raise ConfigError(self.kind, f"got [{lo}, {hi}]; allowed: integer bounds")
            if self.q is not None and not (is_number(self.q) and self.q > 0):
                raise ConfigError("q", f"got {self.q!r}; allowed: a number > 0")
            if self.kind == "int" and self.q is not None and not float(self.q).is_integer():
                # Tune's qrandint takes an integer q: 0.5 would become a q of 0.
                raise ConfigError(
                    "q", f"got {self.q!r}; allowed: an integer >= 1 for an int parameter"
                )
            if self.q is not None and self.bounds[0] > self.bounds[1]:
                raise ConfigError(
                    "q",
                    f"got {self.q!r}: no multiple of it lies in [{lo}, {hi}]; allowed: a q "
                    "with a multiple inside the range",
                )
        if self.when and self.kind == "grid":
            raise ConfigError("when", "a grid parameter cannot be conditional; use choice")
        for key, allowed in self.when.items():
            if not isinstance(allowed, tuple) or not allowed:
                raise ConfigError(f"when.{key}", "needs a non-empty list of values")

    @property
    def is_grid(self) -> bool:
        return self.kind == "grid"

    @property
    def bounds(self) -> tuple[float, float]:
        """Range kinds: the least and the greatest value a sample can take, both included: with
        `q`, the multiples of q nearest inside [low, high]. The one definition that Tune's
        samplers (`rlsweep.run.tune_bridge.to_tune`; Tune's random search and Optuna's would
        otherwise disagree: multiples of q against low + k q) and the importance study
        (`rlsweep.results.importance`) are given."""
        lo, hi = float(self.low), float(self.high)  # type: ignore[arg-type]
        if self.q is None:
            return lo, hi
        q = float(self.q)
        return _on_grid(lo, q, math.ceil) * q, _on_grid(hi, q, math.floor) * q

    @property
    def candidates(self) -> tuple[Any, ...]:
        """Every value a trial may get (grid/choice), for validating each against TrialConfig."""
        if self.kind in ("grid", "choice"):
            return self.values
        if self.kind == "int":
            return tuple(int(b) for b in self.bounds)
        return self.bounds

    # --- YAML / dict form -----------------------------------------------------------------------
    @classmethod
    def parse(cls, raw: Any) -> Param:
        if isinstance(raw, list):
            if not raw:  # the user wrote a plain list: no `grid:` key to name
                raise ConfigError(
                    "",
                    "got []; allowed: a non-empty list of values (a grid: each one runs), or a "
                    f"mapping with one of {', '.join(KINDS)}",
                )
            return cls("grid", tuple(raw))
        if not isinstance(raw, dict):
            raise ConfigError(
                "",
                f"got {raw!r}; allowed: a list (grid) or a mapping with one of {', '.join(KINDS)}",
            )
        kinds = [k for k in raw if k in KINDS]
        extra = [k for k in raw if k not in (*KINDS, "q", "when")]
        if len(kinds) != 1 or extra:
            raise ConfigError(
                "",
                f"got {raw!r}; allowed: exactly one of {', '.join(KINDS)}, plus optional q, when",
            )
        kind = kinds[0]
        arg = raw[kind]
        when = raw.get("when", {})
        if not isinstance(when, dict):
            raise ConfigError("when", f"got {when!r}; allowed: a mapping param -> list of values")
        when = {k: tuple(v) if isinstance(v, list) else (v,) for k, v in when.items()}
        if kind in ("grid", "choice"):
            if not isinstance(arg, list):
                raise ConfigError(kind, f"got {arg!r}; allowed: a list of values")
            return cls(kind, tuple(arg), q=raw.get("q"), when=when)
        if not (isinstance(arg, list) and len(arg) == 2):
            raise ConfigError(kind, f"got {arg!r}; allowed: [low, high]")
        return cls(kind, low=arg[0], high=arg[1], q=raw.get("q"), when=when)

    def describe(self) -> str:
        """The parameter as a table shows it: `loguniform(0.0001, 0.001)`, `choice(none, gap)`,
        `int(1, 9, q=2)`, `[none, gap]` for a grid."""
        if self.kind in ("grid", "choice"):
            values = ", ".join(str(v) for v in self.values)
            return f"[{values}]" if self.kind == "grid" else f"choice({values})"
        q = "" if self.q is None else f", q={self.q:g}"
        return f"{self.kind}({self.low:g}, {self.high:g}{q})"

    def to_raw(self) -> Any:
        if self.kind == "grid" and not self.when:
            return list(self.values)
        out: dict[str, Any] = {}
        if self.kind in ("grid", "choice"):
            out[self.kind] = list(self.values)
        else:
            out[self.kind] = [self.low, self.high]
            if self.q is not None:
                out["q"] = self.q
        if self.when:
            out["when"] = {k: list(v) for k, v in self.when.items()}
        return out


def parse_space(raw: Any, errors: list[ConfigError] | None = None) -> dict[str, Param]:
    """The `space:` section -> Param per key; errors carry the key path under `space`, every
    key's at once. With `errors`, they are appended there instead of raised, and the keys that
    parsed are returned (so that the rest of a spec can still be checked)."""
    found: list[ConfigError] = []
    out = {}
    if not isinstance(raw, dict):
        found.append(
            ConfigError("space", f"got {raw!r}; allowed: a mapping param -> values or range")
        )
        raw = {}
    for key, value in raw.items():
        try:
            out[key] = value if isinstance(value, Param) else Param.parse(value)
        except ConfigError as e:
            found += e.under(f"space.{key}").errors
    if errors is not None:
        errors += found
    elif found:
        raise ConfigError.several(found)
    return out


def apply_conditions(config: dict[str, Any], space: dict[str, Param], defaults: dict[str, Any]):
    """Reset conditional parameters whose condition does not hold to their defaults."""
    out = dict(config)
    for key, param in space.items():
        if param.when and not all(out.get(k) in vs for k, vs in param.when.items()):
            out[key] = defaults[key]
    return out


def _on_grid(bound: float, q: float, inward) -> int:
    """`bound`'s index on the grid of multiples of `q`, rounded `inward` (math.ceil for a lower
    bound, math.floor for an upper) unless it lies on the grid up to float rounding (0.3 is
    3 x 0.1), as Tune's quantized samplers round (Ray 2.60, `Quantized._grid_index`)."""
    scaled = bound / q
    return round(scaled) if math.isclose(scaled, round(scaled)) else int(inward(scaled))
