"""rlsweep.results.results: a real (fake-trainable) Tune sweep, and hand-written broken ones."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rlsweep import metrics as M
from rlsweep.experiment.experiment_dir import SWEEP_FILE
from rlsweep.results import results as R
from rlsweep.run.sweep import run_sweep
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import CELL_INDEX, TRIAL_FILE, SweepSpec
from rlsweep.testing import curve, fake_trial


def write_trial(
    exp: Path,
    name: str,
    params: dict | None,
    rows: list[dict] | None = None,
    error: str | None = None,
    tail: str = "",
) -> Path:
    """A Tune-style trial dir: params.json, result.json (one JSON object per line), error.txt."""
    d = exp / name
    d.mkdir(parents=True)
    if params is not None:
        (d / "params.json").write_text(json.dumps(params))
    if rows is not None:
        lines = [json.dumps({"training_iteration": i + 1, **r}) for i, r in enumerate(rows)]
        (d / "result.json").write_text("\n".join(lines) + "\n" + tail)
    if error is not None:
        (d / "error.txt").write_text(error)
    return d


def row(steps: float, train: float, test: float, fresh: bool = True) -> dict:
    return {
        M.ENV_STEPS: steps,
        M.TRAIN_RETURN: 10 * train,
        M.TRAIN_RETURN_NORM: train,
        M.TEST_RETURN: 10 * test,
        M.TEST_RETURN_NORM: test,
        M.GAP_NORM: train - test,
        M.WALL_S: steps / 1000,
        M.TEST_FRESH: fresh,
        "loss/total": 0.1,
    }


# --- a real Tune experiment dir -----------------------------------------------------------


@pytest.fixture(scope="module")
def fake_sweep(run_fake_sweep):
    return run_fake_sweep(["coinrun"], 2 * 16384)


def test_tune_dir_tidy_rows(fake_sweep):
    spec, result = fake_sweep
    curves = R.load_curves(result.path)
    assert len(curves) == 4 * 2  # trials x iterations
    assert list(curves.columns[:4]) == ["sweep", "trial_id", "game", "seed"]
    assert {"framestack", "lr", "widths", "total_env_steps"} <= set(curves.columns)
    assert curves["widths"].iloc[0] == "[16, 32, 32]"  # lists as strings
    assert list(curves.columns[-13:]) == [
        "iteration",
        *M.METRICS,
        M.TEST_FRESH,
        M.RESUMED_AT,
        "status",
        "error",
    ]
    assert (curves["sweep"] == "fake").all() and (curves["status"] == R.TERMINATED).all()
    assert curves.groupby("trial_id")["iteration"].apply(list).map([1, 2].__eq__).all()
    assert R.swept_params(curves) == ["framestack"]
    # A storage dir holding the sweep reads the same.
    assert R.load_curves(Path(spec.storage_path)).equals(curves)


def test_tune_dir_final_matches_the_sweep_table(fake_sweep):
    _, result = fake_sweep
    final = R.final_scores(R.load_curves(result.path)).sort_values(["game", "framestack", "seed"])
    table = result.trials.sort_values(["game", "framestack", "seed"])
    assert final["trial_id"].tolist() == [Path(p).name for p in table["trial_dir"]]
    for col in M.METRICS:
        np.testing.assert_allclose(final[col], table[col], err_msg=col)
    assert (final["iteration"] == 2).all() and (final["test_iteration"] == 2).all()


def test_optuna_trials_read_as_what_they_ran_without_the_spec(tmp_path):
    """An Optuna trial's params.json holds Tune's config, whose cell index stands for its game,
    seed and variant; its trial.json, written on the driver as the trial started, holds what it
    ran. Results read that alone: with the sweep's spec.yaml gone every cell shows once, each
    variant with its values, and the scores each trial reported are the ones its recorded
    config earns (`testing.curve` of it; the games' score ranges and the seeds differ)."""
    spec = SweepSpec(
        name="tpe",
        games=["coinrun", "leaper"],
        seeds=[0, 1],
        budget=2 * 16384,
        variants={"A": {"framestack": "none"}, "B": {"framestack": "gap"}},
        space={"lr": {"loguniform": [1e-5, 1e-3]}},
        search={"algorithm": "optuna", "num_samples": 1, "seed": 0},
        storage_path=str(tmp_path),
    )
    result = run_sweep(spec, trainable=fake_trial, num_cpus=2)
    (Path(result.path) / SWEEP_FILE).unlink()
    final = R.final_scores(R.load_curves(result.path))
    assert (final["status"] == R.TERMINATED).all(), final
    cells = sorted(zip(final["game"], final["seed"], final["variant"], strict=True))
    assert cells == sorted(spec.cells())
    assert (final["framestack"] == final["variant"].map({"A": "none", "B": "gap"})).all()
    assert CELL_INDEX not in final.columns
    for _, trial in final.iterrows():
        trial_dir = Path(result.path) / trial["trial_id"]
        assert CELL_INDEX in json.loads((trial_dir / "params.json").read_text())
        ran = json.loads((trial_dir / TRIAL_FILE).read_text())
        config = TrialConfig.from_dict({k: v for k, v in ran.items() if k != "variant"})
        assert [trial[k] for k in ("game", "seed", "lr")] == [config.game, config.seed, config.lr]
        reported = [trial[M.TRAIN_RETURN], trial[M.TEST_RETURN]]
        assert reported == pytest.approx(curve(config, trial[M.ENV_STEPS]))


# --- hand-written: interrupted, errored, NaN ----------------------------------------------

PARAMS = {"total_env_steps": 4000, "framestack": "none", "widths": [16, 32]}


@pytest.fixture
def broken(tmp_path):
    exp = tmp_path / "broken"
    p = lambda seed, **kw: {"game": "coinrun", "seed": seed, **PARAMS, **kw}  # noqa: E731
    full = [row(1000 * (i + 1), 0.1 * i, 0.05 * i, fresh=i % 2 == 1) for i in range(4)]
    write_trial(exp, "coinrun_s0_a", p(0), full)
    write_trial(exp, "coinrun_s1_b", p(1))  # not started: params.json only
    # cut mid-way, its last line half written
    write_trial(exp, "coinrun_s2_c", p(2), full[:2], tail='{"env_steps": 30')
    write_trial(exp, "coinrun_s3_d", p(3), full[:2], error="Traceback ...\nRuntimeError: boom\n")
    nan = [*full[:3], {**full[3], M.TEST_RETURN_NORM: math.nan}]
    write_trial(exp, "coinrun_s4_e", p(4), nan)
    inf = [{**full[0], M.TRAIN_RETURN: math.inf}, *full[1:]]
    write_trial(exp, "coinrun_s5_f", p(5), inf)
    diverged = [*full[:3], {**full[3], "loss/total": math.nan}]
    write_trial(exp, "coinrun_s6_g", p(6), diverged)
    # NaN train return (no episode ended) and a last row that did not evaluate: fine
    ok = [*full[:3], {**full[3], M.TRAIN_RETURN_NORM: math.nan, M.TEST_FRESH: False}]
    write_trial(exp, "coinrun_s7_h", p(7, framestack="gap"), ok)
    # restored from a checkpoint: iterations 3-4 reported again, the later reports win
    restored = [*full, {**full[2], "training_iteration": 3}, {**full[3], "training_iteration": 4}]
    restored[-1][M.TEST_RETURN_NORM] = 0.9
    write_trial(exp, "coinrun_s8_i", p(8), restored)
    # crashed once, and Tune's retry from the checkpoint reached the budget: counted
    write_trial(exp, "coinrun_s9_j", p(9), full, error="Traceback ...\nActorDiedError: x\n")
    # stopped itself as failed (rlsweep.trial.trainable on a non-finite loss)
    stopped = [*full[:2], {**full[2], M.TRIAL_ERROR: "training diverged: loss/total is nan"}]
    write_trial(exp, "coinrun_s10_k", p(10), stopped)
    # crashed once, and the retry reached the budget only to diverge: not counted
    write_trial(exp, "coinrun_s11_l", p(11), diverged, error="Traceback ...\nActorDiedError: y\n")
    return exp


def test_every_trial_is_kept_and_marked(broken):
    curves = R.load_curves(broken)
    final = R.final_scores(curves).set_index("trial_id")
    assert final["status"].to_dict() == {
        "coinrun_s0_a": R.TERMINATED,
        "coinrun_s1_b": R.INCOMPLETE,
        "coinrun_s2_c": R.INCOMPLETE,
        "coinrun_s3_d": R.ERROR,
        "coinrun_s4_e": R.ERROR,
        "coinrun_s5_f": R.ERROR,
        "coinrun_s6_g": R.ERROR,
        "coinrun_s7_h": R.TERMINATED,
        "coinrun_s8_i": R.TERMINATED,
        "coinrun_s9_j": R.TERMINATED,
        "coinrun_s10_k": R.ERROR,
        "coinrun_s11_l": R.ERROR,
    }
    assert final["error"].to_dict() == {
        "coinrun_s0_a": "",
        "coinrun_s1_b": "",
        "coinrun_s2_c": "",
        "coinrun_s3_d": "RuntimeError: boom",
        "coinrun_s4_e": "test/return_norm is NaN at evaluation iteration 4",
        "coinrun_s5_f": "train/return is inf at iteration 1",
        "coinrun_s6_g": "loss/total is nan at the last iteration (training diverged)",
        "coinrun_s7_h": "",
        "coinrun_s8_i": "",
        "coinrun_s9_j": "recovered after: ActorDiedError: x",
        "coinrun_s10_k": "training diverged: loss/total is nan",
        "coinrun_s11_l": "loss/total is nan at the last iteration (training diverged)",
    }
    rows = curves.groupby("trial_id").size()
    assert rows["coinrun_s1_b"] == 1 and rows["coinrun_s2_c"] == 2 and rows["coinrun_s8_i"] == 4
    assert final.loc["coinrun_s1_b", "iteration"] == 0
    assert np.isnan(final.loc["coinrun_s1_b", M.TEST_RETURN_NORM])
    assert final.loc["coinrun_s0_a", "widths"] == "[16, 32]"


def test_final_takes_the_test_score_from_the_last_evaluation(broken):
    final = R.final_scores(R.load_curves(broken)).set_index("trial_id")
    h = final.loc["coinrun_s7_h"]
    assert h["iteration"] == 4 and h["test_iteration"] == 2 and h["test_env_steps"] == 2000
    # train/ and test/ are scored by the same evaluation: both come from that row.
    assert h[M.TEST_RETURN_NORM] == pytest.approx(0.05)
    assert h[M.TRAIN_RETURN_NORM] == pytest.approx(0.1)
    assert final.loc["coinrun_s2_c", "test_iteration"] == 2
    assert final.loc["coinrun_s8_i", M.TEST_RETURN_NORM] == pytest.approx(0.9)


def test_only_finished_trials_are_aggregated(broken):
    final = R.final_scores(R.load_curves(broken))
    counted = sorted(R.finished(final)["trial_id"])
    assert counted == ["coinrun_s0_a", "coinrun_s7_h", "coinrun_s8_i", "coinrun_s9_j"]
    assert R.swept_params(final) == ["framestack"]


def test_an_optuna_trial_without_its_record_is_an_error(tmp_path):
    """A trial dir whose config is Tune's alone, an Optuna cell index in place of its game, seed
    and variant, and no trial.json: which cell it ran is unknown, so it is an ERROR (listed,
    never aggregated), its other params kept. Beside it, a trial.json is read over params.json."""
    exp = tmp_path / "tpe"
    full = [row(1000 * (i + 1), 0.1 * i, 0.05 * i) for i in range(4)]
    tune_config = {CELL_INDEX: 1, "lr": 1e-4, **PARAMS}
    write_trial(exp, "trial_sx_a", tune_config, full)
    recorded = write_trial(exp, "trial_sx_b", tune_config, full)
    ran = {"game": "leaper", "seed": 1, "variant": "B", "lr": 1e-4, **PARAMS}
    (recorded / TRIAL_FILE).write_text(json.dumps(ran))
    final = R.final_scores(R.load_curves(exp)).set_index("trial_id")
    assert CELL_INDEX not in final.columns and (final["lr"] == 1e-4).all()
    unknown = final.loc["trial_sx_a"]
    assert unknown["status"] == R.ERROR and unknown["game"] is None, unknown
    assert unknown["error"] == (
        "no trial.json: its config records an Optuna cell index (__trial_index__), not the game, "
        "seed and variant it ran"
    )
    known = final.loc["trial_sx_b", ["game", "seed", "variant", "status"]]
    assert known.tolist() == ["leaper", 1, "B", R.TERMINATED]


def test_no_trials_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Tune trial directories"):
        R.load_curves(tmp_path)


def test_two_trials_of_one_cell_are_not_two_seeds(tmp_path):
    """Two runs' trial dirs in one experiment dir hold two trials of each cell: counted once,
    with a warning, never as a second seed with a fake-tight CI."""
    exp = tmp_path / "twice"
    full = [row(1000 * (i + 1), 0.1 * i, 0.05 * i) for i in range(4)]
    params = {"game": "coinrun", "seed": 0, **PARAMS}
    write_trial(exp, "coinrun_s0_a", params, full)
    write_trial(exp, "coinrun_s0_b", params, full)  # the same cell again
    write_trial(exp, "coinrun_s1_c", {**params, "seed": 1}, full)
    final = R.final_scores(R.load_curves(exp))
    with pytest.warns(UserWarning, match="coinrun_s0_b"):
        counted = R.finished(final)
    assert sorted(counted["trial_id"]) == ["coinrun_s0_a", "coinrun_s1_c"]


def test_gpu_memory_columns_only_where_a_trial_reported_them(tmp_path):
    """GPU trials report their memory peaks; a CPU trial reports none (no NaN columns for it),
    and a sweep without GPU trials has no GPU columns at all."""
    params = {"game": "coinrun", "seed": 0, "total_env_steps": 2000}
    gpu = {M.GPU_RESERVED_PEAK_GIB: 7.5, M.GPU_ALLOCATED_PEAK_GIB: 6.0, M.GPU_LIMIT_GIB: 9.2}
    write_trial(tmp_path / "cpu", "t0", params, [row(1000, 0.1, 0.1), row(2000, 0.2, 0.2)])
    assert not set(M.GPU_METRICS) & set(R.load_curves(tmp_path / "cpu").columns)
    write_trial(tmp_path / "mixed", "t0", params, [row(1000, 0.1, 0.1), row(2000, 0.2, 0.2)])
    gpu_rows = [{**row(1000, 0.1, 0.1), **gpu}, {**row(2000, 0.2, 0.2), **gpu}]
    write_trial(tmp_path / "mixed", "t1", {**params, "seed": 1}, gpu_rows)
    curves = R.load_curves(tmp_path / "mixed")
    columns = list(curves.columns)
    assert columns[columns.index(M.TEST_FRESH) + 1 :][:5] == [
        M.RESUMED_AT,
        *M.GPU_METRICS,
        "status",
    ]
    # The host's peak, where a trial reported it (from 2026-11-30), before the GPU's.
    host_rows = [{**r, M.HOST_RSS_PEAK_GIB: 1.5} for r in gpu_rows]
    write_trial(tmp_path / "mixed", "t2", {**params, "seed": 2}, host_rows)
    columns = list(R.load_curves(tmp_path / "mixed").columns)
    at = columns.index(M.RESUMED_AT) + 1
    assert columns[at : at + 4] == list(M.MEMORY_METRICS)
    final = R.final_scores(curves).set_index("trial_id")
    assert final.loc["t1", M.GPU_RESERVED_PEAK_GIB] == 7.5
    assert math.isnan(final.loc["t0", M.GPU_RESERVED_PEAK_GIB])


def test_a_resume_counts_the_trials_not_started_as_to_run(tmp_path):
    """A sweep stopped after its one started trial finished, two of its three not started
    (a study's first sitting, its later trials waiting): the resume has those two to run; were
    they left out, it would say "nothing to resume" and never run them."""
    from rlsweep.spec.spec import SweepSpec

    spec = SweepSpec(name="part", games=["coinrun"], seeds=[0, 1, 2], budget=16384)
    exp = tmp_path / "part"
    full = [row(4096 * (i + 1), 0.1 * i, 0.05 * i) for i in range(4)]
    params = {"game": "coinrun", "seed": 0, **PARAMS, "total_env_steps": 16384}
    write_trial(exp, "coinrun_s0_a", params, full)
    points = R.resume_points(spec, str(exp), [])
    assert points.to_run == 2
    assert points.lines[0] == (
        "rlsweep: resuming part: 1 finished trial(s) kept, 0 ended early by the scheduler kept, "
        "0 to continue, 2 not started; 32.8k of 49.2k env steps left"
    )
