"""The EnvRunner's two connector pipelines for rlsweep's vector env, batched.

RLlib's default pipelines (Ray 2.60) move every step's data between the vector env and the module
one env at a time: observations are read back out of each env's episode and re-stacked, the
module's outputs are unbatched into per-env items, then re-listed for the vector env, each piece
timed: a cost per env and step that grows with the number of envs, and on a GPU a large share
of each step. For rlsweep's modules (single-agent, stateless, Discrete actions) these do the
same with one batched operation per step and produce what the defaults produce for such a
module (`tests/test_connectors.py` holds the sampled episodes equal, value for value).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.columns import Columns


class BatchObservations(ConnectorV2):
    """Env-to-module: `{OBS: (num_envs, *obs_shape) tensor}` from the observations the EnvRunner
    just got from the vector env (it passes them as the `obs` keyword, one item per env, at
    reset and after every step: for an env whose episode just ended, that is the episode's last
    observation, as in RLlib's AddObservationsFromEpisodesToBatch)."""

    def __init__(self, input_observation_space=None, input_action_space=None, *, device=None):
        super().__init__(input_observation_space, input_action_space)
        self.device = device

    def __call__(self, *, rl_module, batch, episodes, **kwargs) -> dict[str, Any]:
        observations = kwargs.get(Columns.OBS)
        if observations is None:  # a caller that passes episodes only
            observations = [episode.get_observations(-1) for episode in episodes]
        obs = torch.from_numpy(np.stack(observations))
        if self.device is not None:
            obs = obs.to(self.device)
        return {**batch, Columns.OBS: obs}


class SampleActions(ConnectorV2):
    """Module-to-env: `rollout_columns` as a connector (RLlib's GetActions + TensorToNumpy,
    without the per-env lists)."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, **kwargs) -> dict[str, Any]:
        return rollout_columns(rl_module, batch, explore=bool(explore))


def rollout_columns(rl_module, batch: dict[str, Any], *, explore: bool) -> dict[str, np.ndarray]:
    """A rollout step's module output -> numpy columns over envs: `ACTIONS`, sampled from the
    module's action distribution (its inference distribution, made deterministic, when not
    exploring) unless the module already chose them (rlsweep's modules do when exploring: PPO's
    and APPO's forward samples, DQN's is epsilon-greedy), with their
    `ACTION_LOGP`, and every other column the module returned (row i: env i's)."""
    if Columns.ACTIONS not in batch:
        dist_class = (
            rl_module.get_exploration_action_dist_cls()
            if explore
            else rl_module.get_inference_action_dist_cls()
        )
        dist = dist_class.from_logits(batch[Columns.ACTION_DIST_INPUTS])
        if not explore:
            dist = dist.to_deterministic()
        actions = dist.sample()
        batch[Columns.ACTIONS] = actions
        if Columns.ACTION_LOGP not in batch:
            batch[Columns.ACTION_LOGP] = dist.logp(actions)
    return columns_to_numpy(batch)


def columns_to_numpy(batch: dict[str, Any]) -> dict[str, np.ndarray]:
    """Each column as a numpy array. Columns on a GPU come to the host in one copy
    (`to_host_together`: each copy waits for the GPU, so one wait per step)."""
    on_device = {
        k: v for k, v in batch.items() if isinstance(v, torch.Tensor) and v.device.type != "cpu"
    }
    out = {k: to_numpy(v) for k, v in batch.items() if k not in on_device}
    out.update(to_host_together(on_device))
    return {k: out[k] for k in batch}


def to_host_together(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Tensors of one device as numpy arrays, through one copy to the host: their bytes side by
    side, the widest dtypes first so that every array starts aligned to its item size."""
    if not tensors:
        return {}
    keys = sorted(tensors, key=lambda k: -tensors[k].element_size())  # stable: else in order
    flat = [tensors[k].detach().contiguous().reshape(-1).view(torch.uint8) for k in keys]
    host = torch.cat(flat).cpu().numpy()
    out, start = {}, 0
    for k, f in zip(keys, flat, strict=True):
        t = tensors[k]
        out[k] = host[start : start + f.numel()].view(_numpy_dtype(t.dtype)).reshape(t.shape)
        start += f.numel()
    return out


@functools.cache
def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """numpy's dtype for a torch dtype (torch names none publicly; asked once per dtype, not
    per column and step: ~2 us each)."""
    return torch.empty((), dtype=dtype).numpy().dtype


def to_numpy(x: Any) -> np.ndarray:
    """A tensor (on any device) or array-like as a numpy array."""
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def batch_observations(env=None, spaces=None, device=None) -> BatchObservations:
    """`env_to_module_connector` factory (RLlib calls it with the env, spaces and device)."""
    return BatchObservations(device=device)


def sample_actions(env=None, spaces=None) -> SampleActions:
    """`module_to_env_connector` factory."""
    return SampleActions()
