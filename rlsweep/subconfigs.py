"""The parts of a trial that the env, the network and the augmentation take, as small frozen
dataclasses validated at construction: `EnvConfig` (rlsweep.envs), `ModelConfig`
(rlsweep.models), `AugmentConfig` (rlsweep.augment). Each becomes a plain dict one way
(`ConfigPart.to_dict`), as RLlib's env and module configs take it.

`TrialConfig` inherits their fields (each is declared and documented here, once), so a trial's
keys are the parts' keys, `TrialConfig.part(cls)` builds a part by field name, and a validation
error names the trial's key. They live here, away from torch and gymnasium, so that loading and
validating a spec (`import rlsweep`, `rlsweep validate`, `rlsweep report`) imports neither.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rlsweep import procgen
from rlsweep.errors import ConfigError
from rlsweep.validators import is_int, is_number

FRAMESTACKS = ("none", "stack", "gap")
TIME_LIMITS = ("terminate", "truncate")
DOWNSAMPLES = ("maxpool", "conv")
TRANSFORMS = ("flip", "rotate", "crop_resize", "translate", "pad_crop")
"""The augmentations proper; `all` draws one of them per sample. Order fixes the op ids."""
AUGMENTATIONS = ("none", *TRANSFORMS, "all")


def _fail(key: str, value: Any, allowed: str) -> None:
    raise ConfigError(key, f"got {value!r}; allowed: {allowed}")


class ConfigPart:
    """The base of the parts below: the one way a part becomes a plain dict."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict, tuples as lists (as YAML and JSON give them back)."""
        return {k: _plain(v) for k, v in asdict(self).items()}


def _plain(v: Any) -> Any:
    return [_plain(x) for x in v] if isinstance(v, tuple) else v


@dataclass(frozen=True)
class EnvConfig(ConfigPart):
    """What a trial plays."""

    game: str = "coinrun"
    """One of the 16 Procgen games."""
    distribution_mode: str = "easy"
    """easy, hard, or a game's extra modes (extreme, memory, exploration)."""
    num_levels: int | None = None
    """Training levels; None = the mode's default (easy 200, others 500). 0 = all levels.
    Exploration mode plays one fixed level per game (as procgen does): only None."""
    start_level: int = 0
    """First training level seed (exploration mode: only 0)."""
    framestack: str = "none"
    """'none'; 'stack' = the last k frames; 'gap' = frames t and t-(k-1) only."""
    framestack_k: int = 4
    """k for 'stack' and 'gap'."""
    reward_shaping: bool = False
    """Train on sign(r)*(sqrt(|r|+1)-1) + 0.001*r; reported returns stay raw."""
    normalize_reward: bool = False
    """Scale rewards by a running std of the discounted return, then clip: baselines'
    VecNormalize(ob=False) (train-procgen), gymnasium's NormalizeReward + clip (CleanRL).
    Statistics are per env runner. Reported returns stay raw. Off for a bare env; on in
    TrialConfig, as in train-procgen."""
    reward_norm_gamma: float = 0.99
    """Discount of the return whose std normalizes rewards: VecNormalize's own 0.99 in
    train-procgen, the agent's gamma (0.999) in CleanRL."""
    reward_clip: float = 10.0
    """Clip normalized rewards to [-reward_clip, reward_clip]."""
    time_limit: str = "terminate"
    """How an episode that hits the game's time limit ends: 'terminate' (no bootstrap; procgen
    0.10.7 reports a plain done, and train-procgen, CleanRL and 2020's RLlib treat it as
    terminal) or 'truncate' (bootstrap from the last state's value; envpool reports it so)."""

    def __post_init__(self) -> None:
        if self.game not in procgen.GAMES:
            _fail("game", self.game, ", ".join(procgen.GAMES))
        modes = procgen.modes_for(self.game)
        if self.distribution_mode not in modes:
            raise ConfigError(
                "distribution_mode",
                f"got {self.distribution_mode!r}; allowed for {self.game}: {', '.join(modes)}",
            )
        if self.num_levels is not None and not is_int(self.num_levels, minimum=0):
            _fail("num_levels", self.num_levels, "an integer >= 0, or null")
        if not is_int(self.start_level, minimum=0):
            _fail("start_level", self.start_level, "an integer >= 0")
        if self.distribution_mode == "exploration":
            # procgen 0.10.7 plays hard mode on one fixed level per game and refuses level
            # settings; envpool aborts the process (CHECK_EQ) unless num_levels=start_level=0.
            level = procgen.exploration_level(self.game)
            why = f"exploration mode plays {self.game}'s one fixed level, seed {level}"
            if self.num_levels is not None:
                _fail("num_levels", self.num_levels, f"null ({why})")
            if self.start_level != 0:
                _fail("start_level", self.start_level, f"0 ({why})")
        if self.framestack not in FRAMESTACKS:
            _fail("framestack", self.framestack, ", ".join(FRAMESTACKS))
        if not is_int(self.framestack_k, minimum=2):
            _fail("framestack_k", self.framestack_k, "an integer >= 2")
        for flag in ("reward_shaping", "normalize_reward"):
            if not isinstance(getattr(self, flag), bool):
                _fail(flag, getattr(self, flag), "true, false")
        if not (is_number(self.reward_clip) and self.reward_clip > 0):
            _fail("reward_clip", self.reward_clip, "a number > 0")
        if not (is_number(self.reward_norm_gamma) and 0 < self.reward_norm_gamma <= 1):
            _fail("reward_norm_gamma", self.reward_norm_gamma, "0 < reward_norm_gamma <= 1")
        if self.time_limit not in TIME_LIMITS:
            _fail("time_limit", self.time_limit, ", ".join(TIME_LIMITS))

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

    widths: tuple[int, ...] = (16, 32, 32)
    """Channels per stage; (32, 64, 64) is the 'wide' variant."""
    downsample: str = "maxpool"
    """'maxpool' (3x3, stride 2, as in IMPALA) or 'conv' (a stride-2 3x3 conv)."""
    global_pool: bool = False
    """Average-pool the last stage over space before the dense layer."""
    dense: int = 256
    """Width of the dense layer."""
    channels_last: bool = True
    """NHWC memory format for the convolutions (~1.7x faster training on CPU)."""
    bf16: bool = False
    """bfloat16 autocast for the trunk (~2x faster on CPU; effect on learning unmeasured)."""

    def __post_init__(self) -> None:
        widths = tuple(self.widths) if isinstance(self.widths, list | tuple) else ()
        if not widths or not all(is_int(w, minimum=1) for w in widths):
            _fail("widths", self.widths, "a non-empty list of positive integers")
        object.__setattr__(self, "widths", widths)
        if self.downsample not in DOWNSAMPLES:
            _fail("downsample", self.downsample, ", ".join(DOWNSAMPLES))
        if not is_int(self.dense, minimum=1):
            _fail("dense", self.dense, "an integer > 0")
        for flag in ("global_pool", "channels_last", "bf16"):
            if not isinstance(getattr(self, flag), bool):
                _fail(flag, getattr(self, flag), "true, false")


@dataclass(frozen=True)
class AugmentConfig(ConfigPart):
    """Which augmentation the learner applies to its minibatches, and how strongly."""

    augment: str = "none"
    """One of AUGMENTATIONS; 'all' draws one of the five transforms per sample."""
    augment_p: float = 1.0
    """Probability that a sample is augmented at all (else it passes through unchanged)."""
    augment_pad: int = 4
    """translate / pad_crop: content moves by up to this many pixels along each axis."""
    augment_scale_min: float = 0.8
    """crop_resize: the crop's side is a fraction s ~ U[augment_scale_min, 1] of the image's."""

    def __post_init__(self) -> None:
        if self.augment not in AUGMENTATIONS:
            _fail("augment", self.augment, ", ".join(AUGMENTATIONS))
        if not (is_number(self.augment_p) and 0 <= self.augment_p <= 1):
            _fail("augment_p", self.augment_p, "a number in [0, 1]")
        if not is_int(self.augment_pad, minimum=1):
            _fail("augment_pad", self.augment_pad, "an integer >= 1")
        if not (is_number(self.augment_scale_min) and 0 < self.augment_scale_min <= 1):
            _fail("augment_scale_min", self.augment_scale_min, "a number in (0, 1]")
