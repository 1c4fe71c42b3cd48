"""The one place that turns a `SweepSpec` into Ray Tune objects.

- grid / random: games and seeds are grid axes of Tune's variant generator, as are grid params;
  the sampled params' `num_samples` configurations are drawn once, from `search.seed`, and
  each runs in every grid cell (one more grid axis: `SAMPLE`, which of them).
- optuna: Optuna (TPE) proposes the sampled params; Tune's `Repeater` runs every proposal once
  per game x seed cell and reports their mean to Optuna, so games and seeds stay grid axes.
- schedulers: ASHA stops weak trials early; PBT perturbs `search.mutations` (one game only).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from ray import tune

from rlsweep import _ray_compat
from rlsweep.errors import ConfigError, SpecError
from rlsweep.experiment.interrupt import StopFlag
from rlsweep.metrics import TRIAL_DONE, TUNE_ITERATION
from rlsweep.plan.placement import placement
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.space import Param, apply_conditions
from rlsweep.spec.spec import (
    CELL_INDEX,
    SAMPLE,
    TRIAL_FILE,
    VARIANT,
    SweepSpec,
    resolve_config,
)
from rlsweep.storage import tune_storage

Trainable = Callable[[dict[str, Any]], None]


def param_space(spec: SweepSpec) -> dict[str, Any]:
    """Tune's param_space. Fixed values are written out in full (every TrialConfig field) so
    each trial's params.json records exactly what ran, defaults included. A conditional
    parameter whose condition fails takes `spec.defaults()`'s value (baseline + params), as in
    `spec.trials()` (validate, plan) and `spec.resolve()`."""
    defaults = spec.defaults()
    space: dict[str, Any] = dict(defaults)
    if spec.search.algorithm == "optuna":
        # Optuna cannot grid; the Repeater's index picks the (game, seed) cell instead.
        space.pop("game"), space.pop("seed")
    else:
        space["game"] = tune.grid_search(list(spec.games))
        space["seed"] = tune.grid_search(list(spec.seeds))
    if spec.variants:
        if spec.search.algorithm != "optuna":
            space[VARIANT] = tune.grid_search(list(spec.variants))
        for key in {k for bundle in spec.variants.values() for k in bundle}:
            # Resolved from the label, so params.json records the values that ran.
            space[key] = tune.sample_from(
                functools.partial(_from_variant, key, spec.variants, defaults[key])
            )
    drawn = drawn_configurations(spec)
    if drawn:
        space[SAMPLE] = tune.grid_search(list(range(len(drawn))))
    for key, param in spec.space.items():
        space[key] = to_tune(param)
        if drawn and not param.is_grid:
            # The trial's configuration's value (where its condition holds), resolved after the
            # other params, so params.json records the value that ran.
            space[key] = tune.sample_from(
                functools.partial(_drawn, key, drawn, spec.space, defaults)
            )
        elif param.when and spec.search.algorithm != "optuna":
            space[key] = tune.sample_from(
                functools.partial(_conditional, space[key], param.when, defaults[key])
            )
    return space


def drawn_configurations(spec: SweepSpec) -> list[dict[str, Any]]:
    """The `search.num_samples` configurations of a grid or random sweep's sampled params,
    drawn once for the whole sweep from `search.seed` (by Tune's own domains, as Tune's random
    search draws them). Each runs in every game x seed x variant cell and with every grid
    value, as each of Optuna's proposals does: a configuration is then scored over the seeds
    and games, not on the one cell it happened to draw (Tune's own random search draws anew
    for a trial). Empty where nothing is sampled, under Optuna (it proposes them) and under PBT:
    its population's members each draw their own starting values, as Tune draws them, so that
    it has more than the seeds to exploit."""
    if not draws_once(spec):
        return []
    import numpy as np

    rng = np.random.RandomState(spec.search.seed)
    domains = {k: to_tune(spec.space[k]) for k in spec.sampled_keys}
    drawn = []
    for _ in range(spec.search.num_samples):
        draw = {k: d.sample(random_state=rng) for k, d in domains.items()}
        drawn.append({k: v.item() if isinstance(v, np.generic) else v for k, v in draw.items()})
    return drawn


def to_tune(param: Param) -> Any:
    """A space's parameter as Tune's search-space domain (the spec layer imports no Ray).

    A quantized range goes to Tune between `Param.bounds`, its least and greatest multiples of
    q: Tune's random search draws multiples of q, and OptunaSearch hands Optuna the domain's
    low + k q, which are then the same values (Ray 2.60). A q of 1 on an int is no q: Tune's
    qrandint excludes its upper bound there alone."""
    if param.kind == "grid":
        return tune.grid_search(list(param.values))
    if param.kind == "choice":
        return tune.choice(list(param.values))
    (lo, hi), q = param.bounds, param.q
    match param.kind:
        case "uniform":
            return tune.quniform(lo, hi, q) if q else tune.uniform(lo, hi)
        case "loguniform":
            return tune.qloguniform(lo, hi, q) if q else tune.loguniform(lo, hi)
        case "int":
            if q is None or int(q) == 1:  # randint excludes the upper bound; ours includes it
                return tune.randint(int(lo), int(hi) + 1)
            return tune.qrandint(int(lo), int(hi), int(q))
    raise AssertionError(param.kind)


def _config_of(arg: dict[str, Any]) -> dict[str, Any]:
    """The partly resolved config a `sample_from` function gets: the config itself (Tune's
    current API; a function taking `{"config": ...}` instead is deprecated, and Tune warns each
    time it falls back to that) or, from Tune's grid resolver, `{"config": config}`. No
    TrialConfig field is named `config`."""
    return arg.get("config", arg)


def _from_variant(key: str, variants: dict, default: Any, arg: dict[str, Any]) -> Any:
    label = _config_of(arg).get(VARIANT)
    if not isinstance(label, str):  # optuna: the trial's cell index picks it (resolve_config)
        return default
    return variants[label].get(key, default)


def _drawn(
    key: str,
    drawn: list[dict[str, Any]],
    space: dict[str, Param],
    defaults: dict[str, Any],
    arg: dict[str, Any],
) -> Any:
    """A sampled param's value in the trial's drawn configuration (`SAMPLE`) where its
    condition holds, else its default, by the one rule of conditions (`apply_conditions`,
    as the trial resolves its config): a condition on another sampled param reads that one's
    value in the same draw, not Tune's config, where it may not be resolved yet."""
    config = _config_of(arg)
    return apply_conditions({**config, **drawn[config[SAMPLE]]}, space, defaults)[key]


def _conditional(domain, when: dict[str, tuple], default: Any, arg: dict[str, Any]) -> Any:
    config = _config_of(arg)
    if all(config.get(k) in values for k, values in when.items()):
        return domain.sample()
    return default


def resolver(spec: SweepSpec) -> Callable[..., dict[str, Any]]:
    """`spec.resolve` made of the spec's pieces, not the spec: what travels to the trial
    processes (`wrap_trainable`) and into the experiment's saved state (`TrialRecord`)."""
    return functools.partial(
        resolve_config,
        space=spec.space,
        defaults=spec.defaults(),
        cells=spec.cells(),
        variants=spec.variants,
    )


def wrap_trainable(
    spec: SweepSpec, trainable: Trainable, stop_flag: StopFlag | None = None
) -> Trainable:
    """`trainable` on the TrialConfig dict a trial runs, its resources sized per trial.
    `stop_flag`: the driver's interrupt flag and time limit (`rlsweep.experiment.interrupt`)
    the trial polls."""
    resolve = resolver(spec)

    def run(config: dict[str, Any]) -> None:
        from rlsweep.experiment import interrupt

        interrupt.bind(stop_flag)
        return trainable(resolve(config))

    run.__name__ = getattr(trainable, "__name__", "trial")
    return tune.with_resources(
        run, lambda config: trial_resources(TrialConfig.from_dict(resolve(config)))
    )


def trial_resources(cfg: TrialConfig) -> tune.PlacementGroupFactory:
    """The placement group Tune reserves for one trial: `rlsweep.plan.placement`'s bundles (the
    trial's process, then one per remote EnvRunner), packed as RLlib packs them (a test holds
    this equal to RLlib's own `default_resource_request` for the trial's config)."""
    return tune.PlacementGroupFactory([dict(b) for b in placement(cfg).bundles], strategy="PACK")


def search_alg(spec: SweepSpec, experiment: str | None = None):
    s = spec.search
    if s.algorithm != "optuna":
        return None  # Tune's default variant generator: grids and random samples
    import optuna
    from ray.tune.search import ConcurrencyLimiter, Repeater

    from rlsweep.run.optuna_search import RelocatableOptunaSearch

    searcher = RelocatableOptunaSearch(
        sampler=optuna.samplers.TPESampler(seed=s.seed),
        metric=spec.metric,
        mode=spec.mode,
        study_name=spec.name,
        storage=optuna.storages.RDBStorage(spec.optuna_storage_url(experiment, create=True)),
    )
    repeat = len(spec.cells())
    searcher = Repeater(searcher, repeat=repeat)
    if spec.max_concurrent:
        searcher = ConcurrencyLimiter(searcher, max_concurrent=spec.max_concurrent)
    return searcher


def scheduler(spec: SweepSpec):
    s = spec.search
    if s.scheduler == "asha":
        from ray.tune.schedulers import ASHAScheduler

        return ASHAScheduler(
            time_attr=TUNE_ITERATION,
            grace_period=s.grace_period,
            reduction_factor=s.reduction_factor,
            max_t=10**9,  # trials end themselves at their env-step budget
        )
    if s.scheduler == "pbt":
        from rlsweep.run.population import MemberPBT

        return MemberPBT(
            member_keys=("game", "seed"),  # the cell; the rest is what a member clones
            time_attr=TUNE_ITERATION,
            perturbation_interval=s.perturbation_interval,
            hyperparam_mutations={k: to_tune(spec.space[k]) for k in spec.pbt_mutations},
            quantile_fraction=0.25,
            synch=s.synch,
        )
    return None


def draws_once(spec: SweepSpec) -> bool:
    """The sweep's sampled configurations are drawn here, once (`drawn_configurations`): those
    of grid or random search that run in every cell (Optuna proposes its own)."""
    return spec.configurations_in_every_cell and spec.search.algorithm != "optuna"


def num_samples(spec: SweepSpec) -> int:
    """Tune's num_samples: how many times its variant generator runs the grid."""
    if spec.search.algorithm == "optuna":
        return spec.search.num_samples * len(spec.cells())  # Repeater counts each cell
    # The drawn configurations are a grid axis (`SAMPLE`): the grid once.
    return 1 if draws_once(spec) else spec.search.num_samples


def reuses_processes(spec: SweepSpec) -> bool:
    """Whether Tune hands a finished trial's process to the next trial that needs the same
    resources (`reuse_actors`), which so skips the process's start: Ray's worker, torch and
    RLlib imported, and torch's compiler module, which torch's optimizers import on their first
    step (8.3 CPU-s of a tiny trial's start on a 2-core Xeon, `benchmarks/trial_start.py`). For
    CPU trials: a GPU trial starts in a fresh process until a GPU run has checked that a trial
    leaves nothing of its CUDA state (graphs, the allocator's pools, peak counters) to the
    next. The trial counts its figures from its own start (`rlsweep.metrics.TRIALS_BEFORE`)."""
    return not spec.takes_gpus


def trial_done(trial_id: str, result: dict[str, Any]) -> bool:
    """Tune stopper: a trial's last report ends it (see metrics.TRIAL_DONE)."""
    return bool(result.get(TRIAL_DONE))


def _trial_dirname(trial, cells: list[tuple[str, int, str | None]] | None = None) -> str:
    """`<game>_s<seed>_<trial id>`: an Optuna trial's game and seed from its cell index
    (`cells`: the spec's; a sweep begun before they were given resumes without them)."""
    cfg = trial.config
    if cells is not None and CELL_INDEX in cfg:
        game, seed, _ = cells[cfg[CELL_INDEX]]
    else:
        game, seed = cfg.get("game", "trial"), cfg.get("seed", "x")
    return f"{game}_s{seed}_{trial.trial_id}"


def sweep_callbacks(spec: SweepSpec, callbacks: list[Any] | None = None) -> list[Any]:
    """Tune's callbacks of a sweep of `spec`: `callbacks` (W&B's), then the driver's listeners
    (`DriverCallback`) and each trial's `TRIAL_FILE` (`TrialRecord`)."""
    return [*(callbacks or []), DriverCallback(), TrialRecord(resolver(spec))]


def build_tuner(
    spec: SweepSpec,
    trainable: Trainable,
    *,
    storage_path: str | None = None,
    callbacks: list[Any] | None = None,
    max_failures: int = 0,
    stop_flag: StopFlag | None = None,
    verbose: bool = False,
) -> tune.Tuner:
    """A Tuner running every trial of `spec` with `trainable`, resources sized per trial.

    A crashed trial is retried up to `max_failures` times, each from its last checkpoint.
    `verbose`: Tune's own progress reporter; otherwise Tune is silent and rlsweep's driver
    listeners (`DriverCallback`: the progress view, graceful interrupts) report."""
    storage_path = storage_path or spec.storage_path
    storage, storage_fs = tune_storage(storage_path)
    experiment = f"{storage}/{spec.name}" if storage_fs is None else None
    return tune.Tuner(
        wrap_trainable(spec, trainable, stop_flag),
        param_space=param_space(spec),
        tune_config=tune.TuneConfig(
            metric=spec.metric,
            mode=spec.mode,
            search_alg=search_alg(spec, experiment),
            scheduler=scheduler(spec),
            num_samples=num_samples(spec),
            max_concurrent_trials=spec.max_concurrent
            if spec.search.algorithm != "optuna"
            else None,
            trial_dirname_creator=functools.partial(_trial_dirname, cells=spec.cells()),
            reuse_actors=reuses_processes(spec),
        ),
        run_config=tune.RunConfig(
            name=spec.name,
            storage_path=storage,
            storage_filesystem=storage_fs,
            callbacks=sweep_callbacks(spec, callbacks),
            failure_config=tune.FailureConfig(max_failures=max_failures),
            stop=trial_done,
            checkpoint_config=checkpoint_config(spec),
            verbose=tune_verbosity(verbose),
            # Each trial's stdout/stderr (RLlib's config dumps, warnings) in its trial dir, with
            # each checkpoint (Tune keeps them in Ray's session dir unless artifacts sync).
            log_to_file=True,
            sync_config=tune.SyncConfig(sync_artifacts=True),
        ),
    )


def checkpoint_config(spec: SweepSpec) -> tune.CheckpointConfig:
    """`keep_checkpoints` per trial, the newest: Tune deletes the oldest of a trial's
    checkpoints beyond it once the trial's newest is on disk. PBT restores other trials'
    checkpoints at any time: deleting old ones races it, so it keeps them all."""
    keep = None if spec.search.scheduler == "pbt" else spec.keep_checkpoints
    return tune.CheckpointConfig(num_to_keep=keep)


def tune_verbosity(verbose: bool) -> int:
    return 1 if verbose else 0


def restore_tuner(
    spec: SweepSpec,
    trainable: Trainable,
    experiment: str,
    *,
    stop_flag: StopFlag | None = None,
    verbose: bool = False,
    callbacks: list[Any] | None = None,
) -> tune.Tuner:
    """The Tuner of an interrupted sweep: finished trials stay finished; unfinished and errored
    ones continue from their latest checkpoints. Run settings (storage, failure retries,
    searcher and scheduler state) come from the experiment's saved state, and so does its
    param_space: Tune refuses a re-specified one whose keys differ, and today's would have
    every TrialConfig field added since the sweep began (a trial's config without one takes its
    default, or the value the sweep ran where the default changed: `recorded_config`).

    Today's param_space is given where its keys are the sweep's (begun by this rlsweep), for
    its `sample_from` functions: Tune saved its searcher's space with a placeholder for each
    (`ray.tune.impl.placeholder`, Ray 2.60) and resolves a trial's placeholders only with the
    functions of the param_space it is given. A trial created after a resume (one that
    `max_concurrent` or Optuna had not created yet) then runs its variant's and drawn values,
    not placeholders (`framestack: got ('__fn_ph', '763ba7cc')`, the resume's end). Tune also
    resolves each restored trial anew from the config it was created with: the same values,
    rlsweep's functions being deterministic outside PBT, where a config PBT perturbed would
    go back to its first values; a PBT sweep keeps the saved space.

    What names a place is made anew for `experiment`, where the sweep runs now (it may have been
    copied or moved): the Optuna searcher, at the study in it (its saved state then restores
    into that one), and its callbacks (`sweep_callbacks`: `callbacks`, W&B's, whose run dir
    is in it)."""
    storage, storage_fs = tune_storage(experiment)
    restore = functools.partial(
        tune.Tuner.restore,
        storage,
        wrap_trainable(spec, trainable, stop_flag),
        resume_unfinished=True,
        resume_errored=True,
        restart_errored=False,
        storage_filesystem=storage_fs,
    )
    tuner = None
    if spec.search.scheduler != "pbt":
        with contextlib.suppress(ValueError):  # keys of another rlsweep's (the trainable: again)
            tuner = restore(param_space=param_space(spec))
    if tuner is None:
        tuner = restore()
    tune_config, run_config = _ray_compat.restored_configs(tuner)
    run_config.verbose = tune_verbosity(verbose)
    if spec.search.algorithm == "optuna":
        tune_config.search_alg = search_alg(spec, experiment)
    run_config.callbacks = sweep_callbacks(spec, callbacks)
    return tuner


def check_restorable(spec: SweepSpec, experiment: str) -> None:
    """Raise a SpecError, on the driver and before Ray starts, for each trial a resume would
    start or continue whose saved config this rlsweep does not run: a value or key that an
    earlier version wrote and this one refuses would otherwise fail each such trial at its
    start, after Ray is up."""
    from rlsweep.experiment.experiment_dir import run_info
    from rlsweep.results.results import unfinished_configs

    resolve = resolver(spec)
    run = run_info(experiment)
    saved_by = ", commit ".join(
        str(v) for v in (run.get("rlsweep_version"), run.get("git_commit")) if v
    )
    errors: list[SpecError] = []
    for trial, config in unfinished_configs(experiment).items():
        try:
            TrialConfig.from_dict(resolve(config))
        except ConfigError as e:
            errors += [
                SpecError(
                    f"{experiment}/{trial}",
                    f"config.{x.path}",
                    f"{x.message} (saved by the rlsweep that started the sweep"
                    f"{f', {saved_by}' if saved_by else ''}: resume with that one, or run the "
                    "sweep anew)",
                )
                for x in e.errors
            ]
    if errors:
        raise SpecError.several(errors)


_listeners: list[Any] = []


@contextlib.contextmanager
def listening(*listeners: Any) -> Iterator[None]:
    """Forward Tune's callback events to `listeners` (objects with any of the `Callback`
    methods) while a sweep runs on this driver."""
    _listeners[:] = listeners
    try:
        yield
    finally:
        _listeners.clear()


class DriverCallback(tune.Callback):
    """Tune's events, forwarded to this driver's listeners (`listening`). It holds no state
    (Tune pickles it into the experiment's tuner.pkl; a resume makes the sweep's callbacks
    anew, `restore_tuner`)."""

    def _forward(self, event: str, *args: Any, **kwargs: Any) -> None:
        for listener in list(_listeners):
            if (method := getattr(listener, event, None)) is not None:
                method(*args, **kwargs)

    def on_step_begin(self, iteration, trials, **info):
        self._forward("on_step_begin", iteration, trials, **info)

    def on_step_end(self, iteration, trials, **info):
        self._forward("on_step_end", iteration, trials, **info)

    def on_trial_start(self, iteration, trials, trial, **info):
        # Before Tune's loggers' (appended after the sweep's callbacks, as Tune sets them up).
        self._forward("on_trial_start", iteration, trials, trial, **info)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self._forward("on_trial_result", iteration, trials, trial, result, **info)

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        self._forward("on_checkpoint", iteration, trials, trial, checkpoint, **info)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._forward("on_trial_complete", iteration, trials, trial, **info)

    def on_trial_error(self, iteration, trials, trial, **info):
        self._forward("on_trial_error", iteration, trials, trial, **info)

    def on_trial_recover(self, iteration, trials, trial, **info):
        self._forward("on_trial_recover", iteration, trials, trial, **info)


class TrialRecord(tune.Callback):
    """Writes `TRIAL_FILE` into each trial dir as the trial starts: the config the trainable
    resolves from Tune's (the same `resolver`), with its variant label. On the driver, beside
    the params.json Tune's logger writes, so that it reaches the experiment dir wherever that
    is stored (a trial process's own files reach it only with its results). Results read it,
    and so never resolve a trial's config again."""

    def __init__(self, resolve: Callable[..., dict[str, Any]]):
        self._resolve = resolve

    def on_trial_start(self, iteration, trials, trial, **info):
        # Each start: a PBT trial restarts on its perturbed config (as params.json follows it).
        config = self._resolve(trial.config, keep_label=True)
        trial.init_local_path()
        with open(os.path.join(trial.local_path, TRIAL_FILE), "w") as f:
            json.dump(config, f, indent=2, sort_keys=True, default=_plain)


def _plain(value: Any) -> Any:
    """A value json cannot write: a NumPy one (some of Tune's samplers draw them) as its Python
    value; anything else as its text, as Tune's params.json writes it."""
    return value.tolist() if hasattr(value, "tolist") else str(value)
