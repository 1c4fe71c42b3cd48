"""`rlsweep plan`: what a spec will run and roughly how long it takes, before anything starts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlsweep.spec import SweepSpec, trial_cpus

# benchmarks/throughput.py on a 2-core machine: an rlsweep PPO trial with the [16, 32, 32]
# IMPALA-CNN, 64 envs x 64 steps, jemalloc, ~221 env steps/s on 2 CPUs.
DEFAULT_STEPS_PER_CPU_S = 110.0


@dataclass(frozen=True)
class Plan:
    num_trials: int
    total_env_steps: int
    cpus_per_trial: int
    concurrent: int
    est_wall_s: float
    rows: list[dict]

    def summary(self) -> str:
        hours = self.est_wall_s / 3600
        return (
            f"{self.num_trials} trials x budget = {self.total_env_steps:,} env steps; "
            f"{self.concurrent} at a time ({self.cpus_per_trial} CPUs each); "
            f"estimated wall time {hours:.1f} h"
        )


def make_plan(
    spec: SweepSpec, cpus: float, steps_per_cpu_s: float = DEFAULT_STEPS_PER_CPU_S
) -> Plan:
    """Trial list, totals and a wall-time estimate: trials run in waves of `concurrent`, each at
    `steps_per_cpu_s` x its CPUs (evaluation and start-up not counted)."""
    trials = spec.trials()
    per_trial = max(trial_cpus(t) for t in trials)
    concurrent = max(1, int(cpus // per_trial))
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
    return Plan(
        num_trials=spec.num_trials,
        total_env_steps=spec.num_trials * spec.budget,
        cpus_per_trial=per_trial,
        concurrent=concurrent,
        est_wall_s=est,
        rows=rows,
    )
