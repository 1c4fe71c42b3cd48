"""Checkpoint timing and the resume command (the signal handling itself is exercised end to end
by tests/test_resume.py, with real trials)."""

import os
import re
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlsweep.errors import ConfigError
from rlsweep.experiment.interrupt import (
    SAFETY,
    SHUTDOWN_S,
    Interrupts,
    IterationClock,
    StopFlag,
    SweepInterrupted,
    TimeLimit,
    bind,
    checkpoint_due,
    ends_in_time,
    insure_before,
    requested,
    resume_command,
)
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import SweepSpec


def test_trials_checkpoint_every_10_minutes_by_default(monkeypatch):
    cfg = TrialConfig()
    assert cfg.checkpoint_every_s == 600 and cfg.checkpoint_interval == 0
    monkeypatch.setattr("time.monotonic", lambda: 1000.0)
    assert not checkpoint_due(cfg, iteration=7, saved_at=500.0)
    assert checkpoint_due(cfg, iteration=7, saved_at=400.0)
    off = TrialConfig(checkpoint_every_s=0, checkpoint_interval=3)
    assert not checkpoint_due(off, iteration=7, saved_at=0.0)
    assert checkpoint_due(off, iteration=9, saved_at=1000.0)
    with pytest.raises(ConfigError, match="checkpoint_every_s"):
        TrialConfig(checkpoint_every_s=-1)


def test_no_flag_outside_a_sweep():
    assert requested() is False


def test_resume_command_and_exit_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resume_command(tmp_path / "results" / "demo") == "rlsweep resume results/demo"
    assert resume_command("/elsewhere/my sweep") == "rlsweep resume '/elsewhere/my sweep'"
    assert resume_command("s3://b/sweeps/demo") == "rlsweep resume s3://b/sweeps/demo"

    class Result:
        spec = SweepSpec(name="demo", games=["coinrun"], seeds=[0, 1, 2], budget=100_000)
        path = Path("results/demo")
        # The finished trial's last batch overshot its budget; the third had not started.
        trials = pd.DataFrame(
            {"status": ["TERMINATED", "INCOMPLETE"], "env_steps": [100_352.0, 40_960.0]}
        )

    e = SweepInterrupted(Result(), signal.SIGTERM)
    assert e.exit_code == 143 and e.command == "rlsweep resume results/demo"
    assert e.what == (
        "SIGTERM: sweep demo stopped with 1 of 3 trials finished (2 started), 141k of 300k env "
        "steps (47%)"
    )


def test_interrupts_keep_tunes_sigint_handler_off_only_while_active(monkeypatch):
    monkeypatch.setenv("TUNE_DISABLE_SIGINT_HANDLER", "0")
    previous = signal.getsignal(signal.SIGINT)
    with Interrupts(say=lambda _: None) as interrupts:
        assert os.environ["TUNE_DISABLE_SIGINT_HANDLER"] == "1"
        assert signal.getsignal(signal.SIGINT) == interrupts._handle
    assert os.environ["TUNE_DISABLE_SIGINT_HANDLER"] == "0"
    assert signal.getsignal(signal.SIGINT) == previous

    # Off the main thread they do nothing, and leave the user's setting alone.
    seen = []

    def in_a_thread():
        with Interrupts(say=lambda _: None):
            seen.append(os.environ["TUNE_DISABLE_SIGINT_HANDLER"])
        seen.append(os.environ.get("TUNE_DISABLE_SIGINT_HANDLER"))

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen == ["0", "0"]


def test_a_second_ctrl_c_before_tunes_loop_stops_at_once(monkeypatch):
    """Before Tuner.fit installs Tune's SIGUSR1 handler (Ray starting, the Tuner being built),
    a second Ctrl-C raises KeyboardInterrupt: the SIGUSR1 that ends a running loop would kill
    the driver there. Once the loop listens, it ends the loop."""
    ended = []
    monkeypatch.setattr("rlsweep._ray_compat.end_tune_loop", lambda: ended.append(True))
    previous = signal.signal(signal.SIGUSR1, signal.SIG_DFL)  # no Tune loop in this process
    try:
        with Interrupts(say=lambda _: None) as interrupts:
            interrupts._handle(signal.SIGINT, None)
            assert interrupts.stopped and not ended
            with pytest.raises(KeyboardInterrupt):
                interrupts._handle(signal.SIGINT, None)
        signal.signal(signal.SIGUSR1, lambda *_: None)  # what Tune's loop installs
        with Interrupts(say=lambda _: None) as interrupts:
            interrupts._handle(signal.SIGINT, None)
            interrupts._handle(signal.SIGINT, None)
            assert ended == [True]
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_the_worst_evaluation_priced_per_env_step_bounds_one_whose_envs_all_play_on():
    """An evaluation's envs stop as their episodes end, so its lockstep steps grow cheaper as it
    goes on, while a GPU's forward costs the same at each (every row). Priced per env step, as
    a trial prices it, the worst case (every env to the time limit) bounds what that case
    costs; priced per lockstep step, it fell short by 5 times here."""
    forward, env_step, envs, limit = 0.002, 0.0003, 64, 6000  # s a lockstep step; s an env step
    lengths = np.full(envs, 100)
    lengths[0] = 1000  # one long episode: the tail steps one env
    seconds = sum(forward + env_step * (lengths > t).sum() for t in range(lengths.max()))
    clock = IterationClock(eval_steps_at_most=envs * limit)
    clock.trained(1.0)
    clock.evaluated(seconds, steps=int(lengths.sum()))
    clock.saved(0.0)
    every_env_to_the_limit = limit * (forward + env_step * envs)
    assert clock.next_s(evaluates=True, worst=True) >= SAFETY * (1.0 + every_env_to_the_limit)
    assert seconds / lengths.max() * limit < every_env_to_the_limit / 5


def test_an_iteration_clock_prices_the_next_iteration_and_its_checkpoint():
    clock = IterationClock(eval_steps_at_most=12000)
    assert clock.next_s(evaluates=False) is None  # nothing timed yet: the driver's ask decides
    clock.trained(30.0)  # the first iteration warms up: used only until there is another
    assert clock.next_s(evaluates=False) == SAFETY * (30 + 30)  # a checkpoint: a step's worth
    clock.trained(6.0)
    clock.trained(5.0)
    assert clock.train_s == 6.0 and clock.next_s(evaluates=False) == SAFETY * (6 + 6)
    assert clock.next_s(evaluates=True) is None  # no evaluation timed in this process yet
    clock.evaluated(seconds=3.0, steps=1500)  # 2 ms an env step; at 12,000 env steps, 24 s
    clock.saved(0.5)
    assert clock.next_s(evaluates=True) == pytest.approx(SAFETY * (6 + 2 * 3 + 0.5))
    assert clock.next_s(evaluates=True, worst=True) == pytest.approx(SAFETY * (6 + 24 + 0.5))
    assert clock.next_s(evaluates=False) == SAFETY * 6.5
    for _ in range(IterationClock.RECENT):
        clock.trained(4.0)
    assert clock.train_s == 4.0  # the recent ones: a slow spell passes


@pytest.mark.parametrize(
    ("flag", "next_s", "left_s", "stop"),
    [
        (None, 10.0, 20.0, False),  # it has time for the next iteration
        (None, 10.0, 5.0, True),  # it has not: it stops itself
        (None, None, 5.0, False),  # it cannot tell: it waits for the driver's ask
        (b"time", 10.0, 20.0, False),  # the driver's ask is for trials that cannot tell
        (b"time", None, 20.0, True),
        (b"signal", 10.0, 20.0, True),  # a signal stops every trial
    ],
)
def test_a_trial_that_times_itself_answers_the_time_limit_alone(
    monkeypatch, flag, next_s, left_s, stop
):
    monkeypatch.setattr("rlsweep._ray_compat.kv_get", lambda key: flag)
    monkeypatch.setattr("time.time", lambda: 1000.0)
    bind(StopFlag("rlsweep-stop-x", end_by=1000.0 + left_s))
    try:
        assert requested(next_s) is stop
        assert ends_in_time(next_s) is (next_s is None or next_s <= left_s)
    finally:
        bind(None)
    assert ends_in_time(1e9)  # no limit bound


def test_an_evaluation_the_trial_cannot_price_goes_ahead_from_a_checkpoint(monkeypatch):
    """Under a time limit, a trial whose next iteration is its process's first evaluation
    checkpoints before it: it cannot tell whether that evaluation ends in time, nor stop for it,
    and a limit that ended during it cost all the work since the last periodic checkpoint (the
    old rule took an unpriced evaluation as one that ends in time)."""
    monkeypatch.setattr("time.time", lambda: 1000.0)
    clock = IterationClock(eval_steps_at_most=64 * 1000)
    clock.trained(5.0)
    assert not insure_before(clock, evaluates_next=True)  # no limit bound: nothing to insure
    bind(StopFlag("rlsweep-stop-x", end_by=1000.0 + 3600.0))
    try:
        assert not insure_before(clock, evaluates_next=False)  # priced: training and a save
        assert insure_before(clock, evaluates_next=True)  # never evaluated in this process
        clock.evaluated(10.0, steps=64 * 100)  # worst: 64,000 steps at 1/640 s, 137.5 s in all
        assert not insure_before(clock, evaluates_next=True)  # well in time
        bind(StopFlag("rlsweep-stop-x", end_by=1000.0 + 100.0))
        assert insure_before(clock, evaluates_next=True)  # its worst would not end in time
    finally:
        bind(None)


class _Trial:
    def __init__(self, trial_id: str, status: str = "RUNNING") -> None:
        self.trial_id, self.status = trial_id, status


def test_trials_that_stop_themselves_end_the_sweep_and_keep_others_from_starting(monkeypatch):
    """Under a time limit the first trial that stops itself marks the sweep timed out: the
    flag says so (trials not started yet do not begin), and Tune's loop ends once every running
    trial has checkpointed, long before the driver's own ask."""
    put, ended, said = [], [], []
    monkeypatch.setattr("rlsweep._ray_compat.kv_put", lambda key, value: put.append(value))
    monkeypatch.setattr("rlsweep._ray_compat.kv_get", lambda key: None)  # no trial said idle
    monkeypatch.setattr("rlsweep._ray_compat.kv_delete", lambda key: None)
    monkeypatch.setattr("rlsweep._ray_compat.end_tune_loop", lambda: ended.append(True))
    a, b, c = _Trial("a"), _Trial("b"), _Trial("c", "PENDING")
    trials = [a, b, c]
    with Interrupts(say=said.append, time_limit=TimeLimit(3600)) as interrupts:
        assert interrupts.stop_flag.end_by == pytest.approx(time.time() + 3600 - SHUTDOWN_S, 1)
        interrupts.on_step_begin(0, trials)
        assert not put and not interrupts.stopped
        stopping = {"time_this_iter_s": 6.0, "trial/interrupted": True}
        interrupts.on_trial_result(1, trials, a, stopping)
        interrupts.on_checkpoint(1, trials, a, None)
        assert interrupts.timed_out and interrupts.reason() == "time limit 1h00m"
        interrupts.on_step_begin(2, trials)
        assert put == [b"time"] and not ended  # b still runs its last iteration
        assert "1 running trial(s) checkpoint" in said[0]
        # The time left to the trials, and what the sweep's end keeps after it: "(19s left)"
        # read as the time to a 1-minute limit with 39 s of it left.
        assert re.search(r"\(59m\d\ds left to them, 20s more to the sweep's end\)$", said[0])
        interrupts.on_trial_result(3, trials, b, stopping)
        interrupts.on_checkpoint(3, trials, b, None)
        interrupts.on_step_begin(4, trials)
        assert ended == [True] and put == [b"time"]


def test_a_trial_stopped_before_it_began_is_not_waited_for(monkeypatch):
    """Ctrl-C while a trial's process still builds (Tune says RUNNING, no report yet): the
    trial sees the flag before its first iteration, has nothing to save, and says so; the
    driver ends Tune's loop then, not after its 10-minute grace."""
    from rlsweep.experiment import interrupt

    store, ended = {}, []
    monkeypatch.setattr("rlsweep._ray_compat.kv_put", store.__setitem__)
    monkeypatch.setattr("rlsweep._ray_compat.kv_get", store.get)
    monkeypatch.setattr("rlsweep._ray_compat.kv_delete", lambda key: store.pop(key, None))
    monkeypatch.setattr("rlsweep._ray_compat.end_tune_loop", lambda: ended.append(True))
    building, training = _Trial("a"), _Trial("b")
    trials = [building, training]
    with Interrupts(say=lambda text: None) as interrupts:
        interrupts._handle(signal.SIGINT, None)
        interrupts.on_step_begin(0, trials)
        assert not ended  # both may still checkpoint
        # In trial a's process: the flag is up before it began.
        interrupt.bind(interrupts.stop_flag)
        monkeypatch.setattr(interrupt, "wait_to_be_stopped", lambda: None)
        assert interrupt.requested()
        interrupt.stop_before_starting("a")
        interrupt.bind(None)
        interrupts.on_step_begin(1, trials)
        assert not ended  # b is in its iteration: it checkpoints after it
        interrupts.on_checkpoint(2, trials, training, None)  # not its stop's checkpoint
        interrupts.on_trial_result(2, trials, training, {"trial/interrupted": True})
        interrupts.on_checkpoint(2, trials, training, None)
        interrupts.on_step_begin(3, trials)
        assert ended == [True]


def test_a_time_limit_asks_two_iterations_early_and_ends_the_loop_by_its_end(monkeypatch):
    """The margins a GPU sitting lives by: the ask two of the longest iterations before the end,
    which keeps SHUTDOWN_S for the sweep's own end; at that end the loop ends whether or not
    every trial has checkpointed. A sweep whose trials all ended by themselves after the ask
    is not timed out (exit 0, not 3), and Ctrl-C under a limit is a signal (exit 130)."""
    from types import SimpleNamespace

    now = [0.0]
    clock = SimpleNamespace(monotonic=lambda: now[0], time=time.time, sleep=time.sleep)
    monkeypatch.setattr("rlsweep.experiment.interrupt.time", clock)
    put, ended, said = [], [], []
    monkeypatch.setattr("rlsweep._ray_compat.kv_put", lambda key, value: put.append(value))
    monkeypatch.setattr("rlsweep._ray_compat.kv_get", lambda key: None)
    monkeypatch.setattr("rlsweep._ray_compat.kv_delete", lambda key: None)
    monkeypatch.setattr("rlsweep._ray_compat.end_tune_loop", lambda: ended.append(True))
    limit = TimeLimit(100, start=0.0)
    assert limit.end_at == 100 - SHUTDOWN_S and limit.ask_at == limit.end_at
    a = _Trial("a")
    with Interrupts(say=said.append, time_limit=limit) as interrupts:
        interrupts.on_trial_result(1, [a], a, {"time_this_iter_s": 10.0})
        interrupts.on_trial_result(2, [a], a, {"time_this_iter_s": 4.0})
        assert limit.ask_at == limit.end_at - 2 * 10.0  # the longest, twice
        now[0] = limit.ask_at - 1
        interrupts.on_step_begin(3, [a])
        assert not put and not interrupts.stopped
        now[0] = limit.ask_at + 1
        interrupts.on_step_begin(4, [a])
        assert put == [b"time"] and interrupts.timed_out and not ended
        assert "(19s left to them, 20s more to the sweep's end)" in said[0]
        now[0] = limit.end_at - 0.5
        interrupts.on_step_begin(5, [a])
        assert not ended  # a may still checkpoint
        now[0] = limit.end_at
        interrupts.on_step_begin(6, [a])
        assert ended == [True] and "did not checkpoint in time" in said[-1]
    # Every trial ended by itself after the ask: the sweep ran to its end.
    now[0] = 0.0
    limit = TimeLimit(100, start=0.0)
    with Interrupts(say=said.append, time_limit=limit) as interrupts:
        now[0] = limit.ask_at + 1
        interrupts.on_step_begin(1, [_Trial("a", "TERMINATED")])
        assert not interrupts.stopped
    # Ctrl-C under a limit, the trial stopping for it: a signal, not the limit.
    now[0] = 0.0
    with Interrupts(say=said.append, time_limit=TimeLimit(100, start=0.0)) as interrupts:
        interrupts._handle(signal.SIGINT, None)
        interrupts.on_trial_result(1, [a], a, {"trial/interrupted": True})
        assert interrupts.signum == signal.SIGINT and not interrupts.timed_out
    with pytest.raises(ValueError, match="time limit: got nan"):
        TimeLimit(float("nan"))
