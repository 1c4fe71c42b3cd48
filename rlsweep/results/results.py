"""Read Tune experiment directories into tidy tables — finished, running or interrupted sweeps.

Layout read: `<storage>/<sweep>/<trial dir>/{trial.json, params.json, result.json,
error.txt|error.pkl}`, `result.json` holding one JSON object per reported iteration and
`trial.json` the config the trial ran (`rlsweep.spec.spec.TRIAL_FILE`; where it is missing, Tune's
params.json). Plain file reading; only `resume_points` imports Ray, to read Tune's experiment
state.

`load_curves()` gives one row per trial per reported iteration; `final_scores()` one row per
trial. Every trial found is kept, and its `status` says whether its numbers may be aggregated:

- `ERROR`: the trial dir holds `error.txt` or `error.pkl` (Tune writes them when a trial raised)
  and no retry reached the budget, or result.json has a line that is not JSON (other than a
  half-written last line), or the trial stopped itself as failed (`trial/error`, e.g. a
  non-finite loss), or a number is unusable: a stable metric is ±inf on any row,
  `test/return(_norm)` is NaN on a row that evaluated (`test/fresh`: evaluation always plays its
  episodes to the end; `_norm` only where the mode is calibrated), `env_steps` is missing, or
  a `loss/*` value is non-finite on the last row (training diverged); or its config is unknown:
  no trial.json, and params.json names an Optuna cell by its index. NaN `train/return` is *not*
  an error: it means no evaluation has run yet.
- `TERMINATED`: not an error, and the last row's `env_steps` reached the trial's
  `total_env_steps` budget (a crash that a Tune retry recovered from is noted in `error`).
- `INCOMPLETE`: everything else — still running, interrupted, not started yet (no result.json:
  the trial gets one placeholder row with `iteration` 0 and NaN metrics), or stopped early by a
  scheduler (the files do not say why a trial stopped, so these cannot be told apart).

Only TERMINATED trials belong in aggregates (`finished()`); reports list the others.
`trials_table()` is one sweep's table as `rlsweep run` prints it, `resume_points()` what
`rlsweep resume` does with each of its trials.

Normalized metrics (`*_norm`) are NaN for modes train-procgen has no constants for (extreme,
memory, exploration; `trial_normalization_note` says why), whatever result.json recorded (a
trainable may have normalized them with another mode's constants).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rlsweep import formatting, storage
from rlsweep import metrics as M
from rlsweep._ray_compat import ERROR, TERMINATED, TuneState, TuneTrial
from rlsweep.envs import procgen
from rlsweep.experiment import history
from rlsweep.experiment.experiment_dir import sweep_spec
from rlsweep.spec.config import recorded_config
from rlsweep.spec.spec import CELL_INDEX, SAMPLE, TRIAL_FILE, VARIANT, SweepSpec

if TYPE_CHECKING:
    from rlsweep.experiment.recovery import Restart

INCOMPLETE = "INCOMPLETE"
"""A trial that neither finished nor failed (stopped, or not yet ended): rlsweep's name."""
STATUSES = (TERMINATED, ERROR, INCOMPLETE)

ID_COLUMNS = ("sweep", "trial_id", "game", "seed")
METRIC_COLUMNS = (*M.METRICS, M.TEST_FRESH, M.RESUMED_AT)
ITERATION = "iteration"
STATUS_COLUMNS = ("status", "error")
FINAL_EXTRA = ("test_iteration", "test_env_steps")
"""Final view only: the iteration and env steps of the evaluation its test score comes from."""
_TEST_AT_EVAL = (M.TRAIN_RETURN, M.TRAIN_RETURN_NORM, M.TEST_RETURN, M.TEST_RETURN_NORM, M.GAP_NORM)
"""Final view: taken from the last row that evaluated (train and test levels), not the last row."""
_NOT_PARAMS = {
    *ID_COLUMNS,
    ITERATION,
    *METRIC_COLUMNS,
    *M.MEMORY_METRICS,
    M.DEVICE,
    *STATUS_COLUMNS,
    *FINAL_EXTRA,
}
_NORM_METRICS = (M.TRAIN_RETURN_NORM, M.TEST_RETURN_NORM, M.GAP_NORM)


def trial_normalization_note(params: Any) -> str | None:
    """Why a trial (its params, a dict or a results row) has no normalized scores, or None:
    `procgen.normalization_note` for its game and distribution mode."""
    game, mode = params.get("game"), params.get("distribution_mode")
    if game not in procgen.GAMES or not isinstance(mode, str):
        return None
    return procgen.normalization_note(game, mode)


# --- finding trials -----------------------------------------------------------------------


def experiment_dirs(path: str | Path) -> list[Path]:
    """`path` itself if it is an experiment dir (its subdirs are trials), else the experiment
    dirs directly inside it (a storage dir holding several sweeps). A URI (`s3://...`) is read
    from its local copy, fetched first (`rlsweep.storage.fetch`, checkpoints left out)."""
    if storage.is_uri(path):
        path = storage.fetch(str(path))
    path = Path(path)
    if path.is_file():
        raise FileNotFoundError(f"{path}: a file, not a directory")
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such directory")
    if any(map(history.is_trial_dir, path.iterdir())):
        return [path]
    found = sorted(
        d for d in path.iterdir() if d.is_dir() and any(map(history.is_trial_dir, d.iterdir()))
    )
    if not found:
        raise FileNotFoundError(f"{path}: no Tune trial directories (with params.json) found")
    return found


# --- one trial ----------------------------------------------------------------------------


def cell(v: Any) -> Any:
    # Lists/dicts become strings so columns stay hashable and comparable.
    return str(v) if isinstance(v, list | tuple | dict) else v


def _read_results(path: Path) -> tuple[list[dict[str, Any]], str]:
    """Rows of result.json and an error text ('' if fine). A half-written last line (trial
    interrupted mid-write) is dropped; a bad line before it is an error."""
    if not path.exists():
        return [], ""
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            return rows, f"result.json line {i + 1} is not JSON"
    # A restored trial appends again from its checkpoint: keep the latest report per iteration.
    by_iter = {r.get(M.TUNE_ITERATION, i + 1): r for i, r in enumerate(rows)}
    return [by_iter[k] for k in sorted(by_iter)], ""


def _error_file_text(trial_dir: Path) -> str:
    """The first line of the reason of the trial's last failure (`history.reason`); its full
    text, every failure's, is the trial dir's error.txt."""
    txt = trial_dir / history.ERROR_FILE
    if txt.exists():
        return history.reason(txt.read_text(errors="replace")) or f"{txt.name} (empty)"
    if (trial_dir / history.ERROR_PICKLE).exists():
        return f"{history.ERROR_PICKLE} (a pickled exception; see the trial dir)"
    return ""


def _number_error(records: list[dict[str, Any]], last: dict[str, Any], normalized: bool) -> str:
    """Why this trial's numbers (its rows as `_trial_rows` builds them) are unusable, or ''.
    `normalized`: its mode has normalization constants (else `test/return_norm` is NaN by
    design)."""
    for col in M.METRICS:
        for r in records:
            if math.isinf(r[col]):
                return f"{col} is {r[col]} at iteration {r[ITERATION]}"
    for r in records:
        if math.isnan(r[M.ENV_STEPS]):
            return f"{M.ENV_STEPS} missing at iteration {r[ITERATION]}"
    for col in (M.TEST_RETURN, M.TEST_RETURN_NORM) if normalized else (M.TEST_RETURN,):
        for r in records:
            if r[M.TEST_FRESH] and math.isnan(r[col]):
                return f"{col} is NaN at evaluation iteration {r[ITERATION]}"
    if reason := last.get(M.TRIAL_ERROR):
        return str(reason)
    for key, v in last.items():
        if key.startswith("loss/") and isinstance(v, int | float) and not math.isfinite(v):
            return f"{key} is {v} at the last iteration (training diverged)"
    return ""


def _trial_params(trial_dir: Path, rows: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """What the trial ran, and an error text ('' if known): its `TRIAL_FILE`, else Tune's
    params.json or its first result's config, which are that where they hold no Optuna cell
    index (grid and random sweeps: Tune resolves their configs itself). A cell index alone does
    not say which game, seed and variant ran: the trial is an error, its other params kept."""
    for name in (TRIAL_FILE, "params.json"):
        if (trial_dir / name).exists():
            params = json.loads((trial_dir / name).read_text())
            break
    else:
        params = (rows[0].get("config") or {}) if rows else {}
    params = recorded_config(params)
    params.pop(SAMPLE, None)  # which drawn configuration: its values are in params already
    if CELL_INDEX not in params:
        return params, ""
    params = {k: v for k, v in params.items() if k != CELL_INDEX}
    return params, (
        f"no {TRIAL_FILE}: its config records an Optuna cell index ({CELL_INDEX}), not the "
        f"game, seed and variant it ran"
    )


def load_trial(trial_dir: str | Path, sweep: str | None = None) -> pd.DataFrame:
    """One trial's tidy rows (see the module docstring for columns and status)."""
    trial_dir = Path(trial_dir)
    rows = _trial_rows(trial_dir, sweep if sweep is not None else trial_dir.parent.name)
    return _table(rows)


def _table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """`rows` as one table, a value of None kept as None (an unknown game, a param left null):
    pandas would read it as NaN beside numbers or text, and a seed column as floats."""
    df = pd.DataFrame.from_records(rows)
    for col in {k for r in rows for k, v in r.items() if v is None}:
        df[col] = pd.Series([r.get(col, math.nan) for r in rows], index=df.index, dtype=object)
    return df


def _trial_rows(trial_dir: Path, sweep: str) -> list[dict[str, Any]]:
    """`load_trial`'s rows as dicts: a search's thousands of trials make one table at once."""
    rows, error = _read_results(trial_dir / "result.json")
    params, unknown = _trial_params(trial_dir, rows)

    uncalibrated = trial_normalization_note(params) is not None
    head = {"sweep": sweep, "trial_id": trial_dir.name}
    head["game"], head["seed"] = params.get("game"), params.get("seed")
    head.update({k: cell(v) for k, v in sorted(params.items()) if k not in _NOT_PARAMS})
    records = []
    for r in rows or [{M.TUNE_ITERATION: 0}]:
        rec = {**head, ITERATION: int(r.get(M.TUNE_ITERATION, 0))}
        for col in M.METRICS:
            v = r.get(col)
            rec[col] = float(v) if isinstance(v, int | float) else math.nan
        rec.update({c: float(r[c]) for c in M.MEMORY_METRICS if isinstance(r.get(c), int | float)})
        if isinstance(r.get(M.DEVICE), str):  # trainables of earlier rlsweeps did not say
            rec[M.DEVICE] = r[M.DEVICE]
        fresh = r.get(M.TEST_FRESH)
        # A trainable without the flag: a finite test score means it evaluated that iteration.
        rec[M.TEST_FRESH] = (
            bool(fresh)
            if fresh is not None
            else math.isfinite(rec[M.TEST_RETURN_NORM]) or math.isfinite(rec[M.TEST_RETURN])
        )
        resumed = r.get(M.RESUMED_AT)  # NaN: the trainable did not report it
        rec[M.RESUMED_AT] = float(resumed) if isinstance(resumed, int | float) else math.nan
        if uncalibrated:  # never another mode's constants, whatever the trainable reported
            rec.update(dict.fromkeys(_NORM_METRICS, math.nan))
        records.append(rec)

    budget = params.get("total_env_steps")
    steps = records[-1][M.ENV_STEPS]
    reached = bool(rows) and isinstance(budget, int | float) and steps >= budget
    error = unknown or error or (_number_error(records, rows[-1], not uncalibrated) if rows else "")
    crashed = _error_file_text(trial_dir)
    if crashed and reached and not error:
        # Tune retried the trial from a checkpoint and the retry finished: its numbers count.
        status, error = TERMINATED, f"recovered after: {crashed}"
    elif crashed and reached:  # the retry ran to its budget, and failed on its own numbers
        status = ERROR
    elif error or crashed:
        status, error = ERROR, crashed or error
    elif reached:
        status = TERMINATED
    else:
        status = INCOMPLETE
    for rec in records:
        rec["status"], rec["error"] = status, error
    return records


# --- many trials --------------------------------------------------------------------------


def load_curves(paths: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """Tidy table of one or many experiment dirs (or storage dirs holding several): one row per
    trial per reported iteration, columns `sweep, trial_id, game, seed, <params>, iteration,
    <stable metrics>, test/fresh, trial/resumed_at_iteration, <GPU memory, where any trial ran
    on a GPU>, <perf/device, where trials said>, status, error` (`trial/resumed_at_iteration`:
    > 0 on rows a restored process reported, see `rlsweep.metrics.RESUMED_AT`)."""
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    rows = [
        row
        for path in paths
        for exp in experiment_dirs(path)
        for d in sorted(exp.iterdir())
        if history.is_trial_dir(d)
        for row in _trial_rows(d, exp.name)
    ]
    if not rows:
        raise FileNotFoundError(f"no trials under {', '.join(map(str, paths))}")
    df = _table(rows)
    params = sorted(c for c in df.columns if c not in _NOT_PARAMS)
    reported = [c for c in (*M.MEMORY_METRICS, M.DEVICE) if c in df]  # where trials did
    order = [*ID_COLUMNS, *params, ITERATION, *METRIC_COLUMNS, *reported, *STATUS_COLUMNS]
    df = df[order].sort_values(["sweep", "trial_id", ITERATION], kind="stable")
    return df.reset_index(drop=True)


def final_scores(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per trial: its last row, except that the evaluated scores (`train/return`,
    `test/return`, their `_norm`, `gap/return_norm`) come from the last row that evaluated
    (`test/fresh`), whose iteration and env steps are `test_iteration`/`test_env_steps`
    (NaN if it never evaluated). `iteration` is the number of the last reported iteration."""
    keys = ["sweep", "trial_id"]
    last = curves.groupby(keys, sort=False).tail(1).set_index(keys)
    evals = curves[curves[M.TEST_FRESH]].groupby(keys, sort=False).tail(1).set_index(keys)
    for col in _TEST_AT_EVAL:
        last[col] = evals[col].reindex(last.index)
    last["test_iteration"] = evals[ITERATION].reindex(last.index)
    last["test_env_steps"] = evals[M.ENV_STEPS].reindex(last.index)
    out = last.drop(columns=[M.TEST_FRESH]).reset_index()
    cols = [c for c in curves.columns if c != M.TEST_FRESH]
    status_at = cols.index("status")
    cols[status_at:status_at] = list(FINAL_EXTRA)
    return out[cols].reset_index(drop=True)


def evaluations_only(curves: pd.DataFrame) -> pd.DataFrame:
    """`curves` with the evaluated scores (`train/return`, `test/return`, their `_norm`,
    `gap/return_norm`) NaN on the rows that did not evaluate, where a trial repeats its last
    evaluation (`test/fresh` false): a table of scores over iterations then holds each score
    once, at the env steps it was measured, and no plateau that was never measured."""
    out = curves.copy()
    out.loc[~out[M.TEST_FRESH].astype(bool), list(_TEST_AT_EVAL)] = math.nan
    return out


def finished(
    final: pd.DataFrame, metric: str = M.TEST_RETURN_NORM, pooled: bool = False, quiet: bool = False
) -> pd.DataFrame:
    """The trials whose `metric` may be aggregated: TERMINATED with a finite value, one per
    cell (`one_per_cell`; `quiet`: without its warning)."""
    return one_per_cell(final[_aggregable(final, metric)], pooled, quiet)


def _aggregable(final: pd.DataFrame, metric: str = M.TEST_RETURN_NORM) -> pd.Series:
    return (final["status"] == TERMINATED) & np.isfinite(final[metric].to_numpy(dtype=float))


def _keys(df: pd.DataFrame, cols: Sequence[str]) -> pd.Series:
    """Per row, the values of `cols` as a tuple of strings (NaN and None compare equal to
    themselves as strings): a hashable key to group or compare trials by."""
    return pd.Series(
        [tuple(map(str, row)) for row in df[list(cols)].itertuples(index=False, name=None)],
        index=df.index,
        dtype=object,
    )


def _cells(final: pd.DataFrame, pooled: bool) -> pd.Series:
    """Each trial's cell: game, seed and every parameter, and its sweep unless `pooled`."""
    return _keys(final, [*([] if pooled else ["sweep"]), "game", "seed", *param_columns(final)])


def repeats(final: pd.DataFrame, pooled: bool = False) -> pd.Series:
    """The trials that repeat an earlier trial's cell (`one_per_cell`), each mapped to the
    `sweep/trial_id` of the first (by sweep, then trial dir name)."""
    cells = _cells(final, pooled)
    names = final["sweep"].astype(str) + "/" + final["trial_id"].astype(str)
    first = names.groupby(cells, sort=False).transform("first")
    return first[cells.duplicated(keep="first")].astype(object)


def one_per_cell(final: pd.DataFrame, pooled: bool = False, quiet: bool = False) -> pd.DataFrame:
    """One trial per cell (sweep, game, seed and every parameter; `pooled`: any sweep): two
    trials of one cell (two runs' trial dirs copied into one experiment dir; the same spec run
    under two names, pooled) are not two seeds. Keeps the first, with a warning
    naming the dropped ones unless `quiet`."""
    if final.empty:
        return final
    dup = repeats(final, pooled)
    if len(dup) and not quiet:
        dropped = [f"{final.at[i, 'sweep']}/{final.at[i, 'trial_id']}" for i in dup.index]
        where = "config and seed" if pooled else "sweep, game, seed and parameters"
        warnings.warn(
            f"{len(dropped)} trial(s) repeat another trial's {where} and are counted once, not "
            f"as more seeds: {', '.join(dropped[:5])}" + (" ..." if len(dropped) > 5 else ""),
            stacklevel=2,
        )
    return final.drop(index=dup.index)


def param_columns(df: pd.DataFrame) -> list[str]:
    """Trial parameter columns (everything but ids, iteration, metrics and status)."""
    return [c for c in df.columns if c not in _NOT_PARAMS]


def swept_params(df: pd.DataFrame) -> list[str]:
    """Parameters that take more than one value among the trials of some sweep (game and seed
    excluded: they are the axes every sweep has). Works on curves or final scores."""
    trials = df.drop_duplicates(["sweep", "trial_id"])
    out = []
    for col in param_columns(trials):
        values = trials[col].astype(str)  # NaN/None compare equal to themselves as strings
        if (values.groupby(trials["sweep"]).nunique() > 1).any():
            out.append(col)
    return out


# --- one sweep, as `run_sweep` and `resume_sweep` see it ------------------------------------


def trials_table(spec: SweepSpec, experiment: str) -> pd.DataFrame:
    """`SweepResult.trials` of the experiment dir `experiment` (local or a URI): `final_scores`
    in the spec's terms (its variants in its order, its swept params) with each trial's dir."""
    swept = ([VARIANT] if spec.variants else []) + list(spec.space)
    columns = ["game", "seed", *swept, *M.METRICS, ITERATION, "status", "error", "trial_dir"]
    try:
        final = final_scores(load_curves(experiment))
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


@dataclass(frozen=True)
class ResumePoints:
    """What `resume_sweep` does with each trial (`resume_points`)."""

    lines: list[str]
    """A headline, then a line per trial it continues."""
    to_run: int
    """Trials it continues or starts: 0 where every trial has ended (nothing to resume)."""


def resume_points(spec: SweepSpec, experiment: str, restarts: Sequence[Restart]) -> ResumePoints:
    """What `resume_sweep` does: a headline (what it keeps, continues and starts; the env steps
    left), then a line per trial it continues, from iteration N and its env steps (its newest
    complete checkpoint, `recovery.reconcile`'s `restarts`) or from scratch (no checkpoint);
    and how many trials it runs (0: no Ray starts)."""
    try:
        local = experiment_dirs(experiment)[0]  # a URI's local copy (checkpoints left out)
        final = final_scores(load_curves(local))
    except FileNotFoundError:
        return ResumePoints(
            [f"rlsweep: resuming {spec.name}: no trial had started"], spec.num_trials
        )
    finished = final["status"] == TERMINATED
    early = final["trial_id"].isin(_incomplete_ended_early(local, final))
    done = finished | early
    continued = set(final.loc[~done, "trial_id"])
    not_started = max(spec.num_trials - len(final), 0)
    # What is left to run: each continued trial from its checkpoint (no checkpoint: all of
    # its budget), each trial not started all of its budget.
    starts = {
        r.trial: spec.budget if r.finished else spec.counted_steps(r.env_steps) for r in restarts
    }
    left = sum(spec.budget - starts.get(t, 0.0) for t in continued) + not_started * spec.budget
    lines = [
        f"rlsweep: resuming {spec.name}: {int(finished.sum())} finished trial(s) kept, "
        f"{int(early.sum())} ended early by the scheduler kept, {int((~done).sum())} to "
        f"continue, {not_started} not started; {formatting.steps(left)} of "
        f"{formatting.steps(spec.sweep_env_steps)} env steps left"
    ]
    for r in restarts:
        if r.trial not in continued:
            continue
        if r.checkpoint is None:
            where = "from scratch: no checkpoint"
        else:
            where = f"from iteration {r.iteration}, {formatting.count(r.env_steps)} env steps"
            if r.checkpoint != r.tune_checkpoint:
                where += (
                    f" ({r.checkpoint}: newer than {r.tune_checkpoint}, the one Tune's saved "
                    "state names)"
                    if r.tune_checkpoint
                    else f" ({r.checkpoint}: Tune's saved state names no checkpoint)"
                )
        if r.rows_dropped:
            where += f"; its {r.rows_dropped} later row(s) dropped, to be reported again"
        lines.append(f"  {r.trial}: {where}")
    if any(r.checkpoint is not None and r.trial in continued for r in restarts):
        lines.append(
            "  (their envs start new episodes there: from then on their numbers are not an "
            f"uninterrupted run's, and their rows say {M.RESUMED_AT})"
        )
    return ResumePoints(lines, len(continued) + not_started)


def _ended_early(local: Path) -> set[str]:
    """Trial dirs that Tune marked TERMINATED before their budget: a scheduler (ASHA, a
    stopper) stopped them, or the trainable ended itself. Tune's restore leaves them be."""
    return {t.dirname for t in _tune_trials(local) if t.status == TERMINATED}


def ended_early(experiment: str) -> set[str]:
    """The trial dirs of `experiment` (local or a URI) that Tune ended before their budget (a
    scheduler's stop), among the INCOMPLETE ones; an empty set where nothing ran."""
    try:
        local = experiment_dirs(experiment)[0]
        final = final_scores(load_curves(local))
    except FileNotFoundError:
        return set()
    return _incomplete_ended_early(local, final)


def _incomplete_ended_early(local: Path, final: pd.DataFrame) -> set[str]:
    incomplete = set(final.loc[final["status"] == INCOMPLETE, "trial_id"])
    return incomplete & _ended_early(local) if incomplete else set()


def unfinished_configs(experiment: str) -> dict[str, dict[str, Any]]:
    """The config Tune saved for each trial a resume starts or continues (every trial not
    TERMINATED), by trial dir (its trial id where it has none yet); {} where nothing ran."""
    try:
        local = experiment_dirs(experiment)[0]
    except FileNotFoundError:
        return {}
    return {
        t.dirname or t.trial_id: t.config for t in _tune_trials(local) if t.status != TERMINATED
    }


def _tune_trials(local: Path) -> list[TuneTrial]:
    """Tune's trials as its experiment state saved them, read as a resume reads them
    (`TuneState`: the newest state file that reads, past one a killed driver tore); [] where no
    state reads here. This imports Ray (and starts none)."""
    import pyarrow.fs as pafs

    return TuneState(pafs.LocalFileSystem(), str(local)).trials


# --- an experiment: trials labelled by variant --------------------------------------------
# What a report compares: `experiment` labels every trial with its variant, the values of the
# `by` parameter(s) (default: the swept ones) and of any other parameter that differs between
# trials of one such value, so that a variant is one config (game and seed aside), and one sweep
# unless pooled.


@dataclass
class Experiment:
    """Loaded results with a `variant` label per trial; `counted` = the finished trials."""

    curves: pd.DataFrame
    final: pd.DataFrame
    by: list[str]
    variants: list[str]
    games: list[str]
    specs: dict[str, SweepSpec] = dataclasses.field(default_factory=dict)
    """Each sweep's spec, by sweep name (sweeps whose spec.yaml was found and describes their
    trials): what it runs, more than `final` has rows for when trials have not started (an
    interrupted sweep)."""
    pooled: bool = False
    """Trials of different sweeps share a variant when their configs agree (`--pool`)."""
    split: list[str] = dataclasses.field(default_factory=list)
    """The parameters of `by` that were not asked for (nor swept), added because trials of one
    asked-for value differ in them."""

    @property
    def counted(self) -> pd.DataFrame:
        """`finished` (`experiment` warned of repeated trials once)."""
        return self.counted_for(M.TEST_RETURN_NORM)

    @property
    def unstarted(self) -> dict[str, int]:
        """Per sweep whose spec is known, its trials not started yet (an interrupted sweep's:
        its spec runs more than it has trial dirs for)."""
        started = self.final["sweep"].value_counts()
        return {
            name: max(spec.num_trials - int(started.get(name, 0)), 0)
            for name, spec in self.specs.items()
        }

    @property
    def repeats(self) -> pd.Series:
        """Finished trials not counted because they repeat a counted one (`repeats`)."""
        return repeats(self.final[_aggregable(self.final)], self.pooled)

    def scores(self, variant: str, metric: str = M.TEST_RETURN_NORM) -> list[np.ndarray]:
        """Finished runs' final `metric` per game (games in order; empty if none finished).
        One variant's: a loop over variants calls `all_scores` once instead."""
        return self.all_scores(metric, [variant])[variant]

    def all_scores(
        self,
        metric: str = M.TEST_RETURN_NORM,
        variants: Iterable[str] | None = None,
        games: Sequence[str] | None = None,
    ) -> dict[str, list[np.ndarray]]:
        """`scores` of every variant (or of `variants`), on its games (or `games`), from one
        pass over the trials `counted_for(metric)`: a report's work stays linear in trials,
        however many variants it has."""
        wanted = list(self.variants if variants is None else variants)
        trials = self.counted_for(metric)
        return scores_by_game(trials, metric, wanted, self.games if games is None else games)

    def counted_for(self, metric: str) -> pd.DataFrame:
        """The trials whose `metric` counts: those that finished with a finite unseen-level
        score of its kind, `counted` for a normalized metric and, for a raw one, also the
        trials of a mode without normalization constants (every `_norm` of theirs is NaN). One
        set for a training and an unseen-level metric of a kind, so that their scores pair
        run by run."""
        test = M.TEST_RETURN_NORM if metric.endswith("_norm") else M.TEST_RETURN
        return finished(self.final, test, pooled=self.pooled, quiet=True)

    def runs(self, variant: str, game: str | None = None) -> list[pd.DataFrame]:
        """The curves of the variant's finished runs (on `game`, or on every game)."""
        per_game = self.all_runs([variant])[variant]
        if game is not None:
            return per_game.get(game, [])
        return [run for runs in per_game.values() for run in runs]

    def all_runs(
        self,
        variants: Iterable[str] | None = None,
        *,
        unfinished: bool = False,
        metric: str = M.TEST_RETURN_NORM,
    ) -> dict[str, dict[str, list[pd.DataFrame]]]:
        """`runs` of every variant (or of `variants`), by game, from one pass over the curves:
        each run's frame, ordered by game, seed and trial; the runs `counted_for(metric)`, as
        `all_scores` counts them. `unfinished`: the INCOMPLETE trials' instead (running,
        interrupted, or stopped early by a scheduler)."""
        wanted = list(self.variants if variants is None else variants)
        if unfinished:
            c = self.final[self.final["status"] == INCOMPLETE]
        else:
            c = self.counted_for(metric)
        c = c.loc[c["variant"].isin(wanted), ["sweep", "trial_id", "variant"]]
        cur = self.curves.drop(columns="variant", errors="ignore")
        cur = cur.merge(c, on=["sweep", "trial_id"], how="inner", sort=False)
        out: dict[str, dict[str, list[pd.DataFrame]]] = {v: {} for v in wanted}
        keys = ["variant", "game", "seed", "trial_id"]
        for (v, game, *_), run in cur.groupby(keys, dropna=False, sort=True):
            out[v].setdefault(game, []).append(run)
        return out

    def so_far(self, variants: Sequence[str]) -> tuple[Experiment, int] | None:
        """An unfinished comparison as it stands: these variants' trials at the newest
        evaluation (its iteration) that every one of them that has evaluated has reached, each
        counted there as if it had finished (trials evaluate at the same iterations, every
        `eval_interval`; failed ones left out). None while none of them is INCOMPLETE (the
        finished comparison is the one to read), or fewer than two of `variants` have an
        evaluation."""
        keys = ["sweep", "trial_id"]
        final = self.final[self.final["variant"].isin(variants) & (self.final["status"] != ERROR)]
        if not (final["status"] == INCOMPLETE).any():
            return None
        curves = self.curves.merge(final[keys], on=keys)
        evals = curves[curves[M.TEST_FRESH].astype(bool)]
        if evals["variant"].nunique() < 2:
            return None
        at = int(evals.groupby(keys, sort=False)[ITERATION].max().min())
        there = evals.loc[evals[ITERATION] == at, keys]
        curves = curves.merge(there, on=keys)
        curves = curves[curves[ITERATION] <= at].reset_index(drop=True)
        # Counted as finished: at this iteration, every trial here is as far as it goes.
        final = final_scores(curves).assign(status=TERMINATED)
        return dataclasses.replace(self, curves=curves, final=final, variants=list(variants)), at


def choose_by(final: pd.DataFrame, by: Sequence[str] | None) -> list[str]:
    """The variant parameters asked for: `by` if given (checked), else the swept parameters."""
    known = [*param_columns(final), "sweep"]
    if by:
        for p in by:
            if p not in known:
                raise ValueError(
                    f"--by {p}: not a parameter of these trials; swept: "
                    f"{', '.join(swept_params(final)) or 'none'}; all: {', '.join(known)}"
                )
        return list(by)
    swept = swept_params(final)
    if VARIANT in swept:  # an ablation's: its labels name what its variants set
        rest = split_params(final, [VARIANT], pooled=True)
        return [VARIANT, *(p for p in swept if p in rest)]
    return swept


def split_params(final: pd.DataFrame, by: Sequence[str], pooled: bool = False) -> list[str]:
    """What a variant must also be labelled by so that it holds one config: the parameters
    (not in `by`) that differ between trials of one `by` value, and then, unless `pooled`,
    `sweep` where trials of one config come from several sweeps."""
    trials = final.drop_duplicates(["sweep", "trial_id"])

    def differ(cols: list[str], keys: list[str]) -> list[str]:
        group = _keys(trials, keys)
        return [c for c in cols if (trials[c].astype(str).groupby(group).nunique() > 1).any()]

    extra = differ([c for c in param_columns(trials) if c not in by], list(by))
    if not pooled and "sweep" not in by:
        extra += differ(["sweep"], [*by, *extra])
    return extra


def _sort_key(v: object) -> tuple[int, float, str]:
    if isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


LABEL_DIGITS = 3
"""Significant digits of a sampled value in a variant's label (`lr=2.24e-4, gamma=0.998`);
more only where two variants would otherwise read alike."""


def _label(by: Sequence[str], values: Iterable[object], digits: int | None = None) -> str:
    # An ablation's variant is named by its own label ("Avg Pool", as ablation.md's columns),
    # other parameters as p=v; a trial without a variant (a plain sweep's, beside an
    # ablation's) shows none.
    parts = [
        str(v) if p == VARIANT else f"{p}={v if digits is None else formatting.searched(v, digits)}"
        for p, v in zip(by, values, strict=True)
        if not (p == VARIANT and _missing(v))
    ]
    return ", ".join(parts) or f"{VARIANT}=none"


def _short_labels(by: Sequence[str], combos: Sequence[tuple]) -> dict[str, str]:
    """Each combo's full label (every digit) -> the label people read: LABEL_DIGITS significant
    digits, more for the combos that would otherwise share a label (two sampled lr's that
    agree to 3 digits), each one different."""
    full = {_label(by, c): c for c in combos}
    short: dict[str, str] = {}
    for digits in range(LABEL_DIGITS, 18):
        pending = {f: _label(by, c, digits) for f, c in full.items() if f not in short}
        if not pending:
            break
        counts = pd.Series(list(pending.values())).value_counts()
        taken = set(short.values())
        short.update(
            (f, text) for f, text in pending.items() if counts[text] == 1 and text not in taken
        )
    return {f: short.get(f, f) for f in full}


def label_variants(
    df: pd.DataFrame,
    by: list[str],
    declared: Iterable[tuple] = (),
    variant_order: Sequence[str] = (),
) -> tuple[pd.Series, list[str]]:
    """A `p=v, q=w` label per row (an ablation's variant by its own name: `Avg Pool`), and the
    labels in value order: those of the rows and the `declared` value tuples (variants a spec
    runs that have no trial here). `variant` labels sort in `variant_order` (its specs' order,
    as ablation.md's columns), others after them.
    Sampled values show LABEL_DIGITS significant digits (`_short_labels`)."""
    if not by:
        return pd.Series("all", index=df.index), ["all"]
    rank = {v: i for i, v in enumerate(dict.fromkeys(variant_order))}  # a label's first place

    def key(combo: tuple) -> list[tuple]:
        return [
            (-1, float(rank[v]), "") if p == VARIANT and v in rank else _sort_key(v)
            for p, v in zip(by, combo, strict=True)
        ]

    combos = [*df[by].drop_duplicates().itertuples(index=False, name=None), *declared]
    combos = sorted(combos, key=key)
    short = _short_labels(by, combos)
    # Row by row, each value keeps its column's type (a row Series would turn ints to floats).
    rows = df[by].itertuples(index=False, name=None)
    labels = pd.Series([short[_label(by, r)] for r in rows], index=df.index, dtype=object)
    return labels, list(dict.fromkeys(short[_label(by, c)] for c in combos))


def declared_variants(spec: SweepSpec, by: Sequence[str]) -> list[tuple] | None:
    """The `by` values of every grid trial the spec runs, as its params.json records them; None
    when they are not known before the trials run (a sampled `by` parameter, or `sweep`)."""
    defaults = spec.defaults()
    if any(p in spec.sampled_keys or (p not in defaults and p != VARIANT) for p in by):
        return None
    keys = spec.grid_keys
    out = []
    for label, *values in itertools.product(
        spec.variant_labels, *(spec.space[k].values for k in keys)
    ):
        config = {**defaults, **spec.variants.get(label, {}), VARIANT: label}
        config.update(zip(keys, values, strict=True))
        out.append(tuple(cell(config[p]) for p in by))
    return list(dict.fromkeys(out))


def scores_by_game(
    trials: pd.DataFrame, metric: str, variants: Sequence[str], games: Sequence[str]
) -> dict[str, list[np.ndarray]]:
    """Each of `variants`' `metric` per game of `games`, over `trials` (a row each), in one
    pass; a game's runs in seed order, the order that pairs a variant's scores of two metrics
    run by run."""
    c = trials[trials["variant"].isin(variants)].sort_values(["seed", "trial_id"], kind="stable")
    values = c[metric].to_numpy(dtype=float)
    groups = c.groupby(["variant", "game"], sort=False).indices if len(c) else {}
    none = np.empty(0, dtype=int)
    return {v: [values[groups.get((v, g), none)] for g in games] for v in variants}


def complete(runs_per_game: Sequence[np.ndarray]) -> bool:
    """A variant's scores (`Experiment.scores`) hold a finished run on every game: aggregates
    over games need the same games."""
    return all(len(runs) for runs in runs_per_game)


def load_experiment(
    paths: Sequence[str | Path],
    by: Sequence[str] | None = None,
    *,
    pool: bool = False,
    spec: SweepSpec | None = None,
) -> Experiment:
    """Every trial under `paths`, labelled by variant (`experiment`)."""
    dirs = [d for p in paths for d in experiment_dirs(p)]
    return experiment(load_curves(dirs), dirs, by, pool=pool, spec=spec)


def experiment(
    curves: pd.DataFrame,
    dirs: Sequence[Path],
    by: Sequence[str] | None = None,
    *,
    pool: bool = False,
    spec: SweepSpec | None = None,
) -> Experiment:
    """`curves` (`load_curves` of `dirs`, or some of its trials) labelled by variant: the `by`
    parameters (default: the swept ones) and whatever else tells configs apart
    (`split_params`); a variant holds one sweep's trials unless `pool`. A variant the sweep's
    spec (`spec`, else each dir's sweep.yaml) runs shows up even when none of its trials has a
    score or a trial dir yet (it gets "—" cells)."""
    curves = curves.copy()
    final = final_scores(curves)
    asked = choose_by(final, by)
    split = split_params(final, asked, pool)
    by_ = [*asked, *split]
    declared: list[tuple] = []
    variant_order: list[str] = []
    specs: dict[str, SweepSpec] = {}
    for d in [d for d in dirs if d.name in set(final["sweep"])]:
        ran = spec if spec is not None else sweep_spec(d)
        found = declared_variants(ran, by_) if ran is not None and by_ else None
        seen = final.loc[final["sweep"] == d.name, by_].drop_duplicates()
        seen = {tuple(None if _missing(v) else v for v in t) for t in seen.itertuples(index=False)}
        # Only when it names every variant found (else the spec does not describe these trials).
        describes = found is None or seen <= set(found)
        if ran is not None and describes:
            specs[d.name] = ran
            declared += found or []
            variant_order += ran.variants
    final["variant"], variants = label_variants(final, by_, declared, variant_order)
    curves["variant"] = (
        curves[["sweep", "trial_id"]]
        .merge(final[["sweep", "trial_id", "variant"]], how="left")["variant"]
        .to_numpy()
    )
    games = sorted(final["game"].dropna().astype(str).unique())
    finished(final, pooled=pool)  # warns, once, of trials that repeat another's cell
    return Experiment(curves, final, by_, variants, games, specs, pool, split)


def pooled_groups(curves: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Pooled trials split by the games their config (game and seed aside) ran, named by those
    games: aggregates compare variants over the same games, so configs run on other games (an
    ablation on leaper beside sweeps on coinrun) get a report of their own. One group when
    every config ran the same games."""
    trials = curves.drop_duplicates(["sweep", "trial_id"])
    config = _keys(trials, param_columns(trials))
    games = trials["game"].astype(str).groupby(config).transform(lambda g: "+".join(sorted(set(g))))
    group = curves[["sweep", "trial_id"]].merge(
        trials[["sweep", "trial_id"]].assign(group=games), how="left"
    )["group"]
    return {g: curves[(group == g).to_numpy()].reset_index(drop=True) for g in sorted(set(group))}
