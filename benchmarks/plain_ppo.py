"""The reference PPO: CleanRL's ppo_procgen.py loop in plain PyTorch, one process, outside Ray.

CleanRL's loop is baselines' PPO2 as openai/train-procgen ran it: 64 envs x 256 steps, rewards
through VecNormalize (baselines' `VecNormalize(ob=False)`, gamma 0.99, clip 10), GAE, then 3
epochs over a fresh permutation of the batch in 8 minibatches, advantages standardized per
minibatch, PPO2's clipped policy and value losses, gradients clipped at 0.5, Adam(eps=1e-5).
Procgen's episode ends, its time limit included, are terminal.

It is the reference twice over: `tests/test_ppo_reference.py` holds rlsweep's RLlib update equal
to `ppo_update` (same weights, rollout and permutation), and `benchmarks/learning.py` and
`benchmarks/throughput.py` hold rlsweep's trials against `PlainPPO`'s learning and speed. It
shares nothing with an rlsweep trial but the network (`ImpalaActorCritic`) and, for scores, the
evaluator: the env is envpool itself, rewards are normalized here.

envpool resets an env on the step after its episode ends (the action is ignored, the reward 0):
such a step is not a transition. The rollout runs until it holds `num_envs * num_steps` real
transitions (as RLlib's EnvRunner does) and everything below skips the reset-only steps.

Options beyond CleanRL's loop make it the reference of the other PPO the baselines run, 2020's
RLlib PPO (old stack) as the Procgen competition's entries ran it (`baselines/lars12llt.yaml`):
a framestack (`stack`: the last k frames; `gap`: the first and last of them; an episode's first
frame fills its history, as gym's FrameStack did), a piecewise-linear learning rate over env
steps (each update at the rate of the env steps sampled before its rollout: RLlib sets it after
an update), the adaptive KL penalty (kl_coeff x KL(old || new) in the loss; after an update the
coefficient x1.5 when the mean KL of its last epoch exceeded twice kl_target, x0.5 below half),
a value clip of its own, advantages standardized once over the batch (RLlib's `standardized`:
numpy's std, at least 1e-4), no reward normalization and no gradient clipping.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.distributions import Categorical

from rlsweep.envs import procgen
from rlsweep.trial.models import ImpalaActorCritic, ModelConfig


@dataclass(frozen=True)
class PPOArgs:
    game: str = "coinrun"
    """Procgen game."""
    distribution_mode: str = "easy"
    """Procgen distribution mode."""
    num_levels: int = 200
    """Training levels [start_level, start_level + num_levels); 0 = all."""
    start_level: int = 0
    """First training level."""
    num_envs: int = 64
    """Parallel envs."""
    num_steps: int = 256
    """Steps per env per rollout: the batch is num_envs * num_steps transitions."""
    minibatch_size: int = 2048
    """Transitions per minibatch (the batch / 8 minibatches)."""
    update_epochs: int = 3
    """Passes over each batch."""
    lr: float = 5e-4
    """Adam learning rate."""
    adam_eps: float = 1e-5
    """Adam epsilon (PPO2's)."""
    gamma: float = 0.999
    """Discount."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    lr_schedule: tuple[tuple[int, float], ...] | None = None
    """Piecewise-linear [(env_step, lr), ...] from step 0, flat after the last point; each
    update at the rate of the env steps sampled before its rollout. None: `lr` throughout."""
    clip_coef: float = 0.2
    """Ratio clip, and PPO2's value clip unless `vf_clip` is set."""
    vf_clip: float | None = None
    """PPO2's value clip: the value stays within +-vf_clip of the rollout's. None: clip_coef."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    vf_coef: float = 0.5
    """Weight of 0.5 x the clipped squared value error (RLlib's vf_loss_coeff x 2)."""
    kl_coeff: float = 0.0
    """Initial weight of KL(old || new) in the loss; 0: no KL penalty."""
    kl_target: float = 0.01
    """The KL the coefficient adapts towards."""
    advantage_norm: str = "minibatch"
    """minibatch: standardized per minibatch (PPO2, CleanRL) | batch: once over the batch
    (2020's RLlib)."""
    minibatching: str = "shuffle"
    """shuffle: a fresh permutation every epoch (PPO2, CleanRL) | fixed: one permutation per
    update, its minibatches in a fresh order each epoch (2020's RLlib on TensorFlow)."""
    max_grad_norm: float | None = 0.5
    """Global gradient-norm clip; None: none."""
    normalize_reward: bool = True
    """Rewards through VecNormalize (PPO2); False: raw."""
    reward_norm_gamma: float = 0.99
    """VecNormalize's gamma (train-procgen leaves it at its default 0.99)."""
    reward_clip: float = 10.0
    """VecNormalize's cliprew."""
    net: ModelConfig = ModelConfig()
    """The IMPALA-CNN, as an rlsweep trial declares it (widths, pooling, start, input scaling:
    every field of its ModelConfig); its arithmetic is `precision`'s."""
    framestack: str = "none"
    """none | stack: the last `framestack_k` frames | gap: the first and last of them."""
    framestack_k: int = 4
    """Frames a stack spans."""
    num_threads: int = 2
    """torch threads."""
    seed: int = 0
    """Seeds torch, the envs and the minibatch permutations."""
    device: str = "cpu"
    """Where the network trains and infers."""
    precision: str = "fp32"
    """The network's arithmetic, as rlsweep.trial.models.ModelConfig.precision: on a GPU, fp32 keeps
    matmuls and convolutions in full float32 (TF32 off) and tf32 lets them use TF32."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    def model(self) -> ModelConfig:
        """The network these arguments train (rlsweep's IMPALA-CNN: the same net)."""
        return dataclasses.replace(self.net, precision=self.precision)

    @classmethod
    def of_trial(cls, cfg, **overrides) -> PPOArgs:
        """The reference's arguments for an rlsweep TrialConfig's setting (its options read
        as PPO2's, or 2020's RLlib's: the value loss weight is RLlib's vf_loss_coeff on the
        squared error, 0.5 x vf_coef here). `overrides`: the loop's own (threads, device)."""
        return cls(
            game=cfg.game,
            distribution_mode=cfg.distribution_mode,
            num_levels=cfg.env_config().train_levels,
            start_level=cfg.start_level,
            num_envs=cfg.num_envs_per_env_runner,
            num_steps=cfg.rollout_length,
            minibatch_size=cfg.minibatch_size,
            update_epochs=cfg.num_epochs,
            lr=cfg.lr,
            lr_schedule=cfg.lr_schedule,
            adam_eps=cfg.adam_eps,
            gamma=cfg.gamma,
            gae_lambda=cfg.lambda_,
            clip_coef=cfg.clip_param,
            vf_clip=cfg.vf_clip_param,
            ent_coef=cfg.entropy_coeff,
            vf_coef=2 * cfg.vf_loss_coeff,
            kl_coeff=cfg.kl_coeff,
            kl_target=cfg.kl_target,
            advantage_norm=cfg.advantage_norm,
            minibatching="fixed" if cfg.minibatching == "fixed" else "shuffle",
            max_grad_norm=cfg.grad_clip,
            normalize_reward=cfg.normalize_reward,
            reward_norm_gamma=cfg.reward_norm_gamma,
            net=cfg.model_config(),
            framestack=cfg.framestack,
            framestack_k=cfg.framestack_k,
            seed=cfg.seed,
            **overrides,
        )

    def lr_at(self, env_steps: int) -> float:
        """The learning rate after `env_steps` env steps."""
        if self.lr_schedule is None:
            return self.lr
        steps, rates = zip(*self.lr_schedule, strict=True)
        return float(np.interp(env_steps, steps, rates))


class FrameStack:
    """The last k frames of each env, oldest first, as `mode` shows them: `stack` all k, `gap`
    the first and last (k - 1 steps apart), `none` the frame alone. An env's episode starts with
    its first frame k times over."""

    def __init__(self, mode: str, k: int) -> None:
        if mode not in ("none", "stack", "gap"):
            raise ValueError(f"framestack: got {mode!r}; allowed: none, stack, gap")
        self.mode, self.k = mode, k
        self.history: list[np.ndarray] = []  # k frames (N, C, H, W), oldest first

    def __call__(self, frames: np.ndarray, new_episode: np.ndarray | None) -> np.ndarray:
        """This step's frames in; `new_episode`: the envs whose frame starts an episode (None:
        all of them). Returns the stacked observation (N, C x frames shown, H, W)."""
        if self.mode == "none":
            return frames
        if new_episode is None or not self.history:
            self.history = [frames.copy() for _ in range(self.k)]
        else:
            self.history = [*self.history[1:], frames.copy()]
            for h in self.history:
                h[new_episode] = frames[new_episode]
        shown = self.history if self.mode == "stack" else [self.history[0], self.history[-1]]
        return np.concatenate(shown, axis=1)

    def rollout(self, r: Rollout) -> Rollout:
        """A rollout of raw frames (its first a reset's) as the policy saw it, stacked."""
        self.history = []
        stacked = [self(r.obs[0], None)]
        stacked += [self(r.obs[k + 1], r.started(k)) for k in range(len(r.actions))]
        return dataclasses.replace(r, obs=stacked)


@dataclass
class Rollout:
    """K steps of N envs as envpool returned them (raw rewards): what PPO learns from."""

    obs: list[np.ndarray] = field(default_factory=list)
    """K + 1 observations (N, C, H, W): before each step, and after the last (frames as envpool
    returned them, or stacked: `FrameStack`)."""
    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[np.ndarray] = field(default_factory=list)
    terminated: list[np.ndarray] = field(default_factory=list)
    truncated: list[np.ndarray] = field(default_factory=list)
    """envpool's time-limit endings (terminal here, as procgen reports a plain done)."""
    first_step_resets: np.ndarray | None = None
    """Envs whose first step only resets (their episode ended on the previous rollout's last)."""

    def started(self, k: int) -> np.ndarray:
        """Envs for which step k only resets: not a transition."""
        if k == 0:
            n = self.obs[0].shape[0]
            return np.zeros(n, bool) if self.first_step_resets is None else self.first_step_resets
        return self.terminated[k - 1] | self.truncated[k - 1]

    def real_transitions(self) -> list[tuple[int, int]]:
        """(step, env) of every real transition, time-major: CleanRL's flattening order."""
        return [(k, i) for k in range(len(self.actions)) for i in np.flatnonzero(~self.started(k))]


class VecNormalize:
    """baselines' VecNormalize(ob=False), reward path: the running variance (RunningMeanStd,
    count from 1e-4) of each env's discounted return scales its rewards, then they are clipped.
    Reset-only steps are skipped (the gym3 env the references wrapped has none)."""

    def __init__(self, num_envs: int, gamma: float, cliprew: float) -> None:
        self.ret = np.zeros(num_envs)
        self.mean, self.var, self.count = 0.0, 1.0, 1e-4
        self.gamma, self.cliprew = gamma, cliprew

    def __call__(self, rews: np.ndarray, news: np.ndarray, real: np.ndarray) -> np.ndarray:
        self.ret[real] = self.ret[real] * self.gamma + rews[real]
        x = self.ret[real]
        if x.size:
            batch_mean, batch_var, batch_count = x.mean(), x.var(), x.size
            delta, tot = batch_mean - self.mean, self.count + batch_count
            m2 = self.var * self.count + batch_var * batch_count
            m2 += delta**2 * self.count * batch_count / tot
            self.mean, self.var, self.count = self.mean + delta * batch_count / tot, m2 / tot, tot
        self.ret[news] = 0.0
        return np.clip(rews / np.sqrt(self.var + 1e-8), -self.cliprew, self.cliprew)

    def rollout(self, r: Rollout) -> torch.Tensor:
        """The rollout's rewards, normalized step by step as the env wrapper would have."""
        out = [
            self(r.rewards[k], r.terminated[k] | r.truncated[k], ~r.started(k))
            for k in range(len(r.actions))
        ]
        return torch.from_numpy(np.stack(out)).float()


@torch.no_grad()
def values_and_logprobs(
    net: ImpalaActorCritic, r: Rollout, chunk: int = 1024
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """V(obs) for the K + 1 observations, log pi(action) and the logits for the K steps,
    (K[+1], N[, actions])."""
    obs = torch.from_numpy(np.stack(r.obs))
    k1, n = obs.shape[:2]
    flat = obs.flatten(0, 1)
    device = next(net.parameters()).device
    outs = [net(flat[i : i + chunk].to(device)) for i in range(0, len(flat), chunk)]
    logits = torch.cat([o[0] for o in outs]).view(k1, n, -1)
    values = torch.cat([o[1] for o in outs]).view(k1, n)
    actions = torch.from_numpy(np.stack(r.actions)).long().to(device)
    return values, Categorical(logits=logits[:-1]).log_prob(actions), logits[:-1]


def ppo_update(
    net: ImpalaActorCritic,
    optimizer: torch.optim.Optimizer,
    r: Rollout,
    values: torch.Tensor,
    logprobs: torch.Tensor,
    rewards: torch.Tensor,
    args: PPOArgs,
    generator: torch.Generator,
    order: list[tuple[int, int]] | None = None,
    logits: torch.Tensor | None = None,
    kl_coeff: float = 0.0,
) -> dict[str, float]:
    """GAE, then `update_epochs` epochs of `batch_size // minibatch_size` minibatches, each
    from a fresh `torch.randperm(len(order), generator=generator)` of the real transitions
    (`minibatching: fixed`: one for the update, then a `torch.randperm` of the minibatches'
    order each epoch).
    `order` lists them as (step, env); default time-major (a test passes RLlib's row order so
    that the same permutation picks the same transitions). `logits`: the rollout policy's, for
    the KL penalty at `kl_coeff`. Returns the last minibatch's losses and `kl`, the mean KL of
    the last epoch's minibatches."""
    device = values.device
    num_steps = len(r.actions)
    dones = torch.from_numpy(np.stack(r.terminated) | np.stack(r.truncated)).float().to(device)
    rewards = rewards.to(device)

    # GAE with CleanRL's recursion; `dones[t]` = the transition at t ended its episode.
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(rewards[0])
    for t in reversed(range(num_steps)):
        real = torch.from_numpy(~r.started(t)).to(device)
        nextnonterminal = 1.0 - dones[t]
        delta = rewards[t] + args.gamma * values[t + 1] * nextnonterminal - values[t]
        gae = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
        advantages[t] = torch.where(real, gae, advantages[t])
        lastgaelam = torch.where(real, gae, lastgaelam)
    returns = advantages + values[:-1]

    order = order if order is not None else r.real_transitions()
    ks, envs = (torch.tensor(x, device=device) for x in zip(*order, strict=True))
    obs = torch.from_numpy(np.stack(r.obs)).to(device)
    actions = torch.from_numpy(np.stack(r.actions)).long().to(device)
    b_obs, b_actions, b_logprobs = obs[ks, envs], actions[ks, envs], logprobs[ks, envs]
    b_advantages, b_returns, b_values = advantages[ks, envs], returns[ks, envs], values[ks, envs]
    if args.advantage_norm == "batch":  # RLlib's `standardized`, on its float32 numpy arrays
        a = b_advantages.cpu().numpy()
        a = (a - a.mean()) / max(1e-4, a.std())
        b_advantages = torch.from_numpy(a).to(device)
    if kl_coeff and logits is None:
        raise ValueError("a KL penalty needs the rollout policy's logits")
    b_old_logits = None if logits is None else logits[ks, envs]
    vf_clip = args.clip_coef if args.vf_clip is None else args.vf_clip

    mb, stats = args.minibatch_size, {}
    blocks = range(0, args.batch_size, mb)
    fixed = args.minibatching == "fixed"
    once = torch.randperm(len(order), generator=generator).to(device) if fixed else None
    for _ in range(args.update_epochs):
        if once is None:
            b_inds, starts = torch.randperm(len(order), generator=generator).to(device), blocks
        else:  # one permutation, its minibatches in a fresh order
            b_inds = once
            starts = [blocks[j] for j in torch.randperm(len(blocks), generator=generator)]
        kls = []
        for start in starts:
            mb_inds = b_inds[start : start + mb]
            newlogits, newvalue = net(b_obs[mb_inds])
            dist = Categorical(logits=newlogits)
            newlogprob, entropy = dist.log_prob(b_actions[mb_inds]), dist.entropy()
            ratio = (newlogprob - b_logprobs[mb_inds]).exp()

            mb_advantages = b_advantages[mb_inds]
            if args.advantage_norm == "minibatch":
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (
                    mb_advantages.std() + 1e-8
                )
            pg_loss1 = -mb_advantages * ratio
            pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
            pg_loss = torch.max(pg_loss1, pg_loss2).mean()

            v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
            v_clipped = b_values[mb_inds] + torch.clamp(
                newvalue - b_values[mb_inds], -vf_clip, vf_clip
            )
            v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
            v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()

            entropy_loss = entropy.mean()
            loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
            if kl_coeff:
                old = Categorical(logits=b_old_logits[mb_inds])
                kl = torch.distributions.kl_divergence(old, dist).mean()
                loss = loss + kl_coeff * kl
                kls.append(kl.item())
            optimizer.zero_grad()
            loss.backward()
            if args.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
            optimizer.step()
            stats = {"loss": loss.item(), "pg_loss": pg_loss.item(), "v_loss": v_loss.item()}
        stats["kl"] = float(np.mean(kls)) if kls else 0.0
    return stats


def adapted_kl_coeff(kl_coeff: float, kl: float, target: float) -> float:
    """RLlib's adaptive KL coefficient after an update whose mean KL was `kl`."""
    if kl > 2.0 * target:
        return kl_coeff * 1.5
    if kl < 0.5 * target:
        return kl_coeff * 0.5
    return kl_coeff


def make_envpool(args: PPOArgs):
    """envpool's Procgen, raw: training levels, no reward processing."""
    from rlsweep.envs.qt import load_qt5

    load_qt5()  # envpool's Procgen links Qt5
    import envpool

    return envpool.make(
        procgen.task_id(args.game, args.distribution_mode),
        env_type="gymnasium",
        num_envs=args.num_envs,
        num_levels=args.num_levels,
        start_level=args.start_level,
        seed=args.seed,
        # procgen's own limit, as rlsweep's envs set it (envpool's differs for jumper memory).
        max_episode_steps=procgen.max_episode_steps(args.game, args.distribution_mode),
    )


@dataclass(frozen=True)
class IterationStats:
    env_steps: int
    """Real transitions sampled (reset-only steps excluded)."""
    sample_s: float
    """Rollout: policy forward passes and env steps."""
    learn_s: float
    """GAE and the SGD epochs."""
    loss: float


class PlainPPO:
    """The loop: `train_iteration()` = one rollout of `batch_size` real transitions + one
    `ppo_update`. `net` is the policy (for evaluation)."""

    def __init__(self, args: PPOArgs = PPOArgs()) -> None:
        self.args = a = args
        torch.set_num_threads(a.num_threads)
        torch.manual_seed(a.seed)
        self.env = make_envpool(a)
        self.stack = FrameStack(a.framestack, a.framestack_k)
        self.next_obs = self.stack(self.env.reset()[0], None)
        num_actions = int(self.env.action_space.n)
        if a.device.startswith("cuda"):
            tf32 = "tf32" if a.precision == "tf32" else "ieee"
            torch.backends.cuda.matmul.fp32_precision = tf32
            torch.backends.cudnn.conv.fp32_precision = tf32
            torch.backends.cudnn.benchmark = True  # as a trial has it (deterministic: false)
        self.net = ImpalaActorCritic(self.next_obs.shape[1:], num_actions, a.model()).to(a.device)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=a.lr_at(0), eps=a.adam_eps)
        self.normalizer = VecNormalize(a.num_envs, a.reward_norm_gamma, a.reward_clip)
        self.generator = torch.Generator().manual_seed(a.seed)
        self.next_resets = np.zeros(a.num_envs, bool)
        self.env_steps = 0
        self.kl_coeff = a.kl_coeff

    def close(self) -> None:
        self.env.close()

    def state_dict(self) -> dict:
        """What the loop learned and drew so far: the network, Adam, the adapted KL
        coefficient, the reward normalizer's running statistics and every RNG. A loop given it
        (`load_state_dict`) goes on as this one would, but for its envs, which start again."""
        n = self.normalizer
        return {
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "kl_coeff": self.kl_coeff,
            "env_steps": self.env_steps,
            "normalizer": (n.mean, n.var, n.count),
            "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
        }

    def load_state_dict(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.kl_coeff, self.env_steps = state["kl_coeff"], state["env_steps"]
        n = self.normalizer
        n.mean, n.var, n.count = state["normalizer"]  # each env's running return restarts
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None:
            torch.cuda.set_rng_state_all(state["cuda_rng"])

    def observe(self, frames: np.ndarray, r: Rollout) -> np.ndarray:
        """The policy's observation of the frames the rollout's last step returned."""
        return self.stack(frames, r.started(len(r.actions) - 1))

    @torch.no_grad()
    def rollout(self) -> tuple[Rollout, torch.Tensor, torch.Tensor, torch.Tensor]:
        """A rollout (observations as the policy saw them), and the rollout policy's values
        (with the last observation's), log-probabilities and logits."""
        a, device = self.args, self.args.device
        r = Rollout(obs=[self.next_obs], first_step_resets=self.next_resets)
        values, logprobs, all_logits, real = [], [], [], 0
        while real < a.batch_size:
            real += int((~r.started(len(r.actions))).sum())
            logits, value = self.net(torch.from_numpy(r.obs[-1]).to(device))
            dist = Categorical(logits=logits)
            action = dist.sample()
            values.append(value)
            logprobs.append(dist.log_prob(action))
            all_logits.append(logits)
            frames, reward, terminated, truncated, _ = self.env.step(action.cpu().numpy())
            r.actions.append(action.cpu().numpy())
            r.obs.append(self.observe(frames, r))
            r.rewards.append(reward)
            r.terminated.append(terminated)
            r.truncated.append(truncated)
        _, last_value = self.net(torch.from_numpy(r.obs[-1]).to(device))
        self.next_obs, self.next_resets = r.obs[-1], r.terminated[-1] | r.truncated[-1]
        self.env_steps += real
        values = torch.stack([*values, last_value])
        return r, values, torch.stack(logprobs), torch.stack(all_logits)

    def train_iteration(self) -> IterationStats:
        a = self.args
        for group in self.optimizer.param_groups:  # RLlib sets it after the previous update
            group["lr"] = a.lr_at(self.env_steps)
        t0 = time.perf_counter()
        r, values, logprobs, logits = self.rollout()
        t1 = time.perf_counter()
        if a.normalize_reward:
            rewards = self.normalizer.rollout(r)
        else:
            rewards = torch.from_numpy(np.stack(r.rewards)).float()
        stats = ppo_update(
            self.net,
            self.optimizer,
            r,
            values,
            logprobs,
            rewards,
            a,
            self.generator,
            logits=logits,
            kl_coeff=self.kl_coeff,
        )
        if self.kl_coeff:
            self.kl_coeff = adapted_kl_coeff(self.kl_coeff, stats["kl"], a.kl_target)
        t2 = time.perf_counter()
        real = sum(int((~r.started(k)).sum()) for k in range(len(r.actions)))
        return IterationStats(real, t1 - t0, t2 - t1, stats.get("loss", float("nan")))


def _jemalloc_loaded() -> bool:
    """Whether jemalloc is mapped into this process (LD_PRELOAD reached it)."""
    try:
        with open("/proc/self/maps") as f:
            return "jemalloc" in f.read()
    except OSError:
        return False


def main(argv: list[str] | None = None) -> None:
    """`--bench`: time `train_iteration()` and print one JSON object (benchmarks/throughput.py
    runs this as a process of its own, as a user would run CleanRL's script)."""
    import argparse
    import json
    import os
    import sys

    p = argparse.ArgumentParser(description="The reference PPO loop, timed.")
    p.add_argument("--bench", action="store_true", help="time iterations, print JSON")
    p.add_argument("--game", default=PPOArgs.game)
    p.add_argument("--distribution-mode", default=PPOArgs.distribution_mode)
    p.add_argument("--num-envs", type=int, default=PPOArgs.num_envs)
    p.add_argument("--num-steps", type=int, default=PPOArgs.num_steps)
    p.add_argument("--minibatch-size", type=int, default=PPOArgs.minibatch_size)
    p.add_argument("--update-epochs", type=int, default=PPOArgs.update_epochs)
    p.add_argument("--threads", type=int, default=PPOArgs.num_threads)
    p.add_argument("--device", default=PPOArgs.device)
    p.add_argument("--precision", default=PPOArgs.precision, choices=("fp32", "tf32", "bf16"))
    p.add_argument("--warmup", type=int, default=1, help="untimed iterations first")
    p.add_argument("--iterations", type=int, default=4, help="timed iterations")
    a = p.parse_args(argv)
    if not a.bench:
        p.error("only --bench is implemented")
    ppo = PlainPPO(
        PPOArgs(
            game=a.game,
            distribution_mode=a.distribution_mode,
            num_envs=a.num_envs,
            num_steps=a.num_steps,
            minibatch_size=a.minibatch_size,
            update_epochs=a.update_epochs,
            num_threads=a.threads,
            device=a.device,
            precision=a.precision,
        )
    )
    iterations = []
    try:
        for i in range(a.warmup + a.iterations):
            t0, cpu0 = time.perf_counter(), time.process_time()
            s = ppo.train_iteration()
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            if i >= a.warmup:
                iterations.append(
                    {
                        "env_steps": s.env_steps,
                        "wall_s": wall,
                        "sample_s": s.sample_s,
                        "learn_s": s.learn_s,
                        "cpu_s": cpu,
                        "end_unix": time.time(),
                    }
                )
            print(f"iteration {i + 1}: {s.env_steps / wall:.1f} env-steps/s", file=sys.stderr)
    finally:
        ppo.close()
    out = {
        "iterations": iterations,
        "env_steps_per_s": sum(x["env_steps"] for x in iterations)
        / sum(x["wall_s"] for x in iterations),
        "jemalloc": _jemalloc_loaded(),
        "malloc_conf": os.environ.get("MALLOC_CONF"),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
