"""One trial's complete, flat configuration: what it plays, the model, PPO, budget and evaluation.

A Tune trial receives this as a plain dict (`TrialConfig.to_dict()`); `TrialConfig.from_dict`
rebuilds and validates it. The defaults are openai/train-procgen's run (Cobbe et al., 2019,
`baselines/cobbe2019.yaml` states the same values with their sources): baselines' PPO2 update on
64 envs x 256 steps with VecNormalize'd rewards; a test holds the two equal.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from rlsweep.errors import ConfigError
from rlsweep.subconfigs import AugmentConfig, EnvConfig, ModelConfig
from rlsweep.validators import check_num_gpus, is_int, is_number

ALGORITHMS = ("ppo", "impala", "appo", "dqn")
"""RL algorithms (TrialConfig.algorithm); spec.SEARCH_ALGORITHMS are Tune's search algorithms."""
VF_CLIP_MODES = ("loss", "ppo2")
MINIBATCHINGS = ("shuffle", "rllib")
ADVANTAGE_NORMS = ("minibatch", "batch", "rllib")


SUB_CONFIGS = (EnvConfig, ModelConfig, AugmentConfig)
"""The parts TrialConfig.part builds by field name (rlsweep.subconfigs)."""
Part = TypeVar("Part", EnvConfig, ModelConfig, AugmentConfig)


@dataclass(frozen=True)
class TrialConfig(AugmentConfig, ModelConfig, EnvConfig):
    """One trial, flat: the fields of its parts (rlsweep.subconfigs: EnvConfig, what it plays;
    ModelConfig; AugmentConfig), declared and documented there once, then the fields below.
    `part(cls)` builds a part back from the fields of the same names."""

    normalize_reward: bool = True
    """On in a trial, as in train-procgen (a bare EnvConfig plays raw rewards)."""
    seed: int = 0
    """Seeds torch, RLlib and every env of the trial."""

    # --- budget and evaluation ------------------------------------------------------------
    total_env_steps: int = 25_000_000
    """Training budget in env steps; the trial stops at the first iteration reaching it."""
    eval_interval: int = 10
    """Evaluate on unseen levels every this many iterations (and always at the end)."""
    eval_episodes: int = 32
    """Unseen-level episodes per evaluation (one per env, so no bias to short episodes)."""
    checkpoint_every_s: float = 600.0
    """Checkpoint when this many seconds of trial time have passed since the last checkpoint
    (checked after each iteration; 0 = off). Trials also checkpoint at the end and when the sweep
    is interrupted (Ctrl-C, SIGTERM), so a resumed or retried trial loses at most ~10 minutes."""
    checkpoint_interval: int = 0
    """Also checkpoint every this many iterations; 0 = off."""

    # --- algorithm ------------------------------------------------------------------------
    algorithm: str = "ppo"
    """ppo | impala | appo | dqn (RLlib new API stack, all on the IMPALA-CNN). The PPO fields
    below that make sense elsewhere are shared: gamma, lr/lr_schedule, grad_clip, rollout and
    env-runner shape, and for impala/appo also vf/entropy coefficients, minibatch and epochs
    (appo: clip_param and the KL fields too); dqn's replay minibatch is minibatch_size."""

    # --- PPO --------------------------------------------------------------------------------
    gamma: float = 0.999
    """Discount."""
    lambda_: float = 0.95
    """GAE lambda."""
    lr: float = 5e-4
    """Adam learning rate (ignored when lr_schedule is set)."""
    lr_schedule: tuple[tuple[int, float], ...] | None = None
    """Piecewise-linear [[env_step, lr], ...] starting at step 0 (RLlib's schedule semantics)."""
    clip_param: float = 0.2
    """PPO ratio clip."""
    vf_clip_param: float = 0.2
    """Value clip; what it clips depends on vf_clip_mode."""
    vf_clip_mode: str = "ppo2"
    """loss: clamp each squared value error at vf_clip_param (RLlib's new API stack) |
    ppo2: keep the value within +-vf_clip_param of the rollout's estimate, counting the larger of
    the clipped and unclipped squared errors (openai/baselines PPO2 as in Cobbe et al. 2019,
    CleanRL's clip_vloss, RLlib before its new API stack). ppo only: the other algorithms'
    value losses are RLlib's own."""
    vf_loss_coeff: float = 0.25
    """Value loss weight on the mean squared error (PPO2's 0.5 x squared error x vf_coef 0.5)."""
    entropy_coeff: float = 0.01
    """Entropy bonus weight."""
    kl_coeff: float = 0.0
    """Initial KL penalty coefficient; 0 disables the KL term."""
    kl_target: float = 0.01
    """KL target for the adaptive coefficient."""
    grad_clip: float | None = 0.5
    """Global gradient-norm clip; None disables."""
    rollout_length: int = 256
    """Env steps per env per rollout."""
    num_envs_per_env_runner: int = 64
    """Envs batched in one envpool per EnvRunner."""
    num_env_runners: int = 0
    """Remote EnvRunner actors; 0 samples in the trial's own process."""
    train_batch_size: int | None = None
    """Env steps per iteration; None = rollout_length * envs * max(1, env runners)."""
    minibatch_size: int = 2048
    """SGD minibatch size."""
    num_epochs: int = 3
    """SGD passes over each train batch."""
    minibatching: str = "shuffle"
    """shuffle: every epoch a fresh permutation of the batch's real transitions, cut into
    train_batch / minibatch_size minibatches of exactly minibatch_size (baselines' PPO2,
    CleanRL, 2020's RLlib) | rllib: RLlib's cyclic iterator over the batch with its bootstrap
    rows (shuffled only when it wraps around). ppo only."""
    advantage_norm: str = "minibatch"
    """Standardize advantages over each minibatch (PPO2, CleanRL) | over the batch's real
    transitions (2020's RLlib) | rllib: over the whole batch, bootstrap rows included (RLlib's
    new API stack). ppo only."""
    adam_eps: float = 1e-5
    """Adam's epsilon (PPO2 and CleanRL: 1e-5; torch's default, RLlib's: 1e-8). ppo only."""
    num_gpus: float = 0
    """GPUs of the trial (0 = CPU). The learner trains on it; with num_env_runners 0 the
    rollout's inference runs on it too, batched over all of the trial's envs (one envpool in the
    trial's process on its num_cpus threads; see rlsweep.placement), while remote EnvRunners
    (a cluster's CPU nodes) infer on their own CPUs. A fraction (0.25) packs several trials per
    GPU; above 1, a whole number."""
    tf32: bool = False
    """With a GPU: TF32 tensor cores for float32 matmuls and convolutions (Ampere and newer;
    ~10-bit mantissa, unlike float32's 23). False keeps them in full float32."""
    num_cpus: int = 1
    """CPUs of the trial's own process (learner, and sampling when num_env_runners=0); torch
    uses this many threads."""
    learner_resources: dict[str, float] = field(default_factory=dict)
    """Custom Ray resources the trial's own process (the learner) asks for, which places it on
    nodes that have them: e.g. {group_learner: 0.01} on a SageMaker job's learner group."""
    env_runner_resources: dict[str, float] = field(default_factory=dict)
    """Custom Ray resources each remote EnvRunner asks for (e.g. {group_rollout: 0.01})."""

    # --- IMPALA / APPO -------------------------------------------------------------------------
    vtrace_clip_rho: float = 1.0
    """V-trace clip of the importance ratio in the value targets (rho-bar)."""
    vtrace_clip_pg_rho: float = 1.0
    """V-trace clip of the importance ratio in the policy-gradient advantages."""

    # --- DQN (prioritized replay) -------------------------------------------------------------
    replay_capacity: int = 50_000
    """Replay buffer size in env steps (uint8 frames: ~12 KB each per stacked 3x64x64)."""
    replay_alpha: float = 0.6
    """Prioritization exponent; 0 = uniform replay."""
    replay_beta: float = 0.4
    """Importance-sampling correction exponent."""
    learning_starts: int = 10_000
    """Env steps sampled before the first update."""
    target_update_freq: int = 8_000
    """Env steps between target-network syncs."""
    epsilon_start: float = 1.0
    """Exploration epsilon at step 0, decayed linearly ..."""
    epsilon_end: float = 0.01
    """... to this (also the epsilon of epsilon-greedy unseen-level evaluation) ..."""
    epsilon_steps: int = 250_000
    """... over this many env steps."""
    n_step: int = 3
    """n-step returns (must be <= rollout_length)."""
    double_q: bool = True
    """Double Q-learning targets."""
    dueling: bool = True
    """Dueling value/advantage heads."""
    training_intensity: float | None = None
    """Replayed / sampled env steps; None = one minibatch update per sampling round."""
    checkpoint_replay_buffer: bool = False
    """Save the replay buffer with every checkpoint, so that a restored trial (a retry, a
    resume, a spot reclaim) replays what it had rather than refilling from empty. Costs up to
    replay_capacity x frame size of disk and write time per checkpoint (~600 MB at 50k 64x64
    RGB frames)."""

    def __post_init__(self) -> None:
        for name in ("widths", "lr_schedule"):
            value = getattr(self, name)
            if isinstance(value, list):
                value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
                object.__setattr__(self, name, value)
        self._validate()

    # ------------------------------------------------------------------------------------------
    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, d: dict[str, Any], path: str = "") -> TrialConfig:
        """Build from a plain dict, rejecting unknown keys with a did-you-mean."""
        known = cls.field_names()
        for key in d:
            if key not in known:
                hint = difflib.get_close_matches(key, known, n=1)
                raise ConfigError(
                    _join(path, key),
                    f"unknown key{f' (did you mean {hint[0]!r}?)' if hint else ''}; "
                    f"allowed: {', '.join(known)}",
                )
        try:
            return cls(**d)
        except ConfigError as e:
            raise e.under(path) from None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["widths"] = list(self.widths)
        if self.lr_schedule is not None:
            d["lr_schedule"] = [list(p) for p in self.lr_schedule]
        return d

    def part(self, cls: type[Part]) -> Part:
        """The sub-config `cls` (one of SUB_CONFIGS) built from this trial's fields of the same
        names; it validates them, so its errors name the trial's keys."""
        return cls(**{f.name: getattr(self, f.name) for f in fields(cls)})

    def env_config(self) -> EnvConfig:
        return self.part(EnvConfig)

    def model_config(self) -> ModelConfig:
        return self.part(ModelConfig)

    def augment_config(self) -> AugmentConfig:
        return self.part(AugmentConfig)

    @property
    def effective_train_batch_size(self) -> int:
        if self.train_batch_size is not None:
            return self.train_batch_size
        return self.rollout_length * self.num_envs_per_env_runner * max(1, self.num_env_runners)

    # ------------------------------------------------------------------------------------------
    def _validate(self) -> None:
        def check(name: str, ok: bool, allowed: str) -> None:
            if not ok:
                raise ConfigError(name, f"got {getattr(self, name)!r}; allowed: {allowed}")

        def number(name: str) -> bool:
            return is_number(getattr(self, name))

        def integer(name: str) -> bool:
            return is_int(getattr(self, name))

        def integer_at_least(name: str, low: int) -> None:
            check(name, integer(name) and getattr(self, name) >= low, f"an integer >= {low}")

        check("algorithm", self.algorithm in ALGORITHMS, ", ".join(ALGORITHMS))
        # Env, model and augmentation fields: validated by the sub-configs, under their names.
        for part in SUB_CONFIGS:
            self.part(part)
        integer_at_least("seed", 0)
        for name in ("total_env_steps", "eval_interval", "eval_episodes"):
            check(name, integer(name) and getattr(self, name) > 0, "an integer > 0")
        integer_at_least("checkpoint_interval", 0)
        check(
            "checkpoint_every_s",
            number("checkpoint_every_s") and self.checkpoint_every_s >= 0,
            "a number of seconds >= 0 (0 = off)",
        )
        check("gamma", number("gamma") and 0 < self.gamma <= 1, "0 < gamma <= 1")
        check("lambda_", number("lambda_") and 0 <= self.lambda_ <= 1, "0 <= lambda_ <= 1")
        check("lr", number("lr") and self.lr > 0, "a number > 0")
        if self.lr_schedule is not None:
            pts = self.lr_schedule
            ok = (
                len(pts) >= 1
                and all(len(p) == 2 for p in pts)
                and all(is_int(s, minimum=0) for s, _ in pts)
                and all(is_number(v) and v > 0 for _, v in pts)
                and pts[0][0] == 0
                and all(a[0] < b[0] for a, b in zip(pts, pts[1:], strict=False))
            )
            check(
                "lr_schedule",
                ok,
                "[[env_step, lr], ...] with steps increasing from 0 and every lr > 0",
            )
        for name in ("clip_param", "vf_clip_param"):
            check(name, number(name) and getattr(self, name) > 0, "a number > 0")
        check("vf_clip_mode", self.vf_clip_mode in VF_CLIP_MODES, ", ".join(VF_CLIP_MODES))
        check("minibatching", self.minibatching in MINIBATCHINGS, ", ".join(MINIBATCHINGS))
        check("advantage_norm", self.advantage_norm in ADVANTAGE_NORMS, ", ".join(ADVANTAGE_NORMS))
        check("adam_eps", number("adam_eps") and self.adam_eps > 0, "a number > 0")
        for name in ("vf_loss_coeff", "entropy_coeff", "kl_coeff"):
            check(name, number(name) and getattr(self, name) >= 0, "a number >= 0")
        check("kl_target", number("kl_target") and self.kl_target > 0, "a number > 0")
        check(
            "grad_clip",
            self.grad_clip is None or (number("grad_clip") and self.grad_clip > 0),
            "a number > 0, or null to disable",
        )
        for name in ("rollout_length", "num_envs_per_env_runner", "minibatch_size", "num_epochs"):
            check(name, integer(name) and getattr(self, name) > 0, "an integer > 0")
        integer_at_least("num_env_runners", 0)
        check(
            "num_gpus",
            number("num_gpus") and self.num_gpus >= 0 and check_num_gpus(self.num_gpus),
            "0 (CPU), a fraction 0 < x <= 1 of one GPU, or a whole number of GPUs",
        )
        check("tf32", isinstance(self.tf32, bool), "true, false")
        integer_at_least("num_cpus", 1)
        for name in ("learner_resources", "env_runner_resources"):
            v = getattr(self, name)
            ok = isinstance(v, dict) and all(
                isinstance(k, str) and is_number(x) and x > 0 for k, x in v.items()
            )
            check(name, ok, "a mapping of Ray resource name -> amount > 0")
        batch = self.effective_train_batch_size
        if self.train_batch_size is not None:
            check("train_batch_size", integer("train_batch_size") and batch > 0, "an integer > 0")
            per_round = self.rollout_length * self.num_envs_per_env_runner
            per_round *= max(1, self.num_env_runners)
            check(
                "train_batch_size",
                batch % per_round == 0,
                f"a multiple of rollout_length * num_envs_per_env_runner * max(1, "
                f"num_env_runners) = {per_round}",
            )
        check(
            "minibatch_size",
            self.minibatch_size <= batch,
            f"<= the train batch ({batch} env steps)",
        )
        if self.algorithm == "ppo" and self.minibatching == "shuffle":
            check(
                "minibatch_size",
                batch % self.minibatch_size == 0,
                f"a divisor of the train batch ({batch} env steps): minibatching shuffle cuts "
                "it into equal minibatches",
            )
        self._validate_algorithm_fields(check, number, integer)

    def _validate_algorithm_fields(self, check, number, integer) -> None:
        for name in ("vtrace_clip_rho", "vtrace_clip_pg_rho"):
            check(name, number(name) and getattr(self, name) > 0, "a number > 0")
        if self.algorithm in ("impala", "appo"):
            # RLlib's IMPALA splits the batch into whole rollout fragments.
            check(
                "minibatch_size",
                self.minibatch_size % self.rollout_length == 0,
                f"a multiple of rollout_length ({self.rollout_length}) for {self.algorithm}",
            )
        for name in ("replay_capacity", "target_update_freq", "epsilon_steps", "n_step"):
            check(name, integer(name) and getattr(self, name) > 0, "an integer > 0")
        check(
            "learning_starts",
            integer("learning_starts") and self.learning_starts >= 0,
            "an integer >= 0",
        )
        for name in ("replay_alpha", "replay_beta", "epsilon_start", "epsilon_end"):
            check(name, number(name) and 0 <= getattr(self, name) <= 1, "0 <= x <= 1")
        for name in ("double_q", "dueling", "checkpoint_replay_buffer"):
            check(name, isinstance(getattr(self, name), bool), "true, false")
        check(
            "training_intensity",
            self.training_intensity is None
            or (number("training_intensity") and self.training_intensity > 0),
            "a number > 0, or null for one update per sampling round",
        )
        if self.algorithm == "dqn":
            # The Q-network has no augmentation hook; refuse rather than silently ignore it.
            check("augment", self.augment == "none", "none for algorithm dqn")
            check(
                "n_step",
                self.n_step <= self.rollout_length,
                f"<= rollout_length ({self.rollout_length})",
            )
            check(
                "replay_capacity",
                self.replay_capacity >= self.minibatch_size,
                f">= minibatch_size ({self.minibatch_size})",
            )


def _join(path: str, key: str) -> str:
    return ".".join(p for p in (path, key) if p)
