"""The experiment dir, `<storage>/<name>`: one sweep's home, a local dir or a URI (`s3://...`).

Tune writes the trial dirs and its own state there; rlsweep adds four files, written and read
only here:

- `SWEEP_FILE`: the spec as run, so that `resume` and reports read the sweep that ran;
- `RUN_FILE`: its provenance (version, commit, host, where it ran, W&B settings; never a key);
- `RUNS_FILE`: each start of its driver (`run`, every `resume`) and how it ended;
- `DRIVER_LOG`: Ray's log lines kept off the driver's console (`session.quiet_console`).

One sweep per dir: a run refuses a dir that holds one (`SweepExistsError`) unless told to
replace it, so that a report never mixes two runs' trials and `resume` knows which spec to
continue.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlsweep._version import __version__
from rlsweep.experiment.history import is_trial_dir
from rlsweep.experiment.interrupt import resume_command
from rlsweep.spec.spec import SpecError, SweepSpec
from rlsweep.storage import filesystem, is_uri

SWEEP_FILE = "sweep.yaml"
"""The spec as run (`SweepSpec.to_yaml`)."""
RUN_FILE = "sweep.json"
"""Provenance of the run (`record_run`)."""
RUNS_FILE = "runs.jsonl"
"""One JSON line when the sweep's driver starts (`record_start`) and one when it ends
(`record_end`): a sweep run over several machines or time-limited sittings says where and how
long each ran (`runs`). A driver killed without warning leaves its start alone."""
DRIVER_LOG = "driver.log"
"""Ray's log lines that rlsweep keeps off the console (`session.quiet_console`)."""


def experiment_path(spec: SweepSpec, storage_path: str | None = None) -> str:
    """`<storage>/<name>`: a local absolute path or a URI (`storage_path` overrides the spec's)."""
    storage_path = storage_path or spec.storage_path
    if is_uri(storage_path):
        return f"{storage_path.rstrip('/')}/{spec.name}"
    return str(Path(storage_path).expanduser().resolve() / spec.name)


# --- one sweep per dir --------------------------------------------------------------------


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
        trial_dirs = any(map(is_trial_dir, path.iterdir()))
        return bool(names & {SWEEP_FILE, "tuner.pkl"}) or trial_dirs
    import pyarrow.fs as pafs

    infos = fs.get_file_info([f"{root}/{SWEEP_FILE}", f"{root}/tuner.pkl"])
    return any(i.type != pafs.FileType.NotFound for i in infos)


def can_resume(experiment: str | Path) -> bool:
    """The experiment dir holds Tune's state (an interrupted or finished rlsweep sweep)."""
    from ray import tune

    fs, root = filesystem(str(experiment))
    return tune.Tuner.can_restore(root, storage_filesystem=fs)


def refuse_existing(spec: SweepSpec, experiment: str, overwrite: bool) -> None:
    """Raise `SweepExistsError` if `experiment` holds a sweep; with `overwrite`, `clear` it.
    The error offers `resume` only where there is Tune state to resume from: a run that
    stopped after writing sweep.yaml but before Tune took it up (a searcher's storage that
    failed, a kill) has none."""
    if not holds_sweep(experiment):
        return
    if overwrite:
        clear(spec, experiment)
        return
    replace = "replace it by running again with --overwrite (run_sweep(overwrite=True))"
    if can_resume(experiment):
        why = f"already holds a sweep; continue it with `{resume_command(experiment)}`, {replace}"
    else:
        why = f"holds a sweep that stopped before Tune started it (nothing to resume); {replace}"
    raise SweepExistsError(experiment, "", f"{why}, or give the spec another name")


def clear(spec: SweepSpec, experiment: str) -> None:
    """Delete the sweep at `experiment`, and its local Optuna study."""
    fs, root = filesystem(experiment)
    if fs is None:
        shutil.rmtree(root, ignore_errors=True)
    else:
        fs.delete_dir(root)
    url = spec.optuna_storage_url(experiment)
    if not spec.search.optuna_storage and url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)


# --- rlsweep's files ----------------------------------------------------------------------


@dataclass(frozen=True)
class Instance:
    """The machine type trials run on, recorded for cost reporting (`rlsweep.plan.cost`)."""

    type: str
    """Cloud instance type, e.g. c6i.8xlarge."""
    spot: bool = False
    """Billed at the spot price."""


def git_commit() -> str | None:
    """Short commit of the rlsweep checkout that runs (None outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def record_run(
    spec: SweepSpec,
    experiment: str,
    *,
    address: str | None,
    instance: Instance | None,
    wandb: Mapping[str, Any] | None,
) -> None:
    """Write SWEEP_FILE and RUN_FILE (no credentials: nothing here comes from the env). `wandb`:
    the sweep's W&B settings as a mapping (`tracking.WandbSettings.to_dict`), or None."""
    write_text(experiment, SWEEP_FILE, spec.to_yaml())
    run = {
        "rlsweep_version": __version__,
        "git_commit": git_commit(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "ray_address": address or "local",
        "instance_type": instance.type if instance else None,
        "spot": instance.spot if instance else None,
        # W&B settings (project, mode, ...; never a key), so a resume logs the same way.
        "wandb": dict(wandb) if wandb else None,
    }
    write_text(experiment, RUN_FILE, json.dumps(run, indent=2) + "\n")


def record_start(
    experiment: str,
    command: str,
    *,
    machine: Mapping[str, Any],
    time_limit_s: float | None,
    plan: Mapping[str, Any] | None = None,
) -> None:
    """A RUNS_FILE line for the driver's start: `command` (run, resume), when, the host and
    rlsweep's commit, `machine` (what Ray offers the trials: `session.machine_record`), the time
    limit and the sweep's plan there (`Plan.record`; a report sets the first one's beside the
    real wall time). `run` starts the record afresh: what a dir holds before it is no sweep's
    (a driver killed before it wrote SWEEP_FILE left its start line; `run` refuses a sweep)."""
    line = {
        "event": "start",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "host": socket.gethostname(),
        "git_commit": git_commit(),
        **machine,
        "time_limit_s": time_limit_s,
        "plan": dict(plan) if plan else None,
    }
    write = write_text if command == "run" else append_text
    write(experiment, RUNS_FILE, json.dumps(line) + "\n")


def record_end(experiment: str, outcome: str, wall_s: float) -> None:
    """A RUNS_FILE line for the driver's end: how (`ended`: Tune's loop ran out of trials; a
    signal's name; `time limit 9m`; `failed: <exception>`) and its wall time since its start."""
    line = {
        "event": "end",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "outcome": outcome,
        "wall_s": round(wall_s, 1),
    }
    append_text(experiment, RUNS_FILE, json.dumps(line) + "\n")


def runs(experiment: str | Path) -> list[dict[str, Any]]:
    """Each start of the sweep's driver, oldest first, with its end's `ended_at`, `outcome` and
    `wall_s` (absent where the driver was killed); [] for a sweep that never recorded one."""
    out: list[dict[str, Any]] = []
    for text in (read_text(experiment, RUNS_FILE) or "").splitlines():
        # A line cut short by a kill runs on into the next one written: that one is whole.
        try:
            line = json.loads(text[text.rfind('{"event"') :])
        except json.JSONDecodeError:
            continue
        if line.get("event") == "start":
            out.append({k: v for k, v in line.items() if k != "event"})
        elif line.get("event") == "end" and out and "outcome" not in out[-1]:
            out[-1].update(ended_at=line["at"], outcome=line["outcome"], wall_s=line["wall_s"])
    return out


def sweep_spec(experiment: str | Path) -> SweepSpec | None:
    """The SweepSpec an experiment dir (local or a URI) was run with; None if not rlsweep's."""
    text = read_text(experiment, SWEEP_FILE)
    if text is None:
        return None
    return SweepSpec.from_yaml_text(text, source=f"{experiment}/{SWEEP_FILE}")


def run_info(experiment: str | Path) -> dict[str, Any]:
    """Provenance the sweep recorded (commit, host, instance type, W&B settings); {} if none."""
    text = read_text(experiment, RUN_FILE)
    return json.loads(text) if text else {}


def read_text(experiment: str | Path, name: str) -> str | None:
    """A file of an experiment dir, local or at a URI; None if it is not there."""
    fs, root = filesystem(str(experiment))
    try:
        if fs is None:
            return (Path(root) / name).read_text()
        with fs.open_input_stream(f"{root}/{name}") as f:
            return f.read().decode()
    except FileNotFoundError:
        return None


def write_text(experiment: str, name: str, text: str) -> None:
    """Write a file of an experiment dir, local or at a URI (the dir is made if missing)."""
    fs, root = filesystem(experiment)
    if fs is None:
        Path(root).mkdir(parents=True, exist_ok=True)
        (Path(root) / name).write_text(text)
        return
    fs.create_dir(root, recursive=True)
    with fs.open_output_stream(f"{root}/{name}") as f:
        f.write(text.encode())


def append_text(experiment: str, name: str, text: str) -> None:
    """Add `text` to the end of a file of an experiment dir (made if missing). At a URI the
    file is rewritten whole: object stores have no append."""
    fs, root = filesystem(experiment)
    if fs is not None:
        write_text(experiment, name, (read_text(experiment, name) or "") + text)
        return
    Path(root).mkdir(parents=True, exist_ok=True)
    with open(Path(root) / name, "a") as f:
        f.write(text)
