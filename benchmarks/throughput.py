"""Env-steps/s of an rlsweep trial vs a minimal plain-PyTorch PPO, same network, envs and batch.

    .venv/bin/python benchmarks/throughput.py [--iterations N] [--quick]

Both run coinrun easy with the IMPALA-CNN [16, 32, 32], 64 envs x 64 steps per iteration,
minibatch 2048, 3 epochs, torch on 2 threads. Each lives in its own Ray actor process started
with `rlsweep.sweep.runtime_env()`, i.e. with Ray's jemalloc preloaded, as Tune trials run. Their
iterations alternate (never overlap), so that load from other processes hits both alike.
Throughput = env steps sampled in the timed iterations / their summed wall time, after one
warm-up iteration each; env steps are real transitions (RLlib's count; reset steps excluded).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from typing import Any

import ray

from rlsweep.sweep import runtime_env

NUM_CPUS = 2
DEFAULT_ITERATIONS = 6  # the whole script: ~4.5 min on 2 cores


@dataclass(frozen=True)
class Iteration:
    env_steps: float
    wall_s: float
    sample_s: float
    learn_s: float


@dataclass(frozen=True)
class Summary:
    iterations: list[Iteration]
    jemalloc: bool

    @property
    def wall_s(self) -> float:
        return sum(i.wall_s for i in self.iterations)

    @property
    def steps_per_s(self) -> float:
        return sum(i.env_steps for i in self.iterations) / self.wall_s

    def line(self, name: str) -> str:
        wall, n = self.wall_s, len(self.iterations)
        sample = 100 * sum(i.sample_s for i in self.iterations) / wall
        learn = 100 * sum(i.learn_s for i in self.iterations) / wall
        return (
            f"{name:<18} {self.steps_per_s:.1f} env-steps/s (jemalloc: {self.jemalloc}; "
            f"{wall / n:.1f} s/iteration: sample {sample:.0f}%, learn {learn:.0f}%, "
            f"other {100 - sample - learn:.0f}%)"
        )


def _timed(fn: Any, bucket: list[float]) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            bucket[0] += time.perf_counter() - t0

    return wrapper


@ray.remote(num_cpus=NUM_CPUS)
class RlsweepTrial:
    """RLlib PPO exactly as an rlsweep trial builds it, one `algo.train()` per call."""

    def __init__(self) -> None:
        import torch

        from rlsweep.algos import build_algorithm
        from rlsweep.config import TrialConfig

        cfg = TrialConfig(
            game="coinrun",
            distribution_mode="easy",
            widths=(16, 32, 32),
            rollout_length=64,
            num_envs_per_env_runner=64,
            num_env_runners=0,
            minibatch_size=2048,
            num_epochs=3,
            num_cpus=NUM_CPUS,
        )
        assert cfg.effective_train_batch_size == 4096
        # As rlsweep.trainable.train_trial does before building the algorithm.
        torch.set_num_threads(cfg.num_cpus)
        torch.manual_seed(cfg.seed)
        self.algo = build_algorithm(cfg)
        # RLlib's own timers (result["timers"]) are EMAs seeded by the slow first iteration, so
        # time sampling and the learner update directly around the two calls PPO makes.
        self.sample_s, self.learn_s = [0.0], [0.0]
        runner = self.algo.env_runner_group.local_env_runner
        runner.sample = _timed(runner.sample, self.sample_s)
        self.algo.learner_group.update = _timed(self.algo.learner_group.update, self.learn_s)
        self.env_steps = 0.0

    def jemalloc(self) -> bool:
        from rlsweep.trainable import jemalloc_loaded

        return jemalloc_loaded()

    def iteration(self) -> Iteration:
        from rlsweep.algos import read_result

        self.sample_s[0] = self.learn_s[0] = 0.0
        t0 = time.perf_counter()
        result = self.algo.train()
        wall = time.perf_counter() - t0
        lifetime = read_result(result)["env_steps"]
        steps, self.env_steps = lifetime - self.env_steps, lifetime
        return Iteration(steps, wall, self.sample_s[0], self.learn_s[0])

    def stop(self) -> None:
        self.algo.stop()


@ray.remote(num_cpus=NUM_CPUS)
class PlainLoop:
    """benchmarks/plain_ppo.py, one PPO iteration per call."""

    def __init__(self) -> None:
        from plain_ppo import PlainPPO, PPOArgs  # benchmarks/, on the driver's sys.path

        self.ppo = PlainPPO(PPOArgs(num_steps=64, num_threads=NUM_CPUS))  # the trial's batch

    def jemalloc(self) -> bool:
        from rlsweep.trainable import jemalloc_loaded

        return jemalloc_loaded()

    def iteration(self) -> Iteration:
        t0 = time.perf_counter()
        s = self.ppo.train_iteration()
        return Iteration(s.env_steps, time.perf_counter() - t0, s.sample_s, s.learn_s)

    def stop(self) -> None:
        self.ppo.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help=f"timed iterations of each, after 1 warm-up (default {DEFAULT_ITERATIONS})",
    )
    parser.add_argument("--quick", action="store_true", help="1 timed iteration each (smoke)")
    args = parser.parse_args(argv)
    iterations = args.iterations or (1 if args.quick else DEFAULT_ITERATIONS)

    print(
        "coinrun easy, IMPALA-CNN [16, 32, 32], 64 envs x 64 steps, minibatch 2048, 3 epochs, "
        f"{NUM_CPUS} CPUs; {iterations} timed iteration(s) each after 1 warm-up",
        flush=True,
    )
    # Other processes on the machine skew every figure; the interleaving below keeps the ratio
    # fair, but say how busy the machine was before we started.
    print(f"load average before start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    # Both actors stay alive so their iterations can alternate (load drifts hit both alike); only
    # one computes at a time, so Ray is told of 2 x NUM_CPUS logical CPUs just to place both.
    # log_to_driver=False: RLlib's start-up warnings would bury the few lines printed here
    # (a failing actor still raises here with its traceback).
    ray.init(
        num_cpus=2 * NUM_CPUS,
        runtime_env=runtime_env(),
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    try:
        runs = {"rlsweep trial:": RlsweepTrial.remote(), "plain PyTorch PPO:": PlainLoop.remote()}
        timed: dict[str, list[Iteration]] = {name: [] for name in runs}
        for actor in runs.values():
            ray.get(actor.iteration.remote())  # warm-up
        for i in range(iterations):
            order = list(runs) if i % 2 == 0 else list(reversed(runs))
            for name in order:
                timed[name].append(ray.get(runs[name].iteration.remote()))
        summaries = {
            name: Summary(timed[name], ray.get(actor.jemalloc.remote()))
            for name, actor in runs.items()
        }
        ray.get([actor.stop.remote() for actor in runs.values()])
        for name, summary in summaries.items():
            print(summary.line(name))
        ours, plain = summaries.values()
        print(f"ratio rlsweep/plain: {ours.steps_per_s / plain.steps_per_s:.2f}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
