"""Every private Ray / RLlib hook rlsweep relies on, in one place.

rlsweep reaches past Ray's public API to make RLlib's PPO learner do the reference update
(`LearnerHooks`, used by `rlsweep.trial.ppo_learner.RlsweepPPOLearner`), to sample a step of all
envs in one batched operation (`EnvRunnerHooks`, used by
`rlsweep.trial.env_runner.BatchedEnvRunner`) and a train batch as PPO does (`sample_train_batch`,
`rlsweep.trial.overlap`), to keep credentials out of the runtime envs Ray logs in plain text
(`keyless_wandb_callback_class`, `stop_propagating_env_vars`), to find the jemalloc Ray ships
(`bundled_jemalloc`), to start a local Ray without the background work nobody reads
(`quiet_local_ray`), to start no worker ahead of a sweep's trials (`SYSTEM_CONFIG`),
to stop Tune's loop the way Ctrl-C does (`end_tune_loop`), to write each of Ray's log lines
once into a trial's stderr file and leave out RLlib's that its user cannot act on
(`quiet_trial_logs`, `TRIAL_LOGS`), to let a trial's process pass to the next trial once the
first has cleaned up (`wait_for_trial_ends`), to find a trial's result files in
storage (`trial_result_dirs`), to keep a PBT member's own seed when it exploits another
(`PopulationHooks`), to share the sweep's stop flag through the GCS (`kv_put`,
`kv_get`), and to keep Ray's log lines that a sweep's user cannot act on off the console
(`DRIVER_LOGS`: matched by their wording, which is no API either).
`HOOKS` lists each private name with the Ray version it was checked against.

Upgrading Ray: `pytest tests/test_ray_compat.py` says which hooked names are gone (fast, no Ray
cluster); `pytest -m rllib tests/test_ppo_reference.py` says whether the learner still computes
the reference update; then re-read each hook's Ray source for a changed meaning and bump its
`checked` version here.

Ray is imported only inside functions: importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

CHECKED = "2.60.0"
"""The Ray release every hook below was last read against."""


@dataclass(frozen=True)
class Hook:
    """One private Ray name rlsweep uses."""

    owner: str
    """Dotted path of the Ray class or module that has it (the `ray` package, for files)."""
    attribute: str
    """The name (for a file: its path inside the installed ray package)."""
    use: str
    """What rlsweep does with it, and where."""
    kind: str = "class"
    """class: defined on the owner class or module | instance: set on every instance by the
    owner's __init__ | built: set by the owner class's own `build` | parameter: a keyword the
    owner function takes | file: shipped in the ray wheel | log: text of a log record the owner
    module (whose name is its logger's) emits | env: an environment variable the owner reads."""
    checked: str = CHECKED


_LEARNER = "ray.rllib.core.learner.learner.Learner"
_TORCH_LEARNER = "ray.rllib.core.learner.torch.torch_learner.TorchLearner"
_PPO_TORCH_LEARNER = "ray.rllib.algorithms.ppo.torch.ppo_torch_learner.PPOTorchLearner"
_ALGORITHM_CONFIG = "ray.rllib.algorithms.algorithm_config.AlgorithmConfig"
_WANDB = "ray.air.integrations.wandb.WandbLoggerCallback"
_RL_MODULE = "ray.rllib.core.rl_module.rl_module.RLModule"
_ENV_RUNNER = "ray.rllib.env.env_runner.EnvRunner"
_DQN_LEARNER = "ray.rllib.algorithms.dqn.dqn_learner.DQNLearner"
_APPO_LEARNER = "ray.rllib.algorithms.appo.appo_learner.APPOLearner"
_SA_ENV_RUNNER = "ray.rllib.env.single_agent_env_runner.SingleAgentEnvRunner"
_OPTUNA_SEARCH = "ray.tune.search.optuna.optuna_search.OptunaSearch"

HOOKS: tuple[Hook, ...] = (
    # RlsweepPPOLearner (rlsweep.trial.ppo_learner), through LearnerHooks below.
    Hook(
        _LEARNER,
        "_make_batch_if_necessary",
        "overridden as LearnerHooks.make_batch: GAE without grad on the rollout's values, "
        "advantage_norm batch/rllib",
    ),
    Hook(
        _LEARNER,
        "_create_iterator_if_necessary",
        "overridden as LearnerHooks.minibatch_iterator: minibatching shuffle",
    ),
    Hook(
        _LEARNER,
        "_learner_connector",
        "read as LearnerHooks.learner_connector: GAE swapped for ReferenceGAE",
        kind="instance",
    ),
    Hook(
        _LEARNER,
        "_optimizer_lr_schedules",
        "read as OptimizerHooks.lr_schedules: a restored fixed lr is the config's (ray#62173)",
        kind="instance",
    ),
    Hook(_TORCH_LEARNER, "_get_optimizer_lr", "OptimizerHooks.optimizer_lr: the lr of an update"),
    Hook(
        _PPO_TORCH_LEARNER,
        "_update_module_kl_coeff",
        "overridden as LearnerHooks.update_kl_coeff: the KL coefficient adapts on the mean KL "
        "of the update's last epoch (2020's RLlib)",
    ),
    Hook(
        _ALGORITHM_CONFIG,
        "_torch_grad_scaler_class",
        "LearnerHooks.torch_step_extras: RlsweepPPOLearner.apply_gradients leaves these to RLlib",
        kind="instance",
    ),
    Hook(
        _ALGORITHM_CONFIG,
        "_torch_lr_scheduler_classes",
        "LearnerHooks.torch_step_extras: see _torch_grad_scaler_class",
        kind="instance",
    ),
    Hook(_TORCH_LEARNER, "_set_optimizer_lr", "OptimizerHooks.set_optimizer_lr: see lr_schedules"),
    # RLModule's forward passes: RLlib documents these as the methods a custom module
    # overrides (rlsweep.trial.rl_module), but they are underscore names all the same.
    Hook(_RL_MODULE, "_forward", "rl_module: inference pass"),
    Hook(_RL_MODULE, "_forward_exploration", "rl_module: rollout pass (with values)"),
    Hook(_RL_MODULE, "_forward_train", "rl_module: training pass (augmentation)"),
    Hook(_RL_MODULE, "_forward_inference", "rl_module: DQN's epsilon-greedy evaluation"),
    # BatchedEnvRunner (rlsweep.trial.env_runner), through EnvRunnerHooks below.
    Hook(_SA_ENV_RUNNER, "_sample", "overridden as EnvRunnerHooks.sample_steps: batched loop"),
    Hook(
        _DQN_LEARNER,
        "last_update_ts_by_mid",
        "target_update_steps: saved and restored with a checkpoint",
        kind="built",
    ),
    Hook(
        _APPO_LEARNER,
        "_last_update_ts_by_mid",
        "target_update_steps: saved and restored with a checkpoint",
        kind="built",
    ),
    Hook(
        _ENV_RUNNER,
        "_seed",
        "EnvRunnerHooks.reseed: set by __init__ (config.seed + worker_index), read at the envs' "
        "first reset",
        kind="instance",
    ),
    Hook(_ENV_RUNNER, "_reset_envs_and_episodes", "EnvRunnerHooks.reset_envs_and_episodes"),
    Hook(_ENV_RUNNER, "_log_env_steps", "EnvRunnerHooks.count_sampled: Ray's step counter"),
    Hook(_SA_ENV_RUNNER, "_increase_sampled_metrics", "EnvRunnerHooks.count_sampled"),
    Hook(_SA_ENV_RUNNER, "_make_on_episode_callback", "EnvRunnerHooks.episode_callback"),
    Hook(_SA_ENV_RUNNER, "_new_episode", "EnvRunnerHooks.new_episode (on_episode_created)"),
    Hook(_SA_ENV_RUNNER, "_ongoing_episodes", "EnvRunnerHooks.ongoing_episodes", kind="instance"),
    Hook(
        _SA_ENV_RUNNER,
        "_done_episodes_for_metrics",
        "EnvRunnerHooks.done_episodes_for_metrics: get_metrics' finished episodes",
        kind="instance",
    ),
    Hook(
        _SA_ENV_RUNNER,
        "_ongoing_episodes_for_metrics",
        "EnvRunnerHooks.ongoing_chunks_for_metrics: get_metrics' earlier chunks",
        kind="instance",
    ),
    Hook(_SA_ENV_RUNNER, "_needs_initial_reset", "EnvRunnerHooks.needs_reset", kind="instance"),
    Hook(
        _SA_ENV_RUNNER,
        "_cached_to_module",
        "EnvRunnerHooks.cached_to_module: the next step's module input",
        kind="instance",
    ),
    Hook(_SA_ENV_RUNNER, "_weights_seq_no", "EnvRunnerHooks.weights_seq_no", kind="instance"),
    Hook(_SA_ENV_RUNNER, "_callbacks", "EnvRunnerHooks.callback_objects", kind="instance"),
    Hook(_SA_ENV_RUNNER, "_env_to_module", "EnvRunnerHooks.env_to_module", kind="instance"),
    Hook(_SA_ENV_RUNNER, "_module_to_env", "EnvRunnerHooks.module_to_env", kind="instance"),
    Hook(
        _SA_ENV_RUNNER,
        "_metrics_num_env_steps_sampled",
        "EnvRunnerHooks.count_sampled: Ray's step counter",
        kind="instance",
    ),
    Hook(
        _SA_ENV_RUNNER,
        "_metrics_num_try_env_step",
        "EnvRunnerHooks.count_env_step: Ray's counter of vector env steps",
        kind="instance",
    ),
    # sample_train_batch (rlsweep.trial.overlap): PPO's own sampling call.
    Hook(
        "ray.rllib.execution.rollout_ops.synchronous_parallel_sample",
        "_uses_new_env_runners",
        "sample_train_batch: episodes from the new API stack's EnvRunners",
        kind="parameter",
    ),
    Hook(
        "ray.rllib.execution.rollout_ops.synchronous_parallel_sample",
        "_return_metrics",
        "sample_train_batch: the EnvRunners' metrics with the episodes",
        kind="parameter",
    ),
    # keyless_wandb_callback_class (rlsweep.run.tracking).
    Hook(_WANDB, "_start_logging_actor", "overridden: logging actors without WANDB_API_KEY"),
    Hook(_WANDB, "_remote_logger_class", "set before Ray's own code would", kind="instance"),
    Hook(_WANDB, "_logger_actor_cls", "the actor class made remote"),
    Hook(
        "ray.air.integrations.wandb",
        "_WandbLoggingActor",
        "subclassed: its run returns once wandb-core has written the W&B run to disk",
    ),
    Hook("ray.air.util.node", "_force_on_current_node", "logging actors on the driver's node"),
    # stop_propagating_env_vars (rlsweep.storage).
    Hook(
        "ray.tune.execution.class_cache",
        "ENV_VARS_TO_PROPAGATE",
        "AWS credential variables removed: not copied into trials' runtime_env",
    ),
    # bundled_jemalloc (rlsweep.run.session.runtime_env).
    Hook("ray", "core/libjemalloc.so", "LD_PRELOADed into trial processes", kind="file"),
    # quiet_local_ray (rlsweep.run.session.ray_session).
    Hook(
        "ray._private.parameter.RayParams",
        "include_log_monitor",
        "set False while ray.init builds it: no log monitor when no one reads workers' output",
        kind="instance",
    ),
    Hook(
        "ray.dashboard.modules.reporter.reporter_consts",
        "REPORTER_UPDATE_INTERVAL_MS",
        "its env var set while ray.init starts the agent: node stats only a dashboard shows",
    ),
    # ray_start_system_config (rlsweep.launch: a cluster head's `ray start`).
    Hook(
        "ray.scripts.scripts.start.callback",
        "system_config",
        "`ray start --system-config`: SYSTEM_CONFIG for every node of a cluster rlsweep starts",
        kind="parameter",
    ),
    # ray_session_dir (tests read Ray's logs for leaked credentials).
    Hook("ray._private.worker", "_global_node", "the session dir of this process's Ray"),
    # end_tune_loop, tune_loop_listens, restored_configs (rlsweep.experiment.interrupt,
    # rlsweep.run.tune_bridge).
    Hook(
        "ray.tune.tune",
        "_setup_signal_catching",
        "installs the SIGUSR1 handler end_tune_loop signals (tune_loop_listens: whether it is "
        "there yet): Tune ends its loop as on SIGINT",
    ),
    Hook(
        "ray.tune.impl.tuner_internal.TunerInternal",
        "get_run_config",
        "restored_configs: a resumed sweep's console and W&B callback",
    ),
    Hook("ray.tune.tuner.Tuner", "_local_tuner", "restored_configs: the restored run", "instance"),
    Hook(
        "ray.tune.impl.tuner_internal.TunerInternal",
        "_tune_config",
        "restored_configs: a resumed Optuna sweep's searcher, at the study where it runs now",
        "instance",
    ),
    # PopulationHooks (rlsweep.run.population): a member keeps its cell when it exploits.
    Hook(
        "ray.tune.schedulers.pbt.PopulationBasedTraining",
        "_get_new_config",
        "PopulationHooks: the config a member takes from the trial it clones, perturbed",
    ),
    # OptunaSearchHooks (rlsweep.run.optuna_search): its saved state without its study's storage.
    *(
        Hook(_OPTUNA_SEARCH, name, f"OptunaSearchHooks: {use}", "instance")
        for name, use in (
            ("_storage", "the study's storage, where the sweep runs now"),
            ("_ot_study", "the study, reloaded from that storage at a restore"),
            ("_ot_trials", "Tune trial id -> Optuna trial, saved as Optuna trial ids"),
            ("_study_name", "the study's name, to reload it"),
            ("_sampler", "the sampler (its RNG state saved), given the reloaded study"),
        )
    ),
    # kv_put / kv_get / kv_delete (rlsweep.experiment.interrupt's stop flag).
    Hook("ray.experimental.internal_kv", "_internal_kv_put", "kv_put: the stop flag is set"),
    Hook("ray.experimental.internal_kv", "_internal_kv_get", "kv_get: trials read the flag"),
    Hook("ray.experimental.internal_kv", "_internal_kv_del", "kv_delete: the flag is removed"),
    # TuneState (rlsweep.experiment.recovery: a resume from each trial's newest complete
    # checkpoint).
    Hook(
        "ray.tune.execution.tune_controller.TuneController",
        "CKPT_FILE_TMPL",
        "TuneState: the names of the experiment state files; Tuner.restore reads the newest "
        "(`_find_newest_experiment_checkpoint`: the greatest name)",
    ),
    Hook(
        "ray.tune.utils.serialization",
        "_loads_with_cloudpickle",
        "TuneState: the state file's trials (JSON with cloudpickled objects), as Tune loads them",
    ),
    Hook(
        "ray.train._internal.checkpoint_manager._CheckpointManager",
        "_latest_checkpoint_result",
        "TuneState: the checkpoint Tune restores a trial from (set to the newest on disk)",
        kind="instance",
    ),
    Hook(
        "ray.train._internal.checkpoint_manager._CheckpointManager",
        "_checkpoint_results",
        "TuneState: the checkpoints Tune keeps (and deletes beyond num_to_keep)",
        kind="instance",
    ),
    Hook(
        "ray.train._internal.checkpoint_manager._CheckpointManager",
        "_checkpoint_config",
        "TuneState: num_to_keep; Tune's restore moves only the newest num_to_keep it tracks "
        "(`Trial.set_storage`, by `best_checkpoint_results`)",
        kind="instance",
    ),
    Hook(
        "ray.train._internal.storage.StorageContext",
        "current_checkpoint_index",
        "TuneState: the index of a trial's latest checkpoint (the next one is named after it)",
        kind="instance",
    ),
    Hook(
        "ray.train._internal.session",
        "_TrainingResult",
        "TuneState: a (checkpoint, metrics) pair as the checkpoint manager holds it",
    ),
    # trial_result_dirs (rlsweep.experiment.recovery.RestartedTrials: a restarted trial's rows,
    # each once; also StorageContext's storage_filesystem, as TuneState, unlisted: RunConfig's
    # public keyword has the same name).
    Hook(
        "ray.train._internal.storage.StorageContext",
        "trial_fs_path",
        "trial_result_dirs: a trial's dir in storage, copied over the driver's at a restart",
    ),
    Hook(
        "ray.tune.logger.logger.LoggerCallback",
        "_restore_from_remote",
        "RestartedTrials: at each start of a trial with a checkpoint, Tune's JSON and CSV "
        "loggers copy its stored result.json and progress.csv over the driver's",
    ),
)


@dataclass(frozen=True)
class DriverLog(Hook):
    """A log record of Ray's on the sweep's driver, matched by text its message contains."""

    kind: str = "log"
    verbose: bool = False
    """Shown on the console with --verbose (noise to most, a clue to some); otherwise only in
    the sweep's driver log."""


DRIVER_LOGS: tuple[DriverLog, ...] = (
    # rlsweep says these itself, in its own words (`rlsweep resume <dir>`, not Tuner.restore).
    DriverLog("ray.tune.tune", "Stop signal received", "rlsweep says what stopped the sweep"),
    DriverLog("ray.tune.tune", "Experiment has been interrupted", "rlsweep prints the resume"),
    DriverLog("ray.tune.tune", "Trials did not complete", "rlsweep's table lists them"),
    # Said once per sweep when trial resources are sized; rlsweep only runs the new API stack.
    DriverLog("ray.rllib.algorithms.algorithm_config", "You are running", "the new API stack"),
    # Noise on every run: the cluster rlsweep starts here uses Ray's default, token auth on.
    DriverLog(
        "ray._private.authentication.authentication_token_setup",
        "Token authentication is enabled for this Ray cluster",
        "said by every local ray.init; the README says where the token is",
        verbose=True,
    ),
    # Tune's timing of its own loop (warn_if_slow): `on_step_begin ... took 0.657 s` when the
    # trials' processes hold every core of a small machine.
    DriverLog(
        "ray.tune.utils.util",
        "which may be a performance bottleneck",
        "Tune's loop waited for a busy machine",
        verbose=True,
    ),
    # Tune saves its experiment state at every trial checkpoint (keep_checkpoints: 1 asks it
    # to, so that the state names the newest); trials that checkpoint every few seconds (the
    # tests, PBT) make it say so, though the state is small.
    DriverLog(
        "ray.tune.execution.experiment_state",
        "Experiment state snapshotting has been triggered multiple",
        "frequent trial checkpoints: rlsweep asks for that state save",
        verbose=True,
    ),
    # A trial's worker died or its task raised: Tune logs Ray's traceback (~30 lines), once per
    # failure; rlsweep says it in a line (rlsweep.experiment.history), the trial's error.txt holds
    # it all.
    DriverLog(
        "ray.tune.execution.tune_controller",
        "Trial task failed for trial",
        "rlsweep.experiment.history says it in a line",
    ),
    # After Ctrl-C, Tune's results table tries trials that never started (no result files).
    DriverLog(
        "ray.tune.analysis.experiment_analysis",
        "Failed to fetch metrics for",
        "trials that never started have no results; rlsweep's table lists what ran",
        verbose=True,
    ),
)
"""Ray's log records rlsweep keeps off the driver's console (`rlsweep.run.session`): written to the
sweep's driver log instead."""
HOOKS = (*HOOKS, *DRIVER_LOGS)
RAYLET_MESSAGES: tuple[str, ...] = ("A worker died or was killed",)
"""What the raylet pushes to the driver's console that rlsweep keeps off it (a trial's dead
worker: rlsweep.experiment.history says it in a line): written to the sweep's driver log instead
(`raylet_messages_to`; the raylet's C++ words, not checked against Ray's Python)."""
HOOKS = (
    *HOOKS,
    Hook(
        "ray._private.worker",
        "print_to_stdstream",
        "raylet_messages_to: the driver's error thread (listen_error_messages) prints the "
        "raylet's messages through it",
    ),
)


@contextlib.contextmanager
def raylet_messages_to(write: Callable[[str], None], texts: Sequence[str]) -> Iterator[None]:
    """While in it, the raylet's messages to this driver that contain one of `texts` go to
    `write` instead of the console (the driver's error thread looks `print_to_stdstream` up in
    its module at each message)."""
    from ray._private import worker

    original = worker.print_to_stdstream

    def divert(data: dict, ignore_prefix: bool) -> None:
        lines = list(data.get("lines") or [])
        if data.get("pid") == "raylet":
            kept = [ln for ln in lines if not any(t in ln for t in texts)]
            for line in lines:
                if line not in kept:
                    write(line)
            if not kept:
                return
            data = {**data, "lines": kept}
        original(data, ignore_prefix)

    worker.print_to_stdstream = divert
    try:
        yield
    finally:
        worker.print_to_stdstream = original


def resolve(owner: str) -> Any:
    """The module a hook's `owner` names, or the object at its dotted path inside the longest
    module it starts with (imports it)."""
    parts = owner.split(".")
    for i in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        return functools.reduce(getattr, parts[i:], module)
    raise ImportError(f"no module in {owner!r}")


def _renamed(private: str, doc: str) -> property:
    """A read-write property over a private attribute of RLlib's."""

    def get(self: Any) -> Any:
        return getattr(self, private)

    def set(self: Any, value: Any) -> None:
        setattr(self, private, value)

    return property(get, set, doc=doc)


# --- RLlib Learner -------------------------------------------------------------------------------
class OptimizerHooks:
    """Mixin for any RLlib torch Learner subclass, listed before the RLlib class in its bases:
    the private optimizer state and helpers rlsweep reads, under public names."""

    @property
    def lr_schedules(self) -> dict[Any, Any]:
        """optimizer -> its lr Scheduler (`use_schedule` False: a fixed lr)."""
        return self._optimizer_lr_schedules

    def optimizer_lr(self, optimizer: Any) -> float:
        return self._get_optimizer_lr(optimizer)

    def set_optimizer_lr(self, optimizer: Any, lr: float) -> None:
        self._set_optimizer_lr(optimizer, lr=lr)


class LearnerHooks(OptimizerHooks):
    """Mixin for an RLlib Learner subclass, listed before the RLlib class in its bases: the
    private Learner methods rlsweep overrides, under public names (override those and call
    super()), and the private Learner state rlsweep reads. RLlib keeps calling its private
    names; they route to the public ones here."""

    def make_batch(self, training_data: Any) -> Any:
        """The MultiAgentBatch a training step learns from: RLlib runs its learner connector
        (GAE for PPO) over the episodes. RLlib's update and minibatch iterator call it."""
        return super()._make_batch_if_necessary(training_data)

    def minibatch_iterator(
        self, *, training_data: Any, num_epochs: int = 1, minibatch_size: int | None = None, **kw
    ) -> Any:
        """The minibatches of one update (RLlib: a cyclic iterator over the batch)."""
        return super()._create_iterator_if_necessary(
            training_data=training_data, num_epochs=num_epochs, minibatch_size=minibatch_size, **kw
        )

    def update_kl_coeff(self, *, module_id: Any, config: Any, kl_loss: float) -> None:
        """PPO's adaptive KL coefficient, after an update, from the KL `kl_loss` (RLlib passes
        its last minibatch's)."""
        super()._update_module_kl_coeff(module_id=module_id, config=config, kl_loss=kl_loss)

    def _make_batch_if_necessary(self, training_data: Any) -> Any:
        return self.make_batch(training_data)

    def _update_module_kl_coeff(self, **kwargs: Any) -> None:
        self.update_kl_coeff(**kwargs)

    def _create_iterator_if_necessary(self, **kwargs: Any) -> Any:
        return self.minibatch_iterator(**kwargs)

    @property
    def learner_connector(self) -> Any:
        """The learner connector pipeline (None without one)."""
        return self._learner_connector

    @property
    def torch_step_extras(self) -> bool:
        """Whether the config gives torch grad scalers or torch lr schedulers, which
        TorchLearner.apply_gradients steps the optimizers through."""
        config = self.config
        return bool(config._torch_grad_scaler_class or config._torch_lr_scheduler_classes)


# --- RLlib EnvRunner -----------------------------------------------------------------------------
class EnvRunnerHooks:
    """Mixin for a SingleAgentEnvRunner subclass, listed before it in the bases: RLlib's sampling
    loop (`_sample`, which `sample` calls inside its timers and `on_sample_end`) under a public
    name to override, and the private state and helpers such a loop needs, under public names.
    A loop written against these keeps RLlib's episodes, metrics and callbacks as they are."""

    def sample_steps(self, **kwargs: Any) -> list[Any]:
        """RLlib's loop: `num_timesteps` or `num_episodes`, `explore`, `random_actions`,
        `force_reset` -> the done episodes, then the ongoing chunks."""
        return super()._sample(**kwargs)

    def _sample(self, **kwargs: Any) -> list[Any]:
        return self.sample_steps(**kwargs)

    ongoing_episodes = _renamed("_ongoing_episodes", "One SingleAgentEpisode per env.")
    done_episodes_for_metrics = _renamed(
        "_done_episodes_for_metrics", "Episodes finished since get_metrics last ran."
    )
    ongoing_chunks_for_metrics = _renamed(
        "_ongoing_episodes_for_metrics", "episode id -> its chunks returned so far."
    )
    needs_reset = _renamed("_needs_initial_reset", "Whether the next sample resets the envs.")
    cached_to_module = _renamed(
        "_cached_to_module", "The env-to-module output for the envs' latest observations."
    )
    weights_seq_no = _renamed("_weights_seq_no", "The weights' version, stored with each step.")
    callback_objects = _renamed("_callbacks", "The RLlibCallback objects of the config.")
    env_to_module = _renamed("_env_to_module", "The env-to-module connector pipeline.")
    module_to_env = _renamed("_module_to_env", "The module-to-env connector pipeline.")

    def reset_envs_and_episodes(self, explore: bool) -> None:
        """New episodes, the envs reset (seeded on the first reset), `on_episode_created` and
        `on_episode_start` made, the env-to-module output cached."""
        self._reset_envs_and_episodes(explore)

    def episode_callback(self, which: str, env_index: int) -> None:
        """`which` (on_episode_start/step/end) for env `env_index`'s ongoing episode."""
        self._make_on_episode_callback(which, env_index, self._ongoing_episodes)

    def new_episode(self, env_index: int) -> None:
        """A fresh episode for env `env_index`, `on_episode_created` made."""
        self._new_episode(env_index, self._ongoing_episodes)

    def count_env_step(self) -> None:
        """One step of the vector env into Ray's counter of them (RLlib's `_try_env_step`
        counts each it makes)."""
        self._log_env_steps(metric=self._metrics_num_try_env_step, num_steps=1)

    def reseed(self, seed: int) -> None:
        """Seed this runner with `seed`, in place of RLlib's `config.seed + worker_index`: the
        envs at their first reset, and the process's RNGs (random, NumPy, torch)."""
        from ray.rllib.utils.debug import update_global_seed_if_necessary

        self._seed = seed
        update_global_seed_if_necessary(framework=self.config.framework_str, seed=seed)

    def count_sampled(self, num_steps: int, num_episodes_done: int) -> None:
        """A sample's env steps and finished episodes into the runner's metrics and Ray's
        step counter."""
        self._log_env_steps(metric=self._metrics_num_env_steps_sampled, num_steps=num_steps)
        self._increase_sampled_metrics(num_steps, num_episodes_done)


def target_update_steps(learner: Any) -> dict[str, int] | None:
    """The env step of each module's last target-network update, as the learner holds it (DQN's
    and APPO's, a mapping to update in place), which no Learner state saves; None for a learner
    without target networks."""
    for name in ("last_update_ts_by_mid", "_last_update_ts_by_mid"):  # DQN's, APPO's
        steps = getattr(learner, name, None)
        if steps is not None:
            return steps
    return None


def sample_train_batch(algo: Any) -> tuple[list[Any], list[Any]]:
    """One train batch of episodes from `algo`'s EnvRunners and their metrics, sampled as
    PPO.training_step samples it (Ray 2.60): `total_train_batch_size` env steps."""
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

    return synchronous_parallel_sample(
        worker_set=algo.env_runner_group,
        max_env_steps=algo.config.total_train_batch_size,
        sample_timeout_s=algo.config.sample_timeout_s,
        _uses_new_env_runners=True,
        _return_metrics=True,
    )


# --- Ray Tune ------------------------------------------------------------------------------------
@functools.cache
def keyless_wandb_callback_class() -> type:
    """Ray's WandbLoggerCallback, minus the API key in its logging actors' runtime_env, and
    with every trial's W&B run written out before its logging actor is killed."""
    import ray
    from ray.air.integrations.wandb import WandbLoggerCallback, _WandbLoggingActor
    from ray.air.util.node import _force_on_current_node

    class FlushedWandbLoggingActor(_WandbLoggingActor):
        """Ray's logging actor, whose `run` returns only once the trial's W&B run is on disk.
        `wandb.finish()` merely tells wandb-core (a child process) that the run is over; the
        core writes the run file out as it closes the stream, which `wandb.teardown()` waits
        for. Ray `ray.kill`s the actor the moment `run` returns, and that SIGKILLs wandb-core:
        without the teardown, a run could be left a bare 7-byte header."""

        def run(self) -> None:
            import wandb

            try:
                super().run()
            finally:
                wandb.teardown()

    class KeylessWandbLoggerCallback(WandbLoggerCallback):
        """Ray's callback copies WANDB_API_KEY into its logging actors' `runtime_env`, and Ray
        logs runtime envs in plain text. The actors run on the driver's node, whose processes
        already see the key (environment or ~/.netrc), so they are created without it: this
        is Ray's own actor options, less the runtime_env."""

        _logger_actor_cls = FlushedWandbLoggingActor

        def _start_logging_actor(self, trial, exclude_results, **wandb_init_kwargs):
            if not self._remote_logger_class:
                self._remote_logger_class = ray.remote(
                    num_cpus=0,
                    **_force_on_current_node(),
                    max_restarts=-1,
                    max_task_retries=-1,
                )(self._logger_actor_cls)
            super()._start_logging_actor(trial, exclude_results, **wandb_init_kwargs)

    return KeylessWandbLoggerCallback


def stop_propagating_env_vars(names: Iterable[str]) -> None:
    """Keep Ray Tune from copying these driver environment variables into every trial's
    runtime_env. Idempotent; a no-op on a Ray that does not copy them."""
    try:
        from ray.tune.execution import class_cache
    except ImportError:
        return
    propagated = getattr(class_cache, "ENV_VARS_TO_PROPAGATE", None)
    if isinstance(propagated, set):
        propagated.difference_update(names)


# --- Ray files and sessions ----------------------------------------------------------------------
def bundled_jemalloc() -> str | None:
    """The jemalloc shared library in the ray wheel, if this install has one."""
    import ray

    path = os.path.join(os.path.dirname(ray.__file__), "core", "libjemalloc.so")
    return path if os.path.exists(path) else None


QUIET_SYSTEM_CONFIG: dict[str, Any] = {
    # Bookkeeping for Ray's own dashboards and debugging, read by no one without a dashboard.
    "enable_metrics_collection": False,
    "event_stats": False,
    # Raylet housekeeping timers, 100-200 ms by default: the disk-full check, the plasma
    # pressure GC check and the idle-worker reaper. A second is soon enough for a sweep.
    "local_fs_monitor_interval_ms": 1000,
    "raylet_check_gc_period_milliseconds": 1000,
    "kill_idle_workers_interval_ms": 1000,
}
"""RayConfig overrides (ray.init's `_system_config`) for a Ray started by a sweep on this machine
with no dashboard. Each timer wakes a daemon that takes a core from a trial's torch threads for
a moment, so these, the log monitor off and the agent's node stats once a minute leave the
trials more of a small machine's cores (README, Speed). Scheduling, spilling, health checks and
the OOM monitor keep their defaults."""

SYSTEM_CONFIG: dict[str, Any] = {
    # When the driver connects, the raylet of its node starts a worker per CPU for tasks without
    # a runtime env. A sweep's trials run in its runtime env (rlsweep.run.session.runtime_env),
    # so Ray starts other workers for them and reaps the prestarted ones unused: measured, both
    # of a 2-CPU Ray's, each a Python start with Ray imported, beside the trials' own starts.
    "prestart_worker_first_driver": False,
}
"""RayConfig overrides for every Ray rlsweep starts: a sweep's on this machine (`quiet_local_ray`,
dashboard or not) and a cluster's head (`ray_start_system_config`: rlsweep.launch)."""


def ray_start_system_config() -> str:
    """`SYSTEM_CONFIG` as the head's `ray start` option (hidden in its --help; the GCS hands the
    config to every node that joins)."""
    return "--system-config=" + json.dumps(SYSTEM_CONFIG, separators=(",", ":"))


QUIET_REPORTER_INTERVAL_MS = 60_000
"""How often the dashboard agent collects node and process stats (Ray's default 5000); only the
dashboard shows them."""


@contextlib.contextmanager
def quiet_local_ray(*, log_monitor: bool, dashboard: bool) -> Iterator[dict[str, Any]]:
    """Around a `ray.init` that starts Ray on this machine: yields extra `ray.init` kwargs,
    `SYSTEM_CONFIG` always.

    Without a dashboard: `QUIET_SYSTEM_CONFIG` and the agent's node stats every
    `QUIET_REPORTER_INTERVAL_MS` (an env var the agent reads; set only while ray.init starts
    it). Without `log_monitor`, no log monitor process: it polls every worker's log files ten
    times a second to forward their lines to a driver that does not print them
    (`log_to_driver=False`); Tune still writes each trial's stdout/stderr to its trial dir.
    ray.init has no argument for it, so RayParams is built with `include_log_monitor=False`
    while ray.init runs. Everything is restored on exit."""
    from ray._private import parameter

    from rlsweep.environ import set_env

    kwargs: dict[str, Any] = {"_system_config": dict(SYSTEM_CONFIG)}
    env: dict[str, str] = {}
    if not dashboard:
        kwargs["_system_config"].update(QUIET_SYSTEM_CONFIG)
        env["REPORTER_UPDATE_INTERVAL_MS"] = str(QUIET_REPORTER_INTERVAL_MS)
    original_init = parameter.RayParams.__init__

    @functools.wraps(original_init)
    def init_without_log_monitor(self: Any, *args: Any, **kw: Any) -> None:
        kw.setdefault("include_log_monitor", False)
        original_init(self, *args, **kw)

    if not log_monitor:
        parameter.RayParams.__init__ = init_without_log_monitor
    try:
        with set_env(env):
            yield kwargs
    finally:
        parameter.RayParams.__init__ = original_init


def ray_session_dir() -> str:
    """The session dir (`/tmp/ray/session_*`) of the Ray this process is connected to."""
    import ray._private.worker

    return ray._private.worker._global_node.get_session_dir_path()


# --- GCS key-value store --------------------------------------------------------------------------
KV_NAMESPACE = "rlsweep"
"""rlsweep's keys in Ray's GCS key-value store (Tune and Serve keep theirs in their own)."""


def kv_put(key: str, value: bytes) -> None:
    """Set `key` in the GCS store of the Ray this process is connected to (every node sees it)."""
    from ray.experimental.internal_kv import _internal_kv_put

    _internal_kv_put(key, value, overwrite=True, namespace=KV_NAMESPACE)


def kv_get(key: str) -> bytes | None:
    from ray.experimental.internal_kv import _internal_kv_get

    return _internal_kv_get(key, namespace=KV_NAMESPACE)


def kv_delete(key: str) -> None:
    from ray.experimental.internal_kv import _internal_kv_del

    _internal_kv_del(key, namespace=KV_NAMESPACE)


# --- a trial's log files ------------------------------------------------------------------------
@dataclass(frozen=True)
class TrialLog(Hook):
    """A log record of Ray's or RLlib's in a trial's process, matched by text its owner module
    holds, that the trial's user cannot act on: left out of the trial's logs."""

    kind: str = "log"
    logger: str = ""
    """The logger that emits it, where not the owner's."""


TRIAL_LOGS: tuple[TrialLog, ...] = (
    # RLModule.__init__ builds an RLModuleConfig for every module, and that class warns that it
    # is deprecated (through RLlib's deprecation helper's logger): no code of rlsweep's uses it.
    TrialLog(
        "ray.rllib.core.rl_module.rl_module",
        "RLModule(config=[RLModuleConfig object])",
        "RLModule.__init__'s own RLModuleConfig",
        logger="ray._common.deprecation",
    ),
)
HOOKS = (
    *HOOKS,
    *TRIAL_LOGS,
    Hook(
        "ray.tune.trainable.trainable.Trainable",
        "_open_logfiles",
        "quiet_trial_logs: the handler it adds to Ray's logger writes to the stderr file "
        "what the process's stderr, teed into that file, writes there already",
    ),
    Hook("ray.tune.utils.util.Tee", "stream2", "quiet_trial_logs: the file", kind="instance"),
)


class TextFilter(logging.Filter):
    """On a logger: its records containing one of `texts` never reach its handlers; they go to
    `to` where given (the driver's log), else nowhere (a trial's)."""

    def __init__(self, texts: Sequence[str], to: logging.Handler | None = None) -> None:
        super().__init__()
        self.texts, self.to = tuple(texts), to

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not any(text in message for text in self.texts):
            return True
        if self.to is not None:
            self.to.handle(record)
        return False


_TRIAL_FILTERS = {
    name: TextFilter([t.attribute for t in TRIAL_LOGS if (t.logger or t.owner) == name])
    for name in {t.logger or t.owner for t in TRIAL_LOGS}
}


def quiet_trial_logs() -> None:
    """In a trial's process: the records of TRIAL_LOGS are dropped, and, once Tune has opened
    the trial's log files (a function trainable's process), each of Ray's log records goes
    once into its stderr file. Tune tees the process's stderr into that file, where Ray's own
    handler writes each record, and adds a handler on Ray's logger that writes the record to
    the same file again; that second handler goes. The file then reads as the worker's log and
    `--verbose`'s console do."""
    import sys

    from ray.tune.utils.util import Tee

    for name, without in _TRIAL_FILTERS.items():
        logging.getLogger(name).addFilter(without)  # once: the same filter object
    if not isinstance(sys.stderr, Tee):  # not under Tune's log files
        return
    ray_logger = logging.getLogger("ray")
    for handler in list(ray_logger.handlers):
        if getattr(handler, "stream", None) is sys.stderr.stream2:
            ray_logger.removeHandler(handler)


# --- a trial's process, handed on to the next trial ----------------------------------------------
TRIAL_END_WAIT_S = 120
"""How long Tune waits, when it hands a finished trial's process to the next trial
(`reuse_actors`), for the finished trial's function to return: its envs closed and RLlib's
algorithm stopped. Tune's default, 2 s, is shorter than that takes on a busy CPU, and a hand-over
that times out fails the next trial (Ray 2.60: TuneController._on_trial_reset)."""
HOOKS = (
    *HOOKS,
    Hook(
        "ray.tune.trainable.function_trainable.FunctionTrainable",
        "TUNE_FUNCTION_THREAD_TIMEOUT_S",
        "wait_for_trial_ends: read by reset_config, in the trial's process, at each hand-over",
        kind="env",
    ),
)


def wait_for_trial_ends() -> None:
    """In a trial's process: when Tune hands it to the next trial, it waits up to
    TRIAL_END_WAIT_S for this one's function to return (a user's own setting stands)."""
    os.environ.setdefault("TUNE_FUNCTION_THREAD_TIMEOUT_S", str(TRIAL_END_WAIT_S))


# --- Tune's loop ---------------------------------------------------------------------------------
def tune_loop_listens() -> bool:
    """Whether a Tune loop's SIGUSR1 handler is installed (`_setup_signal_catching`, at the
    start of `Tuner.fit`): before it, SIGUSR1's default action would kill the process."""
    import signal

    return signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, signal.SIG_IGN, None)


def end_tune_loop() -> None:
    """End a running `Tuner.fit` loop the way Ctrl-C ends it (Tune saves the experiment state,
    unfinished trials unfinished, then stops the trials): Tune's `_setup_signal_catching`
    handles SIGUSR1 so, whether or not TUNE_DISABLE_SIGINT_HANDLER keeps it off SIGINT. Main
    thread only (where Tune installed the handler)."""
    import signal

    os.kill(os.getpid(), signal.SIGUSR1)


# --- Tune's saved experiment state ----------------------------------------------------------------
@dataclass
class TuneTrial:
    """One trial as Tune's saved experiment state has it."""

    dirname: str
    """The trial dir's name in the experiment dir."""
    status: str
    """PENDING, RUNNING, PAUSED, TERMINATED or ERROR."""
    checkpoint: str | None
    """The dir name of the checkpoint Tune would restore the trial from (None: from scratch)."""
    metrics: dict[str, Any]
    """That checkpoint's result ({} without one)."""
    trial_id: str
    config: dict[str, Any] = field(default_factory=dict)
    """The config Tune saved for the trial (what a resume runs it with)."""
    checkpoint_owner: str | None = None
    """The trial dir `checkpoint` lies in where it is another trial's: PBT's exploit gave this
    trial that one to restore from (its own are of its weights before). None: its own."""
    checkpoint_path: str | None = None
    """Where Tune would load `checkpoint` from, as its state records it."""
    last_result: dict[str, Any] = field(default_factory=dict)
    """The trial's last report as the state records it (a resumed Tune shows it until the trial
    reports again: until it has restored, or, from scratch, until its first iteration)."""


TERMINATED, ERROR = "TERMINATED", "ERROR"
"""Tune's names (`Trial.TERMINATED`, `Trial.ERROR`, in its saved state and on its live trials)
for a trial that ran to its end, and for one that failed past its retries."""
ENDED = (TERMINATED, ERROR)
"""The statuses of a trial Tune runs no more in this run."""


def _trial_and_dir(tracked: Any) -> tuple[str, str]:
    """(trial dir, checkpoint dir) of a checkpoint Tune tracks (a `_TrainingResult`), from its
    path: `.../<trial dir>/checkpoint_000003`."""
    owner, name = tracked.checkpoint.path.rstrip("/").rsplit("/", 2)[-2:]
    return owner, name


class TuneState:
    """The newest experiment state file of an experiment dir (`experiment_state-*.json`), the
    one `Tuner.restore` reads: `trials` as it records them, `point_at` to make a trial restore
    from another of its checkpoints, `end` to record one ended, `save` to write it back in
    place. Its layout:
    {"trial_data": [[trial JSON, run metadata JSON], ...], ...}, each JSON with cloudpickled
    objects (the trial's StorageContext, the metadata's checkpoint manager)."""

    def __init__(self, fs: Any, root: str) -> None:
        import fnmatch
        import json

        import pyarrow.fs as pafs
        from ray.tune.execution.tune_controller import TuneController
        from ray.tune.utils.serialization import _loads_with_cloudpickle

        self.fs, self.path = fs, None
        # Newer state files that do not read (a driver killed while Tune wrote one in place,
        # `TuneController.save_to_dir`): `set_aside` moves them out of Tuner.restore's way.
        self.torn: list[str] = []
        self._state: dict[str, Any] = {}
        self._trials: list[tuple[dict[str, Any], dict[str, Any]]] = []
        pattern = TuneController.CKPT_FILE_TMPL.format("*")
        infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
        for name in sorted((i.base_name for i in infos), reverse=True):  # the newest first
            if not fnmatch.fnmatch(name, pattern):
                continue
            path = f"{root}/{name}"
            try:
                with fs.open_input_stream(path) as f:
                    state = json.loads(f.read().decode())
                trials = [
                    (_loads_with_cloudpickle(trial), _loads_with_cloudpickle(meta))
                    for trial, meta in state["trial_data"]
                ]
            except (ValueError, KeyError, TypeError):
                self.torn.append(path)
                continue
            self.path, self._state, self._trials = path, state, trials
            return

    def set_aside(self) -> list[str]:
        """Rename the torn newer state files (`torn`) to `<name>.torn`, where Tuner.restore,
        which reads the newest, does not look, once an older one reads: it then restores from
        the state this one read. What was renamed."""
        if self.path is None:
            return []  # nothing readable to restore from: the torn file is the evidence
        moved = []
        for path in self.torn:
            self.fs.move(path, f"{path}.torn")
            moved.append(path)
        self.torn = []
        return moved

    @property
    def trials(self) -> list[TuneTrial]:
        out = []
        for trial, meta in self._trials:
            latest = meta["checkpoint_manager"]._latest_checkpoint_result
            where = list(_trial_and_dir(latest)) if latest else []
            name = where[-1] if where else None
            owner = where[0] if len(where) == 2 else None
            metrics = dict(latest.metrics) if latest else {}
            out.append(
                TuneTrial(
                    trial["relative_logdir"],
                    trial["status"],
                    name,
                    metrics,
                    trial["trial_id"],
                    dict(trial.get("config") or {}),
                    owner if owner not in (None, trial["relative_logdir"]) else None,
                    latest.checkpoint.path if latest else None,
                    dict(meta.get("last_result") or {}),
                )
            )
        return out

    def point_at(
        self,
        dirname: str,
        checkpoint: str,
        index: int,
        metrics: dict[str, Any],
        older: list[tuple[str, dict[str, Any]]] = (),
    ) -> list[str]:
        """Make the trial in `dirname` restore from its checkpoint dir `checkpoint` (Tune's
        index `index`, with `metrics` as its result; Tune reads training_iteration and
        time_total_s from them), its next checkpoint index after it. `older`: (dir, result) of
        the checkpoints on disk between the newest Tune's state tracks and `checkpoint`, oldest
        first, tracked as Tune would have (a driver that fell behind its trial never registered
        them). Tune tracks no more than num_to_keep after it: its restore moves only the
        newest num_to_keep it tracks with a moved or copied experiment dir
        (`Trial.set_storage`), and would delete an older one at its old path, in the dir it was
        copied from. The dirs of those beyond num_to_keep, oldest first: the caller deletes
        them, as Tune would have at the trial's next checkpoint."""
        from ray.train import Checkpoint
        from ray.train._internal.session import _TrainingResult

        for trial, meta in self._trials:
            if trial["relative_logdir"] != dirname:
                continue
            storage = trial["storage"]
            manager = meta["checkpoint_manager"]
            # Appended in order: without a score attribute, Tune keeps the last num_to_keep.
            for name, result in [*older, (checkpoint, metrics)]:
                # The path as recorded: Tune's restore moves it with the experiment dir.
                path = f"{storage.trial_fs_path}/{name}"
                tracked = _TrainingResult(
                    checkpoint=Checkpoint(path=path, filesystem=storage.storage_filesystem),
                    metrics=result,
                )
                manager._checkpoint_results.append(tracked)
            manager._latest_checkpoint_result = tracked
            storage.current_checkpoint_index = index
            meta["last_result"] = metrics
            keep = manager._checkpoint_config.num_to_keep
            if keep is None or len(manager._checkpoint_results) <= keep:
                return []
            beyond = manager._checkpoint_results[:-keep]
            manager._checkpoint_results = manager._checkpoint_results[-keep:]
            return [_trial_and_dir(r)[1] for r in beyond]
        raise KeyError(dirname)

    def reroot(self, dirname: str, root: str) -> None:
        """Make the trial in `dirname`, which restores from another trial's checkpoint (PBT's
        exploit set it as its latest: `TuneTrial.checkpoint_owner`), name that one under
        `root`, where the experiment dir is now: Tune's restore moves only the paths in the
        trial's own dir with a moved experiment dir (`Trial.set_storage`), and would load the
        other's from the old path."""
        from ray.train import Checkpoint

        for trial, meta in self._trials:
            if trial["relative_logdir"] != dirname:
                continue
            latest = meta["checkpoint_manager"]._latest_checkpoint_result
            owner, name = _trial_and_dir(latest)
            latest.checkpoint = Checkpoint(
                path=f"{root}/{owner}/{name}", filesystem=trial["storage"].storage_filesystem
            )
            return
        raise KeyError(dirname)

    def report_from(self, dirname: str, metrics: dict[str, Any]) -> None:
        """Record `metrics` as the last report of the trial in `dirname`: the result of the
        checkpoint it restarts from ({} from scratch), as Tune's restore of it would
        (`Trial.on_restore`), but from the start of the resume, not from its restore."""
        for trial, meta in self._trials:
            if trial["relative_logdir"] == dirname:
                meta["last_result"] = dict(metrics)
                return
        raise KeyError(dirname)

    def end(self, dirname: str) -> None:
        """Record the trial in `dirname` as ended (TERMINATED): a restore runs it no more."""
        for trial, _ in self._trials:
            if trial["relative_logdir"] == dirname:
                trial["status"] = "TERMINATED"
                return
        raise KeyError(dirname)

    def track_only(self, dirname: str, carried: dict[str, set[str]]) -> bool:
        """Make the trial in `dirname` track, of its checkpoints, only those `carried` names
        (trial dir -> checkpoint dirs): where the state goes, the others are not. Tune would
        delete a tracked one beyond num_to_keep at the trial's next checkpoint, and a missing
        one fails that checkpoint's registration (`_delete_fs_path` raises, Ray 2.60).
        Whether any was untracked."""
        for trial, meta in self._trials:
            if trial["relative_logdir"] != dirname:
                continue
            manager = meta["checkpoint_manager"]

            def held(result: Any) -> bool:
                owner, name = _trial_and_dir(result)
                return name in carried.get(owner, set())

            kept = [r for r in manager._checkpoint_results if held(r)]
            if len(kept) == len(manager._checkpoint_results):
                return False
            manager._checkpoint_results = kept
            return True
        raise KeyError(dirname)

    def forget_checkpoints(self, dirname: str) -> None:
        """Make the trial in `dirname` one that never checkpointed: a restore starts it anew
        (its checkpoints are not where the state goes: a carry left them out)."""
        for trial, meta in self._trials:
            if trial["relative_logdir"] != dirname:
                continue
            manager = meta["checkpoint_manager"]
            manager._checkpoint_results = []
            manager._latest_checkpoint_result = None
            trial["storage"].current_checkpoint_index = 0
            meta["last_result"] = {}
            return
        raise KeyError(dirname)

    def dumps(self) -> bytes:
        """The state as Tune writes its file."""
        import json

        from ray.tune.utils.serialization import TuneFunctionEncoder

        self._state["trial_data"] = [
            [
                json.dumps(t, indent=2, cls=TuneFunctionEncoder),
                json.dumps(m, cls=TuneFunctionEncoder),
            ]
            for t, m in self._trials
        ]
        return json.dumps(self._state, cls=TuneFunctionEncoder).encode()

    def save(self) -> None:
        """Write the state back to its file (a new file beside it, then renamed over it)."""
        tmp = f"{self.path}.rlsweep-tmp"
        with self.fs.open_output_stream(tmp) as f:
            f.write(self.dumps())
        self.fs.move(tmp, self.path)


def trial_result_dirs(trial: Any) -> list[tuple[Any, str]]:
    """(pyarrow filesystem, dir) of where a running Tune trial's result files are: the
    driver's trial dir, which Tune's loggers write, and its dir in storage where that differs,
    which Tune's JSON logger copies back over the driver's when it restarts the trial
    (`LoggerCallback._restore_from_remote`)."""
    import pyarrow.fs as pafs

    local = (pafs.LocalFileSystem(), str(trial.local_path))
    storage = trial.storage
    stored = (storage.storage_filesystem, storage.trial_fs_path)
    same = isinstance(stored[0], pafs.LocalFileSystem) and (
        os.path.realpath(stored[1]) == os.path.realpath(local[1])
    )
    return [local] if same else [local, stored]


def restored_configs(tuner: Any) -> tuple[Any, Any]:
    """The TuneConfig and RunConfig a restored Tuner runs with: `Tuner.restore` unpickles them
    as the sweep first saved them (tuner.pkl: verbosity, callbacks, searcher, each holding what
    it held then, paths included) and has no argument to give others; change them here."""
    local = tuner._local_tuner
    return local._tune_config, local.get_run_config()


# --- Tune's PopulationBasedTraining ------------------------------------------------------------
class PopulationHooks:
    """Mixin for a PopulationBasedTraining subclass, listed before it in the bases, with
    `_member_keys`: what makes a member the member it is (its game and seed). PBT's exploit
    gives the member the whole config of the trial it clones, perturbed (Ray 2.60:
    `_get_new_config` explores `trial_to_clone.config`), so a member with seed 1 that cloned
    one with seed 0 became a second seed 0 in its params, trial.json and the report, and no
    member was seed 1 any more. It takes the clone's weights and hyperparameters and keeps its
    own game and seed, as its trial dir's name does."""

    _member_keys: tuple[str, ...] = ()

    def _get_new_config(self, trial: Any, trial_to_clone: Any) -> tuple[dict, dict]:
        config, operations = super()._get_new_config(trial, trial_to_clone)  # type: ignore[misc]
        own = {k: trial.config[k] for k in self._member_keys if k in trial.config}
        return {**config, **own}, operations


# --- Tune's OptunaSearch -----------------------------------------------------------------------
class OptunaSearchHooks:
    """Mixin for an OptunaSearch subclass, listed before it in the bases: what it pickles holds
    no storage of its study. OptunaSearch pickles its whole state, the study's RDBStorage too
    (Ray 2.60: `save` for the searcher's state, and tuner.pkl), and an RDBStorage connects to
    its URL as it is unpickled: a sweep's SQLite study in its experiment dir, copied or moved,
    would be read and written at the old path (or, on another machine, fail to open). Saved
    without it, a restored searcher keeps the storage it was built with (where the sweep runs
    now) and reloads its study from there; its Optuna trials are saved as their ids."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_storage"] = state["_ot_study"] = None
        state["_ot_trials"] = {}  # pickled before a trial ran: a restore brings the saved ones
        return state

    def save(self, checkpoint_path: str) -> None:
        import pickle

        state = self.__dict__.copy()
        del state["_storage"], state["_ot_study"]
        state["_ot_trials"] = {k: t._trial_id for k, t in self._ot_trials.items()}
        with open(checkpoint_path, "wb") as f:
            pickle.dump(state, f)

    def restore(self, checkpoint_path: str) -> None:
        import pickle

        import optuna

        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        if "_ot_study" in state:  # saved by a plain OptunaSearch: its own study, as it was
            self.__dict__.update(state)
            return
        storage = self._storage
        self.__dict__.update(state)
        self._storage = storage
        self._ot_study = optuna.load_study(
            study_name=self._study_name, storage=storage, sampler=self._sampler
        )
        self._ot_trials = {
            k: optuna.trial.Trial(self._ot_study, trial_id)
            for k, trial_id in state["_ot_trials"].items()
        }
