"""`run_sweep()` and `resume_sweep()`: every trial of a validated spec run on Ray, to a table.

Where the sweep runs is an argument, never part of the spec: by default an embedded local Ray
instance; `address=` joins a running cluster. What a run leans on: the experiment dir
(`experiment_dir`: one sweep per dir, the run's record), where trials fit (`fits`), the Ray
session and the driver's console (`session`), Tune (`tune_bridge`), and the table it returns
(`results.trials_table`).
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pandas as pd

from rlsweep.experiment.experiment_dir import (
    SWEEP_FILE,
    Instance,
    can_resume,
    experiment_path,
    holds_sweep,
    record_end,
    record_run,
    record_start,
    refuse_existing,
    run_info,
    sweep_spec,
)
from rlsweep.experiment.history import MAX_FAILURES
from rlsweep.experiment.interrupt import Interrupts, SweepInterrupted, TimeLimit
from rlsweep.plan.placement import starts_local_ray
from rlsweep.results.results import (
    INCOMPLETE,
    TERMINATED,
    ended_early,
    resume_points,
    trials_table,
)
from rlsweep.run import tracking
from rlsweep.run.fits import check_fits
from rlsweep.run.preflight import check_spec_storage, on_target, plan_on, refuse_repeats
from rlsweep.run.session import Dashboard, machine_record, quiet_console, ray_session
from rlsweep.run.tracking import WandbSettings
from rlsweep.spec.spec import SweepSpec
from rlsweep.spec.validators import is_int
from rlsweep.storage import filesystem, is_uri, user_path

EXIT_FAILED_TRIALS = 1
"""The exit code of a sweep that ran to its end with trials that did not finish."""


@dataclass
class SweepResult:
    """A finished (or stopped) sweep: its spec, where it lives, and one row per trial."""

    spec: SweepSpec
    path: Path | str
    """The experiment dir: a local absolute Path, or a URI string (s3://...)."""
    trials: pd.DataFrame
    """One row per trial that started, as `rlsweep report` counts it (`results.final_scores`:
    the same loader and status rule): game, seed, variant, the swept params, the stable
    metrics, iteration, status (TERMINATED / INCOMPLETE / ERROR), error and trial_dir."""
    ended_early: frozenset[str] = frozenset()
    """The trial dirs' names of the INCOMPLETE trials Tune ended before their budget (a
    scheduler's stop, ASHA's): ended as the sweep meant, not failed."""

    def to_dataframe(self) -> pd.DataFrame:
        return self.trials.copy()

    @property
    def ended(self) -> pd.Series:
        """Per trial, whether it ended: TERMINATED, or ended early by the sweep's scheduler."""
        early = self.trials["trial_dir"].map(lambda d: PurePosixPath(str(d)).name)
        return (self.trials["status"] == TERMINATED) | early.isin(self.ended_early)

    @property
    def exit_code(self) -> int:
        """What the command that ran it exits with (`rlsweep run`, `ablate`, `resume`, a
        SageMaker job): 0 when every trial ended (TERMINATED, or stopped early by the sweep's
        scheduler), else `EXIT_FAILED_TRIALS`."""
        return 0 if self.ended.all() else EXIT_FAILED_TRIALS


def run_sweep(
    spec: SweepSpec | str | Path,
    *,
    address: str | None = None,
    storage_path: str | None = None,
    trainable=None,
    num_cpus: int | None = None,
    jemalloc: bool = True,
    max_failures: int = MAX_FAILURES,
    wandb: bool | str | WandbSettings | dict | None = None,
    dashboard: bool | Dashboard = False,
    instance: Instance | None = None,
    overwrite: bool = False,
    verbose: bool = False,
    time_limit: float | None = None,
) -> SweepResult:
    """Run every trial of `spec` and return the per-trial table.

    One sweep per directory: if `<storage>/<name>` already holds a sweep this raises
    `SweepExistsError` (before Ray starts) unless `overwrite`, which deletes it first. Continue
    an unfinished sweep with `resume_sweep` instead.

    Ctrl-C (SIGINT) or SIGTERM while it runs: running trials checkpoint after their current
    iteration and stop (a second signal stops them at once), and this raises `SweepInterrupted`,
    whose `result` holds the table (those trials INCOMPLETE) and whose `command` is the
    `rlsweep resume <dir>` that continues the sweep. Signals are handled when run_sweep is
    called from the main thread (else Tune's default handling applies).

    `time_limit` (seconds, counted from this call): before it, running trials checkpoint after
    their current iteration and stop, as on Ctrl-C, and this raises `SweepInterrupted` with
    `exit_code` `interrupt.EXIT_TIME_LIMIT`: for a machine held for a limited time (a spot node,
    a SLURM allocation, a SageMaker job's max_run). The experiment dir can then be moved
    anywhere and resumed there (`resume_sweep`).

    spec: a SweepSpec or the path of a YAML spec (validated before Ray starts). Where it sets
        no resources, its trials get the layout `rlsweep run` gives them where they run
        (`rlsweep.plan.layout`: packed on this machine's GPUs, or 1 CPU each), said in a line.
    address: a running Ray cluster ("auto", "ray://..."); None starts Ray in-process.
    storage_path: overrides the spec's storage_path (a directory or s3:// URI).
    trainable: the Tune trainable (default: the real RLlib trial, `train_trial`).
    num_cpus: CPUs of the embedded Ray instance (default: all).
    jemalloc: preload Ray's jemalloc into trial processes.
    max_failures: retries of a crashed trial, each from its last checkpoint.
    wandb: log to W&B (True, a mode such as "offline", or `WandbSettings`); off by default.
    dashboard: start the Ray dashboard (on 127.0.0.1:8265 unless a `Dashboard` says otherwise).
    instance: the instance type trials run on, recorded so reports can price the sweep.
    overwrite: delete a sweep already at `<storage>/<name>` instead of refusing to run.
    verbose: Tune's own progress reporter and the trials' output on the console, instead of
        rlsweep's one-line progress view (`rlsweep.run.progress`).
    """
    from rlsweep.run.tune_bridge import build_tuner

    limit = TimeLimit(time_limit) if time_limit is not None else None
    num_cpus = _check_cpus(num_cpus)
    if not isinstance(spec, SweepSpec):
        spec = SweepSpec.from_yaml(spec)
    # Trials laid out where they run, as `rlsweep run` lays them out (it passes a laid-out spec).
    laid, layout = on_target(spec, address, num_cpus)
    if laid is not spec:
        print(layout.line(), flush=True)
        spec = laid
    if starts_local_ray(address):  # before Ray starts; a cluster is checked once joined
        check_fits(spec, address, num_cpus)
    wandb_settings = tracking.settings_from(wandb)
    tracking.check_credentials(wandb_settings)
    refuse_repeats(spec)
    # Where the results go can be written, before Ray starts (a bucket is asked by
    # `rlsweep run`'s preflight, or by Ray once it writes there).
    check_spec_storage(spec, remote=False, storage_path=storage_path)
    experiment = experiment_path(spec, storage_path)
    refuse_existing(spec, experiment, overwrite)
    with (
        quiet_console(experiment, verbose),
        _driver(
            "run", spec, experiment, address, num_cpus, jemalloc, dashboard, verbose, limit
        ) as interrupts,
    ):
        wandb_record = wandb_settings.to_dict() if wandb_settings else None
        record_run(spec, experiment, address=address, instance=instance, wandb=wandb_record)
        callbacks = [tracking.callback(spec, wandb_settings, experiment)] if wandb_settings else []
        tuner = build_tuner(
            spec,
            trainable or _real_trainable(),
            storage_path=storage_path,
            callbacks=callbacks,
            max_failures=max_failures,
            stop_flag=interrupts.stop_flag,
            verbose=verbose,
        )
        _fit(tuner, wandb_settings)
    return _finish(spec, experiment, wandb_settings, interrupts)


def resume_sweep(
    experiment: str | Path,
    *,
    address: str | None = None,
    trainable=None,
    num_cpus: int | None = None,
    jemalloc: bool = True,
    wandb: bool | str | WandbSettings | dict | None = None,
    dashboard: bool | Dashboard = False,
    verbose: bool = False,
    time_limit: float | None = None,
) -> SweepResult:
    """Continue an interrupted sweep (Ctrl-C, a time limit, driver killed, machine rebooted, spot
    reclaimed), wherever its experiment dir now is (moved or copied: nothing in it holds its
    old path in a way that matters).

    Finished trials are kept as they are; unfinished and errored ones continue from their
    newest complete checkpoint on disk, whatever Tune's last saved state says (a driver killed
    without warning saved it before the trials' last checkpoints), or start, if they had none;
    rows they reported after that checkpoint are dropped, since they report them again
    (`recovery.reconcile`). What each continues from is printed first (`resume_points`); where
    every trial has ended, that is all: no Ray starts, and the table is returned.
    The spec comes from the sweep's own `sweep.yaml`. Interrupts, `time_limit` and `verbose` as
    in `run_sweep`.
    """
    from rlsweep.experiment.recovery import reconcile
    from rlsweep.run.tune_bridge import check_restorable, restore_tuner

    limit = TimeLimit(time_limit) if time_limit is not None else None
    num_cpus = _check_cpus(num_cpus)
    experiment = filesystem(experiment)[1] if not is_uri(str(experiment)) else str(experiment)
    if not can_resume(experiment):
        raise FileNotFoundError(f"{experiment}: no Tune experiment state to resume from")
    spec = sweep_spec(experiment)
    if spec is None:
        raise FileNotFoundError(f"{experiment}: no {SWEEP_FILE} (not run by rlsweep?)")
    check_restorable(spec, experiment)
    if starts_local_ray(address):
        check_fits(spec, address, num_cpus)
    # The sweep's W&B settings (as it recorded them, unless given): its callback, made anew
    # with its run dir where the sweep is now, and the report run.
    wandb_settings = tracking.settings_from(
        wandb if wandb is not None else run_info(experiment).get("wandb")
    )
    tracking.check_credentials(wandb_settings)
    with quiet_console(experiment, verbose):
        restarts = reconcile(experiment)
        points = resume_points(spec, experiment, restarts)
        print("\n".join(points.lines), flush=True)
        if not points.to_run:  # no Ray to start: Tune's restore would run nothing
            print(f"rlsweep: every trial of {spec.name} has ended: nothing to resume", flush=True)
            return _finish(spec, experiment, wandb_settings, None)
        with _driver(
            "resume", spec, experiment, address, num_cpus, jemalloc, dashboard, verbose, limit
        ) as interrupts:
            tuner = restore_tuner(
                spec,
                trainable or _real_trainable(),
                experiment,
                stop_flag=interrupts.stop_flag,
                verbose=verbose,
                callbacks=[tracking.callback(spec, wandb_settings, experiment)]
                if wandb_settings
                else None,
            )
            _fit(tuner, wandb_settings)
    return _finish(spec, experiment, wandb_settings, interrupts)


def _check_cpus(num_cpus: object) -> int | None:
    """`num_cpus` as run_sweep and resume_sweep take it (the CLI's `--num-cpus` checks the same
    at its parse): None, or an integer >= 1 (a numpy one too), as an int."""
    if num_cpus is None:
        return None
    if not is_int(num_cpus, 1):
        raise ValueError(f"num_cpus: got {num_cpus!r}; allowed: an integer >= 1, or None")
    return int(num_cpus)


def run_or_resume(spec: SweepSpec | str | Path, **kwargs) -> SweepResult:
    """`resume_sweep` where `spec`'s experiment dir already holds a sweep (a restarted spot job
    finds its checkpoints there), else `run_sweep`: over what an earlier start left where it
    stopped before Tune took the sweep up (nothing to resume, and refusing would fail every
    restart alike). kwargs: run_sweep's; a resume takes those of them that resume_sweep has
    (the others the sweep recorded when it started)."""
    if not isinstance(spec, SweepSpec):
        spec = SweepSpec.from_yaml(spec)
    experiment = experiment_path(spec, kwargs.get("storage_path"))
    if can_resume(experiment):
        options = inspect.signature(resume_sweep).parameters
        return resume_sweep(experiment, **{k: v for k, v in kwargs.items() if k in options})
    if holds_sweep(experiment):
        print(f"rlsweep: {experiment} holds a sweep that stopped before Tune started it: run anew")
        kwargs["overwrite"] = True
    return run_sweep(spec, **kwargs)


@contextlib.contextmanager
def _driver(
    command: str,
    spec: SweepSpec,
    experiment: str,
    address: str | None,
    num_cpus: int | None,
    jemalloc: bool,
    dashboard: bool | Dashboard,
    verbose: bool,
    time_limit: TimeLimit | None = None,
) -> Iterator[Interrupts]:
    """For one `fit`: Ray (every trial checked to fit what it offers), graceful interrupts and
    the time limit (`rlsweep.experiment.interrupt`) and, unless `verbose`, the progress view
    (`rlsweep.run.progress`), both fed by Tune's callback events. The experiment dir's run
    record (`experiment_dir.RUNS_FILE`) gets the driver's start (`command`: run or resume),
    where it runs and the sweep's plan there, and how it ended."""
    from rlsweep.experiment.recovery import RestartedTrials
    from rlsweep.run.progress import ProgressView
    from rlsweep.run.tune_bridge import listening

    with ray_session(
        address=address, num_cpus=num_cpus, jemalloc=jemalloc, dashboard=dashboard, verbose=verbose
    ):
        check_fits(spec, address, num_cpus)
        machine = machine_record()
        plan = plan_on(spec, machine["cpus"], machine["gpus"])
        started = time.monotonic()
        record_start(
            experiment,
            command,
            machine=machine,
            time_limit_s=time_limit.seconds if time_limit else None,
            plan=plan.record() if plan else None,
        )
        view = None if verbose else ProgressView(spec)
        interrupts = Interrupts(say=view.say if view else print, time_limit=time_limit)
        outcome = "ended"
        try:
            with interrupts, listening(interrupts, RestartedTrials(), *([view] if view else [])):
                where = user_path(experiment)
                print(f"rlsweep: results in {where} (TensorBoard: tensorboard --logdir {where})")
                if view is not None:
                    view.start()
                try:
                    yield interrupts
                finally:
                    if view is not None:
                        view.stop()
            if interrupts.stopped:
                outcome = interrupts.reason()
        except BaseException as e:
            outcome = f"failed: {type(e).__name__}"
            raise
        finally:
            record_end(experiment, outcome, time.monotonic() - started)


def _real_trainable():
    from rlsweep.trial.trainable import train_trial

    return train_trial


def _fit(tuner, wandb_settings: WandbSettings | None) -> None:
    if wandb_settings is None:
        tuner.fit()
        return
    with tracking.mode_env(wandb_settings.resolved_mode()):
        tuner.fit()


def _finish(
    spec: SweepSpec,
    experiment: str,
    wandb_settings: WandbSettings | None,
    interrupts: Interrupts | None,
) -> SweepResult:
    """The table from the experiment dir (as `rlsweep report` reads it); `SweepInterrupted`
    if a signal or the time limit stopped the sweep (`interrupts`: None where nothing ran);
    the W&B report run if the sweep logs to W&B."""
    path = experiment if is_uri(experiment) else Path(experiment)
    stopped = interrupts is not None and interrupts.stopped
    if stopped:
        # Ray is down: what is on disk is final. A trial that wrote its checkpoint after the
        # driver stopped waiting for it, or whose last report Tune never logged, stands where
        # that checkpoint is, for the table and the stop line as for the resume, which does
        # the same first (idempotent).
        from rlsweep.experiment.recovery import reconcile

        reconcile(experiment)
    trials = trials_table(spec, experiment)
    early = ended_early(experiment) if (trials["status"] == INCOMPLETE).any() else set()
    result = SweepResult(spec, path, trials, frozenset(early))
    if stopped and not (len(trials) >= spec.num_trials and result.ended.all()):
        # Asked to stop, and some trial had not ended (a trial that ended as the limit came,
        # the sweep's last, leaves nothing to resume: the sweep ran to its end).
        raise SweepInterrupted(result, interrupts.signum, interrupts.reason())
    if wandb_settings is not None:
        tracking.log_report(spec, wandb_settings, experiment)
    return result
