"""A trial process's torch settings and its learner's GPU.

`configure_torch` sets what torch keeps per process (TF32, cuDNN's algorithm choice, and on a
fraction of a GPU the cap on its allocator), before the trial builds anything and again after;
`learner_device` is RLlib's choice of the GPU the trial's local learner (and a GPU trial's
central inference) runs on. Where a trial runs and what it holds is decided in
`rlsweep.plan.placement`; this module applies it to torch.
"""

from __future__ import annotations

import torch
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.utils.framework import get_device

from rlsweep.plan.placement import cpu_model, memory_fraction, placement
from rlsweep.spec.config import TrialConfig


def configure_torch(cfg: TrialConfig, device: torch.device | None = None) -> None:
    """Process-wide torch settings of a trial. On a GPU: TF32 on or off for float32 matmuls and
    convolutions (its `precision`; torch's own defaults differ between the two), cuDNN's
    algorithm choice (`deterministic`), and on a fraction of a GPU (`device`, the learner's) a
    cap on what torch's allocator may reserve there (`rlsweep.plan.placement.memory_fraction`): the
    trial then runs out of memory alone, at its share, instead of taking memory the other trials
    on that GPU were promised. RLlib's seeding sets cuDNN deterministic while it builds the
    algorithm, so a trial calls this again once it is built
    (`rlsweep.trial.algos.build_algorithm`)."""
    # RLlib's seeding (`debugging(seed=...)`) turns on torch.use_deterministic_algorithms on a
    # CPU-only torch, which also fills every new tensor with NaN (a debugging aid for reads of
    # uninitialized memory): ~12% of a CPU trial's time in aten::fill_. Results are unchanged.
    torch.utils.deterministic.fill_uninitialized_memory = False
    if placement(cfg).device != "cuda":
        return
    tf32 = "tf32" if cfg.model_config().precision == "tf32" else "ieee"
    torch.backends.cuda.matmul.fp32_precision = tf32
    torch.backends.cudnn.conv.fp32_precision = tf32
    torch.backends.cudnn.deterministic = cfg.deterministic
    torch.backends.cudnn.benchmark = not cfg.deterministic
    if device is None:
        return
    fraction = memory_fraction(cfg, gpu_memory_gib_of(device))
    if fraction is not None:
        torch.cuda.set_per_process_memory_fraction(fraction, device)


def gpu_memory_gib_of(device: torch.device) -> float:
    """Total memory of the GPU `device` (GiB)."""
    return torch.cuda.get_device_properties(device).total_memory / 2**30


def learner_device(algo_config: AlgorithmConfig) -> torch.device | None:
    """The GPU a trial's local learner (and central inference) runs on, RLlib's choice; None
    for a CPU learner."""
    if not algo_config.num_gpus_per_learner:
        return None
    return get_device(algo_config, algo_config.num_gpus_per_learner)


def device_name(device: torch.device | None) -> str:
    """What a trial's learner runs on, by name: its GPU's (`NVIDIA H100 80GB HBM3`), or `CPU:`
    and the machine's CPU model for a CPU learner (`device` None)."""
    return torch.cuda.get_device_name(device) if device is not None else f"CPU: {cpu_model()}"
