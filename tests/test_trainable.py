"""rlsweep.trial.trainable: what a trial reports about its GPU memory, and how it stops when that
runs out; how it prices its iterations and insures an evaluation under a time limit; and that
no forward pass in a trial sees more rows than a minibatch (or the rollout's envs), measured
on a real trial (`rllib`: real RLlib on real Procgen, tiny batches, in this
process, Tune's session replaced by a recorder of its reports)."""

from __future__ import annotations

import json
import math
import traceback
from typing import Any

import pytest
import torch

from rlsweep import metrics as M
from rlsweep.spec.config import TrialConfig
from rlsweep.trial import trainable

# Leaper: a random policy ends its episodes in ~70 steps. 8 envs x 32 steps; a minibatch of
# 8 rows, smaller than the 8 bootstrap rows plus the episodes that end in a rollout, and than
# the 12 evaluation envs.
ROWS = dict(
    game="leaper",
    num_envs_per_env_runner=8,
    rollout_length=32,
    minibatch_size=8,
    num_epochs=1,
    widths=[8, 16, 16],
    dense=64,
    eval_episodes=12,
    total_env_steps=512,
)


def test_a_cpu_trial_reports_no_gpu_memory_keys():
    """Absent, not NaN: CPU sweeps' results and tables carry no GPU columns."""
    assert trainable.gpu_memory_metrics(TrialConfig(), None) == {}


def test_the_out_of_memory_report_says_why_and_ends_the_trial():
    cfg = TrialConfig(num_gpus=0.125, num_cpus=2, precision="fp32")
    last = {M.ENV_STEPS: 32768.0, M.TUNE_STEPS: 32768.0, M.TEST_FRESH: True, M.TRIAL_DONE: False}
    row = trainable.out_of_memory_report(cfg, None, last)
    assert row[M.ENV_STEPS] == 32768.0 and row[M.TRIAL_DONE] and not row[M.TEST_FRESH]
    assert row[M.TRIAL_ERROR].startswith("out of GPU memory on its share (num_gpus 0.125)")
    assert "estimated need ~9.5 GiB" in row[M.TRIAL_ERROR]
    assert trainable.out_of_memory_report(cfg, None, {})[M.ENV_STEPS] == 0.0  # before any


class TuneSession:
    """Stands in for Tune's session only: reports land in `reports`; the trial's RLlib, envs
    and evaluation are real."""

    from ray.tune import Checkpoint

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        self.checkpointed: list[bool] = []
        """Per report: whether it came with a checkpoint."""

    def report(self, metrics: dict[str, Any], checkpoint: Any = None) -> None:
        self.reports.append(dict(metrics))
        self.checkpointed.append(checkpoint is not None)

    def get_checkpoint(self) -> None:
        return None


@pytest.fixture
def session(monkeypatch) -> TuneSession:
    s = TuneSession()
    monkeypatch.setattr(trainable, "tune", s)
    return s


_ORIGINS = {
    "_forward_exploration": "rollout",
    "compute_values": "values for GAE",
    "_forward_train": "training",
    "forward_target": "APPO's old policy",
    "logits": "evaluation",
}


@pytest.mark.rllib
@pytest.mark.parametrize("algorithm", ["ppo", "appo"])
def test_no_forward_in_a_trial_sees_more_rows_than_a_minibatch(ray_local, session, algorithm):
    """Every pass through the trunk in a real trial (two iterations and the final evaluation)
    sees at most max(minibatch, the rollout's envs) rows: the minibatch sets the activations'
    memory, not the train batch, the bootstrap rows or the evaluation envs. APPO's learner
    (IMPALA's plus the old policy) takes the same paths through RLlib's own connectors."""
    from rlsweep.trial.models import ImpalaCNN

    # APPO's minibatch holds whole rollout fragments: 8 of 8 steps
    appo = dict(rollout_length=8, total_env_steps=128) if algorithm == "appo" else {}
    cfg = TrialConfig(**{**ROWS, **appo}, algorithm=algorithm)
    bound = max(cfg.minibatch_size, cfg.num_envs_per_env_runner)
    seen: dict[str, int] = {}
    too_many: list[str] = []

    def count(module: torch.nn.Module, args: tuple) -> None:
        if not isinstance(module, ImpalaCNN):
            return
        names = [frame.name for frame in traceback.extract_stack()]
        origin = next((o for name, o in _ORIGINS.items() if name in names), "other")
        rows = len(args[0])
        seen[origin] = max(seen.get(origin, 0), rows)
        if rows > bound:
            too_many.append(f"{origin}: {rows} rows\n" + "".join(traceback.format_stack()[-12:]))

    hook = torch.nn.modules.module.register_module_forward_pre_hook(count)
    try:
        trainable.train_trial(cfg.to_dict())
    finally:
        hook.remove()
    assert session.reports[-1][M.TRIAL_DONE], session.reports[-1]
    assert not too_many, f"more than {bound} rows:\n" + "\n".join(too_many[:3])
    expected = {"rollout", "training", "evaluation"}
    # PPO's GAE values; APPO's come from the training pass's embeddings
    expected.add("values for GAE" if algorithm == "ppo" else "APPO's old policy")
    assert set(seen) == expected, seen
    assert seen["training"] == cfg.minibatch_size


@pytest.mark.rllib
def test_a_trial_out_of_gpu_memory_stops_alone_and_says_why(
    ray_local, session, monkeypatch, tmp_path
):
    """torch.OutOfMemoryError from the second iteration (simulated: this machine has no GPU):
    the trial reports its last metrics with the reason as its last result, closes down, and
    the results call it an error with that reason."""
    from rlsweep.results.results import ERROR, load_trial
    from rlsweep.trial import algos

    build = algos.build_algorithm

    def build_then_run_out(cfg):
        algo = build(cfg)
        train, calls = algo.train, []

        def train_once_then_run_out():
            calls.append(1)
            if len(calls) > 1:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return train()

        algo.train = train_once_then_run_out
        return algo

    monkeypatch.setattr(trainable.algos, "build_algorithm", build_then_run_out)
    cfg = TrialConfig(**{**ROWS, "minibatch_size": 64, "total_env_steps": 4096})
    trainable.train_trial(cfg.to_dict())
    first, last = session.reports
    assert not first[M.TRIAL_DONE] and last[M.TRIAL_DONE]
    assert last[M.ENV_STEPS] == first[M.ENV_STEPS] and math.isfinite(last[M.ENV_STEPS])
    assert last[M.TRIAL_ERROR].startswith("out of GPU memory on its share (num_gpus 0)")
    assert "estimated need ~" in last[M.TRIAL_ERROR]
    assert not set(M.GPU_METRICS) & set(last)  # a CPU trial: no GPU keys

    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "params.json").write_text(json.dumps(cfg.to_dict()))
    rows = [{**r, "training_iteration": i} for i, r in enumerate(session.reports, 1)]
    (trial / "result.json").write_text("\n".join(json.dumps(r, default=str) for r in rows))
    loaded = load_trial(trial)
    assert loaded["status"].iloc[-1] == ERROR
    assert loaded["error"].iloc[-1] == last[M.TRIAL_ERROR]


@pytest.mark.rllib
def test_under_a_time_limit_a_trial_prices_evaluations_per_env_step_and_saves_before_one_it_cannot(
    ray_local, session, monkeypatch
):
    """A real trial of 3 iterations, evaluating at 2 and at the end, with a time limit bound an
    hour away. Its clock prices an evaluation per env step (every env of both splits to the
    time limit at most, `plan.eval_steps`; each evaluation counted as its envs' steps, not its
    longest episode's), and it checkpoints after iteration 1: the evaluation next cannot be
    priced before one has run (`interrupt.insure_before`), and at the end."""
    import time

    from rlsweep.experiment import interrupt
    from rlsweep.plan.plan import eval_steps

    clocks: list[tuple[int, list[int]]] = []

    class Clock(interrupt.IterationClock):  # the trial's own clock, its inputs kept
        def __init__(self, eval_steps_at_most: int) -> None:
            super().__init__(eval_steps_at_most)
            clocks.append((eval_steps_at_most, []))

        def evaluated(self, seconds: float, steps: int) -> None:
            clocks[-1][1].append(steps)
            super().evaluated(seconds, steps)

    monkeypatch.setattr(trainable.interrupt, "IterationClock", Clock)
    cfg = TrialConfig(**{**ROWS, "total_env_steps": 3 * 256, "eval_interval": 2})
    interrupt.bind(interrupt.StopFlag("rlsweep-test-unset", end_by=time.time() + 3600))
    try:
        trainable.train_trial(cfg.to_dict())
    finally:
        interrupt.bind(None)
    assert session.checkpointed == [True, False, True]
    evaluated = [r for r in session.reports if r[M.TEST_FRESH]]
    played = [
        sum(r[f"{split}/episodes"] * r[f"{split}/episode_length"] for split in ("train", "test"))
        for r in evaluated
    ]
    assert clocks[0][0] == eval_steps(cfg)
    assert clocks[0][1] == pytest.approx(played) and len(played) == 2
