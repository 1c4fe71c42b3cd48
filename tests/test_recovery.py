"""A sweep stopped by its time limit, carried in parts (rlsweep.node.carry) and resumed at its new
path (Tune plumbing, with the fake trainable); what a resume picks from disk
(rlsweep.experiment.recovery, rlsweep.manifest). The real trial killed with SIGKILL and resumed
is in tests/test_resume.py."""

import functools
import json
import shutil
import tarfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.fs as pafs
import pytest
from tune_state import report, trial_entry, write_state

from rlsweep import formatting
from rlsweep import metrics as M
from rlsweep._ray_compat import TuneState
from rlsweep.errors import SpecError
from rlsweep.experiment.experiment_dir import runs
from rlsweep.experiment.interrupt import EXIT_TIME_LIMIT, SHUTDOWN_S, SweepInterrupted, TimeLimit
from rlsweep.experiment.recovery import (
    RestartedTrials,
    _fs,
    _log_older_reports,
    _trim_results,
    complete_checkpoints,
    newest_complete,
    reconcile,
)
from rlsweep.manifest import MANIFEST, complete_manifest, write_manifest
from rlsweep.node.carry import pack, unpack
from rlsweep.results.report import build_report
from rlsweep.run.sweep import _finish, resume_sweep, run_sweep
from rlsweep.run.tune_bridge import checkpoint_config
from rlsweep.spec.spec import SweepSpec
from rlsweep.testing import ITER_S_ENV, fake_trial, forget_iteration

ITER = 16384  # the fake trial's env steps per iteration (TrialConfig's default batch)
BUDGET = 30 * ITER
SAME = (M.ENV_STEPS, M.TRAIN_RETURN, M.TEST_RETURN, M.TRAIN_RETURN_NORM, M.TEST_RETURN_NORM)


def _rows(trial_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (trial_dir / "result.json").read_text().splitlines()]


def _table(df):
    keep = ["game", "seed", "status", "iteration", *SAME]
    return df[keep].sort_values(["game", "seed"]).reset_index(drop=True)


def test_a_time_limited_sweep_moved_elsewhere_resumes_to_the_uninterrupted_table(
    tmp_path, monkeypatch, capsys, no_ray_running
):
    """`time_limit`: the running trials checkpoint after their current iteration and stop well
    before the limit, the sweep raises with exit code 3 and the resume command; the experiment
    dir, moved to another path, resumes there to the end; its table is the uninterrupted
    run's, each iteration in result.json and progress.csv once, and `report` reads it. Each
    trial keeps its newest `keep_checkpoints` checkpoints (1 by default)."""
    spec = SweepSpec(
        name="limited",
        games=["coinrun"],
        seeds=[0, 1],
        budget=BUDGET,
        params={"checkpoint_interval": 4},
        storage_path=str(tmp_path),
    )
    # 24 s a trial: the limit falls mid-way, after Ray's start and the trials' (up to ~15 s on
    # 2 cores beside another test's trials: at 12 s a trial and SHUTDOWN_S + 15, neither trial
    # had reported when the limit stopped them, once).
    monkeypatch.setenv(ITER_S_ENV, "0.8")
    limit = SHUTDOWN_S + 25
    start = time.monotonic()
    with pytest.raises(SweepInterrupted) as stopped:
        run_sweep(spec, trainable=fake_trial, num_cpus=2, time_limit=limit)
    assert time.monotonic() - start < limit
    e = stopped.value
    assert e.exit_code == EXIT_TIME_LIMIT == 3 and e.signum is None
    assert str(e).startswith(f"time limit {limit:.0f}s: sweep limited stopped with 0 of 2")
    assert e.command == f"rlsweep resume {tmp_path / 'limited'}"
    df = e.result.trials
    assert len(df) == 2, f"a trial had not reported by the limit: {e}"
    assert (df["status"] == "INCOMPLETE").all() and (df["iteration"] < 30).all(), df
    reached = formatting.steps(df[M.ENV_STEPS].sum())  # what the two trials' checkpoints hold
    assert f"(2 started), {reached} of {formatting.steps(2 * BUDGET)} env steps (" in str(e)
    for d in df["trial_dir"]:
        assert _rows(Path(d))[-1][M.TRIAL_INTERRUPTED] is True  # it checkpointed on the way out
    # As if the driver died after the first trial uploaded its last checkpoint but before it
    # logged the report that came with it: the resume writes that row from the checkpoint.
    first, second = sorted(Path(d) for d in df["trial_dir"])
    lost = forget_iteration(first, _rows(first)[-1]["training_iteration"])
    # The driver's own table and stop line stand where the checkpoints are too (the same
    # reconcile as the resume's, once Ray is down): in a copy, the stop met again on this disk.
    shutil.copytree(tmp_path / "limited", tmp_path / "unlogged")
    why = f"time limit {limit:.0f}s"
    stopped_again = SimpleNamespace(stopped=True, signum=None, reason=lambda: why)
    with pytest.raises(SweepInterrupted) as again:
        _finish(spec, str(tmp_path / "unlogged"), None, stopped_again)
    trials = again.value.result.trials
    table = trials.set_index(trials["trial_dir"].map(lambda d: Path(d).name))
    assert table.loc[first.name, M.ENV_STEPS] == lost[M.ENV_STEPS], (table, lost)
    assert table.loc[first.name, "iteration"] == lost["training_iteration"]
    assert again.value.what == e.what  # the same env steps as when the sweep stopped
    # ... and, in a copy, as if the second trial's last report had ended it: it stays ended.
    shutil.copytree(tmp_path / "limited", tmp_path / "ended")
    ended = tmp_path / "ended" / second.name
    last = forget_iteration(ended, _rows(ended)[-1]["training_iteration"])
    (checkpoint,) = ended.glob("checkpoint_*")
    record = json.loads((checkpoint / MANIFEST).read_text())
    record["result"][M.TRIAL_DONE] = True
    (checkpoint / MANIFEST).write_text(json.dumps(record))
    by_trial = {r.trial: r for r in reconcile(str(tmp_path / "ended"))}
    assert by_trial[second.name].finished and not by_trial[first.name].finished
    assert _rows(ended)[-1][M.TRIAL_DONE] is True
    assert _rows(ended)[-1]["training_iteration"] == last["training_iteration"]
    states = {t.dirname: t.status for t in TuneState(*_fs(str(tmp_path / "ended"))).trials}
    assert states[second.name] == "TERMINATED" and states[first.name] != "TERMINATED"

    # Carried to another machine in parts (`rlsweep pack` / `unpack`), at another path, lean
    # (as a GPU sitting's): without what no resume loads. Beside the first trial's checkpoint
    # lie an older one and a newer one torn by a kill mid-save: neither goes.
    (newest,) = first.glob("checkpoint_*")
    older, torn = first / "checkpoint_000000", first / "checkpoint_000099"
    shutil.copytree(newest, older)
    shutil.copytree(newest, torn)
    (torn / MANIFEST).unlink()
    (tmp_path / "limited" / "report").mkdir()
    (tmp_path / "limited" / "report" / "report.md").write_text("written again by report\n")
    assert list(first.glob("events.out.tfevents.*"))  # TensorBoard's, which nothing here reads
    manifest = pack(tmp_path / "limited", tmp_path / "parts", part_bytes=4096, lean=True)
    assert len(manifest["parts"]) > 1 and manifest["lean"]
    assert manifest["checkpoints_left_out"] == [f"{first.name}/{c.name}" for c in (older, torn)]
    shutil.rmtree(tmp_path / "limited")
    moved = unpack(tmp_path / "parts", tmp_path / "elsewhere")
    assert moved == tmp_path / "elsewhere" / "limited"
    assert [p.name for p in (moved / first.name).glob("checkpoint_*")] == [newest.name]
    assert not list(moved.glob("*/events.out.tfevents.*")) and not (moved / "report").exists()
    monkeypatch.setenv(ITER_S_ENV, "0")
    resumed = resume_sweep(moved, trainable=fake_trial, num_cpus=2).trials
    assert all(Path(d).parent == moved for d in resumed["trial_dir"])
    reference = run_sweep(
        spec.with_overrides(storage_path=str(tmp_path / "ref"), keep_checkpoints=3),
        trainable=fake_trial,
        num_cpus=2,
    ).trials
    assert _table(resumed).equals(_table(reference)), (_table(resumed), _table(reference))
    # A sweep asked to stop as its last trial ended: nothing is left to resume, so it ran to
    # its end (exit 0), not stopped (it raised, exit 3, before).
    assert _finish(spec, str(tmp_path / "ref" / "limited"), None, stopped_again).exit_code == 0
    for d in resumed["trial_dir"]:
        rows = _rows(Path(d))
        assert [r["training_iteration"] for r in rows] == list(range(1, 31))
        if Path(d).name == first.name:  # its lost row, written again as Tune had logged it
            again = rows[lost["training_iteration"] - 1]
            assert {k: again[k] for k in SAME} == {k: lost[k] for k in SAME}
            assert again["trial_id"] == lost["trial_id"] and again["config"] == lost["config"]
            # Every field Tune had logged, its process's own as Tune had them.
            assert again.keys() == lost.keys(), again.keys() ^ lost.keys()
            process = ("pid", "hostname", "node_ip", "iterations_since_restore")
            assert {k: again[k] for k in process} == {k: lost[k] for k in process}
        csv = (Path(d) / "progress.csv").read_text().splitlines()
        assert len(csv) == 31  # header + one row per iteration
    report = build_report([moved]).read_text()
    assert "2 TERMINATED" in report
    # Its run record: the first run stopped by the limit, priced by its plan; then the resume.
    first, second = runs(moved)
    assert (first["command"], first["time_limit_s"], first["cpus"]) == ("run", limit, 2)
    assert first["outcome"] == f"time limit {limit:.0f}s" and 0 < first["wall_s"] < limit
    assert first["plan"]["est_wall_s"] > 0 and first["plan"]["concurrent"] == 2
    assert first["plan"]["eval_limit"] == 1000  # coinrun's: the plan counts evaluations to it
    assert (second["command"], second["outcome"], second["time_limit_s"]) == (
        "resume",
        "ended",
        None,
    )
    assert "## Runs and wall time" in report and "| 2 | " in report and "**Plan**" in report
    kept = [sorted(p.name for p in Path(d).glob("checkpoint_*")) for d in resumed["trial_dir"]]
    assert [len(k) for k in kept] == [1, 1], kept
    kept = [sorted(p.name for p in Path(d).glob("checkpoint_*")) for d in reference["trial_dir"]]
    assert [k[-3:] for k in kept] == [
        ["checkpoint_000005", "checkpoint_000006", "checkpoint_000007"]
    ] * 2
    # A driver killed while Tune wrote its state in place leaves the newest file torn: the
    # resume reads the newest that reads, and sets the torn one aside where Tune's restore,
    # which reads the newest, does not look.
    torn = moved / "experiment_state-2099-01-01_00-00-00.json"
    torn.write_text('{"trial_data": [["{\\"trial_id')
    again = resume_sweep(moved, trainable=fake_trial, num_cpus=2).trials
    assert (again["status"] == "TERMINATED").all()
    assert not torn.exists() and torn.with_name(f"{torn.name}.torn").exists()
    assert f"rlsweep: {torn} does not read (a driver killed while Tune wrote it)" in (
        capsys.readouterr().out
    )
    # With no earlier file that reads, nothing can resume: said, not guessed.
    alone = tmp_path / "alone"
    alone.mkdir()
    torn.with_name(f"{torn.name}.torn").rename(alone / torn.name)
    with pytest.raises(RuntimeError, match="no earlier state file does: nothing to resume"):
        reconcile(str(alone))
    # A finished sweep packs without checkpoints: a resume never loads an ended trial's.
    ended = pack(tmp_path / "ref" / "limited", tmp_path / "ref-parts", part_bytes=1 << 20)
    assert ended["checkpoints_left_out"] == sorted(
        f"{Path(d).name}/{c}" for d, k in zip(reference["trial_dir"], kept, strict=True) for c in k
    )
    assert len(ended["parts"]) == 1  # the whole archive
    with tarfile.open(tmp_path / "ref-parts" / ended["parts"][0]["name"]) as tar:
        names = tar.getnames()
    assert any(n.endswith("/result.json") for n in names), names
    assert not [n for n in names if "/checkpoint_" in n]


def test_keep_checkpoints_is_a_count_and_pbt_keeps_them_all():
    with pytest.raises(SpecError, match=r"keep_checkpoints: got 0; allowed: an integer >= 1"):
        SweepSpec(name="k", keep_checkpoints=0)
    pbt = {"algorithm": "random", "scheduler": "pbt", "mutations": ["lr"]}
    space = {"lr": {"loguniform": [1e-5, 1e-3]}}
    with pytest.raises(SpecError, match="pbt keeps every checkpoint"):
        SweepSpec(name="k", keep_checkpoints=2, search=pbt, space=space)
    assert checkpoint_config(SweepSpec(name="k", search=pbt, space=space)).num_to_keep is None
    assert checkpoint_config(SweepSpec(name="k", keep_checkpoints=2)).num_to_keep == 2


def test_the_time_limit_asks_two_of_the_longest_iterations_before_its_end():
    limit = TimeLimit(600, start=0.0)
    assert limit.end_at == 600 - SHUTDOWN_S and limit.ask_at == limit.end_at
    limit.saw_iteration(20.0)
    limit.saw_iteration(5.0)
    assert limit.ask_at == 600 - SHUTDOWN_S - 40 and limit.text() == "time limit 10m00s"
    with pytest.raises(ValueError):
        TimeLimit(0)


def _checkpoint(trial: Path, index: int, iteration: int, torn: bool = False) -> None:
    path = trial / f"checkpoint_{index:06d}"
    path.mkdir(parents=True)
    (path / "weights.bin").write_bytes(b"w" * 1000)
    write_manifest(str(path), iteration, iteration * 256.0)
    if torn:  # the driver died while the trial's files were being copied to storage
        (path / "weights.bin").write_bytes(b"w" * 10)


def test_the_newest_whole_checkpoint_is_the_one_a_resume_takes(tmp_path):
    trial = tmp_path / "t"
    _checkpoint(trial, 0, 2)
    _checkpoint(trial, 1, 4)
    _checkpoint(trial, 2, 6, torn=True)
    fs = pafs.LocalFileSystem()
    name, index, manifest = newest_complete(fs, str(trial))
    assert (name, index, manifest["iteration"]) == ("checkpoint_000001", 1, 4)
    assert complete_manifest(fs, str(trial / "checkpoint_000002")) is None
    (trial / "checkpoint_000001" / MANIFEST).unlink()  # an rlsweep before manifests wrote it
    assert newest_complete(fs, str(trial))[0] == "checkpoint_000000"


def test_rows_after_the_checkpoint_are_dropped_and_each_iteration_kept_once(tmp_path):
    """A trial that reported iterations 1-5, was restored at 3 by an earlier resume (3-5 again),
    then its driver died mid-line; continued from iteration 4, its files keep 1-4 once each."""
    its = [1, 2, 3, 4, 5, 3, 4, 5]
    lines = [
        json.dumps({"training_iteration": k, M.ENV_STEPS: 256 * k, "n": i})
        for i, k in enumerate(its)
    ]
    (tmp_path / "result.json").write_text("\n".join(lines) + '\n{"training_iter')
    csv = ["training_iteration,env_steps", *(f"{k},{256 * k}" for k in its)]
    (tmp_path / "progress.csv").write_text("\n".join(csv) + "\n")
    dropped = _trim_results(pafs.LocalFileSystem(), str(tmp_path), 4)
    rows = _rows(tmp_path)
    assert [(r["training_iteration"], r["n"]) for r in rows] == [(1, 0), (2, 1), (3, 5), (4, 6)]
    assert dropped == 5  # 1, 2 kept as they were; 3, 4 kept once; 5 (twice) and the torn line
    assert (tmp_path / "progress.csv").read_text().splitlines()[1:] == [
        "1,256",
        "2,512",
        "3,768",
        "4,1024",
    ]


def test_a_progress_row_torn_by_the_kill_is_written_whole_from_result_json(tmp_path):
    """The driver killed while Tune's CSV logger wrote iteration 3's row: cut after its
    iteration cell (short of the header, no newline), it is torn, and result.json's row of 3
    takes its place rather than stand with a cut-off value."""
    rows = [{"training_iteration": k, M.ENV_STEPS: 256.0 * k, "loss": 0.370368} for k in (1, 2, 3)]
    (tmp_path / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    header = f"training_iteration,{M.ENV_STEPS},loss"
    for torn in ("3,768.0,0.3", "3,768.0"):  # a whole row's length but no newline; short
        (tmp_path / "progress.csv").write_text(
            f"{header}\n1,256.0,0.370368\n2,512.0,0.370368\n{torn}"
        )
        _trim_results(pafs.LocalFileSystem(), str(tmp_path), 3)
        assert (tmp_path / "progress.csv").read_text().splitlines()[1:] == [
            f"{k},{256.0 * k},0.370368" for k in (1, 2, 3)
        ], torn


def test_the_checkpoints_row_is_written_where_a_file_lacks_it(tmp_path):
    """A driver killed before logging iteration 3's report (its checkpoint whole): result.json
    and progress.csv get that row back, the CSV in its header's columns as Tune writes them
    (config left out, a float as its repr, a missing column empty); a file that has it keeps
    its own."""
    (tmp_path / "result.json").write_text(
        "".join(json.dumps({"training_iteration": k, M.ENV_STEPS: 256 * k}) + "\n" for k in (1, 2))
    )
    header = f"training_iteration,{M.ENV_STEPS},{M.TRIAL_DONE},pid"
    (tmp_path / "progress.csv").write_text(
        f"{header}\n1,256,False,7\n2,512,False,7\n3,768,False,7\n"
    )
    row = {"training_iteration": 3, M.ENV_STEPS: 770.5, M.TRIAL_DONE: True, "config": {"lr": 1}}
    assert _trim_results(pafs.LocalFileSystem(), str(tmp_path), 3, row) == 0
    assert _rows(tmp_path)[-1] == row and len(_rows(tmp_path)) == 3
    assert (tmp_path / "progress.csv").read_text().splitlines()[-1] == "3,768,False,7"
    forget_iteration(tmp_path, 3)
    _trim_results(pafs.LocalFileSystem(), str(tmp_path), 3, row)
    assert (tmp_path / "progress.csv").read_text().splitlines()[1:] == [
        "1,256,False,7",
        "2,512,False,7",
        "3,770.5,True,",
    ]
    assert [r["training_iteration"] for r in _rows(tmp_path)] == [1, 2, 3]
    # A file that has the row anywhere keeps its own: here a retry reported 2 again after 3.
    (tmp_path / "result.json").write_text(
        "".join(json.dumps({"training_iteration": k}) + "\n" for k in (1, 2, 3, 2))
    )
    _trim_results(pafs.LocalFileSystem(), str(tmp_path), 3, row)
    assert [r["training_iteration"] for r in _rows(tmp_path)].count(3) == 1
    assert row not in _rows(tmp_path)


def test_progress_csv_gets_the_rows_a_kill_between_tunes_two_loggers_left_out(tmp_path):
    """Tune's JSON logger writes a report before its CSV logger does: a driver killed between
    them leaves progress.csv a row short, or (at the first report) without its header. The
    resume writes those rows from result.json, the header in the order Tune writes it (what
    stopped CI at 00e5f92: progress.csv empty, result.json holding iteration 1)."""
    rows = [
        {"training_iteration": k, M.ENV_STEPS: 256.0 * k, "info": {"lr": 0.5}, "config": {}}
        for k in (1, 2, 3)
    ]
    (tmp_path / "result.json").write_text(json.dumps(rows[0]) + "\n")
    (tmp_path / "progress.csv").write_text("")  # opened by Tune's CSV logger, nothing written
    _trim_results(pafs.LocalFileSystem(), str(tmp_path), 2, rows[1])  # no row Tune logged:
    assert (tmp_path / "progress.csv").read_text() == ""  # its header is Tune's to write
    assert _trim_results(pafs.LocalFileSystem(), str(tmp_path), 2, rows[1], rows[0]) == 0
    assert (tmp_path / "progress.csv").read_text().splitlines() == [
        f"training_iteration,{M.ENV_STEPS},info/lr",
        "1,256.0,0.5",
        "2,512.0,0.5",
    ]
    (tmp_path / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _trim_results(pafs.LocalFileSystem(), str(tmp_path), 3)  # progress.csv lacks 3
    assert (tmp_path / "progress.csv").read_text().splitlines()[1:] == [
        "1,256.0,0.5",
        "2,512.0,0.5",
        "3,768.0,0.5",
    ]


def test_a_driver_that_fell_behind_its_trial_loses_no_report_a_checkpoint_kept(tmp_path):
    """A driver killed while logging its trial's first report, the trial three checkpoints on
    (each with a report; the driver, having logged none of theirs, deleted none): the resume
    writes each missing iteration's row from its checkpoint, oldest first, and progress.csv
    follows result.json."""
    from rlsweep.manifest import write_manifest

    fs = pafs.LocalFileSystem()
    report = {M.ENV_STEPS: 0.0, M.WALL_S: 0.0, "config": {"lr": 1}}
    for index in range(3):
        checkpoint = tmp_path / f"checkpoint_{index:06d}"
        checkpoint.mkdir()
        (checkpoint / "state.json").write_text("{}")
        k = index + 1
        write_manifest(str(checkpoint), k, 256.0 * k, {**report, M.ENV_STEPS: 256.0 * k})
    first = {"training_iteration": 1, M.ENV_STEPS: 256.0, M.WALL_S: 0.0, "config": {"lr": 1}}
    (tmp_path / "result.json").write_text(json.dumps(first) + "\n")
    (tmp_path / "progress.csv").write_text("")
    older = list(reversed(list(complete_checkpoints(fs, str(tmp_path), below=2))))
    _log_older_reports(fs, str(tmp_path), "t0", older)
    rows = _rows(tmp_path)
    assert [(r["training_iteration"], r[M.ENV_STEPS]) for r in rows] == [(1, 256.0), (2, 512.0)]
    assert rows[1]["checkpoint_dir_name"] == "checkpoint_000001"
    assert rows[1]["config"] == {"lr": 1} and rows[1]["trial_id"] == "t0"
    last = {"training_iteration": 3, M.ENV_STEPS: 768.0, "config": {"lr": 1}}
    _trim_results(fs, str(tmp_path), 3, last, first)
    assert [r["training_iteration"] for r in _rows(tmp_path)] == [1, 2, 3]
    csv = (tmp_path / "progress.csv").read_text().splitlines()
    assert [line.split(",")[csv[0].split(",").index("training_iteration")] for line in csv[1:]] == [
        "1",
        "2",
        "3",
    ]


def test_a_copy_resumed_after_a_driver_behind_its_trial_keeps_one_checkpoint_and_its_own(
    tmp_path, no_ray_running
):
    """The trial's worker dies after iteration 5 (the sweep ends with it in ERROR) and two
    more whole checkpoints are made beside its checkpoint_000004, of iterations 6 and 7: as a
    trial two reports ahead of its driver leaves them (Tune deletes an older checkpoint only as
    it logs a newer one's report). The experiment dir is copied, and the copy resumed: from
    checkpoint_000006, each iteration reported once, and it ends with one checkpoint
    (keep_checkpoints: 1). The original is left as it was. Before, Tune tracked the older
    checkpoints beyond keep_checkpoints, and its restore moved only the newest to the copy: at
    the resumed trial's next checkpoint it deleted the others in the original dir."""
    spec = SweepSpec(
        name="behind",
        games=["coinrun"],
        seeds=[0],
        budget=8 * ITER,
        params={"checkpoint_interval": 1},
        storage_path=str(tmp_path),
    )
    died = functools.partial(fake_trial, die_at=5)
    (trial,) = run_sweep(spec, trainable=died, num_cpus=2, max_failures=0).trials.itertuples()
    assert trial.status == "ERROR", trial
    original = Path(trial.trial_dir)
    assert [p.name for p in original.glob("checkpoint_*")] == ["checkpoint_000004"]
    newest = original / "checkpoint_000004"
    report = json.loads((newest / MANIFEST).read_text())["result"]  # the trial's, iteration 5
    for index, k in ((5, 6), (6, 7)):  # the trial's, ahead of its driver
        ahead = original / f"checkpoint_{index:06d}"
        shutil.copytree(newest, ahead)
        (ahead / MANIFEST).unlink()
        (ahead / "state.json").write_text(json.dumps({"env_steps": k * ITER}))
        write_manifest(str(ahead), k, k * ITER, {**report, M.ENV_STEPS: k * ITER})
    before = sorted(p.name for p in original.glob("checkpoint_*"))
    shutil.copytree(tmp_path / "behind", tmp_path / "copy")
    (resumed,) = resume_sweep(tmp_path / "copy", trainable=died, num_cpus=2).trials.itertuples()
    assert resumed.status == "TERMINATED", resumed
    copy = Path(resumed.trial_dir)
    assert copy.parent == tmp_path / "copy"
    rows = _rows(copy)
    assert [r["training_iteration"] for r in rows] == list(range(1, 9))
    assert [r[M.RESUMED_AT] for r in rows] == [0] * 7 + [7]
    assert [p.name for p in copy.glob("checkpoint_*")] == ["checkpoint_000007"]
    assert sorted(p.name for p in original.glob("checkpoint_*")) == before  # untouched

    # Carried lean instead (a sitting's backstop killed its driver behind its trial): the pack
    # carries checkpoint_000006 alone, so iteration 6's report, which only checkpoint_000005
    # keeps, is written to result.json before it is left out. Before, it was lost.
    lean = pack(tmp_path / "behind", tmp_path / "parts", part_bytes=1 << 20, lean=True)
    moved = unpack(tmp_path / "parts", tmp_path / "node2")
    assert [p.name for p in (moved / original.name).glob("checkpoint_*")] == ["checkpoint_000006"]
    (carried,) = resume_sweep(moved, trainable=died, num_cpus=2).trials.itertuples()
    rows = _rows(Path(carried.trial_dir))
    assert [r["training_iteration"] for r in rows] == list(range(1, 9))
    assert [r[M.RESUMED_AT] for r in rows] == [0] * 7 + [7]

    # Carried where the parts may weigh less than with its checkpoint (a sitting's 64 MiB, more
    # trials than fit): the checkpoint is left out and the trial starts anew, rather than the
    # pack not coming back at all.
    most = sum(p["bytes"] for p in lean["parts"]) - 1
    small = pack(tmp_path / "behind", tmp_path / "small", 1 << 20, lean=True, max_bytes=most)
    assert small["checkpoints_dropped_to_fit"] == [f"{original.name}/checkpoint_000006"]
    assert sum(p["bytes"] for p in small["parts"]) <= most
    anew = unpack(tmp_path / "small", tmp_path / "node3")
    assert not list((anew / original.name).glob("checkpoint_*"))
    # What the resume does first: the trial, its checkpoint forgotten in the carried state,
    # starts from scratch, its rows dropped to be reported again (Tune's restore of a trial
    # without a checkpoint starts it anew).
    (restart,) = reconcile(str(anew))
    assert (restart.checkpoint, restart.iteration, restart.rows_dropped) == (None, 0, 7)
    assert not (anew / original.name / "result.json").read_text().strip()


def test_time_limit_flag_takes_a_duration_and_names_itself_when_bad(tmp_path):
    from rlsweep.cli import parser
    from rlsweep.formatting import parse_duration

    assert [parse_duration(t) for t in ("8m30s", "2h", "1d", "540", "1.5h")] == [
        510,
        7200,
        86400,
        540,
        5400,
    ]
    args = parser().parse_args(["resume", "results/x", "--time-limit", "9m"])
    assert args.time_limit == 540
    for cmd in (["run", "spec.yaml"], ["ablate", "model"], ["resume", "results/x"]):
        # 20 s: all of it kept for the sweep's end; inf: no limit, which is no flag
        for bad in ("0", "soon", "5 m", "20s", "8m30x", "inf", "nan", "-5"):
            with pytest.raises(SystemExit) as e:
                parser().parse_args([*cmd, "--time-limit", bad])
            assert e.value.code == 2
    assert parser().parse_args(["run", "s.yaml", "--time-limit", "21s"]).time_limit == 21


def test_a_time_limit_is_refused_off_the_main_thread_before_ray_starts(tmp_path, ray_sessions):
    """Tune ends its loop on a signal it handles only in the main thread."""
    import threading

    spec = SweepSpec(name="t", games=["coinrun"], seeds=[0], storage_path=str(tmp_path))
    errors = []

    def limited():
        try:
            run_sweep(spec, trainable=fake_trial, time_limit=60)
        except ValueError as e:
            errors.append(str(e))

    thread = threading.Thread(target=limited)
    thread.start()
    thread.join()
    assert errors == ["a time limit needs run_sweep/resume_sweep called in the main thread"]
    assert ray_sessions == [] and list(tmp_path.iterdir()) == []


def test_a_trial_retried_within_the_run_reports_each_iteration_once(tmp_path, no_ray_running):
    """Tune retries a trial whose worker died after iteration 3 from its checkpoint at
    iteration 2 (`max_failures`): it reports iteration 3 again, and Tune's loggers append, so
    before the retry its result files are cut back to the checkpoint (`recovery.RetriedTrials`).
    Without it, progress.csv holds iteration 3 twice, and result.json does where Tune synced
    it to storage after iteration 3 (Tune copies the stored one back at the restart)."""
    spec = SweepSpec(
        name="retried",
        games=["coinrun"],
        seeds=[0],
        budget=6 * ITER,
        params={"checkpoint_interval": 2},
        storage_path=str(tmp_path),
    )
    trials = run_sweep(
        spec, trainable=functools.partial(fake_trial, die_at=3), num_cpus=2, max_failures=2
    ).trials
    (trial,) = trials.itertuples()
    assert trial.status == "TERMINATED" and trial.error.startswith("recovered after:")
    rows = _rows(Path(trial.trial_dir))
    assert [r["training_iteration"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r[M.RESUMED_AT] for r in rows] == [0, 0, 2, 2, 2, 2]  # 3 is the retry's report
    csv = (Path(trial.trial_dir) / "progress.csv").read_text().splitlines()
    assert len(csv) == 7, csv  # header + one row per iteration


class _LoggedTrial:
    """What Tune's JSON and CSV loggers read of a trial (a key of their dicts, as a Trial):
    its config, whether it has a checkpoint, the driver's dir of it and its dir in storage."""

    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)

    def init_local_path(self) -> None:
        Path(self.local_path).mkdir(parents=True, exist_ok=True)


def test_a_trial_restarted_in_the_run_keeps_the_rows_storage_had_not_synced(tmp_path):
    """PBT pauses, resumes and exploits trials within a run, and at each start of a trial
    with a checkpoint Tune's loggers copy its result.json and progress.csv from storage over
    the driver's: storage holds them as of the driver's last sync. A PBT trial in a full `make
    test` once kept only the 2 rows it reported after its last restart, of 6. The driver's
    files go to storage first (`recovery.RestartedTrials`)."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    loggers = [CSVLoggerCallback(), JsonLoggerCallback()]
    listener = RestartedTrials()
    trial = _LoggedTrial(
        trial_id="t0",
        config={"lr": 1e-4},
        checkpoint=None,
        local_path=str(tmp_path / "driver" / "t0"),
        storage=SimpleNamespace(
            storage_filesystem=pafs.LocalFileSystem(), trial_fs_path=str(tmp_path / "stored" / "t0")
        ),
    )
    trial.init_local_path()
    stored = Path(trial.storage.trial_fs_path)
    stored.mkdir(parents=True)

    def start() -> None:  # the listener before Tune's loggers, as in a sweep
        listener.on_trial_start(0, [trial], trial)
        for logger in loggers:
            logger.on_trial_start(0, [trial], trial)

    def report(k: int) -> None:
        for logger in loggers:
            logger.on_trial_result(0, [trial], trial, {"training_iteration": k})

    start()
    report(1)
    for name in ("result.json", "progress.csv"):  # the driver's last sync
        shutil.copy(Path(trial.local_path, name), stored / name)
    report(2)
    trial.checkpoint = "checkpoint_000000"  # paused at its checkpoint
    start()  # resumed, or exploited another's
    report(3)
    rows = [json.loads(x) for x in Path(trial.local_path, "result.json").read_text().splitlines()]
    assert [r["training_iteration"] for r in rows] == [1, 2, 3]
    progress = Path(trial.local_path, "progress.csv").read_text().splitlines()
    assert progress == ["training_iteration", "1", "2", "3"]


def _pbt_state(root: Path) -> None:
    """Tune's state of two PBT trials where B exploited A: B's latest checkpoint is A's
    checkpoint_000002 (iteration 6), as PBT's exploit sets it; the driver then died before B
    wrote one of its own after it. B's own checkpoint_000003 (iteration 7) holds its weights
    from before the exploit; A has gone on to its own checkpoint_000003."""
    for trial, iterations in (("A", (2, 4, 6, 8)), ("B", (2, 4, 5, 7))):
        (root / trial).mkdir(parents=True)
        (root / trial / "params.json").write_text("{}")
        rows = [{"training_iteration": k, M.ENV_STEPS: 256.0 * k} for k in range(1, 9)]
        (root / trial / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        for index, it in enumerate(iterations):
            path = root / trial / f"checkpoint_{index:06d}"
            path.mkdir()
            write_manifest(str(path), it, 256.0 * it, {M.ENV_STEPS: 256.0 * it})
    exploited = [("A/checkpoint_000002", 6)]
    entries = [trial_entry(root, t, exploited, last=None, keep=None) for t in ("A", "B")]
    write_state(root, entries)
    (root / "sweep.yaml").write_text("name: pbt\n")


def test_a_trial_pbt_gave_another_trials_checkpoint_goes_on_from_it_and_the_pack_carries_it(
    tmp_path,
):
    """A resume leaves B at the checkpoint PBT's exploit gave it (A's), not at its own newer-
    numbered one, which holds its weights from before; a pack carries A's checkpoint for B
    beside A's own newest."""
    from rlsweep.node.carry import carried_checkpoints

    root = tmp_path / "pbt"
    _pbt_state(root)
    (b,) = [t for t in TuneState(pafs.LocalFileSystem(), str(root)).trials if t.dirname == "B"]
    assert (b.checkpoint, b.checkpoint_owner) == ("checkpoint_000002", "A")
    assert carried_checkpoints(root) == {
        "A": {"checkpoint_000002", "checkpoint_000003"},
        "B": set(),
    }
    moved = tmp_path / "elsewhere"  # Tune's restore moves none of B's path to A's checkpoint
    shutil.move(root, moved)
    restarts = {r.trial: r for r in reconcile(str(moved))}
    assert (restarts["B"].checkpoint, restarts["B"].iteration) == ("checkpoint_000002", 6)
    trials = TuneState(pafs.LocalFileSystem(), str(moved)).trials
    assert [t.checkpoint_path for t in trials if t.dirname == "B"] == [
        f"{moved}/A/checkpoint_000002"
    ]
    assert (restarts["A"].checkpoint, restarts["A"].iteration) == ("checkpoint_000003", 8)
    assert (moved / "B" / "checkpoint_000003").exists()  # deleted by none


def test_a_resume_records_each_trials_last_report_as_the_one_it_goes_on_from(tmp_path):
    """Tune's state of a killed driver holds each trial's last report, from after the trial's
    checkpoint (or, without one, from a run the resume starts again). The progress line of the
    resume counts env steps from it and never goes back: it began at 42% with a low ETA for a
    sweep whose trials all restarted. After `reconcile` the state's last report is the
    checkpoint's (Tune's restore would set it only once the trial restores), or none."""
    root = tmp_path / "sweep"

    def entry(name: str, checkpoint_at: int | None, last: int) -> list[str]:
        (root / name).mkdir(parents=True)
        rows = "".join(json.dumps(report(k)) + "\n" for k in range(1, last + 1))
        (root / name / "result.json").write_text(rows)
        if checkpoint_at is None:
            return trial_entry(root, name, [], last)
        path = root / name / "checkpoint_000000"
        path.mkdir()
        write_manifest(str(path), checkpoint_at, 256.0 * checkpoint_at, report(checkpoint_at))
        return trial_entry(root, name, [(f"{name}/checkpoint_000000", checkpoint_at)], last)

    write_state(root, [entry("scratch", None, 7), entry("behind", 4, 6), entry("at", 5, 5)])
    reconcile(str(root))
    last = {t.dirname: t.last_result for t in TuneState(*_fs(str(root))).trials}
    assert last["scratch"] == {}  # from scratch: nothing reported yet
    assert last["behind"] == report(4)  # the checkpoint's, not iteration 6's
    assert last["at"] == report(5)
    assert [r["training_iteration"] for r in _rows(root / "behind")] == [1, 2, 3, 4]
