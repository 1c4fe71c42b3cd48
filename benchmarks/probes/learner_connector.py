"""What a PPO update spends turning episodes into its training batch (issue 25, item 3).

Builds a default PPO trial's Algorithm in this process without Tune (as `benchmarks/gpu.py`'s
breakdown does), samples one batch of episodes from its local EnvRunner, then times
`RlsweepPPOLearner.make_batch` on copies of those episodes: the whole call and, as the call
runs them, each piece of its learner connector pipeline (each ConnectorV2: building the batch
from the episodes, the tensor conversion, ReferenceGAE) and the advantage standardization;
"other" is the rest (the MultiAgentBatch). Prints the median seconds per piece over
`--repeats` calls (after one warm-up), then a JSON line.

    .venv/bin/python benchmarks/probes/learner_connector.py [--repeats 5] [--episodes FILE]

`--episodes FILE` keeps the sampled episodes (pickled) and reuses them on later runs, so that
two versions of the code time the same batch; `--save-batch FILE` writes the batch
(`torch.save`, a dict of columns) for comparing the two versions' batches.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pickle
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

GAME = "coinrun"
TRIAL = dict(
    num_envs_per_env_runner=64,
    rollout_length=256,
    minibatch_size=2048,
    num_epochs=3,
    num_cpus=2,
    eval_interval=10**6,
)
"""The TrialConfig fields: 64 envs x 256 steps = 16,384 env steps per batch."""


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sample_episodes(algo: Any, path: Path | None) -> list[Any]:
    """One iteration's episodes from the local EnvRunner (or `path`'s, when it exists)."""
    if path is not None and path.exists():
        return pickle.loads(path.read_bytes())
    episodes = algo.env_runner_group.local_env_runner.sample()
    if path is not None:
        path.write_bytes(pickle.dumps(episodes))
    return episodes


class Timed:
    """A pipeline piece (or method) that adds its seconds to `spent[name]` on every call."""

    def __init__(self, name: str, fn: Callable[..., Any], spent: dict[str, float], device: Any):
        self.name, self.fn, self.spent, self.device = name, fn, spent, device

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _sync(self.device)
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            _sync(self.device)
            self.spent[self.name] = self.spent.get(self.name, 0.0) + time.perf_counter() - t0


def time_make_batch(learner: Any, episodes: list[Any], spent: dict[str, float]) -> Any:
    """One `learner.make_batch` on a copy of `episodes` (RLlib's AddOneTsToEpisodesAndTruncate
    lengthens them), its pieces timed as `instrument` set them up; returns the batch."""
    from ray.rllib.core.learner.training_data import TrainingData

    data = TrainingData(episodes=copy.deepcopy(episodes))
    return Timed(TOTAL, learner.make_batch, spent, learner.device)(data)


def instrument(learner: Any, spent: dict[str, float]) -> None:
    """Times every piece of the learner's connector pipeline and its standardization, in
    place: the pipeline calls the pieces as it always does."""
    pipeline = learner.learner_connector
    pipeline.connectors = [
        Timed(type(c).__name__, c, spent, learner.device) for c in pipeline.connectors
    ]
    learner.standardize_advantages = Timed(
        "standardize advantages", learner.standardize_advantages, spent, learner.device
    )


TOTAL = "make_batch (total)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--episodes", type=Path, help="pickle of the sampled episodes (reused)")
    parser.add_argument("--save-batch", type=Path, help="torch.save the batch's columns here")
    args = parser.parse_args()

    import ray

    from rlsweep.spec.config import TrialConfig
    from rlsweep.trial import algos

    cfg = TrialConfig(game=GAME, **TRIAL)
    ray.init(
        num_cpus=cfg.num_cpus,
        num_gpus=torch.cuda.device_count(),
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    algo = algos.build_algorithm(cfg)
    episodes = sample_episodes(algo, args.episodes)
    learners: list[Any] = []
    algo.learner_group.foreach_learner(learners.append)  # the local one (num_learners=0)
    learner = learners[0]
    runs: list[dict[str, float]] = []
    batch = None
    for _ in range(args.repeats + 1):  # the first is a warm-up
        runs.append(spent := {})
        if len(runs) == 1:
            instrument(learner, spent)
        else:  # the wrappers add to the newest run's dict
            for piece in (*learner.learner_connector.connectors, learner.standardize_advantages):
                piece.spent = spent
        batch = time_make_batch(learner, episodes, spent)
    algo.stop()
    median = {k: statistics.median(r[k] for r in runs[1:]) for k in runs[0]}
    median["other (MultiAgentBatch, ...)"] = median[TOTAL] - sum(
        v for k, v in median.items() if k != TOTAL
    )
    steps = sum(len(e) for e in episodes)
    print(
        f"{GAME}, {len(episodes)} episode chunks, {steps} env steps; device {learner.device}, "
        f"{torch.get_num_threads()} torch threads, {os.cpu_count()} CPUs; "
        f"median of {args.repeats} (after a warm-up)"
    )
    for k, v in median.items():
        print(f"  {k:<40} {v:8.4f} s")
    print(json.dumps({"env_steps": steps, "median_s": median}))
    if args.save_batch is not None and batch is not None:
        columns = {
            f"{module_id}/{k}": torch.as_tensor(v).cpu()
            for module_id, b in batch.policy_batches.items()
            for k, v in b.items()
        }
        torch.save(columns, args.save_batch)


if __name__ == "__main__":
    main()
