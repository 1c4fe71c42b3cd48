"""A sweep's history, told once: what happened to its trials besides training.

While a sweep runs, a worker's death, a retry and a failure each print one rlsweep line (the
progress view calls `recover_line` and `error_line` on Tune's events): the trial, what happened,
at which iteration, which retry of how many and from which checkpoint. Ray's own tracebacks of
them go to the sweep's driver log (`rlsweep._ray_compat.DRIVER_LOGS`, `RAYLET_MESSAGES`), and
each trial's full error text stays in its dir (`error.txt`, Tune's, every failure in turn); a
results table's `error` cell holds the reason's first line (`reason`). A resume says what it does
with each trial as it starts (`rlsweep.results.results.resume_points`).

Afterwards a report lists each trial that was retried, resumed or failed, with the iteration and
the reason (`history_section`), read from its trial dir: the failures in `error.txt`, the
restores in `result.json` (rows a restored process reported carry
`trial/resumed_at_iteration`); a restore that follows a failure was Tune's retry, another one a
`rlsweep resume`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rlsweep.metrics import RESUMED_AT, TRIAL_ERROR, TUNE_ITERATION

MAX_FAILURES = 2
"""Retries of a crashed trial, each from its last checkpoint (`run_sweep(max_failures=...)`,
`--max-failures`)."""
ERROR_FILE = "error.txt"
"""Tune's record of a trial's failures, in its dir: `Failure # N (occurred at DATE)` and the
error's full text, for each failure."""
ERROR_PICKLE = "error.pkl"
"""Tune's pickled exception of a trial's last failure, in its dir."""
_FAILURE = re.compile(r"^Failure # (\d+) \(occurred at ([\d_-]+)\)\s*$")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning))(:|$)")
TUNE_DATE = "%Y-%m-%d_%H-%M-%S"
"""How Tune writes a result row's `date`."""
DIED = ("The actor died", "worker process has died", "The actor is dead")
"""Ray's words for a trial whose worker process died (an ActorDiedError's text)."""
REASON_CHARS = 200
"""The most of a reason a table's cell or a console line holds."""


def reason(text: str) -> str:
    """The first line of an error's reason: in a traceback its last exception's line
    (`RuntimeError: ...`), else the text's first line (`The actor died unexpectedly ...`); of
    an error.txt, its last failure's."""
    failures = _failure_blocks(text)
    block = failures[-1][2] if failures else text
    lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
    found = [ln for ln in lines if _EXCEPTION.match(ln)]
    line = found[-1] if found else (lines[0] if lines else "")
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def _failure_blocks(text: str) -> list[tuple[int, datetime | None, str]]:
    """error.txt's failures: (number, when, the error's text)."""
    blocks: list[tuple[int, datetime | None, list[str]]] = []
    for line in text.splitlines():
        if m := _FAILURE.match(line.strip()):
            try:
                when = datetime.strptime(m.group(2), TUNE_DATE)
            except ValueError:
                when = None
            blocks.append((int(m.group(1)), when, []))
        elif blocks:
            blocks[-1][2].append(line)
    return [(n, when, "\n".join(lines)) for n, when, lines in blocks]


# --- while the sweep runs: a line per event (`rlsweep.run.progress.ProgressView`)
# -------------------


def _iteration(trial: Any) -> int:
    return int((trial.last_result or {}).get(TUNE_ITERATION) or 0)


def checkpoint_iteration(trial: Any) -> int | None:
    """The iteration of the checkpoint a running Tune trial would restart from (None: none)."""
    try:
        saved = trial.latest_checkpoint_result
        return int(saved.metrics[TUNE_ITERATION]) if saved else None
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def _what(trial: Any) -> tuple[str, str]:
    """(what happened, its reason) of a trial's last failure, from its error.txt."""
    text = ""
    with contextlib.suppress(OSError, TypeError):  # no error.txt (yet)
        text = Path(trial.error_file).read_text(errors="replace")
    last = _failure_blocks(text)[-1][2] if _failure_blocks(text) else text
    died = any(words in last for words in DIED)
    return ("its worker died" if died else "it failed"), reason(text) or "no reason recorded"


def recover_line(trial: Any, label: str) -> str:
    """A retry's line: `trial coinrun s0 (id): its worker died at iteration 7 (reason); retry 1
    of 2, from its checkpoint at iteration 5`."""
    what, why = _what(trial)
    at = checkpoint_iteration(trial)
    start = f"from its checkpoint at iteration {at}" if at else "from scratch (no checkpoint)"
    retry = f"retry {trial.num_failures} of {trial.max_failures}"
    return (
        f"rlsweep: trial {label} ({trial.trial_id}): {what} at iteration {_iteration(trial)} "
        f"({why}); {retry}, {start}"
    )


def error_line(trial: Any, label: str) -> str:
    """A trial's end in failure: what, where, why, the retries spent, where the full text is."""
    what, why = _what(trial)
    retries = trial.max_failures
    spent = f"{retries} retr{'y' if retries == 1 else 'ies'} spent" if retries else "no retries"
    where = f"; full text in {trial.error_file}" if trial.error_file else ""
    return (
        f"rlsweep: trial {label} ({trial.trial_id}): {what} at iteration {_iteration(trial)} "
        f"({why}); {spent}: ERROR{where}"
    )


# --- afterwards: a report's section ----------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One thing that happened to a trial besides training."""

    trial: str
    what: str
    """retried, resumed or failed, in words."""
    iteration: int
    """The iteration it happened at (a failure's last report; a restore's checkpoint)."""
    reason: str


def is_trial_dir(d: Path) -> bool:
    """A trial's dir in an experiment dir: Tune's params.json in it, or the error files of a
    trial that failed before it had one."""
    return d.is_dir() and any((d / f).exists() for f in ("params.json", ERROR_FILE, ERROR_PICKLE))


def trial_events(trial_dir: Path) -> list[Event]:
    """What happened to the trial in `trial_dir`, in order, from its error.txt and result.json:
    each failure (retried from a checkpoint, or the last), and each `rlsweep resume` that
    restored it."""
    name = trial_dir.name
    rows = _rows(trial_dir / "result.json")
    error = trial_dir / ERROR_FILE
    failures = _failure_blocks(error.read_text(errors="replace")) if error.exists() else []
    restores = [
        (i, int(row[RESUMED_AT]))
        for i, row in enumerate(rows)
        if row.get(RESUMED_AT) and (i == 0 or rows[i - 1].get(RESUMED_AT) != row[RESUMED_AT])
    ]
    events: list[Event] = []
    left = list(failures)
    for i, at in restores:
        before = _when(rows[i - 1]) if i else None
        after = _when(rows[i])
        # A failure between the last report before the restore and the first after: a retry.
        match = next(
            (f for f in left if f[1] is None or _between(f[1], before, after)),
            None,
        )
        failed_at = int(rows[i - 1].get(TUNE_ITERATION, 0)) if i else 0
        if match is not None:
            left.remove(match)
            events.append(
                Event(
                    name,
                    f"retried (failure {match[0]}) from its checkpoint at iteration {at}",
                    failed_at,
                    reason(match[2]),
                )
            )
        else:
            events.append(
                Event(name, f"resumed from its checkpoint at iteration {at}", failed_at, "")
            )
    last = int(rows[-1].get(TUNE_ITERATION, 0)) if rows else 0
    for n, _, text in left:  # failures no restore followed: the trial ended in them
        events.append(Event(name, f"failed (failure {n})", last, reason(text)))
    if rows and (why := rows[-1].get(TRIAL_ERROR)):
        events.append(Event(name, "failed: stopped itself", last, str(why).splitlines()[0]))
    return events


def _rows(path: Path) -> list[dict[str, Any]]:
    return result_rows(path.read_text()) if path.exists() else []


def result_rows(text: str) -> list[dict[str, Any]]:
    """result.json's whole rows in the order written (a restored trial appends again; a torn
    line, its driver killed mid-write, is not a row)."""
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _when(row: dict[str, Any]) -> datetime | None:
    try:
        return datetime.strptime(str(row["date"]), TUNE_DATE)
    except (KeyError, ValueError):
        return None


def _between(t: datetime, before: datetime | None, after: datetime | None) -> bool:
    return (before is None or before <= t) and (after is None or t <= after)


def history_section(dirs: Sequence[Path], sweeps: set[str] | None = None) -> list[str]:
    """report.md's "Retries, resumes and failures": a row per event of each trial (in the
    experiment dirs `dirs`, those of `sweeps` if given), or a line saying there were none."""
    rows = []
    for d in dirs:
        if sweeps is not None and d.name not in sweeps:
            continue
        for trial in sorted(filter(is_trial_dir, d.iterdir())):
            for e in trial_events(trial):
                cell = e.reason.replace("|", "\\|") or "—"
                rows.append(f"| `{e.trial}` | {e.what} | {e.iteration} | {cell} |")
    head = ["## Retries, resumes and failures", ""]
    if not rows:
        return [
            *head,
            "None: no trial failed, was retried, or was restored from a checkpoint. (A trial "
            "that a stop caught before its first checkpoint starts again from scratch at the "
            'resume, which leaves no mark here: "Runs and wall time" lists each run of the '
            "sweep and how it ended.)",
            "",
        ]
    return [
        *head,
        "Each trial that failed, was retried from a checkpoint (Tune's `--max-failures`) or "
        "resumed (`rlsweep resume`), with the iteration of its last report that stands (for a "
        "restore, its checkpoint's: the reports after it were dropped and made again) and the "
        f"reason's first line; the full text is in the trial's `{ERROR_FILE}`. A restored "
        f"trial's rows after its checkpoint carry `{RESUMED_AT}`.",
        "",
        "| trial | what happened | iteration | reason |",
        "| :--- | :--- | ---: | :--- |",
        *rows,
        "",
    ]
