"""The parts of a trial, as small frozen dataclasses validated at construction: what the env,
the network and the augmentation take (`EnvConfig` for rlsweep.envs.vector_env, `ModelConfig` for
rlsweep.trial.models, `AugmentConfig` for rlsweep.trial.augment); the seed, budget and evaluation
(`BudgetConfig`); the algorithm with PPO's and the shared hyperparameters (`AlgorithmConfig`);
the trial's resources (`ResourcesConfig`); and the options of one algorithm alone
(`VTraceConfig`, `DQNConfig`).
Each part becomes a plain dict one way (`ConfigPart.to_dict`), as RLlib's env and module
configs take it.

`TrialConfig` inherits their fields (each is declared and documented here, once, with its rule:
rlsweep.spec.validators), so a trial's keys are the parts' keys, `TrialConfig.part(cls)` builds a
part by field name, and a validation error names the trial's key. They live here, away from torch
and gymnasium, so that loading and validating a spec (`import rlsweep`, `rlsweep validate`,
`rlsweep report`) imports neither.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rlsweep.envs import procgen
from rlsweep.errors import ConfigError
from rlsweep.spec.validators import (
    Rule,
    Validated,
    check_num_gpus,
    checked,
    failures,
    flag,
    fraction,
    integer,
    is_int,
    is_number,
    non_negative,
    one_of,
    optional,
    positive,
    probability,
)

FRAMESTACKS = ("none", "stack", "gap")
TIME_LIMITS = ("terminate", "truncate")
DOWNSAMPLES = ("maxpool", "conv")
POOL_PADDINGS = ("tf_same", "torch")
"""Where a stage's max-pool pads its input (ModelConfig.pool_padding)."""
INITS = ("glorot", "torch", "keras")
"""How a network's weights start (ModelConfig.init), each as a reference started them."""
TRANSFORMS = ("flip", "rotate", "crop_resize", "translate", "pad_crop")
"""The augmentations proper; `all` draws one of them per sample. Order fixes the op ids."""
AUGMENTATIONS = ("none", *TRANSFORMS, "all")
VF_CLIP_MODES = ("loss", "ppo2")
MINIBATCHINGS = ("shuffle", "fixed", "rllib")
ADVANTAGE_NORMS = ("minibatch", "batch", "rllib")
ALGORITHMS = ("ppo", "impala", "appo", "dqn")
"""RL algorithms (TrialConfig.algorithm); spec.SEARCH_ALGORITHMS are Tune's search algorithms."""
SAMPLING_ROUND = "rollout_length x num_envs_per_env_runner x max(1, num_env_runners)"
"""One sampling round of a trial, in env steps: what a train batch is a multiple of."""
PRECISIONS = ("fp32", "tf32", "bf16")
"""The network's arithmetic (ModelConfig.precision); a trial may also say `auto`."""
GPU_PRECISION = "bf16"
"""What a GPU trial's `precision: auto` runs: the fastest precision whose learning matched fp32
(docs/gpu.md, Precision). A CPU trial's `auto` is fp32, the published setup's."""


def resolved_precision(precision: str, gpu: bool) -> str:
    """A trial's `precision` as its network runs it: `auto` is GPU_PRECISION on a GPU and fp32
    on a CPU; the others as they are."""
    if precision != "auto":
        return precision
    return GPU_PRECISION if gpu else "fp32"


_WIDTHS = Rule(
    lambda v: isinstance(v, list | tuple) and len(v) > 0 and all(is_int(w, 1) for w in v),
    "a non-empty list of positive integers",
    convert=tuple,
)


class ConfigPart(Validated):
    """A part that RLlib's env or module config takes: the one way it becomes a plain dict."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict, tuples as lists (as YAML and JSON give them back)."""
        return {k: _plain(v) for k, v in asdict(self).items()}


def _plain(v: Any) -> Any:
    return [_plain(x) for x in v] if isinstance(v, tuple) else v


@dataclass(frozen=True)
class EnvConfig(ConfigPart):
    """What a trial plays."""

    game: str = checked("coinrun", rule=one_of(procgen.GAMES))
    """One of the 16 Procgen games."""
    distribution_mode: str = checked("easy", rule=one_of(procgen.DISTRIBUTION_MODES))
    """easy, hard, or a game's extra modes (extreme, memory, exploration)."""
    num_levels: int | None = checked(None, rule=optional(integer(0)))
    """Training levels; None = the mode's default (easy 200, others 500). 0 = all levels.
    Exploration mode plays one fixed level per game (as procgen does): only None."""
    start_level: int = checked(0, rule=integer(0))
    """First training level seed (exploration mode: only 0)."""
    framestack: str = checked("none", rule=one_of(FRAMESTACKS))
    """'none'; 'stack' = the last k frames; 'gap' = frames t and t-(k-1) only."""
    framestack_k: int = checked(4, rule=integer(2))
    """k for 'stack' and 'gap'."""
    reward_shaping: bool = checked(False, rule=flag)
    """Train on sign(r)*(sqrt(|r|+1)-1) + 0.001*r; reported returns stay raw. Under
    `normalize_reward` it changes nothing in a game whose one reward it only rescales
    (`procgen.ONE_REWARD_GAMES`; a spec warns of it)."""
    normalize_reward: bool = checked(False, rule=flag)
    """Scale rewards by a running std of the discounted return, then clip: baselines'
    VecNormalize(ob=False) (train-procgen), gymnasium's NormalizeReward + clip (CleanRL).
    Statistics are per env runner. Reported returns stay raw. Off for a bare env; on in
    TrialConfig, as in train-procgen."""
    reward_norm_gamma: float = checked(0.99, rule=fraction)
    """Discount of the return whose std normalizes rewards: VecNormalize's own 0.99 in
    train-procgen, the agent's gamma (0.999) in CleanRL."""
    reward_clip: float = checked(10.0, rule=positive)
    """Clip normalized rewards to [-reward_clip, reward_clip]."""
    time_limit: str = checked("terminate", rule=one_of(TIME_LIMITS))
    """How an episode that hits the game's time limit ends: 'terminate' (no bootstrap; procgen
    0.10.7 reports a plain done, and train-procgen, CleanRL and 2020's RLlib treat it as
    terminal) or 'truncate' (bootstrap from the last state's value; envpool reports it so)."""

    def _across_fields(self) -> list[ConfigError]:
        """The modes the game offers, and exploration mode's one fixed level."""
        modes = procgen.modes_for(self.game)
        if self.distribution_mode not in modes:
            allowed = f"allowed for {self.game}: {', '.join(modes)}"
            return [ConfigError("distribution_mode", f"got {self.distribution_mode!r}; {allowed}")]
        if self.distribution_mode != "exploration":
            return []
        # procgen 0.10.7 plays hard mode on one fixed level per game and refuses level
        # settings; envpool aborts the process (CHECK_EQ) unless num_levels=start_level=0.
        level = procgen.exploration_level(self.game)
        why = f"exploration mode plays {self.game}'s one fixed level, seed {level}"
        return failures(
            self,
            [
                ("num_levels", self.num_levels is None, f"null ({why})"),
                ("start_level", self.start_level == 0, f"0 ({why})"),
            ],
        )

    @property
    def train_levels(self) -> int:
        """Number of training levels after applying the mode's default."""
        if self.num_levels is None:
            return procgen.DEFAULT_NUM_LEVELS[self.distribution_mode]
        return self.num_levels

    @property
    def train_level_range(self) -> tuple[int, int] | None:
        """Level seeds [lo, hi) training plays; None = the full distribution. In exploration
        mode the game's fixed level, which testing plays too (there are no unseen levels)."""
        if self.distribution_mode == "exploration":
            level = procgen.exploration_level(self.game)
            return level, level + 1
        n = self.train_levels
        return (self.start_level, self.start_level + n) if n else None

    @property
    def frames_per_obs(self) -> int:
        return {"none": 1, "stack": self.framestack_k, "gap": 2}[self.framestack]


@dataclass(frozen=True)
class ModelConfig(ConfigPart):
    """IMPALA-CNN shape and execution options."""

    widths: tuple[int, ...] = checked((16, 32, 32), rule=_WIDTHS)
    """Channels per stage; (32, 64, 64) is the 'wide' variant."""
    downsample: str = checked("maxpool", rule=one_of(DOWNSAMPLES))
    """'maxpool' (3x3, stride 2, as in IMPALA) or 'conv' (a stride-2 3x3 conv)."""
    pool_padding: str = checked("tf_same", rule=one_of(POOL_PADDINGS))
    """Where the 3x3, stride-2 max-pool pads. 'tf_same': TensorFlow's 'SAME' padding, as the
    TF nets ran it (IMPALA's, train-procgen's, the AIcrowd starter's, LARS12llt's): on an even
    side (64, 32, 16) one padded row and column at the bottom and right only, so the windows start
    at pixel 0; on an odd side one on each edge. 'torch': one on each edge always (CleanRL's
    nn.MaxPool2d(3, 2, padding=1)), so on an even side the windows start at pixel -1, half a
    window's stride from TF's. The same output size either way. No effect with downsample 'conv'."""
    global_pool: bool = checked(False, rule=flag)
    """Average-pool the last stage over space before the dense layer."""
    relu_after_pool: bool = checked(False, rule=flag)
    """With global_pool, the trunk's last ReLU after the pooling (pool, then ReLU: LARS12llt's
    entry, Keras' GlobalAveragePooling2D, ReLU, Dense) rather than before it (ReLU, then pool:
    Impoola's order). The two differ: the mean of rectified features is not the rectified mean.
    No effect without global_pool (flattening commutes with the ReLU)."""
    dense: int = checked(256, rule=integer(1))
    """Width of the dense layer."""
    init: str = checked("glorot", rule=one_of(INITS))
    """How the weights start. 'glorot': Glorot-uniform weights and zero biases in the trunk (the
    convolutions and the dense layer), the policy head orthogonal with gain 0.01 and the value
    head with gain 1, zero head biases: openai/train-procgen's (TF1 layers' defaults, baselines'
    `fc` heads). 'torch': PyTorch's layer defaults in the trunk, the same heads: CleanRL's
    ppo_procgen. 'keras': Glorot-uniform weights and zero biases in every layer, the heads too:
    a Keras model's defaults (the AIcrowd starter kit's and LARS12llt's IMPALA-CNN)."""
    center_inputs: bool = checked(False, rule=flag)
    """Scale pixels as (x - 128) / 255, centred on 0 (LARS12llt's entry), not x / 255
    (train-procgen, CleanRL). The convolutions' zero padding then stands for mid-grey, not black."""
    channels_last: bool = checked(True, rule=flag)
    """NHWC memory format for the convolutions (~1.7x faster training on CPU)."""
    precision: str = checked("fp32", rule=one_of(PRECISIONS))
    """The network's arithmetic: 'fp32' (float32 throughout); 'tf32' (float32 tensors, with a
    GPU's TF32 tensor cores in matmuls and convolutions: inputs rounded to a 10-bit mantissa,
    sums in float32; on a CPU the same as fp32); 'bf16' (bfloat16 autocast of the trunk, on a
    CPU too; heads, losses and optimizer in float32). A trial's default is `auto`
    (TrialConfig.precision)."""
    cuda_graph: bool = checked(True, rule=flag)
    """A GPU trial that samples in its own process (num_env_runners 0) replays its rollout's
    forward (ppo, appo) from a CUDA graph: one launch per step instead of one per kernel, the
    same numbers (checked bit for bit at capture, else eager with a warning:
    `rlsweep.trial.cuda_graphs`). false: the eager forward. No effect without a GPU."""


@dataclass(frozen=True)
class AugmentConfig(ConfigPart):
    """Which augmentation the learner applies to its minibatches, and how strongly."""

    augment: str = checked("none", rule=one_of(AUGMENTATIONS))
    """One of AUGMENTATIONS; 'all' draws one of the five transforms per sample."""
    augment_p: float = checked(1.0, rule=probability)
    """Probability that a sample is augmented at all (else it passes through unchanged)."""
    augment_pad: int = checked(4, rule=integer(1))
    """translate / pad_crop: content moves by up to this many pixels along each axis."""
    augment_scale_min: float = checked(0.8, rule=fraction)
    """crop_resize: the crop's side is a fraction s ~ U[augment_scale_min, 1] of the image's."""


@dataclass(frozen=True)
class BudgetConfig(Validated):
    """A trial's seed, how long it trains, and when it evaluates and checkpoints."""

    seed: int = checked(0, rule=integer(0))
    """Seeds torch, RLlib and every env of the trial."""
    total_env_steps: int = checked(25_000_000, rule=integer(1))
    """Training budget in env steps; the trial stops at the first iteration reaching it."""
    eval_interval: int = checked(10, rule=integer(1))
    """Evaluate on unseen levels every this many iterations (and always at the end)."""
    eval_episodes: int = checked(32, rule=integer(1))
    """Unseen-level episodes per evaluation (one per env, so no bias to short episodes)."""
    checkpoint_every_s: float = checked(600.0, rule=non_negative)
    """Checkpoint when this many seconds of trial time have passed since the last checkpoint
    (checked after each iteration; 0 = off). Trials also checkpoint at the end and when the sweep
    is interrupted (Ctrl-C, SIGTERM), so a resumed or retried trial loses at most ~10 minutes."""
    checkpoint_interval: int = checked(0, rule=integer(0))
    """Also checkpoint every this many iterations; 0 = off."""

    def evaluates(self, iteration: int, env_steps: float) -> bool:
        """Whether the trial's iteration `iteration` (from 1), ending at `env_steps`, evaluates:
        every eval_interval-th, and the last (the first to reach the budget)."""
        return env_steps >= self.total_env_steps or iteration % self.eval_interval == 0


def _is_lr_schedule(points: Any) -> bool:
    if not isinstance(points, list | tuple) or not points:
        return False
    if not all(isinstance(p, list | tuple) and len(p) == 2 for p in points):
        return False
    steps = [step for step, _ in points]
    return (
        all(is_int(step, minimum=0) for step in steps)
        and steps[0] == 0
        and all(a < b for a, b in zip(steps, steps[1:], strict=False))
        and all(positive(lr) for _, lr in points)
    )


_LR_SCHEDULE = Rule(
    _is_lr_schedule,
    "[[env_step, lr], ...] with steps increasing from 0 and every lr > 0",
    convert=lambda points: tuple(tuple(p) for p in points),
)


@dataclass(frozen=True)
class AlgorithmConfig(Validated):
    """The algorithm and its update: PPO's hyperparameters, the ones that make sense elsewhere
    shared (see `algorithm`), and the sampling that makes a train batch."""

    algorithm: str = checked("ppo", rule=one_of(ALGORITHMS))
    """ppo | impala | appo | dqn (RLlib new API stack, all on the IMPALA-CNN). The PPO fields
    below that make sense elsewhere are shared: gamma, lr/lr_schedule, grad_clip, rollout and
    env-runner shape, and for impala/appo also vf/entropy coefficients, minibatch and epochs
    (appo: clip_param and the KL fields too); dqn's replay minibatch is minibatch_size."""
    gamma: float = checked(0.999, rule=fraction)
    """Discount."""
    lambda_: float = checked(0.95, rule=probability)
    """GAE lambda."""
    lr: float = checked(5e-4, rule=positive)
    """Adam learning rate (ignored when lr_schedule is set)."""
    lr_schedule: tuple[tuple[int, float], ...] | None = checked(None, rule=optional(_LR_SCHEDULE))
    """Piecewise-linear [[env_step, lr], ...] starting at step 0 (RLlib's schedule semantics)."""
    clip_param: float = checked(0.2, rule=positive)
    """PPO ratio clip."""
    vf_clip_param: float = checked(0.2, rule=positive)
    """Value clip; what it clips depends on vf_clip_mode."""
    vf_clip_mode: str = checked("ppo2", rule=one_of(VF_CLIP_MODES))
    """loss: clamp each squared value error at vf_clip_param (RLlib's new API stack) |
    ppo2: keep the value within +-vf_clip_param of the rollout's estimate, counting the larger of
    the clipped and unclipped squared errors (openai/baselines PPO2 as in Cobbe et al. 2019,
    CleanRL's clip_vloss, RLlib before its new API stack). ppo only: the other algorithms'
    value losses are RLlib's own."""
    vf_loss_coeff: float = checked(0.25, rule=non_negative)
    """Value loss weight on the mean squared error (PPO2's 0.5 x squared error x vf_coef 0.5)."""
    entropy_coeff: float = checked(0.01, rule=non_negative)
    """Entropy bonus weight."""
    kl_coeff: float = checked(0.0, rule=non_negative)
    """Initial KL penalty coefficient; 0 disables the KL term."""
    kl_target: float = checked(0.01, rule=positive)
    """KL target for the adaptive coefficient."""
    grad_clip: float | None = checked(0.5, rule=optional(positive, "to disable"))
    """Global gradient-norm clip; None disables."""
    rollout_length: int = checked(256, rule=integer(1))
    """Env steps per env per rollout."""
    num_envs_per_env_runner: int = checked(64, rule=integer(1))
    """Envs batched in one envpool per EnvRunner."""
    num_env_runners: int = checked(0, rule=integer(0))
    """Remote EnvRunner actors; 0 samples in the trial's own process."""
    env_groups: int = checked(1, rule=integer(1))
    """Each EnvRunner's envs as this many envpools, stepped in turn (double-buffered sampling): a
    group's envs step while the module infers on the next group's; the groups share the
    EnvRunner's envpool threads. Opt-in: on an H100 node with 16 CPUs a GPU trial ran
    1.3-1.45x faster with 1 group than with 2, and on 2 CPUs it sampled 1.25-1.3x faster
    (docs/gpu.md). The same algorithm, but a group after the first plays levels of its own
    drawing: envpool draws each env's levels from its pool's seed and its index in the pool,
    so 1 and 2 groups play different levels from one seed."""
    train_batch_size: int | None = checked(None, rule=optional(integer(1)))
    """Env steps per iteration; None = rollout_length * envs * max(1, env runners)."""
    minibatch_size: int = checked(2048, rule=integer(1))
    """SGD minibatch size."""
    num_epochs: int = checked(3, rule=integer(1))
    """SGD passes over each train batch."""
    minibatching: str = checked("shuffle", rule=one_of(MINIBATCHINGS))
    """shuffle: every epoch a fresh permutation of the batch's real transitions, cut into
    train_batch / minibatch_size minibatches of exactly minibatch_size (baselines' PPO2,
    CleanRL, 2020's RLlib without a multi-GPU optimizer) | fixed: the real transitions shuffled
    once per batch and cut so, each epoch visiting those minibatches in a fresh order (2020's
    RLlib on TensorFlow, whose LocalMultiGPUOptimizer loaded the batch shuffled once and then
    permuted the minibatches' offsets each epoch) | rllib: RLlib's cyclic iterator over the
    batch with its bootstrap rows (shuffled only when it wraps around). ppo only."""
    advantage_norm: str = checked("minibatch", rule=one_of(ADVANTAGE_NORMS))
    """Standardize advantages over each minibatch (CleanRL's: the unbiased std + 1e-8; PPO2
    takes the biased std) |
    batch: over the batch's real transitions (2020's RLlib: its `standardized`, numpy's std, at
    least 1e-4) | rllib: as batch, bootstrap rows included (RLlib's new API stack). ppo only."""
    adam_eps: float = checked(1e-5, rule=positive)
    """Adam's epsilon (PPO2 and CleanRL: 1e-5; torch's default, RLlib's: 1e-8). ppo only."""
    overlap: bool = checked(False, rule=flag)
    """Sample the next train batch while learning on this one (`rlsweep.trial.overlap`): the
    EnvRunners and the learner work at the same time, but each update learns from a batch sampled
    with the weights before the previous update (one update of policy lag: PPO's ratio and GAE's
    values then stand against an older policy than the reference's). For GPU nodes: where the CPUs
    both sample and learn it is slower (0.90x on 2 cores). false: the reference's synchronous
    PPO. ppo only."""

    @property
    def effective_train_batch_size(self) -> int:
        return self._round() if self.train_batch_size is None else self.train_batch_size

    def _round(self) -> int:
        """Env steps of one sampling round (SAMPLING_ROUND)."""
        return self.rollout_length * self.num_envs_per_env_runner * max(1, self.num_env_runners)

    def _across_fields(self) -> list[ConfigError]:
        """The train batch: whole sampling rounds, cut into minibatches as the algorithm needs."""
        batch, per_round, rollout = (
            self.effective_train_batch_size,
            self._round(),
            self.rollout_length,
        )
        shuffled = self.algorithm == "ppo" and self.minibatching == "shuffle"
        vtrace = self.algorithm in ("impala", "appo")
        rules = [
            (
                "train_batch_size",
                batch % per_round == 0,
                f"a multiple of {SAMPLING_ROUND} = {per_round}",
            ),
            (
                "minibatch_size",
                self.minibatch_size <= batch,
                f"<= the train batch ({batch} env steps)",
            ),
            (
                "minibatch_size",
                not shuffled or batch % self.minibatch_size == 0,
                f"a divisor of the train batch ({batch} env steps): minibatching shuffle cuts "
                "it into equal minibatches",
            ),
            (
                "env_groups",
                self.env_groups <= self.num_envs_per_env_runner,
                f"at most num_envs_per_env_runner ({self.num_envs_per_env_runner})",
            ),
            (
                "overlap",
                not self.overlap or self.algorithm == "ppo",
                "false unless algorithm is ppo",
            ),
            # RLlib's IMPALA splits the batch into whole rollout fragments.
            (
                "minibatch_size",
                not vtrace or self.minibatch_size % rollout == 0,
                f"a multiple of rollout_length ({rollout}) for {self.algorithm}",
            ),
        ]
        return failures(self, rules)


_NUM_GPUS = Rule(
    lambda v: is_number(v) and v >= 0 and check_num_gpus(v),
    "0 (CPU), a fraction 0 < x <= 1 of one GPU, or a whole number of GPUs",
)
_RESOURCES = Rule(
    lambda v: (
        isinstance(v, dict)
        and all(isinstance(k, str) and is_number(x) and x > 0 for k, x in v.items())
    ),
    "a mapping of Ray resource name -> amount > 0",
)


@dataclass(frozen=True)
class ResourcesConfig(Validated):
    """What a trial's processes ask of Ray, and how its GPU computes."""

    num_gpus: float = checked(0, rule=_NUM_GPUS)
    """GPUs of the trial (0 = CPU). The learner trains on it; with num_env_runners 0 the
    rollout's inference runs on it too, batched over all of the trial's envs (one envpool in the
    trial's process on its num_cpus threads; see rlsweep.plan.placement), while remote EnvRunners
    (a cluster's CPU nodes) infer on their own CPUs. A fraction (0.25) packs several trials per
    GPU; above 1, a whole number."""
    deterministic: bool = checked(False, rule=flag)
    """With a GPU: cuDNN's deterministic convolution algorithms, chosen without benchmarking
    (what RLlib's seeding sets; slower). False lets cuDNN time the candidates for each shape and
    keep the fastest (`cudnn.benchmark`), which can differ from run to run: then two GPU runs of
    one seed agree in distribution, not bit for bit. No effect on a CPU, where runs of one seed
    repeat exactly."""
    num_cpus: int = checked(1, rule=integer(1))
    """CPUs of the trial's own process (learner, and sampling when num_env_runners=0); torch
    uses this many threads."""
    learner_resources: dict[str, float] = checked(rule=_RESOURCES, factory=dict)
    """Custom Ray resources the trial's own process (the learner) asks for, which places it on
    nodes that have them: e.g. {group_learner: 0.01} on a SageMaker job's learner group."""
    env_runner_resources: dict[str, float] = checked(rule=_RESOURCES, factory=dict)
    """Custom Ray resources each remote EnvRunner asks for (e.g. {group_rollout: 0.01})."""

    @property
    def on_gpu(self) -> bool:
        """The trial learns on a GPU (`num_gpus` > 0): its device (`rlsweep.plan.placement`),
        its precision where `auto`, and whether its sweep takes GPUs all follow from this."""
        return self.num_gpus > 0


@dataclass(frozen=True)
class VTraceConfig(Validated):
    """V-trace's importance-ratio clips (algorithms impala and appo)."""

    vtrace_clip_rho: float = checked(1.0, rule=positive)
    """V-trace clip of the importance ratio in the value targets (rho-bar)."""
    vtrace_clip_pg_rho: float = checked(1.0, rule=positive)
    """V-trace clip of the importance ratio in the policy-gradient advantages."""


@dataclass(frozen=True)
class DQNConfig(Validated):
    """DQN's prioritized replay, exploration and targets (algorithm dqn; its replay minibatch is
    TrialConfig.minibatch_size)."""

    replay_capacity: int = checked(50_000, rule=integer(1))
    """Replay buffer size in env steps (uint8 frames: ~12 KB each per stacked 3x64x64)."""
    replay_alpha: float = checked(0.6, rule=probability)
    """Prioritization exponent; 0 = uniform replay."""
    replay_beta: float = checked(0.4, rule=probability)
    """Importance-sampling correction exponent."""
    learning_starts: int = checked(10_000, rule=integer(0))
    """Env steps sampled before the first update."""
    target_update_freq: int = checked(8_000, rule=integer(1))
    """Env steps between target-network syncs."""
    epsilon_start: float = checked(1.0, rule=probability)
    """Exploration epsilon at step 0, decayed linearly ..."""
    epsilon_end: float = checked(0.01, rule=probability)
    """... to this (also the epsilon of epsilon-greedy unseen-level evaluation) ..."""
    epsilon_steps: int = checked(250_000, rule=integer(1))
    """... over this many env steps."""
    n_step: int = checked(3, rule=integer(1))
    """n-step returns (must be <= rollout_length)."""
    double_q: bool = checked(True, rule=flag)
    """Double Q-learning targets."""
    dueling: bool = checked(True, rule=flag)
    """Dueling value/advantage heads."""
    training_intensity: float | None = checked(
        None, rule=optional(positive, "for one update per sampling round")
    )
    """Replayed / sampled env steps; None = one minibatch update per sampling round."""
    checkpoint_replay_buffer: bool = checked(False, rule=flag)
    """Save the replay buffer with every checkpoint, so that a restored trial (a retry, a
    resume, a spot reclaim) replays what it had rather than refilling from empty. Costs up to
    replay_capacity x frame size of disk and write time per checkpoint (~600 MB at 50k 64x64
    RGB frames)."""
