"""GPU throughput and memory in one run: the model's bound, a plain PPO loop, one rlsweep trial, K
packed trials.

    .venv/bin/python benchmarks/gpu.py [--quick] [--iterations N] [--packed 8,4,2] [--runs abcde]

Same network and batch everywhere: coinrun easy, IMPALA-CNN [16, 32, 32], 64 envs x 256 steps
(the trial's default: Cobbe et al. 2019), minibatch 2048, 3 epochs, on this machine's CPUs and
its first GPU (the CPU when it has none: the same code path, for a smoke run).

(a) model bound: the IMPALA-CNN alone, inputs already on the device: one inference forward over
    the envs (a rollout step) and one training step (forward, backward, Adam) over a minibatch,
    in fp32, tf32 (on a GPU only) and bf16 autocast, cuDNN benchmarking as in a trial; bound =
    env steps/s if PPO did nothing else (1 inference per env step, `epochs` training passes per
    sample). Its
    training step's peak GPU memory (allocated and reserved) beside placement's estimate of it,
    and the CUDA context the process holds outside torch's allocator. A process of its own, so
    that this one never holds GPU memory while the trials run.
(b) plain PPO: benchmarks/plain_ppo.py `--bench` on the device, a process of its own (the
    CleanRL-style loop, envpool stepping all envs on all cores), in fp32 and in the precision
    (c) runs (a GPU trial's default, `precision: auto`).
(c) one rlsweep trial through Tune, as a user runs it (`run_sweep`), holding the whole GPU and
    every CPU; steady env steps/s from its progress (after the first iteration, evaluation time
    excluded).
    Then the same trial with `overlap: true` (sampling the next batch beside the update: one
    update of policy lag, `rlsweep.trial.overlap`).
(d) K rlsweep trials packed on the GPU (num_gpus 1/K, CPUs / K each): aggregate env steps/s
    (the sum of their steady rates; they run concurrently), the largest K first.
(c) and (d) evaluate once, at each trial's end, with a trial's default `eval_episodes` (32 envs
    per level split): their evaluation rate is read in `rlsweep plan`'s convention (2 splits x
    eval_episodes envs x the game's time limit, over `time/eval_s`), per trial and summed over
    the K trials, whose evaluations overlap as their training does (`packed_eval` in gpu.json:
    plan counts a GPU trial's evaluations at it).

(e) where one trial's time goes, for (c)'s trial and variants of it (`--variants`: precision,
    cuDNN's determinism, channels_last, env_groups): the trial built in a process of its own
    (with (c)'s jemalloc), its parts timed from outside through RLlib's public objects (the local
    EnvRunner's `sample`, its vector env's send, recv and finish_step, which with double-buffered
    env groups time what sampling waits for, and its module's exploration forward; the
    LearnerGroup's `update`, its Learner's batch and GAE (`make_batch`), training forward,
    losses, gradients, gradient clipping and optimizer step), each waiting for the GPU before
    and after: seconds per iteration by part, the rest as "other". The waits take
    away the overlap of GPU and CPU work, so the parts sum to a little more than (c)'s iteration.
    Then one more iteration, untimed, counts where the host waits for the GPU (`host_syncs`).

`--runs` picks among them (`--runs ce`: the trial and its breakdown alone); they run in the
order a, b, c, e, d.

For (c) and every K: each trial's peak GPU memory (`perf/gpu_reserved_peak_gib`,
`perf/gpu_allocated_peak_gib`: its process's allocator) beside `rlsweep.plan.placement.gpu_memory`'s
estimate, and whether `validate` accepts the packing (and K = 16's) on this GPU.

Every stage prints its lines as soon as it has its figures and rewrites the JSON record and the
text, so a run cut short by a time limit still reports what it finished; the ratios (c)/(b) and
(d)/(c) come last. Output goes to $OUT if set, else results/benchmarks/
(`gpu.json`, read by `rlsweep plan`, and `gpu.txt`; a --quick or CPU run writes `gpu_quick.*`,
which plan never reads). One iteration warms up and two are timed: the rates are steady after
the first, and each trial's evaluation at its end is excluded from them. `make gpu-check
GPU_ARGS="--packed 8"` took 258 s for gpu.py on an H100 with one evaluation episode per split
(the sixth run); 32 add each trial's evaluation (unmeasured).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from rlsweep.spec.subconfigs import PRECISIONS

HERE = Path(__file__).resolve().parent
GIB = 2**30


@dataclass(frozen=True)
class Setup:
    game: str = "coinrun"
    envs: int = 64
    rollout: int = 256
    minibatch: int = 2048
    epochs: int = 3
    iterations: int = 2
    """Timed iterations per run (after one warm-up)."""
    packed: tuple[int, ...] = (8, 4, 2)
    """K of (d), run in this order; K = 1 is (c)."""
    overlap: bool = True
    """(c) again with `overlap: true`."""
    eval_episodes: int = 32
    """The trial's end-of-run evaluation, envs per level split (a trial's default): its time is
    excluded from the training rate and gives the evaluation rate."""
    repeats: int = 10
    """(a): timed repetitions of each step, after one warm-up."""
    runs: str = "abcde"
    """Which of (a)-(e) to run (`--runs ce`: the trial and its breakdown alone)."""
    variants: tuple[dict[str, Any], ...] = (
        {},  # the default: precision auto (GPU_PRECISION on a GPU), cuDNN benchmarking
        {"precision": "fp32", "deterministic": True},  # the previous default (RLlib's cuDNN)
        {"precision": "fp32"},
        {"precision": "fp32", "channels_last": False},
        {"precision": "tf32"},
    )
    """(e): (c)'s trial with each of these TrialConfig overrides."""
    cpus: int = os.cpu_count() or 1
    device: str = "cuda" if torch.cuda.is_available() else "cpu"

    @property
    def batch(self) -> int:
        return self.envs * self.rollout


OVERLAP = {"overlap": True}
"""(c)'s second run: sampling beside the update."""

QUICK = dict(
    envs=8,
    rollout=16,
    minibatch=64,
    epochs=1,
    iterations=1,
    packed=(2,),
    overlap=False,
    eval_episodes=1,
    repeats=3,
    variants=({},),
)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def trial_params(s: Setup, k: int = 1) -> dict[str, Any]:
    """The TrialConfig fields of (c) (k = 1) and of each trial of (d)."""
    return {
        "num_envs_per_env_runner": s.envs,
        "rollout_length": s.rollout,
        "minibatch_size": s.minibatch,
        "num_epochs": s.epochs,
        "num_cpus": max(1, s.cpus // k),
        "num_gpus": round(1 / k, 4) if s.device == "cuda" else 0,
        "eval_interval": 10**6,  # evaluate once, at the end (excluded from the rate)
        "eval_episodes": s.eval_episodes,
    }


def trial_config(s: Setup, k: int = 1, **overrides: Any):
    """The TrialConfig the estimates are of: a trial of (c) or (d)."""
    from rlsweep.spec.config import TrialConfig

    return TrialConfig(game=s.game, **trial_params(s, k), **overrides)


# --- (a) ---------------------------------------------------------------------------------------
def model_bound(s: Setup, precision: str) -> dict[str, float]:
    """(a), in this process: ms per inference forward over `envs` frames and per training step
    over a minibatch, the env-steps/s bound they imply, and the training step's peak GPU memory
    (allocated and reserved, the step alone: weights, Adam, the minibatch, activations,
    workspaces)."""
    from rlsweep.trial.models import ImpalaActorCritic, ModelConfig

    if s.device == "cuda":
        torch.cuda.empty_cache()  # the other precision's blocks
        torch.cuda.reset_peak_memory_stats()
        tf32 = "tf32" if precision == "tf32" else "ieee"  # as rlsweep.trial.device sets it
        torch.backends.cuda.matmul.fp32_precision = tf32
        torch.backends.cudnn.conv.fp32_precision = tf32
        torch.backends.cudnn.benchmark = True  # a trial's default (deterministic: false)
    net = ImpalaActorCritic((3, 64, 64), 15, ModelConfig(precision=precision)).to(s.device)
    opt = torch.optim.Adam(net.parameters(), lr=5e-4, eps=1e-5)
    obs = torch.randint(0, 256, (s.minibatch, 3, 64, 64), dtype=torch.uint8, device=s.device)
    act = torch.randint(0, 15, (s.minibatch,), device=s.device)
    ret = torch.randn(s.minibatch, device=s.device)

    def infer() -> None:
        with torch.no_grad():
            net(obs[: s.envs])

    def train() -> None:
        logits, value = net(obs)
        loss = torch.nn.functional.cross_entropy(logits, act) + (value - ret).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    def timed(fn) -> float:
        fn()  # warm-up (cuDNN's algorithm choice, allocator)
        _sync(s.device)
        t0 = time.perf_counter()
        for _ in range(s.repeats):
            fn()
        _sync(s.device)
        return (time.perf_counter() - t0) / s.repeats

    infer_s, train_s = timed(infer), timed(train)
    gpu = s.device == "cuda"
    per_step = infer_s / s.envs + s.epochs * train_s / s.minibatch
    return {
        "infer_ms": 1e3 * infer_s,
        "train_ms": 1e3 * train_s,
        "env_steps_per_s": 1 / per_step,
        "train_peak_gib": torch.cuda.max_memory_allocated() / GIB if gpu else math.nan,
        "train_reserved_gib": torch.cuda.max_memory_reserved() / GIB if gpu else math.nan,
    }


def cuda_context_gib(s: Setup) -> float:
    """GPU memory this process holds outside torch's allocator (its CUDA context and the
    libraries (a) loaded): the device's used memory less what torch reserved, with (a)'s cached
    blocks released. Valid while no other process uses the GPU."""
    if s.device != "cuda":
        return math.nan
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    return (total - free - torch.cuda.memory_reserved()) / GIB


def model_precisions(s: Setup) -> tuple[str, ...]:
    """(a)'s precisions: every one on a GPU; on a CPU not tf32, a CUDA setting (the CPU runs
    it as fp32 again)."""
    return PRECISIONS if s.device == "cuda" else tuple(p for p in PRECISIONS if p != "tf32")


def model_bound_main(s: Setup) -> None:
    """`--model-bound`: (a) in each precision, one JSON line."""
    out: dict[str, Any] = {p: model_bound(s, p) for p in model_precisions(s)}
    out["cuda_context_gib"] = cuda_context_gib(s)
    print(json.dumps(out))


def _run_json(argv: list[str], what: str) -> dict[str, Any]:
    """Run a Python command line in a process of its own; its last stdout line is JSON."""
    out = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=HERE)
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def model_stage(s: Setup) -> dict[str, Any]:
    """(a) in a process of its own."""
    setup = json.dumps(asdict(s))
    return _run_json(
        [sys.executable, str(Path(__file__)), "--model-bound", setup], "(a) the model bound"
    )


# --- (b) ---------------------------------------------------------------------------------------
def plain_loop(s: Setup, precision: str) -> dict[str, Any]:
    """(b): plain_ppo.py --bench in a process of its own, in `precision` (its TF32 flags set
    as an rlsweep trial sets them: torch's defaults allow TF32 in cuDNN's convolutions)."""
    argv = [
        "--bench",
        f"--game={s.game}",
        f"--num-envs={s.envs}",
        f"--num-steps={s.rollout}",
        f"--minibatch-size={s.minibatch}",
        f"--update-epochs={s.epochs}",
        f"--threads={s.cpus}",
        f"--device={s.device}",
        f"--iterations={s.iterations}",
        f"--precision={precision}",
    ]
    return _run_json([sys.executable, str(HERE / "plain_ppo.py"), *argv], "plain_ppo.py")


# --- (c), (d) ----------------------------------------------------------------------------------
def packed_trials(
    s: Setup, k: int, storage: str, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """(c) for k = 1, (d) otherwise: k trials through Tune sharing the GPU (and the CPUs), with
    each trial's steady rate, peak GPU memory and status; `overrides`: TrialConfig fields."""
    from rlsweep import metrics as M
    from rlsweep.plan import plan
    from rlsweep.results.results import load_curves
    from rlsweep.run.sweep import run_sweep
    from rlsweep.spec.spec import SweepSpec

    params = {**trial_params(s, k), **(overrides or {})}
    cfg = trial_config(s, k, **(overrides or {}))
    spec = SweepSpec.from_dict(
        {
            "name": f"gpu-bench-k{k}" + "".join(f"-{key}" for key in overrides or {}),
            "games": [s.game],
            "seeds": list(range(k)),
            "budget": (1 + s.iterations) * s.batch,
            "storage_path": storage,
            "params": params,
        }
    )
    t0 = time.perf_counter()
    run_sweep(spec, num_cpus=s.cpus, overwrite=True)
    wall = time.perf_counter() - t0
    curves = load_curves(Path(storage) / spec.name)
    trials = []
    for trial_id, trial in curves.groupby("trial_id"):
        trial = trial.sort_values("iteration")
        row: dict[str, Any] = {"trial_id": trial_id, "status": trial["status"].iloc[-1]}
        row["error"] = trial["error"].iloc[-1]
        for key in M.MEMORY_METRICS:
            row[key] = float(trial[key].max()) if key in trial else math.nan
        done = trial.dropna(subset=[M.WALL_S])
        busy = done[M.WALL_S] - done[M.EVAL_S].fillna(0)
        if len(done) >= 2:
            steps = done[M.ENV_STEPS].iloc[-1] - done[M.ENV_STEPS].iloc[0]
            row["env_steps_per_s"] = float(steps / (busy.iloc[-1] - busy.iloc[0]))
        else:
            row["env_steps_per_s"] = math.nan  # stopped (e.g. out of memory) before 2 reports
        # Its one evaluation, at its end, counted as plan counts one.
        eval_s = float(done[M.EVAL_S].max()) if len(done) else math.nan
        ok = trial["status"].iloc[-1] == "TERMINATED" and eval_s > 0
        row["eval_s"] = eval_s
        row["eval_steps_per_s"] = plan.eval_steps(cfg) / eval_s if ok else math.nan
        trials.append(row)
    rates = [t["env_steps_per_s"] for t in trials if math.isfinite(t["env_steps_per_s"])]
    evals = [t["eval_steps_per_s"] for t in trials if math.isfinite(t["eval_steps_per_s"])]
    return {
        "k": k,
        "num_gpus": params["num_gpus"],
        "num_cpus": params["num_cpus"],
        "trial_env_steps_per_s": rates,
        "aggregate_env_steps_per_s": sum(rates),
        "trial_eval_steps_per_s": evals,
        "aggregate_eval_steps_per_s": sum(evals),
        "sweep_wall_s": wall,
        "trials": trials,
        "failed": [f"{t['trial_id']}: {t['error']}" for t in trials if t["status"] == "ERROR"],
    }


# --- (e) ---------------------------------------------------------------------------------------
def breakdown_main(s: Setup, overrides: dict[str, Any]) -> None:
    """`--breakdown`: (e) in this process for (c)'s trial with `overrides` (TrialConfig fields),
    one JSON line: seconds per timed iteration by part."""
    import ray

    from rlsweep.trial import algos

    cfg = trial_config(s, **overrides)
    ray.init(
        num_cpus=s.cpus,
        num_gpus=torch.cuda.device_count(),
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    algo = algos.build_algorithm(cfg)
    spent: dict[str, float] = {}
    counting = False

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not counting:
                return fn(*args, **kwargs)
            _sync(s.device)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                _sync(s.device)
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0

        return wrapper

    # Instance attributes shadow the methods: only this process's objects are timed.
    runner = algo.env_runner_group.local_env_runner
    runner.sample = timed("sample", runner.sample)
    env = runner.env.unwrapped  # what the batched loop calls, and RLlib's env.step too
    for name in ("send", "recv", "finish_step"):
        setattr(env, name, timed("sample: env step (envpool)", getattr(env, name)))
    runner.module.forward_exploration = timed(
        "sample: inference forward", runner.module.forward_exploration
    )
    algo.learner_group.update = timed("learn", algo.learner_group.update)

    def time_learner(learner: Any) -> None:
        learner.module.forward_train = timed("learn: forward", learner.module.forward_train)
        learner.compute_losses = timed("learn: losses", learner.compute_losses)
        learner.compute_gradients = timed("learn: backward", learner.compute_gradients)
        learner.postprocess_gradients = timed(
            "learn: gradient clipping", learner.postprocess_gradients
        )
        learner.apply_gradients = timed("learn: optimizer step", learner.apply_gradients)
        # The learner connector (the batch from the episodes, its copy to the device, GAE)
        # and the advantages' standardization: RlsweepPPOLearner.make_batch.
        learner.make_batch = timed("learn: batch and GAE", learner.make_batch)

    algo.learner_group.foreach_learner(time_learner)
    algo.train()  # warm-up
    counting = True
    t0 = time.perf_counter()
    for _ in range(s.iterations):
        algo.train()
    total = time.perf_counter() - t0
    counting = False
    syncs = host_syncs(algo.train) if s.device == "cuda" else {}
    algo.stop()
    per = {k: v / s.iterations for k, v in spent.items()}
    out = {"iteration_s": total / s.iterations, **per}
    # What the trial's process ran with, read after its iterations (RLlib seeds in its build).
    flags = {"cudnn.benchmark": torch.backends.cudnn.benchmark}
    flags["cudnn.deterministic"] = torch.backends.cudnn.deterministic
    flags["conv fp32_precision"] = torch.backends.cudnn.conv.fp32_precision
    out["sample: other (connectors, episodes)"] = per.get("sample", 0.0) - sum(
        v for k, v in per.items() if k.startswith("sample: ")
    )
    out["learn: other (minibatches, metrics)"] = per.get("learn", 0.0) - sum(
        v for k, v in per.items() if k.startswith("learn: ")
    )
    out["other (weights sync, metrics)"] = (
        out["iteration_s"] - per.get("sample", 0.0) - per.get("learn", 0.0)
    )
    print(json.dumps({**out, "flags": flags, "syncs": syncs}))


def host_syncs(step: Callable[[], Any]) -> dict[str, int]:
    """Where one call of `step` makes the host wait for the GPU, by Python line, most first:
    torch's sync debug mode warns at every synchronizing op (a device-to-host copy, `.item()`,
    `nonzero`, ...) from the line that called it. Untimed: the warnings cost time."""
    import warnings
    from collections import Counter

    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    sites = Counter(
        f"{Path(w.filename).parent.name}/{Path(w.filename).name}:{w.lineno}"
        for w in caught
        if "synchroniz" in str(w.message)
    )
    return dict(sites.most_common())


def breakdown_stage(s: Setup, overrides: dict[str, Any]) -> dict[str, float]:
    """(e) in a process of its own, with the jemalloc a trial's process has."""
    from rlsweep.run.session import runtime_env

    env = {**os.environ, **runtime_env()["env_vars"]}
    setup = json.dumps({**asdict(s), "overrides": overrides})
    argv = [sys.executable, str(Path(__file__)), "--breakdown", setup]
    out = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=HERE, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"(e) the breakdown failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def variant_name(overrides: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in overrides.items()) or "the default"


def breakdown_lines(s: Setup, overrides: dict[str, Any], parts: dict[str, float]) -> list[str]:
    parts = dict(parts)
    flags = parts.pop("flags", {})
    syncs = parts.pop("syncs", {})
    it = parts["iteration_s"]
    label = f"(e) {variant_name(overrides)}"
    lines = [
        f"{label:<44} {s.batch / it:>12,.0f}  "
        f"{it:.2f} s per iteration of {s.batch:,} env steps, timed by part (GPU waited for)"
    ]
    names = [n for n in parts if n != "iteration_s"]
    for group in ("sample", "learn"):  # each whole, then its parts
        names.sort(key=lambda n: (not n.startswith(group), n != group))
    names.sort(key=lambda n: 0 if n.startswith("sample") else 1 if n.startswith("learn") else 2)
    for name in names:
        v = parts[name]
        lines.append(f"{'':<44} {'':>12}  {name:<38} {v:7.3f} s  {100 * v / it:5.1f}%")
    if flags:
        lines.append(f"{'':<44} {'':>12}  " + ", ".join(f"{k} {v}" for k, v in flags.items()))
    if syncs:
        lines.append(f"{'':<44} {'':>12}  host syncs in one iteration: {sum(syncs.values()):,}")
        lines += [f"{'':<44} {'':>12}  {n:>7,}  {site}" for site, n in list(syncs.items())[:12]]
    return lines


# --- what the estimate says ----------------------------------------------------------------------
def estimate(cfg) -> dict[str, float]:
    """placement's estimate for one trial (GiB): the total its process holds, the allocator's
    reserved and allocated parts, and the training step alone."""
    from rlsweep.plan.placement import gpu_memory

    m = gpu_memory(cfg)
    return {
        "total_gib": m.total,
        "reserved_gib": m.reserved,
        "allocated_gib": m.allocated,
        "training_step_gib": m.training_step,
    }


def packing_check(s: Setup, k: int) -> str:
    """What `rlsweep validate` says of K trials of (d)'s config on this machine."""
    from rlsweep.errors import ConfigError
    from rlsweep.plan.placement import check_fits, local_machine

    cfg = trial_config(s, k)
    try:
        check_fits(cfg, local_machine())
    except ConfigError as e:
        return f"refused: {e.path}: {e.message}"
    return "accepted"


def _gib(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.2f}"


def model_lines(s: Setup, model: dict[str, Any]) -> list[str]:
    lines = []
    for dtype in model_precisions(s):
        m = model[dtype]
        est = estimate(trial_config(s, precision=dtype))["training_step_gib"]
        lines.append(
            f"{'(a) model bound, ' + dtype:<44} {m['env_steps_per_s']:>12,.0f}  "
            f"inference {m['infer_ms']:.2f} ms / {s.envs} frames, train step "
            f"{m['train_ms']:.1f} ms / {s.minibatch}; train step memory: peak allocated "
            f"{_gib(m['train_peak_gib'])} GiB, reserved {_gib(m['train_reserved_gib'])} GiB, "
            f"estimate {est:.2f} GiB"
        )
    lines.append(
        f"{'(a) CUDA context (outside the allocator)':<44} {'':>12}  "
        f"{_gib(model['cuda_context_gib'])} GiB (placement assumes 0.75)"
    )
    return lines


def packed_lines(s: Setup, k: int, v: dict[str, Any]) -> list[str]:
    from rlsweep import metrics as M

    precision = trial_config(s, k).model_config().precision
    label = f"(c) one rlsweep trial, {precision}" if k == 1 else f"(d) K = {k}, aggregate"
    est = estimate(trial_config(s, k))

    def peak(key: str) -> float:  # the largest over the trials (NaN on the CPU)
        return max((t[key] for t in v["trials"] if math.isfinite(t[key])), default=math.nan)

    reserved, allocated = peak(M.GPU_RESERVED_PEAK_GIB), peak(M.GPU_ALLOCATED_PEAK_GIB)
    limit, host = peak(M.GPU_LIMIT_GIB), peak(M.HOST_RSS_PEAK_GIB)
    lines = [
        f"{label:<44} {v['aggregate_env_steps_per_s']:>12,.0f}  num_gpus {v['num_gpus']:g}, "
        f"num_cpus {v['num_cpus']} each; per trial "
        + ", ".join(f"{r:,.0f}" for r in v["trial_env_steps_per_s"])
        + f"; {v['sweep_wall_s']:.0f} s",
        f"{'':<44} {'':>12}  GPU memory per trial: peak reserved {_gib(reserved)} GiB "
        f"(estimate {est['reserved_gib']:.2f}), allocated {_gib(allocated)} GiB (estimate "
        f"{est['allocated_gib']:.2f}), limit {_gib(limit)} GiB; process with its context: "
        f"estimate {est['total_gib']:.2f} GiB",
        f"{'':<44} {'':>12}  host memory per trial: peak resident {_gib(host)} GiB (the largest "
        "trial's process, its envs in it)",
    ]
    if v["trial_eval_steps_per_s"]:
        lines.append(
            f"{'':<44} {'':>12}  evaluation (eval_episodes {s.eval_episodes}, counted to the "
            f"time limit): {v['aggregate_eval_steps_per_s']:,.0f} env steps/s; per trial "
            + ", ".join(f"{r:,.0f}" for r in v["trial_eval_steps_per_s"])
        )
    lines += [f"{'':<44} {'':>12}  FAILED {f}" for f in v["failed"]]
    return lines


# --- the run -------------------------------------------------------------------------------------
class Record:
    """The JSON record and the text lines so far, rewritten after every stage."""

    def __init__(self, s: Setup, quick: bool, header: str) -> None:
        self.out = Path(os.environ.get("OUT") or HERE.parent / "results" / "benchmarks")
        self.out.mkdir(parents=True, exist_ok=True)
        self.stem = "gpu" if s.device == "cuda" and not quick else "gpu_quick"
        self.lines: list[str] = []
        self.data: dict[str, Any] = {
            "setup": asdict(s),
            "device": s.device,
            "packed": {},
            "packed_eval": {},
        }
        self.failed: list[str] = []

    def say(self, *lines: str) -> None:
        for line in lines:
            print(line, flush=True)
        self.lines += lines
        self.save()

    def save(self) -> None:
        (self.out / f"{self.stem}.json").write_text(json.dumps(self.data, indent=1) + "\n")
        (self.out / f"{self.stem}.txt").write_text("\n".join(self.lines) + "\n")

    def stage(self, name: str, run: Callable[[], Any]) -> Any:
        """Run one stage; a failure is recorded and printed, and the run goes on."""
        t0 = time.perf_counter()
        try:
            return run()
        except Exception as e:  # noqa: BLE001 (the next stages' figures are still wanted)
            self.failed.append(name)
            self.data.setdefault("errors", {})[name] = str(e)
            self.say(f"{name} FAILED after {time.perf_counter() - t0:.0f} s: {e}")
            return None


def _child_setup(text: str) -> tuple[Setup, dict[str, Any]]:
    """A child process's Setup (and (e)'s overrides) from the JSON its parent passed."""
    setup = json.loads(text)
    overrides = setup.pop("overrides", {})
    tuples = {k: tuple(setup[k]) for k in ("packed", "variants")}
    return Setup(**{**setup, **tuples}), overrides


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny batches, K = 1, 2 (smoke run)")
    p.add_argument("--iterations", type=int, help="timed iterations per run (default 2)")
    p.add_argument("--packed", help="comma-separated K values of (d), in order (default 8,4,2)")
    p.add_argument("--runs", help="which of (a)-(e) to run, e.g. ce (default abcde)")
    p.add_argument(
        "--variants",
        help='(e)\'s TrialConfig overrides, a JSON list, e.g. \'[{}, {"precision": "tf32"}]\'',
    )
    p.add_argument("--model-bound", metavar="SETUP", help=argparse.SUPPRESS)  # (a)'s process
    p.add_argument("--breakdown", metavar="SETUP", help=argparse.SUPPRESS)  # (e)'s process
    args = p.parse_args(argv)
    if args.model_bound:
        model_bound_main(_child_setup(args.model_bound)[0])
        return {}
    if args.breakdown:
        breakdown_main(*_child_setup(args.breakdown))
        return {}
    over: dict[str, Any] = dict(QUICK) if args.quick else {}
    if args.iterations:
        over["iterations"] = args.iterations
    if args.packed:
        over["packed"] = tuple(int(k) for k in args.packed.split(",") if int(k) != 1)
    if args.runs:
        over["runs"] = args.runs
    if args.variants:
        over["variants"] = tuple(json.loads(args.variants))
    s = Setup(**over)
    name = torch.cuda.get_device_name(0) if s.device == "cuda" else "no GPU (CPU path)"
    header = (
        f"{s.game} easy, IMPALA-CNN [16, 32, 32], {s.envs} envs x {s.rollout} steps, "
        f"minibatch {s.minibatch}, {s.epochs} epochs; device {s.device} ({name}), "
        f"{s.cpus} CPUs, torch {torch.__version__}; {s.iterations} timed iteration(s) per run"
    )
    rec = Record(s, args.quick, header)
    rec.data["device_name"] = name
    rec.say(header, "", f"{'run':<44} {'env-steps/s':>12}  notes")

    model = rec.stage("(a)", lambda: model_stage(s)) if "a" in s.runs else None
    if model is not None:
        rec.data["model"] = {d: model[d] for d in model_precisions(s)}
        rec.data["cuda_context_gib"] = model["cuda_context_gib"]
        rec.say(*model_lines(s, model))
    # (c) runs the default precision: the plain loop runs it too, and fp32 beside it.
    trial_precision = trial_config(s).model_config().precision
    plain: dict[str, dict[str, Any]] = {}
    for precision in dict.fromkeys(("fp32", trial_precision)) if "b" in s.runs else ():
        run = rec.stage(f"(b) {precision}", lambda p=precision: plain_loop(s, p))
        if run is not None:
            plain[precision] = run
            rec.data.setdefault("plain", {})[precision] = run
            label = f"(b) plain PPO loop (plain_ppo.py), {precision}"
            rec.say(f"{label:<44} {run['env_steps_per_s']:>12,.0f}")
    if s.device == "cuda" and "d" in s.runs:
        for k in sorted({*s.packed, 16}, reverse=True):
            rec.data.setdefault("packing_check", {})[str(k)] = check = packing_check(s, k)
            rec.say(f"validate, K={k} on this GPU: {check}")
    packed: dict[int | str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="rlsweep-gpu-bench-") as storage:

        def trials(k: int, overrides: dict[str, Any] | None = None) -> dict[str, Any] | None:
            name = f"K={k}" if not overrides else f"K={k}, {variant_name(overrides)}"
            return rec.stage(name, lambda: packed_trials(s, k, storage, overrides))

        def record(k: int, v: dict[str, Any]) -> None:
            packed[k] = v
            rec.data["packed"][str(k)] = v["aggregate_env_steps_per_s"]
            if v["trial_eval_steps_per_s"]:
                rec.data["packed_eval"][str(k)] = v["aggregate_eval_steps_per_s"]
            rec.data.setdefault("trials", {})[str(k)] = {
                **v,
                "estimate": estimate(trial_config(s, k)),
            }
            rec.say(*packed_lines(s, k, v))

        if "c" in s.runs and (v := trials(1)):
            record(1, v)
            rec.data["trial_env_steps_per_s"] = v["aggregate_env_steps_per_s"]
        if "c" in s.runs and s.overlap and (over := trials(1, OVERLAP)):
            packed["overlap"] = over
            rec.data["overlap_env_steps_per_s"] = over["aggregate_env_steps_per_s"]
            label = "(c) one trial, overlap: true"
            rec.say(f"{label:<44} {over['aggregate_env_steps_per_s']:>12,.0f}")
        for overrides in s.variants if "e" in s.runs else ():
            name = variant_name(overrides)
            parts = rec.stage(f"(e) {name}", lambda o=overrides: breakdown_stage(s, o))
            if parts is not None:
                rec.data.setdefault("breakdown", {})[name] = parts
                rec.say(*breakdown_lines(s, overrides, parts))
        for k in s.packed if "d" in s.runs else ():
            if v := trials(k):
                record(k, v)

    ratios = []
    one = packed.get(1, {}).get("aggregate_env_steps_per_s")
    if one and trial_precision in plain:
        peer = plain[trial_precision]["env_steps_per_s"]
        ratios.append(f"ratio (c)/(b), both {trial_precision}: {one / peer:.2f}")
    if one and "overlap" in packed:
        over = packed.pop("overlap")["aggregate_env_steps_per_s"]
        ratios.append(f"ratio (c) overlap / (c): {over / one:.2f}")
    for k, v in packed.items():
        if k != 1 and one:
            ratios.append(f"ratio (d)/(c), K={k}: {v['aggregate_env_steps_per_s'] / one:.2f}")
    rec.say("", *ratios)
    if rec.failed:
        rec.say(f"failed stages: {', '.join(rec.failed)}")
    print(f"\nwritten: {rec.out / rec.stem}.json, .txt", flush=True)
    if rec.failed:
        raise SystemExit(1)
    return rec.data


if __name__ == "__main__":
    main()
