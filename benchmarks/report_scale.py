"""A search's report at scale (issue 41): `rlsweep report` on synthetic 300- and 2,000-trial
search directories, its time and peak memory; and the driver's memory through a real 300-trial
sweep (Tune's real path, the fake trainable).

    .venv/bin/python benchmarks/report_scale.py                    # both parts, ~20 min, 2 cores
    .venv/bin/python benchmarks/report_scale.py --report 300 2000  # the reports only
    .venv/bin/python benchmarks/report_scale.py --sweep 300        # the driver only
    .venv/bin/python benchmarks/report_scale.py --report 300 --keep /tmp/scale   # to read it

Reports: each directory is written directly in the layout Tune writes (`write_search`: a trial
dir per trial with trial.json, params.json and result.json, one JSON line per iteration holding
Tune's own keys and the config; sweep.yaml and sweep.json beside them), a random search of `lr`
(loguniform) x `gamma` (uniform) on coinrun, one seed, 8 iterations of which 4 evaluate.
`rlsweep report DIR` then runs in a fresh process (the CLI, as a user runs it), timed around,
its peak resident memory read from the kernel (`ru_maxrss` of the child).

Driver: `run_sweep` of the same search (32,768 env steps per trial, 2 iterations of the fake
trainable, `rlsweep.testing.fake_trial`) in a fresh process, its resident memory sampled every
0.5 s by a thread with the number of trials started: after `ray.init`, at the tenth of the
trials, at the end, and the peak; the growth per trial is the slope of RSS against trials
started from that tenth on (least squares). Tune's logger callbacks keep every trial
(ray#64231): this is what it costs here.

Prints a table and writes results/benchmarks/report_scale.json (`--out`). Figures on a shared
machine are slower than on an idle one: the load average is printed and stored.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from rlsweep.plan.placement import cpu_model

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "results" / "benchmarks" / "report_scale.json"
SPACE = {"lr": {"loguniform": [1e-4, 1e-3]}, "gamma": {"uniform": [0.95, 0.999]}}
ITERATIONS = 8
"""Iterations per synthetic trial; every second one evaluates (`test/fresh`)."""
SWEEP_BUDGET = 32_768
"""Env steps per trial of the driver's sweep (the fake trainable: 2 iterations of 16,384)."""


def _score(lr: float, gamma: float, seed: int, frac: float, rng: np.random.Generator) -> float:
    """A synthetic final-ish normalized score: best near lr = 4e-4, rising with gamma, noisy."""
    peak = 0.7 - 0.5 * (math.log10(lr) - math.log10(4e-4)) ** 2 + 4.0 * (gamma - 0.95)
    return float(frac * (peak + 0.02 * (seed % 3) + rng.normal(0, 0.05)))


def write_search(
    root: str | Path,
    n_trials: int,
    *,
    name: str = "search",
    games: tuple[str, ...] = ("coinrun",),
    seeds: tuple[int, ...] = (0,),
    iterations: int = ITERATIONS,
    seed: int = 0,
) -> Path:
    """A finished search's experiment dir `root/name` of `n_trials` trials, as Tune and rlsweep
    write it. Each sampled configuration runs on every game x seed, as random search and
    Optuna run them: `n_trials` must be a multiple of games x seeds. Returns the dir."""
    from rlsweep.experiment.experiment_dir import RUN_FILE, SWEEP_FILE
    from rlsweep.spec.config import TrialConfig
    from rlsweep.spec.spec import TRIAL_FILE, SweepSpec

    cells = [(g, s) for g in games for s in seeds]
    if n_trials % len(cells):
        raise ValueError(f"{n_trials} trials do not split into {len(cells)} game x seed cells")
    budget = 4096 * iterations
    spec = SweepSpec(
        name=name,
        games=list(games),
        seeds=list(seeds),
        budget=budget,
        space=SPACE,
        search={"algorithm": "random", "num_samples": n_trials // len(cells)},
    )
    exp = Path(root) / name
    exp.mkdir(parents=True)
    (exp / SWEEP_FILE).write_text(spec.to_yaml())
    (exp / RUN_FILE).write_text(json.dumps({"rlsweep_version": "bench", "instance_type": None}))
    rng = np.random.default_rng(seed)
    base = TrialConfig(total_env_steps=budget).to_dict()
    index = 0
    for _ in range(n_trials // len(cells)):
        lr = float(10 ** rng.uniform(-4, -3))
        gamma = float(rng.uniform(0.95, 0.999))
        for game, s in cells:
            config = {**base, "game": game, "seed": s, "lr": lr, "gamma": gamma}
            d = exp / f"{game}_s{s}_1c13a_{index:05d}"
            d.mkdir()
            text = json.dumps(config, indent=2)
            (d / TRIAL_FILE).write_text(text)
            (d / "params.json").write_text(text)
            rows = []
            test = train = math.nan
            for i in range(1, iterations + 1):
                fresh = i % 2 == 0
                if fresh:
                    test = _score(lr, gamma, s, i / iterations, rng)
                    train = test + 0.1 * i / iterations
                steps = 4096 * i
                rows.append(
                    {
                        "env_steps": steps,
                        "timesteps_total": steps,
                        "train/return": 10 * train,
                        "train/return_norm": train,
                        "test/return": 10 * test,
                        "test/return_norm": test,
                        "test/fresh": fresh,
                        "trial/done": i == iterations,
                        "gap/return_norm": train - test,
                        "time/wall_s": 0.5 * i,
                        "time/eval_s": 0.1 * (i // 2),
                        "hp/lr": lr,
                        "trial/resumed_at_iteration": 0,
                        "trial/interrupted": False,
                        "done": i == iterations,
                        "training_iteration": i,
                        "trial_id": f"1c13a_{index:05d}",
                        "config": config,
                    }
                )
            # Tune's JSON logger writes NaN as NaN (json.dumps' default), which json.loads reads.
            (d / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
            index += 1
    return exp


# --- measuring ------------------------------------------------------------------------------


def _load() -> float:
    return os.getloadavg()[0]


def time_report(n_trials: int, work: Path) -> dict[str, Any]:
    """`rlsweep report` on a synthetic `n_trials` search in a child process: wall seconds,
    peak RSS (MiB), the report's files."""
    shutil.rmtree(work / f"r{n_trials}", ignore_errors=True)  # a kept one of an earlier run
    exp = write_search(work / f"r{n_trials}", n_trials)
    load = _load()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "rlsweep.cli", "report", str(exp)],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        raise RuntimeError(f"report of {n_trials} trials failed:\n{proc.stderr[-3000:]}")
    if peak_kib <= before:  # ru_maxrss is the largest child so far: only a new maximum shows
        peak_kib = math.nan
    return {
        "trials": n_trials,
        "report_s": round(wall, 1),
        "peak_rss_mib": round(peak_kib / 1024, 0),
        "load_avg_1m": round(load, 2),
        "files": sorted(p.name for p in (exp / "report").iterdir()),
    }


_SWEEP_CHILD = """
import json, os, sys, threading, time
import ray
from rlsweep.spec.spec import SweepSpec
from rlsweep.run.sweep import run_sweep
from rlsweep.testing import fake_trial

n, storage, space, budget = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])

def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

def reported():
    if not os.path.isdir(exp):
        return 0
    return sum(os.path.exists(os.path.join(d.path, "result.json")) for d in os.scandir(exp))

samples, done = [], threading.Event()
def sample():
    while not done.is_set():
        samples.append((time.monotonic(), rss_mib(), reported()))
        time.sleep(0.5)

spec = SweepSpec(name="driver", games=["coinrun"], seeds=[0], budget=budget, storage_path=storage,
                 space=space, search={"algorithm": "random", "num_samples": n})
exp = os.path.join(storage, "driver")
start_rss = rss_mib()
ray.init(num_cpus=2, include_dashboard=False)
ray_rss = rss_mib()
t = threading.Thread(target=sample, daemon=True); t.start()
t0 = time.monotonic()
result = run_sweep(spec, trainable=fake_trial, num_cpus=2)
wall = time.monotonic() - t0
done.set(); t.join()
end_rss = rss_mib()
df = result.to_dataframe()
ray.shutdown()
print(json.dumps({"start": start_rss, "ray": ray_rss, "end": end_rss,
                  "peak": max(s[1] for s in samples), "wall_s": wall, "samples": samples,
                  "finished": int((df["status"] == "TERMINATED").sum())}))
"""


def driver_memory(n_trials: int, work: Path) -> dict[str, Any]:
    """The driver's RSS through a real `n_trials` random search of the fake trainable."""
    load = _load()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _SWEEP_CHILD,
            str(n_trials),
            str(work / f"s{n_trials}"),
            json.dumps(SPACE),
            str(SWEEP_BUDGET),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "RLSWEEP_PROGRESS_S": "600"},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"sweep of {n_trials} trials failed:\n{proc.stderr[-3000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # What each further trial adds once Tune, its callbacks and the first trials are in place:
    # the slope of RSS against trials started (a least-squares line through the samples from
    # the 10th trial, or the tenth of them, on).
    samples = got.pop("samples")
    start = max(10, n_trials // 10)
    late = np.array([(n, rss) for _, rss, n in samples if n >= start])
    early = late[0, 1] if len(late) else got["ray"]
    per_trial = np.polyfit(late[:, 0], late[:, 1], 1)[0] * 1024 if len(late) > 2 else math.nan
    return {
        "trials": n_trials,
        "finished": got["finished"],
        "sweep_s": round(got["wall_s"], 0),
        "rss_start_mib": round(got["start"], 0),
        "rss_after_ray_init_mib": round(got["ray"], 0),
        "rss_at_trial": start,
        "rss_then_mib": round(float(early), 0),
        "rss_end_mib": round(got["end"], 0),
        "rss_peak_mib": round(max(got["peak"], got["end"]), 0),
        "growth_kib_per_trial": round(per_trial, 1),
        "load_avg_1m": round(load, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=int, nargs="*", default=None, help="trials per report")
    parser.add_argument("--sweep", type=int, nargs="*", default=None, help="trials per sweep")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"the figures' JSON (default: {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="write the synthetic searches (and their reports) under DIR and keep them, to read; "
        "its r<N>/ dirs are replaced (default: a temporary dir, removed)",
    )
    args = parser.parse_args(argv)
    both = args.report is None and args.sweep is None
    reports = args.report if args.report is not None else ([300, 2000] if both else [])
    sweeps = args.sweep if args.sweep is not None else ([300] if both else [])
    record: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{cpu_model()}, {os.cpu_count()} cores",
        "command": " ".join(["benchmarks/report_scale.py", *(argv or sys.argv[1:])]),
        "reports": [],
        "sweeps": [],
    }
    with contextlib.ExitStack() as stack:
        tmp = args.keep or stack.enter_context(tempfile.TemporaryDirectory())
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for n in reports:
            got = time_report(n, Path(tmp))
            record["reports"].append(got)
            print(
                f"report of {n:>5,} trials: {got['report_s']:7.1f} s, peak RSS "
                f"{got['peak_rss_mib']:,.0f} MiB (load {got['load_avg_1m']})",
                flush=True,
            )
        for n in sweeps:
            got = driver_memory(n, Path(tmp))
            record["sweeps"].append(got)
            print(
                f"sweep of {n:>5,} trials ({got['finished']} finished, {got['sweep_s']:.0f} s): "
                f"driver RSS {got['rss_after_ray_init_mib']:,.0f} MiB after ray.init, "
                f"{got['rss_then_mib']:,.0f} at trial {got['rss_at_trial']}, "
                f"{got['rss_end_mib']:,.0f} at the end (peak {got['rss_peak_mib']:,.0f}): "
                f"{got['growth_kib_per_trial']:.1f} KiB per trial (load {got['load_avg_1m']})",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
