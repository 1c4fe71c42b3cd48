"""`rlsweep plan`: what a spec will run and roughly how long it takes, before anything starts.

The wall-time estimate runs the sweep in waves of the trials that fit at once (CPUs, GPUs,
fractional GPU packing: `rlsweep.placement`), each trial at a measured speed: the last benchmark
run in this directory where there is one (`results/benchmarks/throughput.json` for CPU trials,
`results/benchmarks/gpu.json` for GPU trials), else `DEFAULT_STEPS_PER_CPU_S`. The plan says
which source it used.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from rlsweep import cost
from rlsweep.placement import gpu_memory_gib, placement, trials_at_once, trials_per_gpu
from rlsweep.spec import SweepSpec, check_resources

DEFAULT_STEPS_PER_CPU_S = 110.0
"""Env steps per second per trial CPU when no benchmark was run here: benchmarks/throughput.py
on a 2-core machine, an rlsweep PPO trial with the [16, 32, 32] IMPALA-CNN, 64 envs x 64 steps,
jemalloc, ~221 env steps/s on 2 CPUs."""
CPU_BENCHMARK = Path("results/benchmarks/throughput.json")
"""benchmarks/throughput.py's last result: `trial_env_steps_per_s` of one trial holding
`setup.cpus` CPUs."""
GPU_BENCHMARK = Path("results/benchmarks/gpu.json")
"""benchmarks/gpu.py's last result: `packed`, {K: aggregate env steps/s of K trials on one GPU}."""


@dataclass(frozen=True)
class Throughput:
    """Env steps per second the plan assumes, and where the figures came from."""

    per_cpu_s: float
    """CPU trials: per trial CPU."""
    source: str
    gpu_packed: dict[int, float] | None = None
    """GPU trials: aggregate env steps/s of K trials sharing one GPU (None: not measured)."""
    gpu_source: str | None = None

    def trial_steps_per_s(self, cpus: float, gpus: float, per_gpu: int) -> tuple[float, str]:
        """One trial's env steps/s when `per_gpu` trials share each GPU, and the source."""
        if gpus and self.gpu_packed:
            # The measured packing nearest below this one (more trials per GPU: slower each).
            k = max((k for k in self.gpu_packed if k <= per_gpu), default=min(self.gpu_packed))
            return self.gpu_packed[k] / k, f"{self.gpu_source}, {k} per GPU"
        note = " (GPU trials unmeasured: the CPU rate)" if gpus else ""
        return self.per_cpu_s * cpus, f"{self.source}{note}"


def measured_throughput(
    cpu_file: Path = CPU_BENCHMARK, gpu_file: Path = GPU_BENCHMARK
) -> Throughput:
    """The CPU benchmark's rate where it was run here, else the default; the GPU benchmark's
    packed figures where it ran on a GPU."""
    data = _read(cpu_file) or {}
    rate, cpu_count = data.get("trial_env_steps_per_s"), (data.get("setup") or {}).get("cpus")
    if _positive(rate) and _positive(cpu_count):
        cpu = rate / cpu_count
        source = f"{cpu_file}: {rate:,.0f} env steps/s on {cpu_count} CPUs"
    else:
        cpu, source = DEFAULT_STEPS_PER_CPU_S, f"default {DEFAULT_STEPS_PER_CPU_S:g}/CPU/s"
    packed = None
    if (data := _read(gpu_file)) and data.get("device") == "cuda" and data.get("packed"):
        packed = {int(k): float(v) for k, v in data["packed"].items() if v and v > 0} or None
    return Throughput(cpu, source, packed, str(gpu_file) if packed else None)


def _positive(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and x > 0


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def duration(seconds: float) -> str:
    """'3.2 h', or minutes when that would round to 0.0 h or be under an hour."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{max(1, round(seconds / 60))} min" if seconds >= 30 else "<1 min"


@dataclass(frozen=True)
class Plan:
    """A spec's trials, totals, wall-time estimate and (with an instance type) cost estimate."""

    num_trials: int
    """Trials the spec runs (num_samples included)."""
    sweep_env_steps: int
    """Env steps of the whole sweep: num_trials x budget (each trial's budget is its
    TrialConfig.total_env_steps)."""
    cpus_per_trial: int
    """CPUs the largest trial reserves."""
    gpus_per_trial: float
    """GPUs the largest trial reserves (a fraction: several trials share a GPU)."""
    concurrent: int
    """Trials running at once."""
    bound: str
    """What limits `concurrent`: 'CPU', 'GPU', or 'spec' (max_concurrent, or fewer trials)."""
    cpus: float
    """CPUs planned for."""
    gpus: float
    """GPUs planned for."""
    trial_steps_per_s: float
    """Env steps per second one trial is assumed to run at."""
    steps_per_s_source: str
    """Where that figure came from (a benchmark file, --steps-per-s, or the default)."""
    est_wall_s: float
    """Estimated wall time of the whole sweep."""
    rows: list[dict]
    """One row per grid trial: game, seed, grid values, sampled parameters' ranges."""
    gpu_memory_gib: float | None = None
    """Estimated GPU memory of the largest GPU trial (None: CPU trials)."""
    instance: str | None = None
    """EC2 instance type the cost is estimated for (None: no cost estimate)."""
    instances: int | None = None
    """Instances billed: the number asked for, or enough for `concurrent` trials at once."""
    spot: bool = False
    """Spot (True) or on-demand prices."""
    hourly_usd: float | None = None
    """USD per hour of one instance."""
    head: str | None = None
    """Head node's instance type, billed on-demand for the whole wall time (None: no head)."""
    head_usd: float | None = None
    """The head's share of `est_cost_usd`."""
    est_cost_usd: float | None = None
    """instances x estimated hours x hourly_usd (+ head_usd)."""

    def summary(self) -> str:
        cpus = f"{self.cpus_per_trial} CPU{'s' if self.cpus_per_trial != 1 else ''}"
        each = f"{cpus}, {self.gpus_per_trial:g} GPU" if self.gpus_per_trial else cpus
        if self.gpu_memory_gib is not None:
            each += f", ~{self.gpu_memory_gib:.1f} GiB GPU memory"
        box = f"{self.cpus:g} CPUs"
        if self.gpus:
            box += f", {self.gpus:g} GPU{'s' if self.gpus != 1 else ''}"
        text = (
            f"{self.num_trials} trials x budget = {self.sweep_env_steps:,} env steps; "
            f"{self.concurrent} at a time on {box} ({self.bound}-bound; {each} per trial); "
            f"{self.trial_steps_per_s:,.0f} env steps/s per trial ({self.steps_per_s_source}); "
            f"estimated wall time {duration(self.est_wall_s)}"
        )
        if self.est_cost_usd is not None:
            market = "spot" if self.spot else "on-demand"
            text += (
                f"; {self.instances} x {self.instance} ({market}, ${self.hourly_usd:.3f}/h each)"
            )
            if self.head is not None:
                text += f" + head {self.head} (on-demand, ${self.head_usd:,.2f})"
            text += f": estimated cost ${self.est_cost_usd:,.2f}"
        return text


def make_plan(
    spec: SweepSpec,
    cpus: float,
    steps_per_cpu_s: float | None = None,
    instance: str | None = None,
    spot: bool = False,
    prices: cost.Prices | None = None,
    instances: int | None = None,
    head: str | None = None,
    gpus: float = 0,
    gpu_memory: float | None = None,
    throughput: Throughput | None = None,
) -> Plan:
    """Trial list, totals and a wall-time estimate: trials run in waves of `concurrent` (what
    fits on `cpus` CPUs and `gpus` GPUs at once, fractional GPU trials packed per GPU), each at
    the measured rate (`throughput`, default `measured_throughput()`; `steps_per_cpu_s`
    overrides its CPU rate),
    evaluation and start-up not counted. A trial that cannot fit (CPUs, GPUs, or with
    `gpu_memory` GiB per GPU the estimated memory of the trials packed on one) is refused with a
    SpecError naming the key.

    With `instance` (an EC2 type in `prices`, default rlsweep/prices.yaml) the plan also
    estimates the bill: `instances` of that type (then they, not `cpus`/`gpus`, set the machine
    planned for), or as many as `concurrent` trials need, x the estimated hours x its spot or
    on-demand $/h. `head` adds a head node's on-demand bill for the whole wall time; the estimate
    places no trials on it (a head with spare CPUs or a GPU runs trials in practice, so the
    estimate errs high). The measured rates come from another machine: pass `steps_per_cpu_s`
    for the instance's."""
    if head is not None and instance is None:
        raise ValueError("head: a head instance type needs an instance type for the workers")
    trials = spec.trials()
    places = [placement(t) for t in trials]
    per_trial = max(p.cpus for p in places)
    gpus_per_trial = max(p.gpus for p in places)
    p = cost.price(instance, prices) if instance is not None else None
    if instances is not None:
        if p is None or isinstance(instances, bool) or not isinstance(instances, int):
            raise ValueError("instances: an integer >= 1, together with instance")
        if instances < 1:
            raise ValueError(f"instances: got {instances}; allowed: an integer >= 1")
        cpus, gpus = instances * p.vcpus, instances * p.gpus
    if p is not None and gpu_memory is None:
        gpu_memory = p.gpu_memory_gib
    where = f"{instance}" if instances is not None else "the planned machine"
    if p is not None:
        cost.check_gpus(gpus_per_trial, p, instance)
    check_resources(spec, cpus, gpus, where=where, gpu_memory_gib=gpu_memory)
    concurrent, bound = trials_at_once(per_trial, gpus_per_trial, cpus, gpus)
    if p is not None and instances is not None:
        # Trials do not split across instances: fragmentation caps what runs at once.
        per_instance = cost.trials_per_instance(per_trial, gpus_per_trial, p)
        if instances * per_instance < concurrent:
            concurrent = max(1, instances * per_instance)
    if spec.max_concurrent and spec.max_concurrent < concurrent:
        concurrent, bound = spec.max_concurrent, "spec"
    if spec.num_trials < concurrent:
        concurrent, bound = spec.num_trials, "spec"
    rate = throughput or measured_throughput()
    if steps_per_cpu_s is not None:
        rate = dataclasses.replace(rate, per_cpu_s=steps_per_cpu_s, source="--steps-per-s")
    sharing = min(concurrent, trials_per_gpu(gpus_per_trial)) if gpus_per_trial else 0
    trial_rate, source = rate.trial_steps_per_s(per_trial, gpus_per_trial, sharing)
    waves = math.ceil(spec.num_trials / concurrent)
    est = waves * spec.budget / trial_rate
    rows = []
    for t in trials:
        row = {"game": t.game, "seed": t.seed}
        row.update({k: getattr(t, k) for k in spec.grid_keys})
        for k in spec.sampled_keys:
            row[k] = spec.space[k].to_raw()
        row["samples"] = spec.search.num_samples
        rows.append(row)
    billed = usd = head_usd = None
    if instance is not None:
        billed, usd = cost.plan_cost(
            est, concurrent, per_trial, gpus_per_trial, instance, instances, spot, prices
        )
        if head is not None:
            head_usd = cost.cluster_cost(est, head, prices=prices)
            usd += head_usd
    gpu_trials = [t for t in trials if t.num_gpus > 0]
    return Plan(
        num_trials=spec.num_trials,
        sweep_env_steps=spec.num_trials * spec.budget,
        cpus_per_trial=per_trial,
        gpus_per_trial=gpus_per_trial,
        concurrent=concurrent,
        bound=bound,
        cpus=cpus,
        gpus=gpus,
        trial_steps_per_s=trial_rate,
        steps_per_s_source=source,
        est_wall_s=est,
        rows=rows,
        gpu_memory_gib=max(map(gpu_memory_gib, gpu_trials)) if gpu_trials else None,
        instance=instance,
        instances=billed,
        spot=spot,
        hourly_usd=p.hourly(spot) if p is not None else None,
        head=head,
        head_usd=head_usd,
        est_cost_usd=usd,
    )
