"""Procgen as a native batched gymnasium VectorEnv over envpool.

One `ProcgenVectorEnv` steps `num_envs` games in C++ (envpool) and adds, on the batched arrays:
framestack variants, optional reward shaping, and per-episode bookkeeping (raw return, length,
level seed) that RLlib's callbacks and our evaluator read. RLlib receives it through
`gym_env_vectorize_mode=VECTOR_ENTRY_POINT`, so no per-env Python wrappers sit in the hot loop.

Train/test protocol (Cobbe et al., 2019): training plays levels
`[start_level, start_level + num_levels)`; testing plays `num_levels=0`, the full level
distribution (seeds drawn from [0, 2^31)), so unseen levels.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any, Literal

import gymnasium as gym
import numpy as np

from rlsweep.envs import procgen

if TYPE_CHECKING:  # the spec's part a vector env is built from; the spec layer imports envs
    from rlsweep.spec.subconfigs import EnvConfig

Split = Literal["train", "test"]


def shape_reward(r: np.ndarray) -> np.ndarray:
    """sign(r) * (sqrt(|r| + 1) - 1) + 0.001 * r  (the LARS12llt competition entry)."""
    r = np.asarray(r, dtype=np.float32)
    return np.sign(r) * (np.sqrt(np.abs(r) + 1.0) - 1.0) + 0.001 * r


class RewardNormalizer:
    """baselines' VecNormalize(ob=False) on rewards: each env keeps its discounted return
    `ret = gamma * ret + r`; the running variance of those returns (pooled over envs, Chan et
    al.'s parallel update, count starting at 1e-4) scales the reward, r / sqrt(var + 1e-8),
    which is then clipped; a finished episode's return restarts at 0.

    `real` marks the rows that are transitions: envpool's autoreset rows (the step after an
    episode ends, which only resets) neither update the statistics nor the returns, so the
    statistics are those of the gym3 env the references wrapped, which has no such rows.
    """

    def __init__(self, num_envs: int, gamma: float, clip: float, epsilon: float = 1e-8) -> None:
        self.gamma, self.clip, self.epsilon = gamma, clip, epsilon
        self.returns = np.zeros(num_envs)
        self.mean, self.var, self.count = 0.0, 1.0, 1e-4

    def __call__(self, reward: np.ndarray, done: np.ndarray, real: np.ndarray) -> np.ndarray:
        self.returns[real] = self.returns[real] * self.gamma + reward[real]
        if real.any():
            self._update(self.returns[real])
        self.returns[done] = 0.0
        scaled = reward / np.sqrt(self.var + self.epsilon)
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)

    def statistics(self) -> dict[str, float]:
        """The running statistics of the returns: what a trial's checkpoint keeps (the
        per-env returns belong to episodes a restored trial does not continue)."""
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def set_statistics(self, stats: dict[str, float]) -> None:
        self.mean, self.var, self.count = stats["mean"], stats["var"], stats["count"]

    def _update(self, x: np.ndarray) -> None:
        # Chan et al.'s parallel mean/variance merge (baselines' RunningMeanStd).
        b_mean, b_var, b_count = float(x.mean()), float(x.var()), x.size
        delta, total = b_mean - self.mean, self.count + b_count
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
        self.mean, self.var, self.count = self.mean + delta * b_count / total, m2 / total, total


class FrameStacker:
    """Framestack over a batch of envs, on a ring buffer of the last k frames.

    `push(frames, reset_mask)` takes this step's (N, C, H, W) frames; rows in `reset_mask`
    started a new episode, so their history is refilled with the new first frame. Returns a
    fresh (N, C * frames_per_obs, H, W) array, oldest frame first (RLlib keeps references to
    returned observations, so the output never aliases the buffer).
    """

    def __init__(self, mode: str, k: int) -> None:
        self.mode, self.k = mode, k
        self._buf: np.ndarray | None = None  # (k, N, C, H, W)
        self._newest = 0

    def push(self, frames: np.ndarray, reset_mask: np.ndarray | None = None) -> np.ndarray:
        if self.mode == "none":
            return frames
        if self._buf is None or reset_mask is None:
            self._buf = np.repeat(frames[None], self.k, axis=0)
            self._newest = 0
        else:
            self._newest = (self._newest + 1) % self.k
            self._buf[self._newest] = frames
            if reset_mask.any():
                self._buf[:, reset_mask] = frames[reset_mask]
        oldest = (self._newest + 1) % self.k
        if self.mode == "gap":
            order = [oldest, self._newest]
        else:
            order = [(oldest + i) % self.k for i in range(self.k)]
        return np.concatenate([self._buf[i] for i in order], axis=1)


def env_seed(trial_seed: int, *stream: int) -> int:
    """A 31-bit envpool seed derived from the trial seed and a stream id (runner, split)."""
    return int(np.random.SeedSequence([trial_seed, *stream]).generate_state(1)[0] % (2**31 - 1))


_ENVPOOL_ENTRY = "envpool.entry"
"""The module whose import registers every envpool family. `_import_envpool` stands an empty
one in for it, so that a process that first imports envpool there registers Procgen alone."""


def _import_envpool():
    """envpool, with Procgen's family registered. In a process that has not imported envpool
    yet, no other family is: the package's import registers all 17 (envpool.entry; jumanji's
    renderer imports matplotlib.pyplot), 1.3-1.8 CPU-s of each trial's start on this 2-core
    Xeon (benchmarks/trial_start.py). A wheel thinned by rlsweep.node.wheelhouse registers
    Procgen alone too, by its own entry."""
    from rlsweep.envs.qt import load_qt5

    load_qt5()  # must precede envpool.procgen's import
    if "envpool" not in sys.modules:
        sys.modules.setdefault(_ENVPOOL_ENTRY, types.ModuleType(_ENVPOOL_ENTRY))
    import envpool
    import envpool.procgen.registration  # noqa: F401

    return envpool


class ProcgenVectorEnv(gym.vector.VectorEnv):
    """`num_envs` Procgen games stepped by envpool, with next-step autoreset.

    After an env reports terminated/truncated, its next `step` ignores the action and returns
    the first observation of a new episode with reward 0 (gymnasium's NEXT_STEP mode, which is
    also envpool's and what RLlib's EnvRunner expects).

    When env i finishes an episode, `last_return[i]`, `last_length[i]` and `last_level_seed[i]`
    hold that episode's raw (unshaped) return, length and level seed until its next episode
    ends; RLlib's episode callback and the evaluator read them at that step.

    `reset(seed=s)` with a new seed rebuilds the pool (envpool seeds only at construction), so
    RLlib's per-EnvRunner seeds (trial seed + runner index) reach the level sampler.
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        config: EnvConfig,
        num_envs: int,
        seed: int = 0,
        split: Split = "train",
        num_threads: int = 0,
        groups: int = 1,
    ) -> None:
        self.config = config
        self.split = split
        self.num_envs = num_envs
        if split == "train":
            num_levels, start_level = config.train_levels, config.start_level
        elif split == "test":
            num_levels, start_level = 0, 0  # full distribution: unseen levels
        else:
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        if not 1 <= groups <= num_envs:
            raise ValueError(f"groups must be 1..num_envs ({num_envs}), got {groups}")
        if config.distribution_mode == "exploration":
            # envpool picks the fixed level itself and aborts unless given 0 and 0.
            num_levels, start_level = 0, 0
        self._pool_kwargs = dict(
            task_id=procgen.task_id(config.game, config.distribution_mode),
            env_type="gymnasium",
            num_levels=num_levels,
            start_level=start_level,
            num_threads=num_threads,
            # procgen's own limit; envpool registers one per game (1000 for jumper memory).
            max_episode_steps=procgen.max_episode_steps(config.game, config.distribution_mode),
        )
        self.groups = [
            slice(int(rows[0]), int(rows[-1]) + 1)
            for rows in np.array_split(np.arange(num_envs), groups)
        ]
        """Env rows of each group (one envpool each), in env order."""
        self.seed = seed
        self._pools = self._make_pools(seed)
        frame_space = self._pools[0].observation_space  # (3, 64, 64) uint8
        c, h, w = frame_space.shape
        self.single_observation_space = gym.spaces.Box(
            0, 255, (c * config.frames_per_obs, h, w), np.uint8
        )
        self.single_action_space = self._pools[0].action_space
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self._stackers = [FrameStacker(config.framestack, config.framestack_k) for _ in self.groups]
        self._received: list[tuple | None] = [None] * len(self.groups)
        self._normalizer = (
            RewardNormalizer(num_envs, config.reward_norm_gamma, config.reward_clip)
            if config.normalize_reward
            else None
        )
        self._ep_return = np.zeros(num_envs, np.float64)
        self._ep_length = np.zeros(num_envs, np.int64)
        self._done = np.zeros(num_envs, bool)
        self.level_seeds = np.zeros(num_envs, np.int64)
        self.last_return = np.full(num_envs, np.nan)
        self.last_length = np.zeros(num_envs, np.int64)
        self.last_level_seed = np.full(num_envs, -1, np.int64)

    def _make_pools(self, seed: int) -> list[Any]:
        # envpool derives each env's level stream from the pool's seed and the env's index in
        # the pool, so a group's envs cannot replay a wider pool's: the first group keeps the
        # seed (one group: the same envs as ever), the others draw their own.
        envpool = _import_envpool()
        return [
            envpool.make(
                seed=seed if g == 0 else env_seed(seed, g),
                num_envs=rows.stop - rows.start,
                **self._pool_kwargs,
            )
            for g, rows in enumerate(self.groups)
        ]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None and seed != self.seed:
            for pool in self._pools:
                pool.close()
            self.seed = seed
            self._pools = self._make_pools(seed)
        obs, level_seeds = [], []
        for pool, stacker in zip(self._pools, self._stackers, strict=True):
            frames, info = pool.reset()
            obs.append(stacker.push(frames))
            level_seeds.append(info["level_seed"])
        self.level_seeds = np.concatenate(level_seeds).astype(np.int64)
        self._received = [None] * len(self.groups)
        self._ep_return[:] = 0
        self._ep_length[:] = 0
        self._done[:] = False
        return _joined(obs), {}

    def step(self, actions: Any):
        actions = np.asarray(actions, dtype=np.int32)
        for g, rows in enumerate(self.groups):
            self.send(g, actions[rows])
        for g in range(len(self.groups)):
            self.recv(g)
        return self.finish_step()

    # Stepping one group at a time (double-buffered sampling: a group steps in envpool's threads
    # while the caller infers on another). A step is every group's `send`, then every group's
    # `recv`, then `finish_step`, which returns what `step` returns.
    def send(self, group: int, actions: np.ndarray) -> None:
        """Group `group`'s actions, in its env order; its envs step in envpool's threads."""
        self._pools[group].send(np.asarray(actions, dtype=np.int32))

    def recv(self, group: int) -> np.ndarray:
        """Waits for group `group`'s step and returns its observations (the rows of its envs)."""
        frames, reward, terminated, truncated, info = self._pools[group].recv()
        started = self._done[self.groups[group]]  # rows that return a new episode's first frame
        obs = self._stackers[group].push(frames, started)
        self._received[group] = (obs, reward, terminated, truncated, info["level_seed"])
        return obs

    def finish_step(self):
        """The step of every group, received: `step`'s results, over all envs."""
        if any(r is None for r in self._received):
            raise RuntimeError("finish_step before every group's recv")
        received = [_joined(c) for c in zip(*self._received, strict=True)]
        self._received = [None] * len(self.groups)
        return self._stepped(*received, np.ones(self.num_envs, bool))

    def step_rows(self, rows: np.ndarray, actions: np.ndarray):
        """Steps the envs `rows` (env indices) alone, with their `actions`; the others wait.
        `step`'s five values over every env: a waiting env's reward is 0, its flags are False,
        and its observation is not to be used (its frame history moves on without it). For an
        evaluation, whose envs stop mattering once their first episode ends: the others no
        longer spend the CPU on episodes nobody scores (one group only)."""
        if len(self.groups) != 1:
            raise ValueError(f"step_rows steps one group's envs, not {len(self.groups)} groups")
        pool = self._pools[0]
        pool.send(np.asarray(actions, dtype=np.int32), np.asarray(rows, dtype=np.int32))
        part = pool.recv()
        rows = part[4]["env_id"]  # the envs envpool returns, in its order
        stepped = np.zeros(self.num_envs, bool)
        stepped[rows] = True
        frames, reward, terminated, truncated = (
            _scattered(a, rows, self.num_envs) for a in part[:4]
        )
        level_seeds = self.level_seeds.copy()
        level_seeds[rows] = part[4]["level_seed"]
        obs = self._stackers[0].push(frames, self._done & stepped)
        return self._stepped(obs, reward, terminated, truncated, level_seeds, stepped)

    def _stepped(self, obs, reward, terminated, truncated, level_seeds, stepped: np.ndarray):
        """The bookkeeping of a step of the envs `stepped` (every env, except in `step_rows`)."""
        started = self._done & stepped  # these rows just returned a new episode's first frame
        self.level_seeds = np.asarray(level_seeds, np.int64)
        self._ep_return[started] = 0
        self._ep_length[started] = 0
        self._ep_return += reward
        self._ep_length += stepped & ~started
        if self.config.time_limit == "terminate":
            # Procgen's only truncation is its time limit: a plain done, as procgen reports it.
            terminated, truncated = terminated | truncated, np.zeros_like(truncated)
        done = terminated | truncated
        self._done = np.where(stepped, done, self._done)  # a waiting env stays as it was
        if done.any():
            self.last_return[done] = self._ep_return[done]
            self.last_length[done] = self._ep_length[done]
            self.last_level_seed[done] = self.level_seeds[done]
        if self.config.reward_shaping:
            reward = shape_reward(reward)
        if self._normalizer is not None:
            reward = self._normalizer(reward, done, real=stepped & ~started)
        # Infos stay empty: RLlib stores one dict per env step, and nothing downstream reads it.
        return obs, reward.astype(np.float32), terminated, truncated, {}

    @property
    def reward_normalizer(self) -> RewardNormalizer | None:
        """The rewards' running normalization (`normalize_reward`), or None."""
        return self._normalizer

    def close_extras(self, **kwargs: Any) -> None:
        for pool in self._pools:
            pool.close()


def _scattered(part: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """`part`, the values of envs `rows`, as the rows of an array over `n` envs, zero elsewhere."""
    whole = np.zeros((n, *part.shape[1:]), part.dtype)
    whole[rows] = part
    return whole


def _joined(parts: Any) -> np.ndarray:
    """The groups' arrays as one, in env order (one group: its own array, not a copy)."""
    parts = list(parts)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
