"""SageMaker launch, offline: requests checked by botocore's Stubber against the service model
(the entry script that runs on the instances: tests/test_sagemaker_entry.py). Nothing reaches
AWS: the Stubber answers every call, and the client carries fake credentials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsweep.launch.sagemaker import (
    CHECKPOINT_DIR,
    ENTRY_PROGRAM,
    STOP_BEFORE_MAX_RUN_S,
    SageMakerJob,
    create_training_job_request,
    submit,
)

ROOT = Path(__file__).resolve().parent.parent
ROLE = "arn:aws:iam::123456789012:role/rlsweep-sagemaker"
ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/x"
# Distinctive fake credentials: tests grep for them wherever something is written.
FAKE_SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKERLSWEEP12345",
    "AWS_SECRET_ACCESS_KEY": "rlsweepFAKEsmSecret/abc123",
    "AWS_SESSION_TOKEN": "rlsweepFAKEsmSessionToken",
    "WANDB_API_KEY": "rlsweepFAKEwandbKey0123456789",
}


def _job(**kw) -> SageMakerJob:
    base = {
        "job_name": "rlsweep-sweep-1",
        "role_arn": ROLE,
        "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/rlsweep:latest",
        "instance_type": "ml.c5.18xlarge",
        "instance_count": 3,
        "checkpoint_s3_uri": "s3://rlsweep-bucket/checkpoints/sweep-1",
        "output_s3_uri": "s3://rlsweep-bucket/output",
        "source_s3_uri": "s3://rlsweep-bucket/code/sourcedir.tar.gz",
        "spec_path": "search_spaces/ppo_lr.yaml",
        "storage": "s3://rlsweep-bucket/sweeps",  # trials on 3 hosts: storage they all reach
        "region": "us-east-1",
    }
    return SageMakerJob(**{**base, **kw})


def _spot(**kw) -> SageMakerJob:
    return _job(use_spot=True, max_run_s=4 * 3600, max_wait_s=8 * 3600, **kw)


def _hetero(**kw) -> SageMakerJob:
    groups = [("learner", "ml.g5.2xlarge", 1), ("rollout", "ml.c5.18xlarge", 2)]
    return _spot(instance_type=None, instance_count=1, instance_groups=groups, **kw)


@pytest.fixture
def stubbed():
    """A real boto3 SageMaker client with fake credentials, every call answered by a Stubber."""
    import boto3
    from botocore.stub import Stubber

    client = boto3.client(
        "sagemaker",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


# --- the request, validated by botocore ---------------------------------------------------------
def _submitted(stubbed, job) -> dict:
    """Submits `job` to the stubbed client, which checks its request against the service model
    and that it equals create_training_job_request(job); returns that request."""
    client, stubber = stubbed
    req = create_training_job_request(job)
    stubber.add_response("create_training_job", {"TrainingJobArn": ARN}, expected_params=req)
    assert submit(job, client) == ARN
    return req


def test_homogeneous_spot_request_passes_the_service_model(stubbed):
    req = _submitted(stubbed, _spot())
    assert req["ResourceConfig"]["InstanceType"] == "ml.c5.18xlarge"
    assert req["ResourceConfig"]["InstanceCount"] == 3
    assert "InstanceGroups" not in req["ResourceConfig"]
    assert req["EnableManagedSpotTraining"] is True
    assert req["StoppingCondition"] == {
        "MaxRuntimeInSeconds": 4 * 3600,
        "MaxWaitTimeInSeconds": 8 * 3600,
    }
    assert req["CheckpointConfig"] == {
        "S3Uri": "s3://rlsweep-bucket/checkpoints/sweep-1",
        "LocalPath": CHECKPOINT_DIR,
    }
    assert req["RoleArn"] == ROLE
    assert req["AlgorithmSpecification"]["TrainingInputMode"] == "File"


def test_heterogeneous_request_passes_the_service_model(stubbed):
    job = _hetero()
    req = _submitted(stubbed, job)
    assert req["ResourceConfig"]["InstanceGroups"] == [
        {"InstanceGroupName": "learner", "InstanceType": "ml.g5.2xlarge", "InstanceCount": 1},
        {"InstanceGroupName": "rollout", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
    ]
    assert "InstanceType" not in req["ResourceConfig"] and job.host_count == 3
    # Every host agrees on the head: the first group's, named in the hyperparameters.
    assert json.loads(req["HyperParameters"]["head_group"]) == "learner"


def test_script_mode_hyperparameters_and_code_channel():
    req = create_training_job_request(_spot())
    hp = {k: json.loads(v) for k, v in req["HyperParameters"].items()}
    assert all(isinstance(v, str) for v in req["HyperParameters"].values())
    assert hp["sagemaker_program"] == ENTRY_PROGRAM and (ROOT / ENTRY_PROGRAM).is_file()
    assert hp["sagemaker_submit_directory"] == "/opt/ml/input/data/code/sourcedir.tar.gz"
    assert hp["spec"] == "search_spaces/ppo_lr.yaml"
    assert hp["time_limit"] == 4 * 3600 - STOP_BEFORE_MAX_RUN_S  # the sweep stops itself first
    (channel,) = req["InputDataConfig"]
    assert channel["ChannelName"] == "code"
    assert (
        channel["DataSource"]["S3DataSource"]["S3Uri"]
        == "s3://rlsweep-bucket/code/sourcedir.tar.gz"
    )
    # Without a source tarball the image carries the code: no channel, no submit directory.
    req = create_training_job_request(_job(source_s3_uri=None))
    assert "InputDataConfig" not in req
    assert "sagemaker_submit_directory" not in req["HyperParameters"]
    assert req["EnableManagedSpotTraining"] is False
    assert "MaxWaitTimeInSeconds" not in req["StoppingCondition"]


def test_the_stubber_really_validates():
    """A broken request (InstanceCount a string) is refused by the stubbed client: the checks
    above are not vacuous."""
    import boto3
    from botocore.exceptions import ParamValidationError
    from botocore.stub import Stubber

    client = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    broken = create_training_job_request(_spot())
    broken["ResourceConfig"]["InstanceCount"] = "3"
    with Stubber(client) as stubber:
        stubber.add_response("create_training_job", {"TrainingJobArn": ARN}, broken)
        with pytest.raises(ParamValidationError, match="InstanceCount"):
            client.create_training_job(**broken)


def test_model_checks_catch_what_botocore_lets_through():
    """botocore validates types, not enums or patterns: a mistyped instance type is caught."""
    with pytest.raises(ValueError, match="did you mean 'ml.c5.18xlarge'"):
        create_training_job_request(_job(instance_type="ml.c5.18xlarg"))


# --- validation at construction -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"use_spot": True, "max_run_s": 7200, "max_wait_s": 3600}, r"max_wait_s.*>= max_run_s"),
        ({"use_spot": True, "max_wait_s": None}, "max_wait_s"),
        ({"max_run_s": 300}, r"max_run_s.*>= 360 \(the sweep stops itself 300 s before it\)"),
        ({"max_wait_s": 3600}, "max_wait_s.*unless use_spot"),
        ({"checkpoint_s3_uri": "rlsweep-bucket/checkpoints"}, "checkpoint_s3_uri"),
        ({"output_s3_uri": "https://example.com/out"}, "output_s3_uri"),
        ({"source_s3_uri": "s3://rlsweep-bucket/code/src.zip"}, "source_s3_uri"),
        ({"role_arn": "rlsweep-sagemaker"}, "role_arn"),
        ({"job_name": "bad_name"}, "job_name"),
        ({"instance_count": 0}, "instance_count"),
        ({"instance_type": "c5.18xlarge"}, "instance_type"),
        ({"spec_path": "/abs/spec.yaml"}, "spec_path"),
        ({"spec_path": "../spec.yaml"}, "spec_path"),
        ({"environment": {"AWS_SECRET_ACCESS_KEY": "x"}}, "environment.*no secrets"),
        ({"environment": {"AWS_ACCESS_KEY_ID": "x"}}, "no secrets"),
        ({"environment": {"WANDB_API_KEY": "x"}}, "no secrets"),
        ({"environment": {"HF_TOKEN": "x"}}, "no secrets"),
        ({"environment": {"MY_SECRET_THING": "x"}}, "no secrets"),
        ({"environment": {"DB_PASSWORD": "x"}}, "no secrets"),
        ({"environment": {"SOME_ID": "AKIAIOSFODNN7EXAMPLE"}}, "AWS key id"),
        ({"environment": {"BAD-NAME": "x"}}, "environment"),
        ({"tags": {"owner": "AKIAIOSFODNN7EXAMPLE"}}, "tags"),
        ({"storage": "relative/dir"}, "storage"),
        ({"storage": None}, r"storage: got 'None: the checkpoint dir'; allowed: an s3:// URI: "),
        ({"storage": "/opt/ml/checkpoints"}, "the job runs trials on 3 hosts"),
        ({"region": "us east"}, "region"),
    ],
)
def test_bad_jobs_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        _job(**kw)


@pytest.mark.parametrize(
    ("groups", "match"),
    [
        ([("a", "ml.g5.2xlarge", 1), ("a", "ml.c5.xlarge", 1)], "distinct group names"),
        ([("a", "ml.g5.2xlarge", 0)], "counts >= 1"),
        ([("a", "g5.2xlarge", 1)], "instance types"),
        ([(f"g{i}", "ml.c5.xlarge", 1) for i in range(6)], "at most 5"),
    ],
)
def test_bad_instance_groups_are_refused(groups, match):
    with pytest.raises(ValueError, match=match):
        _job(instance_type=None, instance_count=1, instance_groups=groups)
    with pytest.raises(ValueError, match="one or the other"):
        _job(instance_groups=[("a", "ml.c5.xlarge", 1)])  # instance_type set too


def test_harmless_environment_is_kept():
    req = create_training_job_request(_job(environment={"RAY_DEDUP_LOGS": "0"}, tags={"p": "x"}))
    assert req["Environment"] == {"RAY_DEDUP_LOGS": "0"}
    assert req["Tags"] == [{"Key": "p", "Value": "x"}]


# --- no credentials -----------------------------------------------------------------------------
def test_no_credentials_in_requests(monkeypatch):
    for key, value in FAKE_SECRETS.items():
        monkeypatch.setenv(key, value)
    for job in (_spot(environment={"RAY_DEDUP_LOGS": "0"}), _hetero()):
        text = json.dumps(create_training_job_request(job))
        assert not [v for v in FAKE_SECRETS.values() if v in text]
        assert "aws_secret_access_key" not in text.lower()
        assert ROLE in text  # the role, by reference only


def test_cli_prints_the_request(tmp_path, capsys, monkeypatch):
    from rlsweep.cli import main

    for key, value in FAKE_SECRETS.items():
        monkeypatch.setenv(key, value)
    spec = tmp_path / "specs" / "sm.yaml"
    spec.parent.mkdir()
    spec.write_text("name: sm\ngames: [coinrun]\nseeds: [0]\nbudget: 16384\n")
    args = ["sagemaker", str(spec), "--source-root", str(tmp_path), "--job-name", "sm-1"]
    args += ["--role-arn", ROLE, "--image-uri", "img:1", "--checkpoint-s3", "s3://bkt/ckpt"]
    args += ["--output-s3", "s3://bkt/out", "--source-s3", "s3://bkt/src/sourcedir.tar.gz"]
    args += ["--instance-group", "learner:ml.g5.xlarge:1"]
    args += ["--instance-group", "rollout:ml.c5.4xlarge:2", "--spot", "--max-run", "3600"]
    args += ["--max-wait", "7200", "--env", "RAY_DEDUP_LOGS=0", "--tag", "project=rlsweep"]
    assert main(args) == 0
    out = capsys.readouterr().out
    req = json.loads(out)
    assert json.loads(req["HyperParameters"]["spec"]) == "specs/sm.yaml"
    assert [g["InstanceCount"] for g in req["ResourceConfig"]["InstanceGroups"]] == [1, 2]
    assert not [v for v in FAKE_SECRETS.values() if v in out]
    bad = [a if a != "7200" else "60" for a in args]  # max wait < max run
    assert main(bad) == 2
    assert "max_wait_s" in capsys.readouterr().err
    assert main([*args, "--env", "AWS_SECRET_ACCESS_KEY=x"]) == 2
    assert "no secrets" in capsys.readouterr().err
    # The one loader: the job's spec is checked as `rlsweep validate` checks it, smoke: included.
    spec.write_text(spec.read_text() + "smoke: {params: {minibatch_size: 1000000000}}\n")
    assert main(args) == 2
    assert f"{spec}: smoke.params.minibatch_size: got 1000000000" in capsys.readouterr().err


def test_a_job_whose_trials_run_on_one_host_may_store_them_there():
    """One host (or a heterogeneous job's one learner host beside rollout hosts): every trial
    checkpoints where it runs, so the checkpoint dir, synced to S3 by SageMaker, serves."""
    assert _job(instance_count=1, storage=None).storage is None
    assert _hetero(storage=None).storage is None
    with pytest.raises(ValueError, match="the job runs trials on 2 hosts"):
        groups = [("learner", "ml.g5.2xlarge", 2), ("rollout", "ml.c5.18xlarge", 2)]
        _spot(instance_type=None, instance_count=1, instance_groups=groups, storage=None)
