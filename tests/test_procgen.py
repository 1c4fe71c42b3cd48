import pytest

from rlsweep import procgen

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
    from rlsweep.envs import _import_envpool

    registered = set(_import_envpool().list_all_envs())
    for game in procgen.GAMES:
        for mode in procgen.modes_for(game):
            assert procgen.task_id(game, mode) in registered
