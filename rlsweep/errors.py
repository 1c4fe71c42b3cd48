"""The one error type for bad user input: every command exits 2 on it (`rlsweep.cli.main`).

`SpecError` names the file (if any), the key path and what is allowed. `ConfigError` (a bad
TrialConfig value, not yet tied to a file), `rlsweep.plan.cost.PriceError` (a price table) and
`LaunchError` (a launcher's flags or cluster settings) are kinds of it.

One error may stand for several independent problems of the same input (`SpecError.several`),
so that a user fixes a spec in one pass rather than one error per run: `errors` lists them,
`str()` gives one line each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

E = TypeVar("E", bound="SpecError")


class SpecError(ValueError):
    """Input rlsweep cannot run: names the file (if any), the key path and what is allowed."""

    def __init__(self, source: str | None, path: str, message: str) -> None:
        self.source, self.path, self.message = source, path, message
        self.errors: tuple[SpecError, ...] = (self,)
        """Every problem this error stands for (itself alone, unless made by `several`)."""
        where = ": ".join(p for p in (source, path) if p)
        super().__init__(f"{where}: {message}" if where else message)

    @classmethod
    def several(cls: type[E], errors: Sequence[E]) -> E:
        """One error for `errors` (one or more, each a single problem; repeats dropped): the
        first's kind, source, path and message, `errors` all of them, `str()` a line each."""
        unique = list({str(e): e for e in errors}.values())
        if not unique:
            raise ValueError("several() needs at least one error")
        if len(unique) == 1:
            return unique[0]
        first = unique[0]
        combined = type(first).__new__(type(first))  # not __init__: kinds take other arguments
        combined.__dict__.update(vars(first))
        combined.errors = tuple(unique)
        combined.args = ("\n".join(str(e) for e in unique),)
        return combined

    def each(self: E, change: Callable[[E], SpecError]) -> SpecError:
        """`change` applied to each problem (e.g. to place a TrialConfig error in a file and
        key path), as one error again."""
        return SpecError.several([change(e) for e in self.errors])


class ConfigError(SpecError):
    """A bad configuration value; `path` is the dotted key path it was found at."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(None, path, message)

    def under(self, prefix: str) -> ConfigError:
        """The same error(s), each path prefixed (e.g. by the spec section it came from)."""
        return ConfigError.several(
            [
                ConfigError(".".join(p for p in (prefix, e.path) if p), e.message)
                for e in self.errors
            ]
        )


class LaunchError(SpecError):
    """A launcher's bad flag or setting (EC2 cluster, SageMaker job); the message names it."""

    def __init__(self, message: str) -> None:
        super().__init__(None, "", message)
