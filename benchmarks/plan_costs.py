"""What `rlsweep plan` counts each part of a sweep at, measured on this machine.

    .venv/bin/python benchmarks/plan_costs.py [--quick] [--out FILE]

The parts of `rlsweep.plan.plan.Costs`, each measured where a sweep spends it:

- ray_start_s: `rlsweep.run.session.ray_session` (a local Ray with rlsweep's settings, as
  `run_sweep` starts it) entered and left, timed around.
- a real sweep in that Ray (`run_sweep`): the demo's trial shape (coinrun easy, 16 envs x 64
  steps, minibatch 512, 1 CPU), at 3 epochs (the demo's) and at 1, the two side by side as the
  demo runs two trials on 2 cores, each ITERATIONS iterations, evaluating every EVAL_INTERVAL
  (32 envs per split). From the trials' last reports:
  - trial_start_s: the sweep's wall time less its longest trial's own (`time/wall_s` runs from
    the trial's first iteration to its last report): the trial's process, RLlib's build, the
    envpools, the last checkpoint and Tune's bookkeeping;
  - eval_steps_per_cpu_s: evaluations x 2 splits x 32 envs x coinrun's time limit (1000), over
    `time/eval_s`, per CPU. An evaluation plays until every env has ended one episode, and an
    untrained coinrun policy's slowest of 32 does reach the limit (its mean episode lasts
    ~650 steps), so this is the rate of the plan's convention: an evaluation counted at the
    time limit;
- the training's parts (`rlsweep.plan.plan.Costs`: per vector step, per env step, per minibatch, per
  sample and epoch, per iteration), in this process (`build_algorithm`, then `train()` timed:
  the median of TIMED iterations) on six small iterations that differ in one part each
  (`SHAPES`), solved for the five; then all five scaled by one factor, so that they give the
  sweep's 3-epoch trial its measured training time (`time/wall_s - time/eval_s`): the shapes
  set the proportions, the real trial the scale. The sweep's 1-epoch trial is then predicted
  from them and printed against what it took, a check of the proportions.

Writes results/benchmarks/plan_costs.json (`rlsweep plan` reads it from the directory it runs
in; `--quick` writes nothing). About 5 minutes on an idle 2-core machine. The machine's load
average is printed and stored: on a host shared with other jobs every figure is slower.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "results" / "benchmarks" / "plan_costs.json"
GAME = "coinrun"
PARAMS = {
    "distribution_mode": "easy",
    "num_levels": 200,
    "num_envs_per_env_runner": 16,
    "rollout_length": 64,
    "minibatch_size": 512,
    "eval_episodes": 32,
    "num_cpus": 1,
}
"""The demo's trial (search_spaces/demo.yaml) less its framestack, and its epochs (EPOCHS)."""
ITERATIONS, EVAL_INTERVAL = 6, 3
EPOCHS = (3, 1)
"""The two trials' num_epochs: the demo's (`rlsweep.plan.plan.REFERENCE`'s), and one."""
QUICK = {"iterations": 2, "eval_interval": 2, "timed": 2}
TIMED = 10
"""Iterations timed of each of SHAPES (after one warm-up)."""


SHAPES = {
    "base": (16, 8, 128, 1),  # envs, rollout, minibatch, epochs: 128 env steps
    "few_envs": (8, 16, 128, 1),  # the same steps and update, in twice the vector steps
    "many_envs": (32, 4, 128, 1),
    "small_minibatches": (16, 8, 16, 1),  # the same samples in 8 minibatches
    "epochs": (16, 8, 128, 3),  # the update twice more
    "one_step": (16, 1, 16, 1),  # 16 env steps: what is left is the iteration's own cost
}
"""Iterations timed in this process, each differing from `base` in one part of the cost."""


def measure_shapes(timed: int) -> dict[str, float]:
    """Median seconds of an iteration of each of `SHAPES` (1 CPU, 1 torch thread)."""
    import torch

    from rlsweep.spec.config import TrialConfig
    from rlsweep.trial.algos import build_algorithm

    torch.set_num_threads(1)
    medians = {}
    for name, (envs, rollout, minibatch, epochs) in SHAPES.items():
        cfg = TrialConfig(
            game=GAME, num_envs_per_env_runner=envs, rollout_length=rollout,
            minibatch_size=minibatch, num_epochs=epochs, num_cpus=1,
            total_env_steps=envs * rollout,
        )  # fmt: skip
        algo = build_algorithm(cfg)
        try:
            algo.train()  # warm-up
            times = []
            for _ in range(timed):
                t0 = time.perf_counter()
                algo.train()
                times.append(time.perf_counter() - t0)
        finally:
            algo.stop()
        medians[name] = statistics.median(times)
    return medians


def parts(t: dict[str, float]) -> dict[str, float]:
    """The training's five parts from `measure_shapes`' medians (none below 0: differences
    of noisy medians can be)."""
    # few_envs - many_envs: 16 - 4 = 12 vector steps more, the same env steps and update.
    vector = (t["few_envs"] - t["many_envs"]) / 12
    # small_minibatches - base: 8 - 1 = 7 minibatches more of the same 128 samples.
    minibatch = (t["small_minibatches"] - t["base"]) / 7
    # epochs - base: 2 epochs more, each a minibatch and 128 samples.
    sample = ((t["epochs"] - t["base"]) / 2 - minibatch) / 128
    # base - one_step: 7 vector steps, 112 env steps, 112 samples more.
    env = (t["base"] - t["one_step"] - 7 * vector - 112 * sample) / 112
    iteration = t["one_step"] - vector - 16 * env - minibatch - 16 * sample
    raw = {
        "vector_step_s": vector,
        "env_step_s": env,
        "minibatch_s": minibatch,
        "sample_s": sample,
        "iteration_s": iteration,
    }
    return {k: max(v, 0.0) for k, v in raw.items()}


def measure_sweep(storage: str, iterations: int, eval_interval: int) -> dict[str, Any]:
    """The demo-shaped sweep: its wall time and each trial's last report."""
    from rlsweep import metrics as M
    from rlsweep.run.sweep import run_sweep
    from rlsweep.spec.spec import SweepSpec

    spec = SweepSpec(
        name="plan-costs",
        games=[GAME],
        seeds=[0],
        budget=iterations * PARAMS["num_envs_per_env_runner"] * PARAMS["rollout_length"],
        params={**PARAMS, "eval_interval": eval_interval},
        space={"num_epochs": list(EPOCHS)},
        storage_path=storage,
    )
    t0 = time.perf_counter()
    df = run_sweep(spec).trials
    wall = time.perf_counter() - t0
    if not (df["status"] == "TERMINATED").all():
        raise RuntimeError(f"a trial did not finish:\n{df[['seed', 'status', 'error']]}")
    trials = []
    for d, epochs in zip(df["trial_dir"], df["num_epochs"], strict=True):
        last = json.loads((Path(d) / "result.json").read_text().splitlines()[-1])
        trials.append(
            {
                "num_epochs": int(epochs),
                "env_steps": last[M.ENV_STEPS],
                "iterations": last["training_iteration"],
                "wall_s": last[M.WALL_S],
                "eval_s": last[M.EVAL_S],
                "test_episode_length": last["test/episode_length"],
            }
        )
    return {"sweep_wall_s": wall, "trials": trials}


def costs(ray_s: float, sweep: dict[str, Any], training: dict[str, float]) -> dict[str, float]:
    """The `rlsweep.plan.plan.Costs` fields from the measurements (`training`: `parts`' five)."""
    from rlsweep.plan import plan
    from rlsweep.spec.config import TrialConfig

    trials, cpus = sweep["trials"], PARAMS["num_cpus"]
    cfg = TrialConfig(game=GAME, eval_interval=EVAL_INTERVAL, num_epochs=max(EPOCHS), **PARAMS)
    evals = sum(plan.evaluations(cfg, t["iterations"]) for t in trials)
    eval_s = sum(t["eval_s"] for t in trials)
    rest = {
        "eval_steps_per_cpu_s": evals * plan.eval_steps(cfg) / eval_s / cpus,
        "trial_start_s": sweep["sweep_wall_s"] - max(t["wall_s"] for t in trials),
        "ray_start_s": ray_s,
    }
    # The shapes' proportions, at the scale of the sweep's trial of the demo's epochs.
    (trial,) = [t for t in trials if t["num_epochs"] == cfg.num_epochs]
    measured = (trial["wall_s"] - trial["eval_s"]) / trial["iterations"]
    shaped = plan.Costs(**training, **rest)
    return dataclasses.asdict(shaped.scaled(measured / shaped.iteration(cfg)))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 iterations: a smoke run, no file")
    p.add_argument("--out", type=Path, help=f"JSON (default {DEFAULT_OUT}; --quick: none)")
    a = p.parse_args(argv)
    iterations, eval_interval, timed = (
        (QUICK["iterations"], QUICK["eval_interval"], QUICK["timed"])
        if a.quick
        else (ITERATIONS, EVAL_INTERVAL, TIMED)
    )
    from rlsweep.run.session import ray_session

    load = [os.getloadavg()[0]]
    print(f"load average {load[0]:.2f} at start", flush=True)
    t0 = time.perf_counter()
    with ray_session(address=None, num_cpus=2, jemalloc=True, dashboard=None):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="rlsweep-plan-costs-") as storage:
            sweep = measure_sweep(storage, iterations, eval_interval)
        print(f"sweep {sweep['sweep_wall_s']:.1f} s: {sweep['trials']}", flush=True)
        shapes = measure_shapes(timed)
        print(f"iterations of SHAPES: {shapes}", flush=True)
        stopping = time.perf_counter()
    ray_s = (started - t0) + (time.perf_counter() - stopping)
    load.append(os.getloadavg()[0])
    figures = costs(ray_s, sweep, parts(shapes))
    for key, value in figures.items():
        print(f"{key:>24} {value:10.6f}")
    from rlsweep.plan import plan
    from rlsweep.spec.config import TrialConfig

    (one,) = [t for t in sweep["trials"] if t["num_epochs"] == min(EPOCHS)]
    cfg = TrialConfig(game=GAME, num_epochs=min(EPOCHS), **PARAMS)
    predicted = plan.Costs(**figures).iteration(cfg) * one["iterations"]
    print(
        f"check: the {min(EPOCHS)}-epoch trial trained {one['wall_s'] - one['eval_s']:.1f} s; "
        f"these figures say {predicted:.1f} s"
    )
    print(f"load average {load[1]:.2f} at the end", flush=True)
    result = {
        **{k: round(v, 4) for k, v in figures.items()},
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average": load,
        "machine": {
            "hostname": platform.node(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "setup": {"game": GAME, **PARAMS, "iterations": iterations, "eval_interval": eval_interval},
        "sweep": sweep,
        "shapes": {"median_iteration_s": shapes, "parts": parts(shapes)},
    }
    out = a.out or (None if a.quick else DEFAULT_OUT)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")
    return result


if __name__ == "__main__":
    sys.exit(main() and 0)
