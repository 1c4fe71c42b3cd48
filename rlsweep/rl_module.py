"""`ImpalaActorCritic` as an RLlib new-API-stack `TorchRLModule` (PPO and other actor-critics)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule

from rlsweep.augment import AugmentConfig, augment
from rlsweep.models import ImpalaActorCritic, ModelConfig


class ImpalaPPOModule(TorchRLModule, ValueFunctionAPI):
    """IMPALA-CNN actor-critic; `model_config` holds `ModelConfig` fields as a plain dict, plus
    `augment` (AugmentConfig fields) and `augment_seed`."""

    def setup(self) -> None:
        # RLlib merges its own defaults into model_config; keep only our fields.
        ours = {f.name for f in dataclasses.fields(ModelConfig)}
        cfg = ModelConfig(**{k: v for k, v in self.model_config.items() if k in ours})
        self.net = ImpalaActorCritic(
            tuple(self.observation_space.shape), int(self.action_space.n), cfg
        )
        self.augment = AugmentConfig(**self.model_config.get("augment", {}))
        self._augment_rng = torch.Generator().manual_seed(self.model_config.get("augment_seed", 0))

    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.net.pi(self.net.features(batch[Columns.OBS]))}

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        # Augmentation touches only the learner's minibatches; rollouts use _forward.
        obs = batch[Columns.OBS]
        if self.augment.name != "none":
            obs = augment(obs, self.augment, self._augment_rng)
        feats = self.net.features(obs)
        # EMBEDDINGS lets the PPO loss reuse the trunk for the value head (one trunk pass).
        return {Columns.ACTION_DIST_INPUTS: self.net.pi(feats), Columns.EMBEDDINGS: feats}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is None:
            embeddings = self.net.features(batch[Columns.OBS])
        return self.net.vf(embeddings).squeeze(-1)
