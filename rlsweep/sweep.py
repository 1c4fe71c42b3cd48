"""`run_sweep()`: validate a spec on the driver, start (or join) Ray, run every trial, collect.

Where the sweep runs is an argument, never part of the spec: by default an embedded local Ray
instance; `address=` joins a running cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from rlsweep import __version__, formatting, tracking
from rlsweep import metrics as M
from rlsweep import results as R
from rlsweep._ray_compat import DRIVER_LOGS, bundled_jemalloc, quiet_local_ray
from rlsweep.environ import set_env
from rlsweep.interrupt import SweepInterrupted, resume_command
from rlsweep.placement import starts_local_ray
from rlsweep.results import RUN_FILE, SWEEP_FILE, run_info, sweep_spec
from rlsweep.spec import VARIANT, SpecError, SweepSpec, check_local_resources, check_resources
from rlsweep.storage import filesystem, is_uri
from rlsweep.tracking import WandbSettings


def jemalloc_path() -> str | None:
    """Ray ships jemalloc; preloading it into trial processes ~2.4x'es RLlib PPO on CPU."""
    return bundled_jemalloc()


JEMALLOC_CONF = (
    "oversize_threshold:1,background_thread:true,metadata_thp:auto,"
    "dirty_decay_ms:-1,muzzy_decay_ms:-1"
)
"""jemalloc settings for trial processes. Without them jemalloc hands the pages of every large
tensor back to the OS and faults them in again on the next allocation: measured on a 2-core
machine, an RLlib PPO trial ran ~130 env-steps/s with jemalloc alone and ~258 with these."""


def runtime_env(jemalloc: bool = True) -> dict[str, Any]:
    """The env of every trial process. Ray starts workers at nice 15 unless told otherwise
    (`RAY_worker_niceness`, read by each worker): a trial would then yield its cores to any other
    program on the box (the scheduler weighs nice 15 at 36 against 1024 for nice 0), whereas a
    plain training script runs at the default priority 0. Trials report it as `perf/nice`."""
    env_vars = {"RAY_worker_niceness": "0"}
    if jemalloc and (path := jemalloc_path()):
        env_vars["LD_PRELOAD"] = path
        env_vars["MALLOC_CONF"] = JEMALLOC_CONF
    return {"env_vars": env_vars}


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

    def to_dataframe(self) -> pd.DataFrame:
        return self.trials.copy()


def trials_table(spec: SweepSpec, experiment: str) -> pd.DataFrame:
    """`SweepResult.trials` of the experiment dir `experiment` (local or a URI)."""
    swept = ([VARIANT] if spec.variants else []) + list(spec.space)
    columns = ["game", "seed", *swept, *M.METRICS, R.ITERATION, "status", "error", "trial_dir"]
    try:
        final = R.final_scores(R.load_curves(experiment))
    except FileNotFoundError:  # stopped before any trial started
        return pd.DataFrame(columns=columns)
    final["trial_dir"] = [f"{experiment}/{t}" for t in final["trial_id"]]
    for col in swept:
        if col not in final:
            final[col] = None
    df = final[columns]
    if spec.variants:  # in the spec's order, as the write-up's columns are
        df = df.assign(variant=pd.Categorical(df[VARIANT], categories=list(spec.variants)))
    return df.sort_values(["game", *swept, "seed"], kind="stable").reset_index(drop=True)


class SweepExistsError(SpecError):
    """The results dir of a spec already holds a sweep: one sweep per directory, so that a
    report never mixes two runs' trials and `resume` knows which spec to continue."""


def holds_sweep(experiment: str) -> bool:
    """`experiment` (a local dir or a URI) holds a sweep: rlsweep's or Tune's files, or
    trial dirs."""
    fs, root = filesystem(experiment)
    if fs is None:
        path = Path(root)
        if not path.is_dir():
            return False
        names = {p.name for p in path.iterdir()}
        trial_dirs = any((p / "params.json").exists() for p in path.iterdir() if p.is_dir())
        return bool(names & {SWEEP_FILE, "tuner.pkl"}) or trial_dirs
    import pyarrow.fs as pafs

    infos = fs.get_file_info([f"{root}/{SWEEP_FILE}", f"{root}/tuner.pkl"])
    return any(i.type != pafs.FileType.NotFound for i in infos)


def _clear(spec: SweepSpec, experiment: str) -> None:
    """Delete the sweep at `experiment` (`overwrite=True`), and its local Optuna study."""
    fs, root = filesystem(experiment)
    if fs is None:
        shutil.rmtree(root, ignore_errors=True)
    else:
        fs.delete_dir(root)
    url = spec.optuna_storage_url(experiment)
    if not spec.search.optuna_storage and url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)


def _refuse_existing(spec: SweepSpec, experiment: str, overwrite: bool) -> None:
    if not holds_sweep(experiment):
        return
    if overwrite:
        _clear(spec, experiment)
        return
    raise SweepExistsError(
        experiment,
        "",
        f"already holds a sweep; continue it with `{resume_command(experiment)}`, replace it "
        f"by running again with --overwrite (run_sweep(overwrite=True)), or give the spec "
        f"another name",
    )


def experiment_path(spec: SweepSpec, storage_path: str | None = None) -> str:
    """`<storage>/<name>`: a local absolute path or a URI."""
    storage_path = storage_path or spec.storage_path
    if is_uri(storage_path):
        return f"{storage_path.rstrip('/')}/{spec.name}"
    return str(Path(storage_path).expanduser().resolve() / spec.name)


def _write(experiment: str, name: str, text: str) -> None:
    fs, root = filesystem(experiment)
    if fs is None:
        Path(root).mkdir(parents=True, exist_ok=True)
        (Path(root) / name).write_text(text)
        return
    fs.create_dir(root, recursive=True)
    with fs.open_output_stream(f"{root}/{name}") as f:
        f.write(text.encode())


def record_run(
    spec: SweepSpec,
    experiment: str,
    *,
    address: str | None,
    instance: Instance | None,
    wandb: WandbSettings | None,
) -> None:
    """Write SWEEP_FILE and RUN_FILE (no credentials: nothing here comes from the env)."""
    from rlsweep.tracking import git_commit

    _write(experiment, SWEEP_FILE, spec.to_yaml())
    run = {
        "rlsweep_version": __version__,
        "git_commit": git_commit(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "ray_address": address or "local",
        "instance_type": instance.type if instance else None,
        "spot": instance.spot if instance else None,
        # W&B settings (project, mode, ...; never a key), so a resume logs the same way.
        "wandb": dataclasses.asdict(wandb) if wandb else None,
    }
    _write(experiment, RUN_FILE, json.dumps(run, indent=2) + "\n")


@dataclass(frozen=True)
class Instance:
    """The machine type trials run on, recorded for cost reporting (`rlsweep.cost`)."""

    type: str
    """Cloud instance type, e.g. c6i.8xlarge."""
    spot: bool = False
    """Billed at the spot price."""


@dataclass(frozen=True)
class Dashboard:
    """The Ray dashboard (Tune's live view): loopback only unless `host` says otherwise."""

    port: int = 8265
    host: str = "127.0.0.1"


@contextlib.contextmanager
def ray_session(
    *,
    address: str | None,
    num_cpus: int | None,
    jemalloc: bool,
    dashboard: Dashboard | None,
    verbose: bool = False,
) -> Iterator[None]:
    """Start Ray here (or join `address`) for the length of a sweep; stop it if started here.
    Trials' own output (RLlib's config dumps and warnings) reaches this console only if
    `verbose`; it is always in each trial dir's stdout/stderr files (Tune's log_to_file)."""
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        local = starts_local_ray(address)
        kwargs: dict[str, Any] = {}
        if dashboard is not None and local:
            kwargs = {"dashboard_host": dashboard.host, "dashboard_port": dashboard.port}
        # A Ray started here runs beside the trials on this machine's cores: without the
        # background work only a dashboard or a verbose console would read (_ray_compat).
        quiet = (
            quiet_local_ray(log_monitor=verbose, dashboard=dashboard is not None)
            if local
            else contextlib.nullcontext({})
        )
        with quiet as quiet_kwargs:
            ctx = ray.init(
                address=address,
                num_cpus=num_cpus if local else None,
                runtime_env=runtime_env(jemalloc),
                include_dashboard=dashboard is not None if local else None,
                configure_logging=True,
                logging_level="WARNING",
                log_to_driver=verbose,
                **kwargs,
                **quiet_kwargs,
            )
        if dashboard is not None and ctx.dashboard_url:
            print(f"rlsweep: Ray dashboard at http://{ctx.dashboard_url}", flush=True)
            if os.environ.get("RAY_AUTH_MODE", "token") != "disabled":
                print("rlsweep: its login token is in ~/.ray/auth_token", flush=True)
    try:
        yield
    finally:
        if started_here:
            ray.shutdown()


def run_sweep(
    spec: SweepSpec | str | Path,
    *,
    address: str | None = None,
    storage_path: str | None = None,
    trainable=None,
    num_cpus: int | None = None,
    jemalloc: bool = True,
    max_failures: int = 2,
    wandb: bool | str | WandbSettings | dict | None = None,
    dashboard: bool | Dashboard = False,
    instance: Instance | None = None,
    overwrite: bool = False,
    verbose: bool = False,
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

    spec: a SweepSpec or the path of a YAML spec (validated before Ray starts).
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
        rlsweep's one-line progress view (`rlsweep.progress`).
    """
    if not isinstance(spec, SweepSpec):
        spec = SweepSpec.from_yaml(spec)
    if starts_local_ray(address):  # checked before Ray starts; a cluster once joined
        check_local_resources(spec, num_cpus)
    experiment = experiment_path(spec, storage_path)
    _refuse_existing(spec, experiment, overwrite)
    from rlsweep.tune_bridge import build_tuner

    wandb_settings = tracking.settings_from(wandb)
    with (
        _quiet_console(experiment, verbose),
        ray_session(
            address=address,
            num_cpus=num_cpus,
            jemalloc=jemalloc,
            dashboard=_dashboard(dashboard),
            verbose=verbose,
        ),
    ):
        _check_cluster(spec, autoscaling=address is not None)
        record_run(spec, experiment, address=address, instance=instance, wandb=wandb_settings)
        callbacks = [tracking.callback(spec, wandb_settings, experiment)] if wandb_settings else []
        with _driver(spec, experiment, verbose) as interrupts:
            tuner = build_tuner(
                spec,
                trainable or _real_trainable(),
                storage_path=storage_path,
                callbacks=callbacks,
                max_failures=max_failures,
                stop_flag=interrupts.flag_name,
                verbose=verbose,
            )
            _fit(tuner, wandb_settings)
    return _finish(spec, experiment, wandb_settings, interrupts.signum)


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
) -> SweepResult:
    """Continue an interrupted sweep (Ctrl-C, driver killed, machine rebooted, spot reclaimed).

    Finished trials are kept as they are; unfinished and errored ones continue from their last
    checkpoints (or start, if they had none); what each continues from is printed first
    (`resume_points`). The spec comes from the sweep's own `sweep.yaml`. Interrupts and
    `verbose` as in `run_sweep`.
    """
    from rlsweep.tune_bridge import restore_tuner

    experiment = str(experiment) if is_uri(str(experiment)) else str(Path(experiment).resolve())
    if not can_resume(experiment):
        raise FileNotFoundError(f"{experiment}: no Tune experiment state to resume from")
    spec = sweep_spec(experiment)
    if spec is None:
        raise FileNotFoundError(f"{experiment}: no {SWEEP_FILE} (not run by rlsweep?)")
    if starts_local_ray(address):
        check_local_resources(spec, num_cpus)
    # Tune restores the sweep's W&B callback itself; these settings also log the report run.
    wandb_settings = tracking.settings_from(
        wandb if wandb is not None else run_info(experiment).get("wandb")
    )
    with _quiet_console(experiment, verbose):
        print("\n".join(resume_points(spec, experiment)), flush=True)
        with (
            ray_session(
                address=address,
                num_cpus=num_cpus,
                jemalloc=jemalloc,
                dashboard=_dashboard(dashboard),
                verbose=verbose,
            ),
            _driver(spec, experiment, verbose) as interrupts,
        ):
            tuner = restore_tuner(
                spec,
                trainable or _real_trainable(),
                experiment,
                stop_flag=interrupts.flag_name,
                verbose=verbose,
            )
            _fit(tuner, wandb_settings)
    return _finish(spec, experiment, wandb_settings, interrupts.signum)


def _last_checkpoint(trial_dir: Path, local: bool) -> tuple[int, float] | None:
    """(iteration, env steps) of the last checkpoint result.json names (and, for a local
    sweep, that is still on disk), or None."""
    path = trial_dir / "result.json"
    if not path.exists():
        return None
    found = None
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # half-written last line
            break
        name = row.get("checkpoint_dir_name")
        if name and (not local or (trial_dir / name).is_dir()):
            found = (int(row.get("training_iteration", 0)), float(row.get(M.ENV_STEPS, 0)))
    return found


def _ended_early(local: Path) -> set[str]:
    """Trial dirs that Tune marked TERMINATED before their budget: a scheduler (ASHA, a
    stopper) stopped them, or the trainable ended itself. Tune's restore leaves them be."""
    from ray.tune import ExperimentAnalysis

    try:
        trials = ExperimentAnalysis(str(local)).trials
    except (FileNotFoundError, ValueError):  # no experiment state readable here
        return set()
    return {Path(t.path).name for t in trials if t.status == "TERMINATED" and t.path}


def resume_points(spec: SweepSpec, experiment: str) -> list[str]:
    """What `resume_sweep` does with each trial: kept (finished, or ended early by a
    scheduler), or continued from iteration N and its env steps (its last checkpoint), or from
    scratch (no checkpoint)."""
    try:
        local = R.experiment_dirs(experiment)[0]  # a URI's local copy (checkpoints left out)
        final = R.final_scores(R.load_curves(local))
    except FileNotFoundError:
        return [f"rlsweep: resuming {spec.name}: no trial had started"]
    finished = final["status"] == R.TERMINATED
    early = ~finished & final["trial_id"].isin(_ended_early(local))
    done = finished | early
    lines = [
        f"rlsweep: resuming {spec.name}: {int(finished.sum())} finished trial(s) kept, "
        f"{int(early.sum())} ended early by the scheduler kept, {int((~done).sum())} to "
        f"continue, {max(spec.num_trials - len(final), 0)} not started"
    ]
    restored = False
    for row in final[~done].itertuples():
        at = _last_checkpoint(local / row.trial_id, local=not is_uri(experiment))
        restored |= at is not None
        where = (
            f"from iteration {at[0]}, {formatting.steps(at[1])} env steps"
            if at
            else "from scratch: no checkpoint"
        )
        lines.append(f"  {row.trial_id}: {where}")
    if restored:
        lines.append(
            "  (their envs start new episodes there: from then on their numbers are not an "
            f"uninterrupted run's, and their rows say {M.RESUMED_AT})"
        )
    return lines


@contextlib.contextmanager
def _driver(spec: SweepSpec, experiment: str, verbose: bool) -> Iterator[Any]:
    """For one `fit`: graceful interrupts (`rlsweep.interrupt`) and, unless `verbose`, the
    progress view (`rlsweep.progress`), both fed by Tune's callback events."""
    from rlsweep.interrupt import Interrupts
    from rlsweep.progress import ProgressView
    from rlsweep.tune_bridge import listening

    view = None if verbose else ProgressView(spec)
    interrupts = Interrupts(say=view.say if view else print)
    listeners = [interrupts, *([view] if view else [])]
    with interrupts, listening(*listeners):
        where = resume_command(experiment).removeprefix("rlsweep resume ")
        print(f"rlsweep: results in {where} (TensorBoard: tensorboard --logdir {where})")
        if view is not None:
            view.start()
        try:
            yield interrupts
        finally:
            if view is not None:
                view.stop()


DRIVER_LOG = "driver.log"
"""In the experiment dir: Ray's log lines rlsweep keeps off the console (`_quiet_console`)."""


class _ToDriverLog(logging.Filter):
    """On a Ray logger: its records containing one of `texts` go to `log`, not the console."""

    def __init__(self, texts: list[str], log: logging.Handler) -> None:
        super().__init__()
        self.texts, self.log = texts, log

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not any(text in message for text in self.texts):
            return True
        self.log.handle(record)
        return False


class _LazyFileHandler(logging.FileHandler):
    """A file handler that creates the file, and its directory, on its first record."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, delay=True)
        self.setFormatter(logging.Formatter("%(asctime)s\t%(levelname)s %(name)s -- %(message)s"))

    def _open(self):
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


@contextlib.contextmanager
def _quiet_console(experiment: str, verbose: bool) -> Iterator[None]:
    """For the length of a sweep on this driver (Ray's start included): Ray's log lines that a
    sweep's user cannot act on (`_ray_compat.DRIVER_LOGS`: Tune's own timing, token auth, ...)
    go to the experiment's `driver.log` instead of the console; with `verbose` only those
    rlsweep says in its own words do. Unless `verbose`, Tune's output engine is off too
    (RAY_AIR_NEW_OUTPUT=0, with verbosity 0: silent): its experiment box and a TensorBoard hint
    pointing into /tmp/ray/session_* (the trial dirs in results/<name> hold the TensorBoard
    files) give way to rlsweep's progress view. A sweep stored at a URI gets its driver log
    uploaded at the end."""
    fs, root = filesystem(experiment)
    local = Path(root) if fs is None else Path(tempfile.mkdtemp(prefix="rlsweep-driver-log-"))
    log = _LazyFileHandler(local / DRIVER_LOG)
    texts: dict[str, list[str]] = {}
    for line in DRIVER_LOGS:
        if not (verbose and line.verbose):
            texts.setdefault(line.owner, []).append(line.attribute)
    filters = [(logging.getLogger(name), _ToDriverLog(t, log)) for name, t in texts.items()]
    for logger, f in filters:
        logger.addFilter(f)
    try:
        with set_env({} if verbose else {"RAY_AIR_NEW_OUTPUT": "0"}):
            yield
    finally:
        for logger, f in filters:
            logger.removeFilter(f)
        log.close()
        if fs is not None:
            _upload_log(experiment, local)


def _upload_log(experiment: str, local: Path) -> None:
    """The driver log written locally for a sweep stored at a URI, appended to its own."""
    path = local / DRIVER_LOG
    if path.exists():
        fs, root = filesystem(experiment)
        try:
            with fs.open_input_stream(f"{root}/{DRIVER_LOG}") as f:
                before = f.read().decode()
        except OSError:  # none yet
            before = ""
        _write(experiment, DRIVER_LOG, before + path.read_text())
    shutil.rmtree(local, ignore_errors=True)


def _check_cluster(spec: SweepSpec, autoscaling: bool) -> None:
    """Trials must fit the cluster, or Tune waits forever. A joined cluster may be autoscaled:
    its nodes are not all there yet, so a misfit is a warning there, not an error."""
    import ray

    total = ray.cluster_resources()
    try:
        check_resources(spec, total.get("CPU", 0), total.get("GPU", 0), where="the cluster")
    except SpecError as e:
        if not autoscaling:
            raise
        print(f"rlsweep: warning: {e} now; trials wait for the autoscaler to add nodes")


def can_resume(experiment: str | Path) -> bool:
    """The experiment dir holds Tune's state (an interrupted or finished rlsweep sweep)."""
    from ray import tune

    fs, root = filesystem(str(experiment))
    return tune.Tuner.can_restore(root, storage_filesystem=fs)


def run_or_resume(spec: SweepSpec | str | Path, **kwargs) -> SweepResult:
    """`resume_sweep` where `spec`'s experiment dir already holds a sweep (a restarted spot job
    finds its checkpoints there), else `run_sweep`. kwargs: run_sweep's."""
    if not isinstance(spec, SweepSpec):
        spec = SweepSpec.from_yaml(spec)
    experiment = experiment_path(spec, kwargs.get("storage_path"))
    if can_resume(experiment):
        keep = ("address", "trainable", "num_cpus", "jemalloc", "wandb", "dashboard", "verbose")
        return resume_sweep(experiment, **{k: v for k, v in kwargs.items() if k in keep})
    return run_sweep(spec, **kwargs)


def _real_trainable():
    from rlsweep.trainable import train_trial

    return train_trial


def _dashboard(value: bool | Dashboard) -> Dashboard | None:
    if value is True:
        return Dashboard()
    return value or None


def _fit(tuner, wandb_settings: WandbSettings | None) -> None:
    if wandb_settings is None:
        tuner.fit()
        return
    with tracking.mode_env(wandb_settings.resolved_mode()):
        tuner.fit()


def _finish(
    spec: SweepSpec, experiment: str, wandb_settings: WandbSettings | None, signum: int | None
) -> SweepResult:
    """The table from the experiment dir (as `rlsweep report` reads it); `SweepInterrupted`
    if a signal stopped the sweep."""
    path = experiment if is_uri(experiment) else Path(experiment)
    result = SweepResult(spec=spec, path=path, trials=trials_table(spec, experiment))
    if signum is not None:
        raise SweepInterrupted(result, signum)
    if wandb_settings is not None:
        from rlsweep.report import build_report

        out = tracking.run_dir(wandb_settings, experiment) / "report"
        report = build_report([experiment], out=out)
        with tracking.mode_env(wandb_settings.resolved_mode()):
            tracking.log_report(spec, wandb_settings, experiment, report)
    return result
