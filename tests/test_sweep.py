"""Tune plumbing with the fake trainable (deterministic curves, the real trial's keys)."""

import json
from pathlib import Path

import pytest

from rlsweep.metrics import METRICS
from rlsweep.spec import SweepSpec
from rlsweep.sweep import RESULT_COLUMNS, run_sweep
from rlsweep.testing import fake_trial


@pytest.fixture(scope="module")
def fake_sweep(tmp_path_factory):
    spec = SweepSpec(
        name="fake",
        games=["coinrun", "maze"],
        seeds=[0, 1],
        budget=4 * 4096,
        space={"framestack": ["none", "gap"]},
        storage_path=str(tmp_path_factory.mktemp("results")),
    )
    return spec, run_sweep(spec, trainable=fake_trial, num_cpus=2)


def test_one_row_per_trial_with_every_column(fake_sweep):
    spec, result = fake_sweep
    df = result.to_dataframe()
    assert len(df) == len(spec.trials()) == 8
    assert set(df.columns) >= {"game", "seed", "framestack", *RESULT_COLUMNS, "status"}
    assert not df[list(RESULT_COLUMNS)].isna().any().any()
    assert (df["status"] == "TERMINATED").all()
    assert (df["env_steps"] == 4 * 4096).all() and (df["iterations"] == 4).all()
    assert set(zip(df.game, df.seed, df.framestack, strict=True)) == {
        (t.game, t.seed, t.framestack) for t in spec.trials()
    }


def test_metrics_are_the_fake_curves(fake_sweep):
    from rlsweep.config import TrialConfig
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
