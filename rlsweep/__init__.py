"""rlsweep: what makes PPO generalize on Procgen? Sweeps on Ray Tune + RLlib."""

from rlsweep import _moved
from rlsweep._version import __version__ as __version__
from rlsweep.errors import ConfigError, SpecError
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import SweepSpec

_moved.install()  # the modules' paths before the layers became folders (old experiment dirs)

__all__ = [
    "ConfigError",
    "SpecError",
    "SweepInterrupted",
    "SweepResult",
    "SweepSpec",
    "TrialConfig",
    "resume_sweep",
    "run_sweep",
]


def __getattr__(name: str):
    # Ray is imported only when a sweep actually runs.
    if name in ("run_sweep", "resume_sweep", "SweepResult", "SweepInterrupted"):
        from rlsweep.run import sweep

        return getattr(sweep, name)
    raise AttributeError(name)
