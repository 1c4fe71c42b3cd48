"""The one error type for bad user input: every command exits 2 on it (`rlsweep.cli.main`).

`SpecError` names the file (if any), the key path and what is allowed. `ConfigError` (a bad
TrialConfig value, not yet tied to a file), `rlsweep.cost.PriceError` (a price table) and
`LaunchError` (a launcher's flags or cluster settings) are kinds of it.
"""

from __future__ import annotations


class SpecError(ValueError):
    """Input rlsweep cannot run: names the file (if any), the key path and what is allowed."""

    def __init__(self, source: str | None, path: str, message: str) -> None:
        self.source, self.path, self.message = source, path, message
        where = ": ".join(p for p in (source, path) if p)
        super().__init__(f"{where}: {message}" if where else message)


class ConfigError(SpecError):
    """A bad configuration value; `path` is the dotted key path it was found at."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(None, path, message)

    def under(self, prefix: str) -> ConfigError:
        """The same error, its path prefixed (e.g. by the spec section it came from)."""
        return ConfigError(".".join(p for p in (prefix, self.path) if p), self.message)


class LaunchError(SpecError):
    """A launcher's bad flag or setting (EC2 cluster, SageMaker job); the message names it."""

    def __init__(self, message: str) -> None:
        super().__init__(None, "", message)
