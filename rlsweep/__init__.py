"""rlsweep: what makes PPO generalize on Procgen? Sweeps on Ray Tune + RLlib."""

from rlsweep.config import TrialConfig
from rlsweep.errors import ConfigError, SpecError
from rlsweep.spec import SweepSpec

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
__version__ = "0.1.0"


def __getattr__(name: str):
    # Ray is imported only when a sweep actually runs.
    if name in ("run_sweep", "resume_sweep", "SweepResult", "SweepInterrupted"):
        from rlsweep import sweep

        return getattr(sweep, name)
    raise AttributeError(name)
