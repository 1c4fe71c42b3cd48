"""The value checks every config, spec and launcher validates with (one definition each).

YAML and JSON give `true`/`false` as Python bools, and `bool` is a subclass of `int`: every
check here refuses bools, so `num_envs: true` is an error rather than 1.

A config dataclass declares each field's rule beside the field (`checked(default, rule=...)`,
from a small vocabulary that says what it allows in an error's words); `check_fields` applies
them all, then the few rules that tie fields together, and raises every problem at once. The
"unknown key, did you mean" message of every config, spec and price table is `unknown`.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

import numpy as np

from rlsweep.errors import ConfigError, SpecError

T = TypeVar("T")


def is_int(v: object, minimum: int | None = None) -> bool:
    """An integer that is not a bool (a numpy one too: `seeds=list(np.arange(3))`), and
    >= `minimum` when given."""
    whole = isinstance(v, numbers.Integral) and not isinstance(v, bool)
    return whole and (minimum is None or v >= minimum)


def plain(v: Any) -> Any:
    """`v` as YAML and Tune hold it: a numpy scalar as the Python one (`yaml.safe_dump` writes
    none of numpy's integers, floats or bools), anything else as it is."""
    return v.item() if isinstance(v, np.generic) else v


def plain_tree(v: Any, tuples: type = list) -> Any:
    """`v` with every value in it `plain`, its tuples lists: a mapping, list or value written in
    Python (`params={"widths": (16, 32, 32), "num_levels": np.int64(200)}`) as YAML writes it.
    `tuples=tuple` keeps them tuples (a frozen config's field, as it holds them)."""
    if isinstance(v, dict):
        return {k: plain_tree(x, tuples) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return (list if isinstance(v, list) else tuples)(plain_tree(x, tuples) for x in v)
    return plain(v)


def is_number(v: object) -> bool:
    """A finite int or float that is not a bool (a numpy one too: `np.float32(3e-4)`; not a
    Fraction or Decimal, which YAML cannot write)."""
    real = isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
    return real and math.isfinite(v)


# --- rules declared with each field of a config dataclass -----------------------------------


@dataclass(frozen=True)
class Rule:
    """What a field allows: `test` says whether a value passes, `allowed` says so in an error's
    words ("got X; allowed: <allowed>"). `convert` turns a value that passed into the field's
    own type (a YAML list into the tuple a frozen config holds)."""

    test: Callable[[Any], bool]
    allowed: str
    convert: Callable[[Any], Any] | None = None
    choices: tuple[str, ...] = ()
    """The names allowed, for a rule of names (`one_of`): a refused one gets a did-you-mean."""
    aliases: tuple[tuple[str, str], ...] = ()
    """(another name, the allowed one it means): its did-you-mean, where spelling would
    mislead (`stderr` is close to `std`, and means `sem`)."""

    def __call__(self, value: Any) -> bool:
        return bool(self.test(value))

    def hint(self, value: Any) -> str:
        """What a refused `value` may have meant, as ` (...)` after it in an error, or '': the
        allowed name it is close to (`BigFish`: did you mean 'bigfish'?), or that it is text in
        quotes that unquoted would be allowed (`"false"`)."""
        if not isinstance(value, str):
            return ""
        if means := dict(self.aliases).get(value.lower()):
            return f" (did you mean {means!r}?)"
        if self.choices:
            lower = {c.lower(): c for c in self.choices}
            if value.lower() in lower:
                return f" (did you mean {lower[value.lower()]!r}?)"
            if close := difflib.get_close_matches(value.lower(), list(lower), n=1):
                return f" (did you mean {lower[close[0]]!r}?)"
        unquoted = _plain_yaml(value)
        if not isinstance(unquoted, str) and unquoted is not None and self(unquoted):
            return f" (a string, in quotes; unquoted, {value} is allowed)"
        return ""


def _plain_yaml(text: str) -> Any:
    """`text` as a spec's YAML reads it unquoted (None where it is no YAML scalar)."""
    from rlsweep.spec.yamlfile import parse_yaml  # PyYAML, only for an error's hint

    try:
        return parse_yaml(text)
    except SpecError:
        return None


def integer(minimum: int) -> Rule:
    return Rule(lambda v: is_int(v, minimum), f"an integer >= {minimum}", convert=plain)


env_steps = Rule(
    lambda v: is_int(v, 1) or (is_number(v) and v >= 1 and float(v).is_integer()),
    "an integer >= 1 (25e6 too)",
    convert=int,
)
"""A budget: in Python `25e6` is a float, as YAML's `25e6` and `--budget 25e6` are numbers."""


positive = Rule(lambda v: is_number(v) and v > 0, "a number > 0")
non_negative = Rule(lambda v: is_number(v) and v >= 0, "a number >= 0")
probability = Rule(lambda v: is_number(v) and 0 <= v <= 1, "a number in [0, 1]")
fraction = Rule(lambda v: is_number(v) and 0 < v <= 1, "a number in (0, 1]")
flag = Rule(lambda v: isinstance(v, bool), "true, false")
text = Rule(lambda v: isinstance(v, str), "text")
mapping = Rule(lambda v: isinstance(v, dict), "a mapping")


def one_of(
    choices: Sequence[str], meanings: Sequence[str] = (), aliases: dict[str, str] | None = None
) -> Rule:
    """One of the names `choices`; `meanings`: what each means, said beside it in an error;
    `aliases`: other names for them (`Rule.aliases`)."""
    allowed = ", ".join(
        f"{c} ({m})" if m else c for c, m in itertools.zip_longest(choices, meanings)
    )
    return Rule(
        lambda v: isinstance(v, str) and v in choices,
        allowed,
        choices=tuple(choices),
        aliases=tuple((aliases or {}).items()),
    )


def optional(rule: Rule, meaning: str = "") -> Rule:
    """`rule`, or None (null in YAML); `meaning` says what None does ("to disable")."""
    convert = rule.convert
    return Rule(
        lambda v: v is None or rule(v),
        " ".join(filter(None, (f"{rule.allowed}, or null", meaning))),
        None if convert is None else lambda v: None if v is None else convert(v),
        rule.choices,
        rule.aliases,
    )


RULE = "rlsweep.rule"
"""The dataclasses.field metadata key of a field's Rule."""


def checked(
    default: Any = MISSING,
    *,
    rule: Rule,
    factory: Callable[[], Any] | None = None,
    **kwargs: Any,
) -> Any:
    """A dataclass field that `rule` checks (see `check_fields`), e.g.
    `lr: float = checked(5e-4, rule=positive)`; `factory` makes a mutable default."""
    if factory is not None:
        return field(default_factory=factory, metadata={RULE: rule}, **kwargs)
    return field(default=default, metadata={RULE: rule}, **kwargs)


def rule_of(cls: type, name: str) -> Rule | None:
    """The rule declared with field `name` of the dataclass `cls` (None: none declared)."""
    return _rules(cls).get(name)


@functools.cache
def _rules(cls: type) -> dict[str, Rule]:
    return {f.name: f.metadata[RULE] for f in fields(cls) if RULE in f.metadata}


def refused(key: str, value: Any, allowed: str, hint: str = "") -> ConfigError:
    """The error of a value that is not allowed: `key: got <value>; allowed: <allowed>`
    (`hint`: what it may have meant, `Rule.hint`)."""
    return ConfigError(key, f"got {value!r}{hint}; allowed: {allowed}")


def check_each_field(obj: Any) -> list[ConfigError]:
    """Every field of the dataclass `obj` against its rule: the errors of the values refused, in
    field order; each value that passed is converted in place (`Rule.convert`), its numpy
    scalars first to their Python values (`plain_tree`), which YAML and Tune hold."""
    errors = []
    for name, rule in _rules(type(obj)).items():
        value = plain_tree(getattr(obj, name), tuples=tuple)
        if not rule(value):
            errors.append(refused(name, value, rule.allowed, rule.hint(value)))
        else:
            object.__setattr__(obj, name, value if rule.convert is None else rule.convert(value))
    return errors


def check_fields(obj: Any) -> None:
    """Validate the dataclass `obj`, raising every problem at once: each field's rule, then
    the rules across fields, the `_across_fields()` method of each class in its MRO that
    defines one (a class's run once the fields it declares or inherits are valid)."""
    errors = check_each_field(obj)
    failed = {e.path for e in errors}
    for cls in reversed(type(obj).__mro__):
        across = vars(cls).get("_across_fields")
        if across is not None and failed.isdisjoint(f.name for f in fields(cls)):
            errors += across(obj)
    if errors:
        raise ConfigError.several(errors)


class Validated:
    """Base of a config dataclass that validates itself at construction (`check_fields`)."""

    def __post_init__(self) -> None:
        check_fields(self)


def failures(obj: Any, rules: Iterable[tuple[str, bool, str]]) -> list[ConfigError]:
    """The errors of `rules` across fields, each (key, holds, allowed), that do not hold."""
    return [refused(key, getattr(obj, key), allowed) for key, holds, allowed in rules if not holds]


# --- keys ------------------------------------------------------------------------------------


def did_you_mean(key: str, known: Sequence[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `known` to `key`, or '' if none is close."""
    hint = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


def unknown(what: str, key: str, known: Sequence[str]) -> str:
    """The message for a key that is not one of `known`: a suggestion and what is allowed."""
    return f"unknown {what}{did_you_mean(key, known)}; allowed: {', '.join(known)}"


def key_errors(
    cls: type,
    raw: Mapping[str, Any],
    renamed: Mapping[str, str] | None = None,
    values: bool = False,
) -> list[ConfigError]:
    """The errors of `raw`'s keys as fields of the dataclass `cls`, each key on its own: those
    it does not have (a key in `renamed` gets its message: what to write now), and with
    `values` each known key's value refused by its rule (for a mapping that cannot be built,
    a required key missing)."""
    known = [f.name for f in fields(cls) if f.init]
    renamed = renamed or {}
    errors = []
    for k, v in raw.items():
        rule = rule_of(cls, k)
        if k not in known:
            errors.append(ConfigError(str(k), renamed.get(k) or unknown("key", str(k), known)))
        elif values and rule is not None and not rule(v):
            errors.append(refused(str(k), v, rule.allowed, rule.hint(v)))
    return errors


def build(cls: type[T], raw: Any, renamed: Mapping[str, str] | None = None) -> T:
    """The dataclass `cls` from a mapping of its fields (a spec section): every unknown key
    and every bad value at once; a key in `renamed` gets its message (what to write now)."""
    if isinstance(raw, cls):
        return raw
    if not isinstance(raw, dict):
        raise refused("", raw, "a mapping")
    known = [f.name for f in fields(cls) if f.init]
    errors = key_errors(cls, raw, renamed)
    try:
        built = cls(**{k: v for k, v in raw.items() if k in known})
    except ConfigError as e:
        errors += e.errors
    if errors:
        raise ConfigError.several(errors)
    return built


def check_num_gpus(num_gpus: float) -> bool:
    """Ray's rule for a trial's GPUs: a fraction of one GPU (0 < x <= 1), or a whole number."""
    return num_gpus == 0 or 0 < num_gpus <= 1 or float(num_gpus).is_integer()
