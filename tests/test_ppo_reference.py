"""rlsweep's PPO update equals the reference update, benchmarks/plain_ppo.py's `ppo_update`
(written from CleanRL's ppo_procgen.py, itself baselines' PPO2 as train-procgen ran it, with
2020's RLlib PPO options for the baselines that ran it: the pooling study's lars12llt): same
initial weights, same rollout, same minibatch permutation, weights compared after one iteration.

The rlsweep side is the real thing: RLlib's EnvRunner samples our ProcgenVectorEnv, and
`rlsweep.trial.ppo_learner.RlsweepPPOLearner` (built from `algos.ppo_config`) updates on those
episodes. The reference side sees only what the game produced (a log of envpool's raw outputs
and the actions sent) and redoes everything itself: VecNormalize on the raw rewards, values and
log-probabilities from the initial network, GAE, per-minibatch advantage normalization, PPO2's
clipped losses, Adam(eps=1e-5).

`test_each_reverted_item_breaks_equivalence` reverts one item at a time to what RLlib (or the
old rlsweep) does and checks that the weights then differ: each item is load-bearing here.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import torch

from rlsweep.spec.spec import load_baseline

pytestmark = pytest.mark.rllib

TOLERANCE = 1e-5
"""Relative error of the weights after one iteration, ||w - w_ref|| / ||w_ref||."""


# --- the reference: benchmarks/plain_ppo.py, CleanRL's loop -------------------------------

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from plain_ppo import (  # noqa: E402
    FrameStack,
    PPOArgs,
    Rollout,
    VecNormalize,
    ppo_update,
    values_and_logprobs,
)


class _Recorder:
    """Stands in for the envpool object inside ProcgenVectorEnv and logs its raw outputs from
    its last reset on."""

    def __init__(self, pool, log: Rollout) -> None:
        self.pool, self.log = pool, log

    def __getattr__(self, name):
        return getattr(self.pool, name)

    def reset(self, *args, **kwargs):
        frames, info = self.pool.reset(*args, **kwargs)
        for f in ("obs", "actions", "rewards", "terminated", "truncated"):
            getattr(self.log, f).clear()
        self.log.obs.append(frames.copy())
        return frames, info

    def send(self, actions):
        self.log.actions.append(np.array(actions, copy=True))
        self.pool.send(actions)

    def recv(self):
        frames, reward, terminated, truncated, info = self.pool.recv()
        for seq, x in zip(
            (self.log.obs, self.log.rewards, self.log.terminated, self.log.truncated),
            (frames, reward, terminated, truncated),
            strict=True,
        ):
            seq.append(np.array(x, copy=True))
        return frames, reward, terminated, truncated, info


# --- the rlsweep side -----------------------------------------------------------------------


def match_episodes(episodes, log: Rollout) -> list[tuple[int, int]]:
    """(step, env) of every transition of every episode chunk, in episode order: the row
    order of the learner's batch without its bootstrap rows. Each chunk is found in the log by
    its first observation and verified action by action."""
    K, N = len(log.actions), log.actions[0].shape[0]
    starts = {(0, i) for i in range(N)}
    # A reset-only step k returns the new episode's first observation, obs[k + 1].
    starts |= {(k + 1, i) for k in range(1, K) for i in np.flatnonzero(log.started(k))}
    order = []
    for ep in episodes:
        first, acts = ep.get_observations(0), np.asarray(ep.get_actions())
        (k0, i), *rest = [
            (k, i)
            for k, i in sorted(starts)
            if np.array_equal(log.obs[k][i], first)
            and k + len(acts) <= K
            and all(log.actions[k + j][i] == a for j, a in enumerate(acts))
        ]
        assert not rest, "an episode chunk matched two places in the log"
        order.extend((k0 + j, i) for j in range(len(acts)))
    return order


@dataclass
class Run:
    cfg: object
    episodes: list
    log: Rollout
    initial: dict
    runner: object


def sample(cfg) -> Run:
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    from rlsweep.envs import vector_env as envs
    from rlsweep.trial import algos

    torch.manual_seed(cfg.seed)
    conf = algos.ppo_config(cfg)
    runner = SingleAgentEnvRunner(config=conf)
    log = Rollout()
    (pool,) = runner.env.unwrapped._pools  # one env group: the CPU's
    runner.env.unwrapped._pools = [_Recorder(pool, log)]
    learner = conf.build_learner(env=runner.env)
    initial = copy.deepcopy(learner.module.get_state())
    runner.module.set_state(initial["default_policy"])
    # The env rebuilds its pool when RLlib's reset brings a new seed: record that one too.
    real_envpool = envs._import_envpool()
    recording = SimpleNamespace(make=lambda **kw: _Recorder(real_envpool.make(**kw), log))
    with mock.patch.object(envs, "_import_envpool", lambda: recording):
        episodes = runner.sample(force_reset=True)
    return Run(cfg, episodes, log, initial, runner)


def learn(run: Run, cfg) -> torch.nn.Module:
    """RlsweepPPOLearner's update (options from `cfg`) on the run's episodes."""
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

    from rlsweep.trial import algos

    learner = algos.ppo_config(cfg).build_learner(env=run.runner.env)
    learner.module.set_state(run.initial)
    learner.update(
        episodes=copy.deepcopy(run.episodes),  # the learner connector extends them in place
        timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: cfg.effective_train_batch_size},
        num_epochs=cfg.num_epochs,
        minibatch_size=cfg.minibatch_size,
        shuffle_batch_per_epoch=True,
    )
    return learner.module["default_policy"].net


def reference(run: Run, cfg=None) -> torch.nn.Module:
    """benchmarks/plain_ppo.py's update on the run's rollout, from the same initial weights,
    with a fresh VecNormalize and Adam, and the learner's permutation seed; in `cfg`'s setting
    (default: the run's)."""
    from rlsweep.trial.models import ImpalaActorCritic

    args = PPOArgs.of_trial(cfg or run.cfg)
    log = FrameStack(args.framestack, args.framestack_k).rollout(run.log)  # what the policy saw
    n_actions = int(run.runner.env.single_action_space.n)
    net = ImpalaActorCritic(log.obs[0].shape[1:], n_actions, args.model())
    state = run.initial["default_policy"]
    net.load_state_dict({k.removeprefix("net."): torch.as_tensor(v) for k, v in state.items()})
    values, logprobs, logits = values_and_logprobs(net, log)
    if args.normalize_reward:
        rewards = VecNormalize(args.num_envs, args.reward_norm_gamma, args.reward_clip).rollout(log)
    else:
        rewards = torch.from_numpy(np.stack(log.rewards)).float()
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr_at(0), eps=args.adam_eps)
    generator = torch.Generator().manual_seed(args.seed)
    order = match_episodes(run.episodes, log)
    ppo_update(
        net,
        optimizer,
        log,
        values,
        logprobs,
        rewards,
        args,
        generator,
        order,
        logits=logits,
        kl_coeff=args.kl_coeff,
    )
    return net


def relative_error(a: torch.nn.Module, b: torch.nn.Module) -> float:
    va = torch.cat([p.detach().flatten() for p in a.parameters()])
    vb = torch.cat([p.detach().flatten() for p in b.parameters()])
    return float((va - vb).norm() / vb.norm())


# Two rollouts. maze ends episodes both by reaching the goal and by its 500-step time limit,
# over 3 epochs (the per-epoch reshuffle). fruitbot's frequent small rewards exercise
# VecNormalize's scale (maze's rare 10s clip); one epoch there, because from the second epoch on
# float rounding (1e-7) is amplified chaotically where samples sit at the ratio and value clips:
# measured, perturbing the initial weights by 1e-7 moves the reference's own result by 7e-5 after
# 3 fruitbot epochs, which would hide any difference below that.
# Every scenario's net starts from PyTorch's defaults (init torch, CleanRL's): from the
# Glorot-uniform starts, rounding is amplified the same way, and the comparison would see only
# that. Measured (2026-11-28), a 1e-7 move of the initial weights moved the reference's own
# result, and rlsweep stood from it: maze (glorot, 3 epochs) 3.9e-4 and 3.9e-4 (one epoch: 2.5e-6
# both); lars12llt (keras) 2.5e-4 and 1.6e-4; fruitbot (glorot) 9.4e-6 and 8.2e-7, where
# reverting its reward statistics moves the weights only 2.1e-5. From PyTorch's start: 8.3e-7,
# 2.1e-6 and 1.4e-6 for the three. The same holds of the max-pools' padding: maze and fruitbot
# pad as CleanRL does (pool_padding torch), because with TF's "SAME" padding a 1e-7 move moved
# the reference's own result 5.4e-5 (maze) and 3.7e-5 (fruitbot); lars12llt keeps the study's
# "SAME" padding, where the move moved it 1.1e-6 and rlsweep stood 1.1e-6 from it (2026-11-28,
# 8.3e-7 and 3.1e-7 padded as CleanRL does). The comparison is of the update; how each init
# starts and each padding pools is tests/test_models.py's.
UNAMPLIFIED_NET = dict(init="torch", pool_padding="torch")
"""The net where rounding is not amplified: PyTorch's start, CleanRL's max-pool padding."""
SCENARIOS = {
    "maze": dict(
        game="maze",
        num_envs_per_env_runner=2,
        rollout_length=512,
        minibatch_size=256,
        seed=1,
        **UNAMPLIFIED_NET,
    ),
    "fruitbot": dict(
        game="fruitbot",
        num_envs_per_env_runner=4,
        rollout_length=128,
        minibatch_size=128,
        num_epochs=1,
        seed=1,
        **UNAMPLIFIED_NET,
    ),
    # The pooling study's config (baselines/lars12llt: 2020's RLlib PPO, wide IMPALA-CNN with
    # average pooling, gap framestack, KL penalty, value clip 30, advantages standardized over
    # the batch, raw rewards, its lr schedule), on a small rollout of bigfish, but Adam's
    # epsilon at 1e-5: at its 1e-8, float noise in near-zero gradients becomes whole Adam
    # steps in the first update (the reference's own result moved 4e-5 when its initial
    # weights moved 1e-7; rlsweep's stood 3e-5 from it). At 1e-5 they agree (2.5e-7 on
    # 2026-12-01); leaving the KL term out (kl_coeff 0 on rlsweep's side) moves them only
    # 4.9e-6 apart, inside the tolerance, so the term is held to RLlib's by
    # test_learner_syncs.py (2026-11-29; the epsilon reaching Adam: maze's revert below). Half
    # this rollout (64 steps) would halve the test, but the revert below then moves the
    # weights only 4.4e-5, under its 1e-4.
    "lars12llt": {
        **{k: v for k, v in load_baseline("lars12llt").items() if k != "train_batch_size"},
        "game": "bigfish",
        "num_envs_per_env_runner": 8,
        "rollout_length": 128,
        "minibatch_size": 256,
        "adam_eps": 1e-5,
        "seed": 1,
        "init": "torch",  # its pixels still centred and its max-pools TF's, as the entry's
    },
}


@pytest.fixture(scope="module")
def runs():
    from rlsweep.spec.config import TrialConfig

    # Under make test's two workers on 2 cores, one thread each: two would oversubscribe.
    torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)
    cache: dict[str, Run] = {}

    def get(name: str, **env_overrides) -> Run:
        key = name + repr(sorted(env_overrides.items()))
        if key not in cache:
            cfg = TrialConfig(**SCENARIOS[name], **env_overrides)
            cache[key] = sample(cfg)
        return cache[key]

    return get


@pytest.fixture(scope="module")
def references():
    """`reference(run, cfg)`, computed once per run and setting: the reverts of a scenario
    compare with the same reference weights, which the tests only read."""
    cache: dict[tuple[int, str], torch.nn.Module] = {}

    def get(run: Run, cfg=None) -> torch.nn.Module:
        key = (id(run), repr(cfg or run.cfg))  # a run lives as long as `runs`' cache
        if key not in cache:
            cache[key] = reference(run, cfg)
        return cache[key]

    return get


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_update_equals_cleanrl_reference(runs, references, scenario):
    run = runs(scenario)
    log = run.log
    ended = [t | c for t, c in zip(log.terminated, log.truncated, strict=True)]
    if scenario == "maze":  # the rollout holds what the comparison is about
        assert any(c.any() for c in log.truncated), "no time-limit ending in the rollout"
        assert any(t.any() for t in log.terminated), "no termination in the rollout"
    elif scenario == "fruitbot":
        nonzero = np.concatenate(log.rewards) != 0
        assert nonzero.sum() >= 10, "too few rewards to exercise VecNormalize"
    else:  # raw rewards (fish eaten) and a gap framestack refilled at an episode's start
        assert (np.concatenate(log.rewards) != 0).any(), "no reward in the rollout"
    assert any(e.any() for e in ended)
    err = relative_error(learn(run, run.cfg), references(run))
    print(f"{scenario}: relative weight error {err:.2e}")
    assert err <= TOLERANCE, f"{scenario}: relative weight error {err:.2e}"


# Each item reverted to what RLlib (or rlsweep before) did: (scenario, learner overrides,
# env overrides).
REVERTS = {
    "minibatching: rllib's cyclic iterator": ("maze", {"minibatching": "rllib"}, {}),
    "advantage_norm: over the batch": ("maze", {"advantage_norm": "batch"}, {}),
    "advantage_norm: rllib's (bootstrap rows in)": ("maze", {"advantage_norm": "rllib"}, {}),
    "adam_eps: torch's 1e-8": ("maze", {"adam_eps": 1e-8}, {}),
    "time_limit: truncate (bootstrap)": ("maze", {}, {"time_limit": "truncate"}),
    "reward normalization off": ("fruitbot", {}, {"normalize_reward": False}),
    "VecNormalize gamma tied to the agent's": ("fruitbot", {}, {"reward_norm_gamma": 0.999}),
    "advantage_norm: per minibatch, not 2020's RLlib's over the batch": (
        "lars12llt",
        {"advantage_norm": "minibatch"},
        {},
    ),
    "minibatching: a fresh shuffle every epoch, not 2020's RLlib's fixed minibatches": (
        "lars12llt",
        {"minibatching": "shuffle"},
        {},
    ),
}


@pytest.mark.parametrize("item", list(REVERTS))
def test_each_reverted_item_breaks_equivalence(runs, references, item):
    from rlsweep.spec.config import TrialConfig

    scenario, learner_overrides, env_overrides = REVERTS[item]
    run = runs(scenario, **env_overrides)
    ref = references(run, TrialConfig(**SCENARIOS[scenario]))  # the scenario's, not the revert's
    err = relative_error(learn(run, dataclasses.replace(run.cfg, **learner_overrides)), ref)
    print(f"reverted {item}: relative weight error {err:.2e}")
    assert err > 10 * TOLERANCE, f"reverting {item} left the weights equal ({err:.2e})"


def test_reward_statistics_skip_autoreset_rows(runs, monkeypatch):
    """Reverted: VecNormalize's statistics also count envpool's reset-only steps."""
    from rlsweep.envs import vector_env as envs

    original = envs.RewardNormalizer.__call__

    def every_row(self, reward, done, real):
        return original(self, reward, done, np.ones_like(real))

    monkeypatch.setattr(envs.RewardNormalizer, "__call__", every_row)
    from rlsweep.spec.config import TrialConfig

    run = sample(TrialConfig(**SCENARIOS["fruitbot"]))
    err = relative_error(learn(run, run.cfg), reference(run))
    print(f"reverted reward statistics on real rows only: relative weight error {err:.2e}")
    assert err > 10 * TOLERANCE, f"counting reset rows left the weights equal ({err:.2e})"
