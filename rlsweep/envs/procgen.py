"""Procgen facts: games, distribution modes, default level splits, time limits and score
normalization.

Normalization constants are those of openai/train-procgen (`train_procgen/constants.py`), used
by Cobbe et al. (2019): normalized = (R - min) / (max - min), per game, for easy and hard only.
Other modes have no reference constants: their normalized scores are NaN (`normalization_note`
says why), never another mode's constants.
"""

from __future__ import annotations

import math

# game: (easy_min, easy_max, hard_min, hard_max)
_NORMALIZATION: dict[str, tuple[float, float, float, float]] = {
    "coinrun": (5, 10, 5, 10),
    "starpilot": (2.5, 64, 1.5, 35),
    "caveflyer": (3.5, 12, 2, 13.4),
    "dodgeball": (1.5, 19, 1.5, 19),
    "fruitbot": (-1.5, 32.4, -0.5, 27.2),
    "chaser": (0.5, 13, 0.5, 14.2),
    "miner": (1.5, 13, 1.5, 20),
    "jumper": (1, 10, 1, 10),
    "leaper": (1.5, 10, 1.5, 10),
    "maze": (5, 10, 4, 10),
    "bigfish": (1, 40, 0, 40),
    "heist": (3.5, 10, 2, 10),
    "climber": (2, 12.6, 1, 12.6),
    "plunder": (4.5, 30, 3, 30),
    "ninja": (3.5, 10, 2, 10),
    "bossfight": (0.5, 13, 0.5, 13),
}

GAMES: tuple[str, ...] = tuple(sorted(_NORMALIZATION))

ONE_REWARD_GAMES = frozenset({"coinrun", "heist", "jumper", "leaper", "maze", "ninja"})
"""Games whose only reward is a level's completion, 10 (procgen 0.10.7, src/games/<game>.cpp:
the one `step_data.reward` each sets): any reshaping of their rewards is a constant rescale."""

# envpool's task-id suffix per mode, and which games offer which mode (procgen's game.cpp).
_MODE_SUFFIX = {
    "easy": "Easy",
    "hard": "Hard",
    "extreme": "Extreme",
    "memory": "Memory",
    "exploration": "Exploration",
}
DISTRIBUTION_MODES: tuple[str, ...] = tuple(_MODE_SUFFIX)
_EXTRA_MODES: dict[str, tuple[str, ...]] = {
    "caveflyer": ("memory", "exploration"),
    "chaser": ("extreme",),
    "climber": ("exploration",),
    "coinrun": ("exploration",),
    "dodgeball": ("extreme", "memory"),
    "heist": ("memory", "exploration"),
    "jumper": ("memory", "exploration"),
    "leaper": ("extreme", "exploration"),
    "maze": ("memory", "exploration"),
    "miner": ("memory",),
    "ninja": ("exploration",),
    "starpilot": ("extreme",),
}

# Exploration mode is not a level distribution: procgen 0.10.7 (procgen/env.py,
# EXPLORATION_LEVEL_SEEDS) plays hard mode on one fixed level per game, and refuses num_levels
# and start_level; envpool does the same (envpool/procgen/procgen_env.h GetExplorationLevelSeed)
# and aborts the process unless it gets num_levels=0 and start_level=0.
EXPLORATION_LEVEL_SEEDS: dict[str, int] = {
    "coinrun": 1949448038,
    "caveflyer": 1259048185,
    "leaper": 1318677581,
    "jumper": 1434825276,
    "maze": 158988835,
    "heist": 876640971,
    "climber": 1561126160,
    "ninja": 1123500215,
}

# Cobbe et al. (2019): 200 training levels in easy mode, 500 in hard; we use 500 for extreme
# and memory too (they are at least as hard). Exploration mode plays its one fixed level.
DEFAULT_NUM_LEVELS = {"easy": 200, "hard": 500, "extreme": 500, "memory": 500, "exploration": 1}


SPLITS = ("train", "test")
"""The level splits a trial is scored on: its training levels, and levels it never trains on
(unseen). Evaluation plays both; a published number names the one it was measured on."""


def has_unseen_levels(mode: str, num_levels: int | None) -> bool:
    """Whether a trial training on `num_levels` (None: the mode's default) in `mode` has levels
    it never trains on: not on every level (0), whose unseen levels are its training
    distribution, nor in exploration mode, where testing plays the one level training plays."""
    return mode != "exploration" and num_levels != 0


# Episode time limits in steps, procgen 0.10.7: 1000 unless a game sets its own (src/game.cpp
# Game::Game; src/games/{bigfish,bossfight,leaper,maze,plunder}.cpp), whatever the mode, except
# jumper in memory mode (src/games/jumper.cpp, game_reset: 2000). envpool registers one limit
# per game (envpool/procgen/registration.py), so jumper memory would end at 1000 there.
_TIMEOUT = {"bigfish": 6000, "bossfight": 4000, "leaper": 500, "maze": 500, "plunder": 4000}
_MODE_TIMEOUT = {("jumper", "memory"): 2000}

# Modes openai/train-procgen has normalization constants for.
CALIBRATED_MODES = ("easy", "hard")


def modes_for(game: str) -> tuple[str, ...]:
    """Distribution modes envpool offers for `game`."""
    check_game(game)
    return ("easy", "hard", *_EXTRA_MODES.get(game, ()))


def check_game(game: str) -> None:
    if game not in _NORMALIZATION:
        raise ValueError(f"unknown Procgen game {game!r}; allowed: {', '.join(GAMES)}")


def check_mode(game: str, mode: str) -> None:
    allowed = modes_for(game)
    if mode not in allowed:
        raise ValueError(
            f"distribution mode {mode!r} is not offered for {game}; allowed: {', '.join(allowed)}"
        )


def task_id(game: str, mode: str) -> str:
    """envpool task id, e.g. ('coinrun', 'easy') -> 'CoinrunEasy-v0'."""
    check_mode(game, mode)
    return f"{game.capitalize()}{_MODE_SUFFIX[mode]}-v0"


def max_episode_steps(game: str, mode: str) -> int:
    """Procgen 0.10.7's time limit for `game` in `mode` (exploration mode is hard mode)."""
    check_mode(game, mode)
    return _MODE_TIMEOUT.get((game, mode), _TIMEOUT.get(game, 1000))


def exploration_level(game: str) -> int:
    """The one level seed procgen's exploration mode plays for `game`."""
    check_mode(game, "exploration")
    return EXPLORATION_LEVEL_SEEDS[game]


def normalization_note(game: str, mode: str) -> str | None:
    """Why `normalize(game, mode, ...)` is NaN, or None where it is calibrated."""
    check_game(game)
    if mode in CALIBRATED_MODES:
        return None
    return (
        f"no reference normalization constants for {game} {mode} "
        f"(train-procgen calibrates easy and hard only)"
    )


def score_range(game: str, mode: str) -> tuple[float, float]:
    """(min, max) return used for normalization: train-procgen's constants for easy and hard;
    (nan, nan) for the modes it does not calibrate (see `normalization_note`)."""
    check_game(game)
    e_min, e_max, h_min, h_max = _NORMALIZATION[game]
    if mode == "easy":
        return e_min, e_max
    if mode == "hard":
        return h_min, h_max
    return math.nan, math.nan


def normalize(game: str, mode: str, raw_return: float) -> float:
    """Normalized score: 0 at the game's min, 1 at its max (may leave [0, 1]); NaN for modes
    without reference constants (see `normalization_note`)."""
    lo, hi = score_range(game, mode)
    return (raw_return - lo) / (hi - lo)
