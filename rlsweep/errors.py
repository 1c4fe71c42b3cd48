"""Errors rlsweep raises for bad user input, always with the key path they concern."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad configuration value; `path` is the dotted key path it was found at."""

    def __init__(self, path: str, message: str) -> None:
        self.path, self.message = path, message
        super().__init__(f"{path}: {message}" if path else message)

    def under(self, prefix: str) -> ConfigError:
        """The same error, its path prefixed (e.g. by the spec section it came from)."""
        return ConfigError(".".join(p for p in (prefix, self.path) if p), self.message)
