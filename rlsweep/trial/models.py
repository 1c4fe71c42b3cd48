"""IMPALA-CNN (Espeholt et al., 2018), the Procgen baseline network, in plain PyTorch.

Policy and value heads share the trunk, as in openai/train-procgen. `rlsweep.trial.rl_module` wraps
`ImpalaActorCritic` for RLlib; the benchmark's reference PPO loop uses it directly.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlsweep.spec.subconfigs import ModelConfig


class _ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv0(torch.relu(x))
        y = self.conv1(torch.relu(y))
        return x + y


def max_pool(size: tuple[int, int], padding: str) -> nn.MaxPool2d:
    """The stages' 3x3, stride-2 max-pool for an input of `size` (H, W), padded as
    `ModelConfig.pool_padding` says. TF's 'SAME' pads (out - 1) * 2 + 3 - n pixels in all on a
    side of n, the odd one at the end: one at the end of an even side, which a window running
    past the end (ceil_mode, no padding) matches without a padded copy; one at each end of an odd
    side, as torch's padding=1."""
    if padding == "torch":
        return nn.MaxPool2d(3, stride=2, padding=1)
    return nn.MaxPool2d(3, stride=2, padding=(size[0] % 2, size[1] % 2), ceil_mode=True)


class _Stage(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, size: tuple[int, int], cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.downsample == "maxpool":
            self.down = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 3, padding=1), max_pool(size, cfg.pool_padding)
            )
        else:
            self.down = nn.Conv2d(in_ch, out_ch, 3, stride=2, padding=1)
        self.res0 = _ResidualBlock(out_ch)
        self.res1 = _ResidualBlock(out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res1(self.res0(self.down(x)))


def glorot(layer: nn.Conv2d | nn.Linear) -> None:
    """Glorot-uniform weights and a zero bias: TensorFlow's defaults for its conv and dense
    layers (`tf.layers` and Keras alike; the fans are counted as torch's xavier_uniform_ counts
    them, receptive field included)."""
    nn.init.xavier_uniform_(layer.weight)
    nn.init.zeros_(layer.bias)


class ImpalaCNN(nn.Module):
    """uint8 (B, C, H, W) observations -> (B, dense) features."""

    def __init__(self, obs_shape: tuple[int, int, int], cfg: ModelConfig) -> None:
        super().__init__()
        c, h, w = obs_shape
        stages, in_ch = [], c
        for width in cfg.widths:
            stages.append(_Stage(in_ch, width, (h, w), cfg))
            in_ch = width
            h, w = (h + 1) // 2, (w + 1) // 2
        self.stages = nn.Sequential(*stages)
        self.global_pool = cfg.global_pool
        self.relu_after_pool = cfg.relu_after_pool
        flat = in_ch if cfg.global_pool else in_ch * h * w
        self.dense = nn.Linear(flat, cfg.dense)
        if cfg.init in ("glorot", "keras"):  # else PyTorch's defaults, drawn as each was built
            for layer in self.modules():
                if isinstance(layer, nn.Conv2d | nn.Linear):
                    glorot(layer)
        self.center_inputs = cfg.center_inputs
        self.channels_last = cfg.channels_last
        self.bf16 = cfg.precision == "bf16"
        if cfg.channels_last:
            self.to(memory_format=torch.channels_last)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """float32 features; with bf16 the trunk runs under bfloat16 autocast. CPU frames
        (a GPU trial's rollout: rlsweep.trial.env_runner.CentralInferenceEnvRunner) move to the
        model's device here, as uint8 and through pinned memory, before they are scaled."""
        device = self.dense.weight.device
        if obs.device != device:
            staged = pinned_frames(obs) if device.type == "cuda" else obs
            obs = staged.to(device, non_blocking=True)
        if not self.bf16:
            return self._features(obs)
        with torch.autocast(obs.device.type, dtype=torch.bfloat16):
            return self._features(obs).float()

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float()  # scaling lives in the model so rollouts ship uint8
        if self.center_inputs:
            x = x - 128.0
        x = x / 255.0
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        x = self.stages(x)
        if not self.global_pool:
            x = torch.relu(x).flatten(1)
        elif self.relu_after_pool:
            x = torch.relu(x.mean(dim=(2, 3)))
        else:
            x = torch.relu(x).mean(dim=(2, 3))
        return torch.relu(self.dense(x))


def bf16_weights_for_rollouts(module: nn.Module) -> None:
    """Every bf16 trunk (ImpalaCNN with precision bf16) in `module` stores its weights in
    bfloat16: for a module that only runs rollout forwards (an EnvRunner's), where autocast would
    otherwise cast every weight on every forward (a kernel per tensor, per step: at 64 frames a
    bf16 forward cost more than an fp32 one on an H200). The numbers are the same: autocast's
    cast and the weight sync's copy both round to nearest. A learner keeps fp32 weights."""
    for m in module.modules():
        if isinstance(m, ImpalaCNN) and m.bf16:
            m.to(torch.bfloat16)


class ImpalaActorCritic(nn.Module):
    """Trunk + policy logits + value, for the plain-PyTorch reference loop and the RLModule."""

    def __init__(self, obs_shape: tuple[int, int, int], num_actions: int, cfg: ModelConfig) -> None:
        super().__init__()
        self.trunk = ImpalaCNN(obs_shape, cfg)
        self.pi = nn.Linear(cfg.dense, num_actions)
        self.vf = nn.Linear(cfg.dense, 1)
        if cfg.init == "keras":
            glorot(self.pi)
            glorot(self.vf)
        else:
            # Small policy init keeps the initial policy near uniform (openai/baselines convention).
            nn.init.orthogonal_(self.pi.weight, gain=0.01)
            nn.init.zeros_(self.pi.bias)
            nn.init.orthogonal_(self.vf.weight, gain=1.0)
            nn.init.zeros_(self.vf.bias)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        return self.trunk(obs)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feats = self.features(obs)
        return self.pi(feats), self.vf(feats).squeeze(-1)


def categorical_noise(
    shape: tuple[int, ...], *, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """The Exp(1) draws torch's multinomial makes for one sample of each row of logits of
    `shape` and `dtype` (`empty_like(probs).exponential_()`), for `sample_categorical`."""
    return torch.empty(shape, device=device, dtype=dtype).exponential_()


def sample_categorical(
    logits: torch.Tensor, noise: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Actions drawn from the categorical distribution of `logits` (rows: envs), and their
    log-probabilities, given `noise`: Exp(1) draws shaped and typed as `logits`, the draws
    torch's multinomial makes for one sample (drawn here when not given, as multinomial draws
    them). With the generator where `Categorical(logits=logits).sample()` would draw them, the
    same actions and `log_prob`s, value for value (`tests/test_models.py`): the same
    operations, as multinomial's exponential race (argmax of probs / noise). Without the
    distribution objects and multinomial's checks: a GPU rollout's forward samples in its
    CUDA graph (`rlsweep.trial.cuda_graphs`), the noise drawn outside."""
    if noise is None:
        noise = categorical_noise(logits.shape, device=logits.device, dtype=logits.dtype)
    if noise.shape != logits.shape or noise.dtype != logits.dtype:
        raise ValueError(
            f"noise {tuple(noise.shape)} {noise.dtype} is not shaped and typed as the logits "
            f"{tuple(logits.shape)} {logits.dtype}"
        )
    normalized = logits - logits.logsumexp(dim=-1, keepdim=True)
    actions = (normalized.softmax(dim=-1) / noise).argmax(dim=-1)
    return actions, normalized.gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def pinned_frames(obs: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Host frames copied into pinned memory (`out`, else a new pinned tensor), for a
    non-blocking copy to the GPU. numpy copies them, in this thread: torch's copy of a frame
    batch (64 x 64 x 64 x 3 bytes) runs on its OpenMP pool, whose threads then spin for
    milliseconds (libgomp's wait policy; ~3.5 ms of CPU after one copy on this 2-core machine),
    on the cores where envpool's threads step the envs next (`benchmarks/probes/sampler.py`'s floors
    with a copy before each step)."""
    if out is None:
        out = torch.empty(obs.shape, dtype=obs.dtype, pin_memory=True)
    np.copyto(out.numpy(), obs.numpy())
    return out
