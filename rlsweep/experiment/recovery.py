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
  progress.csv (all of them, for a trial without a checkpoint): the trial reports them again;
- the row of the checkpoint's own iteration, where the driver died before writing it (the
  trial uploads its checkpoint before the driver logs the report that came with it), is
  written from the report the manifest keeps, with Tune's own fields as far as they are known:
  no iteration is missing; a trial whose last report that was (it had finished) stays ended;
  so is the row of each older whole checkpoint still on disk whose report the driver never
  logged (a driver that fell behind its trial deleted none of them); Tune's state tracks the
  newest keep_checkpoints of its checkpoints, and those beyond are deleted, as Tune would have
  at the trial's next checkpoint (what it tracks beyond, its restore would not move with a
  moved or copied experiment dir);
- progress.csv gets the rows result.json holds and it lacks (Tune's CSV logger writes after
  its JSON logger);
- Tune's state records the checkpoint's report as the trial's last (none without one), as
  Tune's restore of the trial would, but from the start: until then the progress line would
  count the steps it reports again.
A checkpoint without a manifest (written before manifests existed) is left to Tune's record.
Works on a local dir and at a URI alike (files read and written through pyarrow).

Within a run, `RestartedTrials` does the same for a trial Tune retries (`max_failures`) from its
latest checkpoint: Tune's loggers would append the iterations it reports again (result.json
only when its stored copy was synced after the checkpoint; progress.csv always). It also keeps
the rows of a trial PBT pauses and resumes, or exploits: Tune's loggers would replace them with
storage's copy, as of its last sync.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

import pyarrow.fs as pafs

from rlsweep import metrics as M
from rlsweep._ray_compat import TERMINATED
from rlsweep.experiment.history import TUNE_DATE, checkpoint_iteration, result_rows
from rlsweep.manifest import complete_manifest
from rlsweep.storage import CHECKPOINT_DIR, filesystem

RESULT_FILES = ("result.json", "progress.csv")
"""A trial's rows as Tune's JSON and CSV loggers write them in its dir."""


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
    finished: bool = False
    """The checkpoint is the trial's last (its report ends it): the resume leaves it ended."""


def reconcile(experiment: str) -> list[Restart]:
    """Point every unfinished trial of `experiment` (a local dir or a URI) at its newest
    complete checkpoint and trim its result files to it; what each continues from. Nothing to
    do (an empty list) where Tune saved no state."""
    from rlsweep._ray_compat import TuneState

    fs, root = _fs(experiment)
    state = TuneState(fs, root)
    if state.path is None:
        if state.torn:
            raise RuntimeError(
                f"{state.torn[0]}: Tune's experiment state does not read (a driver killed "
                "while Tune wrote it) and no earlier state file does: nothing to resume from"
            )
        return []
    for path in state.set_aside():
        read = PurePosixPath(state.path).name
        print(
            f"rlsweep: {path} does not read (a driver killed while Tune wrote it): set aside "
            f"as {PurePosixPath(path).name}.torn; the resume reads {read}, and each trial goes "
            "on from its newest complete checkpoint",
            flush=True,
        )
    restarts, changed = [], False
    for trial in state.trials:
        if trial.status == TERMINATED:
            continue
        trial_dir = f"{root}/{trial.dirname}"
        logged = next(iter(result_rows(_read(fs, f"{trial_dir}/result.json") or "")), None)
        # A checkpoint of another trial (PBT's exploit): its own on disk hold its weights from
        # before, whatever their number; it goes on from the one Tune named.
        exploited = trial.checkpoint_owner is not None
        if exploited:  # where the dir is now: Tune's restore would not move it
            state.reroot(trial.dirname, root)
            changed = True
        if not exploited and (newer := newer_checkpoint(fs, trial_dir, trial.checkpoint)):
            checkpoint, index, manifest = newer
            # The whole ones between Tune's and it, oldest first: a driver behind its trial
            # may have logged none of their reports, and registered none of them. Tracked,
            # and, beyond keep_checkpoints, deleted, as Tune would have.
            between = complete_checkpoints(fs, trial_dir, _index(trial.checkpoint), index)
            missed = list(reversed(list(between)))
            _log_older_reports(fs, trial_dir, trial.trial_id, missed)
            row = _checkpoint_row(fs, trial_dir, trial.trial_id, checkpoint, manifest)
            metrics = _tracked_result(row, checkpoint, manifest)
            older = []
            for name, _, kept in missed:
                kept_row = _checkpoint_row(fs, trial_dir, trial.trial_id, name, kept)
                older.append((name, _tracked_result(kept_row, name, kept)))
            for name in state.point_at(trial.dirname, checkpoint, index, metrics, older):
                if fs.get_file_info(f"{trial_dir}/{name}").type != pafs.FileType.NotFound:
                    fs.delete_dir(f"{trial_dir}/{name}")
            changed = True
            iteration = int(manifest["iteration"])
            steps = float(metrics.get(M.ENV_STEPS, manifest["env_steps"]))
        else:
            checkpoint, row = trial.checkpoint, None
            iteration = int(trial.metrics.get(M.TUNE_ITERATION, 0)) if checkpoint else 0
            steps = float(trial.metrics.get(M.ENV_STEPS, 0.0)) if checkpoint else 0.0
            own = checkpoint and not exploited
            if own and (manifest := complete_manifest(fs, f"{trial_dir}/{checkpoint}")):
                row = _checkpoint_row(fs, trial_dir, trial.trial_id, checkpoint, manifest)
            # Its last report is where it goes on from, not one it will report again: the
            # progress line, whose counter never goes back, would start from that one.
            last = trial.last_result.get(M.TUNE_ITERATION, 0)
            if last != (trial.metrics.get(M.TUNE_ITERATION, 0) if checkpoint else 0):
                state.report_from(trial.dirname, trial.metrics if checkpoint else {})
                changed = True
        finished = bool(row and row.get(M.TRIAL_DONE))
        if finished:  # its last report came with this checkpoint: nothing is left to run
            state.end(trial.dirname)
            changed = True
        dropped = _trim_results(fs, trial_dir, iteration, row, logged)
        restarts.append(
            Restart(
                trial.dirname, checkpoint, iteration, steps, trial.checkpoint, dropped, finished
            )
        )
    if changed:
        state.save()
    return restarts


class RestartedTrials:
    """A driver listener (`rlsweep.run.tune_bridge.listening`) for the result files of a trial
    Tune restarts within a run: a retry (`max_failures`), or PBT's pause and resume, or its
    exploit. At each start of a trial that has a checkpoint, Tune's loggers copy its
    result.json and progress.csv from storage over the driver's (`_ray_compat.
    trial_result_dirs`); storage holds them as the driver last synced it, seconds or minutes
    before, and the rows since would be lost. So at each start the driver's files, where it has
    them (it writes them, then syncs them), go to storage first. A retried trial restarts from
    its latest checkpoint: its files are first cut back to that checkpoint (to nothing without
    one), in both places, so that the iterations it reports again are logged once (Tune's
    loggers append in place, O_APPEND)."""

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        from rlsweep._ray_compat import trial_result_dirs

        at = checkpoint_iteration(trial) or 0
        for fs, root in trial_result_dirs(trial):
            _trim_results(fs, root.rstrip("/"), at)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        from rlsweep._ray_compat import trial_result_dirs

        (local_fs, local), *stored = trial_result_dirs(trial)
        for name in RESULT_FILES:
            text = _read(local_fs, f"{local.rstrip('/')}/{name}")
            for fs, root in stored if text is not None else ():
                _write(fs, f"{root.rstrip('/')}/{name}", text)


def _fs(experiment: str) -> tuple[pafs.FileSystem, str]:
    fs, root = filesystem(experiment)
    return (fs or pafs.LocalFileSystem()), root.rstrip("/")


def _index(checkpoint: str | None) -> int:
    match = CHECKPOINT_DIR.match(checkpoint or "")
    return int(match[1]) if match else -1


def newer_checkpoint(
    fs: pafs.FileSystem, trial_dir: str, named: str | None
) -> tuple[str, int, dict] | None:
    """(name, index, manifest) of the trial's newest complete checkpoint where it is newer than
    `named`, the one Tune's state names, else None: a resume restores the trial from it, or
    else from `named` (`reconcile`)."""
    newest = newest_complete(fs, trial_dir)
    return newest if newest is not None and newest[1] > _index(named) else None


def newest_complete(fs: pafs.FileSystem, trial_dir: str) -> tuple[str, int, dict] | None:
    """(name, index, manifest) of the trial's newest whole checkpoint; None if it has none."""
    return next(complete_checkpoints(fs, trial_dir), None)


def complete_checkpoints(
    fs: pafs.FileSystem, trial_dir: str, above: int = -1, below: float = float("inf")
) -> Iterator[tuple[str, int, dict]]:
    """(name, index, manifest) of each of the trial's whole checkpoints whose index lies
    between `above` and `below`, newest first (each manifest read only when the one before
    it is passed over: a PBT trial keeps hundreds, maybe in S3)."""
    infos = fs.get_file_info(pafs.FileSelector(trial_dir, allow_not_found=True))
    dirs = sorted(
        ((int(m[1]), i.base_name) for i in infos if (m := CHECKPOINT_DIR.match(i.base_name))),
        reverse=True,
    )
    for index, name in dirs:
        if not above < index < below:
            continue
        if (manifest := complete_manifest(fs, f"{trial_dir}/{name}")) is not None:
            yield name, index, manifest


def _log_older_reports(
    fs: pafs.FileSystem, trial_dir: str, trial_id: str, checkpoints: list[tuple[str, int, dict]]
) -> None:
    """Write into result.json, oldest first, the report of each of `checkpoints` (whole ones,
    (name, index, manifest), oldest first) whose iteration it lacks: a driver that fell behind
    its trial and was killed logged none of their reports, and deleted none of those
    checkpoints (Tune deletes an older one as it logs a newer one's report)."""
    for checkpoint, _, manifest in checkpoints:
        text = _read(fs, f"{trial_dir}/result.json") or ""
        rows = result_rows(text)
        if any(int(r.get(M.TUNE_ITERATION, 0)) == int(manifest["iteration"]) for r in rows):
            continue
        row = _checkpoint_row(fs, trial_dir, trial_id, checkpoint, manifest)
        if row is not None:
            rows = sorted([*rows, row], key=lambda r: int(r.get(M.TUNE_ITERATION, 0)))
            _write(fs, f"{trial_dir}/result.json", "".join(json.dumps(r) + "\n" for r in rows))


def _tracked_result(row: dict[str, Any] | None, checkpoint: str, manifest: dict) -> dict:
    """The result Tune's state keeps with `checkpoint`: its row, or what the manifest says of
    it where that is from before manifests kept the report."""
    return row or {
        M.TUNE_ITERATION: manifest["iteration"],
        M.ENV_STEPS: manifest["env_steps"],
        "checkpoint_dir_name": checkpoint,
    }


def _read(fs: pafs.FileSystem, path: str) -> str | None:
    try:
        with fs.open_input_stream(path) as f:
            return f.read().decode()
    except FileNotFoundError:
        return None


def _write(fs: pafs.FileSystem, path: str, text: str) -> None:
    with fs.open_output_stream(path) as f:
        f.write(text.encode())


def _checkpoint_row(
    fs: pafs.FileSystem, trial_dir: str, trial_id: str, checkpoint: str, manifest: dict
) -> dict[str, Any] | None:
    """The result row of the trial's iteration at `checkpoint`: result.json's or, where the
    driver never wrote it, the trial's report as the checkpoint's manifest keeps it, with the
    fields Tune adds that can be known: its config as the trial's last row or params.json has
    it; `time_total_s` carried on from that row by the trial's own wall clock;
    `iterations_since_restore` from the iteration its process resumed at; and, where that row
    is the iteration before and came from the same process, its pid, host and node IP, and the
    time since it by the trial's wall clock (`time_this_iter_s`, `time_since_restore`). None
    for a manifest from before it kept the report."""
    from ray.tune.result import SHOULD_CHECKPOINT

    rows = result_rows(_read(fs, f"{trial_dir}/result.json") or "")
    if logged := [r for r in rows if r.get("checkpoint_dir_name") == checkpoint]:
        return logged[-1]
    iteration = int(manifest["iteration"])
    if not (report := manifest.get("result")):
        return None
    before = [r for r in rows if int(r.get(M.TUNE_ITERATION, 0)) < iteration]
    last = before[-1] if before else {}
    config = last.get("config")
    if config is None:
        config = json.loads(_read(fs, f"{trial_dir}/params.json") or "null")
    wall = float(report.get(M.WALL_S, 0.0))
    took = wall - float(last.get(M.WALL_S, 0.0))
    total = float(last.get("time_total_s", 0.0)) + took
    written = datetime.fromtimestamp(float(manifest.get("written_at", time.time())))
    process = {}
    if M.RESUMED_AT in report:
        process["iterations_since_restore"] = iteration - int(report[M.RESUMED_AT])
    same_process = last.get(M.RESUMED_AT) == report.get(M.RESUMED_AT)
    if last.get(M.TUNE_ITERATION) == iteration - 1 and same_process:
        process |= {k: last[k] for k in ("pid", "hostname", "node_ip") if k in last}
        process["time_this_iter_s"] = took
        process["time_since_restore"] = float(last.get("time_since_restore", 0.0)) + took
    return {
        **report,
        **process,
        M.TUNE_ITERATION: iteration,
        "checkpoint_dir_name": checkpoint,
        SHOULD_CHECKPOINT: True,  # as Tune sets it on a report with a checkpoint
        "done": False,
        "trial_id": trial_id,
        "date": written.strftime(TUNE_DATE),
        "timestamp": int(written.timestamp()),
        "time_total_s": total if last else wall,
        **({"config": config} if config is not None else {}),
    }


def _trim_results(
    fs: pafs.FileSystem,
    trial_dir: str,
    iteration: int,
    row: dict[str, Any] | None = None,
    logged: dict[str, Any] | None = None,
) -> int:
    """Keep result.json's and progress.csv's rows up to `iteration`, each iteration once (the
    last report of it), and `row` as the row of `iteration` where result.json lacks one;
    progress.csv gets a row for each iteration result.json holds and it lacks (Tune's CSV
    logger runs after its JSON logger: a driver killed between the two leaves it a row short,
    or without even its header). A progress.csv without its header gets the one Tune wrote
    with `logged`, the first row Tune logged to result.json; without that row it is left to
    Tune, which writes its header with its next row (one made here could order its columns
    otherwise). The number of result.json rows removed."""
    text = _read(fs, f"{trial_dir}/result.json")
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]

    def at(line: str) -> Any:
        return json.loads(line).get(M.TUNE_ITERATION)

    kept = _up_to(lines, iteration, at)
    dropped = len(lines) - len(kept)
    if row is not None and not _has(kept, iteration, at):
        kept.append(json.dumps(row))
    if kept != lines:
        _write(fs, f"{trial_dir}/result.json", "".join(f"{ln}\n" for ln in kept))
    reported = {int(float(at(ln))): json.loads(ln) for ln in kept}

    text = _read(fs, f"{trial_dir}/progress.csv")
    header, *rows = list(csv.reader(io.StringIO(text))) if text else [[]]
    if not header and logged is not None:  # the header Tune wrote with that row
        header = list(_flat(logged))
    if M.TUNE_ITERATION in header:
        column = header.index(M.TUNE_ITERATION)
        # A row cut by the kill (short of the header, or a last line without its newline) is
        # torn: result.json's whole row takes its place.
        whole = rows[:-1] if rows and not text.endswith("\n") else rows
        whole = [r for r in whole if len(r) == len(header)]
        by_iteration = {
            int(float(r[column])): r for r in _up_to(whole, iteration, lambda r: r[column])
        }
        for k, reported_row in reported.items():
            by_iteration.setdefault(k, _csv_row(header, reported_row))
        kept_rows = [by_iteration[k] for k in sorted(by_iteration)]
        if kept_rows != rows or (kept_rows and not text):
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows([header, *kept_rows])
            _write(fs, f"{trial_dir}/progress.csv", out.getvalue())
    return dropped


def _has(items: list, iteration: int, iteration_of) -> bool:
    """Whether `items` (`_up_to`'s, every one readable) hold a row of `iteration`."""
    return any(int(float(iteration_of(item))) == iteration for item in items)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """`row` as Tune's CSV logger sees it: config left out, nested keys flattened by Tune's
    `flatten_dict`, in the row's order."""
    from ray.tune.utils import flatten_dict

    return flatten_dict({k: v for k, v in row.items() if k != "config"}, delimiter="/")


def _csv_row(header: list[str], row: dict[str, Any]) -> list[str]:
    """`row` as progress.csv's columns, as Tune's CSV logger writes it (a float as its repr, a
    column the row lacks empty)."""
    flat = _flat(row)
    cells = (flat.get(c) for c in header)
    return ["" if v is None else repr(v) if isinstance(v, float) else str(v) for v in cells]


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
