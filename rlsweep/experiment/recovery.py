"""Before a resume: each unfinished trial set to continue from its newest complete checkpoint.

Tune restores a trial from the checkpoint its last saved experiment state names. That state is
saved every few seconds, on Tune's own clock; a driver killed without warning (SIGKILL, an OOM
kill, a node reclaimed, a hard time limit) may have saved it before the trials' last
checkpoints. Tune would then restore each from an older one, name its next checkpoint after
that older one (deleting the newer checkpoint of that name), and append to result.json and
progress.csv the iterations they already hold.

`reconcile` prevents all three, on the driver before Ray starts. For each trial a resume
continues (not TERMINATED):
- its newest checkpoint on disk whose manifest says it is whole (`rlsweep.manifest`) becomes the
  one Tune restores from, if it is newer than Tune's (`_ray_compat.TuneState`);
- the rows it reported after that checkpoint's iteration are dropped from result.json and
  progress.csv (all of them, for a trial without a checkpoint): the trial reports them again.
A checkpoint without a manifest (written before manifests existed) is left to Tune's record.
Works on a local dir and at a URI alike (files read and written through pyarrow).

Within a run, `RetriedTrials` does the same for a trial Tune retries (`max_failures`) from its
latest checkpoint: Tune's loggers would append the iterations it reports again (result.json
only when its stored copy was synced after the checkpoint; progress.csv always).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from rlsweep import metrics as M
from rlsweep.experiment.history import checkpoint_iteration, result_rows
from rlsweep.manifest import complete_manifest
from rlsweep.storage import CHECKPOINT_DIR, filesystem

ITERATION = "training_iteration"
"""Tune's iteration count in each result row."""


@dataclass(frozen=True)
class Restart:
    """Where a resume continues one trial from, after `reconcile`."""

    trial: str
    """The trial dir's name."""
    checkpoint: str | None
    """Its checkpoint dir (None: from scratch)."""
    iteration: int
    """The iteration that checkpoint holds (0: from scratch)."""
    env_steps: float
    tune_checkpoint: str | None = None
    """The checkpoint Tune's saved state named (older than `checkpoint` where they differ)."""
    rows_dropped: int = 0
    """Result rows after `iteration` removed from result.json (the trial reports them again)."""


def reconcile(experiment: str) -> list[Restart]:
    """Point every unfinished trial of `experiment` (a local dir or a URI) at its newest
    complete checkpoint and trim its result files to it; what each continues from. Nothing to
    do (an empty list) where Tune saved no state."""
    from rlsweep._ray_compat import TuneState

    fs, root = _fs(experiment)
    state = TuneState(fs, root)
    if state.path is None:
        return []
    restarts, changed = [], False
    for trial in state.trials:
        if trial.status == "TERMINATED":
            continue
        trial_dir = f"{root}/{trial.dirname}"
        tune_index = _index(trial.checkpoint)
        newest = _newest_complete(fs, trial_dir)
        if newest is not None and newest[1] > tune_index:
            name, index, manifest = newest
            metrics = _result_row(fs, trial_dir, name) or {
                ITERATION: manifest["iteration"],
                M.ENV_STEPS: manifest["env_steps"],
                "checkpoint_dir_name": name,
            }
            state.point_at(trial.dirname, name, index, metrics)
            changed = True
            checkpoint, iteration = name, int(manifest["iteration"])
            steps = float(metrics.get(M.ENV_STEPS, manifest["env_steps"]))
        else:
            checkpoint = trial.checkpoint
            iteration = int(trial.metrics.get(ITERATION, 0)) if checkpoint else 0
            steps = float(trial.metrics.get(M.ENV_STEPS, 0.0)) if checkpoint else 0.0
        dropped = _trim_results(fs, trial_dir, iteration)
        restarts.append(
            Restart(trial.dirname, checkpoint, iteration, steps, trial.checkpoint, dropped)
        )
    if changed:
        state.save()
    return restarts


class RetriedTrials:
    """A driver listener (`rlsweep.run.tune_bridge.listening`): when Tune retries a trial, cut
    its result files back to the checkpoint it restarts from (to nothing without one), in the
    driver's trial dir and in storage (`_ray_compat.trial_result_dirs`: Tune copies the stored
    result.json over the driver's at the restart, whatever it held when last synced). Tune's
    loggers append in place (O_APPEND), so their next rows follow the cut."""

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        from rlsweep._ray_compat import trial_result_dirs

        at = checkpoint_iteration(trial) or 0
        for fs, root in trial_result_dirs(trial):
            _trim_results(fs, root.rstrip("/"), at)


def _fs(experiment: str) -> tuple[pafs.FileSystem, str]:
    fs, root = filesystem(experiment)
    return (fs or pafs.LocalFileSystem()), root.rstrip("/")


def _index(checkpoint: str | None) -> int:
    match = CHECKPOINT_DIR.match(checkpoint or "")
    return int(match[1]) if match else -1


def _newest_complete(fs: pafs.FileSystem, trial_dir: str) -> tuple[str, int, dict] | None:
    """(name, index, manifest) of the trial's newest whole checkpoint; None if it has none."""
    infos = fs.get_file_info(pafs.FileSelector(trial_dir, allow_not_found=True))
    dirs = sorted(
        ((int(m[1]), i.base_name) for i in infos if (m := CHECKPOINT_DIR.match(i.base_name))),
        reverse=True,
    )
    for index, name in dirs:
        if (manifest := complete_manifest(fs, f"{trial_dir}/{name}")) is not None:
            return name, index, manifest
    return None


def _read(fs: pafs.FileSystem, path: str) -> str | None:
    try:
        with fs.open_input_stream(path) as f:
            return f.read().decode()
    except FileNotFoundError:
        return None


def _write(fs: pafs.FileSystem, path: str, text: str) -> None:
    with fs.open_output_stream(path) as f:
        f.write(text.encode())


def _result_row(fs: pafs.FileSystem, trial_dir: str, checkpoint: str) -> dict[str, Any] | None:
    """The result the trial reported with `checkpoint` (None: the driver died before writing
    it)."""
    text = _read(fs, f"{trial_dir}/result.json") or ""
    rows = [r for r in result_rows(text) if r.get("checkpoint_dir_name") == checkpoint]
    return rows[-1] if rows else None


def _trim_results(fs: pafs.FileSystem, trial_dir: str, iteration: int) -> int:
    """Keep result.json's and progress.csv's rows up to `iteration`, each iteration once (the
    last report of it); the number of result.json rows removed."""
    text = _read(fs, f"{trial_dir}/result.json")
    dropped = 0
    if text is not None:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        kept = _up_to(lines, iteration, lambda ln: json.loads(ln).get(ITERATION))
        dropped = len(lines) - len(kept)
        if kept != lines:
            _write(fs, f"{trial_dir}/result.json", "".join(f"{ln}\n" for ln in kept))
    text = _read(fs, f"{trial_dir}/progress.csv")
    if text:
        header, *rows = list(csv.reader(io.StringIO(text)))
        column = header.index(ITERATION) if ITERATION in header else None
        kept_rows = _up_to(rows, iteration, lambda r: r[column] if column is not None else None)
        if kept_rows != rows:
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows([header, *kept_rows])
            _write(fs, f"{trial_dir}/progress.csv", out.getvalue())
    return dropped


def _up_to(items: list, iteration: int, iteration_of) -> list:
    """`items` whose iteration is at most `iteration`, each iteration's last one, in order;
    an item whose iteration cannot be read (a torn line) is dropped."""
    last: dict[int, int] = {}
    for i, item in enumerate(items):
        try:
            k = int(float(iteration_of(item)))
        except (TypeError, ValueError, IndexError, json.JSONDecodeError):
            continue
        if k <= iteration:
            last[k] = i
    return [items[i] for i in sorted(last.values())]
