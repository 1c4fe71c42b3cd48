import math

import numpy as np
import torch

from rlsweep.envs.vector_env import ProcgenVectorEnv
from rlsweep.results import stats
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.subconfigs import EnvConfig
from rlsweep.trial.evaluation import (
    SPLITS,
    EvalResult,
    evaluate,
    evaluation_envs,
    no_scores,
    sampling_policy,
    score_metrics,
)


def test_one_episode_per_env_on_unseen_levels():
    env = ProcgenVectorEnv(EnvConfig(game="maze", num_levels=50), 6, seed=4, split="test")
    policy = sampling_policy(lambda obs: torch.zeros(obs.shape[0], 15), seed=0)
    ev = evaluate(policy, {"test": env})["test"]
    assert ev.returns.shape == (6,) and ev.lengths.min() >= 1
    assert set(ev.returns.tolist()) <= {0.0, 10.0}
    assert ((ev.level_seeds < 0) | (ev.level_seeds >= 50)).all()
    env.close()


def test_sampling_policy_is_seeded_and_follows_the_logits():
    logits = torch.tensor([[0.0, 20.0, 0.0]]).repeat(64, 1)
    act = sampling_policy(lambda obs: logits[: obs.shape[0]], seed=3)
    everyone = np.ones(64, bool)
    actions = act(np.zeros((64, 3, 64, 64), np.uint8), everyone)
    assert (actions == 1).mean() > 0.95
    uniform = lambda obs: torch.zeros(obs.shape[0], 15)  # noqa: E731
    obs = np.zeros((32, 3, 2, 2), np.uint8)
    a = sampling_policy(uniform, seed=5)(obs, everyone[:32])
    b = sampling_policy(uniform, seed=5)(obs, everyone[:32])
    assert (a == b).all() and len(set(a.tolist())) > 3


def _per_row_logits(obs: torch.Tensor) -> torch.Tensor:
    """Logits of each row from that row alone (its channel means), so that a batch of some rows
    gives each the logits the whole batch gives it, bit for bit."""
    weights = torch.linspace(-0.01, 0.01, obs.shape[1] * 15).reshape(obs.shape[1], 15)
    return obs.float().mean(dim=(2, 3)) @ weights


def test_only_the_active_rows_reach_the_network_and_their_actions_do_not_change():
    obs = np.random.default_rng(0).integers(0, 255, (16, 3, 8, 8), dtype=np.uint8)
    active = np.arange(16) % 3 == 0
    seen = []

    def logits(x):
        seen.append(x.clone())
        return _per_row_logits(x)

    some = sampling_policy(logits, seed=7)(obs, active)
    every = sampling_policy(logits, seed=7)(obs, np.ones(16, bool))
    assert torch.equal(seen[0], torch.from_numpy(obs[active]))
    assert (some[active] == every[active]).all()
    assert ((some >= 0) & (some < 15)).all()
    # A GPU's policy gives the network every row (one shape), and acts as the CPU's does.
    gpu = sampling_policy(logits, seed=7, every_row=True)(obs, active)
    assert torch.equal(seen[-1], torch.from_numpy(obs)) and (gpu == some).all()


def test_skipping_finished_envs_plays_the_same_episodes():
    """The evaluator asks the policy only for envs still in their first episode: it plays and
    scores exactly what a policy that computes every row does, and the network sees each env's
    rows only until its episode ends."""

    def play(skip: bool) -> tuple[EvalResult, int]:
        rows = []

        def counted(x):
            rows.append(len(x))
            return _per_row_logits(x)

        env = ProcgenVectorEnv(EnvConfig(game="leaper", num_levels=50), 8, seed=1, split="test")
        policy = sampling_policy(counted, seed=0)
        every = lambda o, active: policy(o, np.ones_like(active))  # noqa: E731
        ev = evaluate(policy if skip else every, {"test": env})["test"]
        env.close()
        return ev, sum(rows)

    (some, rows_seen), (every, every_rows) = play(skip=True), play(skip=False)
    for field in ("returns", "lengths", "level_seeds"):
        assert (getattr(some, field) == getattr(every, field)).all(), field
    assert every_rows == 8 * some.steps  # each row at every step
    assert rows_seen == some.lengths.sum() < every_rows  # each env until its episode ended


def test_an_env_whose_episode_ended_steps_no_further_and_the_others_play_as_before():
    """Each env steps until its first episode ends and no further; the episodes are those an
    evaluator that stepped every env to the last one's end played (the evaluator before
    `step_rows`), through a gap framestack and a policy that acts on each row's frames."""
    cfg = EnvConfig(game="bigfish", num_levels=50, framestack="gap", framestack_k=2)

    def greedy(obs: np.ndarray, active: np.ndarray) -> np.ndarray:
        return _per_row_logits(torch.from_numpy(obs)).argmax(-1).numpy()

    env = ProcgenVectorEnv(cfg, 8, seed=3, split="test")
    sent: list[np.ndarray] = []
    send = env._pools[0].send
    env._pools[0].send = lambda actions, env_id: (sent.append(env_id), send(actions, env_id))
    ev = evaluate(greedy, {"test": env})["test"]

    every = ProcgenVectorEnv(cfg, 8, seed=3, split="test")  # every env, every step
    obs, _ = every.reset()
    finished, lengths, returns = np.zeros(8, bool), np.zeros(8, np.int64), np.zeros(8)
    while not finished.all():
        obs, _, term, trunc, _ = every.step(greedy(obs, ~finished))
        newly = (term | trunc) & ~finished
        lengths[newly], returns[newly] = every.last_length[newly], every.last_return[newly]
        finished |= newly
    assert np.array_equal(ev.lengths, lengths) and np.array_equal(ev.returns, returns)
    assert np.array_equal(np.bincount(np.concatenate(sent), minlength=8), ev.lengths)
    assert ev.env_steps == ev.lengths.sum() < 8 * ev.steps  # some envs ended early
    env.close(), every.close()


def test_the_splits_in_lockstep_play_what_each_plays_alone():
    """One policy call a step covers every split's envs (a fixed shape, the finished ones
    inactive); each split stops stepping when its envs are done, and plays and scores what it
    would alone. (The policy here acts on each row's frame alone, drawing nothing.)"""
    shapes = []

    def greedy(obs: np.ndarray, active: np.ndarray) -> np.ndarray:
        shapes.append(obs.shape)
        return _per_row_logits(torch.from_numpy(obs)).argmax(-1).numpy()

    def envs(*splits: str) -> dict[str, ProcgenVectorEnv]:
        config = EnvConfig(game="bigfish", num_levels=50)
        sizes = {"train": 5, "test": 3}
        return {s: ProcgenVectorEnv(config, sizes[s], seed=2, split=s) for s in splits}

    together = evaluate(greedy, envs("train", "test"))
    assert set(shapes) == {(8, 3, 64, 64)}
    alone = {**evaluate(greedy, envs("train")), **evaluate(greedy, envs("test"))}
    for split in ("train", "test"):
        for field in ("returns", "lengths", "level_seeds", "env_steps"):
            assert np.array_equal(getattr(together[split], field), getattr(alone[split], field))
        assert together[split].steps == together[split].lengths.max()
    assert together["train"].steps != together["test"].steps  # one split ended first
    assert len(shapes) == max(ev.steps for ev in together.values()) + sum(
        ev.steps for ev in alone.values()
    )


def test_an_untrained_policy_shows_no_generalization_gap():
    """A uniformly random policy has learned nothing, so its gap between training and unseen
    levels is 0 in expectation: the trial's evaluator must measure ~0 (its 95% CI covers 0).
    (On coinrun, RLlib's rolling mean of finished training episodes read +0.17 normalized: early
    on it favours short episodes.) Each seed trains on its own 200 leaper levels, so the gap
    averages over level sets as well as episodes. Leaper, like coinrun, scores an episode 0 or
    10, and a random policy reaches its goal about 40% of the time; its episodes end sooner
    (a seed's evaluation: 21k env steps here, coinrun's 64k)."""
    gaps = []
    for seed in range(16):
        cfg = TrialConfig(game="leaper", start_level=1000 * seed, eval_episodes=32, seed=seed)
        rng = np.random.default_rng(seed)
        policy = lambda obs, active: rng.integers(0, 15, size=len(obs))  # noqa: B023, E731
        envs = evaluation_envs(cfg)
        scores = {}
        for split, ev in evaluate(policy, envs).items():
            scores.update(score_metrics(cfg, split, ev))
            envs[split].close()
        assert scores["train/levels_in_train_range"] == 32 and scores["train/episodes"] == 32
        assert scores["test/levels_in_train_range"] == 0
        gaps.append(scores["train/return_norm"] - scores["test/return_norm"])
    gap = stats.interval([np.array(gaps)], "mean")
    assert gap.low <= 0 <= gap.high, gap
    # And the interval is tight enough to mean something. Leaper scores an episode -0.43 or 1
    # normalized: a seed's gap has an sd of at most 0.18 (two means of 32), the mean of 16 at
    # most 0.045, so a 95% interval about 0.18 wide; 0.3 leaves room for the draw.
    assert gap.high - gap.low < 0.3, gap


def test_scores_before_the_first_evaluation_have_every_key_an_evaluation_reports():
    """A trial reports `no_scores()` until it evaluates, then `score_metrics`' values under the
    same keys in the same order: every report of a trial has one key set (Tune's progress.csv
    takes its columns from a process's first report)."""
    one = np.ones(1, np.int64)
    ev = EvalResult(returns=one * 5.0, lengths=one * 40, level_seeds=one * 7)
    cfg = TrialConfig(game="coinrun")
    evaluated = {k: v for split in SPLITS for k, v in score_metrics(cfg, split, ev).items()}
    assert list(no_scores()) == list(evaluated)
    assert all(math.isnan(v) for v in no_scores().values())
    assert not any(math.isnan(v) for v in evaluated.values())
