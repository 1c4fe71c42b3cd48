"""The evaluator: play exactly one episode in each of N envs, on the training levels
(`train/return`) and on unseen levels (`test/return`), the same way.

Taking the first episode of every env (rather than every episode finished within a step budget)
avoids the bias towards short episodes. Actions are sampled from the policy, as in Cobbe et al.
(2019); evaluation never touches the training envs or their level sampler.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlsweep.envs import procgen
from rlsweep.envs.vector_env import ProcgenVectorEnv, env_seed
from rlsweep.spec.config import TrialConfig

Policy = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(obs (N, C, H, W) uint8, active (N,) bool) -> (N,) actions. Only the `active` rows' actions
are scored (their envs are still in their first episode); the others' may cost nothing."""

SPLITS = {"train": 2, "test": 1}
"""Evaluated level splits and their env_seed stream ids (never the training envs' streams)."""


@dataclass(frozen=True)
class EvalResult:
    returns: np.ndarray
    """Raw return of each evaluated episode."""
    lengths: np.ndarray
    level_seeds: np.ndarray
    """Procgen level seed each episode was played on (as reported by the env)."""
    env_steps: int
    """Env steps spent evaluating (not counted against the training budget)."""

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))


def evaluate(policy: Policy, env: ProcgenVectorEnv) -> EvalResult:
    """Run every env of `env` until it has finished one episode."""
    n = env.num_envs
    obs, _ = env.reset()
    finished = np.zeros(n, bool)
    returns = np.zeros(n)
    lengths = np.zeros(n, np.int64)
    seeds = np.zeros(n, np.int64)
    steps = 0
    while not finished.all():
        obs, _, terminated, truncated, _ = env.step(policy(obs, ~finished))
        steps += n
        newly = (terminated | truncated) & ~finished
        if newly.any():
            returns[newly] = env.last_return[newly]
            lengths[newly] = env.last_length[newly]
            seeds[newly] = env.last_level_seed[newly]
            finished |= newly
    return EvalResult(returns=returns, lengths=lengths, level_seeds=seeds, env_steps=steps)


@dataclass
class SamplingPolicy:
    """A logits function (obs tensor -> logits) as a sampling policy over numpy arrays, drawing
    from its own `generator` (a trial saves and restores its state with its checkpoints)."""

    logits_fn: Callable[[torch.Tensor], torch.Tensor]
    generator: torch.Generator

    @torch.no_grad()
    def __call__(self, obs: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Actions for every row; the network sees only the `active` rows. An evaluation's
        tail is mostly envs already done (on leaper at the start, 53-68% of its rows), and on
        a CPU the forward is most of its cost. The other rows draw from uniform logits: every
        row still takes its own draws from the generator (multinomial draws Exp(1) noise for
        each logit), so an active row's action does not depend on which others are active."""
        rows = torch.from_numpy(active)
        scored = self.logits_fn(torch.from_numpy(obs)[rows]).float()
        logits = scored.new_zeros(len(obs), scored.shape[-1])
        logits[rows] = scored
        probs = torch.softmax(logits, dim=-1)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).numpy()


def sampling_policy(logits_fn: Callable[[torch.Tensor], torch.Tensor], seed: int) -> SamplingPolicy:
    """`logits_fn` as a sampling policy whose generator starts from `seed`."""
    return SamplingPolicy(logits_fn, torch.Generator().manual_seed(seed))


def evaluation_envs(cfg: TrialConfig) -> dict[str, ProcgenVectorEnv]:
    """A trial's evaluation envs: `eval_episodes` envs on its training levels and as many on
    unseen levels, each seeded from the trial seed and the split's own stream, stepped by the
    trial's CPUs (they run in its process)."""
    return {
        split: ProcgenVectorEnv(
            cfg.env_config(),
            num_envs=cfg.eval_episodes,
            seed=env_seed(cfg.seed, stream),
            split=split,
            num_threads=cfg.num_cpus,
        )
        for split, stream in SPLITS.items()
    }


SCORE_FIELDS = (
    "return",
    "return_norm",
    "episodes",
    "episode_length",
    "levels_in_train_range",
    "level_seed_min",
    "level_seed_max",
)
"""What `score_metrics` reports per split, as `<split>/<field>`."""


def no_scores() -> dict[str, float]:
    """Every split's `score_metrics` keys, NaN: a trial's scores before its first evaluation
    (every report carries the same keys)."""
    return {f"{split}/{field}": math.nan for split in SPLITS for field in SCORE_FIELDS}


def score_metrics(cfg: TrialConfig, split: str, ev: EvalResult) -> dict[str, float | int]:
    """`<split>/return(_norm)` and what was played, checked against the training levels."""
    lo, hi = cfg.env_config().train_level_range or (0, 2**31)
    in_train = int(((ev.level_seeds >= lo) & (ev.level_seeds < hi)).sum())
    values = (
        ev.mean_return,
        procgen.normalize(cfg.game, cfg.distribution_mode, ev.mean_return),
        len(ev.returns),
        float(ev.lengths.mean()),
        # Level seeds actually played: all in the training range for train/, none for test/
        # (unless training used every level, or exploration mode's single one).
        in_train,
        int(ev.level_seeds.min()),
        int(ev.level_seeds.max()),
    )
    return {f"{split}/{f}": v for f, v in zip(SCORE_FIELDS, values, strict=True)}
