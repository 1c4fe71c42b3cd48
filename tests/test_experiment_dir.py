"""rlsweep.experiment.experiment_dir: where a sweep lives, one sweep per dir, and rlsweep's own
files in it, local and on S3 (moto's server, see conftest.s3_server)."""

import json
from pathlib import Path

import pytest

from rlsweep import __version__
from rlsweep.experiment.experiment_dir import (
    DRIVER_LOG,
    RUN_FILE,
    RUNS_FILE,
    SWEEP_FILE,
    Instance,
    SweepExistsError,
    append_text,
    experiment_path,
    git_commit,
    holds_sweep,
    read_text,
    record_end,
    record_run,
    record_start,
    refuse_existing,
    run_info,
    runs,
    sweep_spec,
)
from rlsweep.run.tracking import WandbSettings
from rlsweep.spec.spec import SweepSpec


def test_a_sweep_lives_at_storage_slash_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = SweepSpec(name="demo")
    assert experiment_path(spec) == str(tmp_path / "results" / "demo")
    assert experiment_path(spec, "~/runs") == str(Path("~/runs/demo").expanduser())
    assert experiment_path(spec, "s3://bucket/sweeps/") == "s3://bucket/sweeps/demo"


def test_a_dir_holding_a_sweep_is_refused_or_cleared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = SweepSpec(
        name="demo", search={"algorithm": "optuna"}, space={"lr": {"loguniform": [1e-5, 1e-3]}}
    )
    experiment = experiment_path(spec)
    assert not holds_sweep(experiment)
    refuse_existing(spec, experiment, overwrite=False)  # nothing there: nothing to refuse
    trial = Path(experiment) / "trial_0"
    trial.mkdir(parents=True)
    (trial / "params.json").write_text("{}")  # Tune's trial dirs alone make it a sweep
    assert holds_sweep(experiment)
    # Without Tune's state (a run that stopped before Tune took it up) there is nothing to
    # resume, and the error does not send the user to `resume`, which would refuse it.
    with pytest.raises(SweepExistsError) as e:
        refuse_existing(spec, experiment, overwrite=False)
    assert str(e.value) == (
        f"{experiment}: holds a sweep that stopped before Tune started it (nothing to resume); "
        "replace it by running again with --overwrite (run_sweep(overwrite=True)), or give the "
        "spec another name"
    )
    (Path(experiment) / "tuner.pkl").write_bytes(b"")  # Tune's state: what a resume restores
    with pytest.raises(SweepExistsError) as e:
        refuse_existing(spec, experiment, overwrite=False)
    assert str(e.value) == (
        f"{experiment}: already holds a sweep; continue it with `rlsweep resume results/demo`, "
        "replace it by running again with --overwrite (run_sweep(overwrite=True)), or give the "
        "spec another name"
    )
    study = Path(spec.optuna_storage_url(experiment, create=True).removeprefix("sqlite:///"))
    study.write_text("")
    refuse_existing(spec, experiment, overwrite=True)
    assert not Path(experiment).exists() and not study.exists()
    # A study the spec names (`search.optuna_storage`) is the user's: --overwrite keeps it.
    mine = tmp_path / "mine.db"
    mine.write_text("")
    theirs = SweepSpec(
        name="demo",
        search={"algorithm": "optuna", "optuna_storage": f"sqlite:///{mine}"},
        space={"lr": {"loguniform": [1e-5, 1e-3]}},
    )
    trial.mkdir(parents=True)
    (trial / "params.json").write_text("{}")
    refuse_existing(theirs, experiment, overwrite=True)
    assert not Path(experiment).exists() and mine.exists()


def test_the_run_record_reads_back(tmp_path):
    spec = SweepSpec(name="rec", games=["maze"], seeds=[3], source="rec.yaml")
    experiment = str(tmp_path / "rec")
    assert sweep_spec(experiment) is None and run_info(experiment) == {}
    wandb = WandbSettings(project="p", mode="offline")
    record_run(
        spec,
        experiment,
        address="auto",
        instance=Instance("c6i.large", spot=True),
        wandb=wandb.to_dict(),
    )
    assert sweep_spec(experiment).to_dict() == spec.to_dict()
    assert holds_sweep(experiment)
    info = json.loads((tmp_path / "rec" / RUN_FILE).read_text())
    assert info == run_info(experiment)
    assert info["rlsweep_version"] == __version__ and info["git_commit"] == git_commit()
    assert (info["ray_address"], info["instance_type"], info["spot"]) == ("auto", "c6i.large", True)
    assert info["wandb"] == {"project": "p", "entity": None, "mode": "offline", "dir": None}


def test_each_start_of_the_driver_is_recorded_with_how_it_ended(tmp_path):
    """runs.jsonl: a start and its end per driver; a driver killed leaves its start alone, and
    a line cut short by the kill is skipped; a `run` starts the record afresh."""
    experiment = str(tmp_path / "rec")
    assert runs(experiment) == []
    machine = {"nodes": 1, "cpus": 16, "gpus": 1, "gpu_types": ["H100"], "cpu_model": "EPYC"}
    plan = {"box": "16 CPUs, 1 GPU", "est_wall_s": 4620.0}
    record_start(experiment, "run", machine=machine, time_limit_s=555.0, plan=plan)
    record_end(experiment, "time limit 9m15s", 547.25)
    record_start(experiment, "resume", machine=machine, time_limit_s=None)
    append_text(experiment, RUNS_FILE, '{"event": "end", "at": "2026-')  # killed mid-line
    record_start(experiment, "resume", machine=machine, time_limit_s=None)
    record_end(experiment, "ended", 12.0)
    first, killed, last = runs(experiment)
    assert first["command"] == "run" and first["plan"] == plan and first["time_limit_s"] == 555
    assert (first["outcome"], first["wall_s"], first["gpu_types"]) == (
        "time limit 9m15s",
        547.2,
        ["H100"],
    )
    assert first["git_commit"] == git_commit() and first["at"] <= first["ended_at"]
    assert "outcome" not in killed and "wall_s" not in killed and killed["plan"] is None
    assert (last["command"], last["outcome"], last["wall_s"]) == ("resume", "ended", 12.0)
    # A `run` in a dir that holds no sweep, where a driver killed before it wrote sweep.yaml
    # left its start: the record starts afresh, with this run alone.
    record_start(experiment, "run", machine=machine, time_limit_s=None)
    [fresh] = runs(experiment)
    assert fresh["command"] == "run" and fresh["time_limit_s"] is None


def test_files_at_a_uri(s3_server):
    """The same files on S3: written, appended to (the driver log of each session), read back;
    the bucket then holds a sweep."""
    experiment = f"s3://{s3_server.bucket}/sweeps/files"
    assert read_text(experiment, DRIVER_LOG) is None and not holds_sweep(experiment)
    append_text(experiment, DRIVER_LOG, "first session\n")
    append_text(experiment, DRIVER_LOG, "second session\n")
    assert read_text(experiment, DRIVER_LOG) == "first session\nsecond session\n"
    assert not holds_sweep(experiment)  # a driver log alone is no sweep
    spec = SweepSpec(name="files")
    record_run(spec, experiment, address=None, instance=None, wandb=None)
    assert holds_sweep(experiment) and read_text(experiment, SWEEP_FILE) == spec.to_yaml()
    assert run_info(experiment)["ray_address"] == "local"
