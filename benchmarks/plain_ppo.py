"""A minimal single-process PPO on Procgen in plain PyTorch (CleanRL ppo_procgen style).

The reference the throughput benchmark holds rlsweep's RLlib trial against: the same network
(`ImpalaActorCritic`), the same envs (`ProcgenVectorEnv`), the same batch and PPO settings, with
nothing but a rollout, GAE and minibatch SGD. It reads top to bottom and is a real PPO.

The env autoresets in gymnasium's NEXT_STEP mode: after a step reports terminated/truncated, the
next step ignores the action and returns the first observation of a new episode with reward 0.
That "reset step" is not a transition: its row is masked out of the loss and not counted as an
env step (as RLlib does not count it either). Its observation is the episode's final one, so its
value doubles as the bootstrap value of a truncated episode.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch.distributions import Categorical

from rlsweep.envs import EnvConfig, ProcgenVectorEnv, env_seed
from rlsweep.models import ImpalaActorCritic, ModelConfig


@dataclass(frozen=True)
class PPOArgs:
    num_envs: int = 64
    num_steps: int = 64
    """Rollout length per env; the batch is num_envs * num_steps rows."""
    minibatch_size: int = 2048
    num_epochs: int = 3
    lr: float = 5e-4
    gamma: float = 0.999
    gae_lambda: float = 0.95
    clip: float = 0.2
    vf_coef: float = 0.5
    vf_clip: float = 10.0
    """Clamp on the squared value error (RLlib's vf_clip_param, as in the rlsweep trial)."""
    ent_coef: float = 0.01
    max_grad_norm: float = 0.5
    num_threads: int = 2
    seed: int = 0


@dataclass(frozen=True)
class IterationStats:
    env_steps: int
    """Real transitions sampled (reset steps excluded)."""
    sample_s: float
    """Rollout: policy forward passes and env steps."""
    learn_s: float
    """GAE and the SGD epochs."""
    loss: float


class PlainPPO:
    def __init__(self, args: PPOArgs = PPOArgs(), env_config: EnvConfig | None = None) -> None:
        self.args = a = args
        torch.set_num_threads(a.num_threads)
        torch.manual_seed(a.seed)
        self.env = ProcgenVectorEnv(
            env_config or EnvConfig(game="coinrun"), num_envs=a.num_envs, seed=env_seed(a.seed, 0)
        )
        obs_shape = tuple(self.env.single_observation_space.shape)
        num_actions = int(self.env.single_action_space.n)
        self.agent = ImpalaActorCritic(obs_shape, num_actions, ModelConfig())
        self.optimizer = torch.optim.Adam(self.agent.parameters(), lr=a.lr)

        # Rollout storage, (num_steps, num_envs, ...), reused every iteration.
        shape = (a.num_steps, a.num_envs)
        self.obs = torch.zeros(shape + obs_shape, dtype=torch.uint8)
        self.actions = torch.zeros(shape, dtype=torch.long)
        self.logprobs = torch.zeros(shape)
        self.values = torch.zeros(shape)
        self.rewards = torch.zeros(shape)
        self.terminated = torch.zeros(shape)
        self.done = torch.zeros(shape)  # terminated or truncated
        self.valid = torch.zeros(shape, dtype=torch.bool)  # False on reset steps

        obs, _ = self.env.reset()
        self.next_obs = torch.from_numpy(obs)
        self.next_done = torch.zeros(a.num_envs, dtype=torch.bool)

    def close(self) -> None:
        self.env.close()

    def rollout(self) -> None:
        for t in range(self.args.num_steps):
            self.obs[t] = self.next_obs
            # The previous step ended an episode: this step only resets, whatever the action.
            self.valid[t] = ~self.next_done
            with torch.no_grad():
                logits, value = self.agent(self.next_obs)
                dist = Categorical(logits=logits)
                action = dist.sample()
            self.actions[t] = action
            self.logprobs[t] = dist.log_prob(action)
            self.values[t] = value
            obs, reward, terminated, truncated, _ = self.env.step(action.numpy())
            self.next_obs = torch.from_numpy(obs)
            self.next_done = torch.from_numpy(terminated | truncated)
            self.rewards[t] = torch.from_numpy(reward)
            self.terminated[t] = torch.from_numpy(terminated).float()
            self.done[t] = self.next_done.float()

    @torch.no_grad()
    def advantages(self) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE(lambda). Row t's successor is row t+1 (or next_obs after the last row); after a
        done, row t+1 holds the episode's final observation, so V(row t+1) bootstraps truncated
        episodes, terminated ones get no bootstrap, and (1 - done) stops the recursion there."""
        a = self.args
        _, last_value = self.agent(self.next_obs)
        next_values = torch.cat([self.values[1:], last_value[None]])
        deltas = self.rewards + a.gamma * next_values * (1 - self.terminated) - self.values
        adv = torch.zeros_like(self.rewards)
        running = torch.zeros(a.num_envs)
        for t in reversed(range(a.num_steps)):
            running = deltas[t] + a.gamma * a.gae_lambda * (1 - self.done[t]) * running
            adv[t] = running
        return adv, adv + self.values

    def update(self, adv: torch.Tensor, returns: torch.Tensor) -> float:
        a = self.args
        b_obs = self.obs.flatten(0, 1)
        b_actions = self.actions.flatten()
        b_logprobs = self.logprobs.flatten()
        b_returns = returns.flatten()
        b_valid = self.valid.flatten()
        b_adv = adv.flatten()
        # Standardize over the batch's real transitions (as RLlib's PPO does).
        real = b_adv[b_valid]
        b_adv = (b_adv - real.mean()) / (real.std() + 1e-8)
        b_mask = b_valid.float()

        batch = b_obs.shape[0]
        loss = torch.zeros(())
        for _ in range(a.num_epochs):
            perm = torch.randperm(batch)
            for start in range(0, batch, a.minibatch_size):
                idx = perm[start : start + a.minibatch_size]
                logits, value = self.agent(b_obs[idx])
                dist = Categorical(logits=logits)
                ratio = (dist.log_prob(b_actions[idx]) - b_logprobs[idx]).exp()
                mb_adv = b_adv[idx]
                pg_loss = -torch.min(ratio * mb_adv, ratio.clamp(1 - a.clip, 1 + a.clip) * mb_adv)
                v_loss = ((value - b_returns[idx]) ** 2).clamp(max=a.vf_clip)
                per_row = pg_loss + a.vf_coef * v_loss - a.ent_coef * dist.entropy()
                mask = b_mask[idx]
                loss = (per_row * mask).sum() / mask.sum().clamp(min=1)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.agent.parameters(), a.max_grad_norm)
                self.optimizer.step()
        return float(loss.detach())

    def train_iteration(self) -> IterationStats:
        t0 = time.perf_counter()
        self.rollout()
        t1 = time.perf_counter()
        adv, returns = self.advantages()
        loss = self.update(adv, returns)
        t2 = time.perf_counter()
        return IterationStats(int(self.valid.sum()), t1 - t0, t2 - t1, loss)
