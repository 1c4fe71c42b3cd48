"""The torch ops a PPO update runs per minibatch, by part of RLlib's update step.

On a GPU every op here is at least one kernel launch from Python, so their count is what a
learner's step costs the CPU before the GPU has work: at a few microseconds each, hundreds per
minibatch are milliseconds per minibatch, 24 minibatches per iteration. Counted with
torch.profiler: top-level ops (an op inside another counts with it), attributed to the part of
TorchLearner's update (Ray 2.60) that ran them: the module's `forward_train`, `compute_losses`,
`compute_gradients` (the backward pass), `postprocess_gradients` (clipping),
`apply_gradients` (the optimizer's step), and the rest (the batch, GAE, minibatching,
metrics). The counts depend on the network's layers, not its widths or the rows, so the
default runs the narrow test network (`rlsweep.testing.NARROW_PPO`) on the CPU in seconds;
torch's Adam steps each parameter on its own there (on a GPU it runs multi-tensor kernels).
The learner runs on the GPU where there is one.

    .venv/bin/python benchmarks/probes/learner_ops.py [--default-network]

Prints one line per part (ops per minibatch, the most frequent ones); the JSON record goes to
$OUT or results/benchmarks/learner_ops.json.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

PARTS = ("compute_losses", "compute_gradients", "postprocess_gradients", "apply_gradients")
"""The learner's methods timed, besides the module's forward_train."""
REST = "the rest (batch, GAE, minibatches, metrics)"


def _labelled(obj: Any, name: str) -> None:
    """obj.name, run inside a profiler range named after it."""
    method = getattr(obj, name)

    def labelled(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(f"part: {name}"):
            return method(*args, **kwargs)

    setattr(obj, name, labelled)


def _part(event: Any) -> str | None:
    """The part a top-level op ran in; None for an op inside another op."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return None
        if parent.name.startswith("part: "):
            return parent.name.removeprefix("part: ")
        parent = parent.cpu_parent
    return REST


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--default-network",
        action="store_true",
        help="the default trial's network and batch (slow on a CPU; the same counts)",
    )
    args = p.parse_args(argv)

    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

    from rlsweep._ray_compat import quiet_trial_logs
    from rlsweep.spec.config import TrialConfig
    from rlsweep.testing import NARROW_PPO
    from rlsweep.trial import algos

    quiet_trial_logs()  # RLlib's own DeprecationWarning, as in a trial
    gpus = 1 if torch.cuda.is_available() else 0
    cfg = (
        TrialConfig(num_gpus=gpus)
        if args.default_network
        else TrialConfig(**NARROW_PPO, num_gpus=gpus)
    )
    torch.manual_seed(0)
    config = algos.ppo_config(cfg)
    runner = SingleAgentEnvRunner(config=config)
    try:
        episodes = runner.sample(force_reset=True)
        learner = config.build_learner(env=runner.env)
    finally:
        runner.stop()
    _labelled(learner.module, "forward_train")
    for name in PARTS:
        _labelled(learner, name)

    def update() -> None:
        learner.update(
            episodes=copy.deepcopy(episodes),
            timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: cfg.effective_train_batch_size},
            num_epochs=cfg.num_epochs,
            minibatch_size=cfg.minibatch_size,
            shuffle_batch_per_epoch=True,
        )

    update()  # warm-up: the optimizer's state, lazy initializations
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        update()
    events = prof.events()
    minibatches = sum(1 for e in events if e.name == "part: forward_train")
    ops: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for e in events:
        if e.name.startswith("aten::") and (part := _part(e)) is not None:
            ops[part][e.name] += 1
    per_minibatch = {k: sum(c.values()) / minibatches for k, c in ops.items()}
    print(
        f"PPO update, {minibatches} minibatches, network widths {list(cfg.widths)}, "
        f"torch {torch.__version__}, {learner.device}: top-level torch ops per minibatch"
    )
    for part in ("forward_train", *PARTS, REST):
        top = ", ".join(
            f"{n.removeprefix('aten::')} {c / minibatches:.0f}" for n, c in ops[part].most_common(4)
        )
        print(f"{part:<45} {per_minibatch.get(part, 0.0):7.1f}   ({top})")
    total = sum(per_minibatch.values())
    print(f"{'all':<45} {total:7.1f}")
    record = {
        "device": str(learner.device),
        "minibatches": minibatches,
        "ops_per_minibatch": per_minibatch,
        "total": total,
    }
    out = Path(os.environ.get("OUT") or Path(__file__).resolve().parents[2] / "results/benchmarks")
    out.mkdir(parents=True, exist_ok=True)
    (out / "learner_ops.json").write_text(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    main()
