"""A spec's keys overridden on the command line, as Hydra writes them: `key=value` for any key
path (`params.precision=fp32`, `search.num_samples=8`, `space.lr='{loguniform: [1e-4, 1e-3]}'`)
and the list flags `--games bigfish,coinrun`, `--seeds 0,1,2`.

A value is read as YAML (`rlsweep.spec.yamlfile`, the one loader: `yaml.safe_load`), so it is
written as in the file; the spec it makes is built and validated as the file is
(`SweepSpec.from_yaml`), and an error about a key an override set names the override. The sweep's
`sweep.yaml` records the spec that ran, and lists the overrides in a comment at its top.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rlsweep.errors import SpecError
from rlsweep.spec.yamlfile import parse_yaml

EXAMPLE = "KEY=VALUE, KEY a spec key path (params.lr=1e-4, search.num_samples=8)"


@dataclass(frozen=True)
class Override:
    """One spec key set from the command line."""

    path: tuple[str, ...]
    """The key path: ("params", "precision")."""
    value: Any
    """The value, as YAML reads it."""
    text: str
    """As the user wrote it (`params.precision=fp32`, `--games bigfish`): errors name it."""

    @property
    def key(self) -> str:
        return ".".join(self.path)

    def covers(self, error_path: str) -> bool:
        """Whether an error at the spec key path `error_path` is about what this override set:
        the key it set, one below it, or one it set a key under (`params.lr.x=3` makes
        `params.lr` a mapping)."""
        key = self.key
        below = error_path.startswith((f"{key}.", f"{key}["))
        return error_path == key or below or key.startswith(f"{error_path}.")


def parse(text: str) -> Override:
    """`KEY=VALUE` (the key a dotted path of the spec's keys, the value YAML)."""
    key, sep, raw = text.partition("=")
    path = tuple(part.strip() for part in key.split("."))
    if not sep or not all(path) or key.startswith("-"):
        raise SpecError(None, "", f"override {text!r}: allowed: {EXAMPLE}")
    try:
        value = parse_yaml(raw, source=f"override {text}")
    except SpecError as e:
        raise SpecError(None, "", f"override {text!r}: the value is {e.message}") from None
    return Override(path, value, text)


def list_flag(flag: str, key: str, text: str) -> Override:
    """`--games bigfish,coinrun` / `--seeds 0,1,2`: the list `key` takes, each item read as
    YAML (seeds are numbers)."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise SpecError(None, "", f"{flag} {text}: allowed: a comma-separated list, e.g. a,b")
    return Override((key,), [parse_yaml(item, source=flag) for item in items], f"{flag} {text}")


def apply(d: dict[str, Any], overrides: Iterable[Override]) -> dict[str, Any]:
    """A copy of the spec mapping `d` with each override set, in order (sections it names made
    where missing)."""
    out = copy.deepcopy(d)
    for o in overrides:
        node = out
        for i, part in enumerate(o.path[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                where = ".".join(o.path[: i + 1])
                raise SpecError(None, where, f"{o.text}: {where} is not a mapping of keys")
        node[o.path[-1]] = copy.deepcopy(o.value)
    return out


def named(e: SpecError, overrides: Sequence[Override]) -> SpecError:
    """`e` with each problem at a key an override set naming that override (the last that
    set it): `model.yaml: games[0] (from --games BigFish): got 'BigFish' ...`."""

    def place(x: SpecError) -> SpecError:
        for o in reversed(overrides):
            if o.covers(x.path):
                return SpecError(x.source, f"{x.path} (from {o.text})", x.message)
        return x

    return e.each(place)
