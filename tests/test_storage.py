"""Storage on S3: URI handling, and a sweep whose results and checkpoints go to a real local S3
server (moto's, see conftest.s3_server) and whose report is built from there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsweep import storage
from rlsweep._ray_compat import ray_session_dir
from rlsweep.results.report import default_out
from rlsweep.spec.spec import TRIAL_FILE

# --- unit ---------------------------------------------------------------------------------


@pytest.fixture
def aws_env(monkeypatch):
    """A clean AWS environment (a region, so nothing asks an instance-metadata service)."""
    for key in (*storage.ENDPOINT_VARS, *storage.REGION_VARS):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


def _options(fs) -> dict:
    """What a pickled S3FileSystem carries (what Ray ships to workers and stores)."""
    return fs.__reduce__()[1][0]


@pytest.mark.parametrize(
    ("path", "uri"),
    [("s3://b/p", True), ("gs://b", True), ("/tmp/x", False), ("~/x", False), ("results", False)],
)
def test_is_uri(path, uri):
    assert storage.is_uri(path) is uri
    assert storage.is_uri(Path(path)) is False  # a Path is local (and would mangle "//")


def test_local_paths_are_resolved_as_before(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert storage.tune_storage("results") == (str(tmp_path / "results"), None)
    home = storage.filesystem("~/x")
    assert home == (None, str(Path("~/x").expanduser().resolve()))


def test_s3_uri_gives_bucket_path_and_endpoint_from_the_environment(aws_env):
    aws_env.setenv("AWS_ENDPOINT_URL", "https://generic.example:1")
    aws_env.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000")
    path, fs = storage.tune_storage("s3://bucket/sweeps/")
    assert path == "bucket/sweeps" and fs.type_name == "s3"
    opts = _options(fs)
    assert opts["endpoint_override"] == "127.0.0.1:9000" and opts["scheme"] == "http"
    assert opts["region"] == "eu-west-1"
    assert opts["access_key"] is None and opts["secret_key"] is None  # default chain: not pickled


def test_endpoint_precedence(aws_env):
    assert storage.s3_endpoint() is None
    assert not _options(storage.s3_filesystem())["endpoint_override"]
    aws_env.setenv("AWS_ENDPOINT_URL", "http://generic:1")
    assert storage.s3_endpoint() == "http://generic:1"
    aws_env.setenv("AWS_ENDPOINT_URL_S3", "http://s3only:2")
    assert storage.s3_endpoint() == "http://s3only:2"
    fs, _ = storage.filesystem("s3://b", endpoint="minio.local:9000")
    assert _options(fs)["endpoint_override"] == "minio.local:9000"
    assert _options(fs)["scheme"] == "https"  # no scheme given: TLS


def test_bad_s3_uri():
    with pytest.raises(ValueError, match="no bucket"):
        storage.filesystem("s3:///prefix")


def test_a_local_check_outlasts_another_check_taking_its_dirs_away(tmp_path, monkeypatch):
    """Two checks of one path at once (validate and plan of a spec, two tests): the other
    removed the dirs it had made between this check's mkdir and its write, and this one said
    the dir "cannot be written". It makes them again; what it made it removes."""
    import tempfile

    real, taken = tempfile.TemporaryFile, []

    def racing(*args, dir=None, **kw):
        if not taken:  # the other check's cleanup, once
            taken.append(dir)
            Path(dir).rmdir()
        return real(*args, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "TemporaryFile", racing)
    storage.check_storage(tmp_path / "results" / "demo")
    assert taken == [tmp_path / "results" / "demo"]
    assert not (tmp_path / "results").exists()  # nothing left behind


def test_cache_dir_and_report_out(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert storage.cache_dir("s3://b/sweeps/x/") == tmp_path / "rlsweep/s3/b/sweeps/x"
    with pytest.raises(ValueError):
        storage.cache_dir("s3://b/../../etc")
    assert default_out(["s3://b/sweeps/x"]) == Path("results/x/report")
    assert default_out(["s3://b/s/x", "s3://b/s/y"]) == Path("results/x+y/report")


# --- a real sweep on a local S3 server ----------------------------------------------------


def _objects(bucket: str, prefix: str) -> dict[str, bytes]:
    import boto3

    s3 = boto3.client("s3")
    keys = [
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for o in page.get("Contents", [])
    ]
    return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


@pytest.fixture(scope="module")
def s3_sweep(s3_server, start_ray):
    """Two fake trials (4 iterations, a checkpoint every 2) stored at s3://<bucket>/sweeps."""
    from rlsweep.run.sweep import run_sweep
    from rlsweep.spec.spec import SweepSpec
    from rlsweep.testing import fake_trial

    spec = SweepSpec(
        name="s3fake",
        games=["coinrun"],
        seeds=[0, 1],
        budget=4 * 16384,
        params={"checkpoint_interval": 2},
        storage_path=f"s3://{s3_server.bucket}/sweeps",
    )
    # Started here (run_sweep joins it) so the test can read this session's logs afterwards.
    with start_ray(2):
        logs = Path(ray_session_dir()) / "logs"
        result = run_sweep(spec, trainable=fake_trial, num_cpus=2)
    return spec, result, logs


def test_results_and_checkpoints_land_in_the_bucket(s3_server, s3_sweep):
    spec, result, _ = s3_sweep
    df = result.to_dataframe()
    assert len(df) == 2 and (df["status"] == "TERMINATED").all()
    objects = _objects(s3_server.bucket, f"sweeps/{spec.name}/")
    trials = {k.split("/")[2] for k in objects if k.endswith("/params.json")}
    assert len(trials) == 2
    for trial in trials:
        base = f"sweeps/{spec.name}/{trial}/"
        params = json.loads(objects[base + "params.json"])
        assert params["total_env_steps"] == spec.budget and params["checkpoint_interval"] == 2
        # What the trial ran, written on the driver beside params.json: there too (a grid
        # trial's is Tune's config itself).
        assert json.loads(objects[base + TRIAL_FILE]) == params
        assert len(objects[base + "result.json"].decode().splitlines()) == 4
        states = [k for k in objects if k.startswith(base) and k.endswith("/state.json")]
        assert states, f"no checkpoint of {trial} in the bucket"
        assert {json.loads(objects[k])["env_steps"] for k in states} <= {2 * 16384, 4 * 16384}


def test_report_from_s3_and_no_credentials_anywhere(s3_server, s3_sweep, tmp_path, monkeypatch):
    from rlsweep.cli import main
    from rlsweep.results.report import build_report

    spec, _, logs = s3_sweep
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    uri = f"s3://{s3_server.bucket}/sweeps/{spec.name}"
    report = build_report([uri], out=tmp_path / "report", n_resamples=200)

    local = storage.cache_dir(uri)
    assert local.is_relative_to(tmp_path / "cache")
    assert len(list(local.glob("*/result.json"))) == 2
    assert not list(local.glob("*/checkpoint_*")), "checkpoints are not fetched for reports"
    table = (report.parent / "table.md").read_text()
    assert "| coinrun |" in table and "Counted: 2 finished trials" in table
    final = (report.parent / "final.csv").read_text().splitlines()
    assert len(final) == 1 + 2 and all(",TERMINATED," in row for row in final[1:])

    monkeypatch.chdir(tmp_path)  # the CLI, with the default (local) output dir
    assert main(["report", uri, "--resamples", "100"]) == 0
    assert (tmp_path / "results" / spec.name / "report" / "table.md").is_file()

    before = {p: p.stat().st_mtime_ns for p in local.rglob("*") if p.is_file()}
    assert storage.fetch(uri) == local  # unchanged files are not downloaded again
    assert {p: p.stat().st_mtime_ns for p in before} == before
    with_ckpt = storage.fetch(uri, tmp_path / "full", checkpoints=True)
    assert list(with_ckpt.glob("*/checkpoint_*/state.json"))

    secret = s3_server.secret.encode()
    stored = _objects(s3_server.bucket, "")
    leaks = [k for k, body in stored.items() if secret in body]
    leaks += [str(p) for p in [*tmp_path.rglob("*"), *logs.rglob("*")] if _holds(p, secret)]
    assert not leaks, f"the secret key was written to {leaks}"


def _holds(path: Path, needle: bytes) -> bool:
    return path.is_file() and needle in path.read_bytes()


def test_missing_prefix_is_an_error(s3_server, tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing stored"):
        storage.fetch(f"s3://{s3_server.bucket}/nope", tmp_path)
