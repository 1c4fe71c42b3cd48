"""One trial's complete, flat configuration: what it plays, the model, PPO, budget and evaluation.

A Tune trial receives this as a plain dict (`TrialConfig.to_dict()`); `TrialConfig.from_dict`
rebuilds and validates it. The defaults are openai/train-procgen's run (Cobbe et al., 2019,
`baselines/cobbe2019.yaml` states the same values with their sources): baselines' PPO2 update on
64 envs x 256 steps with VecNormalize'd rewards; a test holds the two equal.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from rlsweep.errors import ConfigError
from rlsweep.spec.subconfigs import ALGORITHMS as ALGORITHMS  # declared with its field; public here
from rlsweep.spec.subconfigs import (
    PRECISIONS,
    SAMPLING_ROUND,
    AlgorithmConfig,
    AugmentConfig,
    BudgetConfig,
    DQNConfig,
    EnvConfig,
    ModelConfig,
    ResourcesConfig,
    VTraceConfig,
    resolved_precision,
)
from rlsweep.spec.validators import Validated, build, checked, failures, flag, one_of

SUB_CONFIGS = (
    EnvConfig,
    ModelConfig,
    AugmentConfig,
    BudgetConfig,
    AlgorithmConfig,
    ResourcesConfig,
    VTraceConfig,
    DQNConfig,
)
"""The parts TrialConfig inherits and `part` builds by field name (rlsweep.spec.subconfigs)."""
RENAMED = {
    "bf16": "renamed: write precision: bf16 (bf16: false is precision: fp32)",
    "tf32": "renamed: write precision: tf32 (tf32: false is precision: fp32)",
}
"""Trial keys of earlier versions -> what to write now: an error that says so, never a silent
translation (a spec means one thing)."""
EARLIER_DEFAULTS = {
    "init": "torch",  # until 2026-11-28 every net started from PyTorch's defaults
    "pool_padding": "torch",  # until 2026-11-28 every max-pool padded each edge
}
"""Trial fields added with a default that runs otherwise than rlsweep ran before them, and
what ran before. A trial's recorded config holds every field of the rlsweep that recorded it
(`rlsweep.run.tune_bridge.param_space`), so one without such a field ran with this value: a
sweep begun before the field resumes, and reports, as it ran (`recorded_config`)."""


@dataclass(frozen=True)
class Unread:
    """A field no part of a trial reads while another field (`by`) holds what `test` accepts:
    `state` says so after that field's key path, `fix` how to have it read."""

    by: str
    test: Callable[[Any], bool]
    state: str
    fix: str


def _only(*algorithms: str) -> Unread:
    """The condition of a field that only `algorithms` read (`rlsweep.trial.algos`)."""
    names = " or ".join(algorithms)
    state = f"is not {names}" if len(algorithms) == 1 else f"is neither {' nor '.join(algorithms)}"
    return Unread("algorithm", lambda v: v not in algorithms, state, f"set algorithm: {names}")


_NO_NORM = Unread("normalize_reward", lambda v: not v, "is false", "set normalize_reward: true")
_NO_KL = Unread("kl_coeff", lambda v: v == 0, "is 0: no KL penalty", "set kl_coeff > 0")
_PPO, _CLIPPED, _VTRACE, _DQN = (
    _only("ppo"),
    _only("ppo", "appo"),
    _only("impala", "appo"),
    _only("dqn"),
)
_NOT_DQN = Unread("algorithm", lambda v: v == "dqn", "is dqn", "set algorithm: ppo, impala or appo")
UNREAD: dict[str, tuple[Unread, ...]] = {
    "lr": (
        Unread(
            "lr_schedule",
            lambda v: v is not None,
            "is set and replaces lr",
            "set lr_schedule: null",
        ),
    ),
    "framestack_k": (
        Unread("framestack", lambda v: v == "none", "is none", "set framestack: stack or gap"),
    ),
    "reward_norm_gamma": (_NO_NORM,),
    "reward_clip": (_NO_NORM,),
    "kl_coeff": (_CLIPPED,),
    "kl_target": (_CLIPPED, _NO_KL),
    "augment_p": (Unread("augment", lambda v: v == "none", "is none", "set an augmentation"),),
    "augment_pad": (
        Unread(
            "augment",
            lambda v: v not in ("translate", "pad_crop", "all"),
            "shifts no image",
            "set augment: translate, pad_crop or all",
        ),
    ),
    "augment_scale_min": (
        Unread(
            "augment",
            lambda v: v not in ("crop_resize", "all"),
            "crops no image",
            "set augment: crop_resize or all",
        ),
    ),
    **dict.fromkeys(
        ("lambda_", "vf_clip_param", "vf_clip_mode", "minibatching", "advantage_norm", "adam_eps"),
        (_PPO,),
    ),
    "clip_param": (_CLIPPED,),
    **dict.fromkeys(("vf_loss_coeff", "entropy_coeff", "num_epochs"), (_NOT_DQN,)),
    **dict.fromkeys(("vtrace_clip_rho", "vtrace_clip_pg_rho"), (_VTRACE,)),
    **dict.fromkeys(
        (
            "replay_capacity",
            "replay_alpha",
            "replay_beta",
            "learning_starts",
            "target_update_freq",
            "epsilon_start",
            "epsilon_end",
            "epsilon_steps",
            "n_step",
            "double_q",
            "dueling",
            "training_intensity",
        ),
        (_DQN,),
    ),
}
"""Trial fields that a value of another field makes do nothing, each with every such condition:
`algos._lr`, the FrameStacker, the RewardNormalizer, `algos._kl_loss` and `augment.augment`
(translate and pad_crop the pad, crop_resize the scale) read them only otherwise, and
`algos.algorithm_config` reads each algorithm's own options only for it (PPO's learner options,
PPO's and APPO's clip and KL, V-trace's clips, DQN's replay and exploration; DQN's update no
entropy, value loss or epochs). A spec that sets one where every trial it reaches holds such a
value is refused (`SpecChecks._ignored_errors`: a search over it would run one trial again and
again); tests/test_config.py holds each against its reader."""


def unread_everywhere(configs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The UNREAD fields that none of `configs` (trial configs, as rows of a results frame)
    reads: in each, one of the field's conditions holds. A missing value (None, NaN) is None,
    as a frame holds it."""
    rows = list(configs)

    def value(row: Mapping[str, Any], key: str) -> Any:
        v = row.get(key)
        return None if isinstance(v, float) and math.isnan(v) else v

    return [
        key
        for key, conditions in UNREAD.items()
        if rows
        and all(key in row for row in rows)
        and all(any(c.by in row and c.test(value(row, c.by)) for c in conditions) for row in rows)
    ]


def recorded_config(config: dict[str, Any]) -> dict[str, Any]:
    """A trial config as a sweep recorded it (Tune's params, trial.json), with the value it ran
    with for each EARLIER_DEFAULTS field it predates."""
    return {**{k: v for k, v in EARLIER_DEFAULTS.items() if k not in config}, **config}


Part = TypeVar("Part", bound=Validated)
"""One of SUB_CONFIGS."""


@dataclass(frozen=True)
class TrialConfig(
    DQNConfig,
    VTraceConfig,
    ResourcesConfig,
    AlgorithmConfig,
    BudgetConfig,
    AugmentConfig,
    ModelConfig,
    EnvConfig,
):
    """One trial, flat: the fields of its parts (rlsweep.spec.subconfigs), each declared, documented
    and given its rule there once, in this order: EnvConfig (what it plays), ModelConfig,
    AugmentConfig, BudgetConfig (seed, budget, evaluation, checkpoints), AlgorithmConfig (the
    algorithm, PPO and the shared update), ResourcesConfig, and the options of one algorithm:
    VTraceConfig (impala, appo) and DQNConfig. `part(cls)` builds a part back from the fields
    of the same names; the rules across parts are below."""

    normalize_reward: bool = checked(True, rule=flag)
    """On in a trial, as in train-procgen (a bare EnvConfig plays raw rewards)."""
    precision: str = checked("auto", rule=one_of(("auto", *PRECISIONS)))
    """ModelConfig.precision, or `auto` (the default): fp32 on a CPU, as published;
    subconfigs.GPU_PRECISION on a GPU, the fastest that learned as fp32 did (docs/gpu.md,
    Precision). The network gets it resolved (`model_config`)."""

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, d: dict[str, Any], path: str = "") -> TrialConfig:
        """Build from a plain dict (`path`: its key path in a spec): unknown keys, with a
        did-you-mean (or what a RENAMED key is now), and bad values, all at once."""
        try:
            return build(cls, d, renamed=RENAMED)
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
        names (the precision resolved: `resolved_precision`); it validates them, so its errors
        name the trial's keys."""
        values = {f.name: getattr(self, f.name) for f in fields(cls)}
        if "precision" in values:
            values["precision"] = resolved_precision(self.precision, gpu=self.on_gpu)
        return cls(**values)

    def env_config(self) -> EnvConfig:
        return self.part(EnvConfig)

    def model_config(self) -> ModelConfig:
        return self.part(ModelConfig)

    def augment_config(self) -> AugmentConfig:
        return self.part(AugmentConfig)

    def _across_fields(self) -> list[ConfigError]:
        """The rules across parts (each field is valid on its own here)."""
        batch, rollout = self.effective_train_batch_size, self.rollout_length
        dqn = self.algorithm == "dqn"
        rules = [
            # An iteration samples a whole train batch: a smaller budget would silently run more.
            (
                "total_env_steps",
                self.total_env_steps >= batch,
                f">= {batch:,} env steps, one iteration (the train batch: {SAMPLING_ROUND}, or "
                "train_batch_size)",
            ),
            # The Q-network has no augmentation hook; refuse rather than silently ignore it.
            ("augment", not dqn or self.augment == "none", "none for algorithm dqn"),
            ("n_step", not dqn or self.n_step <= rollout, f"<= rollout_length ({rollout})"),
            (
                "replay_capacity",
                not dqn or self.replay_capacity >= self.minibatch_size,
                f">= minibatch_size ({self.minibatch_size})",
            ),
        ]
        return failures(self, rules)
