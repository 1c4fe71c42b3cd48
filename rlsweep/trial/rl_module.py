"""The IMPALA-CNN as RLlib new-API-stack `TorchRLModule`s: actor-critic (PPO, IMPALA), actor-critic
with an old-policy target copy (APPO), and a Q-network (DQN); and `row_chunks`, which cuts a batch
for forward passes outside RLlib's minibatches (GAE's values, the evaluation's actions) so that no
forward sees more rows than a training step."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import torch
from ray.rllib.algorithms.dqn.dqn_learner import QF_NEXT_PREDS, QF_PREDS, QF_TARGET_NEXT_PREDS
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis import (
    TARGET_NETWORK_ACTION_DIST_INPUTS,
    InferenceOnlyAPI,
    QNetAPI,
    TargetNetworkAPI,
    ValueFunctionAPI,
)
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.schedules.scheduler import Scheduler

from rlsweep.trial.augment import AugmentConfig, augment
from rlsweep.trial.cuda_graphs import RolloutGraph
from rlsweep.trial.models import (
    ImpalaActorCritic,
    ImpalaCNN,
    ModelConfig,
    categorical_noise,
    sample_categorical,
)


class RolloutsInEvalMode:
    """Mixin (before TorchRLModule in the bases): `forward_exploration`/`forward_inference`
    switch the module to eval mode when it is in train mode and leave it there. TorchRLModule's
    (Ray 2.60) switch every submodule to eval() and back to train() around each call, a fixed
    cost on every step, CPU or GPU; `forward_train` switches back
    to train mode itself. (rlsweep's networks behave the same in both modes.)"""

    def forward_exploration(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        if self.training:
            self.eval()
        return self._forward_exploration(batch, **kwargs)

    def forward_inference(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        if self.training:
            self.eval()
        return self._forward_inference(batch, **kwargs)


class ImpalaPPOModule(RolloutsInEvalMode, TorchRLModule, ValueFunctionAPI):
    """IMPALA-CNN actor-critic; `model_config` holds `ModelConfig` fields as a plain dict, plus
    `augment` (AugmentConfig fields) and `augment_seed`."""

    def setup(self) -> None:
        # RLlib merges its own defaults into model_config; keep only our fields.
        ours = {f.name for f in dataclasses.fields(ModelConfig)}
        cfg = ModelConfig(**{k: v for k, v in self.model_config.items() if k in ours})
        self.net = ImpalaActorCritic(
            tuple(self.observation_space.shape), int(self.action_space.n), cfg
        )
        self.augmentation = AugmentConfig(**self.model_config.get("augment", {}))
        self._augment_rng = torch.Generator().manual_seed(self.model_config.get("augment_seed", 0))
        self._rollout_graph: RolloutGraph | None = None  # graph_rollouts()
        self._inference_graph: RolloutGraph | None = None  # graph_rollouts()
        self._cuda_graph = cfg.cuda_graph

    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return self._logits(batch[Columns.OBS])

    def _logits(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        return {Columns.ACTION_DIST_INPUTS: self.net.pi(self.net.features(obs))}

    @torch.no_grad()  # the evaluation's forward: no autograd graph, as a rollout's
    def _forward_inference(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        if self._inference_graph is None:
            return self._forward(batch)
        return self._inference_graph((batch[Columns.OBS],), self.net.pi.weight.device)

    @torch.no_grad()  # as RLlib's default: a rollout builds no autograd graph
    def _forward_exploration(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        if self._rollout_graph is None:
            return self._rollout_outputs(obs)
        # The actions' noise is drawn here, outside the graph, where the eager forward draws it
        # (the forward draws nothing else): the same numbers from the same generator.
        pi = self.net.pi  # the logits are its outputs: its dtype, its device
        device = pi.weight.device
        noise = categorical_noise((len(obs), pi.out_features), device=device, dtype=pi.weight.dtype)
        return self._rollout_graph((obs, noise), device)

    def _rollout_outputs(
        self, obs: torch.Tensor, noise: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """The exploration forward: the policy's logits, the value estimate (one linear layer on
        features already computed, so that PPO's GAE need not run the trunk over the whole batch
        again), and the actions sampled from the logits with their log-probabilities
        (`sample_categorical`, what RLlib's connectors would sample from this module's
        TorchCategorical, given `noise` or drawing it): in the forward, so that on a GPU the
        CUDA graph replays the sampling too, and the rollout's loop has nothing left to run on
        the device but one copy of these to the host."""
        feats = self.net.features(obs)
        logits = self.net.pi(feats)
        actions, logp = sample_categorical(logits, noise)
        return {
            Columns.ACTION_DIST_INPUTS: logits,
            Columns.VF_PREDS: self.net.vf(feats).squeeze(-1),
            Columns.ACTIONS: actions,
            Columns.ACTION_LOGP: logp,
        }

    def graph_rollouts(self) -> None:
        """Replay the exploration forward and the inference forward (the evaluation's, which
        gives it every env's frames: one shape) from CUDA graphs (`rlsweep.trial.cuda_graphs`):
        for a module on a GPU that only samples (a GPU trial's EnvRunner). The same numbers.
        Not where the model config says `cuda_graph: false`."""
        if self._cuda_graph:
            self._rollout_graph = RolloutGraph(self._rollout_outputs, self.parameters)
            self._inference_graph = RolloutGraph(self._logits, self.parameters, "evaluation")

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        # Augmentation touches only the learner's minibatches; rollouts use _forward.
        obs = batch[Columns.OBS]
        if self.augmentation.augment != "none":
            obs = augment(obs, self.augmentation, self._augment_rng)
        feats = self.net.features(obs)
        # EMBEDDINGS lets the PPO loss reuse the trunk for the value head (one trunk pass).
        return {Columns.ACTION_DIST_INPUTS: self.net.pi(feats), Columns.EMBEDDINGS: feats}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        # PPO's GAE takes the rollout's values where they are exact and asks for the rest only
        # (rlsweep.trial.ppo_learner.ReferenceGAE).
        if embeddings is None:
            embeddings = self.net.features(batch[Columns.OBS])
        return self.net.vf(embeddings).squeeze(-1)


class ImpalaAPPOModule(ImpalaPPOModule, InferenceOnlyAPI, TargetNetworkAPI):
    """`ImpalaPPOModule` plus the frozen old-policy copy APPO's learner clips against."""

    def make_target_networks(self) -> None:
        self._old_net = make_target_network(self.net)

    def get_target_network_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        return [(self.net, self._old_net)]

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        old = self._old_net
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: old.pi(old.features(batch[Columns.OBS]))}

    def get_non_inference_attributes(self) -> list[str]:
        # EnvRunners never need the old policy: keep it out of weight syncs.
        return ["_old_net"]


class _QNet(torch.nn.Module):
    """IMPALA-CNN trunk + Q head (optionally dueling: V + A - mean A)."""

    def __init__(self, obs_shape: tuple[int, int, int], n: int, cfg: ModelConfig, dueling: bool):
        super().__init__()
        self.trunk = ImpalaCNN(obs_shape, cfg)
        self.adv = torch.nn.Linear(cfg.dense, n)
        self.value = torch.nn.Linear(cfg.dense, 1) if dueling else None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        feats = self.trunk(obs)
        adv = self.adv(feats)
        if self.value is None:
            return adv
        return self.value(feats) + adv - adv.mean(dim=-1, keepdim=True)


class ImpalaDQNModule(
    RolloutsInEvalMode, TorchRLModule, InferenceOnlyAPI, TargetNetworkAPI, QNetAPI
):
    """IMPALA-CNN Q-network for RLlib's DQN learner (expected Q-values only, no atoms).

    `model_config`: ModelConfig fields plus RLlib's auto-included `epsilon` (schedule),
    `double_q`, `dueling`, and our `eval_epsilon`. `forward_inference` also returns
    `action_dist_inputs`: log-probabilities of the eval_epsilon-greedy policy, so that
    sampling from them (rlsweep.trial.evaluation) *is* epsilon-greedy evaluation.
    """

    def setup(self) -> None:
        ours = {f.name for f in dataclasses.fields(ModelConfig)}
        cfg = ModelConfig(**{k: v for k, v in self.model_config.items() if k in ours})
        self.uses_double_q = bool(self.model_config.get("double_q", True))
        self.q_net = _QNet(
            tuple(self.observation_space.shape),
            int(self.action_space.n),
            cfg,
            bool(self.model_config.get("dueling", True)),
        )
        self.epsilon_schedule = Scheduler(
            fixed_value_or_schedule=self.model_config.get("epsilon", 0.05), framework="torch"
        )
        self.eval_epsilon = float(self.model_config.get("eval_epsilon", 0.0))

    # --- RLlib APIs -----------------------------------------------------------------------
    def make_target_networks(self) -> None:
        self._target_q_net = make_target_network(self.q_net)

    def get_target_network_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        return [(self.q_net, self._target_q_net)]

    def get_non_inference_attributes(self) -> list[str]:
        return ["_target_q_net"]

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {QF_PREDS: self._target_q_net(batch[Columns.OBS])}

    def compute_q_values(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {QF_PREDS: self.q_net(batch[Columns.OBS])}

    # --- forward passes ---------------------------------------------------------------------
    @torch.no_grad()
    def _forward_inference(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        q = self.q_net(batch[Columns.OBS])
        greedy = q.argmax(dim=-1)
        n = q.shape[-1]
        probs = torch.full_like(q, self.eval_epsilon / n)
        probs.scatter_add_(-1, greedy[:, None], torch.full_like(q[:, :1], 1 - self.eval_epsilon))
        return {Columns.ACTIONS: greedy, Columns.ACTION_DIST_INPUTS: probs.clamp_min(1e-12).log()}

    @torch.no_grad()
    def _forward_exploration(self, batch: dict[str, Any], t: int = 0, **kwargs) -> dict[str, Any]:
        q = self.q_net(batch[Columns.OBS])
        epsilon = self.epsilon_schedule.update(t)
        rand = torch.randint(0, q.shape[-1], q.shape[:1], device=q.device)
        explore = torch.rand(q.shape[:1], device=q.device) < epsilon
        return {Columns.ACTIONS: torch.where(explore, rand, q.argmax(dim=-1))}

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        obs, next_obs = batch[Columns.OBS], batch[Columns.NEXT_OBS]
        out: dict[str, Any] = {}
        if self.uses_double_q:
            # One online pass over obs and next obs (double Q picks next actions online).
            q = self.q_net(torch.cat([obs, next_obs], dim=0))
            out[QF_PREDS], out[QF_NEXT_PREDS] = torch.chunk(q, 2, dim=0)
        else:
            out[QF_PREDS] = self.q_net(obs)
        with torch.no_grad():
            out[QF_TARGET_NEXT_PREDS] = self._target_q_net(next_obs)
        return out


def row_chunks(batch: dict[str, Any], rows: int | None) -> Iterator[dict[str, Any]]:
    """`batch` as consecutive slices of at most `rows` rows each (views, no copies; a column
    that is not one row per observation passes whole); the whole batch when `rows` is None."""
    n = len(batch[Columns.OBS])
    step = rows or n
    for start in range(0, n, step):
        yield {
            k: v[start : start + step] if getattr(v, "shape", ())[:1] == (n,) else v
            for k, v in batch.items()
        }
