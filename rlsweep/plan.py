"""`rlsweep plan`: what a spec will run and roughly how long it takes, before anything starts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlsweep import cost
from rlsweep.spec import SweepSpec, trial_cpus

# benchmarks/throughput.py on a 2-core machine: an rlsweep PPO trial with the [16, 32, 32]
# IMPALA-CNN, 64 envs x 64 steps, jemalloc, ~221 env steps/s on 2 CPUs.
DEFAULT_STEPS_PER_CPU_S = 110.0


@dataclass(frozen=True)
class Plan:
    """A spec's trials, totals, wall-time estimate and (with an instance type) cost estimate."""

    num_trials: int
    """Trials the spec runs (num_samples included)."""
    total_env_steps: int
    """num_trials x budget."""
    cpus_per_trial: int
    """CPUs the largest trial reserves."""
    concurrent: int
    """Trials running at once."""
    est_wall_s: float
    """Estimated wall time of the whole sweep."""
    rows: list[dict]
    """One row per grid trial: game, seed, grid values, sampled parameters' ranges."""
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
        hours = self.est_wall_s / 3600
        text = (
            f"{self.num_trials} trials x budget = {self.total_env_steps:,} env steps; "
            f"{self.concurrent} at a time ({self.cpus_per_trial} "
            f"CPU{'s' if self.cpus_per_trial != 1 else ''} each); "
            f"estimated wall time {hours:.1f} h"
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
    steps_per_cpu_s: float = DEFAULT_STEPS_PER_CPU_S,
    instance: str | None = None,
    spot: bool = False,
    prices: cost.Prices | None = None,
    instances: int | None = None,
    head: str | None = None,
) -> Plan:
    """Trial list, totals and a wall-time estimate: trials run in waves of `concurrent`, each at
    `steps_per_cpu_s` x its CPUs (evaluation and start-up not counted).

    With `instance` (an EC2 type in `prices`, default rlsweep/prices.yaml) the plan also
    estimates the bill: `instances` of that type (then they, not `cpus`, set the CPUs planned
    for), or as many as `concurrent` trials need, x the estimated hours x its spot or on-demand
    $/h. `head` adds a head node's on-demand bill for the whole wall time; the estimate places
    no trials on it (a head with spare CPUs or a GPU runs trials in practice, so the estimate
    errs high). `steps_per_cpu_s` was measured on another machine: scale it for the instance's
    vCPUs."""
    trials = spec.trials()
    per_trial = max(trial_cpus(t) for t in trials)
    gpus_per_trial = max(t.num_gpus for t in trials)
    p = cost.price(instance, prices) if instance is not None else None
    if instances is not None:
        if p is None or isinstance(instances, bool) or not isinstance(instances, int):
            raise ValueError("instances: an integer >= 1, together with instance")
        if instances < 1:
            raise ValueError(f"instances: got {instances}; allowed: an integer >= 1")
        cpus = instances * p.vcpus
    concurrent = max(1, int(cpus // per_trial))
    if p is not None and instances is not None:
        # Trials do not split across instances: fragmentation caps what runs at once.
        per_instance = cost.trials_per_instance(per_trial, gpus_per_trial, p)
        concurrent = min(concurrent, max(1, instances * per_instance))
    if spec.max_concurrent:
        concurrent = min(concurrent, spec.max_concurrent)
    concurrent = min(concurrent, spec.num_trials)
    waves = math.ceil(spec.num_trials / concurrent)
    est = waves * spec.budget / (steps_per_cpu_s * per_trial)
    rows = []
    for t in trials:
        row = {"game": t.game, "seed": t.seed}
        row.update({k: getattr(t, k) for k in spec.grid_keys})
        for k in spec.sampled_keys:
            row[k] = spec.space[k].to_raw()
        row["samples"] = spec.search.num_samples
        rows.append(row)
    billed = usd = head_usd = None
    if head is not None and instance is None:
        raise ValueError("head: a head instance type needs an instance type for the workers")
    if instance is not None:
        billed, usd = cost.plan_cost(
            est, concurrent, per_trial, gpus_per_trial, instance, instances, spot, prices
        )
        if head is not None:
            head_usd = cost.cluster_cost(est, head, prices=prices)
            usd += head_usd
    return Plan(
        num_trials=spec.num_trials,
        total_env_steps=spec.num_trials * spec.budget,
        cpus_per_trial=per_trial,
        concurrent=concurrent,
        est_wall_s=est,
        rows=rows,
        instance=instance,
        instances=billed,
        spot=spot,
        hourly_usd=p.hourly(spot) if p is not None else None,
        head=head,
        head_usd=head_usd,
        est_cost_usd=usd,
    )
