"""A trial's layout on its target: where trials run is not what to run, so a spec that sets no
resources gets the target's best one, and a spec that sets them keeps them.

The layout is a trial's resource fields (`LAYOUT_KEYS`). Where the target (this machine, the
machine `rlsweep plan` plans for, the cluster joined) has GPUs, trials are packed on them: K per
GPU (`num_gpus` 1/K, the GPU's CPUs shared out, `num_env_runners` 0: each trial samples in its
own process and infers on the GPU), K the packing `benchmarks/gpu.py` measured fastest in all
(`rlsweep.plan.plan.Throughput.gpu_packed`: its result here, else `DEFAULT_GPU_PACKED`) among those
the target's CPUs and GPU memory hold. Where it has none, trials keep TrialConfig's CPU layout: 1
CPU each, sampling in the trial's process (the fastest per CPU: docs/speed.md), so that as many
run at once as there are CPUs. `validate`, `plan` and `run` say which layout they chose, and
why (`Layout.line`); the sweep's `sweep.yaml` records it in `params`, so a resume runs it again.
Pure and torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rlsweep.errors import ConfigError
from rlsweep.formatting import plural
from rlsweep.plan.placement import Machine, check_fits
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import SweepSpec, load_baseline

LAYOUT_KEYS = ("num_gpus", "num_cpus", "num_env_runners")
"""The trial fields a layout sets: a spec that sets any of them chose its own."""


@dataclass(frozen=True)
class Layout:
    """The resource fields a sweep's trials get, and why."""

    params: dict[str, Any] = field(default_factory=dict)
    """The fields set over the spec's params ({}: the spec's own, or TrialConfig's)."""
    why: str = ""
    """What was chosen and why, in a line."""

    def apply(self, spec: SweepSpec) -> SweepSpec:
        """`spec` with this layout (a new spec, validated again; the same spec if none)."""
        if not self.params:
            return spec
        return spec.with_overrides(params={**spec.params, **self.params})

    def line(self) -> str:
        return f"rlsweep: layout: {self.why}"


def pinned(spec: SweepSpec) -> list[str]:
    """The spec's key paths that set a layout field (params, space, variants, its baseline)."""
    found = [f"params.{k}" for k in LAYOUT_KEYS if k in spec.params]
    found += [f"space.{k}" for k in LAYOUT_KEYS if k in spec.space]
    for label, bundle in spec.variants.items():
        found += [f"variants.{label}.{k}" for k in LAYOUT_KEYS if k in bundle]
    baseline = load_baseline(spec.extends, spec.source)
    found += [f"extends({spec.extends}).{k}" for k in LAYOUT_KEYS if k in baseline]
    return found


def packed_rate(packed: dict[int, float], k: int) -> tuple[float, str]:
    """A trial's env steps/s (training's, or evaluation's) when `k` trials share one GPU, from
    `packed` (aggregate env steps/s at the packings measured), and how it was had. Between two
    measured packings the aggregate is interpolated linearly; beyond the largest, that aggregate
    is shared (the GPU is busy already); below the smallest, a trial runs at that packing's rate
    per trial."""
    k = max(k, 1)
    below, above = [m for m in packed if m < k], [m for m in packed if m > k]
    if k in packed:
        return packed[k] / k, f"{k} per GPU"
    if below and above:
        lo, hi = max(below), min(above)
        aggregate = packed[lo] + (packed[hi] - packed[lo]) * (k - lo) / (hi - lo)
        return aggregate / k, f"{k} per GPU, between the {lo} and {hi} measured"
    if below:
        lo = max(below)
        return packed[lo] / k, f"{k} per GPU sharing the aggregate of the {lo} measured"
    hi = min(above)
    return packed[hi] / hi, f"{k} per GPU at the rate of each of the {hi} measured"


def gpu_share(k: int) -> float:
    """num_gpus of one of `k` trials on a GPU: 1/k rounded down to Ray's unit (1e-4), so that k
    of them fit on one GPU (1/7 rounded to 0.1429 would not)."""
    return math.floor(1e4 / k) / 1e4


def choose(
    spec: SweepSpec,
    machine: Machine,
    packed: dict[int, float] | None,
    source: str | None = None,
) -> Layout:
    """The layout of `spec`'s trials on `machine` (see the module docstring). `packed`: the
    aggregate training env steps/s of K trials on one GPU, by K, as measured (`source` says
    where)."""
    if keys := pinned(spec):
        return Layout(
            why=f"the spec's own ({', '.join(keys)}): a spec that sets resources keeps them"
        )
    n = spec.num_trials
    if machine.gpus < 1:
        return _cpu_layout(n, machine)
    gpus = math.floor(machine.gpus)
    on_its_node = machine.cpus_per_gpu if machine.cpus_per_gpu is not None else math.inf
    cpus_per_gpu = max(1, int(min(machine.cpus // gpus, _node_cpus(machine), on_its_node)))
    trials = spec.trials()

    def holds(k: int) -> bool:
        params = _gpu_params(k, cpus_per_gpu)
        try:
            for t in trials:
                check_fits(TrialConfig.from_dict({**t.to_dict(), **params}), machine)
        except ConfigError:
            return False
        return True

    limit = min(cpus_per_gpu, math.ceil(n / gpus))  # a CPU each at least; no idle shares
    held = [k for k in range(1, limit + 1) if holds(k)] or [1]
    if packed:

        def aggregate(k: int) -> float:  # rounded: beyond the largest measured, it is flat
            return round(packed_rate(packed, k)[0] * k, 3)

        k = max(held, key=lambda m: (aggregate(m), -m))
        measured = "measured" if k in packed else "read between the packings measured"
        why = (
            f"of the packings its CPUs and GPU memory hold, the fastest in all ({measured}: "
            f"{aggregate(k):,.0f} env steps/s; {source or 'measured'})"
        )
    else:
        k = held[-1]
        why = f"as many as its CPUs, its GPU memory and the sweep's {n:,} trials allow"
    params = _gpu_params(k, cpus_per_gpu)
    idle = ""
    if machine.cpu_only_cpus:
        idle = (
            f"; the {machine.cpu_only_cpus:g} CPUs of the nodes without a GPU run none of "
            "these trials (to sample there, set num_env_runners and env_runner_resources)"
        )
    return Layout(
        params=params,
        why=(
            f"{plural(k, 'trial')} per GPU (num_gpus {params['num_gpus']:g}, "
            f"num_cpus {params['num_cpus']}, num_env_runners 0: sampling in the trial's process, "
            f"inference on the GPU): {why}; {_UNSET}{idle}"
        ),
    )


CPU_TRIAL_MAX_CPUS = 8
"""The most CPUs a CPU trial gets where the target has CPUs to spare: its torch and envpool
threads beyond this are unmeasured (docs/speed.md measured 2)."""
_UNSET = "the spec sets no resources (num_gpus, num_cpus, num_env_runners)"


def _cpu_layout(n: int, machine: Machine) -> Layout:
    """CPU trials, sampling in their own processes: 1 CPU each, or the CPUs the sweep's `n`
    trials leave spare shared out among them (up to CPU_TRIAL_MAX_CPUS)."""
    cpus = max(1, min(int(machine.cpus // max(n, 1)), CPU_TRIAL_MAX_CPUS, _node_cpus(machine)))
    spare = f"its {machine.cpus:g} CPUs shared among the sweep's {n:,} trials"
    why = f"{machine.where} has no GPU" + (f", {spare}" if cpus > 1 else "")
    head = f"CPU trials, {plural(cpus, 'CPU')} each, sampling in the trial's process"
    params = {"num_gpus": 0, "num_cpus": cpus, "num_env_runners": 0} if cpus > 1 else {}
    return Layout(params=params, why=f"{head}: {why}; {_UNSET}")


def _node_cpus(machine: Machine) -> int:
    """The most CPUs one trial can have there: a cluster's largest node's."""
    return int(machine.cpus if machine.node_cpus is None else machine.node_cpus)


def _gpu_params(k: int, cpus_per_gpu: int) -> dict[str, Any]:
    return {"num_gpus": gpu_share(k), "num_cpus": max(1, cpus_per_gpu // k), "num_env_runners": 0}
