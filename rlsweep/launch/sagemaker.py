"""A sweep as one SageMaker training job: `SageMakerJob` -> the `CreateTrainingJob` request.

One job is one Ray cluster across the job's hosts; `sagemaker_entry` (the job's script, run on
every host) bootstraps it and runs the sweep on the head.

- Homogeneous: `instance_type` x `instance_count`.
- Heterogeneous: `instance_groups`, e.g. a GPU learner group plus CPU rollout groups. The first
  group is the head's (the learner's); its name goes to the entry script as `head_group`, so
  every host agrees on the head whatever order SageMaker lists the groups in.
- Managed spot: `use_spot` with `max_wait_s >= max_run_s`. SageMaker uploads the checkpoint dir
  (/opt/ml/checkpoints) to `checkpoint_s3_uri` while the job runs and puts it back when an
  interrupted job restarts, so the sweep is stored there.
- Code: `source_s3_uri` is a .tar.gz of this source tree (with the spec); it reaches the job as
  the `code` input channel and SageMaker's script mode (`sagemaker_program`,
  `sagemaker_submit_directory`) runs the entry script from it. Without it the image must carry
  the tree in /opt/ml/code (the repository's Dockerfile leaves it empty, for the tarball).
- Image: the repository's Dockerfile, pushed to ECR (`image_uri`).

Security: the job's AWS access is the IAM role named by `role_arn`; the request carries no keys,
and environment variables that look like secrets are refused (SageMaker shows a job's
environment and hyperparameters to anyone who can describe it).

Requests are checked against botocore's service model before they leave: the types and required
members (botocore's own validator) and also the enums, patterns and bounds it does not check
(a mistyped instance type fails here, not after an upload).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rlsweep.errors import LaunchError
from rlsweep.launch import AWS_REGION, field_default
from rlsweep.spec.validators import did_you_mean, is_int

CHECKPOINT_DIR = "/opt/ml/checkpoints"
"""Where the job's sweep is stored: SageMaker syncs it with `checkpoint_s3_uri`."""
MODEL_DIR = "/opt/ml/model"
"""The entry script's summary goes here; SageMaker uploads it as model.tar.gz."""
STOP_BEFORE_MAX_RUN_S = 300
"""The job's sweep stops itself (its time limit, `--time-limit`'s) this long before max_run_s:
room for Ray's stop, the summary and SageMaker's last sync of the checkpoint dir. Stopped by
max_run_s instead, the trials would lose what they ran since their last checkpoint."""
CODE_CHANNEL = "code"
CODE_CHANNEL_DIR = f"/opt/ml/input/data/{CODE_CHANNEL}"
ENTRY_PROGRAM = "rlsweep/launch/sagemaker_entry.py"
"""The entry script, relative to the source tree's root."""

_JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
_ROLE_ARN = re.compile(r"arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+")
_S3_URI = re.compile(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?")
_INSTANCE_TYPE = re.compile(r"ml\.[a-z0-9\-]+\.[a-z0-9]+")
_ENV_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Names of variables that hold credentials (AWS_SECRET_ACCESS_KEY, AWS_ACCESS_KEY_ID,
# AWS_SESSION_TOKEN, WANDB_API_KEY, HF_TOKEN, DB_PASSWORD, ...).
_SECRET_NAME = re.compile(
    r"SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY", re.IGNORECASE
)
# An AWS access key id as a value, whatever its name.
_AWS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b")


class InstanceGroup(NamedTuple):
    """One instance group of a heterogeneous job."""

    name: str
    instance_type: str
    count: int


@dataclass(frozen=True, kw_only=True)
class SageMakerJob:
    """A sweep as a SageMaker training job. Validated at construction (ValueError)."""

    job_name: str
    """Training job name: unique in the account and region, letters, digits and '-'."""
    role_arn: str
    """ARN of the IAM role the job runs as; its policy is the job's only AWS access."""
    image_uri: str
    """Training image (ECR): the repository's Dockerfile built and pushed (README: "A container
    image"). It has rlsweep's dependencies, the system libraries Procgen needs and SageMaker's
    training toolkit, whose `train` runs `sagemaker_program`; its /opt/ml/code is empty, since
    the toolkit extracts the source tree there only into an empty dir."""
    instance_type: str | None = None
    """Homogeneous job: the instance type of every host, e.g. ml.c5.18xlarge."""
    instance_count: int = 1
    """Homogeneous job: the number of hosts."""
    instance_groups: tuple[InstanceGroup, ...] = ()
    """Heterogeneous job instead of instance_type/count: (name, instance_type, count) groups.
    The first is the head's group (the learner, e.g. GPU); the others join (e.g. CPU rollout)."""
    volume_size_gb: int = 50
    """EBS volume per host: the image, the code, Ray's spill and the checkpoint dir."""
    max_run_s: int = 24 * 3600
    """Compute time limit (SageMaker stops the job after it). The sweep stops itself
    STOP_BEFORE_MAX_RUN_S earlier, its trials checkpointed; submitted again under a new
    job_name with the same checkpoint S3 URI, it resumes from there."""
    use_spot: bool = False
    """Managed spot training: cheaper, may be interrupted and restarted from the checkpoints."""
    max_wait_s: int | None = None
    """Spot only, required there: limit on compute plus waiting for spot capacity, >= max_run_s."""
    checkpoint_s3_uri: str
    """s3:// prefix SageMaker syncs the checkpoint dir (the sweep's storage) with."""
    output_s3_uri: str
    """s3:// prefix for the job's output (model.tar.gz: the entry script's summary)."""
    source_s3_uri: str | None = None
    """s3://.../*.tar.gz of this source tree, spec included (None: the image has /opt/ml/code)."""
    spec_path: str
    """The sweep spec, relative to the source tree's root."""
    storage: str | None = None
    """Sweep storage override (default: the checkpoint dir). Ray requires storage every node can
    reach once trials checkpoint on other hosts than the head: then give an s3:// URI here."""
    region: str | None = None
    """AWS region of the job (`submit` creates its client there); None: boto3's default."""
    environment: dict[str, str] = field(default_factory=dict)
    """Environment of the job's containers. Never secrets: credential-like names are refused."""
    tags: dict[str, str] = field(default_factory=dict)
    """Tags of the training job (cost allocation)."""

    def __post_init__(self) -> None:
        groups = tuple(InstanceGroup(*g) for g in self.instance_groups)
        object.__setattr__(self, "instance_groups", groups)
        object.__setattr__(self, "environment", dict(self.environment))
        object.__setattr__(self, "tags", dict(self.tags))
        self._check()

    @property
    def heterogeneous(self) -> bool:
        return bool(self.instance_groups)

    @property
    def head_group(self) -> str | None:
        """The instance group whose first host is the Ray head (heterogeneous jobs)."""
        return self.instance_groups[0].name if self.instance_groups else None

    @property
    def host_count(self) -> int:
        if self.instance_groups:
            return sum(g.count for g in self.instance_groups)
        return self.instance_count

    def _check(self) -> None:
        def fail(name: str, allowed: str, value: Any = None) -> None:
            value = getattr(self, name) if value is None else value
            raise LaunchError(f"SageMakerJob.{name}: got {value!r}; allowed: {allowed}")

        if not isinstance(self.job_name, str) or not _JOB_NAME.fullmatch(self.job_name):
            fail("job_name", "1-63 letters, digits and '-', starting with a letter or digit")
        if not isinstance(self.role_arn, str) or not _ROLE_ARN.fullmatch(self.role_arn):
            fail("role_arn", "an IAM role ARN, arn:aws:iam::<account>:role/<name>")
        if not isinstance(self.image_uri, str) or not 0 < len(self.image_uri) <= 255:
            fail("image_uri", "an image URI of 1-255 characters")
        self._check_instances(fail)
        if not is_int(self.volume_size_gb, minimum=1):
            fail("volume_size_gb", "an integer >= 1")
        if not is_int(self.max_run_s, minimum=STOP_BEFORE_MAX_RUN_S + 60):
            fail(
                "max_run_s",
                f"an integer >= {STOP_BEFORE_MAX_RUN_S + 60} (the sweep stops itself "
                f"{STOP_BEFORE_MAX_RUN_S} s before it)",
            )
        if self.use_spot:
            if not is_int(self.max_wait_s, minimum=1) or self.max_wait_s < self.max_run_s:
                fail("max_wait_s", f"with use_spot, an integer >= max_run_s ({self.max_run_s})")
        elif self.max_wait_s is not None:
            fail("max_wait_s", "None unless use_spot (SageMaker only waits for spot capacity)")
        for name in ("checkpoint_s3_uri", "output_s3_uri"):
            if not _is_s3(getattr(self, name)):
                fail(name, "an s3://bucket/prefix URI")
        if self.source_s3_uri is not None and not (
            _is_s3(self.source_s3_uri) and self.source_s3_uri.endswith(".tar.gz")
        ):
            fail("source_s3_uri", "an s3://bucket/key.tar.gz URI, or None")
        if (
            not isinstance(self.spec_path, str)
            or not self.spec_path
            or os.path.isabs(self.spec_path)
            or ".." in self.spec_path.split("/")
        ):
            fail("spec_path", "a path relative to the source tree's root, inside it")
        if self.storage is not None and not (
            _is_s3(self.storage) or (isinstance(self.storage, str) and os.path.isabs(self.storage))
        ):
            fail("storage", "an s3:// URI or an absolute path in the job, or None")
        hosts = self.instance_groups[0].count if self.instance_groups else self.instance_count
        if is_int(hosts, minimum=2) and not _is_s3(self.storage):
            # Trials run on every host of the head's group (the learner's), and Ray checkpoints
            # a trial on another host than the head only to storage every host reaches.
            fail(
                "storage",
                f"an s3:// URI: the job runs trials on {hosts} hosts, and Ray checkpoints a "
                "trial on a host other than the head only to storage every host reaches (the "
                "checkpoint dir is each host's own)",
                self.storage or "None: the checkpoint dir",
            )
        if self.region is not None and not AWS_REGION.fullmatch(str(self.region)):
            fail("region", "an AWS region such as us-east-1, or None")
        self._check_environment(fail)
        for key, value in self.tags.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key:
                fail("tags", "a mapping of non-empty strings to strings")
            if _AWS_KEY_ID.search(value):
                fail("tags", "no credentials (a value looks like an AWS access key id)", key)

    def _check_instances(self, fail) -> None:
        if self.instance_groups:
            if self.instance_type is not None or self.instance_count != 1:
                fail("instance_type", "None with instance_groups (one or the other)")
            if len(self.instance_groups) > 5:
                fail("instance_groups", "at most 5 groups (SageMaker's limit)")
            names = [g.name for g in self.instance_groups]
            if len(set(names)) != len(names):
                fail("instance_groups", "distinct group names", names)
            for g in self.instance_groups:
                if not isinstance(g.name, str) or not 0 < len(g.name) <= 64:
                    fail("instance_groups", "group names of 1-64 characters", g)
                if not isinstance(g.instance_type, str) or not _INSTANCE_TYPE.fullmatch(
                    g.instance_type
                ):
                    fail("instance_groups", "instance types such as ml.c5.18xlarge", g)
                if not is_int(g.count, minimum=1):
                    fail("instance_groups", "counts >= 1", g)
            return
        if not isinstance(self.instance_type, str) or not _INSTANCE_TYPE.fullmatch(
            self.instance_type
        ):
            fail("instance_type", "an instance type such as ml.c5.18xlarge (or instance_groups)")
        if not is_int(self.instance_count, minimum=1):
            fail("instance_count", "an integer >= 1")

    def _check_environment(self, fail) -> None:
        for key, value in self.environment.items():
            if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
                fail("environment", "variable names of letters, digits and '_'", key)
            if not isinstance(value, str):
                fail("environment", "string values", value)
            if _SECRET_NAME.search(key):
                fail(
                    "environment",
                    "no secrets: the job's environment is readable by anyone who can describe "
                    "the job. Give the role access instead (or Secrets Manager)",
                    key,
                )
            if _AWS_KEY_ID.search(value):
                fail("environment", "no credentials (the value looks like an AWS key id)", key)


def _is_s3(uri: Any) -> bool:
    return isinstance(uri, str) and bool(_S3_URI.fullmatch(uri))


# --- the request --------------------------------------------------------------------------------
def hyperparameters(job: SageMakerJob) -> dict[str, str]:
    """Script-mode hyperparameters. Values are JSON-encoded strings, as SageMaker's Python SDK
    writes them; the training toolkit decodes them and passes the ones without the `sagemaker_`
    prefix to the entry script as `--name value`."""
    hp: dict[str, Any] = {
        "sagemaker_program": ENTRY_PROGRAM,
        "sagemaker_job_name": job.job_name,
        "spec": job.spec_path,
        "time_limit": job.max_run_s - STOP_BEFORE_MAX_RUN_S,
    }
    if job.source_s3_uri:
        hp["sagemaker_submit_directory"] = (
            f"{CODE_CHANNEL_DIR}/{job.source_s3_uri.rsplit('/', 1)[-1]}"
        )
    if job.region:
        hp["sagemaker_region"] = job.region
    if job.head_group:
        hp["head_group"] = job.head_group
    if job.storage:
        hp["storage"] = job.storage
    return {k: json.dumps(v) for k, v in hp.items()}


def resource_config(job: SageMakerJob) -> dict[str, Any]:
    if job.instance_groups:
        groups = [
            {"InstanceGroupName": g.name, "InstanceType": g.instance_type, "InstanceCount": g.count}
            for g in job.instance_groups
        ]
        return {"InstanceGroups": groups, "VolumeSizeInGB": job.volume_size_gb}
    return {
        "InstanceType": job.instance_type,
        "InstanceCount": job.instance_count,
        "VolumeSizeInGB": job.volume_size_gb,
    }


def create_training_job_request(job: SageMakerJob) -> dict[str, Any]:
    """Exactly the keyword arguments of boto3's `sagemaker.create_training_job(**request)`,
    checked against botocore's service model (ValueError / ParamValidationError)."""
    stopping = {"MaxRuntimeInSeconds": job.max_run_s}
    if job.use_spot:
        stopping["MaxWaitTimeInSeconds"] = job.max_wait_s
    request: dict[str, Any] = {
        "TrainingJobName": job.job_name,
        "RoleArn": job.role_arn,
        "AlgorithmSpecification": {"TrainingImage": job.image_uri, "TrainingInputMode": "File"},
        "HyperParameters": hyperparameters(job),
        "ResourceConfig": resource_config(job),
        "StoppingCondition": stopping,
        "EnableManagedSpotTraining": job.use_spot,
        "CheckpointConfig": {"S3Uri": job.checkpoint_s3_uri, "LocalPath": CHECKPOINT_DIR},
        "OutputDataConfig": {"S3OutputPath": job.output_s3_uri},
    }
    if job.source_s3_uri:
        s3 = {
            "S3DataType": "S3Prefix",
            "S3Uri": job.source_s3_uri,
            "S3DataDistributionType": "FullyReplicated",  # every host runs the entry script
        }
        request["InputDataConfig"] = [
            {"ChannelName": CODE_CHANNEL, "DataSource": {"S3DataSource": s3}, "InputMode": "File"}
        ]
    if job.environment:
        request["Environment"] = dict(job.environment)
    if job.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in job.tags.items()]
    check_request(request)
    return request


def submit(job: SageMakerJob, client=None) -> str:
    """Create the training job; returns its ARN. `client`: a boto3 SageMaker client (default:
    one in `job.region`, credentials from boto3's default chain, never from the request)."""
    request = create_training_job_request(job)
    if client is None:
        import boto3

        client = boto3.client("sagemaker", region_name=job.region)
    return client.create_training_job(**request)["TrainingJobArn"]


# --- checks against the service model -----------------------------------------------------------
@functools.cache
def _input_shape():
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.operation_model("CreateTrainingJob").input_shape


def check_request(request: dict[str, Any]) -> None:
    """botocore's validator (types, required members), then `model_problems` (ValueError)."""
    from botocore.validate import validate_parameters

    validate_parameters(request, _input_shape())
    if problems := model_problems(request):
        raise LaunchError("CreateTrainingJob request: " + "; ".join(problems))


def model_problems(request: dict[str, Any]) -> list[str]:
    """What the service would reject that botocore's validator lets through: enum values,
    patterns, lengths and bounds. (Patterns Python's `re` cannot compile are skipped.)"""
    problems: list[str] = []
    _walk(request, _input_shape(), "", problems)
    return problems


def _walk(value: Any, shape, path: str, out: list[str]) -> None:
    kind, meta = shape.type_name, shape.metadata
    if kind == "structure" and isinstance(value, dict):
        for key, v in value.items():
            if key in shape.members:
                _walk(v, shape.members[key], f"{path}.{key}" if path else key, out)
    elif kind == "list" and isinstance(value, list):
        _bounds(len(value), meta, path, "items", out)
        for i, v in enumerate(value):
            _walk(v, shape.member, f"{path}[{i}]", out)
    elif kind == "map" and isinstance(value, dict):
        _bounds(len(value), meta, path, "entries", out)
        for k, v in value.items():
            _walk(k, shape.key, f"{path} key {k!r}", out)
            _walk(v, shape.value, f"{path}[{k!r}]", out)
    elif kind == "string" and isinstance(value, str):
        if shape.enum and value not in shape.enum:
            import botocore

            out.append(
                f"{path}: {value!r} is not one of botocore {botocore.__version__}'s "
                f"{len(shape.enum)} values{did_you_mean(value, shape.enum)}"
            )
        _bounds(len(value), meta, path, "characters", out)
        if (pattern := _compiled(meta.get("pattern"))) and not pattern.fullmatch(value):
            out.append(f"{path}: {value!r} does not match {meta['pattern']!r}")
    elif kind in ("integer", "long") and isinstance(value, int):
        _bounds(value, meta, path, "", out)


def _bounds(n: int, meta: dict[str, Any], path: str, unit: str, out: list[str]) -> None:
    lo, hi = meta.get("min"), meta.get("max")
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        out.append(f"{path}: {n} {unit} is outside [{lo}, {hi}]".replace("  ", " "))


@functools.cache
def _compiled(pattern: str | None) -> re.Pattern | None:
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error:  # Java classes such as \p{L}
        return None


# --- command line (`rlsweep sagemaker`) ---------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    def job_int(flag: str, field: str, help: str) -> None:
        """An integer flag whose default is SageMakerJob's (one definition of each default)."""
        p.add_argument(flag, type=int, default=field_default(SageMakerJob, field), help=help)

    p.add_argument("spec", help="sweep spec, inside the source tree uploaded as --source-s3")
    p.add_argument("--job-name", required=True)
    p.add_argument("--role-arn", required=True, help="IAM role the job runs as (by ARN only)")
    p.add_argument(
        "--image-uri", required=True, help="training image: the Dockerfile's, pushed to ECR"
    )
    hosts = p.add_mutually_exclusive_group(required=True)
    hosts.add_argument("--instance-type", help="homogeneous job: every host's type")
    hosts.add_argument(
        "--instance-group",
        action="append",
        metavar="NAME:TYPE:COUNT",
        help="heterogeneous job, repeat per group; the first is the head's (the learner's)",
    )
    job_int("--instance-count", "instance_count", "homogeneous job: hosts (%(default)s)")
    p.add_argument("--checkpoint-s3", required=True, help="s3:// prefix of the sweep's storage")
    p.add_argument("--output-s3", required=True, help="s3:// prefix of the job's output")
    p.add_argument("--source-s3", help="s3://.../sourcedir.tar.gz of this source tree")
    p.add_argument("--spot", action="store_true", help="managed spot training")
    job_int("--max-run", "max_run_s", "seconds (default: %(default)s)")
    p.add_argument("--max-wait", type=int, help="spot: seconds of run plus wait, >= --max-run")
    job_int("--volume-gb", "volume_size_gb", "%(default)s")
    p.add_argument("--storage", help="sweep storage in the job (default: the checkpoint dir)")
    p.add_argument("--region")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--source-root", default=".", help="the uploaded tree's root (default: .)")
    p.add_argument(
        "--submit", action="store_true", help="create the job (default: print the request)"
    )


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise LaunchError(f"--{what} {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def _group(text: str) -> InstanceGroup:
    parts = text.split(":")
    if len(parts) != 3 or not parts[2].isdigit():
        raise LaunchError(f"--instance-group {text!r}: expected NAME:TYPE:COUNT")
    return InstanceGroup(parts[0], parts[1], int(parts[2]))


def job_from_args(args: argparse.Namespace) -> SageMakerJob:
    from rlsweep.spec.spec import SweepSpec

    SweepSpec.from_yaml(args.spec)  # the job would fail on it: fail here instead
    spec_path = os.path.relpath(os.path.abspath(args.spec), os.path.abspath(args.source_root))
    if spec_path.split(os.sep)[0] == "..":
        raise LaunchError(f"{args.spec}: not inside --source-root {args.source_root}")
    return SageMakerJob(
        job_name=args.job_name,
        role_arn=args.role_arn,
        image_uri=args.image_uri,
        instance_type=args.instance_type,
        instance_count=args.instance_count,
        instance_groups=tuple(_group(g) for g in args.instance_group or ()),
        volume_size_gb=args.volume_gb,
        max_run_s=args.max_run,
        use_spot=args.spot,
        max_wait_s=args.max_wait,
        checkpoint_s3_uri=args.checkpoint_s3,
        output_s3_uri=args.output_s3,
        source_s3_uri=args.source_s3,
        spec_path=spec_path.replace(os.sep, "/"),
        storage=args.storage,
        region=args.region,
        environment=_pairs(args.env, "env"),
        tags=_pairs(args.tag, "tag"),
    )


def main(args: argparse.Namespace) -> int:
    """Print the request (a dry run), or with --submit create the job and print its ARN.
    Bad input raises SpecError (LaunchError): `rlsweep.cli.main` reports it, exit code 2."""
    job = job_from_args(args)
    request = create_training_job_request(job)
    if args.submit:
        print(submit(job))
    else:
        print(json.dumps(request, indent=2))
    return 0
