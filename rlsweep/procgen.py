"""Procgen facts: games, distribution modes, default level splits and score normalization.

Normalization constants are those of openai/train-procgen (`train_procgen/constants.py`), used
by Cobbe et al. (2019): normalized = (R - min) / (max - min), per game and per mode.
"""

from __future__ import annotations

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

# envpool's task-id suffix per mode, and which games offer which mode (procgen's game.cpp).
_MODE_SUFFIX = {
    "easy": "Easy",
    "hard": "Hard",
    "extreme": "Extreme",
    "memory": "Memory",
    "exploration": "Exploration",
}
MODES: tuple[str, ...] = tuple(_MODE_SUFFIX)
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

# Cobbe et al. (2019): 200 training levels in easy mode, 500 in hard; we use 500 for the
# remaining modes too (they are at least as hard).
DEFAULT_NUM_LEVELS = {"easy": 200, "hard": 500, "extreme": 500, "memory": 500, "exploration": 500}


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


def score_range(game: str, mode: str) -> tuple[float, float]:
    """(min, max) return used for normalization. Modes other than easy use the hard constants,
    as train-procgen does."""
    check_game(game)
    e_min, e_max, h_min, h_max = _NORMALIZATION[game]
    return (e_min, e_max) if mode == "easy" else (h_min, h_max)


def normalize(game: str, mode: str, raw_return: float) -> float:
    """Normalized score: 0 at the game's min, 1 at its max (may leave [0, 1])."""
    lo, hi = score_range(game, mode)
    return (raw_return - lo) / (hi - lo)
