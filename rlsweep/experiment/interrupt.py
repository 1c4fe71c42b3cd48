"""Honest interrupts: Ctrl-C (SIGINT), SIGTERM or a time limit stops a sweep cleanly.

On the driver (`Interrupts`, for the length of one `Tuner.fit`): the first signal, or the time
limit's approach (`TimeLimit`), asks every running trial to checkpoint after its current
iteration and then wait. Once all of them have
(or `grace_s` passed, or a second signal came), Tune's loop is ended the way Tune's own SIGINT
handler ends it (`_ray_compat.end_tune_loop`): Tune saves the experiment state with those
trials unfinished, so `rlsweep resume` continues each from the checkpoint it just wrote. A third
signal raises KeyboardInterrupt.

Trials learn of the request through a key in Ray's GCS key-value store, so it reaches trials on
every node of a cluster; they read it between iterations with `requested()` (one GCS call). A
key and not a named actor: an idle actor is a worker process of its own, taking a share of a
core and memory beside every sweep.

Under a time limit a trial that times its own iterations (`IterationClock`) stops by itself, at
the last iteration that leaves time for the next one and a checkpoint before the limit: later
than the driver's ask, which must allow for any trial's longest iteration (an evaluation's)
twice. The driver's ask still stops trials that cannot tell (a trainable that does not time
itself; a trial before its first evaluation in this process), and keeps new ones from starting.
A trial checkpoints before an evaluation it cannot price, or whose worst case may outlast the
limit (`insure_before`): the limit then costs it that iteration at most.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import signal
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from rlsweep._ray_compat import ENDED, TERMINATED
from rlsweep.environ import set_env
from rlsweep.formatting import duration
from rlsweep.formatting import steps as step_count
from rlsweep.metrics import ENV_STEPS, TRIAL_INTERRUPTED
from rlsweep.storage import user_path

GRACE_S = 600.0
"""Default wait for running trials to checkpoint after an interrupt: one iteration and an
evaluation of a full-size trial fit in it."""

SHUTDOWN_S = 20.0
"""What a time limit keeps for the end of a sweep once its trials have stopped: Tune saving its
experiment state and stopping the trials' actors (10 s: Tune 2.60 waits that long for an actor
busy in its `train()`, as a stopped trial's is, before it kills it), Ray stopping, the table
read from disk: 13 s from Tune's loop ending to the exit on 2 cores (`benchmarks/study_sitting.py
--smoke`, two trials, 2026-11-27)."""

SAFETY = 1.25
"""A self-timing trial's margin on its estimate of its next iteration and checkpoint (each
part already the longest this process has seen)."""

_SIGNAL, _TIME = b"signal", b"time"
"""The stop flag's values: a signal (every trial stops after its iteration), or the time limit
(a trial that times itself decides alone)."""

EXIT_TIME_LIMIT = 3
"""Exit code of a sweep its time limit stopped: INCOMPLETE, to be resumed (not 1, "trials
failed", nor 128 + a signal, "someone stopped it")."""

SIGNALS = (signal.SIGINT, signal.SIGTERM)


# --- trial side ------------------------------------------------------------------------------


def checkpoint_due(cfg: Any, iteration: int, saved_at: float) -> bool:
    """A periodic checkpoint is due after this iteration: `checkpoint_every_s` of trial time
    since the last one, or every `checkpoint_interval` iterations (the end and interrupts
    always checkpoint)."""
    every = cfg.checkpoint_interval
    if every and iteration % every == 0:
        return True
    return bool(cfg.checkpoint_every_s) and time.monotonic() - saved_at >= cfg.checkpoint_every_s


@dataclass(frozen=True)
class StopFlag:
    """What a trial needs of its sweep's interrupts: the stop flag's key, and when the time
    limit ends the sweep (Unix time; None: no limit). Bound in each trial process
    (`tune_bridge.wrap_trainable` calls `bind`)."""

    key: str
    end_by: float | None = None


_flag: StopFlag | None = None


def bind(flag: StopFlag | None) -> None:
    """Called in each trial process (by `tune_bridge.wrap_trainable`): the flag to poll."""
    global _flag
    _flag = flag


def requested(next_iteration_s: float | None = None) -> bool:
    """The sweep is stopping: checkpoint now, report with `trial/interrupted`, then call
    `wait_to_be_stopped()`. False outside a sweep run by rlsweep.

    `next_iteration_s`: how long the trial's next iteration and its checkpoint would take
    (`IterationClock.next_s`). Given, the trial answers the time limit itself: True when they
    would not end before the limit, and the driver's ask for the time limit is left to trials
    that cannot tell (None). A signal stops every trial."""
    if _flag is None:
        return False
    from rlsweep._ray_compat import kv_get

    try:
        value = kv_get(_flag.key)
    except Exception:  # Ray (and its GCS) is gone: Tune is ending this trial anyway
        return False
    if next_iteration_s is not None and _flag.end_by is not None:
        late = time.time() + next_iteration_s > _flag.end_by
        return late or value not in (None, _TIME)
    return value is not None


def ends_in_time(seconds: float | None) -> bool:
    """Whether `seconds` from now is before the time limit's end (True with no limit bound, or
    `seconds` None)."""
    if seconds is None or _flag is None or _flag.end_by is None:
        return True
    return time.time() + seconds <= _flag.end_by


def insure_before(clock: IterationClock, evaluates_next: bool) -> bool:
    """Checkpoint now, before the next iteration: it evaluates, a time limit is bound, and that
    evaluation may not end before it, at worst (`IterationClock.next_s(worst=True)`) or because
    this process has not timed an evaluation yet. Unpriced, the trial would neither stop for
    it (it cannot tell) nor have saved before it: a limit that ends during the process's first
    evaluation would cost all its work since its last periodic checkpoint."""
    if not evaluates_next or _flag is None or _flag.end_by is None:
        return False
    worst = clock.next_s(evaluates=True, worst=True)
    return worst is None or not ends_in_time(worst)


class IterationClock:
    """A trial's iterations timed in parts, to price the next one and the checkpoint after it
    (`next_s`): training (the longest of the last `RECENT`; the process's first, which warms
    up, only until there is another), evaluation and checkpointing (the longest so far).

    An evaluation lasts until its longest episode ends, which grows as the policy learns: the
    next is priced at `EVAL_GROWTH` times the longest so far, and at worst (`worst=True`) at
    every env playing to the episode time limit, each env step as slow as the slowest
    evaluation's so far. That is a bound: an evaluation's envs stop as their episodes end, so
    its cost per lockstep step falls as it goes on, but its cost per env step can only rise
    (a GPU's forward runs over every row at each lockstep step). A trial whose worst case
    would not end in time checkpoints before that iteration (`rlsweep.trial.trainable`): if it
    outlasts its price, the limit costs only it."""

    RECENT = 8
    EVAL_GROWTH = 2.0

    def __init__(self, eval_steps_at_most: int) -> None:
        """eval_steps_at_most: the most env steps an evaluation can take
        (`rlsweep.plan.plan.eval_steps`: every env of both splits to the episode time limit)."""
        self.eval_steps_at_most = eval_steps_at_most
        self._first_train_s: float | None = None
        self._train_s: deque[float] = deque(maxlen=self.RECENT)
        self.eval_s: float | None = None
        self.eval_step_s: float | None = None
        self.save_s: float | None = None

    def trained(self, seconds: float) -> None:
        if self._first_train_s is None:
            self._first_train_s = seconds
        else:
            self._train_s.append(seconds)

    @property
    def train_s(self) -> float | None:
        return max(self._train_s) if self._train_s else self._first_train_s

    def evaluated(self, seconds: float, steps: int) -> None:
        """An evaluation whose envs took `steps` env steps in all took `seconds`."""
        self.eval_s = max(self.eval_s or 0.0, seconds)
        if steps > 0:
            self.eval_step_s = max(self.eval_step_s or 0.0, seconds / steps)

    def saved(self, seconds: float) -> None:
        self.save_s = max(self.save_s or 0.0, seconds)

    def next_s(self, evaluates: bool, worst: bool = False) -> float | None:
        """The next iteration (with its evaluation if `evaluates`) and a checkpoint, times
        `SAFETY`; None when a part was never timed here (before the first iteration, or the
        first evaluation). A checkpoint not timed yet is priced as a training step."""
        train = self.train_s
        if train is None or (evaluates and (self.eval_s is None or self.eval_step_s is None)):
            return None
        evaluation = 0.0
        if evaluates:
            at_most = self.eval_step_s * self.eval_steps_at_most
            evaluation = at_most if worst else min(self.EVAL_GROWTH * self.eval_s, at_most)
        save = train if self.save_s is None else self.save_s
        return SAFETY * (train + evaluation + save)


def stop_before_starting(trial_id: str) -> NoReturn:
    """The sweep is stopping before this trial (Tune's `trial_id`) began its first iteration:
    it has nothing to save. It says so to the driver, which then waits for no checkpoint of it
    (it would have waited its whole grace, 10 minutes, for one), and waits to be stopped."""
    if _flag is not None:
        from rlsweep._ray_compat import kv_put

        with contextlib.suppress(Exception):  # Ray is gone: Tune is ending the trial anyway
            kv_put(_idle_key(_flag.key, trial_id), b"1")
    wait_to_be_stopped()


def _idle_key(flag: str, trial_id: str) -> str:
    """Where a trial says it stopped before it began (`stop_before_starting`)."""
    return f"{flag}-idle-{trial_id}"


def wait_to_be_stopped() -> NoReturn:
    """Block until Tune stops this trial's process. Returning would mark the trial finished
    (TERMINATED) in Tune's state, and `rlsweep resume` would not continue it."""
    while True:
        time.sleep(3600)


# --- driver side -----------------------------------------------------------------------------


def check_time_limit(seconds: object) -> float:
    """`seconds` as a sweep's time limit: a number of seconds longer than what the limit keeps
    for the sweep's end (`SHUTDOWN_S`), which would otherwise stop it before any trial could
    start. ValueError naming what is allowed."""
    ok = isinstance(seconds, numbers.Real) and not isinstance(seconds, bool)
    if not ok or not seconds > SHUTDOWN_S:  # NaN too
        raise ValueError(
            f"time limit: got {seconds!r}; allowed: seconds > {SHUTDOWN_S:g}, the time it keeps "
            "for the sweep's end"
        )
    return float(seconds)


class TimeLimit:
    """A sweep's time limit, counted from its start: when to ask the running trials to stop
    (`ask_at`: early enough for each to finish its current iteration and checkpoint), and when
    to stop them whatever they are doing (`end_at`), so that the process exits by the limit."""

    def __init__(self, seconds: float, start: float | None = None) -> None:
        seconds = check_time_limit(seconds)
        if threading.current_thread() is not threading.main_thread():
            # The sweep ends its Tune loop as Ctrl-C does: Tune handles that signal only there.
            raise ValueError("a time limit needs run_sweep/resume_sweep called in the main thread")
        self.seconds = float(seconds)
        self.deadline = (time.monotonic() if start is None else start) + self.seconds
        self.longest_iteration_s = 0.0
        """The longest iteration a trial reported so far (its evaluation included)."""

    def saw_iteration(self, seconds: float) -> None:
        self.longest_iteration_s = max(self.longest_iteration_s, float(seconds))

    @property
    def ask_at(self) -> float:
        """Two of the longest iterations before `end_at`: a trial that has just begun one
        finishes it, then writes its checkpoint (its saving is no longer than an iteration)."""
        return self.end_at - 2 * self.longest_iteration_s

    @property
    def end_at(self) -> float:
        return self.deadline - SHUTDOWN_S

    def text(self) -> str:
        return f"time limit {duration(self.seconds)}"


class Interrupts:
    """Signal handling and the time limit on the driver for one `fit()`; also a listener of
    Tune's callback events (`tune_bridge.DriverCallback`). Active only in the main thread (where
    Python delivers signals, and where Tune installs the SIGUSR1 handler that ends its loop: a
    `TimeLimit` is refused elsewhere)."""

    def __init__(
        self,
        say: Callable[[str], None] = print,
        grace_s: float = GRACE_S,
        time_limit: TimeLimit | None = None,
    ) -> None:
        self.say = say
        self.grace_s = float(os.environ.get("RLSWEEP_STOP_GRACE_S", grace_s))
        self.time_limit = time_limit
        self.signum: int | None = None
        self.timed_out = False
        """The time limit (not a signal) stopped the sweep."""
        self._count = 0
        self.flag_name: str | None = None
        self._asked: bytes | None = None
        self._asked_at: float | None = None
        self._waiting: set[str] = set()
        self._saving: set[str] = set()
        self._stopped: set[str] = set()
        """Trials that reported `trial/interrupted` and whose checkpoint Tune has."""
        self._ended = False
        self._previous: dict[int, Any] = {}
        self._env = contextlib.ExitStack()

    def __enter__(self) -> Interrupts:
        self.flag_name = f"rlsweep-stop-{uuid.uuid4().hex[:12]}"
        if threading.current_thread() is not threading.main_thread():
            self.flag_name = None  # nothing can stop the sweep early: Tune's own handling
            return self
        # Tune's own handler would end the loop at once, killing trials mid-iteration.
        self._env.enter_context(set_env({"TUNE_DISABLE_SIGINT_HANDLER": "1"}))
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        self._env.close()
        if self.flag_name is not None:
            from rlsweep._ray_compat import kv_delete

            with contextlib.suppress(Exception):  # Ray already shut down: the key went with it
                kv_delete(self.flag_name)

    @property
    def stop_flag(self) -> StopFlag | None:
        """What each trial process binds (`bind`): the flag, and the time limit's end in Unix
        time. None where nothing can stop the sweep early (off the main thread)."""
        if self.flag_name is None:
            return None
        end_by = None
        if self.time_limit is not None:
            end_by = time.time() + self.time_limit.end_at - time.monotonic()
        return StopFlag(self.flag_name, end_by)

    @property
    def stopped(self) -> bool:
        """A signal or the time limit stopped the sweep before its trials finished."""
        return self.signum is not None or self.timed_out

    def reason(self) -> str:
        """What stopped the sweep: the signal's name, or the time limit."""
        if self.signum is not None:
            return signal.Signals(self.signum).name
        return self.time_limit.text() if self.time_limit else "stop"

    def _handle(self, signum: int, frame: object) -> None:
        from rlsweep._ray_compat import tune_loop_listens

        self._count += 1
        self.signum = self.signum or signum
        if self._count > 2 or (self._count == 2 and not tune_loop_listens()):
            # Before Tune's loop (Ray starting, the Tuner built) no trial has run: stop at once.
            raise KeyboardInterrupt
        if self._count == 2:
            self.say("rlsweep: stopping now; trials lose their work since their last checkpoint")
            self._end_tune()

    def _end_tune(self) -> None:
        """End Tune's loop as its own SIGINT handler would (it always handles SIGUSR1): the
        experiment state is saved with unfinished trials unfinished."""
        if not self._ended:
            self._ended = True
            from rlsweep._ray_compat import end_tune_loop

            end_tune_loop()

    # Tune callback events (forwarded by tune_bridge.DriverCallback).

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        now = time.monotonic()
        limit = self.time_limit
        if limit is not None and not self.stopped and now >= limit.ask_at:
            if all(t.status in ENDED for t in trials):
                return  # the sweep is ending by itself
            self.timed_out = True
        if not self.stopped or self._ended:
            return
        value = _TIME if self.signum is None else _SIGNAL
        if self._asked != value:  # first asked, or a signal came after the time limit's ask
            from rlsweep._ray_compat import kv_put

            kv_put(self.flag_name, value)
            self._asked = value
        if self._asked_at is None:
            self._asked_at = now
            running = {t.trial_id for t in trials if t.status == "RUNNING"}
            self._waiting = running - self._stopped
            if self._waiting:
                until = (
                    f"at most {duration(self.grace_s)}; Ctrl-C again to stop now"
                    if self.signum is not None
                    else f"{duration(max(limit.end_at - now, 0))} left to them, "
                    f"{duration(SHUTDOWN_S)} more to the sweep's end"
                )
                when = (
                    "after their current iteration"
                    if self.signum is not None
                    else "after their last iteration that ends in time"
                )
                self.say(
                    f"rlsweep: {self.reason()}: {len(self._waiting)} running trial(s) "
                    f"checkpoint {when}, then the sweep stops ({until})"
                )
        if self._waiting:  # trials that stopped before they began have nothing to save
            self._waiting -= self._idle(self._waiting)
        late = now - self._asked_at > self.grace_s or (limit is not None and now >= limit.end_at)
        if late and self._waiting:
            self.say(
                f"rlsweep: {len(self._waiting)} trial(s) did not checkpoint in time; they "
                "resume from their last checkpoint"
            )
        if not self._waiting or late:
            self._end_tune()

    def _idle(self, trial_ids: set[str]) -> set[str]:
        """Of `trial_ids`, those that said they stopped before they began."""
        from rlsweep._ray_compat import kv_get

        try:
            return {t for t in trial_ids if kv_get(_idle_key(self.flag_name, t)) is not None}
        except Exception:  # Ray (its GCS) is gone: the grace and the time limit still end it
            return set()

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info):
        if self.time_limit is not None and "time_this_iter_s" in result:
            self.time_limit.saw_iteration(result["time_this_iter_s"])
        if result.get(TRIAL_INTERRUPTED):
            self._saving.add(trial.trial_id)
            if self.time_limit is not None and self.signum is None:
                self.timed_out = True  # it stopped itself: the rest follow (`requested`)

    def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info):
        if trial.trial_id in self._saving:
            self._stopped.add(trial.trial_id)
            self._waiting.discard(trial.trial_id)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._waiting.discard(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._waiting.discard(trial.trial_id)


class SweepInterrupted(Exception):
    """`run_sweep` / `resume_sweep` stopped by Ctrl-C (SIGINT), SIGTERM or its time limit.

    Running trials checkpointed after their current iteration (unless a second signal, or the
    time limit's end, stopped them at once) and are INCOMPLETE in `result.trials`; trials not
    started yet have no row. `command` continues the sweep (`rlsweep resume <dir>`);
    `exit_code` is the shell's 128 + signal number (130 for SIGINT, 143 for SIGTERM), or
    `EXIT_TIME_LIMIT` (`signum` None)."""

    def __init__(self, result: Any, signum: int | None, reason: str | None = None) -> None:
        self.result, self.signum = result, signum
        self.exit_code = EXIT_TIME_LIMIT if signum is None else 128 + signum
        self.command = resume_command(result.path)
        reason = reason or (signal.Signals(signum).name if signum is not None else "stopped")
        spec, trials = result.spec, result.trials
        finished = int((trials["status"] == TERMINATED).sum())
        # What the trials keep: each stopped after the iteration its checkpoint holds.
        reached = sum(spec.counted_steps(s) for s in trials[ENV_STEPS].fillna(0))
        total = spec.sweep_env_steps
        self.what = (
            f"{reason}: sweep {spec.name} stopped with {finished} of {spec.num_trials} trials "
            f"finished ({len(trials)} started), {step_count(reached)} of {step_count(total)} "
            f"env steps ({100 * reached / total:.0f}%)"
        )
        """What stopped and where, without how to go on (`command`)."""
        super().__init__(f"{self.what}; continue it with: {self.command}")


def resume_command(experiment: Path | str) -> str:
    """`rlsweep resume <dir>`, the dir as a user types it (`storage.user_path`)."""
    return f"rlsweep resume {user_path(experiment)}"
