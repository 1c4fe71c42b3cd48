"""Tune plumbing with the fake trainable (deterministic curves, the real trial's keys)."""

import functools
import json
from pathlib import Path

import pytest

from rlsweep.experiment.experiment_dir import (
    Instance,
    SweepExistsError,
    can_resume,
    record_run,
    runs,
)
from rlsweep.metrics import METRICS
from rlsweep.results import results as R
from rlsweep.run.sweep import resume_sweep, run_or_resume, run_sweep
from rlsweep.spec.spec import SweepSpec
from rlsweep.testing import fake_trial


@pytest.fixture(scope="module", autouse=True)
def ray_session(start_ray):
    """One Ray instance for the module: run_sweep joins it instead of starting its own."""
    with start_ray(2):
        yield


@pytest.fixture(scope="module")
def fake_sweep(run_fake_sweep):
    return run_fake_sweep(["coinrun", "maze"], 4 * 16384)


def test_one_row_per_trial_with_every_column(fake_sweep):
    spec, result = fake_sweep
    df = result.to_dataframe()
    assert len(df) == len(spec.trials()) == 8
    assert set(df.columns) >= {"game", "seed", "framestack", *METRICS, "status"}
    assert not df[list(METRICS)].isna().any().any()
    assert (df["status"] == "TERMINATED").all()
    assert (df["env_steps"] == 4 * 16384).all() and (df["iteration"] == 4).all()
    assert set(zip(df.game, df.seed, df.framestack, strict=True)) == {
        (t.game, t.seed, t.framestack) for t in spec.trials()
    }


def test_metrics_are_the_fake_curves(fake_sweep):
    from rlsweep.spec.config import TrialConfig
    from rlsweep.testing import curve

    _, result = fake_sweep
    for _, row in result.to_dataframe().iterrows():
        cfg = TrialConfig(game=row["game"], seed=row["seed"], framestack=row["framestack"])
        train, test = curve(cfg, row["env_steps"])
        assert row["train/return"] == pytest.approx(train)
        assert row["test/return"] == pytest.approx(test)


def test_results_land_in_storage(fake_sweep):
    spec, result = fake_sweep
    assert result.path.name == "fake" and str(result.path).startswith(spec.storage_path)
    for trial_dir in result.to_dataframe()["trial_dir"]:
        params = json.loads((Path(trial_dir) / "params.json").read_text())
        assert params["total_env_steps"] == spec.budget and "widths" in params
        lines = (Path(trial_dir) / "result.json").read_text().splitlines()
        assert len(lines) == 4 and set(METRICS) <= set(json.loads(lines[-1]))


def _run(tmp_path, exit_code: int | None = 0, **spec_kwargs):
    spec = SweepSpec(name="search", budget=8 * 16384, storage_path=str(tmp_path), **spec_kwargs)
    result = run_sweep(spec, trainable=fake_trial, num_cpus=2)
    assert exit_code is None or result.exit_code == exit_code, result.trials
    return spec, result.to_dataframe()


def test_random_search_runs_each_configuration_within_bounds_in_every_cell(tmp_path):
    """Real Tune: 3 drawn configurations, each run on both games (`tests/test_tune_bridge.py`
    holds the draw); a conditional param is sampled only where its condition holds."""
    spec, df = _run(
        tmp_path,
        games=["coinrun", "maze"],
        seeds=[0],
        space={
            "lr": {"loguniform": [1e-5, 1e-3]},
            "num_epochs": {"int": [1, 2]},
            "framestack": {"choice": ["none", "gap"]},
            "framestack_k": {"choice": [3, 5], "when": {"framestack": ["gap"]}},
        },
        search={"algorithm": "random", "num_samples": 3, "seed": 1},
    )
    assert len(df) == spec.num_trials == 6
    assert df["lr"].between(1e-5, 1e-3).all() and df["lr"].nunique() == 3
    for _, one in df.groupby("lr"):  # a configuration: the same draw on each game
        assert sorted(one["game"]) == ["coinrun", "maze"]
        assert one[["num_epochs", "framestack", "framestack_k"]].nunique().max() == 1
    assert set(df["num_epochs"]) <= {1, 2}
    gap = df["framestack"] == "gap"  # the condition holds: sampled; else the default, 4
    assert gap.any() and not gap.all()  # search seed 1 draws both: neither check is empty
    assert set(df.loc[gap, "framestack_k"]) <= {3, 5} and (df.loc[~gap, "framestack_k"] == 4).all()
    assert sorted(df["game"].value_counts().tolist()) == [3, 3]


def test_optuna_runs_every_proposal_on_every_game_and_seed(tmp_path):
    spec, df = _run(
        tmp_path,
        games=["coinrun", "maze"],
        seeds=[0, 1],
        space={"lr": {"loguniform": [1e-5, 1e-3]}},
        search={"algorithm": "optuna", "num_samples": 2, "seed": 0},
        max_concurrent=2,
    )
    assert len(df) == 2 * 4
    for row in df.itertuples():  # its dir named by the game and seed its cell index picked
        assert Path(row.trial_dir).name.startswith(f"{row.game}_s{row.seed}_"), row.trial_dir
    for _, group in df.groupby("lr"):
        assert sorted(zip(group.game, group.seed, strict=True)) == [
            ("coinrun", 0),
            ("coinrun", 1),
            ("maze", 0),
            ("maze", 1),
        ]
    assert df["lr"].nunique() == 2


def test_asha_stops_weak_trials_early(tmp_path):
    # The grid puts the best lr first, so whatever order results arrive in, each weaker trial
    # meets a rung whose cutoff a better one has set (randomly ordered lrs made this depend on
    # timing: under load every trial could arrive better than those before it).
    _, df = _run(
        tmp_path,
        games=["coinrun"],
        seeds=[0],
        space={"lr": [1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6]},
        search={"algorithm": "grid", "scheduler": "asha", "grace_period": 1, "reduction_factor": 2},
        max_concurrent=8,
    )
    assert len(df) == 6
    best = df.loc[df["lr"].idxmax()]
    assert best["iteration"] == 8 and df["iteration"].min() < 8, df[["lr", "iteration"]]
    # ASHA's stops are the sweep's design: the trials stay INCOMPLETE in the table (the files
    # do not say why a trial stopped), and the sweep exits 0 (`_run`), not 1 as for a failure.
    assert (df["status"] == "INCOMPLETE").any()


def test_labelled_variants_change_several_params_and_are_recorded(tmp_path):
    spec, df = _run(
        tmp_path,
        games=["coinrun"],
        seeds=[0],
        variants={
            "small": {"widths": [16, 32, 32]},
            "wide+pool": {"widths": [32, 64, 64], "global_pool": True},
        },
    )
    assert list(df["variant"]) == ["small", "wide+pool"]
    for _, row in df.iterrows():
        params = json.loads((Path(row["trial_dir"]) / "params.json").read_text())
        assert params["variant"] == row["variant"]
        assert params["widths"] == spec.variants[row["variant"]]["widths"]
        assert params["global_pool"] is (row["variant"] == "wide+pool")


def test_run_or_resume_resumes_a_finished_sweep_without_rerunning(tmp_path):
    """What a restarted spot job does: the sweep found in storage is resumed, not rerun."""
    spec = SweepSpec(
        name="again", games=["coinrun"], seeds=[0, 1], budget=2 * 16384, storage_path=str(tmp_path)
    )
    assert not can_resume(tmp_path / "again")
    first = run_or_resume(spec, trainable=fake_trial, num_cpus=2)
    lines = {d: (Path(d) / "result.json").read_text() for d in first.trials["trial_dir"]}
    assert can_resume(first.path)
    # run_sweep's options that the sweep recorded when it started are not resume_sweep's.
    recorded = {"storage_path": str(tmp_path), "max_failures": 0, "instance": Instance("c6i.large")}
    second = run_or_resume(spec, trainable=fake_trial, num_cpus=2, **recorded)
    assert sorted(second.trials["trial_dir"]) == sorted(lines)
    assert (second.trials["status"] == "TERMINATED").all()
    for d, text in lines.items():
        assert (Path(d) / "result.json").read_text() == text


def test_run_or_resume_runs_anew_a_sweep_that_stopped_before_tune_started_it(tmp_path, capsys):
    """A start that wrote sweep.yaml and then failed before Tune's Tuner existed (a searcher's
    storage unreachable, a kill) leaves nothing to resume: the restarted job runs the sweep
    anew instead of being refused at every restart."""
    spec = SweepSpec(
        name="early", games=["coinrun"], seeds=[0], budget=16384, storage_path=str(tmp_path)
    )
    record_run(spec, str(tmp_path / "early"), address=None, instance=None, wandb=None)
    assert not can_resume(tmp_path / "early")
    with pytest.raises(SweepExistsError, match="stopped before Tune started it"):
        run_sweep(spec, trainable=fake_trial, num_cpus=2)
    result = run_or_resume(spec, trainable=fake_trial, num_cpus=2)
    assert "holds a sweep that stopped before Tune started it: run anew" in capsys.readouterr().out
    assert (result.trials["status"] == "TERMINATED").all() and can_resume(result.path)


def test_table_reads_as_the_report_optuna_variants_stopped_early(
    tmp_path, capsys, monkeypatch, ray_sessions
):
    """The table `run` prints is `results.final_scores` (`rlsweep report`'s loader): an Optuna
    sweep with variants whose trials ended at half their budget lists each trial's variant and
    INCOMPLETE (a table of Tune's own results said `variant NaN, TERMINATED`). A resume finds
    nothing to run and starts no Ray. Running it again into the same dir is refused;
    `overwrite=True` replaces it instead of mixing the two."""
    spec = SweepSpec(
        name="early",
        games=["coinrun"],
        seeds=[0],
        budget=2 * 16384,
        variants={"A": {"framestack": "none"}, "B": {"framestack": "gap"}},
        space={"lr": {"loguniform": [1e-5, 1e-3]}},
        search={"algorithm": "optuna", "num_samples": 1, "seed": 0},
        storage_path=str(tmp_path),
    )
    half = functools.partial(fake_trial, stop_at=0.5)
    df = run_sweep(spec, trainable=half, num_cpus=2).trials
    assert list(df["variant"]) == ["A", "B"] and (df["status"] == "INCOMPLETE").all(), df
    assert (df["env_steps"] == 16384).all() and (df["iteration"] == 1).all()
    final = R.final_scores(R.load_curves(tmp_path / "early"))
    assert sorted(final["variant"]) == ["A", "B"] and (final["status"] == "INCOMPLETE").all()
    # Tune will not restart them on resume, so resume does not promise to continue them.
    from rlsweep.experiment.recovery import reconcile

    restarts = reconcile(str(tmp_path / "early"))
    assert restarts == []  # both TERMINATED in Tune's state: nothing to continue
    assert R.resume_points(spec, str(tmp_path / "early"), restarts) == R.ResumePoints(
        [
            "rlsweep: resuming early: 0 finished trial(s) kept, 2 ended early by the scheduler "
            "kept, 0 to continue, 0 not started; 0 of 65.5k env steps left"
        ],
        to_run=0,
    )
    recorded, sessions = runs(tmp_path / "early"), len(ray_sessions)
    monkeypatch.setenv("HOME", str(tmp_path))  # the Python API expands ~ as the shell does
    again = resume_sweep("~/early", trainable=fake_trial, num_cpus=2)
    assert list(again.trials["status"]) == ["INCOMPLETE", "INCOMPLETE"]
    assert "every trial of early has ended: nothing to resume" in capsys.readouterr().out
    assert runs(tmp_path / "early") == recorded  # no driver started: no run recorded
    assert len(ray_sessions) == sessions == 1  # the run's; the resume opened none

    with pytest.raises(SweepExistsError, match="rlsweep resume .*--overwrite"):
        run_sweep(spec, trainable=fake_trial, num_cpus=2)
    df = run_sweep(spec, trainable=fake_trial, num_cpus=2, overwrite=True).trials
    assert len(df) == 2 and (df["status"] == "TERMINATED").all(), df
    assert len(list((tmp_path / "early").glob("*/params.json"))) == 2


def test_run_refuses_a_results_dir_holding_a_sweep_before_ray_starts(tmp_path, rlsweep_cli):
    """`rlsweep run` on a spec whose results dir holds a sweep: exit 2 and what to do instead,
    before Ray starts (no Ray session dir is created, nothing in the dir changes)."""
    (tmp_path / "spec.yaml").write_text("name: demo\ngames: [coinrun]\nstorage_path: results\n")
    (tmp_path / "results" / "demo").mkdir(parents=True)
    (tmp_path / "results" / "demo" / "sweep.yaml").write_text("name: demo\n")
    run = rlsweep_cli("run", "spec.yaml", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "results/demo" in run.stderr and "holds a sweep" in run.stderr
    # sweep.yaml without Tune's state: nothing a resume could take up, so it is not offered.
    assert "stopped before Tune started it" in run.stderr and "--overwrite" in run.stderr
    assert "rlsweep resume" not in run.stderr
    assert "Token authentication" not in run.stderr  # ray.init's first words
    assert [p.name for p in (tmp_path / "results" / "demo").iterdir()] == ["sweep.yaml"]
    (tmp_path / "results" / "demo" / "tuner.pkl").write_bytes(b"")
    run = rlsweep_cli("run", "spec.yaml", cwd=tmp_path)
    assert run.returncode == 2 and "already holds a sweep" in run.stderr, run.stderr
    assert "`rlsweep resume results/demo`" in run.stderr and "--overwrite" in run.stderr


def test_resume_refuses_trials_this_rlsweep_does_not_run_before_ray_starts(tmp_path, rlsweep_cli):
    """A sweep whose unfinished trials were saved with a value this rlsweep refuses (env_groups
    0, a GPU trial's default for a day) would fail each of them at its start, after Ray is up:
    `rlsweep resume` refuses instead, with exit 2, naming each trial, the key and what is
    allowed, before Ray starts and without touching the dir."""
    from rlsweep.run.tune_bridge import check_restorable

    spec = SweepSpec(
        name="older", games=["coinrun"], seeds=[0, 1], budget=2 * 16384, storage_path=str(tmp_path)
    )
    crash = functools.partial(fake_trial, crash=True)
    first = run_sweep(spec, trainable=crash, num_cpus=2, max_failures=0)
    assert (first.trials["status"] == "ERROR").all()
    configs = R.unfinished_configs(str(first.path))
    assert sorted(configs) == sorted(Path(d).name for d in first.trials["trial_dir"])
    for trial, config in configs.items():
        assert config == json.loads((first.path / trial / "params.json").read_text())
    check_restorable(spec, str(first.path))  # today's configs: nothing to refuse
    # What an earlier rlsweep saved: every trial's config as Tune's experiment state holds it.
    (state_file,) = first.path.glob("experiment_state-*.json")
    state = json.loads(state_file.read_text())
    for entry in state["trial_data"]:
        trial = json.loads(entry[0])
        assert trial["config"]["env_groups"] == 1
        trial["config"]["env_groups"] = 0
        entry[0] = json.dumps(trial)
    state_file.write_text(json.dumps(state))
    # A newer state file torn by a killed driver hides none of them: they are read as the
    # resume reads Tune's state, from the newest file that reads.
    torn = state_file.with_name("experiment_state-2099-01-01_00-00-00.json")
    torn.write_text(state_file.read_text()[:200])
    assert {t: c["env_groups"] for t, c in R.unfinished_configs(str(first.path)).items()} == {
        t: 0 for t in configs
    }
    torn.unlink()
    before = sorted((p, p.stat().st_mtime_ns) for p in first.path.rglob("*"))

    run = rlsweep_cli("resume", str(first.path), cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    for trial in configs:
        assert f"{first.path}/{trial}: config.env_groups: got 0" in run.stderr
    assert run.stderr.count("saved by the rlsweep that started the sweep, 0.1.0") == 2
    assert "resume with that one, or run the sweep anew" in run.stderr
    assert "Token authentication" not in run.stderr  # ray.init's first words
    assert sorted((p, p.stat().st_mtime_ns) for p in first.path.rglob("*")) == before


def test_run_sweep_refuses_what_the_cli_refuses_before_ray_starts(tmp_path, ray_sessions):
    """From Python, an unwritable storage path started Ray and died in a chained traceback, a
    5 s time limit started Ray and left a sweep dir that the next call refused, `num_cpus=0`
    blamed `params.num_cpus`, and `time_limit="1m"` was a bare TypeError. Each is refused
    before the sweep starts now (nothing written, no Ray), as `rlsweep run` refuses it."""
    from rlsweep.errors import SpecError

    spec = SweepSpec(name="x", games=["coinrun"], seeds=[0], budget=16384)
    spec = spec.with_overrides(storage_path=str(tmp_path))
    file = tmp_path / "file"
    file.write_text("")
    cases = [
        ({"storage_path": str(file)}, SpecError, "storage_path: "),
        ({"time_limit": 5}, ValueError, "time limit: got 5; allowed: seconds > 20"),
        ({"time_limit": "1m"}, ValueError, "time limit: got '1m'; allowed: "),
        ({"num_cpus": 0}, ValueError, "num_cpus: got 0; allowed: an integer >= 1"),
    ]
    for kw, kind, message in cases:
        with pytest.raises(kind, match=message):
            run_sweep(spec, trainable=fake_trial, **kw)
    assert list(tmp_path.iterdir()) == [file]  # no sweep dir left behind
    with pytest.raises(ValueError, match="num_cpus: got 0"):
        resume_sweep(tmp_path / "x", num_cpus=0)
    assert ray_sessions == []
    # What Python hands over otherwise stands: numpy's numbers too.
    import numpy as np

    from rlsweep.experiment.interrupt import check_time_limit
    from rlsweep.run.sweep import _check_cpus

    assert (check_time_limit(np.int64(3600)), _check_cpus(np.int64(2))) == (3600.0, 2)
