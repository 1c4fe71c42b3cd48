"""The evaluator: play exactly one episode in each of N envs, on the training levels
(`train/return`) and on unseen levels (`test/return`), the same way.

Taking the first episode of every env (rather than every episode finished within a step budget)
avoids the bias towards short episodes. Actions are sampled from the policy, as in Cobbe et al.
(2019); evaluation never touches the training envs or their level sampler.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from rlsweep.envs import procgen
from rlsweep.envs.vector_env import ProcgenVectorEnv, env_seed
from rlsweep.spec.config import TrialConfig

Policy = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(obs (N, C, H, W) uint8, active (N,) bool) -> (N,) actions. Only the `active` rows' actions
are scored (their envs are still in their first episode); the others' may cost nothing."""

SPLITS = dict(zip(procgen.SPLITS, (2, 1), strict=True))
"""Evaluated level splits and their env_seed stream ids (never the training envs' streams)."""


@dataclass(frozen=True)
class EvalResult:
    returns: np.ndarray
    """Raw return of each evaluated episode."""
    lengths: np.ndarray
    level_seeds: np.ndarray
    """Procgen level seed each episode was played on (as reported by the env)."""

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def env_steps(self) -> int:
        """Env steps spent evaluating (not counted against the training budget): each env
        steps until its episode ends, and no further."""
        return int(self.lengths.sum())

    @property
    def steps(self) -> int:
        """Steps its envs took one after another: until its longest episode ended."""
        return int(self.lengths.max())


def evaluate(policy: Policy, envs: Mapping[str, ProcgenVectorEnv]) -> dict[str, EvalResult]:
    """Run every env of every split until it has finished one episode, the splits in lockstep:
    one policy call a step over all of their envs' rows (in `envs`' order). An evaluation then
    lasts as long as its longest episode, not its splits' longest episodes one after another:
    on a GPU a step's forward costs about as much for 64 rows as for 32. An env whose episode
    has ended stops stepping (`ProcgenVectorEnv.step_rows`: under random actions bigfish's
    envs would otherwise play 3.7 times the steps they are scored on); its row stays in the
    batch, inactive, so that every call has the same shape."""
    names = list(envs)
    played = {s: _Episodes(envs[s].num_envs) for s in names}
    obs = {s: envs[s].reset()[0] for s in names}
    bounds = np.cumsum([envs[s].num_envs for s in names])[:-1]
    while not all(played[s].finished.all() for s in names):
        batch = np.concatenate([obs[s] for s in names])
        active = np.concatenate([~played[s].finished for s in names])
        for s, actions in zip(names, np.split(policy(batch, active), bounds), strict=True):
            if not played[s].finished.all():
                rows = np.flatnonzero(~played[s].finished)
                obs[s], _, terminated, truncated, _ = envs[s].step_rows(rows, actions[rows])
                played[s].stepped(envs[s], terminated | truncated)
    return {s: played[s].result() for s in names}


def env_steps_taken(played: Mapping[str, EvalResult]) -> int:
    """The env steps an evaluation took, its splits' together."""
    return sum(ev.env_steps for ev in played.values())


def steps_taken(played: Mapping[str, EvalResult]) -> int:
    """The steps an evaluation took one after another: its longest split's."""
    return max(ev.steps for ev in played.values())


class _Episodes:
    """One split's first episodes, as its env finishes them."""

    def __init__(self, n: int) -> None:
        self.finished = np.zeros(n, bool)
        self.returns = np.zeros(n)
        self.lengths = np.zeros(n, np.int64)
        self.seeds = np.zeros(n, np.int64)

    def stepped(self, env: ProcgenVectorEnv, done: np.ndarray) -> None:
        newly = done & ~self.finished
        if newly.any():
            self.returns[newly] = env.last_return[newly]
            self.lengths[newly] = env.last_length[newly]
            self.seeds[newly] = env.last_level_seed[newly]
            self.finished |= newly

    def result(self) -> EvalResult:
        return EvalResult(self.returns, self.lengths, self.seeds)


@dataclass
class SamplingPolicy:
    """A logits function (obs tensor -> logits) as a sampling policy over numpy arrays, drawing
    from its own `generator` (a trial saves and restores its state with its checkpoints)."""

    logits_fn: Callable[[torch.Tensor], torch.Tensor]
    generator: torch.Generator
    every_row: bool = False
    """Give the network every row, the finished envs' too: for a GPU, where a forward of 64
    rows costs about what one of 32 does, and one shape replays from a CUDA graph
    (`ImpalaPPOModule.graph_rollouts`) and spares cuDNN timing its algorithms for every row
    count. The actions are the same either way."""

    @torch.no_grad()
    def __call__(self, obs: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Actions for every row; the network sees only the `active` rows (unless
        `every_row`). An evaluation's tail is mostly envs already done (on leaper at the start,
        53-68% of its rows), and on a CPU the forward is most of its cost. The other rows draw
        from uniform logits: every row still takes its own draws from the generator
        (multinomial draws Exp(1) noise for each logit), so an active row's action does not
        depend on which others are active."""
        rows, frames = torch.from_numpy(active), torch.from_numpy(obs)
        scored = self.logits_fn(frames if self.every_row else frames[rows]).float()
        logits = scored.new_zeros(len(obs), scored.shape[-1])
        logits[rows] = scored[rows] if self.every_row else scored
        probs = torch.softmax(logits, dim=-1)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).numpy()


def sampling_policy(
    logits_fn: Callable[[torch.Tensor], torch.Tensor], seed: int, every_row: bool = False
) -> SamplingPolicy:
    """`logits_fn` as a sampling policy whose generator starts from `seed`."""
    return SamplingPolicy(logits_fn, torch.Generator().manual_seed(seed), every_row)


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
