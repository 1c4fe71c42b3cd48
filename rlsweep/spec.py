"""The sweep spec: *what* to run (games x seeds x parameter grid, budget, metric).

*Where* it runs (local Ray, a cluster address, ...) is not part of the spec; see `run_sweep`.
A spec is validated completely on the driver, before Ray starts: every trial it expands to is
built as a `TrialConfig`, and every error names the file, the key path and what is allowed.

YAML note: PyYAML implements YAML 1.1, which reads `1e-4` (no dot) as a string. We load with
`yaml.safe_load` and then convert strings that are plainly numbers in exponent notation
(`1e-4`, `5E+5`) to floats, so specs can be written the natural way.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlsweep.config import TrialConfig
from rlsweep.errors import ConfigError
from rlsweep.metrics import METRICS

MODES = ("max", "min")
# TrialConfig fields set by top-level spec keys, not by params/grid.
_AXES = ("game", "seed", "total_env_steps")


class SpecError(ValueError):
    """A spec that cannot run: names the file (if any), the key path and what is allowed."""

    def __init__(self, source: str | None, path: str, message: str) -> None:
        self.source, self.path, self.message = source, path, message
        where = ": ".join(p for p in (source, path) if p)
        super().__init__(f"{where}: {message}" if where else message)


@dataclass
class SweepSpec:
    """A sweep: every game x seed x grid combination becomes one trial."""

    name: str
    """Sweep name; results go to `<storage_path>/<name>/`."""
    games: list[str] = field(default_factory=lambda: ["coinrun"])
    """Procgen games (always a grid axis)."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Trial seeds (always a grid axis)."""
    budget: int = 25_000_000
    """Env steps per trial (TrialConfig.total_env_steps)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Fixed TrialConfig overrides shared by every trial."""
    grid: dict[str, list[Any]] = field(default_factory=dict)
    """TrialConfig field -> values; the sweep covers their cross product."""
    metric: str = "test/return_norm"
    """Metric Tune ranks trials by."""
    mode: str = "max"
    """max or min."""
    max_concurrent: int | None = None
    """Cap on trials running at once (None: as many as resources allow)."""
    storage_path: str = "results"
    """Directory (local path) holding `<name>/`."""
    source: str | None = field(default=None, compare=False, repr=False)
    """File the spec was read from (for error messages)."""

    def __post_init__(self) -> None:
        self._check()

    # ------------------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str | None = None) -> SweepSpec:
        if not isinstance(d, dict):
            raise SpecError(source, "", f"a spec is a mapping of keys, got {type(d).__name__}")
        d = _numbers_from_strings(d)
        known = [f.name for f in dataclasses.fields(cls) if f.name != "source"]
        for key in d:
            if key not in known:
                hint = difflib.get_close_matches(key, known, n=1)
                raise SpecError(
                    source,
                    key,
                    f"unknown key{f' (did you mean {hint[0]!r}?)' if hint else ''}; "
                    f"allowed: {', '.join(known)}",
                )
        if "name" not in d:
            raise SpecError(source, "name", "missing; every spec needs a name")
        return cls(**d, source=source)

    @classmethod
    def from_yaml(cls, path: str | Path) -> SweepSpec:
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            raise SpecError(str(path), "", f"not valid YAML: {e}") from None
        return cls.from_dict(data, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("source")
        return d

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    # ------------------------------------------------------------------------------------------
    def trials(self) -> list[TrialConfig]:
        """Every trial of the sweep, in order (games outermost, then seeds, then the grid)."""
        keys = list(self.grid)
        out = []
        for game, seed, *values in itertools.product(
            self.games, self.seeds, *(self.grid[k] for k in keys)
        ):
            overrides = dict(zip(keys, values, strict=True))
            out.append(self._trial(game, seed, overrides))
        return out

    def _trial(self, game: str, seed: int, overrides: dict[str, Any]) -> TrialConfig:
        d = {**self.params, "game": game, "seed": seed, "total_env_steps": self.budget}
        d.update(overrides)
        try:
            return TrialConfig.from_dict(d)
        except ConfigError as e:
            where = self._locate(e.path, game, seed, overrides)
            raise SpecError(self.source, where, e.message) from None

    def _locate(self, key: str, game: str, seed: int, overrides: dict[str, Any]) -> str:
        """The spec key path a TrialConfig error came from."""
        if key == "game":
            return f"games[{self.games.index(game)}]"
        if key == "seed":
            return f"seeds[{self.seeds.index(seed)}]"
        if key == "total_env_steps":
            return "budget"
        if key in overrides:
            return f"grid.{key}[{self.grid[key].index(overrides[key])}]"
        if key in self.params:
            return f"params.{key}"
        # A cross-field rule (e.g. minibatch_size <= train batch) can fail for a default value.
        return f"params.{key}" if key else ""

    def _check(self) -> None:
        def fail(path: str, message: str) -> None:
            raise SpecError(self.source, path, message)

        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*", self.name):
            fail("name", f"got {self.name!r}; allowed: letters, digits, '_', '-', '.'")
        for key in ("games", "seeds"):
            values = getattr(self, key)
            if not isinstance(values, list) or not values:
                fail(key, f"got {values!r}; allowed: a non-empty list")
            if len(set(map(repr, values))) != len(values):
                fail(key, f"got {values!r}; values must be distinct")
        if not isinstance(self.budget, int) or isinstance(self.budget, bool) or self.budget <= 0:
            fail("budget", f"got {self.budget!r}; allowed: an integer number of env steps > 0")
        for section in ("params", "grid"):
            if not isinstance(getattr(self, section), dict):
                fail(section, f"got {getattr(self, section)!r}; allowed: a mapping")
        known = TrialConfig.field_names()
        for section in ("params", "grid"):
            for key in getattr(self, section):
                if key in _AXES:
                    where = {"game": "games", "seed": "seeds", "total_env_steps": "budget"}[key]
                    fail(f"{section}.{key}", f"set this with the top-level '{where}' key")
                if key not in known:
                    hint = difflib.get_close_matches(key, known, n=1)
                    fail(
                        f"{section}.{key}",
                        f"unknown parameter{f' (did you mean {hint[0]!r}?)' if hint else ''}; "
                        f"allowed: {', '.join(k for k in known if k not in _AXES)}",
                    )
        for key, values in self.grid.items():
            if not isinstance(values, list) or not values:
                fail(f"grid.{key}", f"got {values!r}; allowed: a non-empty list of values")
            if key in self.params:
                fail(f"grid.{key}", "also set in params; a parameter is either fixed or swept")
        if self.mode not in MODES:
            fail("mode", f"got {self.mode!r}; allowed: {', '.join(MODES)}")
        if self.metric not in METRICS:
            fail("metric", f"got {self.metric!r}; allowed: {', '.join(METRICS)}")
        if self.max_concurrent is not None and (
            not isinstance(self.max_concurrent, int) or self.max_concurrent < 1
        ):
            fail("max_concurrent", f"got {self.max_concurrent!r}; allowed: an integer >= 1 or null")
        if not isinstance(self.storage_path, str) or not self.storage_path:
            fail("storage_path", f"got {self.storage_path!r}; allowed: a directory path")
        self.trials()  # builds (and so validates) every trial


_EXP_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)[eE][-+]?\d+")


def _numbers_from_strings(value: Any) -> Any:
    """YAML 1.1 reads 1e-4 as a string; turn such strings back into floats, recursively."""
    if isinstance(value, str) and _EXP_NUMBER.fullmatch(value.strip()):
        return float(value)
    if isinstance(value, dict):
        return {k: _numbers_from_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_from_strings(v) for v in value]
    return value
