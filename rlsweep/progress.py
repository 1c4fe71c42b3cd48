"""The live progress view of a sweep (`rlsweep run`, `rlsweep resume`, `run_sweep()`).

One line replaces Tune's verbose reporter: trials done/running/pending, env steps done of the
sweep's total, throughput, ETA and the best score so far. On a terminal it is a `rich` progress
bar redrawn in place; elsewhere (a log file, CI) the same line is printed, without ANSI codes,
whenever a trial starts or ends, when the first ETA is known, and otherwise every `interval_s`
seconds (default 30, or $RLSWEEP_PROGRESS_S).

The ETA assumes the remaining work runs at the throughput measured so far in this session:
every unfinished trial's remaining budget plus the trials not started yet, divided by env steps
per second. A trial a scheduler stops early (ASHA) takes its remaining budget off the work.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from rlsweep.metrics import ENV_STEPS

FINISHED = ("TERMINATED", "ERROR")


def duration(seconds: float) -> str:
    """`1h02m`, `2m31s`, `45s`."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


@dataclass
class Snapshot:
    """What the view shows, computed from Tune's trials."""

    done: int
    errors: int
    running: int
    pending: int
    total_trials: int
    steps: float
    total_steps: float
    steps_per_s: float | None
    eta_s: float | None
    best: tuple[float, str] | None

    def trials_part(self) -> str:
        done = f"{self.done}/{self.total_trials} done"
        if self.errors:
            done += f" ({self.errors} failed)"
        return f"trials {done}, {self.running} running, {self.pending} pending"

    def steps_part(self) -> str:
        pct = 100 * self.steps / self.total_steps if self.total_steps else 0.0
        return " | ".join(
            [
                f"env steps {self.steps:,.0f}/{self.total_steps:,.0f} ({pct:.0f}%)",
                f"{self.steps_per_s:,.0f} steps/s" if self.steps_per_s else "- steps/s",
                f"ETA {duration(self.eta_s)}" if self.eta_s is not None else "ETA -",
            ]
        )

    def best_part(self, metric: str) -> str | None:
        return None if self.best is None else f"best {metric} {self.best[0]:.3g} ({self.best[1]})"

    def line(self, metric: str) -> str:
        parts = [self.trials_part(), self.steps_part(), self.best_part(metric)]
        return " | ".join(p for p in parts if p)


class ProgressView:
    """Driver-side listener of Tune's callback events (`tune_bridge.DriverCallback`)."""

    def __init__(
        self,
        spec,
        *,
        stream: TextIO | None = None,
        interval_s: float | None = None,
        live: bool | None = None,
    ) -> None:
        self.spec = spec
        self.metric, self.mode = spec.metric, spec.mode
        self.total_trials = spec.num_trials
        self.stream = stream or sys.stdout
        self.interval_s = float(
            os.environ.get("RLSWEEP_PROGRESS_S", 30.0) if interval_s is None else interval_s
        )
        self.live = self.stream.isatty() if live is None else live
        self._start: tuple[float, float] | None = None  # (time, env steps) at first update
        self._last_print = 0.0
        self._last_counts: tuple[int, ...] | None = None
        self._eta_shown = False
        self._last_line = ""
        self._labels: dict[str, str] = {}
        self._progress: Any = None
        self.snapshot: Snapshot | None = None

    # --- output -------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        """A line above the live view (or between the plain lines)."""
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(f"[{time.strftime('%H:%M:%S')}] {text}", file=self.stream, flush=True)

    def start(self) -> None:
        if not self.live:
            return
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._progress = Live(
            Text("starting trials"),
            console=Console(file=self.stream),
            refresh_per_second=2,
            transient=False,
        )
        self._progress.start()

    def _render(self, snap: Snapshot) -> Any:
        """Two lines: a bar with env steps, throughput and ETA; trials and the best score."""
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            ProgressBar(total=snap.total_steps or None, completed=snap.steps, width=30),
            Text(snap.steps_part()),
        )
        best = snap.best_part(self.metric)
        return Group(bar, Text(snap.trials_part() + (f" | {best}" if best else "")))

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        elif self.snapshot is not None and self.snapshot.line(self.metric) != self._last_line:
            self._print(self.snapshot)

    def _print(self, snap: Snapshot) -> None:
        self._last_line = snap.line(self.metric)
        print(f"[{time.strftime('%H:%M:%S')}] {self._last_line}", file=self.stream, flush=True)
        self._last_print = time.monotonic()

    # --- numbers ------------------------------------------------------------------------------

    def _label(self, trial: Any) -> str:
        if trial.trial_id not in self._labels:
            try:
                cfg = self.spec.resolve(trial.config, keep_label=True)
            except Exception:  # a config the spec cannot resolve: show Tune's id
                cfg = {}
            parts = [f"{cfg.get('game', trial.trial_id)}", f"s{cfg.get('seed', '?')}"]
            if "variant" in cfg:
                parts.append(str(cfg["variant"]))
            parts += [f"{k}={_short(cfg[k])}" for k in self.spec.space if k in cfg]
            self._labels[trial.trial_id] = " ".join(parts)
        return self._labels[trial.trial_id]

    def measure(self, trials: list, now: float | None = None) -> Snapshot:
        now = time.monotonic() if now is None else now
        budget = self.spec.budget
        done = errors = running = 0
        steps = left = 0.0
        best: tuple[float, str] | None = None
        for t in trials:
            result = t.last_result or {}
            s = float(result.get(ENV_STEPS) or 0)
            steps += s
            trial_budget = (t.config or {}).get("total_env_steps", budget)
            if t.status in FINISHED:
                done += 1
                errors += t.status == "ERROR"
            else:
                running += t.status == "RUNNING"
                left += max(trial_budget - s, 0.0)
            value = result.get(self.metric)
            if isinstance(value, int | float) and math.isfinite(value):
                better = best is None or (
                    value > best[0] if self.mode == "max" else value < best[0]
                )
                if better:
                    best = (float(value), self._label(t))
        unseen = max(self.total_trials - len(trials), 0)
        left += unseen * budget
        pending = self.total_trials - done - running
        if self._start is None:
            self._start = (now, steps)
        elapsed, gained = now - self._start[0], steps - self._start[1]
        rate = gained / elapsed if elapsed > 0 and gained > 0 else None
        return Snapshot(
            done=done,
            errors=errors,
            running=running,
            pending=max(pending, 0),
            total_trials=self.total_trials,
            steps=steps,
            total_steps=float(self.total_trials * budget),
            steps_per_s=rate,
            eta_s=left / rate if rate else None,
            best=best,
        )

    # Tune callback events (forwarded by tune_bridge.DriverCallback).

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        snap = self.measure(trials)
        self.snapshot = snap
        if self._progress is not None:
            self._progress.update(self._render(snap))
            return
        counts = (snap.done, snap.running, snap.pending, snap.errors)
        due = time.monotonic() - self._last_print >= self.interval_s and snap.steps_per_s
        first_eta = snap.eta_s is not None and not self._eta_shown
        if counts != self._last_counts or due or first_eta:
            self._last_counts = counts
            self._eta_shown = self._eta_shown or snap.eta_s is not None
            self._print(snap)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.say(
            f"rlsweep: trial {self._label(trial)} ({trial.trial_id}) failed; see its error.txt"
        )
