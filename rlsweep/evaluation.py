"""Evaluation on unseen levels: play exactly one episode in each of N envs.

Taking the first episode of every env (rather than every episode finished within a step budget)
avoids the bias towards short episodes. Actions are sampled from the policy, as in Cobbe et al.
(2019); evaluation never touches the training envs or their level sampler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlsweep.envs import ProcgenVectorEnv

Policy = Callable[[np.ndarray], np.ndarray]  # (N, C, H, W) uint8 -> (N,) actions


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
        obs, _, terminated, truncated, _ = env.step(policy(obs))
        steps += n
        newly = (terminated | truncated) & ~finished
        if newly.any():
            returns[newly] = env.last_return[newly]
            lengths[newly] = env.last_length[newly]
            seeds[newly] = env.last_level_seed[newly]
            finished |= newly
    return EvalResult(returns=returns, lengths=lengths, level_seeds=seeds, env_steps=steps)


def sampling_policy(logits_fn: Callable[[torch.Tensor], torch.Tensor], seed: int) -> Policy:
    """Wrap a logits function (obs tensor -> logits) as a sampling policy over numpy arrays."""
    gen = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def act(obs: np.ndarray) -> np.ndarray:
        logits = logits_fn(torch.from_numpy(obs))
        probs = torch.softmax(logits.float(), dim=-1)
        return torch.multinomial(probs, 1, generator=gen).squeeze(-1).numpy()

    return act
