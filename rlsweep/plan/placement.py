"""Where a trial runs and what it asks Ray for: the one place that decides it, from the config.

Pure functions of a `TrialConfig` (no torch, no Ray), so the driver can validate and plan a sweep
before Ray starts, and the CPU tests pin every decision:

- `placement(cfg)`: the trial's device, its EnvRunner layout and its Ray resources (the
  placement-group bundles Tune reserves for it; `trial_cpus`, their CPUs). The learner is
  local to the trial's process, on the GPU when `num_gpus > 0`. Sampling keeps RLlib's layout
  (`num_env_runners` remote CPU EnvRunners, e.g. on a cluster's CPU nodes, or one EnvRunner
  in the trial's process), except in a GPU trial without remote EnvRunners: that
  one samples SEED-style, its EnvRunner stepping all of the trial's envs in one envpool on the
  trial's CPUs and running one batched forward per step on the learner's GPU (the two share the
  trial's GPU share; nothing crosses a process boundary).
- `gpu_memory(cfg)` / `gpu_memory_gib(cfg)`: the estimate of what one trial holds on its GPU,
  and `memory_fraction(cfg, gpu_gib)`: the cap a trial on a fraction of a GPU sets itself.
- `trials_at_once(...)` and `check_fits(...)`: how many trials a machine runs concurrently, and
  refusing packings that cannot fit (CPUs, GPUs, a trial's estimated GPU memory above its
  share).
- `local_machine()` and `starts_local_ray(address)`: this machine, and whether a sweep runs on
  it or joins a cluster.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from rlsweep.errors import ConfigError

if TYPE_CHECKING:
    from rlsweep.spec.config import TrialConfig
    from rlsweep.spec.spec import SweepSpec

_EPS = 1e-6  # Ray counts resources in units of 1e-4; 1 / 0.1 must give 10 trials, not 9
_Count = TypeVar("_Count")

ENV_RUNNER_CPUS = 1
"""CPUs each remote EnvRunner holds (its bundle), and so the threads of its envpool."""


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
    """envpool worker threads of each of an EnvRunner's envpools: the CPUs its process holds,
    shared among its env groups (at least one each), so that groups stepping at once never
    run more threads than the CPUs."""
    env_groups: int
    """Envpools of each EnvRunner, stepped in turn (`env_groups`)."""
    cpus: int
    """CPUs the trial reserves in all (`trial_cpus`)."""
    gpus: float
    """GPUs the trial reserves (a fraction packs several trials on one GPU)."""
    bundles: tuple[dict[str, float], ...]
    """The trial's placement-group bundles, as RLlib requests them for its config (no zero
    amounts): the trial's process (its CPUs, its GPU share, `learner_resources`), then one per
    remote EnvRunner (ENV_RUNNER_CPUS, `env_runner_resources`). Tune reserves them
    (`rlsweep.run.tune_bridge.trial_resources`)."""


def placement(cfg: TrialConfig) -> Placement:
    """The trial's placement. An EnvRunner's envpools share as many threads as its process
    holds CPUs: the trial's `num_cpus` where it samples in its own process (on the CPU, or
    central inference), ENV_RUNNER_CPUS on a remote EnvRunner (its bundle). envpool's own
    default, min(envs, the machine's cores), ignores Ray's reservation: on a 64-core node every
    trial would start 64 threads."""
    gpu = {"GPU": cfg.num_gpus} if cfg.on_gpu else {}
    main = {"CPU": cfg.num_cpus, **gpu, **cfg.learner_resources}
    runner = {"CPU": ENV_RUNNER_CPUS, **cfg.env_runner_resources}
    central = cfg.on_gpu and cfg.num_env_runners == 0
    runner_cpus = ENV_RUNNER_CPUS if cfg.num_env_runners else cfg.num_cpus
    return Placement(
        device="cuda" if cfg.on_gpu else "cpu",
        central_inference=central,
        num_env_runners=cfg.num_env_runners,
        num_envs_per_env_runner=cfg.num_envs_per_env_runner,
        envpool_threads=max(1, runner_cpus // cfg.env_groups),
        env_groups=cfg.env_groups,
        cpus=trial_cpus(cfg.num_cpus, cfg.num_env_runners),
        gpus=cfg.num_gpus,
        bundles=(main, *(dict(runner) for _ in range(cfg.num_env_runners))),
    )


def trial_cpus(num_cpus: _Count, num_env_runners: _Count) -> _Count:
    """CPUs a trial reserves in all: its own process's `num_cpus` plus ENV_RUNNER_CPUS per
    remote EnvRunner. Numbers, or columns of them (a report's trials)."""
    return num_cpus + num_env_runners * ENV_RUNNER_CPUS


# --- GPU memory ------------------------------------------------------------------------------


def _bf16(cfg: TrialConfig) -> bool:
    """Whether the trial's trunk computes in bfloat16 (its precision resolved)."""
    return cfg.model_config().precision == "bf16"


# The estimate's constants; docs/gpu.md "GPU memory" says where each comes from.
CUDA_CONTEXT_GIB = 0.75
"""GPU memory a process holds outside torch's allocator: its CUDA context and the cuDNN and
cuBLAS kernels it loads (measured 0.75 on an H200: `benchmarks/gpu.py` (a))."""
ALLOCATOR_RESERVE = 1.25
"""GiB torch's caching allocator reserves per GiB allocated at the peak (blocks rounded up,
freed blocks kept for reuse): fitted to the K = 8 run on an H100 (docs/gpu.md, GPU memory)."""
CUDNN_FP32_WORKSPACE = 8.4
"""cuDNN's float32 (and TF32) convolution workspaces over a training minibatch, per sample, in
multiples of the largest convolution output's bytes per sample: what the training step holds
beyond its weights, frames and saved activations with cuDNN choosing its fastest algorithms
(`deterministic: false`), fitted to the H200's step (docs/gpu.md, GPU memory). bf16 needs
none: its measured step is about its weights, frames and activations alone."""
COLUMN_BYTES = 100
"""Bytes per train-batch row besides its frames (PPO's: actions, rewards, log-probs, values,
advantages, targets, masks: 99)."""
IMPALA_LEARNER_QUEUE = 3
"""Train batches RLlib's IMPALA/APPO learner queues on the GPU besides the one it trains on
(`IMPALAConfig.learner_queue_size`, Ray 2.60)."""


def obs_shape(cfg: TrialConfig) -> tuple[int, int, int]:
    """(C, H, W) of the trial's uint8 observations: Procgen's 64x64 RGB, times the frames."""
    return 3 * cfg.env_config().frames_per_obs, 64, 64


def num_params(cfg: TrialConfig, num_actions: int = 15) -> int:
    """Parameters of the IMPALA-CNN actor-critic (`rlsweep.trial.models`) at the trial's shape."""
    c, h, w = obs_shape(cfg)
    total, in_ch = 0, c
    for width in cfg.widths:
        total += in_ch * width * 9 + width  # the stage's first conv (or the stride-2 conv)
        total += 4 * (width * width * 9 + width)  # two residual blocks of two convs
        in_ch, h, w = width, (h + 1) // 2, (w + 1) // 2
    flat = in_ch if cfg.global_pool else in_ch * h * w
    total += flat * cfg.dense + cfg.dense
    return total + (cfg.dense + 1) * (num_actions + 1)


def saved_activation_bytes(cfg: TrialConfig) -> int:
    """Bytes per sample that autograd keeps for backward through the actor-critic in a training
    forward (`rlsweep.trial.models`; tests/test_placement.py measures them): the scaled input (its
    bf16 copy under bf16); per stage, a maxpool's input and int64 indices and the two residual
    blocks' four relu outputs, then the stage's output as the next conv's input; the last relu,
    the dense layer's input where it is a copy (pooled, or flattened from channels_last) and its
    output (and a float32 copy of that under bf16)."""
    c, h, w = obs_shape(cfg)
    act = 2 if _bf16(cfg) else 4  # the trunk's compute dtype
    total = c * h * w * act
    for i, width in enumerate(cfg.widths):
        down_h, down_w = (h + 1) // 2, (w + 1) // 2
        out = width * down_h * down_w
        if cfg.downsample == "maxpool":
            total += width * h * w * act + out * 8
        total += 4 * out * act
        if i < len(cfg.widths) - 1:
            total += out * act  # the stage's output, the next stage's conv input
        h, w = down_h, down_w
    total += out * act  # relu(trunk)
    if cfg.global_pool:
        total += width * act  # the pooled features, the dense layer's input
    elif cfg.channels_last:
        total += out * act  # flatten() of a channels_last tensor copies it
    total += cfg.dense * act
    return total + (cfg.dense * 4 if _bf16(cfg) else 0)


def largest_conv_output_bytes(cfg: TrialConfig) -> int:
    """Bytes per sample of the trunk's largest float32 convolution output (the first stage's)."""
    _, h, w = obs_shape(cfg)
    largest = 0
    for width in cfg.widths:
        stride = 1 if cfg.downsample == "maxpool" else 2
        largest = max(largest, width * -(-h // stride) * -(-w // stride))
        h, w = (h + 1) // 2, (w + 1) // 2
    return 4 * largest


@dataclass(frozen=True)
class GpuMemory:
    """One trial's estimated GPU memory (GiB), by part. `training_step` is what
    `benchmarks/gpu.py` (a) measures (torch.cuda.max_memory_allocated of a step alone),
    `reserved` what a trial's `perf/gpu_reserved_peak_gib` reports, `total` what the
    trial's process holds on its GPU."""

    context: float
    """The CUDA context and libraries (CUDA_CONTEXT_GIB), outside torch's allocator."""
    learner: float
    """The learner's float32 weights, gradients and Adam's two moments."""
    copies: float
    """Other copies of the weights: the rollout module on the GPU (central inference), the
    target network (APPO, DQN)."""
    batch: float
    """The train batch on the GPU: uint8 frames and columns of every row (bootstrap rows
    included), times the copies the learner holds at once (PPO shuffle: the batch and its real
    rows; IMPALA/APPO: the queued batches; DQN: none, its replay lives on the CPU)."""
    activations: float
    """One training minibatch: its frames and what autograd saves for backward (DQN's double Q
    runs its minibatch's observations and next observations in one pass)."""
    workspace: float
    """cuDNN's float32 convolution workspaces over the minibatch (none under bf16)."""

    @property
    def training_step(self) -> float:
        return self.learner + self.activations + self.workspace

    @property
    def allocated(self) -> float:
        return self.learner + self.copies + self.batch + self.activations + self.workspace

    @property
    def reserved(self) -> float:
        return ALLOCATOR_RESERVE * self.allocated

    @property
    def total(self) -> float:
        return self.context + self.reserved


def gpu_memory(cfg: TrialConfig) -> GpuMemory:
    """The estimate of what one trial holds on its GPU, by part (see `GpuMemory`). Every
    forward a trial runs sees at most a minibatch (or the rollout's envs) of rows, so the
    minibatch, not the train batch, sets the activations."""
    c, h, w = obs_shape(cfg)
    params = 4 * num_params(cfg)
    copies = int(placement(cfg).central_inference) + int(cfg.algorithm in ("appo", "dqn"))
    rows = cfg.effective_train_batch_size + cfg.num_envs_per_env_runner * max(
        1, cfg.num_env_runners
    )
    held = {"ppo": 2 if cfg.minibatching == "shuffle" else 1, "dqn": 0}
    batches = held.get(cfg.algorithm, 1 + IMPALA_LEARNER_QUEUE)
    samples = cfg.minibatch_size * (2 if cfg.algorithm == "dqn" and cfg.double_q else 1)
    workspace = 0 if _bf16(cfg) else CUDNN_FP32_WORKSPACE * largest_conv_output_bytes(cfg)
    gib = 2**30
    return GpuMemory(
        context=CUDA_CONTEXT_GIB,
        learner=4 * params / gib,
        copies=copies * params / gib,
        batch=batches * rows * (c * h * w + COLUMN_BYTES) / gib,
        activations=samples * (c * h * w + saved_activation_bytes(cfg)) / gib,
        workspace=samples * workspace / gib,
    )


def gpu_memory_gib(cfg: TrialConfig) -> float:
    """Estimated GPU memory one trial's process holds (GiB): `gpu_memory(cfg).total`.
    `benchmarks/gpu.py` prints it beside the measured peaks."""
    return gpu_memory(cfg).total


def memory_fraction(cfg: TrialConfig, gpu_gib: float) -> float | None:
    """The fraction of its GPU's `gpu_gib` that torch's allocator may reserve in a trial on a
    fraction of a GPU: its share, num_gpus x gpu_gib, less the CUDA context (which lies outside
    the allocator), so that the trials packed on a GPU never take more than it has between
    them. None for a trial that holds whole GPUs (or none)."""
    if not 0 < cfg.num_gpus < 1:
        return None
    return max(cfg.num_gpus - CUDA_CONTEXT_GIB / gpu_gib, 0.0)


def out_of_memory_message(
    cfg: TrialConfig, gpu_gib: float | None, peak_reserved_gib: float | None
) -> str:
    """Why a trial stopped on torch.OutOfMemoryError: its share, its estimated need and what it
    had reserved, and what to change."""
    fraction = memory_fraction(cfg, gpu_gib) if gpu_gib else None
    if fraction is None:
        share = f"num_gpus {cfg.num_gpus:g}" + (f" ({gpu_gib:.1f} GiB)" if gpu_gib else "")
    else:
        share = (
            f"num_gpus {cfg.num_gpus:g} of a {gpu_gib:.1f} GiB GPU: {cfg.num_gpus * gpu_gib:.1f}"
            f" GiB, {fraction * gpu_gib:.1f} GiB for torch after the CUDA context"
        )
    peak = f"; it had reserved {peak_reserved_gib:.1f} GiB" if peak_reserved_gib else ""
    return (
        f"out of GPU memory on its share ({share}); estimated need ~{gpu_memory_gib(cfg):.1f} "
        f"GiB (rlsweep.plan.placement.gpu_memory_gib){peak}. Give it a larger num_gpus (fewer "
        "trials per GPU), a smaller minibatch_size, or precision: bf16"
    )


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
    node_cpus: float | None = None
    """A cluster's: the CPUs of its largest node, the most one trial can have (None: one
    machine, `cpus`)."""
    cpus_per_gpu: float | None = None
    """A cluster's: the fewest CPUs a GPU node has per GPU, what a GPU's trials may share (they
    run on its node; None: one machine, or no GPU node)."""
    cpu_only_cpus: float = 0
    """A cluster's: the CPUs of its nodes without a GPU."""
    nodes: int = 1
    """A cluster's: its live nodes."""


def check_fits(cfg: TrialConfig, machine: Machine) -> None:
    """Raise ConfigError (naming the key to change) if `cfg` cannot run on `machine`: more
    CPUs or GPUs than it has, or an estimated GPU memory (`gpu_memory_gib`) above the trial's
    share of a GPU (num_gpus x its memory: a trial on a fraction caps itself there, see
    `memory_fraction`, however many trials share the GPU at a time)."""
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
    memory = machine.gpu_memory_gib
    share = min(p.gpus, 1) * memory
    each = gpu_memory_gib(cfg)
    if each > share + _EPS:
        # The smallest fraction that holds the estimate, rounded up to 3 digits.
        least = math.ceil(each / memory * 1000) / 1000
        hint = f"num_gpus >= {least:g}" if least <= 1 else "a smaller minibatch_size or train batch"
        per_gpu = trials_per_gpu(p.gpus)
        raise ConfigError(
            "num_gpus",
            f"got {p.gpus:g}: a trial's share of {machine.where}'s {memory:g} GiB GPUs is "
            f"{share:.1f} GiB ({per_gpu} trials per GPU) and it needs ~{each:.1f} GiB "
            f"(estimated: rlsweep.plan.placement.gpu_memory_gib); allowed: {hint}",
        )


def check_sweep_fits(spec: SweepSpec, machine: Machine) -> None:
    """Raise SpecError (naming the spec key to change) unless every trial of `spec` fits on
    `machine` (`check_fits`): `plan`'s check on the machine it plans for, and where
    `rlsweep.run.fits.check_fits` has read the machine a sweep runs on."""
    for trial in spec.trials():
        try:
            check_fits(trial, machine)
        except ConfigError as e:
            raise spec.trial_error(e, trial) from None


def local_machine(cpus: float | None = None, look_up_gpus: bool = True) -> Machine:
    """This machine: its CPUs (or `cpus`), CUDA GPUs and the smallest GPU's memory. Looking up
    GPUs imports torch; with `look_up_gpus=False` they are not looked up and reported as none."""
    import os

    if not look_up_gpus:
        return Machine(cpus=cpus or os.cpu_count() or 1, gpus=0, gpu_memory_gib=None)
    import torch

    gpus = torch.cuda.device_count()
    memory = (
        min(torch.cuda.get_device_properties(i).total_memory for i in range(gpus)) / 2**30
        if gpus
        else None
    )
    return Machine(cpus=cpus or os.cpu_count() or 1, gpus=gpus, gpu_memory_gib=memory)


def cpu_model() -> str:
    """This machine's CPU model as its kernel names it (`AMD EPYC 7B13`), else what Python's
    `platform` knows of it."""
    import platform

    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    return model or platform.processor() or platform.machine()


def gpus_may_exist() -> bool:
    """Whether this machine may have a CUDA GPU, asked without importing torch: an NVIDIA
    driver's device files or its /proc entry. False: none (`local_machine` need not look)."""
    import glob
    import os

    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.isdir("/proc/driver/nvidia/gpus")


def starts_local_ray(address: str | None) -> bool:
    """Whether a sweep starts Ray on this machine (and fits its trials to `local_machine`)
    rather than joining a cluster: no `address` given and none in RAY_ADDRESS (which ray.init
    reads when it has no address)."""
    import os

    return address is None and not os.environ.get("RAY_ADDRESS")
