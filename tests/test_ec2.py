"""`rlsweep cluster ec2`: every generated cluster config passes Ray's own validator, offline."""

import copy
import json
import re
import shlex
import socket

import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from rlsweep._ray_compat import SYSTEM_CONFIG
from rlsweep.cli import main
from rlsweep.launch.ec2 import Ec2Cluster, WorkerType, cluster_config, ray_commands
from rlsweep.launch.ec2 import write_cluster_yaml as write

AMI = "ami-0123456789abcdef0"
PROFILE = "arn:aws:iam::123456789012:instance-profile/rlsweep-head"
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/rlsweep:0.1.0"
FAKE = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKE0EC20TEST0ID",
    "AWS_SECRET_ACCESS_KEY": "fakeEc2SecretKey/0123456789abcdefghijklmn",
    "WANDB_API_KEY": "fakewandbkey0123456789abcdef0123456789ab",
}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Nothing here may reach AWS: a connection attempt fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def cluster(**kw) -> Ec2Cluster:
    return Ec2Cluster(
        **{"cluster_name": "sweep", "image_id": AMI, "install": "rlsweep==0.1.0", **kw}
    )


CLUSTERS = {
    "default": cluster(),
    "spot": cluster(workers=[WorkerType("cpu", "c6i.8xlarge", 0, 10, spot=True)]),
    "several types": cluster(
        workers=[
            WorkerType("small", "c6i.2xlarge", 1, 4),
            WorkerType("big", "c7i.24xlarge", 0, 2, spot=True, resources={"CPU": 90}),
            WorkerType("gpu", "g4dn.xlarge", 0, 2),
        ],
        max_workers=6,
        iam_instance_profile=PROFILE,
        worker_iam_instance_profile="rlsweep-worker",
        key_name="me",
        ssh_private_key="/home/me/.ssh/me.pem",
        security_group_ids=["sg-0123456789abcdef0"],
    ),
    "docker": cluster(
        install=None,
        docker_image=IMAGE,
        workers=[WorkerType("cpu", "c6i.8xlarge", 0, 4), WorkerType("gpu", "g5.xlarge", 0, 2)],
    ),
    "region and image": cluster(
        region="eu-west-2",
        availability_zone="eu-west-2a,eu-west-2b",
        image_id="ami-0fedcba9876543210",
        head_instance_type="g4dn.2xlarge",
        head_resources={"CPU": 6, "GPU": 1},
    ),
}


def validate(config: dict) -> None:
    """Ray's validator on the config as written, and again after `prepare_config` (the merge
    with Ray's AWS defaults that `ray up` does first; local, no AWS call)."""
    validate_config(copy.deepcopy(config))
    validate_config(prepare_config(copy.deepcopy(config)))


@pytest.mark.parametrize("name", list(CLUSTERS))
def test_every_config_passes_rays_validator(name):
    validate(cluster_config(CLUSTERS[name]))


def test_the_validator_is_real():
    good = cluster_config(cluster())
    validate(good)
    no_provider = {k: v for k, v in good.items() if k != "provider"}
    with pytest.raises(jsonschema.ValidationError, match="provider"):
        validate_config(no_provider)
    with pytest.raises(jsonschema.ValidationError):
        validate_config({**good, "max_workers": "ten"})
    with pytest.raises(ValueError, match="head_node_type"):
        validate_config({**good, "head_node_type": "nonexistent"})


def test_config_contents():
    c = cluster_config(CLUSTERS["several types"])
    assert c["provider"] == {"type": "aws", "region": "us-east-1", "cache_stopped_nodes": False}
    nodes = c["available_node_types"]
    assert c["head_node_type"] == "head" and nodes["head"]["max_workers"] == 0
    head = nodes["head"]["node_config"]
    assert head == {
        "InstanceType": "g5.xlarge",
        "ImageId": AMI,
        "IamInstanceProfile": {"Arn": PROFILE},
        "KeyName": "me",
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
    }
    assert nodes["small"]["min_workers"] == 1 and nodes["small"]["max_workers"] == 4
    assert "InstanceMarketOptions" not in nodes["small"]["node_config"]
    assert nodes["big"]["node_config"]["InstanceMarketOptions"] == {"MarketType": "spot"}
    assert nodes["big"]["resources"] == {"CPU": 90}
    assert nodes["small"]["node_config"]["IamInstanceProfile"] == {"Name": "rlsweep-worker"}
    assert c["auth"] == {"ssh_user": "ubuntu", "ssh_private_key": "/home/me/.ssh/me.pem"}
    assert c["max_workers"] == 6
    # torch pinned before rlsweep: the CUDA build on the GPU head and GPU workers, CPU elsewhere.
    head_setup = c["setup_commands"] + c["head_setup_commands"]
    assert [i for i, cmd in enumerate(head_setup) if "install torch==" in cmd] == [4]
    assert head_setup[5].endswith("pip install rlsweep==0.1.0")
    assert "whl/cpu" not in head_setup[4]
    assert "--index-url https://download.pytorch.org/whl/cpu" in c["worker_setup_commands"][0]
    assert "whl/cpu" not in " ".join(nodes["gpu"]["worker_setup_commands"])
    assert "worker_setup_commands" not in nodes["small"]


def test_a_docker_image_runs_every_node_in_it():
    """Ray's docker section with the image built from the Dockerfile: no venv and no install
    on any node (GPU workers included), `ray` from the image's PATH, an ECR login on the host
    with the instance profile (the image's registry and region, not the cluster's)."""
    c = cluster_config(CLUSTERS["docker"])
    assert c["docker"] == {
        "image": IMAGE,
        "container_name": "rlsweep",
        "pull_before_run": True,
        "run_options": ["--ulimit nofile=65536:65536"],
    }
    assert c["initialization_commands"] == [
        "aws ecr get-login-password --region us-west-2 | docker login --username AWS "
        "--password-stdin 123456789012.dkr.ecr.us-west-2.amazonaws.com"
    ]
    assert c["setup_commands"] == [
        "grep -qxF 'export AWS_DEFAULT_REGION=us-east-1' ~/.bashrc || "
        "echo 'export AWS_DEFAULT_REGION=us-east-1' >> ~/.bashrc"
    ]
    assert c["head_setup_commands"] == c["worker_setup_commands"] == []
    assert "worker_setup_commands" not in c["available_node_types"]["gpu"]
    assert c["file_mounts"] == {}
    assert "venv" not in yaml.safe_dump(c) and "pip install" not in yaml.safe_dump(c)
    starts = c["head_start_ray_commands"] + c["worker_start_ray_commands"]
    assert all(cmd.startswith(("ray stop", "ulimit -n 65536; ray start")) for cmd in starts)
    # An image elsewhere (Docker Hub, a private registry) is pulled without an ECR login.
    hub = cluster_config(cluster(install=None, docker_image="example/rlsweep:0.1.0"))
    assert hub["docker"]["image"] == "example/rlsweep:0.1.0"
    assert hub["initialization_commands"] == []


def test_cli_takes_a_docker_image_or_an_install(tmp_path, capsys):
    out = tmp_path / "cluster.yaml"
    argv = ["cluster", "ec2", str(out), "--name", "s", "--image", AMI, "--storage", "s3://b/x"]
    assert main([*argv, "--docker-image", IMAGE]) == 0
    cfg = yaml.safe_load(out.read_text())
    validate(cfg)
    assert cfg["docker"]["image"] == IMAGE
    with pytest.raises(SystemExit):  # argparse: one of --install / --docker-image
        main(argv)
    with pytest.raises(SystemExit):
        main([*argv, "--docker-image", IMAGE, "--install", "rlsweep==0.1.0"])
    assert "one of the arguments --install --docker-image is required" in capsys.readouterr().err


def test_dashboard_on_localhost_unless_asked():
    for c in CLUSTERS.values():
        cfg = prepare_config(cluster_config(c))  # Ray's default would say 0.0.0.0
        (start,) = [cmd for cmd in cfg["head_start_ray_commands"] if "ray start" in cmd]
        assert "--dashboard-host=127.0.0.1" in start
        assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in start
        # What the head's shell passes on: rlsweep's RayConfig, as JSON Ray reads.
        (config,) = [a.split("=", 1)[1] for a in shlex.split(start) if "--system-config" in a]
        assert json.loads(config) == SYSTEM_CONFIG
        assert "0.0.0.0" not in yaml.safe_dump(cfg)
        assert any("--address=$RAY_HEAD_IP:6379" in w for w in cfg["worker_start_ray_commands"])
    asked = cluster_config(cluster(dashboard_host="0.0.0.0"))
    assert "--dashboard-host=0.0.0.0" in asked["head_start_ray_commands"][1]


def test_written_yaml_round_trips_and_validates(tmp_path):
    for name, c in CLUSTERS.items():
        path = write(c, tmp_path / f"{name}.yaml", storage="s3://bucket/sweeps")
        loaded = yaml.safe_load(path.read_text())
        assert loaded == cluster_config(c)
        validate(loaded)
        assert path.read_text().startswith("# Ray cluster launcher config")


def test_ray_commands_are_rays_cli_syntax():
    from ray.scripts.scripts import cli

    c = cluster(file_mounts={"~/rlsweep/spec.yaml": "/tmp/spec.yaml"})
    for spec, storage in ((None, None), ("/tmp/spec.yaml", "s3://b/x"), ("other.yaml", None)):
        commands = [cmd for cmd, _ in ray_commands("cluster.yaml", c, spec, storage)]
        assert (
            commands[0] == "ray up -y cluster.yaml" and commands[-1] == "ray down -y cluster.yaml"
        )
        for cmd in commands:
            argv = shlex.split(cmd)
            assert argv[0] == "ray"
            # Click parses (and so checks) the arguments without running the command.
            cli.commands[argv[1]].make_context(argv[1], argv[2:])
        (run,) = [cmd for cmd in commands if cmd.startswith("ray exec")]
        assert "--address auto" in run
        assert ("rsync-up" in " ".join(commands)) == (spec != "/tmp/spec.yaml")
        assert ("--storage s3://b/x" in run) == (storage is not None)


def test_cli_writes_the_yaml(tmp_path, capsys, monkeypatch):
    for key, value in FAKE.items():
        monkeypatch.setenv(key, value)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: s\n")
    out = tmp_path / "c" / "cluster.yaml"
    argv = ["cluster", "ec2", str(out), "--name", "sweep", "--image", AMI]
    argv += ["--install", "git+https://github.com/example/rlsweep@v0.1.0", "--region", "us-west-2"]
    argv += ["--worker", "c6i.8xlarge:0:10", "--worker", "c7i.4xlarge:1:3:spot"]
    argv += ["--iam-profile", "rlsweep-head", "--key-name", "me", "--ssh-key", "/k/me.pem"]
    argv += ["--spec", str(spec), "--storage", "s3://bucket/sweeps"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and f"ray up -y {out}" in printed
    assert "rlsweep run ~/rlsweep/spec.yaml --address auto --storage s3://bucket/sweeps" in printed
    text = out.read_text()
    cfg = yaml.safe_load(text)
    validate(cfg)
    assert cfg["provider"]["region"] == "us-west-2"
    assert set(cfg["available_node_types"]) == {"head", "c6i-8xlarge", "c7i-4xlarge-spot"}
    assert cfg["available_node_types"]["c7i-4xlarge-spot"]["min_workers"] == 1
    assert cfg["file_mounts"] == {"~/rlsweep/spec.yaml": str(spec.resolve())}
    assert "pip install git+https://github.com/example/rlsweep@v0.1.0" in text
    # No credentials: not the environment's, nor anything shaped like them.
    for value in FAKE.values():
        assert value not in text and value not in printed
    for pattern in ("AKIA", "aws_secret_access_key", "aws_access_key_id", "PRIVATE KEY"):
        assert not re.search(pattern, text, re.IGNORECASE), pattern
    assert "wandb" not in text.lower()


def test_local_wheel_is_shipped(tmp_path):
    wheel = tmp_path / "rlsweep-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    cfg = cluster_config(cluster(install=str(wheel)))
    assert cfg["file_mounts"] == {f"~/rlsweep-dist/{wheel.name}": str(wheel)}
    assert cfg["head_setup_commands"][-1].endswith(f"pip install ~/rlsweep-dist/{wheel.name}")
    validate(cfg)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"region": "useast1"}, "region"),
        ({"availability_zone": "us-west-2a"}, "availability_zone"),
        ({"image_id": "ubuntu-22.04"}, "image_id"),
        ({"head_instance_type": "G5 XL"}, "head_instance_type"),
        ({"workers": [WorkerType("a"), WorkerType("a")]}, "distinct"),
        ({"workers": [WorkerType("a", min_workers=3, max_workers=5)], "max_workers": 2}, "min"),
        ({"iam_instance_profile": "arn:aws:iam::1:role/x"}, "iam_instance_profile"),
        ({"key_name": "me"}, "both"),
        ({"key_name": "k", "ssh_private_key": "-----BEGIN RSA PRIVATE KEY-----\nabc"}, "path"),
        ({"install": "git+https://user:tok3n@github.com/x/rlsweep"}, "credentials"),
        ({"install": "git+https://ghp_tok3n@github.com/x/rlsweep"}, "credentials"),
        ({"install": "/nonexistent/rlsweep-0.1.0-py3-none-any.whl"}, "not a file"),
        ({"dashboard_host": "everywhere"}, "dashboard_host"),
        ({"file_mounts": {"~/creds": "~/.aws/credentials"}}, "credentials"),
        ({"security_group_ids": ["default"]}, "security_group_ids"),
        ({"docker_image": IMAGE}, "install: None with docker_image"),
        ({"install": None}, "install: allowed"),
        ({"install": None, "docker_image": "not an image!"}, "docker_image"),
    ],
)
def test_bad_clusters_fail_at_construction(kw, message):
    with pytest.raises(ValueError, match=message):
        cluster(**kw)


def test_bad_worker_types():
    with pytest.raises(ValueError, match="min_workers 3 > max_workers 1"):
        WorkerType("cpu", min_workers=3, max_workers=1)
    with pytest.raises(ValueError, match="head"):
        WorkerType("head")
    with pytest.raises(ValueError, match="integer"):
        WorkerType("cpu", resources={"CPU": 1.5})
    with pytest.raises(ValueError, match="TYPE"):
        WorkerType.parse("c6i.8xlarge:3")
    assert WorkerType.parse("c6i.8xlarge:1:5:spot") == WorkerType(
        "c6i-8xlarge-spot", "c6i.8xlarge", 1, 5, spot=True
    )
    assert WorkerType.parse("m6i.2xlarge", spot=True).spot


def test_cli_reports_bad_input(tmp_path, capsys):
    out = tmp_path / "cluster.yaml"
    argv = ["cluster", "ec2", str(out), "--name", "s", "--image", AMI, "--install", "rlsweep"]
    assert main([*argv, "--region", "mars"]) == 2
    assert "region: got 'mars'" in capsys.readouterr().err
    assert not out.exists()


def test_a_cluster_with_workers_needs_storage_every_node_reaches(tmp_path, capsys):
    """Ray checkpoints a trial on a worker node only to storage every node reaches: a cluster
    whose workers may run trials, with the results on the head's disk, is refused before it is
    written (its trials would fail at their first checkpoint there)."""
    out = tmp_path / "cluster.yaml"
    argv = ["cluster", "ec2", str(out), "--name", "s", "--image", AMI, "--install", "rlsweep"]
    assert main(argv) == 2
    assert "--storage: got None; allowed: a URI every node reaches" in capsys.readouterr().err
    assert not out.exists()
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: s\nstorage_path: s3://bucket/sweeps\n")
    assert main([*argv, "--spec", str(spec)]) == 0  # the spec's storage_path reaches them
    assert main([*argv, "--max-workers", "0"]) == 0  # the head alone
