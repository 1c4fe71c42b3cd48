"""Learning parity: an rlsweep trial (`extends: cobbe2019`) against the reference PPO loop.

    .venv/bin/python benchmarks/learning.py                       # 2-core CPU, about an hour
    python benchmarks/learning.py --device cuda --budget 25e6     # the published scale
    .venv/bin/python benchmarks/learning.py --precision bf16      # rlsweep bf16 against fp32
    .venv/bin/python benchmarks/learning.py --overlap             # overlap: true against false
    python benchmarks/learning.py --baseline lars12llt --game bigfish --seeds 0 --budget 4e6 \
        --eval-every 63 --eval-episodes 32 --device cuda --plain-only   # beside the pooling study

With `--baseline NAME` both arms run baselines/NAME.yaml's setting (the reference loop through
`PPOArgs.of_trial`: lars12llt's gap framestack, wide pooled IMPALA-CNN, KL penalty and lr
schedule too); `--plain-only` runs the reference loop alone, to set beside a study's trials of
that baseline (issue 38's check of a result that contradicts LOGS.md). Where a machine is held
for less than the run takes (a GPU sitting's 10-minute call), `--state DIR --time-limit SECONDS`
(counted from the process's start) keeps each seed's run in DIR, saved every minute and before
it stops in time, exit code 3 as `rlsweep`'s; the same command with `--resume` goes on from
there (`run_plain`), and refuses to start over where DIR holds no state. On a device call, whose
$OUT starts empty and is all that comes back, DIR lies in $OUT; what came back is carried in
(kept here as carried-plain/) and copied there first:

    python benchmarks/learning.py --baseline lars12llt --game bigfish --seeds 0 --budget 4e6 \
        --eval-every 63 --eval-episodes 32 --device cuda --plain-only \
        --state $OUT/plain --out $OUT --time-limit 540                   # the first call
    mkdir -p $OUT && cp -r carried-plain $OUT/plain && python benchmarks/learning.py ... \
        --state $OUT/plain --out $OUT --time-limit 540 --resume          # then, until exit 0

The same game, seeds and budget run (a) as rlsweep trials through `run_sweep` (RLlib, Tune, the
cobbe2019 baseline: train-procgen's PPO) and (b) by `benchmarks/plain_ppo.py` (CleanRL's loop,
outside Ray). Both are scored by the same evaluator (one episode per env, sampled actions) on
the training levels and on unseen levels every `--eval-every` iterations and at the end.
Prints per-seed final train/test scores of both, whether the two algorithms' 95% bootstrap CIs
of the mean final test score overlap, and writes both learning curves to a PNG.

With `--precision P`, the two arms are rlsweep trials in fp32 and in P instead (the same seeds,
budget and evaluator): whether P learns as fp32 does, which is how a GPU trial's default
precision was chosen (`rlsweep.spec.subconfigs.GPU_PRECISION`; bf16 autocast runs on the CPU too).
With `--overlap`, they are rlsweep trials without and with `overlap: true` (`rlsweep.trial.overlap`:
one update of policy lag): what the lag costs in learning.

The reference loop runs with jemalloc preloaded, as `benchmarks/throughput.py`'s peer does (the
script starts itself again with it): under glibc's malloc it ran at 216 env-steps/s against 396
with it on this 2-core CPU (`plain_ppo.py --bench --game starpilot --warmup 1 --iterations 2`),
and took twice the rlsweep trial's wall time for the same steps.

Default game: starpilot. It moves earliest of the 16 games: its reward is dense from the first
step (every enemy shot down), so PPO's return rises within the first ~100k env steps, where
coinrun's sparse level-completion reward barely moves before 1M. CleanRL's published easy-mode
returns at 25M steps (all levels): starpilot 30.99 +- 1.96, bigfish 16.46 +- 2.71, bossfight
8.85 +- 0.33.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
from plain_ppo import PlainPPO, PPOArgs  # benchmarks/, beside this script
from throughput import PEER_MALLOC_CONF, find_jemalloc

from rlsweep import metrics as M
from rlsweep.envs import procgen
from rlsweep.experiment.interrupt import EXIT_TIME_LIMIT, IterationClock
from rlsweep.plan.plan import eval_steps
from rlsweep.results import stats
from rlsweep.results.tables import too_few
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import load_baseline
from rlsweep.trial.evaluation import (
    env_steps_taken,
    evaluate,
    evaluation_envs,
    sampling_policy,
)

SAVE_EVERY_S = 60.0
"""With `--state`: the most wall time a run goes without saving (a kill from outside, the
machine taken back, loses no more)."""
BATCH = 64 * 256  # cobbe2019's iteration
DEFAULT_BUDGET = 4 * BATCH  # 65,536 env steps: 3 seeds x 2 algorithms in ~45 min on 2 cores


def run_rlsweep(
    game: str, seeds: list[int], budget: int, args, precision: str = "fp32", overlap: bool = False
) -> dict[int, list[dict]]:
    """rlsweep trials as a user runs them, in `precision`, with or without `overlap`; returns
    each seed's evaluated rows."""
    from rlsweep.results.results import load_curves
    from rlsweep.run.sweep import run_sweep
    from rlsweep.spec.spec import SweepSpec

    params = {
        "distribution_mode": "easy",
        "eval_interval": args.eval_every,
        "eval_episodes": args.eval_episodes,
        "num_cpus": args.threads,
        "precision": precision,
        "overlap": overlap,
    }
    if args.device == "cuda":
        params["num_gpus"] = 1
    spec = SweepSpec(
        name=f"learning-{args.baseline}-{game}-{precision}" + ("-overlap" if overlap else ""),
        extends=args.baseline,
        games=[game],
        seeds=seeds,
        budget=budget,
        params=params,
        storage_path=str(args.out),
    )
    shutil.rmtree(args.out / spec.name, ignore_errors=True)  # this benchmark's own dir: fresh
    run_sweep(spec, num_cpus=args.threads)
    curves = load_curves(args.out / spec.name)
    fresh = curves[curves[M.TEST_FRESH]]
    cols = [M.ENV_STEPS, M.TRAIN_RETURN, M.TEST_RETURN, M.WALL_S, M.EVAL_S]
    return {int(s): g[cols].to_dict("records") for s, g in fresh.groupby("seed")}


def plain_trial(args, game: str, seed: int) -> TrialConfig:
    """The baseline's setting as an rlsweep trial of it would have it (the reference loop reads
    it through `PPOArgs.of_trial`, and is evaluated on that trial's evaluation envs)."""
    return TrialConfig(
        **load_baseline(args.baseline),
        game=game,
        distribution_mode="easy",
        eval_episodes=args.eval_episodes,
        seed=seed,
    )


def run_plain(
    trial: TrialConfig,
    budget: int,
    args,
    deadline: float | None = None,
    state: Path | None = None,
) -> list[dict] | None:
    """The reference loop in `trial`'s setting, evaluated like the rlsweep trial (same evaluator
    and env streams) every `args.eval_every` iterations and at the end: its evaluations' rows.

    With `state` (a file), the run keeps what it learned and drew there (`PlainPPO.state_dict`,
    the rows, the evaluator's RNG): at its end; before an evaluation that may outlast `deadline`
    (`time.monotonic()`), or one not timed yet in this process; and where its next iteration
    and that save (priced as an rlsweep trial prices them, `IterationClock`) would not end
    before `deadline`, where it stops and returns None. Run again, it goes on from the state
    (its envs start again); a run that ended returns its rows at once."""
    run = {"baseline": args.baseline, "game": trial.game, "seed": trial.seed, "budget": budget}
    run |= {"eval_every": args.eval_every, "eval_episodes": trial.eval_episodes}
    found = state is not None and state.exists()
    if getattr(args, "resume", False) and not found:
        raise SystemExit(
            f"{state}: no state to resume (--resume); carry the last call's in, or leave "
            "--resume out to start a new run"
        )
    if state and not found:
        print(f"  plain seed {trial.seed}: no state at {state}: a new run", flush=True)
    # On the CPU: a state saved on a GPU reads here too (the loop moves it to its device).
    saved = torch.load(state, weights_only=False, map_location="cpu") if found else None
    if saved and saved["run"] != run:
        raise SystemExit(f"{state}: the state of another run ({saved['run']}), not of {run}")
    if saved and saved["done"]:
        return saved["rows"]
    ppo = PlainPPO(PPOArgs.of_trial(trial, num_threads=args.threads, device=args.device))
    evals = evaluation_envs(trial)  # the evaluation envs an rlsweep trial of it gets
    policy = sampling_policy(
        lambda obs: ppo.net(obs.to(args.device))[0].cpu(),
        seed=trial.seed,
        every_row=torch.device(args.device).type == "cuda",  # as a GPU trial's
    )
    rows, iteration = [], 0
    if saved:
        ppo.load_state_dict(saved["ppo"])
        policy.generator.set_state(saved["eval_generator"])
        rows, iteration = saved["rows"], saved["iteration"]
        print(f"  plain seed {trial.seed}: resumed at {ppo.env_steps:,} env steps", flush=True)
    clock = IterationClock(eval_steps(trial))
    last_save = time.monotonic()

    def save(done: bool) -> None:
        nonlocal last_save
        t0 = last_save = time.monotonic()
        out = {"run": run, "done": done, "iteration": iteration, "rows": rows}
        out |= {"ppo": ppo.state_dict(), "eval_generator": policy.generator.get_state()}
        torch.save(out, state.with_suffix(".tmp"))
        os.replace(state.with_suffix(".tmp"), state)  # a kill mid-write leaves the last one
        clock.saved(time.monotonic() - t0)

    try:
        while ppo.env_steps < budget:
            evaluates = (iteration + 1) % args.eval_every == 0 or (
                ppo.env_steps + ppo.args.batch_size >= budget
            )
            if state and deadline is not None:
                # An evaluation not timed yet: the iteration without it, at least.
                next_s = clock.next_s(evaluates) or clock.next_s(False)
                if next_s is not None and time.monotonic() + next_s > deadline:
                    save(done=False)
                    return None
                worst = clock.next_s(evaluates, worst=True)
                if evaluates and (worst is None or time.monotonic() + worst > deadline):
                    save(done=False)  # the evaluation goes ahead from a saved state
            if state and time.monotonic() - last_save > SAVE_EVERY_S:
                save(done=False)  # a kill from outside loses no more
            t0 = time.monotonic()
            ppo.train_iteration()
            clock.trained(time.monotonic() - t0)
            iteration += 1
            if iteration % args.eval_every == 0 or ppo.env_steps >= budget:
                t0 = time.monotonic()
                played = evaluate(policy, evals)
                row = {M.ENV_STEPS: ppo.env_steps}
                row |= {f"{split}/return": ev.mean_return for split, ev in played.items()}
                clock.evaluated(time.monotonic() - t0, env_steps_taken(played))
                rows.append(row)
                print(f"  plain seed {trial.seed}: {row}", flush=True)
        if state:
            save(done=True)
    finally:
        ppo.close()
        for env in evals.values():
            env.close()
    return rows


def _norm(game: str, x: float) -> float:
    return procgen.normalize(game, "easy", x)


def plot(game: str, curves: dict[str, dict[int, list[dict]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, split in zip(axes, ("train", "test"), strict=True):
        for (name, runs), color in zip(curves.items(), ("tab:blue", "tab:orange"), strict=False):
            n = min(len(r) for r in runs.values())
            steps = np.array([[r[i][M.ENV_STEPS] for r in runs.values()] for i in range(n)])
            vals = np.array([[r[i][f"{split}/return"] for r in runs.values()] for i in range(n)])
            mean, low, high = stats.pointwise_mean(vals, n_resamples=2000)
            x = steps.mean(axis=1)
            ax.plot(x, mean, color=color, label=name)
            if np.isfinite(low).all():
                ax.fill_between(x, low, high, color=color, alpha=0.2)
        ax.set_title(f"{game} easy: {split} levels")
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("return (mean over seeds, 95% CI)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="starpilot")
    parser.add_argument(
        "--baseline",
        default="cobbe2019",
        help="the setting both run (baselines/NAME.yaml; lars12llt: the pooling study's)",
    )
    parser.add_argument(
        "--plain-only",
        action="store_true",
        help="the reference loop alone (to set beside a study's trials of the same baseline)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--budget", type=float, default=DEFAULT_BUDGET, help="env steps per run (25e6 accepted)"
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=2, help="torch threads / trial CPUs")
    parser.add_argument("--eval-every", type=int, default=2, help="iterations between evals")
    parser.add_argument("--eval-episodes", type=int, default=64, help="episodes per split")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks"))
    parser.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help="with --plain-only and --state: stop in time, saving the state; run again to go on",
    )
    parser.add_argument(
        "--state", type=Path, help="with --plain-only: keep each seed's run here to resume it"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="with --state: go on from the state there, and refuse to start over without one",
    )
    parser.add_argument(
        "--precision",
        choices=("tf32", "bf16"),
        help="compare rlsweep in this precision with rlsweep in fp32 (no reference loop)",
    )
    parser.add_argument(
        "--overlap",
        action="store_true",
        help="compare rlsweep with overlap: true with rlsweep without it (no reference loop)",
    )
    args = parser.parse_args(argv)
    if sum(map(bool, (args.precision, args.overlap, args.plain_only))) > 1:
        parser.error("--precision, --overlap, --plain-only: one comparison at a time")
    if (args.time_limit or args.state) and not args.plain_only:
        parser.error("--time-limit and --state: with --plain-only (rlsweep's arm: rlsweep resume)")
    if args.time_limit and not args.state:
        parser.error("--time-limit needs --state, where a stopped run is kept")
    if args.resume and not args.state:
        parser.error("--resume needs --state, where the run to go on is kept")
    budget = int(args.budget)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    levels = plain_trial(args, args.game, args.seeds[0]).train_levels or "all"
    print(
        f"{args.game} easy ({levels} levels), {args.baseline} PPO, seeds {args.seeds}, "
        f"{budget:,} env steps each, device {args.device}, {args.threads} threads",
        flush=True,
    )
    t0 = time.monotonic()
    started = t0 - (time.time() - process_started())  # on the monotonic clock
    deadline = started + args.time_limit if args.time_limit else None
    first = (
        "rlsweep, fp32"
        if args.precision
        else "rlsweep, synchronous"
        if args.overlap
        else "rlsweep (RLlib)"
    )
    curves = {} if args.plain_only else {first: run_rlsweep(args.game, args.seeds, budget, args)}
    t1 = time.monotonic()
    if args.precision:
        other = f"rlsweep, {args.precision}"
        curves[other] = run_rlsweep(args.game, args.seeds, budget, args, args.precision)
    elif args.overlap:
        other = "rlsweep, overlap"
        curves[other] = run_rlsweep(args.game, args.seeds, budget, args, overlap=True)
    else:
        other = "reference (plain_ppo.py)"
        curves[other] = {}
        for seed in args.seeds:
            name = f"plain_{args.baseline}_{args.game}_seed{seed}_{budget}.pt"
            state = args.state.resolve() / name if args.state else None
            if state:
                state.parent.mkdir(parents=True, exist_ok=True)
            rows = run_plain(plain_trial(args, args.game, seed), budget, args, deadline, state)
            if rows is None:
                print(f"stopped by --time-limit: run the same command again to go on ({state})")
                sys.exit(EXIT_TIME_LIMIT)
            curves[other][seed] = rows
    t2 = time.monotonic()

    print(f"\nfinal scores at {budget:,} env steps (raw return; normalized in brackets)")
    print(f"{'algorithm':<26} {'seed':>4} {'env steps':>10} {'train':>15} {'test':>15}")
    finals = {}
    for name, runs in curves.items():
        finals[name] = []
        for seed, rows in sorted(runs.items()):
            last = rows[-1]
            tr, te = last["train/return"], last["test/return"]
            finals[name].append(te)
            print(
                f"{name:<26} {seed:>4} {last[M.ENV_STEPS]:>10,.0f} "
                f"{tr:>7.2f} [{_norm(args.game, tr):5.2f}] {te:>7.2f} [{_norm(args.game, te):5.2f}]"
            )
    cis = {name: stats.interval([np.array(v)], "mean") for name, v in finals.items()}
    for name, ci in cis.items():
        n = len(finals[name])
        span = f"95% CI [{ci.low:.2f}, {ci.high:.2f}]" if ci.has_ci else f"({too_few(n)})"
        print(f"{name:<26} mean test return {ci.value:.2f}, {span}")
    if not args.plain_only:
        (a, b) = cis.values()
        if a.has_ci and b.has_ci:
            print(f"95% CIs overlap: {not (a.high < b.low or b.high < a.low)}")
        rl = [rows[-1] for rows in curves[first].values()]
        share = sum(r[M.EVAL_S] for r in rl) / sum(r[M.WALL_S] for r in rl)
        print(f"rlsweep trials spent {100 * share:.1f}% of their wall time evaluating")
        print(f"wall time: rlsweep {t1 - t0:.0f} s, {other} {t2 - t1:.0f} s")
    else:
        print(f"wall time: {other} {t2 - t1:.0f} s")
    suffix = f"_{args.precision}" if args.precision else "_overlap" if args.overlap else ""
    suffix += "" if args.baseline == "cobbe2019" else f"_{args.baseline}"
    png = args.out / f"learning_{args.game}{suffix}.png"
    plot(args.game, curves, png)
    print(f"learning curves: {png}")


def process_started() -> float:
    """This process's start, as time.time() (Linux's /proc: its imports and its restart with
    jemalloc, which keeps the process, included; elsewhere now)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        lines = Path("/proc/stat").read_text().splitlines()
        boot = next(float(line.split()[1]) for line in lines if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def with_jemalloc() -> None:
    """Start this script again with jemalloc preloaded (the reference loop's allocator, as
    `throughput.py` gives its peer; rlsweep's trial processes preload their own) unless the
    process has an LD_PRELOAD already or no jemalloc is found."""
    if "LD_PRELOAD" in os.environ or not (path := find_jemalloc()):
        return
    env = {**os.environ, "LD_PRELOAD": path, "MALLOC_CONF": PEER_MALLOC_CONF}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


if __name__ == "__main__":
    with_jemalloc()
    torch.set_num_threads(2)
    main()
