"""`run_sweep()`: validate a spec on the driver, start (or join) Ray, run every trial, collect.

Where the sweep runs is an argument, never part of the spec: by default an embedded local Ray
instance; `address=` joins a running cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from rlsweep import __version__, tracking
from rlsweep import metrics as M
from rlsweep.results import RUN_FILE, SWEEP_FILE, cell, run_info, sweep_spec
from rlsweep.spec import SpecError, SweepSpec, check_resources
from rlsweep.storage import filesystem, is_uri, to_uri
from rlsweep.tracking import WandbSettings

RESULT_COLUMNS = M.METRICS
"""Per-trial result columns, in table order."""


def jemalloc_path() -> str | None:
    """Ray ships jemalloc; preloading it into trial processes ~2.4x'es RLlib PPO on CPU."""
    import ray

    path = os.path.join(os.path.dirname(ray.__file__), "core", "libjemalloc.so")
    return path if os.path.exists(path) else None


JEMALLOC_CONF = (
    "oversize_threshold:1,background_thread:true,metadata_thp:auto,"
    "dirty_decay_ms:-1,muzzy_decay_ms:-1"
)
"""jemalloc settings for trial processes. Without them jemalloc hands the pages of every large
tensor back to the OS and faults them in again on the next allocation: measured on a 2-core
machine, an RLlib PPO trial ran ~130 env-steps/s with jemalloc alone and ~258 with these."""


def runtime_env(jemalloc: bool = True) -> dict[str, Any]:
    env_vars = {}
    if jemalloc and (path := jemalloc_path()):
        env_vars["LD_PRELOAD"] = path
        env_vars["MALLOC_CONF"] = JEMALLOC_CONF
    return {"env_vars": env_vars}


def _local_gpus() -> int:
    import torch

    return torch.cuda.device_count()


@dataclass
class SweepResult:
    """A finished (or stopped) sweep: its spec, where it lives, and one row per trial."""

    spec: SweepSpec
    path: Path | str
    """The experiment dir: a local absolute Path, or a URI string (s3://...)."""
    trials: pd.DataFrame

    def to_dataframe(self) -> pd.DataFrame:
        return self.trials.copy()


def trials_frame(spec: SweepSpec, result_grid) -> pd.DataFrame:
    """One row per trial: game, seed, swept params, final metrics, status, error."""
    from rlsweep.tune_bridge import resolved_config

    swept = list(spec.space)
    rows = []
    for result in result_grid:
        cfg = resolved_config(spec, result.config) if result.config else {}
        last = result.metrics or {}
        row: dict[str, Any] = {"game": cfg.get("game"), "seed": cfg.get("seed")}
        if spec.variants:
            row["variant"] = (result.config or {}).get("variant")
        row.update({k: cell(cfg.get(k)) for k in swept})
        row.update({k: last.get(k, math.nan) for k in RESULT_COLUMNS})
        row["iterations"] = last.get("training_iteration", 0)
        failed = _first_line(result.error) if result.error else last.get(M.TRIAL_ERROR, "")
        row["status"] = "ERROR" if failed else "TERMINATED"
        row["error"] = failed
        row["trial_dir"] = to_uri(result.filesystem, result.path)
        rows.append(row)
    df = pd.DataFrame(rows)
    if spec.variants:  # in the spec's order, as the write-up's columns are
        df["variant"] = pd.Categorical(df["variant"], categories=list(spec.variants))
        swept = ["variant", *swept]
    return df.sort_values(["game", *swept, "seed"], kind="stable").reset_index(drop=True)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[-1] if text else ''}"


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
) -> Iterator[None]:
    """Start Ray here (or join `address`) for the length of a sweep; stop it if started here."""
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, Any] = {}
        if dashboard is not None and address is None:
            kwargs = {"dashboard_host": dashboard.host, "dashboard_port": dashboard.port}
        ctx = ray.init(
            address=address,
            num_cpus=num_cpus if address is None else None,
            runtime_env=runtime_env(jemalloc),
            include_dashboard=dashboard is not None if address is None else None,
            configure_logging=True,
            logging_level="WARNING",
            **kwargs,
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
) -> SweepResult:
    """Run every trial of `spec` and return the per-trial table.

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
    """
    if not isinstance(spec, SweepSpec):
        spec = SweepSpec.from_yaml(spec)
    if address is None:  # checked before Ray starts; a cluster is checked once joined
        check_resources(spec, cpus=num_cpus or os.cpu_count() or 1, gpus=_local_gpus())
    from rlsweep.tune_bridge import build_tuner

    experiment = experiment_path(spec, storage_path)
    wandb_settings = tracking.settings_from(wandb)
    with ray_session(
        address=address, num_cpus=num_cpus, jemalloc=jemalloc, dashboard=_dashboard(dashboard)
    ):
        _check_cluster(spec, autoscaling=address is not None)
        record_run(spec, experiment, address=address, instance=instance, wandb=wandb_settings)
        callbacks = [tracking.callback(spec, wandb_settings, experiment)] if wandb_settings else []
        tuner = build_tuner(
            spec,
            trainable or _real_trainable(),
            storage_path=storage_path,
            callbacks=callbacks,
            max_failures=max_failures,
        )
        grid = _fit(tuner, wandb_settings)
    return _finish(spec, experiment, grid, wandb_settings)


def resume_sweep(
    experiment: str | Path,
    *,
    address: str | None = None,
    trainable=None,
    num_cpus: int | None = None,
    jemalloc: bool = True,
    wandb: bool | str | WandbSettings | dict | None = None,
    dashboard: bool | Dashboard = False,
) -> SweepResult:
    """Continue an interrupted sweep (driver killed, machine rebooted, spot reclaimed).

    Finished trials are kept as they are; unfinished and errored ones continue from their last
    checkpoints (or start, if they had none). The spec comes from the sweep's own `sweep.yaml`.
    """
    from rlsweep.tune_bridge import restore_tuner

    experiment = str(experiment) if is_uri(str(experiment)) else str(Path(experiment).resolve())
    if not can_resume(experiment):
        raise FileNotFoundError(f"{experiment}: no Tune experiment state to resume from")
    spec = sweep_spec(experiment)
    if spec is None:
        raise FileNotFoundError(f"{experiment}: no {SWEEP_FILE} (not run by rlsweep?)")
    if address is None:
        check_resources(spec, cpus=num_cpus or os.cpu_count() or 1, gpus=_local_gpus())
    # Tune restores the sweep's W&B callback itself; these settings also log the report run.
    wandb_settings = tracking.settings_from(
        wandb if wandb is not None else run_info(experiment).get("wandb")
    )
    with ray_session(
        address=address, num_cpus=num_cpus, jemalloc=jemalloc, dashboard=_dashboard(dashboard)
    ):
        tuner = restore_tuner(spec, trainable or _real_trainable(), experiment)
        grid = _fit(tuner, wandb_settings)
    return _finish(spec, experiment, grid, wandb_settings)


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
        keep = ("address", "trainable", "num_cpus", "jemalloc", "wandb", "dashboard")
        return resume_sweep(experiment, **{k: v for k, v in kwargs.items() if k in keep})
    return run_sweep(spec, **kwargs)


def _real_trainable():
    from rlsweep.trainable import train_trial

    return train_trial


def _dashboard(value: bool | Dashboard) -> Dashboard | None:
    if value is True:
        return Dashboard()
    return value or None


def _fit(tuner, wandb_settings: WandbSettings | None):
    if wandb_settings is None:
        return tuner.fit()
    with tracking.mode_env(wandb_settings.resolved_mode()):
        return tuner.fit()


def _finish(
    spec: SweepSpec, experiment: str, grid, wandb_settings: WandbSettings | None
) -> SweepResult:
    path = experiment if is_uri(experiment) else Path(experiment)
    result = SweepResult(spec=spec, path=path, trials=trials_frame(spec, grid))
    if wandb_settings is not None:
        from rlsweep.report import build_report

        out = tracking.run_dir(wandb_settings, experiment) / "report"
        report = build_report([experiment], out=out)
        with tracking.mode_env(wandb_settings.resolved_mode()):
            tracking.log_report(spec, wandb_settings, experiment, report)
    return result
