"""Where a trial runs and what it asks Ray for: the one place that decides it, from the config.

Pure functions of a `TrialConfig` (no torch, no Ray), so the driver can validate and plan a sweep
before Ray starts, and the CPU tests pin every decision:

- `placement(cfg)`: the trial's device, its EnvRunner layout and its Ray resources. The
  learner is local to the trial's process, on the GPU when `num_gpus > 0`. Sampling keeps
  RLlib's layout (`num_env_runners` remote CPU EnvRunners, e.g. on a cluster's CPU nodes, or
  one EnvRunner in the trial's process), except in a GPU trial without remote EnvRunners: that
  one samples SEED-style, its EnvRunner stepping all of the trial's envs in one envpool on the
  trial's CPUs and running one batched forward per step on the learner's GPU (the two share the
  trial's GPU share; nothing crosses a process boundary).
- `gpu_memory_gib(cfg)`: a rough estimate of what one trial holds on its GPU.
- `trials_at_once(...)` and `check_fits(...)`: how many trials a machine runs concurrently, and
  refusing packings that cannot fit (CPUs, GPUs, GPU memory).
- `local_machine()` and `starts_local_ray(address)`: this machine, and whether a sweep runs on
  it or joins a cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlsweep.errors import ConfigError

if TYPE_CHECKING:
    from rlsweep.config import TrialConfig

CUDA_CONTEXT_GIB = 0.75
"""GPU memory a process's CUDA context and cuDNN/cuBLAS workspaces take before any tensor."""
_EPS = 1e-6  # Ray counts resources in units of 1e-4; 1 / 0.1 must give 10 trials, not 9


@dataclass(frozen=True)
class Placement:
    """One trial's devices and resources (see `placement`)."""

    device: str
    """'cuda' or 'cpu': where the learner trains (and, with central inference, the rollout's
    forward passes run)."""
    central_inference: bool
    """True: all envs sample in the trial's own process, inference batched on the GPU."""
    num_env_runners: int
    """Remote EnvRunner actors (0: sampling in the trial's process)."""
    num_envs_per_env_runner: int
    """Envs in each EnvRunner's one envpool."""
    envpool_threads: int
    """envpool worker threads of each EnvRunner: the CPUs its process holds."""
    cpus: int
    """CPUs the trial reserves in all: its own process plus one per remote EnvRunner."""
    gpus: float
    """GPUs the trial reserves (a fraction packs several trials on one GPU)."""
    bundles: tuple[dict[str, float], ...]
    """Tune's placement-group bundles as Ray writes them (no zero amounts): the trial's
    process, then one per remote EnvRunner (custom resources not included; RLlib adds them)."""


def placement(cfg: TrialConfig) -> Placement:
    """The trial's placement. Each envpool gets as many threads as its process holds CPUs: the
    trial's `num_cpus` where it samples in its own process (on the CPU, or central inference),
    1 on a remote EnvRunner (its bundle). envpool's own default, min(envs, the machine's
    cores), ignores Ray's reservation: on a 64-core node every trial would start 64 threads."""
    if cfg.num_gpus > 0 and cfg.num_env_runners == 0:
        return Placement(
            device="cuda",
            central_inference=True,
            num_env_runners=0,
            num_envs_per_env_runner=cfg.num_envs_per_env_runner,
            envpool_threads=cfg.num_cpus,
            cpus=cfg.num_cpus,
            gpus=cfg.num_gpus,
            bundles=({"CPU": cfg.num_cpus, "GPU": cfg.num_gpus},),
        )
    runners = ({"CPU": 1},) * cfg.num_env_runners
    main = {"CPU": cfg.num_cpus, **({"GPU": cfg.num_gpus} if cfg.num_gpus > 0 else {})}
    return Placement(
        device="cuda" if cfg.num_gpus > 0 else "cpu",
        central_inference=False,
        num_env_runners=cfg.num_env_runners,
        num_envs_per_env_runner=cfg.num_envs_per_env_runner,
        envpool_threads=1 if cfg.num_env_runners else cfg.num_cpus,
        cpus=cfg.num_cpus + cfg.num_env_runners,
        gpus=cfg.num_gpus,
        bundles=(main, *runners),
    )


def check_num_gpus(num_gpus: float) -> bool:
    """Ray's rule: a fraction of one GPU (0 < x <= 1), or a whole number of GPUs."""
    return num_gpus == 0 or 0 < num_gpus <= 1 or float(num_gpus).is_integer()


# --- GPU memory ------------------------------------------------------------------------------
def obs_shape(cfg: TrialConfig) -> tuple[int, int, int]:
    """(C, H, W) of the trial's uint8 observations: Procgen's 64x64 RGB, times the frames."""
    return 3 * cfg.env_config().frames_per_obs, 64, 64


def num_params(cfg: TrialConfig, num_actions: int = 15) -> int:
    """Parameters of the IMPALA-CNN actor-critic (`rlsweep.models`) at the trial's shape."""
    c, h, w = obs_shape(cfg)
    total, in_ch = 0, c
    for width in cfg.widths:
        total += in_ch * width * 9 + width  # the stage's first conv (or the stride-2 conv)
        total += 4 * (width * width * 9 + width)  # two residual blocks of two convs
        in_ch, h, w = width, (h + 1) // 2, (w + 1) // 2
    flat = in_ch if cfg.global_pool else in_ch * h * w
    total += flat * cfg.dense + cfg.dense
    return total + (cfg.dense + 1) * (num_actions + 1)


def activation_floats(cfg: TrialConfig) -> int:
    """Floats one sample keeps for backward through the trunk: each stage's conv output at its
    input resolution, then ~9 tensors of its downsampled size (pooling, residual convs, relus)."""
    c, h, w = obs_shape(cfg)
    total = 2 * c * h * w  # the scaled float input and its channels_last copy
    for width in cfg.widths:
        down_h, down_w = (h + 1) // 2, (w + 1) // 2
        total += width * h * w + 9 * width * down_h * down_w
        h, w = down_h, down_w
    return total + 2 * cfg.dense


def gpu_memory_gib(cfg: TrialConfig) -> float:
    """Rough GPU memory one trial holds (GiB): CUDA context; learner weights, gradients and
    Adam's two moments plus the rollout module's copy; the train batch's uint8 frames (on the
    GPU once per iteration) with room for a minibatch gather; the minibatch's activations saved
    for backward (bf16 halves them) plus half again for the gradients in flight. An estimate
    for packing decisions;
    `benchmarks/gpu.py` prints the measured peak beside it."""
    c, h, w = obs_shape(cfg)
    weights = 5 * 4 * num_params(cfg)
    frames = (cfg.effective_train_batch_size + cfg.minibatch_size) * c * h * w
    bytes_per_float = 2 if cfg.bf16 else 4
    activations = 1.5 * cfg.minibatch_size * activation_floats(cfg) * bytes_per_float
    return CUDA_CONTEXT_GIB + (weights + frames + activations) / 2**30


# --- packing ---------------------------------------------------------------------------------
def trials_per_gpu(gpus_per_trial: float) -> int:
    """Trials of `gpus_per_trial` (> 0) that share one GPU: floor(1 / fraction), or 1."""
    return math.floor(1 / gpus_per_trial + _EPS) if gpus_per_trial <= 1 else 1


def trials_at_once(
    cpus_per_trial: float, gpus_per_trial: float, cpus: float, gpus: float
) -> tuple[int, str]:
    """(trials that run at once on `cpus` CPUs and `gpus` GPUs, the resource that bounds it:
    'CPU' or 'GPU', 'GPU' when both run out together). A fractional trial never spans two
    GPUs: each GPU holds floor(1 / fraction) of them, as Ray packs them."""
    by_cpu = math.floor(cpus / cpus_per_trial + _EPS) if cpus_per_trial else math.inf
    if not gpus_per_trial:
        by_gpu = math.inf
    elif gpus_per_trial <= 1:
        by_gpu = trials_per_gpu(gpus_per_trial) * math.floor(gpus + _EPS)
    else:
        by_gpu = math.floor(gpus / gpus_per_trial + _EPS)
    if math.isinf(by_cpu) and math.isinf(by_gpu):
        return 1, "CPU"
    return (int(by_gpu), "GPU") if by_gpu <= by_cpu else (int(by_cpu), "CPU")


@dataclass(frozen=True)
class Machine:
    """What one node (or a cluster, summed) offers trials."""

    cpus: float
    gpus: float = 0
    gpu_memory_gib: float | None = None
    """Memory of each GPU; None: unknown, not checked."""
    where: str = "this machine"
    """How error messages name it."""


def check_fits(cfg: TrialConfig, machine: Machine) -> None:
    """Raise ConfigError (naming the key to change) if `cfg` cannot run on `machine`: more
    CPUs or GPUs than it has, or more trials packed on one GPU than its memory holds."""
    p = placement(cfg)
    if p.cpus > machine.cpus + _EPS:
        key = "num_env_runners" if cfg.num_env_runners else "num_cpus"
        raise ConfigError(
            key,
            f"a trial needs {p.cpus} CPUs (num_cpus {cfg.num_cpus} + num_env_runners "
            f"{cfg.num_env_runners}); {machine.where} has {machine.cpus:g}",
        )
    if p.gpus > machine.gpus + _EPS:
        raise ConfigError("num_gpus", f"got {p.gpus:g}; {machine.where} has {machine.gpus:g} GPUs")
    if not p.gpus or machine.gpu_memory_gib is None:
        return
    per_gpu = trials_per_gpu(p.gpus)
    # Trials sharing one GPU are also bounded by the CPUs: only those that run at once count.
    sharing = min(per_gpu, math.floor(machine.cpus / p.cpus + _EPS))
    each = gpu_memory_gib(cfg)
    if sharing * each > machine.gpu_memory_gib:
        fit = math.floor(machine.gpu_memory_gib / each)  # trials one GPU holds
        hint = f"num_gpus >= {1 / fit:.3g}" if fit else "a smaller minibatch_size or train batch"
        raise ConfigError(
            "num_gpus",
            f"got {p.gpus:g}: {sharing} trials on one GPU need ~{sharing * each:.1f} GiB "
            f"(~{each:.1f} GiB each, estimated: model, batch, activations, CUDA context); "
            f"{machine.where}'s GPUs have {machine.gpu_memory_gib:g} GiB; allowed: {hint}",
        )


def local_machine(cpus: float | None = None, gpus: bool = True) -> Machine:
    """This machine: its CPUs (or `cpus`), CUDA GPUs and the smallest GPU's memory (not looked
    up, and reported as none, with `gpus=False`)."""
    import os

    if not gpus:
        return Machine(cpus=cpus or os.cpu_count() or 1, gpus=0, gpu_memory_gib=None)
    import torch

    gpus = torch.cuda.device_count()
    memory = (
        min(torch.cuda.get_device_properties(i).total_memory for i in range(gpus)) / 2**30
        if gpus
        else None
    )
    return Machine(cpus=cpus or os.cpu_count() or 1, gpus=gpus, gpu_memory_gib=memory)


def starts_local_ray(address: str | None) -> bool:
    """Whether a sweep starts Ray on this machine (and fits its trials to `local_machine`)
    rather than joining a cluster: no `address` given and none in RAY_ADDRESS (which ray.init
    reads when it has no address)."""
    import os

    return address is None and not os.environ.get("RAY_ADDRESS")
