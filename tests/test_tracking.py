"""W&B offline runs, TensorBoard event files, Optuna study persistence and importances, cost —
on real (fake-trainable) Tune sweeps; the files are read back, not mocked."""

import json
import math
import struct
from pathlib import Path

import pytest

from rlsweep import metrics as M
from rlsweep._ray_compat import ray_session_dir
from rlsweep.experiment.experiment_dir import Instance, git_commit
from rlsweep.results.report import build_report
from rlsweep.results.tables import usd_text
from rlsweep.run.sweep import run_sweep
from rlsweep.run.tracking import WandbSettings
from rlsweep.spec.spec import SweepSpec
from rlsweep.testing import fake_trial

FAKE_KEY = "wandbFAKEkey" + "0123456789abcdef" * 2 + "ZZ"  # distinctive, to grep for


@pytest.fixture(scope="module")
def ray_session(start_ray):
    with start_ray(2):
        yield ray_session_dir()


@pytest.fixture(scope="module")
def random_sweep(ray_session, tmp_path_factory):
    """Random search over two sampled params, logged to W&B offline with a (fake) key set: 4
    configurations (an importance needs 4), on one game."""
    spec = SweepSpec(
        name="tracked",
        games=["coinrun"],
        seeds=[0],
        budget=3 * 16384,
        params={"checkpoint_interval": 0},
        space={"lr": {"loguniform": [1e-5, 1e-3]}, "entropy_coeff": {"uniform": [0.0, 0.02]}},
        search={"algorithm": "random", "num_samples": 4, "seed": 3},
        tags=["smoke", "tracking-test"],
        storage_path=str(tmp_path_factory.mktemp("results")),
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("WANDB_API_KEY", FAKE_KEY)
    try:
        result = run_sweep(
            spec,
            trainable=fake_trial,
            wandb=WandbSettings(project="rlsweep-tests", mode="offline"),
            instance=Instance("c6i.2xlarge", spot=True),
        )
    finally:
        mp.undo()
    return spec, result, Path(ray_session)


# --- W&B offline files --------------------------------------------------------------------


def read_wandb_records(path: Path) -> list:
    """The protobuf records of an offline `.wandb` file: a 7-byte W&B header, then LevelDB's
    log format (32 KiB blocks of [crc32 u32][length u16][type u8][data] chunks)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, records, chunks = 32768, 7, [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # too little room left in the block: zero padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunks += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST: a whole record
            rec = pb.Record()
            rec.ParseFromString(chunks)
            records.append(rec)
            chunks = b""
    return records


def _runs(result) -> dict[str, list]:
    files = sorted(Path(result.path).glob("wandb/offline-run-*/run-*.wandb"))
    return {f.parent.name: read_wandb_records(f) for f in files}


def _history(records) -> list[dict]:
    return [
        {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
        for r in records
        if r.HasField("history")
    ]


def _run_record(records):
    return next(r.run for r in records if r.HasField("run"))


def test_one_offline_run_per_trial_and_one_report_run(random_sweep):
    spec, result, _ = random_sweep
    runs = {name: _run_record(recs) for name, recs in _runs(result).items()}
    jobs = sorted(r.job_type for r in runs.values())
    assert jobs == ["report"] + ["trial"] * 4
    assert {r.run_group for r in runs.values()} == {"tracked"}
    assert {r.project for r in runs.values()} == {"rlsweep-tests"}
    for r in runs.values():
        tags = set(r.tags)
        assert {"smoke", "tracking-test", "algo:ppo", "search:random"} <= tags
        assert "game:coinrun" in tags
        assert f"git:{git_commit()}" in tags


def test_trial_runs_hold_the_reported_metrics(random_sweep):
    spec, result, _ = random_sweep
    trials = result.trials.set_index(result.trials["trial_dir"].map(lambda d: Path(d).name))
    seen = 0
    for recs in _runs(result).values():
        run = _run_record(recs)
        if run.job_type != "trial":
            continue
        history = _history(recs)
        assert len(history) == 3  # one per iteration
        assert [h[M.ENV_STEPS] for h in history] == [16384, 32768, 49152]
        config = {i.key: json.loads(i.value_json) for i in run.config.update}
        lr, game = (
            v["value"] if isinstance(v, dict) else v for v in map(config.get, ("lr", "game"))
        )
        row = trials[(trials["lr"] == lr) & (trials["game"] == game)]
        assert len(row) == 1
        assert history[-1][M.TEST_RETURN_NORM] == pytest.approx(row[M.TEST_RETURN_NORM].iloc[0])
        seen += 1
    assert seen == 4


def test_report_run_logs_the_table_and_the_plots(random_sweep):
    _, result, _ = random_sweep
    report = next(recs for recs in _runs(result).values() if _run_record(recs).job_type == "report")
    (logged,) = _history(report)  # nested keys come flattened: "scores/_type"
    assert logged["scores/_type"] == "table-file" and logged["scores/nrows"] == 4
    plots = {k.split("/")[1] for k in logged if k.startswith("plots/")}
    assert {"learning_curves", "aggregates", "sample_efficiency", "importance"} <= plots
    assert all(logged[f"plots/{p}/_type"] == "image-file" for p in plots)
    run_dir = Path(result.path) / "wandb"
    (table,) = run_dir.glob("offline-run-*/files/" + logged["scores/path"])
    rows = json.loads(table.read_text())
    trial_ids = {Path(d).name for d in result.trials["trial_dir"]}
    column = rows["columns"].index("trial_id")
    assert {r[column] for r in rows["data"]} == trial_ids
    for p in plots:
        (png,) = run_dir.glob("offline-run-*/files/" + logged[f"plots/{p}/path"])
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_report_run_is_on_disk_when_log_report_returns(random_sweep, tmp_path, monkeypatch):
    """wandb's finish() only tells wandb-core the run is over, and the core writes the run
    file after it returns: read at once, the file held no run record (make test, 2026-11-29).
    log_report waits for it, so `wandb sync` right after a sweep finds the whole run. Here the
    core is as slow as it can be: finish()'s word never reaches it (wandb 0.31's
    ServiceConnection.inform_finish), so only a wait for the core to close writes the file."""
    from wandb.sdk.lib.service.service_connection import ServiceConnection

    from rlsweep.run.tracking import log_report

    monkeypatch.setattr(ServiceConnection, "inform_finish", lambda self, run_id: None)
    spec, result, _ = random_sweep
    settings = WandbSettings(project="rlsweep-tests", mode="offline", dir=str(tmp_path))
    (run_file,) = Path(log_report(spec, settings, result.path)).glob("run-*.wandb")
    records = read_wandb_records(run_file)  # at once, as a script would
    assert any(r.HasField("run") for r in records), f"{run_file}: {len(records)} records, no run"
    assert _run_record(records).job_type == "report"
    assert any(r.HasField("history") for r in records)


def test_no_api_key_anywhere(random_sweep):
    """Not in the W&B files, results, checkpoints, reports — nor in Ray's own session logs."""
    _, result, session_dir = random_sweep
    checked = 0
    for root in (Path(result.path), session_dir / "logs"):
        for f in root.rglob("*"):
            if f.is_file():
                assert FAKE_KEY.encode() not in f.read_bytes(), f
                checked += 1
    assert checked > 50


# --- TensorBoard ----------------------------------------------------------------------------


def read_tfevents(path: Path) -> list:
    """Events of a TFRecord file: [length u64][crc u32][data][crc u32] per record."""
    from tensorboardX.proto import event_pb2

    data, pos, events = path.read_bytes(), 0, []
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos : pos + 8])
        ev = event_pb2.Event()
        ev.ParseFromString(data[pos + 12 : pos + 12 + length])
        events.append(ev)
        pos += 12 + length + 4
    return events


def test_tensorboard_event_files_per_trial_with_env_steps_as_x(random_sweep):
    _, result, _ = random_sweep
    for trial_dir in result.trials["trial_dir"]:
        (events_file,) = Path(trial_dir).glob("events.out.tfevents.*")
        scalars = [
            (ev.step, v.simple_value)
            for ev in read_tfevents(events_file)
            for v in ev.summary.value
            if v.tag == "ray/tune/" + M.TEST_RETURN_NORM
        ]
        assert [s for s, _ in scalars] == [16384, 32768, 49152]
        last = json.loads((Path(trial_dir) / "result.json").read_text().splitlines()[-1])
        assert scalars[-1][1] == pytest.approx(last[M.TEST_RETURN_NORM], rel=1e-6)


# --- report: importances and cost ------------------------------------------------------------


def test_report_has_importances_from_finished_trials(random_sweep):
    _, result, _ = random_sweep
    md = (Path(result.path) / "report" / "report.md").read_text()
    assert "## Hyperparameter importance" in md and "from finished trials (4 configurations)" in md
    imp = (Path(result.path) / "report" / "importance.csv").read_text().splitlines()
    rows = {line.split(",")[1]: float(line.split(",")[2]) for line in imp[1:]}
    assert set(rows) == {"lr", "entropy_coeff"}
    assert sum(rows.values()) == pytest.approx(1.0)
    # Which parameter matters is test_importance's to show, on 24 trials: here 4 random draws
    # can tie lr to entropy_coeff by chance (once 0.50 against 0.50).


def test_report_prices_each_trial(random_sweep):
    from rlsweep.plan.cost import load_prices

    _, result, _ = random_sweep
    md = (Path(result.path) / "report" / "report.md").read_text()
    c6i = load_prices()["c6i.2xlarge"]
    walls = result.trials[M.WALL_S]
    # fake trials hold 1 CPU of the instance's vCPUs
    expected = sum(w / 3600 * c6i.spot * 1 / c6i.vcpus for w in walls)
    row = f"| tracked | c6i.2xlarge (spot) | 4 | {usd_text(expected / 4)} | {usd_text(expected)} |"
    assert row in md


def test_sweep_records_its_spec_and_provenance(random_sweep):
    spec, result, _ = random_sweep
    saved = SweepSpec.from_yaml(Path(result.path) / "sweep.yaml")
    assert saved.to_dict() == spec.to_dict()
    info = json.loads((Path(result.path) / "sweep.json").read_text())
    assert info["git_commit"] == git_commit() and info["instance_type"] == "c6i.2xlarge"
    assert info["spot"] is True
    assert info["wandb"] == {
        "project": "rlsweep-tests",
        "entity": None,
        "mode": "offline",
        "dir": None,
    }


# --- Optuna ----------------------------------------------------------------------------------


def test_optuna_study_persists_and_feeds_importances(ray_session, tmp_path):
    import optuna

    spec = SweepSpec(
        name="tpe",
        games=["coinrun"],
        seeds=[0],
        budget=2 * 16384,
        params={"checkpoint_interval": 0},
        space={"lr": {"loguniform": [1e-5, 1e-3]}, "gamma": {"uniform": [0.95, 0.999]}},
        search={"algorithm": "optuna", "num_samples": 5},
        storage_path=str(tmp_path),
    )
    result = run_sweep(spec, trainable=fake_trial)
    db = Path(result.path) / "optuna.db"
    assert db.exists()
    study = optuna.load_study(study_name="tpe", storage=f"sqlite:///{db}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 5
    # Each Optuna trial's value is what Tune reported for those params.
    by_lr = dict(zip(result.trials["lr"], result.trials[M.TEST_RETURN_NORM], strict=True))
    for t in done:
        assert t.value == pytest.approx(by_lr[t.params["lr"]])
        assert math.isfinite(t.value)
    md = build_report([result.path]).read_text()
    assert "from the persisted Optuna study (5 trials)" in md


def test_optuna_storage_url_is_a_spec_key(tmp_path):
    from rlsweep.spec.spec import SpecError

    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    spec = SweepSpec(
        name="s",
        space={"lr": {"loguniform": [1e-5, 1e-3]}},
        search={"algorithm": "optuna", "optuna_storage": url},
    )
    assert spec.optuna_storage_url(str(tmp_path / "exp")) == url
    default = SweepSpec(name="s", space=spec.space, search={"algorithm": "optuna"})
    assert default.optuna_storage_url(tmp_path / "exp") == f"sqlite:///{tmp_path}/exp/optuna.db"
    # A sweep stored at a URI keeps its study where its local report goes: results/<name>/.
    assert default.optuna_storage_url("s3://b/sweeps/s").endswith("/results/s/optuna.db")
    with pytest.raises(
        SpecError, match="search.optuna_storage: got 'study.db'; allowed: a SQLAlchemy URL"
    ):
        SweepSpec(name="s", search={"optuna_storage": "study.db"})
    for value in (url, None):  # a renamed key is an error whatever its value
        with pytest.raises(SpecError, match="search.storage: renamed: write search.optuna_"):
            SweepSpec(name="s", search={"storage": value})


def test_report_cost_with_a_price_table_missing_the_instance(random_sweep, tmp_path):
    _, result, _ = random_sweep
    prices = tmp_path / "prices.yaml"
    prices.write_text("m6i.large: {vcpus: 2, gpus: 0, on_demand: 0.096, spot: 0.04}\n")
    md = build_report([result.path], out=tmp_path / "r", prices=prices).read_text()
    assert "| tracked | c6i.2xlarge | 4 | ? | ? (unknown instance type" in md


def test_resume_logs_to_wandb_as_the_sweep_did(random_sweep):
    """Last in this file: it adds a second report run to the sweep's W&B files."""
    from rlsweep.run.sweep import resume_sweep

    _, result, _ = random_sweep
    resumed = resume_sweep(result.path, trainable=fake_trial)  # no wandb= given
    assert (resumed.trials["status"] == "TERMINATED").all()
    jobs = sorted(_run_record(recs).job_type for recs in _runs(result).values())
    assert jobs == ["report", "report"] + ["trial"] * 4  # finished trials were not rerun


def test_online_logging_without_credentials_is_bad_input_before_anything_runs(
    tmp_path, monkeypatch, capsys
):
    """wandb raised in the driver once Ray and the sweep had started, leaving a sweep dir that
    the same run without --wandb then refused (`already holds a sweep`)."""
    from rlsweep.cli import main

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))  # none
    monkeypatch.setenv("HOME", str(tmp_path))
    argv = ["run", "search_spaces/demo.yaml", "--storage", str(tmp_path / "r"), "--num-cpus", "1"]
    assert main([*argv, "--wandb", "online"]) == 2
    assert "--wandb online: no W&B credentials here" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
