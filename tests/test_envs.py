import numpy as np
import pytest

from rlsweep.envs import (
    EnvConfig,
    FrameStacker,
    ProcgenVectorEnv,
    RewardNormalizer,
    env_seed,
    shape_reward,
)
from rlsweep.errors import ConfigError


def test_reward_shaping_formula():
    r = np.array([-10.0, -1.0, 0.0, 1.0, 10.0, 3.5])
    expected = np.sign(r) * (np.sqrt(np.abs(r) + 1) - 1) + 0.001 * r
    np.testing.assert_allclose(shape_reward(r), expected, rtol=1e-6)
    assert shape_reward(np.array([10.0]))[0] == pytest.approx(np.sqrt(11) - 1 + 0.01)
    assert shape_reward(np.array([0.0]))[0] == 0.0


def test_reward_normalizer_divides_by_the_std_of_discounted_returns():
    rng = np.random.default_rng(0)
    norm = RewardNormalizer(num_envs=3, gamma=0.9, clip=100.0)
    ret = np.zeros(3)
    history = []
    for _ in range(200):
        r = rng.normal(size=3)
        done = rng.random(3) < 0.05
        ret = ret * 0.9 + r
        history.append(ret.copy())
        out = norm(r, done)
        np.testing.assert_allclose(out, r / np.std(np.concatenate(history)), rtol=1e-4)
        ret[done] = 0.0


def test_reward_normalizer_clips():
    norm = RewardNormalizer(num_envs=1, gamma=0.0, clip=2.0)
    for _ in range(50):
        norm(np.array([0.01]), np.array([False]))
    assert norm(np.array([1000.0]), np.array([False]))[0] == 2.0


def _frames(n: int, value) -> np.ndarray:
    """(n, 3, 2, 2) frames whose pixels all equal `value` (per env if a sequence)."""
    v = np.broadcast_to(np.asarray(value, np.uint8).reshape(-1, 1, 1, 1), (n, 3, 2, 2))
    return v.copy()


@pytest.mark.parametrize(("mode", "channels"), [("none", 3), ("stack", 12), ("gap", 6)])
def test_framestack_shapes(mode, channels):
    s = FrameStacker(mode, 4)
    assert s.push(_frames(5, 1)).shape == (5, channels, 2, 2)
    assert s.push(_frames(5, 2), np.zeros(5, bool)).shape == (5, channels, 2, 2)


def test_stack_holds_last_k_frames_oldest_first():
    s = FrameStacker("stack", 4)
    s.push(_frames(2, 0))
    for t in range(1, 7):
        out = s.push(_frames(2, t), np.zeros(2, bool))
    # at t=6: frames 3, 4, 5, 6
    assert [int(out[0, 3 * i, 0, 0]) for i in range(4)] == [3, 4, 5, 6]


def test_gap_holds_frames_t_and_t_minus_k_minus_1():
    k = 4
    s = FrameStacker("gap", k)
    s.push(_frames(1, 0))
    for t in range(1, 10):
        out = s.push(_frames(1, t), np.zeros(1, bool))
        assert out.shape == (1, 6, 2, 2)
        assert (out[0, :3] == max(0, t - (k - 1))).all()  # oldest: t-(k-1)
        assert (out[0, 3:] == t).all()  # newest: t


def test_framestack_resets_only_the_envs_that_restarted():
    s = FrameStacker("stack", 3)
    s.push(_frames(2, 0))
    s.push(_frames(2, 1), np.zeros(2, bool))
    out = s.push(_frames(2, [2, 50]), np.array([False, True]))
    assert [int(out[0, 3 * i, 0, 0]) for i in range(3)] == [0, 1, 2]
    assert [int(out[1, 3 * i, 0, 0]) for i in range(3)] == [50, 50, 50]  # new episode: refilled
    out = s.push(_frames(2, [3, 51]), np.zeros(2, bool))
    assert [int(out[1, 3 * i, 0, 0]) for i in range(3)] == [50, 50, 51]


def test_framestack_output_never_aliases_its_buffer():
    s = FrameStacker("gap", 2)
    first = s.push(_frames(1, 7))
    s.push(_frames(1, 9), np.zeros(1, bool))
    assert (first == 7).all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"game": "pong"}, "game: got 'pong'; allowed: bigfish, bossfight"),
        ({"distribution_mode": "extreme"}, "distribution_mode: got 'extreme'; allowed for coinrun"),
        ({"num_levels": -1}, "num_levels: got -1; allowed: an integer >= 0, or null"),
        ({"start_level": -5}, "start_level: got -5; allowed: an integer >= 0"),
        ({"framestack": "4"}, "framestack: got '4'; allowed: none, stack, gap"),
        ({"framestack_k": 1}, "framestack_k: got 1; allowed: an integer >= 2"),
    ],
)
def test_env_config_errors(kwargs, message):
    with pytest.raises(ConfigError) as e:
        EnvConfig(**kwargs)
    assert str(e.value).startswith(message)


def test_default_level_split():
    assert EnvConfig().train_levels == 200
    assert EnvConfig(distribution_mode="hard").train_levels == 500
    assert EnvConfig(num_levels=7).train_levels == 7


def test_env_seed_streams_differ_and_fit_int32():
    seeds = {env_seed(0, 0), env_seed(0, 1), env_seed(1, 0)}
    assert len(seeds) == 3
    assert all(0 <= s < 2**31 for s in seeds)
    assert env_seed(3, 1) == env_seed(3, 1)


# --- the real envpool Procgen ---------------------------------------------------------------


def _run(env: ProcgenVectorEnv, steps: int, rng: np.random.Generator):
    for _ in range(steps):
        yield env.step(rng.integers(0, 15, env.num_envs))


def test_vector_env_spaces_and_dtypes():
    env = ProcgenVectorEnv(EnvConfig(framestack="gap"), num_envs=4, seed=1)
    obs, info = env.reset()
    assert obs.shape == (4, 6, 64, 64) and obs.dtype == np.uint8
    assert env.single_observation_space.shape == (6, 64, 64)
    assert env.single_action_space.n == 15
    assert env.metadata["autoreset_mode"].value == "NextStep"
    obs, r, term, trunc, info = env.step(np.zeros(4, np.int64))
    assert r.dtype == np.float32 and term.shape == (4,) and info == {}
    env.close()


def test_training_levels_stay_in_range_and_test_levels_leave_it():
    rng = np.random.default_rng(0)
    cfg = EnvConfig(game="maze", num_levels=5, start_level=100)  # short random-walk episodes
    train = ProcgenVectorEnv(cfg, num_envs=8, seed=3, split="train")
    train.reset()
    seen = set(train.level_seeds.tolist())
    for (*_,) in _run(train, 600, rng):
        seen.update(train.level_seeds.tolist())
    assert seen <= set(range(100, 105)) and len(seen) >= 3
    test = ProcgenVectorEnv(cfg, num_envs=8, seed=3, split="test")
    test.reset()
    seen = set(test.level_seeds.tolist())
    for (*_,) in _run(test, 600, rng):
        seen.update(test.level_seeds.tolist())
    assert len(seen) > 8 and not seen & set(range(100, 105))
    assert max(seen) > 10_000  # drawn from the full distribution, not [0, num_levels)
    train.close(), test.close()


def test_episode_bookkeeping_and_next_step_reset_with_framestack():
    rng = np.random.default_rng(1)
    env = ProcgenVectorEnv(EnvConfig(game="maze", framestack="stack", framestack_k=3), 6, seed=2)
    env.reset()
    lengths = np.zeros(6, np.int64)
    returns = np.zeros(6)
    restarting = np.zeros(6, bool)
    checked = 0
    for obs, r, term, trunc, _ in _run(env, 800, rng):
        # The step after a done returns a new episode's first frame, repeated over the stack.
        for i in np.flatnonzero(restarting):
            assert r[i] == 0
            assert (obs[i, 0:3] == obs[i, 6:9]).all() and (obs[i, 3:6] == obs[i, 6:9]).all()
            checked += 1
        lengths[restarting] = 0
        returns[restarting] = 0
        lengths += ~restarting
        returns += r
        done = term | trunc
        for i in np.flatnonzero(done):
            assert env.last_length[i] == lengths[i]
            assert env.last_return[i] == pytest.approx(returns[i])
        restarting = done
    assert checked > 0


def test_reward_shaping_trains_on_shaped_but_records_raw_returns():
    rng = np.random.default_rng(2)
    env = ProcgenVectorEnv(EnvConfig(game="maze", reward_shaping=True), 8, seed=5)
    env.reset()
    rewards = []
    for _, r, *_ in _run(env, 800, rng):
        rewards.extend(r[r != 0].tolist())
    assert rewards, "no maze completed in 800 random steps"
    assert np.allclose(rewards, shape_reward(np.array([10.0]))[0])
    finished = env.last_return[~np.isnan(env.last_return)]
    assert set(finished.tolist()) <= {0.0, 10.0} and 10.0 in finished


def test_reset_seed_reseeds_the_level_sampler():
    def first_levels(seed):
        env = ProcgenVectorEnv(EnvConfig(), 4, seed=0)
        env.reset(seed=seed)
        out = env.level_seeds.tolist()
        env.close()
        return out

    assert first_levels(11) == first_levels(11)
    assert first_levels(11) != first_levels(12)
