"""A fake trainable for testing Tune plumbing without RLlib: deterministic learning curves that
report the same keys as the real trial (`rlsweep.trial.trainable.train_trial`) and checkpoint the
same way (so PBT and restores can be exercised). Never a stand-in for the real path outside
tests."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
from ray import tune

from rlsweep import metrics as M
from rlsweep.envs import procgen
from rlsweep.experiment.history import result_rows
from rlsweep.manifest import write_manifest
from rlsweep.spec.config import TrialConfig


def curve(cfg: TrialConfig, env_steps: float) -> tuple[float, float]:
    """(train, test) raw returns: saturating in steps, higher lr and framestack 'gap' better,
    a small seed-dependent offset; test lags train (a generalization gap)."""
    lo, hi = procgen.score_range(cfg.game, cfg.distribution_mode)
    skill = 1 - math.exp(-env_steps * cfg.lr / 20.0)
    skill *= 0.8 + 0.1 * (cfg.framestack == "gap") + 0.01 * (cfg.seed % 3)
    train = lo + (hi - lo) * skill
    return train, lo + (hi - lo) * skill * 0.7


TINY_PPO: dict[str, Any] = dict(
    game="leaper",  # a random policy ends its episodes in ~70 steps: returns exist early
    num_envs_per_env_runner=16,
    rollout_length=16,  # 256 env steps per iteration
    minibatch_size=128,
)
"""The smallest real-RLlib trial setting the tests build on (TrialConfig fields)."""

NARROW_PPO: dict[str, Any] = dict(TINY_PPO, minibatch_size=32, widths=[4, 8, 8], dense=32)
"""TINY_PPO on a narrow network: for tests that sample and compare, where the net's size is
only time."""

EPSILON_GREEDY_DQN: dict[str, Any] = dict(
    algorithm="dqn",
    learning_starts=64,
    replay_capacity=512,
    target_update_freq=64,
    epsilon_start=0.5,
)
"""Laid over NARROW_PPO: DQN whose epsilon-greedy rollouts explore from the first step."""

TINY_DQN: dict[str, Any] = dict(
    TINY_PPO,
    algorithm="dqn",
    num_epochs=1,
    widths=[8, 16, 16],
    dense=64,
    minibatch_size=64,
    learning_starts=256,  # learns from the second iteration on
    replay_capacity=2048,
    target_update_freq=256,
    n_step=3,
)
"""The same for DQN, on a narrow network and a small replay buffer."""

ITER_S_ENV = "RLSWEEP_FAKE_ITER_S"
"""Seconds each fake iteration sleeps (default 0): lets tests kill a sweep mid-way."""


def fake_trial(
    config: dict[str, Any],
    stop_at: float = 1.0,
    crash: bool = False,
    die_at: int | None = None,
    ctrl_c: int | None = None,
) -> None:
    """stop_at: the fraction of its budget at which the trial ends itself (`trial/done`), as
    one a scheduler stopped early; `functools.partial(fake_trial, stop_at=0.5)`. crash: the
    trial raises at its start (Tune marks it ERROR), as one whose node went away. die_at: its
    process exits after iteration `die_at` (its worker dead, as one killed), unless it was
    restored from a checkpoint. ctrl_c: the driver's pid, sent SIGINT after the trial's first
    iteration (a Ctrl-C once the sweep is under way)."""
    from rlsweep.experiment import interrupt

    cfg = TrialConfig.from_dict(config)
    if crash:
        raise RuntimeError("a fake trial's crash: its node went away")
    if interrupt.requested():
        interrupt.stop_before_starting(tune.get_context().get_trial_id())
    pause = float(os.environ.get(ITER_S_ENV, "0"))
    saved_at = time.monotonic()
    per_iter = cfg.effective_train_batch_size
    steps = 0
    if (restored := tune.get_checkpoint()) is not None:
        with restored.as_directory() as path, open(os.path.join(path, "state.json")) as f:
            steps = json.load(f)["env_steps"]
    iteration = resumed_at = steps // per_iter
    end = stop_at * cfg.total_env_steps
    clock = interrupt.IterationClock(0)  # its scores cost nothing: no evaluation to time
    while steps < end:
        if die_at is not None and iteration == die_at and not resumed_at:
            os._exit(1)  # its report of iteration die_at is in: Tune has it
        t0 = time.monotonic()
        time.sleep(pause)
        clock.trained(time.monotonic() - t0)
        steps += per_iter
        iteration += 1
        train, test = curve(cfg, steps)
        train_n = procgen.normalize(cfg.game, cfg.distribution_mode, train)
        test_n = procgen.normalize(cfg.game, cfg.distribution_mode, test)
        metrics = {
            M.ENV_STEPS: steps,
            M.TUNE_STEPS: steps,
            M.TRAIN_RETURN: train,
            M.TRAIN_RETURN_NORM: train_n,
            M.TEST_RETURN: test,
            M.TEST_RETURN_NORM: test_n,
            M.TEST_FRESH: True,
            M.TRIAL_DONE: steps >= end,
            M.GAP_NORM: train_n - test_n,
            M.WALL_S: 0.01 * iteration,
            M.EVAL_S: 0.001 * iteration,
            M.HP_LR: cfg.lr,
            M.NODE_ID: ray.get_runtime_context().get_node_id(),
            M.RESUMED_AT: resumed_at,
            M.TRIAL_INTERRUPTED: False,
        }
        stop = steps < end and interrupt.requested(clock.next_s(evaluates=False))
        metrics[M.TRIAL_INTERRUPTED] = stop
        done = steps >= end
        if stop or done or interrupt.checkpoint_due(cfg, iteration, saved_at):
            t0 = time.monotonic()
            with tempfile.TemporaryDirectory() as tmp:
                with open(os.path.join(tmp, "state.json"), "w") as f:
                    json.dump({"env_steps": steps}, f)
                write_manifest(tmp, iteration, steps, metrics)
                tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(tmp))
            saved_at = time.monotonic()
            clock.saved(saved_at - t0)
        else:
            tune.report(metrics)
        if ctrl_c is not None and iteration == 1:
            os.kill(ctrl_c, signal.SIGINT)
        if stop:
            interrupt.wait_to_be_stopped()


def forget_iteration(trial_dir: Path, iteration: int) -> dict[str, Any] | None:
    """Remove `iteration`'s rows from a trial's result.json and progress.csv, as a driver
    killed after the trial uploaded that iteration's checkpoint, but before it logged the report
    that came with it, leaves them; the result.json row removed (None: it had none)."""
    if not (trial_dir / "result.json").exists():  # the driver had logged no report
        return None
    rows = result_rows((trial_dir / "result.json").read_text())  # a torn last line left out
    gone = [r for r in rows if r[M.TUNE_ITERATION] == iteration]
    kept = [json.dumps(r) + "\n" for r in rows if r[M.TUNE_ITERATION] != iteration]
    (trial_dir / "result.json").write_text("".join(kept))
    with open(trial_dir / "progress.csv", newline="") as f:
        header, *lines = list(csv.reader(f)) or [[]]
    if not header:  # Tune's CSV logger had not written its first row
        return gone[-1] if gone else None
    column = header.index(M.TUNE_ITERATION)
    with open(trial_dir / "progress.csv", "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(
            [header, *(r for r in lines if r[column] != str(iteration))]
        )
    return gone[-1] if gone else None
