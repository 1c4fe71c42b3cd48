"""Where rlsweep's modules were before its layers became subpackages (`rlsweep.tune_bridge` is
now `rlsweep.run.tune_bridge`, ...): one table, `MOVED`, and what makes the old paths import.

An experiment directory written before the move holds pickles that name rlsweep's classes and
functions by their old module paths (Tune's `tuner.pkl` and experiment state: the driver's
callbacks, the resolver, the `functools.partial`s in the param space). `install()` (called by
`rlsweep/__init__.py`, so before any of them is unpickled, in the driver and in every trial
process) puts a finder on `sys.meta_path` that answers an old path with the module now there;
the four old modules whose names are now packages (`rlsweep.spec`, `rlsweep.plan`,
`rlsweep.results`, `rlsweep.envs`) forward their old names through the package's
`__getattr__` (`forward`), loading the module only when such a name is asked for. A user's old
import (`from rlsweep.sweep import run_sweep`) works the same way, and so does `python -m` on an
old path. Nothing here is imported
until an old path is asked for; the cost at `import rlsweep` is one dict and one finder.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from typing import Any

MOVED: dict[str, str] = {
    "rlsweep.ablate": "rlsweep.results.ablate",
    "rlsweep.algos": "rlsweep.trial.algos",
    "rlsweep.augment": "rlsweep.trial.augment",
    "rlsweep.checkpoint": "rlsweep.trial.checkpoint",
    "rlsweep.config": "rlsweep.spec.config",
    "rlsweep.connectors": "rlsweep.trial.connectors",
    "rlsweep.cost": "rlsweep.plan.cost",
    "rlsweep.cuda_graphs": "rlsweep.trial.cuda_graphs",
    "rlsweep.device": "rlsweep.trial.device",
    "rlsweep.doctor": "rlsweep.node.doctor",
    "rlsweep.env_runner": "rlsweep.trial.env_runner",
    "rlsweep.envs": "rlsweep.envs.vector_env",
    "rlsweep.evaluation": "rlsweep.trial.evaluation",
    "rlsweep.experiment_dir": "rlsweep.experiment.experiment_dir",
    "rlsweep.fits": "rlsweep.run.fits",
    "rlsweep.history": "rlsweep.experiment.history",
    "rlsweep.importance": "rlsweep.results.importance",
    "rlsweep.interrupt": "rlsweep.experiment.interrupt",
    "rlsweep.layout": "rlsweep.plan.layout",
    "rlsweep.models": "rlsweep.trial.models",
    "rlsweep.overlap": "rlsweep.trial.overlap",
    "rlsweep.overrides": "rlsweep.spec.overrides",
    "rlsweep.placement": "rlsweep.plan.placement",
    "rlsweep.plan": "rlsweep.plan.plan",
    "rlsweep.plots": "rlsweep.results.plots",
    "rlsweep.ppo_learner": "rlsweep.trial.ppo_learner",
    "rlsweep.preflight": "rlsweep.run.preflight",
    "rlsweep.procgen": "rlsweep.envs.procgen",
    "rlsweep.progress": "rlsweep.run.progress",
    "rlsweep.qt": "rlsweep.envs.qt",
    "rlsweep.recovery": "rlsweep.experiment.recovery",
    "rlsweep.report": "rlsweep.results.report",
    "rlsweep.results": "rlsweep.results.results",
    "rlsweep.rl_module": "rlsweep.trial.rl_module",
    "rlsweep.session": "rlsweep.run.session",
    "rlsweep.space": "rlsweep.spec.space",
    "rlsweep.spec": "rlsweep.spec.spec",
    "rlsweep.spec_checks": "rlsweep.spec.spec_checks",
    "rlsweep.stats": "rlsweep.results.stats",
    "rlsweep.subconfigs": "rlsweep.spec.subconfigs",
    "rlsweep.sweep": "rlsweep.run.sweep",
    "rlsweep.tables": "rlsweep.results.tables",
    "rlsweep.tracking": "rlsweep.run.tracking",
    "rlsweep.trainable": "rlsweep.trial.trainable",
    "rlsweep.tune_bridge": "rlsweep.run.tune_bridge",
    "rlsweep.validators": "rlsweep.spec.validators",
    "rlsweep.wheelhouse": "rlsweep.node.wheelhouse",
    "rlsweep.yamlfile": "rlsweep.spec.yamlfile",
}
"""Each module's path before the move -> its path now."""

PACKAGED: dict[str, str] = {
    "rlsweep.spec": "rlsweep.spec.spec",
    "rlsweep.plan": "rlsweep.plan.plan",
    "rlsweep.results": "rlsweep.results.results",
    "rlsweep.envs": "rlsweep.envs.vector_env",
}
"""Old modules whose path is now a package's: the module that holds what they held."""


class _Alias:
    """The loader of an old path: the module now at the new path, under both names."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        # The import system returns what sys.modules holds for the name after this runs.
        sys.modules[module.__name__] = importlib.import_module(self.new)

    def get_code(self, name: str) -> Any:
        """`python -m <old path>` (`-m rlsweep.wheelhouse`) runs the module now at the new path."""
        import importlib.util

        return importlib.util.find_spec(self.new).loader.get_code(self.new)


class MovedFinder:
    """On `sys.meta_path`: finds the old paths of `MOVED` (and nothing else)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        new = MOVED.get(name)
        if new is None or name in PACKAGED:  # a package now, found where it is
            return None
        return ModuleSpec(name, _Alias(new))


def install() -> None:
    # First: an old path is moved whatever else could find it (another checkout's editable
    # install, whose finder maps `rlsweep` to that checkout, would load its stale module).
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())


def forward(package: str, submodules: tuple[str, ...]) -> Callable[[str], Any]:
    """A package's `__getattr__`: a name that is none of its `submodules` is looked up in the
    module that `PACKAGED` says held it before the move (`rlsweep.spec.SweepSpec`)."""

    def __getattr__(name: str) -> Any:
        if name in submodules or name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(PACKAGED[package]), name)

    return __getattr__
