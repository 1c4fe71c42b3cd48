"""Surviving failures with real RLlib trials on real Procgen (marked `rllib`):

- the driver killed with SIGKILL mid-sweep: a report can be built from what is on disk, and
  `rlsweep resume DIR` neither loses nor reruns the finished trial and continues the unfinished
  one from its checkpoint (the env-step counter continues; ray#43266 was restores restarting);
- a trial's process killed mid-run: Tune retries it from its last checkpoint;
- a diverging trial (NaN loss) stops and is reported failed with the reason, without retries.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from rlsweep import metrics as M
from rlsweep import results as R
from rlsweep.report import build_report

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


def _trial_dirs(experiment: Path) -> dict[int, Path]:
    """seed -> trial dir."""
    out = {}
    for d in experiment.glob("leaper_s*"):
        if (d / "params.json").exists():
            out[json.loads((d / "params.json").read_text())["seed"]] = d
    return out


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


def _rlsweep(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rlsweep.cli", *args],
        cwd=cwd,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_driver_sigkill_then_resume(tmp_path):
    budget = 8 * ITER
    spec = {
        "name": "killed",
        "games": ["leaper"],
        "seeds": [0, 1],
        "budget": budget,
        "params": PARAMS,
        "max_concurrent": 1,  # seed 0 finishes before seed 1 starts
        "storage_path": str(tmp_path / "results"),
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    experiment = tmp_path / "results" / "killed"

    driver = _rlsweep("run", "spec.yaml", "--num-cpus", "1", cwd=tmp_path)
    try:
        _wait(
            lambda: (
                len(dirs := _trial_dirs(experiment)) == 2
                and R.load_trial(dirs[0])["status"].iloc[0] == R.TERMINATED
                and len(_rows(dirs[1])) >= 2
                and len(list(dirs[1].glob("checkpoint_*"))) >= 1
            ),
            timeout=240,
            what="seed 0 finished, seed 1 checkpointed",
            proc=driver,
        )
        os.kill(driver.pid, signal.SIGKILL)  # the driver only, as a crash would
    finally:
        _kill_group(driver)  # then the Ray processes it had started

    dirs = _trial_dirs(experiment)
    finished_lines = (dirs[0] / "result.json").read_text()
    before = _rows(dirs[1])
    assert 2 <= len(before) < 8

    # A report from the interrupted sweep: the finished trial counts, the other is listed.
    md = build_report([experiment], out=tmp_path / "interrupted").read_text()
    assert "1 TERMINATED, 1 INCOMPLETE" in md
    assert "stopped before its budget" in md

    resumed = _rlsweep("resume", str(experiment), "--num-cpus", "1", cwd=tmp_path)
    try:
        out, _ = resumed.communicate(timeout=300)
    finally:
        _kill_group(resumed)
    assert resumed.returncode == 0, out

    # The finished trial was neither lost nor rerun.
    assert (dirs[0] / "result.json").read_text() == finished_lines
    # The unfinished one continued from its last checkpoint, its env steps counting on.
    after = _rows(dirs[1])
    resumed_rows = after[len(before) :]
    first = resumed_rows[0]
    assert first["training_iteration"] >= 2  # from a checkpoint, not iteration 1
    at_checkpoint = next(
        r for r in before if r["training_iteration"] == first["training_iteration"] - 1
    )
    # One iteration (RLlib samples a little over rollout x envs) past the checkpoint's steps.
    grew = first[M.ENV_STEPS] - at_checkpoint[M.ENV_STEPS]
    assert ITER <= grew < 2 * ITER, [r[M.ENV_STEPS] for r in after]
    assert resumed_rows[-1][M.ENV_STEPS] >= budget
    final = R.final_scores(R.load_curves(experiment))
    assert (final["status"] == R.TERMINATED).all(), final[["trial_id", "status", "error"]]


@pytest.fixture
def ray_local():
    import ray

    from rlsweep.sweep import runtime_env

    ray.init(num_cpus=1, include_dashboard=False, runtime_env=runtime_env())
    yield
    ray.shutdown()


def test_crashed_trial_is_retried_from_its_checkpoint(ray_local, tmp_path):
    from rlsweep.spec import SweepSpec
    from rlsweep.sweep import run_sweep

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
    from rlsweep.spec import SweepSpec
    from rlsweep.sweep import run_sweep

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
