"""The live progress view of a sweep (`rlsweep run`, `rlsweep resume`, `run_sweep()`).

One line replaces Tune's verbose reporter: trials done/running/pending, env steps done of the
sweep's total, throughput, ETA and the best score so far. On a terminal it is a `rich` progress
bar redrawn in place; elsewhere (a log file, CI) the same line is printed, without ANSI codes,
whenever a trial starts or ends, when the first ETA is known, and otherwise every `interval_s`
seconds (default 30, or $RLSWEEP_PROGRESS_S).

The ETA is `rlsweep plan`'s model of each trial (its start, its iterations, its evaluations:
`rlsweep.plan.plan.Throughput.trial`) fitted to the sweep as it runs: training and evaluating each
take the pooled ratio of the time trials have spent on them (`time/wall_s - time/eval_s`,
`time/eval_s`) to what the model says that work costs. An evaluation that lasts a minute then
moves the ETA only as far as it differs from the evaluations before it, not by the minute (an
ETA from env steps per second drops while trials evaluate, and jumps when they are back). The
remaining trials run as many at once as have run, and between reports each running trial's
remainder counts down with the clock. A trial a scheduler stops early (ASHA) takes its remaining
work off the sweep. "best" is the best score any trial has reported so far in this run (a
resume starts from its trials' checkpoints' scores): it never goes down, although a trial's
latest evaluation may. The env-step counter never goes back (a resumed trial
reports again from its checkpoint's steps) nor past the total (a trial's last batch may overshoot
its budget). Where no trial runs or starts for `STARVED_S` while some wait, the line says that
no trial can start, what they need and what the cluster has free (others may hold it).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from rlsweep import formatting
from rlsweep._ray_compat import ENDED, ERROR
from rlsweep.experiment import history
from rlsweep.metrics import ENV_STEPS, EVAL_S, TUNE_ITERATION, WALL_S
from rlsweep.plan import plan
from rlsweep.plan.placement import placement
from rlsweep.spec.config import TrialConfig

STARVED_S = 5.0
"""Seconds with no trial running and none starting, while some wait, before the line says that
no trial can start and for want of what (`Resources`)."""


@dataclass(frozen=True)
class Resources:
    """What the Ray a sweep runs on offers now (`ray_resources`)."""

    total: dict[str, float]
    free: dict[str, float]
    starting: bool
    """A placement group made since the sweep started is ready: a trial is starting."""
    nodes: tuple[dict[str, float], ...] = ()
    """What each live node has in all (a trial runs on one node; empty: not known)."""


def ray_resources(seen: set[str]) -> Resources | None:
    """The driver's Ray's resources now, and whether a placement group made since `seen` was
    first filled (the ids of the groups there were then, other jobs') is ready; None without
    Ray. Public Ray calls (`ray.cluster_resources`, `ray.util.placement_group_table`,
    `ray.nodes`)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    from ray.util import placement_group_table

    table = placement_group_table()
    if not seen:
        seen.update(table)
        seen.add("")  # filled, even where there were none
    starting = any(pg.get("state") == "CREATED" for k, pg in table.items() if k not in seen)
    nodes = tuple(dict(n["Resources"]) for n in ray.nodes() if n.get("Alive"))
    return Resources(
        dict(ray.cluster_resources()), dict(ray.available_resources()), starting, nodes
    )


def _fits_a_node(bundle: dict[str, float], nodes: tuple[dict[str, float], ...]) -> bool:
    return any(all(v <= n.get(k, 0) + 1e-6 for k, v in bundle.items()) for n in nodes)


def _amount(resources: dict[str, float], key: str) -> str:
    return formatting.plural(resources.get(key, 0), key)


@dataclass(frozen=True)
class _Model:
    """`rlsweep.plan.plan`'s costs of one trial: a whole one, and per iteration and evaluation."""

    cfg: TrialConfig
    start_s: float
    iteration_s: float
    evaluation_s: float

    @classmethod
    def of(cls, cfg: TrialConfig, rate: plan.Throughput) -> _Model:
        t = rate.trial(cfg)
        return cls(
            cfg,
            start_s=t.start_s,
            iteration_s=t.train_s / t.iterations,
            evaluation_s=t.eval_s / t.evaluations,
        )

    @property
    def iterations(self) -> int:
        return plan.iterations(self.cfg)

    def evaluations(self, iterations: int) -> int:
        """Evaluations made by the end of iteration `iterations` (the last one evaluates)."""
        if iterations >= self.iterations:
            return plan.evaluations(self.cfg, iterations)
        return iterations // self.cfg.eval_interval

    def train_s(self, iterations: float) -> float:
        return iterations * self.iteration_s

    def eval_s(self, evaluations: float) -> float:
        return evaluations * self.evaluation_s


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
    waiting: str | None = None
    """Why no trial can start, where none can (`STARVED_S`)."""

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
                f"ETA {formatting.duration(self.eta_s)}" if self.eta_s is not None else "ETA -",
            ]
        )

    def best_part(self, metric: str) -> str | None:
        return None if self.best is None else f"best {metric} {self.best[0]:.3g} ({self.best[1]})"

    def line(self, metric: str) -> str:
        parts = [self.trials_part(), self.steps_part(), self.best_part(metric), self.waiting]
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
        throughput: plan.Throughput | None = None,
        resources: Callable[[], Resources | None] | None = None,
    ) -> None:
        """`throughput`: the plan's figures the ETA starts from (default: the benchmark's, as
        `rlsweep plan` reads them); `resources`: what the Ray the sweep runs on offers now
        (default: `ray_resources`), asked when no trial runs (`STARVED_S`)."""
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
        self._rate = plan.measured_throughput() if throughput is None else throughput
        self._spec_models = [_Model.of(t, self._rate) for t in spec.trials()]
        self._models: dict[str, _Model] = {}
        self._seen: dict[tuple[str, int], float] = {}  # (trial, iteration) -> when first seen
        self._slots = 1  # trials seen running at once
        self._best: tuple[float, str] | None = None
        self._read_back: set[str] = set()  # trials whose earlier reports were read (`_earlier`)
        self._steps: dict[str, float] = {}  # per trial, the most env steps it has reported
        seen: set[str] = set()
        self._resources = resources or (lambda: ray_resources(seen))
        self._idle_since: float | None = None
        self._waiting: tuple[float, str | None] = (-math.inf, None)  # (asked at, why)

    # --- output -------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        """A line above the live view (or between the plain lines)."""
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(f"[{time.strftime('%H:%M:%S')}] {text}", file=self.stream, flush=True)

    def start(self) -> None:
        """Called before Tune's loop: the placement groups there are now are other jobs' (a
        trial's, made later, says it is starting: `Resources.starting`)."""
        self._resources()
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
            parts += [f"{k}={formatting.searched(cfg[k])}" for k in self.spec.space if k in cfg]
            self._labels[trial.trial_id] = " ".join(parts)
        return self._labels[trial.trial_id]

    def _model(self, trial: Any) -> _Model:
        if trial.trial_id not in self._models:
            try:
                cfg = self.spec.resolve({**self.spec.defaults(), **(trial.config or {})})
                model = _Model.of(TrialConfig.from_dict(cfg), self._rate)
            except Exception:  # a config the spec cannot resolve: the spec's first trial
                model = self._spec_models[0]
            self._models[trial.trial_id] = model
        return self._models[trial.trial_id]

    def _best_of(self, trials: list) -> tuple[float, str] | None:
        """The best score reported so far, by any trial at any time (not the best of the
        trials' latest scores, which falls when a trial's next evaluation is worse), its
        reports before a resume too (`_earlier`)."""
        for t in trials:
            values = [(t.last_result or {}).get(self.metric)]
            if t.trial_id not in self._read_back:
                self._read_back.add(t.trial_id)
                values += self._earlier(t)
            for value in values:
                if not (isinstance(value, int | float) and math.isfinite(value)):
                    continue
                if self._best is None or (
                    value > self._best[0] if self.mode == "max" else value < self._best[0]
                ):
                    self._best = (float(value), self._label(t))
        return self._best

    def _earlier(self, trial: Any) -> list[Any]:
        """The trial's scores in its result.json when first seen: a resumed sweep's reports
        before the resume, which Tune gives a restored trial only the last of (a finished
        trial's last evaluation, not its best: the best fell from -0.00321 to -0.00962 at a
        resume). A trial dir not on this disk (yet) has none here."""
        path = getattr(trial, "local_path", None)
        results = os.path.join(path, "result.json") if path else None
        if results is None or not os.path.isfile(results):
            return []
        with open(results, errors="replace") as f:
            return [row.get(self.metric) for row in history.result_rows(f.read())]

    def _eta(self, trials: list, now: float) -> float | None:
        """Seconds left: the plan's model of every unfinished trial's remaining work, scaled by
        how long trials have actually taken for the work they reported (training and
        evaluating apart), run as many at once as have run; None before any report."""
        seen = [(t, self._model(t), t.last_result or {}) for t in trials]
        reported = [(m, r) for _, m, r in seen if r.get(TUNE_ITERATION)]
        if not reported:
            return None
        train_model = eval_model = train_spent = eval_spent = 0.0
        for m, r in reported:
            done = int(r[TUNE_ITERATION])
            evals = m.evaluations(done)
            train_spent += max(float(r.get(WALL_S, 0.0)) - float(r.get(EVAL_S, 0.0)), 0.0)
            eval_spent += float(r.get(EVAL_S, 0.0))
            train_model += m.train_s(done)
            eval_model += m.eval_s(evals)
        train_f = train_spent / train_model if train_model and train_spent else 1.0
        eval_f = eval_spent / eval_model if eval_model and eval_spent else train_f
        running, waiting = [], []
        for t, m, r in seen:
            if t.status in ENDED:
                continue
            done = int(r.get(TUNE_ITERATION) or 0)
            left = train_f * m.train_s(m.iterations - done)
            left += eval_f * m.eval_s(m.evaluations(m.iterations) - m.evaluations(done))
            if not done:
                left += train_f * m.start_s
            if t.status == "RUNNING":
                # Counts down between reports (from when this report, or the trial, was seen).
                key = (t.trial_id, done)
                since = self._seen.setdefault(key, now)
                running.append(max(left - (now - since), 0.0))
            else:
                waiting.append(left)
        unseen = max(self.total_trials - len(trials), 0)
        if unseen:
            m = self._spec_models[0]
            whole = train_f * (m.start_s + m.train_s(m.iterations))
            waiting += [whole + eval_f * m.eval_s(m.evaluations(m.iterations))] * unseen
        self._slots = max(self._slots, len(running), 1)
        return plan.makespan(sorted(running, reverse=True) + waiting, self._slots)

    def measure(self, trials: list, now: float | None = None) -> Snapshot:
        now = time.monotonic() if now is None else now
        done = errors = running = 0
        for t in trials:
            # Never backwards (a resumed trial reports again from its checkpoint's steps), never
            # past its budget (its last iteration's batch may overshoot it).
            reported = self.spec.counted_steps((t.last_result or {}).get(ENV_STEPS) or 0)
            self._steps[t.trial_id] = max(self._steps.get(t.trial_id, 0.0), reported)
            if t.status in ENDED:
                done += 1
                errors += t.status == ERROR
            else:
                running += t.status == "RUNNING"
        steps = sum(self._steps.values())
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
            total_steps=float(self.spec.sweep_env_steps),
            steps_per_s=rate,
            eta_s=self._eta(trials, now),
            best=self._best_of(trials),
            waiting=self._starved(trials, running, max(pending, 0), now),
        )

    def _starved(self, trials: list, running: int, pending: int, now: float) -> str | None:
        """Why no trial can start, once none has run or started for STARVED_S while some
        wait (asked of Ray at most every STARVED_S / 2): what the pending trials need, and
        what is free of what the cluster has; None otherwise."""
        if running or not pending:
            self._idle_since = None
            return None
        if self._idle_since is None:
            self._idle_since = now
        if now - self._idle_since < STARVED_S:
            return None
        asked, why = self._waiting
        if now - asked < STARVED_S / 2:
            return why
        why = None
        state = self._resources()
        if state is not None and not state.starting:
            waiting = [t for t in trials if t.status not in ENDED] or trials
            cfg = self._model(waiting[0]).cfg if waiting else self._spec_models[0].cfg
            p = placement(cfg)
            need = {"CPU": p.cpus, "GPU": p.gpus}
            short = [k for k, n in need.items() if n > state.free.get(k, 0) + 1e-6]
            wants = " + ".join(_amount(need, k) for k in need if need[k])
            # Each bundle goes on one node: one that no node holds in all never starts.
            homeless = [b for b in p.bundles if state.nodes and not _fits_a_node(b, state.nodes)]
            if homeless:
                bundle = homeless[0]
                has = "; ".join(
                    " + ".join(_amount(n, k) for k in bundle if n.get(k)) or "none of it"
                    for n in state.nodes
                )
                why = (
                    f"no trial can start: {pending} pending, each needs "
                    + " + ".join(_amount(bundle, k) for k in bundle)
                    + f" on one node, and no node has as much ({has})"
                )
            elif short:
                held = {k: state.total.get(k, 0) - state.free.get(k, 0) for k in need}
                why = (
                    f"no trial can start: {pending} pending, each needs {wants}; free "
                    + ", ".join(
                        f"{state.free.get(k, 0):g} of {_amount(state.total, k)}"
                        + (f" (others hold {held[k]:g})" if held[k] > 0 else "")
                        for k in need
                        if need[k] or state.total.get(k)
                    )
                )
        self._waiting = (now, why)
        return why

    # Tune callback events (forwarded by tune_bridge.DriverCallback).

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        snap = self.measure(trials)
        self.snapshot = snap
        if self._progress is not None:
            self._progress.update(self._render(snap))
            return
        counts = (snap.done, snap.running, snap.pending, snap.errors, snap.waiting)
        due = time.monotonic() - self._last_print >= self.interval_s and snap.steps_per_s
        first_eta = snap.eta_s is not None and not self._eta_shown
        if counts != self._last_counts or due or first_eta:
            self._last_counts = counts
            self._eta_shown = self._eta_shown or snap.eta_s is not None
            self._print(snap)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A crashed trial Tune retries from its checkpoint: one line (`history.recover_line`)."""
        self.say(history.recover_line(trial, self._label(trial)))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A trial that ended in failure: one line (`history.error_line`)."""
        self.say(history.error_line(trial, self._label(trial)))
