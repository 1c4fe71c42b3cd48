"""Surviving failures with real RLlib trials on real Procgen (marked `rllib`):

- Ctrl-C mid-sweep: the running trial checkpoints and stops, the driver exits 130 printing
  `rlsweep resume DIR`, a report can be built from what is on disk, and `rlsweep resume DIR`
  neither loses nor reruns the finished trial and continues the unfinished one from its
  checkpoint (the env-step counter continues; ray#43266 was restores restarting);
- a trial's process killed mid-run: Tune retries it from its last checkpoint;
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


def test_sigint_stops_cleanly_then_resume_continues(tmp_path, rlsweep_cli):
    """Ctrl-C on `rlsweep run` (SIGINT to its process group, as a terminal sends it), with
    rlsweep's default checkpoint settings (nothing about checkpoints in the spec): the running
    trial checkpoints after its current iteration and the driver exits 130 with the finished
    trial TERMINATED, the other INCOMPLETE, and `rlsweep resume <dir>` as its last line (the
    progress view showed an ETA on the way). Running the spec again is refused; `rlsweep resume`
    says where each trial continues from, neither loses nor reruns the finished trial, and
    continues the other from its checkpoint, its env-step counter counting on (ray#43266 was
    restores restarting)."""
    budget = 8 * ITER
    spec = {
        "name": "stopped",
        "games": ["leaper"],
        "seeds": [0, 1],
        "budget": budget,
        "params": {k: v for k, v in PARAMS.items() if k != "checkpoint_interval"},
        "max_concurrent": 1,  # seed 0 finishes before seed 1 starts
        "storage_path": "results",
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    experiment = tmp_path / "results" / "stopped"

    # The progress view, a line a second: read as it comes (result.json is written buffered).
    driver = _rlsweep("run", "spec.yaml", "--num-cpus", "1", cwd=tmp_path, RLSWEEP_PROGRESS_S="1")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(driver.stdout), daemon=True)
    reader.start()

    def seed_1_steps() -> bool:  # seed 0 done (its budget counted) and seed 1 reported steps
        done = [re.search(r"trials 1/2 done.*env steps ([\d,]+)/", ln) for ln in lines]
        return any(m and int(m[1].replace(",", "")) > budget + ITER for m in done)

    try:
        _wait(seed_1_steps, timeout=240, what="seed 0 finished, seed 1 training", proc=driver)
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
    assert re.search(r"leaper +1 .* INCOMPLETE", table), table

    dirs = _trial_dirs(experiment)
    finished_lines = (dirs[0] / "result.json").read_text()
    before = _rows(dirs[1])
    assert 1 <= len(before) < 8
    # The interrupted trial's last report carries the checkpoint it wrote on the way out.
    assert before[-1][M.TRIAL_INTERRUPTED] is True and before[-1]["checkpoint_dir_name"]
    assert (dirs[1] / before[-1]["checkpoint_dir_name"]).is_dir()

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
    assert (
        f"{dirs[1].name}: from iteration {at['training_iteration']}, "
        f"{int(at[M.ENV_STEPS]):,} env steps" in out
    ), out

    # The finished trial was neither lost nor rerun.
    assert (dirs[0] / "result.json").read_text() == finished_lines
    # The unfinished one continued from the checkpoint it wrote when interrupted.
    after = _rows(dirs[1])
    resumed_rows = after[len(before) :]
    first = resumed_rows[0]
    assert first["training_iteration"] == at["training_iteration"] + 1
    # One iteration (RLlib samples a little over rollout x envs) past the checkpoint's steps.
    grew = first[M.ENV_STEPS] - at[M.ENV_STEPS]
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
