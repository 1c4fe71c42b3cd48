import pytest

from rlsweep.envs import procgen

# (game, easy_min, easy_max, hard_min, hard_max) from openai/train-procgen constants.py
TABLE = [
    ("coinrun", 5, 10, 5, 10),
    ("starpilot", 2.5, 64, 1.5, 35),
    ("caveflyer", 3.5, 12, 2, 13.4),
    ("dodgeball", 1.5, 19, 1.5, 19),
    ("fruitbot", -1.5, 32.4, -0.5, 27.2),
    ("chaser", 0.5, 13, 0.5, 14.2),
    ("miner", 1.5, 13, 1.5, 20),
    ("jumper", 1, 10, 1, 10),
    ("leaper", 1.5, 10, 1.5, 10),
    ("maze", 5, 10, 4, 10),
    ("bigfish", 1, 40, 0, 40),
    ("heist", 3.5, 10, 2, 10),
    ("climber", 2, 12.6, 1, 12.6),
    ("plunder", 4.5, 30, 3, 30),
    ("ninja", 3.5, 10, 2, 10),
    ("bossfight", 0.5, 13, 0.5, 13),
]


def test_sixteen_games():
    assert len(procgen.GAMES) == 16
    assert {row[0] for row in TABLE} == set(procgen.GAMES)


@pytest.mark.parametrize(("game", "e_min", "e_max", "h_min", "h_max"), TABLE)
def test_normalization_matches_table(game, e_min, e_max, h_min, h_max):
    assert procgen.normalize(game, "easy", e_min) == pytest.approx(0.0)
    assert procgen.normalize(game, "easy", e_max) == pytest.approx(1.0)
    assert procgen.normalize(game, "easy", (e_min + e_max) / 2) == pytest.approx(0.5)
    assert procgen.normalize(game, "hard", h_min) == pytest.approx(0.0)
    assert procgen.normalize(game, "hard", h_max) == pytest.approx(1.0)


def test_normalization_is_not_clipped():
    assert procgen.normalize("coinrun", "easy", 0.0) == pytest.approx(-1.0)


def test_modes_and_task_ids():
    assert procgen.modes_for("coinrun") == ("easy", "hard", "exploration")
    assert "extreme" in procgen.modes_for("starpilot")
    assert "memory" in procgen.modes_for("maze")
    assert procgen.task_id("coinrun", "easy") == "CoinrunEasy-v0"
    assert procgen.task_id("caveflyer", "memory") == "CaveflyerMemory-v0"
    with pytest.raises(ValueError, match="not offered for bigfish; allowed: easy, hard"):
        procgen.task_id("bigfish", "memory")
    with pytest.raises(ValueError, match="unknown Procgen game 'pong'"):
        procgen.modes_for("pong")


def test_every_game_and_mode_exists_in_envpool():
    from rlsweep.envs.vector_env import _import_envpool

    registered = set(_import_envpool().list_all_envs())
    for game in procgen.GAMES:
        for mode in procgen.modes_for(game):
            assert procgen.task_id(game, mode) in registered


# --- time limits, exploration levels, uncalibrated modes ------------------------------------


def test_time_limits_follow_procgen_0_10_7():
    # src/game.cpp: 1000 by default; src/games/*.cpp set their own; jumper memory 2000.
    own = {"bigfish": 6000, "bossfight": 4000, "leaper": 500, "maze": 500, "plunder": 4000}
    for game in procgen.GAMES:
        for mode in procgen.modes_for(game):
            expected = 2000 if (game, mode) == ("jumper", "memory") else own.get(game, 1000)
            assert procgen.max_episode_steps(game, mode) == expected, (game, mode)


def test_exploration_levels_are_procgens_and_cover_the_exploration_games():
    games = {g for g in procgen.GAMES if "exploration" in procgen.modes_for(g)}
    assert games == set(procgen.EXPLORATION_LEVEL_SEEDS)
    assert procgen.exploration_level("coinrun") == 1949448038
    assert procgen.DEFAULT_NUM_LEVELS["exploration"] == 1
    with pytest.raises(ValueError, match="not offered for bigfish"):
        procgen.exploration_level("bigfish")


@pytest.mark.parametrize(
    ("game", "mode"),
    [("chaser", "extreme"), ("maze", "memory"), ("coinrun", "exploration"), ("jumper", "memory")],
)
def test_uncalibrated_modes_normalize_to_nan_with_a_reason(game, mode):
    import math

    assert all(math.isnan(v) for v in procgen.score_range(game, mode))
    assert math.isnan(procgen.normalize(game, mode, 10.0))
    assert procgen.normalization_note(game, mode) == (
        f"no reference normalization constants for {game} {mode} "
        "(train-procgen calibrates easy and hard only)"
    )


def test_calibrated_modes_have_no_note():
    assert procgen.normalization_note("coinrun", "easy") is None
    assert procgen.normalization_note("bigfish", "hard") is None


def test_unseen_levels_exist_only_beside_a_level_split():
    assert procgen.has_unseen_levels("easy", None) and procgen.has_unseen_levels("hard", 500)
    assert not procgen.has_unseen_levels("easy", 0)  # every level: testing plays training's
    assert not procgen.has_unseen_levels("exploration", None)  # one level, played by both
