"""The only module that touches RLlib's config builders and its result keys.

`build_algorithm(cfg)` turns a flat `TrialConfig` into an RLlib `Algorithm` (PPO, IMPALA, APPO or
DQN, chosen by `cfg.algorithm`) on the new API stack; `read_result(result)` maps RLlib's
(renamed-between-releases, per-algorithm) result keys to ours. Building a config also registers
the Procgen env with Tune (`make_procgen_env`). What the builders plug in lives in modules named
for it: the PPO learner (`rlsweep.trial.ppo_learner`), PPO with `overlap` (`rlsweep.trial.overlap`),
the modules (`rlsweep.trial.rl_module`), the EnvRunners (`rlsweep.trial.env_runner`) and the
process's torch settings (`rlsweep.trial.device`).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.algorithms.appo import APPOConfig
from ray.rllib.algorithms.dqn import DQNConfig
from ray.rllib.algorithms.impala import IMPALAConfig
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.tune.registry import register_env

from rlsweep import metrics as M
from rlsweep.envs.vector_env import ProcgenVectorEnv
from rlsweep.plan.placement import ENV_RUNNER_CPUS, placement
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.subconfigs import EnvConfig
from rlsweep.trial.connectors import batch_observations, sample_actions
from rlsweep.trial.device import configure_torch, learner_device
from rlsweep.trial.env_runner import BatchedEnvRunner, CentralInferenceEnvRunner
from rlsweep.trial.learners import RlsweepAPPOLearner, RlsweepDQNLearner, RlsweepIMPALALearner
from rlsweep.trial.overlap import OverlappedPPO
from rlsweep.trial.ppo_learner import LR_IN_UPDATE, RlsweepPPOLearner, learner_options
from rlsweep.trial.rl_module import ImpalaAPPOModule, ImpalaDQNModule, ImpalaPPOModule

# Our custom metric, logged by the episode callback into RLlib's env-runner metrics.
RAW_RETURN = "rlsweep_raw_episode_return"
RAW_LENGTH = "rlsweep_raw_episode_length"
SMOOTHING_EPISODES = 100
ENV_ID = "rlsweep-procgen"


def make_procgen_env(env_config: dict[str, Any]) -> ProcgenVectorEnv:
    """RLlib's vector entry point: `env_config` carries EnvConfig fields, `num_envs` and the
    placement's `envpool_threads` and `env_groups`."""
    cfg = dict(env_config)
    num_envs = cfg.pop("num_envs")
    threads, groups = cfg.pop("envpool_threads"), cfg.pop("env_groups")
    return ProcgenVectorEnv(
        EnvConfig(**cfg), num_envs=num_envs, split="train", num_threads=threads, groups=groups
    )


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


def ppo_config(cfg: TrialConfig) -> PPOConfig:
    """The RLlib PPOConfig for one trial."""
    return (
        _common(PPOConfig(algo_class=OverlappedPPO if cfg.overlap else None), cfg)
        .learners(learner_class=RlsweepPPOLearner, learner_config_dict=learner_options(cfg))
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
        "augment": cfg.augment_config().to_dict(),
        "augment_seed": cfg.seed,
        **extra,
    }
    return RLModuleSpec(module_class=module_class, model_config=model_config)


def _common(c: AlgorithmConfig, cfg: TrialConfig) -> AlgorithmConfig:
    """Env, runners, resources, callbacks and seed: identical for every algorithm. Device and
    runner layout come from `rlsweep.plan.placement.placement`."""
    p = placement(cfg)
    env_config = {
        **cfg.env_config().to_dict(),
        "envpool_threads": p.envpool_threads,
        "env_groups": p.env_groups,
    }
    runner_class = CentralInferenceEnvRunner if p.central_inference else BatchedEnvRunner
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
            num_cpus_per_env_runner=ENV_RUNNER_CPUS,
            custom_resources_per_env_runner=dict(cfg.env_runner_resources),
            # Batched env<->module data paths (rlsweep.trial.connectors) instead of RLlib's per-env
            # ones.
            env_to_module_connector=batch_observations,
            add_default_connectors_to_env_to_module_pipeline=False,
            module_to_env_connector=sample_actions,
            add_default_connectors_to_module_to_env_pipeline=False,
            env_runner_cls=runner_class,
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
        # log_sys_usage off: RLlib's default starts a thread polling psutil (and GPUtil, which
        # runs nvidia-smi, where installed) every 0.7 s into results nothing reads (rlsweep
        # reports its own perf/ figures), and without GPUtil warns "Install gputil" per trial.
        .debugging(seed=cfg.seed, log_sys_usage=False)
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


def _vtrace_config(base, cfg: TrialConfig, module: type, learner: type, **training):
    """IMPALA and APPO: the shared V-trace training, iteration size and module, plus `training`."""
    c = _common(base, cfg).learners(learner_class=learner)
    return (
        c.training(**_vtrace_training(cfg), **training)
        .reporting(**_iteration_size(cfg))
        .rl_module(rl_module_spec=_module_spec(cfg, module))
    )


def impala_config(cfg: TrialConfig) -> IMPALAConfig:
    """RLlib IMPALA (V-trace actor-critic) on the same actor-critic module as PPO."""
    return _vtrace_config(IMPALAConfig(), cfg, ImpalaPPOModule, RlsweepIMPALALearner)


def appo_config(cfg: TrialConfig) -> APPOConfig:
    """RLlib APPO: IMPALA plus PPO's clipped surrogate against a periodically synced old policy."""
    return _vtrace_config(
        APPOConfig(),
        cfg,
        ImpalaAPPOModule,
        RlsweepAPPOLearner,
        clip_param=cfg.clip_param,
        **_kl_loss(cfg),
    )


def dqn_config(cfg: TrialConfig) -> DQNConfig:
    """RLlib DQN with prioritized episode replay, n-step, double/dueling Q on the IMPALA-CNN."""
    c = _common(DQNConfig(), cfg).learners(learner_class=RlsweepDQNLearner)
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
    device = learner_device(config)
    configure_torch(cfg, device)  # the memory cap before anything is allocated
    algo = config.build_algo()
    configure_torch(cfg, device)  # again: RLlib's seeding set cuDNN deterministic in the build
    return algo


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
