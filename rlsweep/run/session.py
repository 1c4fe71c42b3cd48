"""The driver's Ray session for one sweep: Ray started here (or a cluster joined), the env of
every trial process, and the driver's console kept to what a sweep's user can act on.

The private Ray names this needs live in `rlsweep._ray_compat`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsweep._ray_compat import (
    DRIVER_LOGS,
    RAYLET_MESSAGES,
    TextFilter,
    bundled_jemalloc,
    quiet_local_ray,
    raylet_messages_to,
)
from rlsweep.environ import set_env
from rlsweep.errors import SpecError
from rlsweep.experiment.experiment_dir import DRIVER_LOG, append_text
from rlsweep.formatting import plural
from rlsweep.plan.placement import cpu_model, starts_local_ray
from rlsweep.storage import filesystem

# --- the trials' processes ----------------------------------------------------------------

JEMALLOC_CONF = (
    "oversize_threshold:1,background_thread:true,metadata_thp:auto,"
    "dirty_decay_ms:-1,muzzy_decay_ms:-1"
)
"""jemalloc settings for trial processes: freed pages are kept for the next allocation. Without
them jemalloc hands the pages of every large tensor back to the OS and faults them in again on
the next allocation, every iteration (the README's Speed section has the figures)."""


NICENESS = "RAY_worker_niceness"
"""The env var each Ray worker reads its priority from at its start (Ray 2.60: 15 if unset)."""


def runtime_env(jemalloc: bool = True) -> dict[str, Any]:
    """The env of every trial process.

    Priority: Ray starts workers at nice 15 unless told otherwise (`RAY_worker_niceness`, read
    by each worker): a trial would then yield its cores to any other program on the box (the
    scheduler weighs nice 15 at 36 against 1024 for nice 0), whereas a plain training script
    runs at the default priority 0. Trials report it as `perf/nice`.

    Allocator (`jemalloc`): the jemalloc Ray ships, preloaded with `JEMALLOC_CONF`, keeps the
    memory of RLlib's large per-iteration tensors instead of returning and faulting it again as
    glibc's malloc does. Trials report it as `perf/jemalloc`."""
    env_vars = {NICENESS: "0"}
    if jemalloc and (path := bundled_jemalloc()):
        env_vars["LD_PRELOAD"] = path
        env_vars["MALLOC_CONF"] = JEMALLOC_CONF
    return {"env_vars": env_vars}


# --- Ray ----------------------------------------------------------------------------------


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
    dashboard: bool | Dashboard | None,
    verbose: bool = False,
) -> Iterator[None]:
    """Start Ray here (or join `address`) for the length of a sweep; stop it if started here.
    A Ray this process already runs is joined as it is. `dashboard`: True for `Dashboard()`.
    Trials' own output (RLlib's config dumps and warnings) reaches this console only if
    `verbose`; it is always in each trial dir's stdout/stderr files (Tune's log_to_file)."""
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        _init(
            address,
            num_cpus,
            jemalloc,
            Dashboard() if dashboard is True else dashboard or None,
            verbose,
        )
    elif (warning := niceness_warning(ray.get_runtime_context().runtime_env, os.environ)) and (
        warning not in _announced
    ):
        _announced.add(warning)  # once per process
        print(warning, flush=True)
    try:
        yield
    finally:
        if started_here:
            ray.shutdown()


def _check_reachable(address: str | None) -> None:
    """Raise SpecError where `address` (HOST:PORT) takes no connection within 5 s: Ray's own
    join retries for minutes, its log lines on the console, before it says so. Auto, ray://
    and RAY_ADDRESS's are left to Ray (it finds the first, or says at once that there is none)."""
    import socket

    if not address or address == "auto" or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            return
    except (OSError, ValueError) as e:
        raise _no_cluster(address, str(e)) from None


def _no_cluster(address: str | None, why: str) -> SpecError:
    """The bad-input error of an address no cluster answers at (`why`: what said so)."""
    return SpecError(
        None,
        "",
        f"--address {address}: no Ray cluster to join ({why}); start one with `ray start "
        "--head`, or leave --address out to run on this machine",
    )


def _init(
    address: str | None,
    num_cpus: int | None,
    jemalloc: bool,
    dashboard: Dashboard | None,
    verbose: bool,
) -> None:
    import ray

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
    if not local:
        _check_reachable(address)
    with quiet as quiet_kwargs:
        try:
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
        except ConnectionError as e:  # no cluster there: bad input, said before anything runs
            if local:
                raise
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise _no_cluster(address or os.environ.get("RAY_ADDRESS"), why) from None
    if not local:
        joined = (getattr(ctx, "address_info", None) or {}).get("address") or address
        if joined not in _announced:  # once per cluster and process (validate, then run)
            _announced.add(joined)
            print(cluster_line(joined), flush=True)
    if dashboard is not None and ctx.dashboard_url:
        print(f"rlsweep: Ray dashboard at http://{ctx.dashboard_url}", flush=True)
        if os.environ.get("RAY_AUTH_MODE", "token") != "disabled":
            print("rlsweep: its login token is in ~/.ray/auth_token", flush=True)


_announced: set[str] = set()


def niceness_warning(job_env: Mapping[str, Any], driver_env: Mapping[str, str]) -> str | None:
    """What to say on joining a Ray this process already runs (a plain `ray.init()` before the
    sweep) whose workers start at Ray's nice 15: its job's runtime env `job_env` and the
    driver's environment (which a Ray started here hands its workers) leave `NICENESS` unset.
    Its trials then yield their cores to any other work on the machine: test Rays started so
    took 150 s for a test of 17 s beside two busy loops (tests/conftest.py). None where they
    run at 0, as the trials of a Ray a sweep starts do."""
    if {**driver_env, **(job_env.get("env_vars") or {})}.get(NICENESS, "15") == "0":
        return None
    return (
        "rlsweep: warning: joined the Ray this process already runs; its workers start at Ray's "
        "nice 15 (and without rlsweep's jemalloc), so any other work on this machine takes "
        "their cores first. Let the sweep start Ray, or start it with "
        "`ray.init(runtime_env=rlsweep.run.session.runtime_env())`."
    )


def _amounts(resources: dict[str, float]) -> str:
    cpus, gpus = resources.get("CPU", 0), resources.get("GPU", 0)
    return f"{plural(cpus, 'CPU')}, {plural(gpus, 'GPU')}"


def cluster_line(address: str) -> str:
    """What a joined cluster offers, in a line: its address, nodes, CPUs and GPUs, and what
    other jobs hold of them now (what this sweep's trials cannot have until they let go)."""
    import ray

    total, free = ray.cluster_resources(), ray.available_resources()
    held = {k: max(total.get(k, 0) - free.get(k, 0), 0) for k in ("CPU", "GPU")}
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    others = (
        f"other jobs hold {_amounts(held)} (free: {_amounts(free)})"
        if any(held.values())
        else "no other job holds any"
    )
    return (
        f"rlsweep: joined the Ray cluster at {address}: {plural(nodes, 'node')}, "
        f"{_amounts(total)}; {others}"
    )


def machine_record() -> dict[str, Any]:
    """What the Ray session offers the trials, as a sweep's run record keeps it
    (`experiment_dir.record_start`): its alive nodes, CPUs and GPUs, the GPUs' types as Ray
    names them (`accelerator_type:H100`), and the CPU model of the driver's machine."""
    import ray

    total = ray.cluster_resources()
    prefix = "accelerator_type:"
    return {
        "nodes": sum(1 for n in ray.nodes() if n.get("Alive")),
        "cpus": total.get("CPU", 0),
        "gpus": total.get("GPU", 0),
        "gpu_types": sorted(k.removeprefix(prefix) for k in total if k.startswith(prefix)),
        "cpu_model": cpu_model(),
    }


def ray_running() -> bool:
    """This process is in a Ray session (started here or joined): where a sweep run now runs.
    Asked without importing Ray, which costs seconds where it is not loaded yet."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


# --- the driver's console -----------------------------------------------------------------


@contextlib.contextmanager
def quiet_console(experiment: str, verbose: bool) -> Iterator[None]:
    """For the length of a sweep on this driver (Ray's start included): Ray's log lines that a
    sweep's user cannot act on (`_ray_compat.DRIVER_LOGS`: Tune's own timing, token auth, ...)
    go to the experiment's `driver.log` instead of the console, and so do the raylet's
    messages of a dead worker (`_ray_compat.RAYLET_MESSAGES`: rlsweep.experiment.history says it in
    a line); with `verbose` only those rlsweep says in its own words do. Unless `verbose`,
    Tune's output engine is off too (RAY_AIR_NEW_OUTPUT=0, with verbosity 0: silent): its
    experiment box and a TensorBoard hint pointing into /tmp/ray/session_* (the trial dirs in
    results/<name> hold the TensorBoard files) give way to rlsweep's progress view. A sweep
    stored at a URI gets its driver log uploaded at the end."""
    fs, root = filesystem(experiment)
    local = Path(root) if fs is None else Path(tempfile.mkdtemp(prefix="rlsweep-driver-log-"))
    log = _LazyFileHandler(local / DRIVER_LOG)
    texts: dict[str, list[str]] = {}
    for line in DRIVER_LOGS:
        if not (verbose and line.verbose):
            texts.setdefault(line.owner, []).append(line.attribute)
    filters = [(logging.getLogger(name), TextFilter(t, to=log)) for name, t in texts.items()]
    for logger, f in filters:
        logger.addFilter(f)
    raylet = (
        contextlib.nullcontext()
        if verbose
        else raylet_messages_to(lambda line: log.handle(_raylet_record(line)), RAYLET_MESSAGES)
    )
    try:
        with set_env({} if verbose else {"RAY_AIR_NEW_OUTPUT": "0"}), raylet:
            yield
    finally:
        for logger, f in filters:
            logger.removeFilter(f)
        log.close()
        if fs is not None:
            _upload_log(experiment, local)


def _raylet_record(line: str) -> logging.LogRecord:
    return logging.LogRecord("raylet", logging.WARNING, "", 0, line, None, None)


class _LazyFileHandler(logging.FileHandler):
    """A file handler that creates the file, and its directory, on its first record."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, delay=True)
        self.setFormatter(logging.Formatter("%(asctime)s\t%(levelname)s %(name)s -- %(message)s"))

    def _open(self):
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


def _upload_log(experiment: str, local: Path) -> None:
    """The driver log written locally for a sweep stored at a URI, added to its own there."""
    path = local / DRIVER_LOG
    if path.exists():
        append_text(experiment, DRIVER_LOG, path.read_text())
    shutil.rmtree(local, ignore_errors=True)
