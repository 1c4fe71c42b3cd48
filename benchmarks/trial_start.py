"""What a trial's process spends before its first iteration, in CPU seconds.

    .venv/bin/python benchmarks/trial_start.py [--repeats N] [--json FILE]

Each repeat is a fresh Ray worker process (a task with max_calls=1, in a local Ray started as a
sweep starts its own), as a trial's is: it imports what `rlsweep.trial.trainable` imports, then
builds the trial's algorithm (`rlsweep.trial.algos.build_algorithm`: RLlib's EnvRunner with its
envpool, the learner, the seeding) on `rlsweep.testing.TINY_PPO`. Printed per repeat, then the
medians: CPU seconds of the imports and of the build, and which of the heavy modules a trial
does not use ended up loaded (matplotlib: envpool's full registration; torch._inductor: torch's
compiler, imported with torch._dynamo when the learner builds its first optimizer).

`rlsweep plan` counts a trial's start at benchmarks/plan_costs.py's `trial_start_s`, which also
holds Tune's bookkeeping and the last checkpoint; this is the part inside the process.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

HEAVY = ("matplotlib", "torch._inductor", "envpool.atari")
"""Modules a Procgen PPO trial never calls into, whose import is a start's cost."""


def measure() -> dict[str, Any]:
    """In a fresh process: the imports and the build, timed by `time.process_time`."""
    import sys
    import time

    c0 = time.process_time()
    from rlsweep.spec.config import TrialConfig
    from rlsweep.testing import TINY_PPO
    from rlsweep.trial import algos, trainable  # noqa: F401  (what a trial's process imports)

    c1 = time.process_time()
    algo = algos.build_algorithm(TrialConfig(**TINY_PPO))
    c2 = time.process_time()
    algo.stop()
    return {
        "imports_cpu_s": round(c1 - c0, 2),
        "build_cpu_s": round(c2 - c1, 2),
        "loaded": [m for m in HEAVY if m in sys.modules],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=4, help="fresh processes (default 4)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)

    import ray

    from rlsweep.run.session import ray_session

    with ray_session(address=None, num_cpus=1, jemalloc=True, dashboard=None):
        fresh = ray.remote(num_cpus=1, max_calls=1)(measure)
        runs = []
        for i in range(args.repeats):
            runs.append(ray.get(fresh.remote()))
            r = runs[-1]
            print(
                f"repeat {i + 1}: imports {r['imports_cpu_s']:.2f} CPU-s, build "
                f"{r['build_cpu_s']:.2f} CPU-s; loaded: {', '.join(r['loaded']) or 'none'}",
                flush=True,
            )
    summary = {
        key: statistics.median(r[key] for r in runs) for key in ("imports_cpu_s", "build_cpu_s")
    }
    total = summary["imports_cpu_s"] + summary["build_cpu_s"]
    print(
        f"median of {args.repeats}: imports {summary['imports_cpu_s']:.2f} CPU-s + build "
        f"{summary['build_cpu_s']:.2f} CPU-s = {total:.2f} CPU-s before the first iteration"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "median": summary}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
