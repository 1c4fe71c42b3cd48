"""Real RLlib PPO on real Procgen, with tiny batches (marked `rllib`; part of `make test`).

Leaper is used because a random policy ends its episodes in ~70 steps, so train returns and
evaluations exist after a few hundred env steps.
"""

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest

from rlsweep import metrics as M
from rlsweep.metrics import METRICS
from rlsweep.plan.plan import Throughput, make_plan
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import SweepSpec
from rlsweep.testing import TINY_PPO

pytestmark = pytest.mark.rllib

TINY = dict(TINY_PPO, num_epochs=2, eval_interval=2, eval_episodes=8)


def _weights(algo) -> dict[str, np.ndarray]:
    return {k: v.detach().clone().numpy() for k, v in algo.get_module().state_dict().items()}


def test_trial_trains_with_finite_losses_and_changes_weights(ray_local):
    import torch

    from rlsweep.trial.algos import build_algorithm, read_result

    algo = build_algorithm(TrialConfig(**TINY, framestack="gap"))
    try:
        before = _weights(algo)
        results = [read_result(algo.train()) for _ in range(3)]
        after = _weights(algo)
    finally:
        algo.stop()
    for r in results:
        for key in ("loss/total", "loss/policy", "loss/value", "loss/entropy"):
            assert math.isfinite(r[key]), (key, r)
    steps = [r["env_steps"] for r in results]
    assert steps[0] >= 256 and steps[0] < steps[1] < steps[2]
    assert math.isfinite(results[-1]["train/episode_return_mean"])  # raw returns reached it
    changed = [k for k in before if not np.array_equal(before[k], after[k])]
    assert "net.trunk.stages.0.down.0.weight" in changed and "net.pi.weight" in changed
    assert algo.get_module().observation_space.shape == (6, 64, 64)  # gap stack reached RLlib
    # RLlib's seeding turned on deterministic algorithms; rlsweep keeps torch from NaN-filling
    # every new tensor, which that also does (~12% of a CPU trial's time).
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.utils.deterministic.fill_uninitialized_memory is False


def test_learner_runs_exactly_epochs_times_minibatches(ray_local):
    from rlsweep.trial.algos import build_algorithm

    algo = build_algorithm(TrialConfig(**TINY))
    try:
        result = algo.train()
    finally:
        algo.stop()
    trained = result["learners"]["default_policy"]["num_module_steps_trained"]
    assert trained == 2 * 256  # num_epochs * train batch, not one extra minibatch per epoch


def test_run_sweep_real_trials(ray_local, tmp_path):
    from rlsweep.run.sweep import run_sweep

    spec = SweepSpec(
        name="real",
        games=["leaper"],
        seeds=[0],
        budget=1024,
        params={k: v for k, v in TINY.items() if k != "game"}
        | {"start_level": 1000, "num_levels": 20},
        space={"framestack": ["none", "gap"]},
        storage_path=str(tmp_path),
    )
    df = run_sweep(spec).to_dataframe()
    assert len(df) == 2 and (df["status"] == "TERMINATED").all(), df["error"].tolist()
    assert not df[list(METRICS)].isna().any().any(), df.T
    # `rlsweep plan` counts the parts each trial went through: its start, 4 iterations and 2
    # evaluations (the rows below). What each part costs is measured against a real sweep in
    # benchmarks/plan_costs.py, not asserted here: a 2-core host's speed moves 2-3x by the hour
    # (the plan's default figures over this sweep's wall time were 3.03 in a quiet hour,
    # 2026-11-30, outside the 0.4-3 band once asserted here).
    longest = make_plan(spec, cpus=2, throughput=Throughput()).longest
    assert (longest.iterations, longest.evaluations) == (4, 2), longest
    assert longest.start_s > 0 and longest.train_s > 0 and longest.eval_s > 0, longest
    assert (df["env_steps"] >= 1024).all()
    for trial_dir in df["trial_dir"]:
        lines = (Path(trial_dir) / "result.json").read_text().splitlines()
        results = [json.loads(line) for line in lines]
        last = results[-1]
        assert set(METRICS) <= set(last)
        assert [r["test/fresh"] for r in results] == [False, True, False, True]
        # Evaluation played unseen levels, as reported by the env itself ...
        assert last["test/episodes"] == 8
        assert last["test/levels_in_train_range"] == 0
        assert last["test/level_seed_max"] >= 1020 or last["test/level_seed_min"] < 1000
        # ... and the same evaluator scored the training levels, at the same iterations.
        assert last["train/episodes"] == 8 and last["train/levels_in_train_range"] == 8
        assert 1000 <= last["train/level_seed_min"] <= last["train/level_seed_max"] < 1020
        fresh = [r for r in results if r["test/fresh"]]
        assert len({r["train/return"] for r in fresh} | {math.nan}) >= 2
        assert 0 < last["time/eval_s"] < last["time/wall_s"]
        assert last["perf/jemalloc"] is True
        assert last["perf/nice"] == 0  # Ray's default for workers is 15 (session.runtime_env)
        assert last["perf/device"].startswith("CPU: ")  # a CPU learner, by its model
        # Its process's peak memory (its envs in it: sampling runs there), never going down.
        peaks = [r["perf/host_rss_peak_gib"] for r in results]
        assert peaks[0] > 0.3 and peaks == sorted(peaks) and peaks[-1] < 8, peaks
        # Its stderr file holds each of Ray's log lines once (its last checkpoint's, here), no
        # "Install gputil" (RLlib's system-usage thread is off) and none of TRIAL_LOGS.
        stderr = (Path(trial_dir) / "stderr").read_text()
        saved = [ln for ln in stderr.splitlines() if "Checkpoint successfully created" in ln]
        assert len(saved) == 1, stderr
        assert "gputil" not in stderr and "RLModuleConfig" not in stderr, stderr
        assert last["gap/return_norm"] == pytest.approx(
            last["train/return_norm"] - last["test/return_norm"]
        )
    # The report from this real sweep dir: both trials counted, every file written.
    from rlsweep.results.report import FILES, build_report

    report = build_report([tmp_path / "real"], n_resamples=200)
    assert "- `real`: 2 trials (2 TERMINATED)\n" in report.read_text()  # finished: no progress
    assert all((report.parent / f).stat().st_size > 0 for f in FILES)
    table = (report.parent / "table.md").read_text()
    assert table.startswith("| game | framestack=gap | framestack=none |\n")
    assert "| leaper |" in table


def test_same_spec_same_seeds_same_numbers(ray_local, tmp_path):
    """Three trials of one config and seed, differing only in a setting that changes no number
    (`checkpoint_every_s`: none lives to its first timed checkpoint), two side by side (2 CPUs)
    and the third in the process of whichever ended first (Tune hands a finished CPU trial's
    process on: `tune_bridge.reuses_processes`): every number they report that is not a time
    or a host detail is identical, iteration by iteration, the third's too."""
    from rlsweep.run.sweep import run_sweep

    volatile = ("time", "timestamp", "date", "pid", "hostname", "node_ip", "trial_id")
    volatile += ("experiment_tag", "checkpoint_dir_name", "perf/", "trial/node_id")
    spec = SweepSpec(
        name="twins",
        games=["leaper"],
        seeds=[0],
        budget=768,
        params={k: v for k, v in TINY.items() if k != "game"},
        space={"checkpoint_every_s": [600, 3600, 7200]},
        max_concurrent=2,
        storage_path=str(tmp_path),
    )
    rows, before = {}, {}
    for trial_dir in run_sweep(spec).to_dataframe()["trial_dir"]:
        lines = (Path(trial_dir) / "result.json").read_text().splitlines()
        results = [json.loads(line) for line in lines]
        every = results[0]["config"]["checkpoint_every_s"]
        before[every] = {r[M.TRIALS_BEFORE] for r in results}
        rows[every] = [
            {k: v for k, v in r.items() if not k.startswith(volatile)}
            | {"config": {k: v for k, v in r["config"].items() if k != "checkpoint_every_s"}}
            for r in results
        ]
    assert sorted(rows) == [600, 3600, 7200] and all(len(r) == 3 for r in rows.values())
    assert before == {600: {0}, 3600: {0}, 7200: {1}}  # the third ran in a handed-on process
    first, second, third = rows[600], rows[3600], rows[7200]
    assert "loss/total" in first[-1] and "test/return" in first[-1]
    assert first == second == third


def test_ppo2_value_clipping_trains(ray_local):
    """vf_clip_mode ppo2 on real PPO: the rollout's value estimates reach the loss, and the value
    loss logged is PPO2's, never below the plain squared error RLlib logs beside it (same
    minibatch); above it once the value has moved past a tiny clip."""
    from rlsweep.trial.algos import build_algorithm, read_result

    # fruitbot: rewards from the first steps, so value errors are not ~0 as in leaper.
    tiny = {**TINY, "game": "fruitbot", "num_epochs": 3}
    algo = build_algorithm(TrialConfig(**tiny, vf_clip_param=1e-3, vf_clip_mode="ppo2"))
    try:
        results = [algo.train() for _ in range(3)]
    finally:
        algo.stop()
    learner = [r["learners"]["default_policy"] for r in results]
    ours = [read_result(r)["loss/value"] for r in results]
    unclipped = [x["vf_loss_unclipped"] for x in learner]
    assert all(math.isfinite(v) for v in ours), ours
    assert all(o >= u - 1e-6 for o, u in zip(ours, unclipped, strict=True)), (ours, unclipped)
    assert any(o > u * 1.005 for o, u in zip(ours, unclipped, strict=True)), (ours, unclipped)


def test_pbt_perturbed_values_survive_restore(ray_local, tmp_path):
    """ray#62173: after PBT exploits (restore from another trial's checkpoint with a perturbed
    config), the learner must train with the perturbed lr, not the checkpoint's."""
    from rlsweep.run.sweep import run_sweep

    spec = SweepSpec(
        name="pbt",
        games=["leaper"],
        seeds=[0, 1],
        # Two PBT steps before the last report: with one, a fresh clone's suite once saw no
        # exploit (2026-11-30, under load; alone it passed 4 of 4). PBT skips an exploit where
        # the better trial has no checkpoint yet ("[pbt]: no checkpoint ... Skip exploit"),
        # most likely what happened.
        budget=6 * 256,
        # PBT evaluates at each step (spec.search_params), but its metric is no score: one
        # episode per split and one epoch do (the claim is the lr the learner trained with).
        params={k: v for k, v in TINY.items() if k != "game"}
        | {"eval_episodes": 1, "num_epochs": 1},
        space={"lr": {"loguniform": [1e-6, 1e-3]}},
        # Rank on a metric that never ties: untrained leaper scores do (in one CI run both
        # trials read test/return 5.0 at every perturbation, so PBT never exploited).
        metric="time/wall_s",
        mode="min",
        search={
            "algorithm": "random",
            "scheduler": "pbt",
            # Every other iteration: each exploit restarts a trial from a checkpoint (the
            # test's cost), and iteration 6, the last report, is a PBT step too (see below).
            "perturbation_interval": 2,
            "mutations": ["lr"],
            "seed": 0,
            "synch": True,  # rank both trials at every step: the worse one always exploits
        },
        storage_path=str(tmp_path),
    )
    # What PBT decided at each step, for the message should no trial be perturbed.
    decisions = _Records()
    pbt_logger = logging.getLogger("ray.tune.schedulers.pbt")
    level = pbt_logger.level
    pbt_logger.setLevel(logging.DEBUG)
    pbt_logger.addHandler(decisions)
    try:
        df = run_sweep(spec).to_dataframe()
    finally:
        pbt_logger.removeHandler(decisions)
        pbt_logger.setLevel(level)
    assert (df["status"] == "TERMINATED").all(), df["error"].tolist()
    perturbed = 0
    for trial_dir in df["trial_dir"]:
        rows = [json.loads(x) for x in (Path(trial_dir) / "result.json").read_text().splitlines()]
        for row in rows:
            assert row["hp/lr"] == pytest.approx(row["config"]["lr"], rel=1e-6), row["config"]
        perturbed += len({row["config"]["lr"] for row in rows}) > 1
        # A synchronous PBT step on the last report used to pause the trial, which then resumed
        # from its final checkpoint and reported the same last iteration again, forever.
        assert [r["trial/done"] for r in rows] == [False] * (len(rows) - 1) + [True]
        # Each iteration once, across its pauses and exploits: Tune's loggers copied storage's
        # result.json, as of its last sync, over the driver's at each restart (a full `make
        # test` once kept 2 rows of 6: the ones after the last exploit).
        assert [r["training_iteration"] for r in rows] == list(range(1, 7)), trial_dir
        # Its own seed throughout, a clone's weights restored into it (MemberPBT).
        assert len({r["config"]["seed"] for r in rows}) == 1, trial_dir
    assert perturbed >= 1, "PBT never perturbed a trial. It decided:\n" + decisions.text()


class _Records(logging.Handler):
    """A logger's records at a sweep's steps, but those that say a trial waits for its next."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage().strip()
        if not text.startswith("Perturbation interval not reached") and ", state " not in text:
            self.lines.append(text)

    def text(self) -> str:
        return "\n".join(self.lines)
