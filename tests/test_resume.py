"""Surviving failures with real RLlib trials on real Procgen (marked `rllib`):

- Ctrl-C mid-sweep: the running trial checkpoints and stops, the driver exits 130 printing
  `rlsweep resume DIR`, a report can be built from what is on disk, and `rlsweep resume DIR`
  neither loses nor reruns the finished trial and continues the unfinished one from its
  checkpoint (the env-step counter continues; ray#43266 was restores restarting), its clocks
  counting on, its progress.csv one table, its numbers an uninterrupted run's up to the
  checkpoint;
- a trial's process killed mid-run: Tune retries it from its last checkpoint;
- the driver killed with SIGKILL: `rlsweep resume` continues from the newest checkpoint on
  disk, whatever Tune's saved state names, and no iteration is reported twice;
- a diverging trial (NaN loss) stops and is reported failed with the reason, without retries.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rlsweep import formatting
from rlsweep import metrics as M
from rlsweep.experiment.recovery import Restart
from rlsweep.results import results as R
from rlsweep.results.report import build_report
from rlsweep.testing import forget_iteration

pytestmark = pytest.mark.rllib

ITER = 256  # env steps per iteration: 16 envs x 16 steps
PARAMS = {
    "num_envs_per_env_runner": 16,
    "rollout_length": 16,
    "minibatch_size": 128,
    "num_epochs": 1,
    "eval_interval": 4,
    "eval_episodes": 4,
    "checkpoint_interval": 1,
    "num_cpus": 1,
}


def _rows(trial_dir: Path) -> list[dict]:
    """Every line of result.json, in file order (a retried trial appends after its restore)."""
    path = trial_dir / "result.json"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # being written
            break
    return rows


def _trial_dirs(experiment: Path, key: str = "seed") -> dict:
    """The trial's `key` parameter (its seed) -> trial dir."""
    out = {}
    for d in experiment.glob("leaper_s*"):
        if (d / "params.json").exists():
            out[json.loads((d / "params.json").read_text())[key]] = d
    return out


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


def _progress_csv_is_result_json(trial_dir: Path, from_iteration: int = 1) -> None:
    """Tune's progress.csv loads in pandas and holds what result.json holds (from
    `from_iteration` on), row for row and key for key (Tune takes a process's columns from its
    first report: a resumed trial's reports must carry the first's keys, in its order)."""
    # pandas 3 parses floats exactly by default (and deprecates the option); pandas 2 needs it.
    exact = {"float_precision": "round_trip"} if pd.__version__ < "3" else {}
    table = pd.read_csv(trial_dir / "progress.csv", **exact)
    rows = [
        {k: v for k, v in r.items() if k != "config"}
        for r in _rows(trial_dir)
        if r["training_iteration"] >= from_iteration
    ]
    assert len(table) == len(rows), trial_dir
    assert set().union(*rows) <= set(table.columns), set().union(*rows) - set(table.columns)
    for i, row in enumerate(rows):
        for key, value in row.items():
            got = table.at[i, key]
            if isinstance(value, int | float) and not isinstance(value, bool):
                assert _same(float(got), float(value)), (trial_dir.name, i, key, got, value)
            elif value not in ("", None):
                assert str(got) == str(value), (trial_dir.name, i, key, got, value)


def _wait(cond, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := cond():
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"driver exited ({proc.returncode}) before: {what}")
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for: {what}")


def _kill_group(proc: subprocess.Popen) -> None:
    """The driver and every Ray process it started (they share its new session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _rlsweep(*args: str, cwd: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rlsweep.cli", *args],
        cwd=cwd,
        env={**os.environ, **env},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


SCORES = (M.TRAIN_RETURN, M.TEST_RETURN, "test/level_seed_min")
SAME_UNTIL_RESUMED = (
    M.ENV_STEPS,
    *SCORES,
    M.TRAIN_EPISODE_RETURN_MEAN,
    M.LOSS_TOTAL,
    M.LOSS_POLICY,
    M.LOSS_VALUE,
    M.LOSS_ENTROPY,
    M.TEST_FRESH,
    M.HP_LR,
)
"""What an interrupted trial reports exactly as an uninterrupted one does, up to its
checkpoint; after it only the evaluation schedule, the lr and the scores carried forward until
its next evaluation stay (README: "Resuming is not an exact continuation")."""


def test_sigint_stops_cleanly_then_resume_continues(tmp_path, rlsweep_cli):
    """Ctrl-C on `rlsweep run` (SIGINT to its process group, as a terminal sends it), with
    rlsweep's default checkpoint settings (nothing about checkpoints in the spec): the running
    trial checkpoints after its current iteration and the driver exits 130 with the finished
    trial TERMINATED, the other INCOMPLETE, and `rlsweep resume <dir>` as its last line (the
    progress view showed an ETA on the way). Running the spec again is refused; `rlsweep resume`
    says where each trial continues from, neither loses nor reruns the finished trial, and
    continues the other from its checkpoint, its env-step counter counting on (ray#43266 was
    restores restarting).

    The two trials differ only in `checkpoint_every_s` (neither lives 10 minutes: they
    checkpoint at the end and at the interrupt), so the finished one is the uninterrupted run
    of the other: the resumed trial's clocks count on, its rows say where it resumed, its
    scores are the uninterrupted run's up to the checkpoint and differ after it only as the
    README says, and both progress.csv files load in pandas."""
    budget = 8 * ITER
    spec = {
        "name": "stopped",
        "games": ["leaper"],
        "seeds": [0],
        "budget": budget,
        "params": {k: v for k, v in PARAMS.items() if k != "checkpoint_interval"},
        "space": {"checkpoint_every_s": [600, 3600]},
        "max_concurrent": 1,  # one trial finishes before the other starts
        "storage_path": "results",
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    experiment = tmp_path / "results" / "stopped"

    # The progress view, a line a second: read as it comes (result.json is written buffered).
    driver = _rlsweep("run", "spec.yaml", "--num-cpus", "1", cwd=tmp_path, RLSWEEP_PROGRESS_S="1")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(driver.stdout), daemon=True)
    reader.start()

    def second_trial_steps() -> bool:  # one trial done (its budget counted), the other training
        done = [re.search(r"trials 1/2 done.*env steps ([\d,]+)/", ln) for ln in lines]
        return any(m and int(m[1].replace(",", "")) > budget + ITER for m in done)

    try:
        _wait(second_trial_steps, timeout=240, what="one trial finished, one training", proc=driver)
        os.killpg(driver.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it
        driver.wait(timeout=180)
        reader.join(timeout=10)
    finally:
        _kill_group(driver)
    out = "".join(lines)
    assert driver.returncode == 130, out
    assert [ln for ln in lines if ln.strip()][-1] == "rlsweep resume results/stopped\n", out
    assert re.search(r"\| ETA \d+(h\d\dm|m\d\ds|s) \|", out), out  # the progress view's
    assert "Tuner.restore" not in out and "/tmp/ray/session" not in out, out
    table = out[out.index("results: ") :]
    assert re.search(r"leaper +0 .* TERMINATED", table), table
    assert re.search(r"leaper +0 .* INCOMPLETE", table), table

    dirs = list(_trial_dirs(experiment, "checkpoint_every_s").values())
    finished, stopped = sorted(dirs, key=lambda d: -_rows(d)[-1][M.ENV_STEPS])
    finished_lines = (finished / "result.json").read_text()
    before = _rows(stopped)
    assert 1 <= len(before) < 8
    # The interrupted trial's last report carries the checkpoint it wrote on the way out.
    assert before[-1][M.TRIAL_INTERRUPTED] is True and before[-1]["checkpoint_dir_name"]
    assert (stopped / before[-1]["checkpoint_dir_name"]).is_dir()

    # A report from the interrupted sweep: the finished trial counts, the other is listed.
    md = build_report([experiment], out=tmp_path / "interrupted").read_text()
    assert "1 TERMINATED, 1 INCOMPLETE" in md
    assert "stopped before its budget" in md

    # One sweep per directory: the same spec again is refused, pointing at resume.
    again = rlsweep_cli("run", "spec.yaml", cwd=tmp_path, timeout=60)
    assert again.returncode == 2, again.stderr
    assert "rlsweep resume results/stopped" in again.stderr and "--overwrite" in again.stderr

    resumed = _rlsweep("resume", "results/stopped", "--num-cpus", "1", cwd=tmp_path)
    try:
        out, _ = resumed.communicate(timeout=300)
    finally:
        _kill_group(resumed)
    assert resumed.returncode == 0, out
    at = before[-1]
    k = at["training_iteration"]
    assert (
        f"{stopped.name}: from iteration {k}, {formatting.count(at[M.ENV_STEPS])} env steps" in out
    ), out
    left = formatting.steps(budget - at[M.ENV_STEPS])  # the finished trial's budget is run
    assert f"1 to continue, 0 not started; {left} of {formatting.steps(2 * budget)} env" in out

    # The finished trial was neither lost nor rerun.
    assert (finished / "result.json").read_text() == finished_lines
    # The unfinished one continued from the checkpoint it wrote when interrupted.
    after = _rows(stopped)
    resumed_rows = after[len(before) :]
    first = resumed_rows[0]
    assert first["training_iteration"] == k + 1
    # One iteration (RLlib samples a little over rollout x envs) past the checkpoint's steps.
    grew = first[M.ENV_STEPS] - at[M.ENV_STEPS]
    assert ITER <= grew < 2 * ITER, [r[M.ENV_STEPS] for r in after]
    assert resumed_rows[-1][M.ENV_STEPS] >= budget
    final = R.final_scores(R.load_curves(experiment))
    assert (final["status"] == R.TERMINATED).all(), final[["trial_id", "status", "error"]]

    # Its clocks count on across the resume: wall, evaluation and CPU time.
    for key in (M.WALL_S, M.EVAL_S, M.CPU_S):
        values = [r[key] for r in after]
        assert values == sorted(values), (key, values)
    assert first[M.WALL_S] > at[M.WALL_S] and first[M.CPU_S] > at[M.CPU_S]
    # Its rows say which process reported them.
    assert [r[M.RESUMED_AT] for r in after] == [0] * k + [k] * len(resumed_rows)
    assert final.set_index("trial_id").loc[stopped.name, M.RESUMED_AT] == k

    # Against the uninterrupted run: the same numbers up to the checkpoint; after it the same
    # evaluation schedule and lr, while the envs' new episodes make the data differ at once.
    reference = _rows(finished)
    evaluated = False  # since the resume
    for ours, theirs in zip(after, reference, strict=False):
        evaluated |= ours["training_iteration"] > k and ours[M.TEST_FRESH]
        if ours["training_iteration"] <= k:
            keys = SAME_UNTIL_RESUMED
        else:
            keys = (M.TEST_FRESH, M.HP_LR, *(() if evaluated else SCORES))
        diff = [key for key in keys if not _same(ours[key], theirs[key])]
        assert not diff, (ours["training_iteration"], k, diff)
    assert first[M.LOSS_TOTAL] != reference[k][M.LOSS_TOTAL]

    for d in (finished, stopped):
        _progress_csv_is_result_json(d)


def _complete(checkpoint: Path) -> bool:
    import pyarrow.fs as pafs

    from rlsweep.manifest import complete_manifest

    return complete_manifest(pafs.LocalFileSystem(), str(checkpoint)) is not None


def test_sigkill_of_the_driver_resumes_from_the_newest_checkpoint_on_disk(tmp_path, rlsweep_cli):
    """The driver killed with SIGKILL (an OOM kill, a reclaimed node) the moment its trial's
    third checkpoint is whole on disk, before Tune's experiment state can name it: Tune saves
    that state on its own clock (here only when a trial checkpoint forces it, as
    TUNE_GLOBAL_CHECKPOINT_S rules out its periodic save), so it names an older checkpoint or
    none. The driver may also have died before it logged the report that came with that
    checkpoint (the trial uploads the checkpoint first); its files are made to say so, as a
    kill a moment earlier leaves them. `rlsweep resume` continues the trial from the newest
    whole checkpoint on disk, names its next checkpoint after that one (overwriting none),
    writes the missing row from the report the checkpoint keeps, and result.json and
    progress.csv hold each iteration once."""
    budget = 10 * ITER
    spec = {
        "name": "killed",
        "games": ["leaper"],
        "seeds": [0],
        "budget": budget,
        "params": PARAMS,  # a checkpoint every iteration
        "storage_path": "results",
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    experiment = tmp_path / "results" / "killed"
    env = {"TUNE_GLOBAL_CHECKPOINT_S": "3600"}
    driver = _rlsweep("run", "spec.yaml", "--num-cpus", "1", cwd=tmp_path, **env)
    try:
        trial = _wait(lambda: _trial_dirs(experiment).get(0), 180, "the trial dir", driver)
        third = trial / "checkpoint_000002"
        _wait(lambda: third.is_dir() and _complete(third), 240, "a third checkpoint", driver)
    finally:
        _kill_group(driver)  # SIGKILL: nothing runs after it
    before = [r["training_iteration"] for r in _rows(trial)]
    # result.json may not have its row yet, nor those before it: a driver that fell behind its
    # trial (killed while logging its first report, in CI at 00e5f92) had logged fewer.
    assert not before or before[-1] <= 3, before
    logged = forget_iteration(trial, 3)  # None where the driver had not written it
    # Where Tune's saved state names an older checkpoint (or none: it saves at its own pace),
    # the resume's line for the trial says so.
    spec_ = R.sweep_spec(experiment)
    for named, why in (
        ("checkpoint_000001", "newer than checkpoint_000001, the one Tune's saved state names"),
        (None, "Tune's saved state names no checkpoint"),
    ):
        newer = Restart(trial.name, "checkpoint_000002", 3, 810.0, tune_checkpoint=named)
        line = R.resume_points(spec_, str(experiment), [newer]).lines[1]
        assert line == f"  {trial.name}: from iteration 3, 810 env steps (checkpoint_000002: {why})"

    resumed = _rlsweep("resume", "results/killed", "--num-cpus", "1", cwd=tmp_path, **env)
    try:
        out, _ = resumed.communicate(timeout=300)
    finally:
        _kill_group(resumed)
    assert resumed.returncode == 0, out
    assert f"{trial.name}: from iteration 3, " in out, out
    rows = _rows(trial)
    assert [r["training_iteration"] for r in rows] == list(range(1, len(rows) + 1)), rows
    assert rows[-1][M.ENV_STEPS] >= budget
    after = [r for r in rows if r[M.RESUMED_AT] == 3]
    assert after[0]["training_iteration"] == 4
    assert after[0]["checkpoint_dir_name"] == "checkpoint_000003"  # checkpoint_000002 was kept
    restored = rows[2]
    assert restored["checkpoint_dir_name"] == "checkpoint_000002" and restored["should_checkpoint"]
    assert rows[1][M.ENV_STEPS] < restored[M.ENV_STEPS] < rows[3][M.ENV_STEPS]
    assert restored["config"] == rows[1]["config"]
    if logged is not None:  # the report the checkpoint kept is the one Tune had logged
        keys = [*M.METRICS, M.LOSS_TOTAL, "training_iteration", "trial_id", "config"]
        keys += ["pid", "hostname", "node_ip", "iterations_since_restore"]
        assert all(_same(logged[k], restored[k]) for k in keys), (logged, restored)
        assert restored.keys() == logged.keys(), restored.keys() ^ logged.keys()
    assert restored.keys() == rows[1].keys() | {"checkpoint_dir_name"}, (
        restored.keys() ^ rows[1].keys()
    )
    # Where the driver had logged no report, progress.csv starts with the resumed trial's:
    # Tune writes its header then (recovery._trim_results).
    _progress_csv_is_result_json(trial, 1 if before else 4)
    # keep_checkpoints (1) holds after it, whichever checkpoints Tune's saved state tracked.
    assert [p.name for p in trial.glob("checkpoint_*")] == [rows[-1]["checkpoint_dir_name"]]


@pytest.fixture(scope="module")
def ray_local(start_ray):
    """One Ray of 1 CPU for the module's in-process sweeps (each trial alone on it)."""
    with start_ray(1):
        yield


def test_crashed_trial_is_retried_from_its_checkpoint(ray_local, tmp_path):
    from rlsweep.run.sweep import run_sweep
    from rlsweep.spec.spec import SweepSpec

    budget = 8 * ITER
    spec = SweepSpec(
        name="crash",
        games=["leaper"],
        seeds=[0],
        budget=budget,
        params=PARAMS,
        storage_path=str(tmp_path),
    )
    out: dict = {}
    runner = threading.Thread(target=lambda: out.update(r=run_sweep(spec, max_failures=1)))
    runner.start()
    trial = _wait(lambda: _trial_dirs(tmp_path / "crash").get(0), 120, "the trial dir")
    _wait(lambda: len(_rows(trial)) >= 3, 180, "3 iterations")
    pid = _rows(trial)[-1]["pid"]
    os.kill(pid, signal.SIGKILL)  # the trial's process dies (OOM killer, segfault, ...)
    runner.join(timeout=300)
    assert not runner.is_alive()

    rows = _rows(trial)
    restart = next(r for r in rows if r["pid"] != pid)
    # The retry started from a checkpoint, not from zero, and reached the budget.
    assert restart["training_iteration"] >= 2
    at_checkpoint = next(
        r for r in rows if r["training_iteration"] == restart["training_iteration"] - 1
    )
    grew = restart[M.ENV_STEPS] - at_checkpoint[M.ENV_STEPS]
    assert ITER <= grew < 2 * ITER, [r[M.ENV_STEPS] for r in rows]
    assert rows[-1][M.ENV_STEPS] >= budget
    (row,) = out["r"].trials.itertuples()
    assert row.status == "TERMINATED"
    final = R.final_scores(R.load_curves(tmp_path / "crash")).iloc[0]
    assert final["status"] == R.TERMINATED and final["error"].startswith("recovered after:")


def test_nan_loss_fails_the_trial_with_the_reason(ray_local, tmp_path):
    from rlsweep.run.sweep import run_sweep
    from rlsweep.spec.spec import SweepSpec

    spec = SweepSpec(
        name="nan",
        games=["leaper"],
        seeds=[0],
        budget=8 * ITER,
        params={**PARAMS, "num_epochs": 2, "lr": 1e6},  # diverges in the first update
        storage_path=str(tmp_path),
    )
    df = run_sweep(spec, max_failures=2).trials
    (row,) = df.itertuples()
    assert row.status == "ERROR"
    assert row.error.startswith("training diverged: loss/") and "at iteration 1" in row.error
    trial = Path(row.trial_dir)
    assert not (trial / "error.txt").exists()  # stopped, not crashed: no retries
    assert len(_rows(trial)) == 1
    final = R.final_scores(R.load_curves(tmp_path / "nan")).iloc[0]
    assert final["status"] == R.ERROR and final["error"] == row.error
