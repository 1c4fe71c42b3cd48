"""Env-steps/s of an rlsweep trial, as a user gets it, against an independent plain PPO loop.

    .venv/bin/python benchmarks/throughput.py [--rounds 2] [--iterations 4] [--glibc] [--quick]
                                              [--side-by-side]

Both train coinrun (easy) with the IMPALA-CNN [16, 32, 32], 64 envs x 64 steps = 4096 env steps
per iteration, minibatch 2048, 3 epochs, on 2 CPUs / 2 torch threads:

- trial: `rlsweep run` (a subprocess, the installed CLI) on a one-trial spec written to a temp
  dir: Ray, Tune, RLlib, the trial's runtime env, reporting and all. Its steady speed is read from
  the trial's progress.csv: env steps / wall time between the end of the warm-up iteration(s)
  and the last report, minus the time spent evaluating (`time/eval_s`; evaluation runs only at
  the end here). Ray's start-up and shut-down are not counted (printed apart).
- peer: `benchmarks/plain_ppo.py --bench`, CleanRL's single-process loop outside Ray, in a process
  of its own started from a clean environment (no RAY_*, OMP_*, LD_PRELOAD, MALLOC_CONF from
  ours). It shares only the network definition (`rlsweep.trial.models.ImpalaActorCritic`) with the
  trial. Its allocator is its own choice: jemalloc preloaded with the `MALLOC_CONF` below (the
  setup the issue measured); `--glibc` adds a row with the plain glibc allocator.

Trial and peer runs alternate, round by round (trial, peer, then peer, trial, ...), so that load
from other processes hits both alike. Each round's ratio compares two runs minutes apart, so the
machine's drift (on a busy shared host the peer alone ran 101-147 env-steps/s within an hour)
mostly cancels in it; the rounds are the samples: the headline is their geometric mean with a
95% t-interval (`ratio_interval`), and whether that interval clears `--target` (0.95). The
pooled ratio (all env steps over all seconds) is printed too. Absolute figures depend on the
machine's load (printed before and after); the ratio and its interval are the figures to read.

Writes results/benchmarks/throughput.json (`trial_env_steps_per_s`, `peer_env_steps_per_s`,
`ratio`, `measured_at`, `machine`, ...; `rlsweep plan` takes its figures from
benchmarks/plan_costs.py instead). About 15 minutes on an idle 2-core machine (4 rounds), 25 on
a busy one.

`--side-by-side` runs each round's trial and peer at the same time instead, each confined to
one core (the trial's whole process tree: Ray's daemons, Tune's driver and the trial; `pinned`)
with one torch thread, swapping cores every round. Each arm is then measured over the
iterations that lie wholly inside the span both were training (`side_by_side`), so that a
slow minute of the host slows both: the ratio's noise from the host's drift cancels within
the round, not across minutes. It tests the trial at 1 CPU, where Ray's daemons weigh twice
as much as at 2. Writes results/benchmarks/throughput_side_by_side.json.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import yaml
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
PLAIN_PPO = Path(__file__).resolve().parent / "plain_ppo.py"
DEFAULT_OUT = ROOT / "results" / "benchmarks" / "throughput.json"
SIDE_BY_SIDE_OUT = DEFAULT_OUT.with_name("throughput_side_by_side.json")
"""Apart from DEFAULT_OUT: the 2-CPU runs and the 1-CPU ones are different measurements."""

GAME, MODE = "coinrun", "easy"
NUM_ENVS, ROLLOUT, MINIBATCH, EPOCHS, CPUS = 64, 64, 2048, 3, 2
BATCH = NUM_ENVS * ROLLOUT
PEER_MALLOC_CONF = (
    "oversize_threshold:1,background_thread:true,metadata_thp:auto,"
    "dirty_decay_ms:-1,muzzy_decay_ms:-1"
)
"""The peer's jemalloc settings (its own choice, as measured in issue 11)."""
SCRUBBED = ("LD_PRELOAD", "MALLOC_CONF", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass
class Run:
    """One timed run of one arm: its timed iterations and what it reported about itself."""

    arm: str
    env_steps: float
    seconds: float
    cpu_s: float
    """CPU seconds of the training process (all its threads) over the timed iterations."""
    iteration_s: list[float]
    iteration_steps: list[float]
    process_s: float
    """Wall time of the whole subprocess (start-up, warm-up, shut-down included)."""
    load: tuple[float, float]
    """1-minute load average before and after."""
    facts: dict = field(default_factory=dict)
    iteration_end: list[float] = field(default_factory=list)
    """Unix time at which each timed iteration ended (to overlap side-by-side runs)."""
    iteration_cpu_s: list[float] = field(default_factory=list)
    """The training process's CPU seconds in each timed iteration."""

    @property
    def steps_per_s(self) -> float:
        return self.env_steps / self.seconds

    @property
    def best_steps_per_s(self) -> float:
        """Its fastest iteration: other load only ever slows an iteration down."""
        return max(n / s for n, s in zip(self.iteration_steps, self.iteration_s, strict=True))

    @property
    def cpu_ms_per_step(self) -> float:
        return 1000 * self.cpu_s / self.env_steps

    @property
    def span(self) -> tuple[float, float]:
        """Unix times of the start of its first timed iteration and the end of its last."""
        return self.iteration_end[0] - self.iteration_s[0], self.iteration_end[-1]

    def within(self, start: float, end: float) -> Run:
        """This run cut to its timed iterations that lie wholly inside [start, end] (the time
        both side-by-side arms were training); an error if none does."""
        keep = [
            i
            for i, (t, s) in enumerate(zip(self.iteration_end, self.iteration_s, strict=True))
            if t - s >= start and t <= end
        ]
        if not keep:
            raise RuntimeError(f"{self.arm}: no timed iteration inside the arms' common window")

        def pick(xs: list[float]) -> list[float]:
            return [xs[i] for i in keep]

        return replace(
            self,
            env_steps=sum(pick(self.iteration_steps)),
            seconds=sum(pick(self.iteration_s)),
            cpu_s=sum(pick(self.iteration_cpu_s)),
            iteration_s=pick(self.iteration_s),
            iteration_steps=pick(self.iteration_steps),
            iteration_end=pick(self.iteration_end),
            iteration_cpu_s=pick(self.iteration_cpu_s),
        )


def side_by_side(trial: Run, peer: Run) -> tuple[Run, Run]:
    """Both runs cut to the time both were in their timed iterations, so that each is measured
    under the same load from the rest of the machine (and from the other)."""
    start = max(trial.span[0], peer.span[0])
    end = min(trial.span[1], peer.span[1])
    return trial.within(start, end), peer.within(start, end)


def _clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in SCRUBBED and not k.startswith(("RAY_", "TUNE_"))
    }


def find_jemalloc() -> str | None:
    """A jemalloc for the peer, found without rlsweep's code: $JEMALLOC, the system's, or the
    copy inside the installed ray wheel (the one a pip-installed CleanRL user has at hand)."""
    candidates = [os.environ.get("JEMALLOC", "")]
    candidates += [
        f"/usr/lib/{platform.machine()}-linux-gnu/libjemalloc.so.2",
        "/usr/lib64/libjemalloc.so.2",
        "/usr/local/lib/libjemalloc.so.2",
    ]
    if spec := importlib.util.find_spec("ray"):
        candidates.append(str(Path(spec.origin).parent / "core" / "libjemalloc.so"))
    return next((c for c in candidates if c and os.path.exists(c)), None)


def trial_spec(storage: Path, iterations: int, cpus: int = CPUS) -> dict:
    return {
        "name": "throughput",
        "games": [GAME],
        "seeds": [0],
        # Every iteration samples at least BATCH real transitions, so this is exactly
        # `iterations` iterations.
        "budget": iterations * BATCH,
        "params": {
            "distribution_mode": MODE,
            "widths": [16, 32, 32],
            "num_envs_per_env_runner": NUM_ENVS,
            "rollout_length": ROLLOUT,
            "minibatch_size": MINIBATCH,
            "num_epochs": EPOCHS,
            "num_cpus": cpus,
            "eval_interval": 1000,  # evaluate only at the end (subtracted below)
            "eval_episodes": 1,
        },
        "metric": "test/return_norm",
        "mode": "max",
        "storage_path": str(storage),
    }


def _tail(path: Path, n: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def pinned(cmd: list[str], core: int | None) -> list[str]:
    """`cmd` confined to one core (its threads, and every process it starts, inherit that)."""
    if core is None:
        return cmd
    pin = (
        f"import os, sys; os.sched_setaffinity(0, {{{core}}}); os.execvp(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", pin, *cmd]


def run_trial(
    tmp: Path,
    warmup: int,
    iterations: int,
    timeout: float,
    cpus: int = CPUS,
    core: int | None = None,
) -> Run:
    spec_path, storage = tmp / "spec.yaml", tmp / "results"
    # One more iteration at the end: the trial evaluates when it finishes, and that iteration's
    # report carries the evaluation's time and CPU.
    total = warmup + iterations + 1
    spec_path.write_text(yaml.safe_dump(trial_spec(storage, total, cpus)))
    log = tmp / "trial.log"
    cli = Path(sys.executable).parent / "rlsweep"
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    with open(log, "w") as out:
        rc = subprocess.run(
            pinned([str(cli), "run", str(spec_path), "--num-cpus", str(cpus)], core),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_clean_env(),
            timeout=timeout,
            check=False,
        ).returncode
    process_s = time.perf_counter() - t0
    progress = sorted(storage.rglob("progress.csv"))
    if rc != 0 or len(progress) != 1:
        raise RuntimeError(f"`rlsweep run` exited {rc}; its log ends:\n{_tail(log)}")
    with open(progress[0]) as f:
        rows = list(csv.DictReader(f))
    if len(rows) != total:
        raise RuntimeError(f"{progress[0]}: {len(rows)} iterations, not {total}")
    # Reports follow evaluation and precede checkpoints, so the span between the reports of
    # the last warm-up iteration and the last timed one is training plus Tune's reporting;
    # time/eval_s is subtracted in case an evaluation fell inside.
    timed = rows[warmup - 1 : warmup + iterations]

    def delta(key: str, a: dict, b: dict) -> float:
        return float(b[key]) - float(a[key])

    spans = [
        delta("time/wall_s", a, b) - delta("time/eval_s", a, b)
        for a, b in zip(timed, timed[1:], strict=False)
    ]
    first, last = timed[0], timed[-1]
    cpu = delta("perf/cpu_s", first, last) if last.get("perf/cpu_s") else math.nan
    # Tune's `timestamp` is whole seconds of the same report as time/wall_s (seconds since the
    # trial started): their mean offset places the reports in unix time to within ~0.5 s.
    offset = np.mean([float(r["timestamp"]) - float(r["time/wall_s"]) for r in rows]) + 0.5
    return Run(
        arm="trial",
        env_steps=delta("env_steps", first, last),
        seconds=sum(spans),
        cpu_s=cpu,
        iteration_s=spans,
        iteration_steps=[delta("env_steps", a, b) for a, b in zip(timed, timed[1:], strict=False)],
        iteration_end=[float(offset + float(b["time/wall_s"])) for b in timed[1:]],
        iteration_cpu_s=[
            delta("perf/cpu_s", a, b) if b.get("perf/cpu_s") else math.nan
            for a, b in zip(timed, timed[1:], strict=False)
        ],
        process_s=process_s,
        load=(load0, os.getloadavg()[0]),
        facts={
            "jemalloc": last.get("perf/jemalloc"),
            "nice": last.get("perf/nice") or "?",
            "torch_threads": last.get("perf/torch_threads") or "?",
        },
    )


def run_peer(
    tmp: Path,
    warmup: int,
    iterations: int,
    jemalloc: str | None,
    timeout: float,
    cpus: int = CPUS,
    core: int | None = None,
) -> Run:
    env = _clean_env()
    if jemalloc:
        env |= {"LD_PRELOAD": jemalloc, "MALLOC_CONF": PEER_MALLOC_CONF}
    cmd = [
        sys.executable,
        str(PLAIN_PPO),
        "--bench",
        f"--game={GAME}",
        f"--distribution-mode={MODE}",
        f"--num-envs={NUM_ENVS}",
        f"--num-steps={ROLLOUT}",
        f"--minibatch-size={MINIBATCH}",
        f"--update-epochs={EPOCHS}",
        f"--threads={cpus}",
        f"--warmup={warmup}",
        f"--iterations={iterations}",
    ]
    log = tmp / f"peer_{'jemalloc' if jemalloc else 'glibc'}.log"
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.run(
            pinned(cmd, core),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            timeout=timeout,
        )
    process_s = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"plain_ppo.py exited {proc.returncode}; its log ends:\n{_tail(log)}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    its = out["iterations"]
    return Run(
        arm="peer (jemalloc)" if jemalloc else "peer (glibc)",
        env_steps=sum(i["env_steps"] for i in its),
        seconds=sum(i["wall_s"] for i in its),
        cpu_s=sum(i["cpu_s"] for i in its),
        iteration_s=[i["wall_s"] for i in its],
        iteration_steps=[i["env_steps"] for i in its],
        iteration_end=[i["end_unix"] for i in its],
        iteration_cpu_s=[i["cpu_s"] for i in its],
        process_s=process_s,
        load=(load0, os.getloadavg()[0]),
        facts={
            "jemalloc": out["jemalloc"],
            "nice": os.nice(0),  # inherited from this process
            "torch_threads": out["torch_threads"],
            "sample_%": round(
                100 * sum(i["sample_s"] for i in its) / sum(i["wall_s"] for i in its)
            ),
        },
    )


def ratio_interval(
    trial: list[float], peer: list[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """(geometric mean, low, high) of the per-round ratios trial[i] / peer[i]: a t-interval on
    their logs, the rounds as independent samples (each round's two runs are adjacent in time,
    so the machine's slow drift cancels within it). One round has no interval (NaN bounds)."""
    logs = np.log(np.asarray(trial, float) / np.asarray(peer, float))
    center = float(np.exp(logs.mean()))
    if len(logs) < 2:
        return center, math.nan, math.nan
    half = stats.t.ppf(0.5 + confidence / 2, len(logs) - 1) * logs.std(ddof=1) / len(logs) ** 0.5
    return center, float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))


def verdict(low: float, high: float, target: float) -> str:
    """What the interval says about `trial >= target x peer`."""
    if math.isnan(low):
        return f"no interval from one round: run --rounds 3 or more to test >= {target}"
    if low >= target:
        return f"trial >= {target} x peer: yes (the whole 95% interval)"
    if high < target:
        return f"trial >= {target} x peer: no (the whole 95% interval is below)"
    return (
        f"trial >= {target} x peer: not decided at this machine's noise (the interval spans "
        f"{target}); more rounds narrow it"
    )


def pooled(runs: list[Run]) -> float:
    return sum(r.env_steps for r in runs) / sum(r.seconds for r in runs)


def cpu_ms(runs: list[Run]) -> float:
    """CPU milliseconds of the training process per env step: less sensitive to other load
    than wall time (the trial's excludes Ray's daemons and Tune's driver)."""
    return 1000 * sum(r.cpu_s for r in runs) / sum(r.env_steps for r in runs)


def cores_used(runs: list[Run]) -> float:
    """CPU cores the training process kept busy over its timed wall time. The pooled ratio is
    the product of the two arms' ratios of this (the trial's share of the machine: what Ray's
    daemons and Tune's driver leave it) and of CPU-ms per step inverted (its work per step).
    The first is steady from run to run; the second carries the host's drift."""
    return sum(r.cpu_s for r in runs) / sum(r.seconds for r in runs)


def machine(cpus: int = CPUS) -> dict:
    import torch

    from rlsweep.plan.placement import cpu_model

    return {
        "hostname": platform.node(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "torch": torch.__version__,
        "torch_threads_used": cpus,
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4, help="trial/peer pairs (default 4)")
    p.add_argument("--iterations", type=int, default=3, help="timed iterations per run")
    p.add_argument("--warmup", type=int, default=1, help="untimed iterations first")
    p.add_argument("--glibc", action="store_true", help="also time the peer with glibc malloc")
    p.add_argument(
        "--side-by-side",
        action="store_true",
        help="run trial and peer at once, one core and one torch thread each (see above)",
    )
    p.add_argument("--quick", action="store_true", help="smoke: 1 round of 1 timed iteration")
    p.add_argument(
        "--out", type=Path, default=None, help=f"JSON (default {DEFAULT_OUT}; --quick: none)"
    )
    p.add_argument("--timeout", type=float, default=1800, help="seconds per subprocess")
    p.add_argument(
        "--target", type=float, default=0.95, help="the ratio the verdict tests (default 0.95)"
    )
    a = p.parse_args(argv)
    if a.quick:
        a.rounds, a.iterations = 1, 1
    if a.warmup < 1 or a.iterations < 1 or a.rounds < 1:
        p.error("--warmup, --iterations and --rounds must be >= 1")
    if a.side_by_side and (a.glibc or len(os.sched_getaffinity(0)) < 2):
        p.error("--side-by-side needs 2 usable cores and no --glibc")
    cpus = 1 if a.side_by_side else CPUS
    facts = machine(cpus)
    jemalloc = find_jemalloc()
    print(
        f"{GAME} {MODE}, IMPALA-CNN [16, 32, 32], {NUM_ENVS} envs x {ROLLOUT} steps, minibatch "
        f"{MINIBATCH}, {EPOCHS} epochs, {cpus} CPU(s) per arm{' side by side' * a.side_by_side}; "
        f"{a.rounds} round(s) of {a.warmup} warm-up + {a.iterations} timed iteration(s) per run\n"
        f"machine: {facts['cpu']}, "
        f"{facts['cores']} cores ({facts['cores_usable']} usable), torch {facts['torch']}; "
        f"load average {os.getloadavg()[0]:.2f} at start",
        flush=True,
    )
    if not jemalloc:
        print("no jemalloc found for the peer: it runs with glibc malloc")
    runs: list[Run] = []

    def show(r: int, run: Run, where: str = "") -> None:
        its = ", ".join(f"{s:.1f}" for s in run.iteration_s)
        print(
            f"round {r + 1} {run.arm + where:<24} {run.steps_per_s:7.1f} env-steps/s, "
            f"{run.cpu_ms_per_step:.2f} CPU-ms/step (iterations {its} s; process "
            f"{run.process_s:.0f} s; load {run.load[0]:.2f}->{run.load[1]:.2f}; {run.facts})",
            flush=True,
        )

    with tempfile.TemporaryDirectory(prefix="rlsweep-throughput-") as tmp_dir:
        for r in range(a.rounds):
            tmp = Path(tmp_dir) / f"round{r}"
            tmp.mkdir()
            if a.side_by_side:
                # Both at once, one core each, swapping cores every round. The peer runs 3
                # iterations more, to cover the trial's Ray start-up and final evaluation.
                cores = sorted(os.sched_getaffinity(0))[:2]
                cores = cores if r % 2 == 0 else cores[::-1]
                with ThreadPoolExecutor(2) as pool:
                    t = pool.submit(run_trial, tmp, a.warmup, a.iterations, a.timeout, 1, cores[0])
                    q = pool.submit(
                        run_peer, tmp, a.warmup, a.iterations + 3, jemalloc, a.timeout, 1, cores[1]
                    )
                    pair = side_by_side(t.result(), q.result())
                for run, core in zip(pair, cores, strict=True):
                    runs.append(run)
                    show(r, run, f" (core {core})")
                continue
            arms = ["trial", "peer"] + (["glibc"] if a.glibc else [])
            for arm in arms if r % 2 == 0 else arms[::-1]:
                if arm == "trial":
                    run = run_trial(tmp, a.warmup, a.iterations, a.timeout)
                else:
                    lib = jemalloc if arm == "peer" else None
                    run = run_peer(tmp, a.warmup, a.iterations, lib, a.timeout)
                runs.append(run)
                show(r, run)
    by_arm = {arm: [r for r in runs if r.arm == arm] for arm in dict.fromkeys(r.arm for r in runs)}
    peer_arm = "peer (jemalloc)" if jemalloc else "peer (glibc)"
    trial, peer = pooled(by_arm["trial"]), pooled(by_arm[peer_arm])
    trial_rates = [r.steps_per_s for r in by_arm["trial"]]
    peer_rates = [r.steps_per_s for r in by_arm[peer_arm]]
    per_round = [t / q for t, q in zip(trial_rates, peer_rates, strict=True)]
    center, low, high = ratio_interval(trial_rates, peer_rates)
    said = verdict(low, high, a.target)
    best = {arm: max(r.best_steps_per_s for r in arm_runs) for arm, arm_runs in by_arm.items()}
    print(
        f"\n{'':<18}{'env-steps/s':>12}{'vs peer':>9}{'CPU-ms/env-step':>17}"
        f"{'cores used':>12}{'best iteration':>16}{'vs peer':>9}"
    )
    for arm, arm_runs in by_arm.items():
        rate = pooled(arm_runs)
        print(
            f"{arm:<18}{rate:12.1f}{rate / peer:9.2f}{cpu_ms(arm_runs):17.2f}"
            f"{cores_used(arm_runs):12.3f}{best[arm]:16.1f}{best[arm] / best[peer_arm]:9.2f}"
        )
    share = cores_used(by_arm["trial"]) / cores_used(by_arm[peer_arm])
    work = cpu_ms(by_arm[peer_arm]) / cpu_ms(by_arm["trial"])
    print(
        f"pooled ratio {trial / peer:.3f} = cores used {share:.3f} x work per step {work:.3f} "
        "(peer's CPU-ms/step over the trial's)"
    )
    print(
        f"ratio trial/peer: {center:.2f}, 95% interval [{low:.2f}, {high:.2f}] over "
        f"{len(per_round)} round(s) (per round: "
        + ", ".join(f"{x:.2f}" for x in per_round)
        + f"; pooled {trial / peer:.2f}); load average {os.getloadavg()[0]:.2f} at the end\n"
        + said
    )
    result = {
        "trial_env_steps_per_s": round(trial, 1),
        "peer_env_steps_per_s": round(peer, 1),
        "ratio": round(trial / peer, 3),
        "ratio_per_round": [round(x, 3) for x in per_round],
        "ratio_geomean": round(center, 3),
        "ratio_ci95": [round(low, 3), round(high, 3)] if not math.isnan(low) else None,
        "target": a.target,
        "verdict": said,
        "ratio_best_iteration": round(best["trial"] / best[peer_arm], 3),
        "trial_cpu_ms_per_env_step": round(cpu_ms(by_arm["trial"]), 3),
        "trial_cores_used": round(cores_used(by_arm["trial"]), 3),
        "peer_cores_used": round(cores_used(by_arm[peer_arm]), 3),
        "peer_cpu_ms_per_env_step": round(cpu_ms(by_arm[peer_arm]), 3),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": facts,
        "setup": {
            "game": GAME,
            "distribution_mode": MODE,
            "widths": [16, 32, 32],
            "num_envs": NUM_ENVS,
            "rollout_length": ROLLOUT,
            "minibatch_size": MINIBATCH,
            "num_epochs": EPOCHS,
            "cpus": cpus,
            "side_by_side": a.side_by_side,
            "rounds": a.rounds,
            "warmup_iterations": a.warmup,
            "timed_iterations": a.iterations,
            "peer_jemalloc": jemalloc,
            "peer_malloc_conf": PEER_MALLOC_CONF if jemalloc else None,
        },
        "runs": [asdict(r) | {"env_steps_per_s": round(r.steps_per_s, 1)} for r in runs],
    }
    if "peer (glibc)" in by_arm and jemalloc:
        result["peer_glibc_env_steps_per_s"] = round(pooled(by_arm["peer (glibc)"]), 1)
    default = SIDE_BY_SIDE_OUT if a.side_by_side else DEFAULT_OUT
    out = a.out or (None if a.quick else default)  # a smoke run's figure is no measurement
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
