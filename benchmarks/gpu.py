"""GPU throughput in one run: the model's bound, a plain PPO loop, one rlsweep trial, K packed.

    .venv/bin/python benchmarks/gpu.py [--quick] [--iterations N] [--packed 1,2,4,8]

Same network and batch everywhere: coinrun easy, IMPALA-CNN [16, 32, 32], 64 envs x 256 steps
(the trial's default: Cobbe et al. 2019), minibatch 2048, 3 epochs, on this machine's CPUs and
its first GPU (the CPU when it has none: the same code path, for a smoke run).

(a) model bound: the IMPALA-CNN alone, inputs already on the device: one inference forward over
    the envs (a rollout step) and one training step (forward, backward, Adam) over a minibatch,
    bf16 autocast and fp32; bound = env steps/s if PPO did nothing else (1 inference per env
    step, `epochs` training passes per sample).
(b) plain PPO: benchmarks/plain_ppo.py `--bench` on the device, a process of its own (the
    CleanRL-style loop, envpool stepping all envs on all cores).
(c) one rlsweep trial through Tune, as a user runs it (`run_sweep`), holding the whole GPU and
    every CPU; steady env steps/s from its progress (after the first iteration, evaluation time
    excluded).
(d) K rlsweep trials packed on the GPU (num_gpus 1/K, CPUs / K each): aggregate env steps/s
    (the sum of their steady rates; they run concurrently).

Ratios (c)/(b) and (d)/(c) are printed. The table and a JSON record go to $OUT if set, else
results/benchmarks/ (`gpu.json`, read by `rlsweep plan`; a --quick or CPU run writes
`gpu_quick.json`, which plan never reads).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Setup:
    game: str = "coinrun"
    envs: int = 64
    rollout: int = 256
    minibatch: int = 2048
    epochs: int = 3
    iterations: int = 4
    """Timed iterations per run (after one warm-up)."""
    packed: tuple[int, ...] = (1, 2, 4, 8)
    eval_episodes: int = 32
    """The trial's end-of-run evaluation (its time is excluded from the rate)."""
    cpus: int = os.cpu_count() or 1
    device: str = "cuda" if torch.cuda.is_available() else "cpu"

    @property
    def batch(self) -> int:
        return self.envs * self.rollout


QUICK = dict(
    envs=8, rollout=16, minibatch=64, epochs=1, iterations=1, packed=(1, 2), eval_episodes=2
)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def model_bound(s: Setup, bf16: bool, repeats: int) -> dict[str, float]:
    """(a): ms per inference forward over `envs` frames and per training step over a
    minibatch, the env-steps/s bound they imply, and the training step's peak GPU memory."""
    from rlsweep.models import ImpalaActorCritic, ModelConfig

    net = ImpalaActorCritic((3, 64, 64), 15, ModelConfig(bf16=bf16)).to(s.device)
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
        fn()  # warm-up (cuDNN autotuning, allocator)
        _sync(s.device)
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        _sync(s.device)
        return (time.perf_counter() - t0) / repeats

    if s.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    infer_s, train_s = timed(infer), timed(train)
    peak = torch.cuda.max_memory_allocated() / 2**30 if s.device == "cuda" else float("nan")
    per_step = infer_s / s.envs + s.epochs * train_s / s.minibatch
    return {
        "infer_ms": 1e3 * infer_s,
        "train_ms": 1e3 * train_s,
        "env_steps_per_s": 1 / per_step,
        "train_peak_gib": peak,
    }


def plain_loop(s: Setup) -> dict[str, Any]:
    """(b): plain_ppo.py --bench in a process of its own; TF32 off as in an rlsweep trial
    (torch allows it for cuDNN convolutions by default)."""
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
    ]
    code = (
        "import runpy, sys, torch\n"
        "torch.backends.cuda.matmul.fp32_precision = 'ieee'\n"
        "torch.backends.cudnn.conv.fp32_precision = 'ieee'\n"
        f"sys.argv = ['plain_ppo.py', *{argv!r}]\n"
        f"runpy.run_path({str(HERE / 'plain_ppo.py')!r}, run_name='__main__')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=HERE
    )
    if out.returncode != 0:
        raise RuntimeError(f"plain_ppo.py failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def packed_trials(s: Setup, k: int, storage: str) -> dict[str, Any]:
    """(c) for k = 1, (d) otherwise: k trials through Tune sharing the GPU (and the CPUs)."""
    from rlsweep.results import load_curves
    from rlsweep.spec import SweepSpec
    from rlsweep.sweep import run_sweep

    gpu = s.device == "cuda"
    params = {
        "num_envs_per_env_runner": s.envs,
        "rollout_length": s.rollout,
        "minibatch_size": s.minibatch,
        "num_epochs": s.epochs,
        "num_cpus": max(1, s.cpus // k),
        "num_gpus": round(1 / k, 4) if gpu else 0,
        "eval_interval": 10**6,  # evaluate once, at the end (excluded from the rate)
        "eval_episodes": s.eval_episodes,
    }
    spec = SweepSpec.from_dict(
        {
            "name": f"gpu-bench-k{k}",
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
    rates = []
    for _, trial in curves.groupby("trial_id"):
        trial = trial.sort_values("iteration")
        busy = trial["time/wall_s"] - trial["time/eval_s"].fillna(0)
        if len(trial) < 2:
            raise RuntimeError(f"trial {trial['trial_id'].iloc[0]}: fewer than 2 iterations")
        steps = trial["env_steps"].iloc[-1] - trial["env_steps"].iloc[0]
        rates.append(steps / (busy.iloc[-1] - busy.iloc[0]))
    return {
        "k": k,
        "num_gpus": params["num_gpus"],
        "num_cpus": params["num_cpus"],
        "trial_env_steps_per_s": rates,
        "aggregate_env_steps_per_s": sum(rates),
        "sweep_wall_s": wall,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny batches, K = 1, 2 (smoke run)")
    p.add_argument("--iterations", type=int, help="timed iterations per run")
    p.add_argument("--packed", help="comma-separated K values (default 1,2,4,8)")
    args = p.parse_args(argv)
    over: dict[str, Any] = dict(QUICK) if args.quick else {}
    if args.iterations:
        over["iterations"] = args.iterations
    if args.packed:
        over["packed"] = tuple(int(k) for k in args.packed.split(","))
    s = Setup(**over)
    name = torch.cuda.get_device_name(0) if s.device == "cuda" else "no GPU (CPU path)"
    header = (
        f"{s.game} easy, IMPALA-CNN [16, 32, 32], {s.envs} envs x {s.rollout} steps, "
        f"minibatch {s.minibatch}, {s.epochs} epochs; device {s.device} ({name}), "
        f"{s.cpus} CPUs, torch {torch.__version__}; {s.iterations} timed iteration(s) per run"
    )
    print(header, flush=True)
    torch.backends.cuda.matmul.fp32_precision = "ieee"  # as a trial with tf32: false
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    repeats = 3 if args.quick else 20
    result: dict[str, Any] = {"setup": asdict(s), "device": s.device, "device_name": name}
    result["model"] = {
        dtype: model_bound(s, dtype == "bf16", repeats) for dtype in ("fp32", "bf16")
    }
    print("(a) done", flush=True)
    result["plain"] = plain_loop(s)
    print("(b) done", flush=True)
    with tempfile.TemporaryDirectory(prefix="rlsweep-gpu-bench-") as storage:
        packed = {}
        for k in sorted(set(s.packed) | {1}):
            packed[k] = packed_trials(s, k, storage)
            print(f"({'c' if k == 1 else 'd'}) K={k} done", flush=True)
    result["packed"] = {str(k): v["aggregate_env_steps_per_s"] for k, v in packed.items()}
    result["trials"] = {str(k): v for k, v in packed.items()}
    one = packed[1]["aggregate_env_steps_per_s"]
    plain = result["plain"]["env_steps_per_s"]
    result["trial_env_steps_per_s"] = one

    from rlsweep.config import TrialConfig
    from rlsweep.placement import gpu_memory_gib

    estimate = gpu_memory_gib(
        TrialConfig(
            num_envs_per_env_runner=s.envs, rollout_length=s.rollout, minibatch_size=s.minibatch
        )
    )
    lines = [header, "", f"{'run':<44} {'env-steps/s':>12}  notes"]
    for dtype, m in result["model"].items():
        lines.append(
            f"{'(a) model bound, ' + dtype:<44} {m['env_steps_per_s']:>12,.0f}  "
            f"inference {m['infer_ms']:.2f} ms / {s.envs} frames, train step "
            f"{m['train_ms']:.1f} ms / {s.minibatch}, peak {m['train_peak_gib']:.2f} GiB"
        )
    lines.append(f"{'(b) plain PPO loop (plain_ppo.py)':<44} {plain:>12,.0f}")
    for k, v in packed.items():
        label = "(c) one rlsweep trial" if k == 1 else f"(d) {k} packed trials (aggregate)"
        lines.append(
            f"{label:<44} {v['aggregate_env_steps_per_s']:>12,.0f}  num_gpus {v['num_gpus']:g}, "
            f"num_cpus {v['num_cpus']} each; per trial "
            + ", ".join(f"{r:,.0f}" for r in v["trial_env_steps_per_s"])
        )
    lines.append("")
    lines.append(f"ratio (c)/(b): {one / plain:.2f}")
    for k, v in packed.items():
        if k != 1:
            lines.append(f"ratio (d)/(c), K={k}: {v['aggregate_env_steps_per_s'] / one:.2f}")
    lines.append(f"placement's GPU memory estimate per trial: {estimate:.1f} GiB")
    table = "\n".join(lines)
    print("\n" + table)
    out = Path(os.environ.get("OUT") or HERE.parent / "results" / "benchmarks")
    out.mkdir(parents=True, exist_ok=True)
    stem = "gpu" if s.device == "cuda" and not args.quick else "gpu_quick"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / f"{stem}.txt").write_text(table + "\n")
    print(f"\nwritten: {out / stem}.json, .txt")
    return result


if __name__ == "__main__":
    main()
