"""The only module that touches RLlib's config builders and its result keys.

`build_algorithm(cfg)` turns a flat `TrialConfig` into an RLlib `Algorithm` (PPO, IMPALA, APPO or
DQN, chosen by `cfg.algorithm`) on the new API stack; `read_result(result)` maps RLlib's
(renamed-between-releases, per-algorithm) result keys to ours.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import pickle
import random
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.algorithms.appo import APPOConfig
from ray.rllib.algorithms.dqn import DQNConfig
from ray.rllib.algorithms.impala import IMPALAConfig
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner import GeneralAdvantageEstimation
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import VF_LOSS_KEY
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.framework import get_device
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets
from ray.tune.registry import register_env

from rlsweep import metrics as M
from rlsweep._ray_compat import LearnerHooks
from rlsweep.config import TrialConfig
from rlsweep.connectors import batch_observations, sample_actions, to_numpy
from rlsweep.envs import EnvConfig, ProcgenVectorEnv
from rlsweep.placement import memory_fraction, placement
from rlsweep.rl_module import ImpalaAPPOModule, ImpalaDQNModule, ImpalaPPOModule

# Our custom metric, logged by the episode callback into RLlib's env-runner metrics.
RAW_RETURN = "rlsweep_raw_episode_return"
RAW_LENGTH = "rlsweep_raw_episode_length"
SMOOTHING_EPISODES = 100
ENV_ID = "rlsweep-procgen"
LR_IN_UPDATE = "rlsweep_lr_in_update"


def make_procgen_env(env_config: dict[str, Any]) -> ProcgenVectorEnv:
    """RLlib's vector entry point: `env_config` carries EnvConfig fields and `num_envs`."""
    cfg = dict(env_config)
    num_envs = cfg.pop("num_envs")
    threads = cfg.pop("envpool_threads")
    return ProcgenVectorEnv(EnvConfig(**cfg), num_envs=num_envs, split="train", num_threads=threads)


def _env_id() -> str:
    # Tune's registry lives in the Ray session: register again for every config built, so a
    # new ray.init() in the same process (tests, notebooks) still finds the env.
    register_env(ENV_ID, make_procgen_env)
    return ENV_ID


def _log_raw_episode(*, env, env_index: int, metrics_logger, **_: Any) -> None:
    # `env` is our ProcgenVectorEnv: it keeps the raw return even when training on shaped rewards.
    metrics_logger.log_value(
        RAW_RETURN, float(env.last_return[env_index]), reduce="mean", window=SMOOTHING_EPISODES
    )
    metrics_logger.log_value(
        RAW_LENGTH, float(env.last_length[env_index]), reduce="mean", window=SMOOTHING_EPISODES
    )


# learner_config_dict keys: how RlsweepPPOLearner updates (see TrialConfig for each option).
PPO2_VF_CLIP = "rlsweep_ppo2_vf_clip"
"""The clip of PPO2-style value clipping (absent: RLlib's clamp of the squared error)."""
MINIBATCHING = "rlsweep_minibatching"
ADVANTAGE_NORM = "rlsweep_advantage_norm"
ADAM_EPS = "rlsweep_adam_eps"
SHUFFLE_SEED = "rlsweep_shuffle_seed"


class ReferenceGAE(ConnectorV2):
    """GAE(lambda) advantages and value targets, left unstandardized (RLlib's own
    GeneralAdvantageEstimation standardizes over the whole batch, bootstrap rows included;
    RlsweepPPOLearner standardizes as `advantage_norm` says). Same convention as RLlib's: each
    episode chunk carries one artificial bootstrap timestep (AddOneTsToEpisodesAndTruncate).

    The values come in chunks of at most `chunk_rows` rows (the minibatch), so that no forward
    pass here sees more rows than a training step: the bootstrap rows alone (one per episode
    chunk) can outnumber a minibatch, and a module that cannot reuse the rollout's values runs
    the network over every row."""

    def __init__(
        self,
        input_observation_space=None,
        input_action_space=None,
        *,
        gamma,
        lambda_,
        chunk_rows: int | None = None,
    ):
        super().__init__(input_observation_space, input_action_space)
        self.gamma, self.lambda_, self.chunk_rows = gamma, lambda_, chunk_rows

    def __call__(self, *, rl_module, episodes, batch, **kwargs):
        for module_id, module_batch in batch.items():
            module = rl_module[module_id]
            if not isinstance(module, ValueFunctionAPI):
                continue
            values = torch.cat(
                [module.compute_values(rows) for rows in row_chunks(module_batch, self.chunk_rows)]
            )
            v = values.detach().cpu().numpy()
            targets = compute_value_targets(
                values=v,
                rewards=to_numpy(module_batch[Columns.REWARDS]),
                terminateds=to_numpy(module_batch[Columns.TERMINATEDS]),
                truncateds=to_numpy(module_batch[Columns.TRUNCATEDS]),
                gamma=self.gamma,
                lambda_=self.lambda_,
            )
            module_batch[Postprocessing.ADVANTAGES] = torch.as_tensor(
                targets - v, device=values.device
            )
            module_batch[Postprocessing.VALUE_TARGETS] = torch.as_tensor(
                targets, device=values.device
            )
        return batch


def row_chunks(batch: dict[str, Any], rows: int | None) -> Iterator[dict[str, Any]]:
    """`batch` as consecutive slices of at most `rows` rows each (views, no copies; a column
    that is not one row per observation passes whole); the whole batch when `rows` is None."""
    n = len(batch[Columns.OBS])
    step = rows or n
    for start in range(0, n, step):
        yield {
            k: v[start : start + step] if getattr(v, "shape", ())[:1] == (n,) else v
            for k, v in batch.items()
        }


def standardize(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """(x - mean) / (std + 1e-8) with the unbiased std (CleanRL's advantage normalization; PPO2
    takes numpy's biased std, a 2.4e-4 relative difference at 2048 rows), the statistics over
    the rows in `mask` (the real transitions)."""
    real = x if mask is None else x[mask]
    return (x - real.mean()) / (real.std() + 1e-8)


def shuffled_minibatches(
    batch: MultiAgentBatch,
    *,
    num_epochs: int,
    minibatch_size: int,
    minibatches_per_epoch: int,
    generator: torch.Generator,
) -> Iterator[MultiAgentBatch]:
    """PPO2's / CleanRL's minibatch loop: every epoch a fresh permutation of the batch's real
    transitions (bootstrap rows dropped), cut into `minibatches_per_epoch` minibatches of
    exactly `minibatch_size`. The permutation is `torch.randperm(n, generator=generator)`,
    one per epoch: a reference loop given the same generator draws the same minibatches."""
    real: dict[str, dict[str, Any]] = {}
    sizes: dict[str, int] = {}
    for module_id, b in batch.policy_batches.items():
        rows = b[Columns.LOSS_MASK].nonzero().squeeze(-1) if Columns.LOSS_MASK in b else None
        real[module_id] = {k: v if rows is None else v[rows] for k, v in b.items()}
        sizes[module_id] = n = len(b) if rows is None else len(rows)
        if n < minibatches_per_epoch * minibatch_size:
            raise ValueError(
                f"{n} transitions cannot fill {minibatches_per_epoch} minibatches of "
                f"{minibatch_size}"
            )
    for _ in range(num_epochs):
        perms = {m: torch.randperm(n, generator=generator) for m, n in sizes.items()}
        for j in range(minibatches_per_epoch):
            policy_batches = {}
            for module_id, data in real.items():
                idx = perms[module_id][j * minibatch_size : (j + 1) * minibatch_size]
                policy_batches[module_id] = SampleBatch(
                    {k: v[idx.to(v.device)] for k, v in data.items()}
                )
            yield MultiAgentBatch(policy_batches, env_steps=minibatch_size)


class RlsweepPPOLearner(LearnerHooks, PPOTorchLearner):
    """RLlib's PPO torch Learner, made to do the reference update (baselines' PPO2 as in
    train-procgen, CleanRL's ppo_procgen) where the options say so, plus speed fixes that do
    not change learning. `tests/test_ppo_reference.py` holds it equal to CleanRL's loop.

    The update, option by option (learner_config_dict, from TrialConfig):
    - GAE advantages stay raw (`ReferenceGAE` replaces RLlib's batch-wide standardization);
      `advantage_norm` standardizes them per minibatch (PPO2, CleanRL), per batch over real
      rows (2020's RLlib), or as RLlib's new stack does (whole batch, bootstrap rows in).
    - `minibatching: shuffle`: a fresh permutation of the real transitions every epoch, exactly
      num_epochs x train_batch / minibatch minibatches of exactly minibatch_size real rows
      (`shuffled_minibatches`). RLlib's own iterator shuffles only when it wraps around, so its
      first epoch walks whole trajectories in order, and its bootstrap rows take minibatch
      slots. `rllib` keeps RLlib's iterator, with exactly that many minibatches.
    - `vf_clip_mode: ppo2`: PPO2's value clipping (see `ppo2_value_excess`).
    - Adam with `adam_eps` (PPO2 and CleanRL use 1e-5; torch's default is 1e-8).

    Speed and memory, same numbers:
    - GAE runs under `no_grad` and reuses the values the rollout computed (see
      ImpalaPPOModule.compute_values) instead of a second trunk pass over the whole batch; what
      still needs the network (the bootstrap rows) runs in minibatch-sized chunks.

    And a fix: a restored fixed learning rate is the config's, not the checkpoint's: restoring
    loads the optimizer state, lr included, so a PBT-perturbed lr would silently revert for an
    iteration (ray#62173). Entropy and clip come from the config already.

    RLlib's private Learner methods and state are reached through `LearnerHooks`
    (rlsweep._ray_compat, which names the Ray version each was checked against). The minibatch
    permutation generator is saved and restored with a trial's checkpoints (`rng_state`).
    """

    def build(self) -> None:
        super().build()
        opts = self.config.learner_config_dict
        self._shuffle_rng = torch.Generator().manual_seed(int(opts.get(SHUFFLE_SEED, 0)))
        connector = self.learner_connector
        if connector is not None and self.config.add_default_connectors_to_learner_pipeline:
            connector.remove(GeneralAdvantageEstimation)
            connector.append(
                ReferenceGAE(
                    gamma=self.config.gamma,
                    lambda_=self.config.lambda_,
                    chunk_rows=self.config.minibatch_size,
                )
            )

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        # RLlib's TorchLearner default, with Adam's epsilon from the config.
        params = self.get_parameters(self.module[module_id])
        eps = float(config.learner_config_dict.get(ADAM_EPS, 1e-8))
        self.register_optimizer(
            module_id=module_id,
            optimizer=torch.optim.Adam(params, eps=eps),
            params=params,
            lr_or_lr_schedule=config.lr,
        )

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        if config.learner_config_dict.get(ADVANTAGE_NORM) == "minibatch":
            adv = standardize(batch[Postprocessing.ADVANTAGES], batch.get(Columns.LOSS_MASK))
            batch = {**batch, Postprocessing.ADVANTAGES: adv}
        total = super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )
        clip = config.learner_config_dict.get(PPO2_VF_CLIP)
        if clip is None:
            return total
        # RLlib's term is the plain squared error here (its clamp is off, see ppo_config):
        # adding the excess makes it max(unclipped, clipped), PPO2's value loss. The values are
        # recomputed from the trunk's embeddings: one linear layer, no second trunk pass.
        if Columns.VF_PREDS not in batch:
            raise RuntimeError("vf_clip_mode ppo2 needs the rollout's value estimates (vf_preds)")
        values = (
            self.module[module_id]
            .unwrapped()
            .compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
        )
        targets = batch[Postprocessing.VALUE_TARGETS]
        unclipped = (values - targets) ** 2
        excess = ppo2_value_excess(values, batch[Columns.VF_PREDS], targets, clip)
        if Columns.LOSS_MASK in batch:
            mask = batch[Columns.LOSS_MASK]
            excess, unclipped = excess[mask], unclipped[mask]
        self.metrics.log_value(
            (module_id, VF_LOSS_KEY), (unclipped + excess).mean().detach(), window=1
        )
        return total + config.vf_loss_coeff * excess.mean()

    def set_state(self, state) -> None:
        super().set_state(state)
        for optimizer, schedule in self.lr_schedules.items():
            if not schedule.use_schedule:
                self.set_optimizer_lr(optimizer, float(schedule.get_current_value()))

    def make_batch(self, training_data):
        modules = [m for m in self.module.values() if isinstance(m, ImpalaPPOModule)]
        for m in modules:
            m.use_rollout_values = True
        try:
            with torch.no_grad():
                batch = super().make_batch(training_data)
        finally:
            for m in modules:
                m.use_rollout_values = False
        norm = self.config.learner_config_dict.get(ADVANTAGE_NORM)
        for b in batch.policy_batches.values():
            if Postprocessing.ADVANTAGES not in b:
                continue
            adv = b[Postprocessing.ADVANTAGES]
            if norm == "rllib":  # RLlib's GeneralAdvantageEstimation, verbatim in effect
                b[Postprocessing.ADVANTAGES] = (adv - adv.mean()) / adv.std(
                    unbiased=False
                ).clamp_min(1e-4)
            elif norm == "batch":
                b[Postprocessing.ADVANTAGES] = standardize(adv, b.get(Columns.LOSS_MASK))
        return batch

    def minibatch_iterator(
        self, *, training_data, num_epochs: int = 1, minibatch_size: int | None = None, **kwargs
    ):
        if (
            self.config.learner_config_dict.get(MINIBATCHING) != "shuffle"
            or training_data.data_iterators
            or not minibatch_size
        ):
            return super().minibatch_iterator(
                training_data=training_data,
                num_epochs=num_epochs,
                minibatch_size=minibatch_size,
                **kwargs,
            )
        return shuffled_minibatches(
            self.make_batch(training_data),
            num_epochs=num_epochs,
            minibatch_size=minibatch_size,
            minibatches_per_epoch=self.config.train_batch_size_per_learner // minibatch_size,
            generator=self._shuffle_rng,
        )

    def update(self, *args, num_total_minibatches: int = 0, **kwargs):
        # The lr this update trains with (RLlib logs the lr after the update's schedule step).
        for module_id in self.module.keys():  # noqa: SIM118 (a MultiRLModule has no __iter__)
            for _, optimizer in self.get_optimizers_for_module(module_id)[:1]:
                lr = self.optimizer_lr(optimizer)
                self.metrics.log_value((module_id, LR_IN_UPDATE), float(lr), window=1)
        minibatch = kwargs.get("minibatch_size")
        if not num_total_minibatches and minibatch:
            # RLlib's iterator (minibatching: rllib) otherwise runs an extra, mostly repeated
            # minibatch per epoch for the artificial bootstrap timesteps.
            per_epoch = max(1, self.config.train_batch_size_per_learner // minibatch)
            num_total_minibatches = kwargs.get("num_epochs", 1) * per_epoch
        return super().update(*args, num_total_minibatches=num_total_minibatches, **kwargs)


def ppo2_value_excess(
    values: torch.Tensor, old_values: torch.Tensor, targets: torch.Tensor, clip: float
) -> torch.Tensor:
    """max(unclipped, clipped) - unclipped, per sample, of PPO2's value loss, where unclipped =
    (v - target)^2 and clipped = (v_old + clamp(v - v_old, -clip, clip) - target)^2: what PPO2
    adds to a plain squared error. Positive only where the value moved more than `clip` towards
    (or past) its target: there the clipped error counts, and it has no gradient."""
    clipped_values = old_values + (values - old_values).clamp(-clip, clip)
    return torch.relu((clipped_values - targets) ** 2 - (values - targets) ** 2)


def ppo_config(cfg: TrialConfig) -> PPOConfig:
    """The RLlib PPOConfig for one trial."""
    return (
        _common(PPOConfig(), cfg)
        .learners(
            learner_class=RlsweepPPOLearner,
            learner_config_dict={
                MINIBATCHING: cfg.minibatching,
                ADVANTAGE_NORM: cfg.advantage_norm,
                ADAM_EPS: cfg.adam_eps,
                SHUFFLE_SEED: cfg.seed,
                **({PPO2_VF_CLIP: cfg.vf_clip_param} if cfg.vf_clip_mode == "ppo2" else {}),
            },
        )
        .training(
            gamma=cfg.gamma,
            lambda_=cfg.lambda_,
            lr=_lr(cfg),
            clip_param=cfg.clip_param,
            # ppo2: RLlib's clamp off, our learner clips the value instead.
            vf_clip_param=cfg.vf_clip_param if cfg.vf_clip_mode == "loss" else math.inf,
            vf_loss_coeff=cfg.vf_loss_coeff,
            entropy_coeff=cfg.entropy_coeff,
            **_kl_loss(cfg),
            **_sgd(cfg),
        )
        .rl_module(rl_module_spec=_module_spec(cfg, ImpalaPPOModule))
    )


def _lr(cfg: TrialConfig) -> Any:
    return cfg.lr if cfg.lr_schedule is None else [list(p) for p in cfg.lr_schedule]


def _module_spec(cfg: TrialConfig, module_class: type, **extra: Any) -> RLModuleSpec:
    model_config = {
        **cfg.model_config().to_dict(),
        "augment": dataclasses.asdict(cfg.augment_config()),
        "augment_seed": cfg.seed,
        **extra,
    }
    return RLModuleSpec(module_class=module_class, model_config=model_config)


class CentralInferenceEnvRunner(SingleAgentEnvRunner):
    """A GPU trial's sampler, SEED-style inside the node: RLlib's own EnvRunner, local to the
    trial's process (num_env_runners=0), stepping all of the trial's envs in one envpool and
    running one batched forward per step on the GPU the local learner trains on.

    RLlib cannot place it there by itself: a local EnvRunner asks `get_device` for 0 GPUs
    whatever the config (SingleAgentEnvRunner.__init__, Ray 2.60), and a remote GPU EnvRunner
    would ship every rollout's frames through the object store to the learner's process. So
    `make_module` (public EnvRunner API) moves the module to RLlib's own choice of the learner's
    device, and the model moves each step's uint8 frames there (pinned: see
    `rlsweep.models.ImpalaCNN.forward`). Each frame crosses to the GPU twice: once in its step's
    forward, and once in the learner's batch (RLlib's episodes hold numpy frames; one copy per
    iteration, 200 MB for 16,384 64x64 RGB frames)."""

    def make_module(self) -> None:
        super().make_module()
        if self.module is not None:
            self.module.to(get_device(self.config, self.config.num_gpus_per_learner))


def configure_torch(cfg: TrialConfig, device: torch.device | None = None) -> None:
    """Process-wide torch settings of a trial: TF32 on or off for float32 matmuls and
    convolutions on the GPU (torch's own defaults differ between the two), and on a fraction of
    a GPU (`device`, the learner's), a cap on what torch's allocator may reserve there
    (`rlsweep.placement.memory_fraction`): the trial then runs out of memory alone, at its
    share, instead of taking memory the other trials on that GPU were promised."""
    # RLlib's seeding (`debugging(seed=...)`) turns on torch.use_deterministic_algorithms on a
    # CPU-only torch, which also fills every new tensor with NaN (a debugging aid for reads of
    # uninitialized memory): ~12% of a CPU trial's time in aten::fill_. Results are unchanged.
    torch.utils.deterministic.fill_uninitialized_memory = False
    if placement(cfg).device != "cuda":
        return
    precision = "tf32" if cfg.tf32 else "ieee"
    torch.backends.cuda.matmul.fp32_precision = precision
    torch.backends.cudnn.conv.fp32_precision = precision
    if device is None:
        return
    fraction = memory_fraction(cfg, gpu_memory_gib_of(device))
    if fraction is not None:
        torch.cuda.set_per_process_memory_fraction(fraction, device)


def gpu_memory_gib_of(device: torch.device) -> float:
    """Total memory of the GPU `device` (GiB)."""
    return torch.cuda.get_device_properties(device).total_memory / 2**30


def learner_device(algo_config: AlgorithmConfig) -> torch.device | None:
    """The GPU a trial's local learner (and central inference) runs on, RLlib's choice; None
    for a CPU learner."""
    if not algo_config.num_gpus_per_learner:
        return None
    return get_device(algo_config, algo_config.num_gpus_per_learner)


def _common(c: AlgorithmConfig, cfg: TrialConfig) -> AlgorithmConfig:
    """Env, runners, resources, callbacks and seed: identical for every algorithm. Device and
    runner layout come from `rlsweep.placement.placement`."""
    p = placement(cfg)
    env_config = {**cfg.env_config().__dict__, "envpool_threads": p.envpool_threads}
    runner_class = {"env_runner_cls": CentralInferenceEnvRunner} if p.central_inference else {}
    return (
        # Procgen's actions are Discrete: RLlib's action unsquashing/clipping would only
        # deep-copy every env's action each step.
        c.environment(
            env=_env_id(), env_config=env_config, normalize_actions=False, clip_actions=False
        )
        .env_runners(
            num_env_runners=p.num_env_runners,
            num_envs_per_env_runner=p.num_envs_per_env_runner,
            rollout_fragment_length=cfg.rollout_length,
            gym_env_vectorize_mode=gym.VectorizeMode.VECTOR_ENTRY_POINT,
            num_cpus_per_env_runner=1,
            custom_resources_per_env_runner=dict(cfg.env_runner_resources),
            # Batched env<->module data paths (rlsweep.connectors) instead of RLlib's per-env ones.
            env_to_module_connector=batch_observations,
            add_default_connectors_to_env_to_module_pipeline=False,
            module_to_env_connector=sample_actions,
            add_default_connectors_to_module_to_env_pipeline=False,
            **runner_class,
        )
        # The learner is local (num_learners=0): it lives in the main process's bundle, and
        # with a GPU holds the trial's GPU share, which the central EnvRunner shares.
        .resources(
            num_cpus_for_main_process=cfg.num_cpus,
            custom_resources_for_main_process=dict(cfg.learner_resources),
        )
        .learners(num_learners=0, num_gpus_per_learner=p.gpus)
        .callbacks(on_episode_end=_log_raw_episode)
        .reporting(metrics_num_episodes_for_smoothing=SMOOTHING_EPISODES)
        .debugging(seed=cfg.seed)
    )


def _iteration_size(cfg: TrialConfig) -> dict[str, Any]:
    """One iteration = the trial's train batch of freshly sampled env steps, as for PPO (IMPALA
    defaults to >= 10 s per iteration, DQN to >= 1000 env steps)."""
    return dict(
        min_sample_timesteps_per_iteration=cfg.effective_train_batch_size,
        min_time_s_per_iteration=None,
    )


def _vtrace_training(cfg: TrialConfig) -> dict[str, Any]:
    """Training settings IMPALA and APPO share (V-trace actor-critic)."""
    return dict(
        gamma=cfg.gamma,
        lr=_lr(cfg),
        vf_loss_coeff=cfg.vf_loss_coeff,
        entropy_coeff=cfg.entropy_coeff,
        vtrace_clip_rho_threshold=cfg.vtrace_clip_rho,
        vtrace_clip_pg_rho_threshold=cfg.vtrace_clip_pg_rho,
        **_sgd(cfg),
    )


def _sgd(cfg: TrialConfig) -> dict[str, Any]:
    """Batch, minibatch, epochs and gradient clipping: the same keys for PPO, IMPALA and APPO."""
    return dict(
        grad_clip=cfg.grad_clip,
        grad_clip_by="global_norm",
        train_batch_size_per_learner=cfg.effective_train_batch_size,
        minibatch_size=cfg.minibatch_size,
        num_epochs=cfg.num_epochs,
    )


def _kl_loss(cfg: TrialConfig) -> dict[str, Any]:
    """PPO's and APPO's KL penalty: on iff kl_coeff > 0."""
    return dict(use_kl_loss=cfg.kl_coeff > 0, kl_coeff=cfg.kl_coeff, kl_target=cfg.kl_target)


def _vtrace_config(base, cfg: TrialConfig, module: type, **training):
    """IMPALA and APPO: the shared V-trace training, iteration size and module, plus `training`."""
    c = _common(base, cfg)
    return (
        c.training(**_vtrace_training(cfg), **training)
        .reporting(**_iteration_size(cfg))
        .rl_module(rl_module_spec=_module_spec(cfg, module))
    )


def impala_config(cfg: TrialConfig) -> IMPALAConfig:
    """RLlib IMPALA (V-trace actor-critic) on the same actor-critic module as PPO."""
    return _vtrace_config(IMPALAConfig(), cfg, ImpalaPPOModule)


def appo_config(cfg: TrialConfig) -> APPOConfig:
    """RLlib APPO: IMPALA plus PPO's clipped surrogate against a periodically synced old policy."""
    return _vtrace_config(
        APPOConfig(),
        cfg,
        ImpalaAPPOModule,
        clip_param=cfg.clip_param,
        **_kl_loss(cfg),
    )


def dqn_config(cfg: TrialConfig) -> DQNConfig:
    """RLlib DQN with prioritized episode replay, n-step, double/dueling Q on the IMPALA-CNN."""
    c = _common(DQNConfig(), cfg)
    return (
        c.training(
            gamma=cfg.gamma,
            lr=_lr(cfg),
            grad_clip=cfg.grad_clip,
            grad_clip_by="global_norm",
            train_batch_size_per_learner=cfg.minibatch_size,  # the replayed minibatch
            replay_buffer_config={
                "type": "PrioritizedEpisodeReplayBuffer",
                "capacity": cfg.replay_capacity,
                "alpha": cfg.replay_alpha,
                "beta": cfg.replay_beta,
            },
            num_steps_sampled_before_learning_starts=cfg.learning_starts,
            target_network_update_freq=cfg.target_update_freq,
            epsilon=[[0, cfg.epsilon_start], [cfg.epsilon_steps, cfg.epsilon_end]],
            n_step=cfg.n_step,
            double_q=cfg.double_q,
            dueling=cfg.dueling,
            num_atoms=1,
            training_intensity=cfg.training_intensity,
        )
        .reporting(**_iteration_size(cfg))
        .rl_module(rl_module_spec=_module_spec(cfg, ImpalaDQNModule, eval_epsilon=cfg.epsilon_end))
    )


_BUILDERS = {"ppo": ppo_config, "impala": impala_config, "appo": appo_config, "dqn": dqn_config}


def algorithm_config(cfg: TrialConfig) -> AlgorithmConfig:
    """The RLlib config for `cfg.algorithm`."""
    return _BUILDERS[cfg.algorithm](cfg)


def build_algorithm(cfg: TrialConfig) -> Algorithm:
    config = algorithm_config(cfg)
    configure_torch(cfg, learner_device(config))
    return config.build_algo()


def policy_logits(
    algo: Algorithm, chunk_rows: int | None = None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """obs -> the action-distribution inputs of the algorithm's module in inference mode (for
    `rlsweep.evaluation.sampling_policy`): obs moved to the module's device (a GPU trial's) in
    chunks of at most `chunk_rows` rows (a trial's minibatch: no forward sees more), logits back
    on the CPU for sampling."""

    def logits(obs: torch.Tensor) -> torch.Tensor:
        module = algo.get_module()
        device = next(module.parameters()).device
        return torch.cat(
            [
                module.forward_inference({Columns.OBS: rows[Columns.OBS].to(device)})[
                    Columns.ACTION_DIST_INPUTS
                ].cpu()
                for rows in row_chunks({Columns.OBS: obs}, chunk_rows)
            ]
        )

    return logits


# A checkpoint dir: the Algorithm's own state (RLlib's `save_to_path` layout), and beside it
# what RLlib does not save: the replay buffer, the RNGs, and the trainable's own counters.
REPLAY_FILE = "replay_buffer.pkl"
"""The replay buffer's state (RLlib's new API stack saves none; `checkpoint_replay_buffer`)."""
RNG_FILE = "rng_state.pkl"
"""The state of every random number generator the trial owns (`rng_state`)."""
TRIAL_FILE = "trial_state.json"
"""The trainable's own state at the checkpoint (its iteration, clocks), as given to
`save_checkpoint`: a JSON object."""


@dataclasses.dataclass(frozen=True)
class Restored:
    """What `restore_checkpoint` found beside the algorithm's state."""

    trial: dict[str, Any]
    """The `trial` dict given to `save_checkpoint` ({} for a checkpoint without one)."""
    replay_buffer: bool
    """False: the algorithm replays, but the checkpoint holds no replay buffer (it starts empty)."""


def save_checkpoint(
    algo: Algorithm,
    cfg: TrialConfig,
    path: str,
    trial: dict[str, Any] | None = None,
    generators: dict[str, torch.Generator] | None = None,
) -> None:
    """The algorithm's state (modules, optimizers, connectors, counters) to `path`, the state of
    every RNG of the trial (`rng_state`, with the trainable's own `generators`), the
    trainable's `trial` dict (JSON), and with `cfg.checkpoint_replay_buffer` the replay buffer."""
    algo.save_to_path(path)
    with open(os.path.join(path, RNG_FILE), "wb") as f:
        pickle.dump(rng_state(algo, generators or {}), f, protocol=pickle.HIGHEST_PROTOCOL)
    with open(os.path.join(path, TRIAL_FILE), "w") as f:
        json.dump(trial or {}, f)
    buffer = _replay_buffer(algo)
    if buffer is not None and cfg.checkpoint_replay_buffer:
        with open(os.path.join(path, REPLAY_FILE), "wb") as f:
            pickle.dump(buffer.get_state(), f, protocol=pickle.HIGHEST_PROTOCOL)


def restore_checkpoint(
    algo: Algorithm, path: str, generators: dict[str, torch.Generator] | None = None
) -> Restored:
    """Restore what `save_checkpoint` wrote, RNGs last (the trainable's `generators` in place),
    so that the next draw of each is the one an uninterrupted run makes next."""
    algo.restore_from_path(path)
    buffer = _replay_buffer(algo)
    replay = os.path.join(path, REPLAY_FILE)
    if buffer is not None and os.path.exists(replay):
        with open(replay, "rb") as f:
            buffer.set_state(pickle.load(f))
    trial: dict[str, Any] = {}
    if os.path.exists(os.path.join(path, TRIAL_FILE)):
        with open(os.path.join(path, TRIAL_FILE)) as f:
            trial = json.load(f)
    if os.path.exists(os.path.join(path, RNG_FILE)):
        with open(os.path.join(path, RNG_FILE), "rb") as f:
            set_rng_state(algo, pickle.load(f), generators or {})
    return Restored(trial=trial, replay_buffer=buffer is None or os.path.exists(replay))


# --- the trial's random number generators --------------------------------------------------
# A trial draws from: its process's global RNGs (torch: action sampling in a local EnvRunner,
# DQN's exploration; numpy and random: RLlib seeds them), those of its remote EnvRunners
# (their action sampling), the learner's generators (PPO's minibatch permutations, the
# augmentations' draws in each module), DQN's replay sampling, and the trainable's own (the
# evaluation's actions).
# The envs' level samplers live inside envpool, whose state cannot be read: see the README.


def _process_rngs(*_: Any) -> dict[str, Any]:
    """The global RNGs of this process (the argument: an EnvRunner, when run on one)."""
    return {
        "random": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
    }


def _set_process_rngs(state: dict[str, Any], *_: Any) -> None:
    random.setstate(state["random"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _learner_generators(learner: Any) -> dict[str, torch.Generator]:
    """A Learner's own generators: RlsweepPPOLearner's minibatch permutations and each
    module's augmentation draws (`rlsweep.rl_module.ImpalaPPOModule`)."""
    out = {}
    if isinstance(learner, RlsweepPPOLearner):
        out["shuffle"] = learner._shuffle_rng
    for module_id in learner.module.keys():  # noqa: SIM118 (a MultiRLModule has no __iter__)
        augment_rng = getattr(learner.module[module_id].unwrapped(), "_augment_rng", None)
        if augment_rng is not None:
            out[f"augment/{module_id}"] = augment_rng
    return out


def _learner_rngs(learner: Any) -> dict[str, torch.Tensor]:
    return {name: g.get_state() for name, g in _learner_generators(learner).items()}


def _set_learner_rngs(learner: Any, states: dict[str, torch.Tensor]) -> None:
    for name, g in _learner_generators(learner).items():
        g.set_state(states[name])


def rng_state(algo: Algorithm, generators: dict[str, torch.Generator]) -> dict[str, Any]:
    """The state of every RNG a trial owns: this process's globals, each remote EnvRunner's
    globals (by worker id), the learners' generators, and the trainable's `generators`."""
    runners = algo.env_runner_group
    remote = runners.healthy_worker_ids() if runners is not None else []
    replay = _replay_buffer(algo)
    return {
        "process": _process_rngs(),
        "env_runners": {
            worker_id: runners.foreach_env_runner(
                _process_rngs, local_env_runner=False, remote_worker_ids=[worker_id]
            )[0]
            for worker_id in remote
        },
        "learners": [r.get() for r in algo.learner_group.foreach_learner(_learner_rngs)],
        "generators": {name: g.get_state() for name, g in generators.items()},
        "replay": None if replay is None else replay.rng.bit_generator.state,
    }


def set_rng_state(
    algo: Algorithm, state: dict[str, Any], generators: dict[str, torch.Generator]
) -> None:
    """Put back what `rng_state` read. EnvRunners that are not the ones saved (fewer, or
    restarted) keep their seeds' streams."""
    _set_process_rngs(state["process"])
    runners = algo.env_runner_group
    for worker_id in runners.healthy_worker_ids() if runners is not None else []:
        if worker_id in state["env_runners"]:
            runners.foreach_env_runner(
                functools.partial(_set_process_rngs, state["env_runners"][worker_id]),
                local_env_runner=False,
                remote_worker_ids=[worker_id],
            )
    (learner_states,) = state["learners"]  # rlsweep's learner is local (num_learners=0)
    for r in algo.learner_group.foreach_learner(_set_learner_rngs, states=learner_states):
        r.get()
    for name, g in generators.items():
        g.set_state(state["generators"][name])
    if state["replay"] is not None and (replay := _replay_buffer(algo)) is not None:
        replay.rng.bit_generator.state = state["replay"]


def _replay_buffer(algo: Algorithm) -> Any:
    """DQN's replay buffer (its `rng` samples replayed episodes; RLlib seeds it from the OS,
    not from the trial seed), or None."""
    return getattr(algo, "local_replay_buffer", None)


def trial_resources(cfg: TrialConfig):
    """Tune placement group for one trial: the trial process (driver, local learner and, with 0
    env runners, sampling; with a GPU, its GPU share) plus one bundle per remote EnvRunner, as
    RLlib computes it from the config `placement` shaped (a test holds the two equal)."""
    c = algorithm_config(cfg)
    return c.algo_class.default_resource_request(c)


def _get(d: dict[str, Any], *path: str, default: float = math.nan) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d


def read_result(result: dict[str, Any]) -> dict[str, float]:
    """RLlib's result dict -> our stable metric names (raw, un-normalized)."""
    env_runners = result.get("env_runners", {})
    learner = _get(result, "learners", "default_policy", default={})
    # DQN has no policy: its TD loss on Q-values is both its total and its value loss.
    q_loss = _get(learner, "qf_loss")
    return {
        M.ENV_STEPS: float(
            _get(result, "num_env_steps_sampled_lifetime", default=math.nan)
            if "num_env_steps_sampled_lifetime" in result
            else _get(env_runners, "num_env_steps_sampled_lifetime")
        ),
        M.TRAIN_EPISODE_RETURN_MEAN: float(_get(env_runners, RAW_RETURN)),
        M.TRAIN_EPISODE_LENGTH_MEAN: float(_get(env_runners, RAW_LENGTH)),
        M.TRAIN_EPISODES_LIFETIME: float(_get(env_runners, "num_episodes_lifetime", default=0.0)),
        M.MODULE_STEPS_TRAINED: float(_get(learner, "num_module_steps_trained", default=0.0)),
        M.LOSS_TOTAL: float(_get(learner, "total_loss")),
        # IMPALA logs batch sums as pi_loss/vf_loss and the comparable means as mean_*.
        M.LOSS_POLICY: float(_get(learner, "policy_loss", default=_get(learner, "mean_pi_loss"))),
        M.LOSS_VALUE: float(
            q_loss
            if "qf_loss" in learner
            else _get(learner, "mean_vf_loss", default=_get(learner, "vf_loss"))
        ),
        M.LOSS_ENTROPY: float(_get(learner, "entropy")),
        M.LOSS_KL: float(_get(learner, "mean_kl_loss")),
        # Hyperparameters in effect (after PBT perturbations and schedules).
        # Only our PPO learner logs the lr it trained with; the others report RLlib's (logged
        # after the update's schedule step: equal for a fixed lr).
        M.HP_LR: float(
            _get(learner, LR_IN_UPDATE, default=_get(learner, "default_optimizer_learning_rate"))
        ),
        M.HP_ENTROPY_COEFF: float(_get(learner, "curr_entropy_coeff")),
    }
