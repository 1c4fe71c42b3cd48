"""The run's history, told once (issue 40, item 4): a line per worker death, retry and failure;
Ray's tracebacks in driver.log; the reason's first line in the table; a report section."""

from __future__ import annotations

import functools
import io
import json
from types import SimpleNamespace

from rlsweep.experiment import history
from rlsweep.metrics import RESUMED_AT, TRIAL_ERROR
from rlsweep.results import results as R
from rlsweep.run.progress import ProgressView
from rlsweep.spec.spec import SweepSpec

DIED = (
    "The actor died unexpectedly before finishing this task.\n\tclass_name: ImplicitFunc\n"
    "\tpid: 26949\nThe actor is dead because its worker process has died. Worker exit type: "
    "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. "
    + "Some common causes include: (1) the process was killed by the OOM killer "
    * 5
)
RAISED = (
    "ray::ImplicitFunc.train() (pid=3, ip=192.0.2.2, actor_id=ab, repr=fake_trial)\n"
    '  File "/x/rlsweep/testing.py", line 80, in fake_trial\n'
    '    raise RuntimeError("a fake trial\'s crash: its node went away")\n'
    "RuntimeError: a fake trial's crash: its node went away\n"
)


def _error_txt(*failures: tuple[str, str]) -> str:
    return "".join(
        f"Failure # {i} (occurred at {when})\n{text}\n"
        for i, (when, text) in enumerate(failures, 1)
    )


def test_the_reason_is_the_last_failures_first_line():
    assert history.reason(DIED) == "The actor died unexpectedly before finishing this task."
    assert history.reason(RAISED) == "RuntimeError: a fake trial's crash: its node went away"
    both = _error_txt(("2026-11-27_15-38-03", DIED), ("2026-11-27_15-39-03", RAISED))
    assert history.reason(both) == "RuntimeError: a fake trial's crash: its node went away"
    assert len(history.reason("x" * 500)) == history.REASON_CHARS
    # A chained traceback: the exception raised last, not the one it was handling.
    chained = (
        "Traceback (most recent call last):\nValueError: the first\n\nDuring handling of the "
        "above exception, another exception occurred:\n\nRuntimeError: the last\n"
    )
    assert history.reason(chained) == "RuntimeError: the last"


def test_the_tables_error_cell_holds_the_first_line_and_the_trial_dir_the_text(tmp_path):
    trial = tmp_path / "leaper_s0_x"
    trial.mkdir()
    (trial / "params.json").write_text(json.dumps({"game": "leaper", "seed": 0}))
    (trial / "error.txt").write_text(_error_txt(("2026-11-27_15-38-03", DIED)))
    row = R.load_trial(trial).iloc[-1]
    assert row["status"] == "ERROR"
    assert row["error"] == "The actor died unexpectedly before finishing this task."


def _rows(*rows: tuple[int, int, str]) -> str:
    """result.json lines: (iteration, resumed at, date)."""
    return "".join(
        json.dumps({"training_iteration": i, RESUMED_AT: at, "date": when, "env_steps": 256 * i})
        + "\n"
        for i, at, when in rows
    )


def test_a_trials_retries_resumes_and_failure_from_its_files(tmp_path):
    exp = tmp_path / "sweep"
    trial = exp / "coinrun_s0_a"
    trial.mkdir(parents=True)
    (trial / "params.json").write_text("{}")
    # Ran to 3; its worker died (a retry from 2); ran to 5, interrupted; resumed from 4; ran to
    # 7, then failed for good.
    (trial / "result.json").write_text(
        _rows(
            (1, 0, "2026-11-27_10-00-01"),
            (2, 0, "2026-11-27_10-00-02"),
            (3, 0, "2026-11-27_10-00-03"),
            (3, 2, "2026-11-27_10-00-09"),
            (4, 2, "2026-11-27_10-00-10"),
            (5, 2, "2026-11-27_10-00-11"),
            (5, 4, "2026-11-28_09-00-00"),
            (6, 4, "2026-11-28_09-00-01"),
            (7, 4, "2026-11-28_09-00-02"),
        )
    )
    (trial / "error.txt").write_text(
        _error_txt(("2026-11-27_10-00-05", DIED), ("2026-11-28_09-00-05", RAISED))
    )
    events = history.trial_events(trial)
    assert [(e.what, e.iteration, e.reason) for e in events] == [
        (
            "retried (failure 1) from its checkpoint at iteration 2",
            3,
            "The actor died unexpectedly before finishing this task.",
        ),
        ("resumed from its checkpoint at iteration 4", 5, ""),
        ("failed (failure 2)", 7, "RuntimeError: a fake trial's crash: its node went away"),
    ]
    clean = exp / "coinrun_s1_b"
    clean.mkdir()
    (clean / "params.json").write_text("{}")
    (clean / "result.json").write_text(
        json.dumps({"training_iteration": 1, TRIAL_ERROR: "training diverged: loss is nan"})
    )
    md = "\n".join(history.history_section([exp]))
    assert "## Retries, resumes and failures" in md
    assert "| `coinrun_s0_a` | retried (failure 1) from its checkpoint at iteration 2 | 3 |" in md
    assert "| `coinrun_s0_a` | resumed from its checkpoint at iteration 4 | 5 | — |" in md
    assert "| `coinrun_s1_b` | failed: stopped itself | 1 | training diverged: loss is nan |" in md
    assert history.history_section([exp], sweeps={"other"})[2].startswith("None: no trial failed")


def test_a_trial_that_failed_before_its_params_were_written_is_in_the_history(tmp_path):
    """Tune writes error.txt in the dir of a trial that failed before params.json existed: the
    report's table lists it as ERROR (`results`), and its history says so too, where it said
    every trial had run through. It also makes the dir a sweep's."""
    from rlsweep.experiment.experiment_dir import holds_sweep

    exp = tmp_path / "sweep"
    trial = exp / "coinrun_s0_a"
    trial.mkdir(parents=True)
    (trial / "error.txt").write_text(_error_txt(("2026-11-27_10-00-05", RAISED)))
    assert history.is_trial_dir(trial) and R.experiment_dirs(exp) == [exp]
    assert holds_sweep(str(exp))
    md = "\n".join(history.history_section([exp]))
    assert "| `coinrun_s0_a` | failed (failure 1) | 0 | RuntimeError: a fake trial's crash" in md


def test_the_progress_view_says_a_retry_and_a_failure_in_a_line(tmp_path):
    error = tmp_path / "error.txt"
    error.write_text(_error_txt(("2026-11-27_10-00-05", DIED)))
    trial = SimpleNamespace(
        trial_id="abc_00000",
        config={"game": "coinrun", "seed": 1},
        last_result={"training_iteration": 7},
        num_failures=1,
        max_failures=2,
        error_file=str(error),
        latest_checkpoint_result=SimpleNamespace(metrics={"training_iteration": 5}),
    )
    out = io.StringIO()
    view = ProgressView(SweepSpec(name="p", seeds=[0, 1]), stream=out, live=False)
    view.on_trial_recover(7, [trial], trial)
    trial.num_failures = 3
    view.on_trial_error(8, [trial], trial)
    lines = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines == [
        "rlsweep: trial coinrun s1 (abc_00000): its worker died at iteration 7 (The actor died "
        "unexpectedly before finishing this task.); retry 1 of 2, from its checkpoint at "
        "iteration 5",
        "rlsweep: trial coinrun s1 (abc_00000): its worker died at iteration 7 (The actor died "
        f"unexpectedly before finishing this task.); 2 retries spent: ERROR; full text in {error}",
    ]
    # Its worker died once, then it raised: "it failed", and a retry with no checkpoint
    # starts from scratch.
    error.write_text(_error_txt(("2026-11-27_10-00-05", DIED), ("2026-11-27_10-01-05", RAISED)))
    trial.num_failures, trial.latest_checkpoint_result = 1, None
    out.seek(0), out.truncate()
    view.on_trial_recover(9, [trial], trial)
    assert out.getvalue().split("] ", 1)[1].strip() == (
        "rlsweep: trial coinrun s1 (abc_00000): it failed at iteration 7 (RuntimeError: a fake "
        "trial's crash: its node went away); retry 1 of 2, from scratch (no checkpoint)"
    )


def test_a_dead_worker_is_one_line_its_traceback_in_driver_log(ray_local, tmp_path, capfd):
    """A real Tune sweep of the fake trial whose worker exits after iteration 2: Tune retries
    it from its checkpoint there, and it finishes."""
    from rlsweep.run.sweep import run_sweep
    from rlsweep.testing import fake_trial

    spec = SweepSpec(
        name="died",
        games=["leaper"],
        seeds=[0],
        budget=4 * 256,
        params={
            "num_envs_per_env_runner": 16,
            "rollout_length": 16,
            "minibatch_size": 128,
            "checkpoint_interval": 1,
        },
        storage_path=str(tmp_path),
    )
    result = run_sweep(spec, trainable=functools.partial(fake_trial, die_at=2))
    out, err = capfd.readouterr()
    said = [line for line in (out + err).splitlines() if "rlsweep: trial" in line]
    assert len(said) == 1, out + err
    assert said[0].endswith(
        "its worker died at iteration 2 (The actor died unexpectedly before finishing this "
        "task.); retry 1 of 2, from its checkpoint at iteration 2"
    )
    assert "Traceback" not in out + err and "A worker died or was killed" not in out + err
    log = (tmp_path / "died" / "driver.log").read_text()
    assert "Trial task failed for trial" in log and "A worker died or was killed" in log
    row = result.trials.iloc[0]
    assert row["status"] == "TERMINATED" and row["iteration"] == 4
    assert (
        row["error"] == "recovered after: The actor died unexpectedly before finishing this task."
    )
    from rlsweep.results.report import build_report

    md = build_report([result.path]).read_text()
    section = md.split("## Retries, resumes and failures", 1)[1].split("\n## ", 1)[0]
    assert "retried (failure 1) from its checkpoint at iteration 2 | 2 | The actor died " in section
