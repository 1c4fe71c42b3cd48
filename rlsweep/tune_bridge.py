"""The one place that turns a `SweepSpec` into Ray Tune objects (param space, configs, Tuner)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray import tune

from rlsweep.config import TrialConfig
from rlsweep.spec import SweepSpec

Trainable = Callable[[dict[str, Any]], None]


def param_space(spec: SweepSpec) -> dict[str, Any]:
    """Tune's param_space: games and seeds are grid axes, then the spec's grid, then fixed values.

    Fixed values are written out in full (every TrialConfig field) so that each trial's
    params.json records exactly what ran, defaults included.
    """
    defaults = TrialConfig(total_env_steps=spec.budget, **spec.params).to_dict()
    space: dict[str, Any] = dict(defaults)
    space["game"] = tune.grid_search(list(spec.games))
    space["seed"] = tune.grid_search(list(spec.seeds))
    for key, values in spec.grid.items():
        space[key] = tune.grid_search(list(values))
    return space


def _trial_dirname(trial) -> str:
    cfg = trial.config
    return f"{cfg.get('game', 'trial')}_s{cfg.get('seed', 0)}_{trial.trial_id}"


def _resources(trainable: Trainable) -> Any:
    from rlsweep.algos import trial_resources

    return tune.with_resources(
        trainable, lambda config: trial_resources(TrialConfig.from_dict(config))
    )


def build_tuner(
    spec: SweepSpec,
    trainable: Trainable,
    *,
    storage_path: str | None = None,
    callbacks: list[Any] | None = None,
    max_failures: int = 0,
) -> tune.Tuner:
    """A Tuner running every trial of `spec` with `trainable`, resources sized per trial."""
    storage = Path(storage_path or spec.storage_path).expanduser().resolve()
    return tune.Tuner(
        _resources(trainable),
        param_space=param_space(spec),
        tune_config=tune.TuneConfig(
            metric=spec.metric,
            mode=spec.mode,
            num_samples=1,
            max_concurrent_trials=spec.max_concurrent,
            trial_dirname_creator=_trial_dirname,
        ),
        run_config=tune.RunConfig(
            name=spec.name,
            storage_path=str(storage),
            callbacks=callbacks,
            failure_config=tune.FailureConfig(max_failures=max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
            verbose=1,
        ),
    )
