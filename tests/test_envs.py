import subprocess
import sys

import numpy as np
import pytest

from rlsweep.envs.vector_env import (
    FrameStacker,
    ProcgenVectorEnv,
    RewardNormalizer,
    env_seed,
    shape_reward,
)
from rlsweep.errors import ConfigError
from rlsweep.spec.subconfigs import EnvConfig


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
        out = norm(r, done, real=np.ones(3, bool))
        # The pooled variance of every return so far and RunningMeanStd's prior (mean 0,
        # var 1, count 1e-4), as baselines' VecNormalize keeps it.
        x = np.concatenate(history)
        count = 1e-4 + x.size
        mean = x.sum() / count
        var = (1e-4 * (1.0 + mean**2) + ((x - mean) ** 2).sum()) / count
        np.testing.assert_allclose(out, r / np.sqrt(var + 1e-8), rtol=1e-5)
        ret[done] = 0.0


@pytest.mark.parametrize(("values", "undone"), [((10.0,), True), ((1.0, 10.0), False)])
def test_the_normalizer_undoes_shaping_only_where_a_game_has_one_reward(values, undone):
    """What `SweepSpec.setting_warnings` says of `procgen.ONE_REWARD_GAMES`: shaping a game's
    one reward (coinrun's 10) is a rescale, which the normalizer undoes; shaping bigfish's 1 and
    10 is not."""
    rng = np.random.default_rng(0)
    raw, shaped = (RewardNormalizer(num_envs=4, gamma=0.99, clip=10.0) for _ in range(2))
    real, a, b = np.ones(4, bool), [], []
    for _ in range(300):
        r = np.where(rng.random(4) < 0.05, rng.choice(values, size=4), 0.0)
        done = rng.random(4) < 0.02
        a.append(raw(r, done, real))
        b.append(shaped(shape_reward(r), done, real))
    assert np.allclose(a, b, rtol=1e-4) is undone


def test_reward_normalizer_clips():
    norm = RewardNormalizer(num_envs=1, gamma=0.0, clip=2.0)
    real = np.array([True])
    for _ in range(50):
        norm(np.array([0.01]), np.array([False]), real)
    assert norm(np.array([1000.0]), np.array([False]), real)[0] == 2.0


def test_reward_normalizer_skips_reset_only_rows():
    """envpool's autoreset rows (not transitions) leave the statistics and returns alone."""
    a = RewardNormalizer(num_envs=2, gamma=0.99, clip=10.0)
    b = RewardNormalizer(num_envs=1, gamma=0.99, clip=10.0)
    rng = np.random.default_rng(1)
    for t in range(30):
        r = rng.normal(size=2)
        reset_row = t % 3 == 0  # env 1 is resetting on these steps
        real = np.array([True, not reset_row])
        a(np.where(real, r, 0.0), np.zeros(2, bool), real)
        if not reset_row:
            b(r[1:], np.zeros(1, bool), np.array([True]))
    assert a.returns[1] == pytest.approx(b.returns[0])
    assert a.count > b.count  # env 0's rows counted, env 1's reset rows not: 30 + 20 vs 20
    assert a.count == pytest.approx(50 + 1e-4)


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


def test_groups_step_their_own_pools_and_finish_steps_over_all_envs():
    """Two groups, stepped one at a time in the double-buffered order (a group's next step is
    sent before the other's step is received): each group's rows are its own pool's envs (the
    first keeps the seed), framestacked alone; rewards are normalized, and episodes counted,
    over all envs at once, as one pool's would be."""
    cfg = EnvConfig(game="maze", framestack="stack", framestack_k=2, normalize_reward=True)
    plain = EnvConfig(game="maze", framestack="stack", framestack_k=2)
    env = ProcgenVectorEnv(cfg, 7, seed=4, groups=2)
    assert env.groups == [slice(0, 4), slice(4, 7)]
    alone = [ProcgenVectorEnv(plain, 4, seed=4), ProcgenVectorEnv(plain, 3, seed=env_seed(4, 1))]
    normalizer = RewardNormalizer(7, cfg.reward_norm_gamma, cfg.reward_clip)
    obs, _ = env.reset()
    assert np.array_equal(obs, np.concatenate([a.reset()[0] for a in alone]))
    rng = np.random.default_rng(3)
    actions = rng.integers(0, 15, (600, 7))
    for g, rows in enumerate(env.groups):
        env.send(g, actions[0, rows])
    done = np.zeros(7, bool)
    for t in range(600):
        ref = []
        for g, rows in enumerate(env.groups):
            part = env.recv(g)
            if t + 1 < 600:
                env.send(g, actions[t + 1, rows])
            ref.append(alone[g].step(actions[t, rows]))
            assert np.array_equal(part, ref[-1][0])
        obs, r, term, trunc, info = env.finish_step()
        raw = np.concatenate([x[1] for x in ref])
        assert np.array_equal(obs, np.concatenate([x[0] for x in ref]))
        assert np.array_equal(term, np.concatenate([x[2] for x in ref]))
        assert np.array_equal(r, normalizer(raw, term | trunc, real=~done))
        assert np.array_equal(
            env.last_return, np.concatenate([a.last_return for a in alone]), equal_nan=True
        )
        assert np.array_equal(env.level_seeds, np.concatenate([a.level_seeds for a in alone]))
        done = term | trunc
    assert not np.isnan(env.last_return).any()  # every env finished an episode (maze: 500 steps)
    with pytest.raises(RuntimeError, match="before every group's recv"):
        env.send(0, actions[0, :4])
        env.recv(0)
        env.finish_step()
    env.close(), [a.close() for a in alone]


def test_step_rows_steps_those_envs_alone_as_a_full_step_would():
    """`step_rows`, as an evaluation uses it: the envs still playing step, each on its own, as
    a twin whose every env steps does (frames through the gap stack, rewards, flags, the
    episodes' bookkeeping); the rows whose episode ended stop, and envpool steps nothing for
    them."""
    cfg = EnvConfig(game="bigfish", num_levels=50, framestack="gap", framestack_k=3)
    env, twin = ProcgenVectorEnv(cfg, 6, seed=5), ProcgenVectorEnv(cfg, 6, seed=5)
    sent: list[np.ndarray] = []
    send = env._pools[0].send
    env._pools[0].send = lambda actions, env_id: (sent.append(env_id), send(actions, env_id))
    assert np.array_equal(env.reset()[0], twin.reset()[0])
    rng = np.random.default_rng(0)
    playing, played = np.ones(6, bool), np.zeros(6, np.int64)
    while playing.any():
        actions = rng.integers(0, 15, 6)
        rows = np.flatnonzero(playing)
        obs, r, term, trunc, _ = env.step_rows(rows, actions[rows])
        ref = twin.step(actions)
        for got, want in zip((obs, r, term, trunc), ref[:4], strict=False):
            assert np.array_equal(got[rows], want[rows])
        waiting = ~playing
        assert not (r[waiting].any() or term[waiting].any() or trunc[waiting].any())
        played[rows] += 1
        done = term | trunc
        assert np.array_equal(env.last_length[done], played[done])
        assert np.array_equal(env.last_return[done], twin.last_return[done])
        assert np.array_equal(env.level_seeds[rows], twin.level_seeds[rows])
        playing &= ~done
    assert np.array_equal(np.bincount(np.concatenate(sent), minlength=6), played)
    assert played.min() < played.max()  # some envs waited
    grouped = ProcgenVectorEnv(cfg, 4, groups=2)
    with pytest.raises(ValueError, match="one group's envs, not 2 groups"):
        grouped.step_rows(np.arange(2), np.zeros(2))
    env.close(), twin.close(), grouped.close()


# --- exploration mode and time limits (procgen 0.10.7 semantics) ----------------------------


def test_the_levels_training_plays_from_num_levels_and_start_level():
    """[start, start + num_levels) of level seeds; 0 levels: the whole distribution (None),
    which the evaluation's training split and the report's setup note read as such."""
    assert EnvConfig(num_levels=200, start_level=5).train_level_range == (5, 205)
    assert EnvConfig(num_levels=0).train_level_range is None
    assert EnvConfig(distribution_mode="hard", num_levels=None).train_level_range == (0, 500)


def test_exploration_mode_plays_procgens_fixed_level_without_level_settings():
    cfg = EnvConfig(game="maze", distribution_mode="exploration")
    assert cfg.train_levels == 1
    assert cfg.train_level_range == (158988835, 158988836)  # procgen/env.py, maze
    for kwargs, key, allowed in [
        ({"num_levels": 500}, "num_levels", "null"),
        ({"num_levels": 0}, "num_levels", "null"),
        ({"start_level": 7}, "start_level", "0"),
    ]:
        with pytest.raises(ConfigError) as e:
            EnvConfig(game="maze", distribution_mode="exploration", **kwargs)
        assert e.value.path == key
        assert f"allowed: {allowed} (exploration mode plays maze's one fixed level" in str(e.value)


def test_exploration_mode_errors_name_the_trial_key_path():
    from rlsweep.spec.config import TrialConfig

    d = {"game": "coinrun", "distribution_mode": "exploration", "num_levels": 500}
    with pytest.raises(ConfigError) as e:
        TrialConfig.from_dict(d)
    assert e.value.path == "num_levels" and "allowed: null" in e.value.message
    TrialConfig.from_dict({**d, "num_levels": None})  # the default is fine


@pytest.mark.parametrize("split", ["train", "test"])
def test_exploration_mode_runs_on_envpool_on_its_fixed_level(split):
    # envpool aborts the process (exit 134) unless num_levels=start_level=0 reach it.
    rng = np.random.default_rng(4)
    env = ProcgenVectorEnv(
        EnvConfig(game="leaper", distribution_mode="exploration"), 4, seed=1, split=split
    )
    env.reset()
    seeds = set(env.level_seeds.tolist())
    dones = 0
    for _, _, term, trunc, _ in _run(env, 300, rng):
        seeds.update(env.level_seeds.tolist())
        dones += int((term | trunc).sum())
    env.close()
    assert dones > 0 and seeds == {1318677581}  # every episode, train or test
    assert env.config.train_level_range == (1318677581, 1318677582)  # what train plays


def test_a_process_new_to_envpool_registers_procgen_alone():
    """`_import_envpool` in a fresh process registers Procgen's 50 tasks and no other family
    (the full entry pulls in matplotlib through jumanji's renderer), and still steps a game; a
    process that imported envpool whole keeps every family."""
    from rlsweep.envs import procgen

    script = (
        "import sys\n"
        "from rlsweep.envs.qt import load_qt5\n"
        "load_qt5()\n"
        "{first}"
        "from rlsweep.envs.vector_env import _import_envpool\n"
        "envpool = _import_envpool()\n"
        "env = envpool.make('BigfishEasy-v0', env_type='gymnasium', num_envs=1, seed=0)\n"
        "print(env.reset()[0].shape, 'matplotlib' in sys.modules)\n"
        "print(*sorted(envpool.list_all_envs()))\n"
    )
    tasks = sorted(procgen.task_id(g, m) for g in procgen.GAMES for m in procgen.modes_for(g))
    for first, whole in [("", False), ("import envpool\n", True)]:
        proc = subprocess.run(
            [sys.executable, "-c", script.format(first=first)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        frames, registered = proc.stdout.splitlines()
        assert frames == f"(1, 3, 64, 64) {whole}"
        if whole:
            assert set(tasks) < set(registered.split()) and "Pong-v5" in registered.split()
        else:
            assert registered.split() == tasks


def test_procgen_time_limits_reach_envpool_for_every_game_and_mode():
    from rlsweep.envs import procgen
    from rlsweep.envs.vector_env import _import_envpool

    envpool = _import_envpool()
    differ = set()
    for game in procgen.GAMES:
        for mode in procgen.modes_for(game):
            registered = envpool.make_spec(procgen.task_id(game, mode)).config.max_episode_steps
            if registered != procgen.max_episode_steps(game, mode):
                differ.add((game, mode))
    assert differ == {("jumper", "memory")}  # envpool registers 1000, procgen uses 2000
    for game, mode in [("jumper", "memory"), ("jumper", "hard"), ("bigfish", "easy")]:
        env = ProcgenVectorEnv(EnvConfig(game=game, distribution_mode=mode), 1)
        assert env._pools[0].spec.config.max_episode_steps == procgen.max_episode_steps(game, mode)
        env.close()


def test_envpool_marks_a_done_truncated_from_the_limit_it_was_given():
    # envpool never cuts a Procgen episode itself (the game's own timeout ends it); its
    # max_episode_steps only decides `truncated` = done and elapsed >= max_episode_steps
    # (envpool/core/env.h). With jumper memory's registered 1000, a level finished after step
    # 1000 would read as truncated; hence rlsweep passes procgen's limit.
    from rlsweep.envs.vector_env import _import_envpool

    rng = np.random.default_rng(5)
    kinds = {}
    for limit in (500, 10):
        env = _import_envpool().make(
            "MazeEasy-v0", env_type="gymnasium", num_envs=8, seed=3, max_episode_steps=limit
        )
        env.reset()
        for _ in range(500):
            _, r, term, trunc, info = env.step(rng.integers(0, 15, 8).astype(np.int32))
            for i in np.flatnonzero(term | trunc):
                kinds.setdefault(limit, []).append((r[i] > 0, bool(trunc[i])))
        env.close()
    solved_500 = [t for won, t in kinds[500] if won]
    solved_10 = [t for won, t in kinds[10] if won]
    assert solved_500 and not any(solved_500)  # a solved maze is terminal...
    assert solved_10 and all(solved_10)  # ...but reads as truncated past a too-short limit


def test_jumper_memory_episodes_last_procgens_2000_steps():
    env = ProcgenVectorEnv(
        EnvConfig(game="jumper", distribution_mode="memory", time_limit="truncate"), 1, seed=0
    )
    env.reset()
    noop = np.array([4])  # jumper has no hazards in memory mode: standing still never ends it
    flags = [env.step(noop)[2:4] for _ in range(2001)]
    env.close()
    ends = [(t, bool(term[0]), bool(trunc[0])) for t, (term, trunc) in enumerate(flags)]
    assert [e for e in ends if e[1] or e[2]] == [(1999, False, True)]  # the 2000th step
