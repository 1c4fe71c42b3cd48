"""An autoscaled EC2 cluster for a sweep: a Ray cluster-launcher YAML for `ray up`.

The head node is a GPU instance (it runs the driver, Tune and GPU learners); CPU worker node types
scale between their min and max with the trials' demand and can be spot instances. Every node gets
a venv with a pinned torch and then rlsweep (which pins Ray), so all nodes run the same versions;
or, with `docker_image` (the repository's Dockerfile, pushed to ECR), every node runs Ray inside
that image (Ray's `docker:` section), which carries rlsweep and the system libraries Procgen needs.

Security: nothing secret is written. The head's IAM instance profile and the EC2 key pair are named
by reference (ARN or name); the SSH key is a local path Ray reads at `ray up`. The dashboard
listens on 127.0.0.1 (reach it with `ray dashboard`, an SSH tunnel). Ray's own ports (GCS 6379,
object manager 8076, ...) must be reachable by the workers, so they listen on the node's private
IP; the security group Ray creates admits them only from the cluster's own group, and admits SSH
(22) from anywhere: pass `security_group_ids` to use groups of your own instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import re
import shlex
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rlsweep._ray_compat import ray_start_system_config
from rlsweep.errors import LaunchError
from rlsweep.launch import AWS_REGION, field_default
from rlsweep.spec.validators import is_int

HEAD_NODE_TYPE = "head"
VENV = "~/rlsweep-venv"
DEFAULT_TORCH = resources.files("rlsweep").joinpath("torch-pin.txt").read_text().strip()
"""The torch the project is developed against, installed before rlsweep so that pip keeps this
build; written once, in rlsweep/torch-pin.txt, which the Makefile reads too."""
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Where a local wheel/sdist and a shipped spec land on every node.
REMOTE_DIST = "~/rlsweep-dist"
REMOTE_SPECS = "~/rlsweep"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_INSTANCE = re.compile(r"[a-z][a-z0-9-]*\.[a-z0-9]+")
# g4dn, g5, g6, p3, p4d, p5 ...: families with NVIDIA GPUs (get the CUDA torch build).
_GPU_FAMILY = re.compile(r"[gp]\d")
_AMI = re.compile(r"ami-[0-9a-f]{8,17}")
_PROFILE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:instance-profile/[\w+=,.@/-]+")
_PROFILE_NAME = re.compile(r"[\w+=,.@-]{1,128}")
_SG = re.compile(r"sg-[0-9a-f]{8,17}")
_LOCAL_PACKAGE = (".whl", ".tar.gz", ".zip")
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:@-]*[a-z0-9]", re.IGNORECASE)
_ECR = re.compile(r"(\d{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com)/")
DOCKER_CONTAINER = "rlsweep"


@dataclass(frozen=True)
class WorkerType:
    """One autoscaled worker node type."""

    name: str
    """Node type name in the YAML (and in `ray status`)."""
    instance_type: str = "c6i.8xlarge"
    """EC2 instance type, e.g. c6i.8xlarge (32 vCPUs)."""
    min_workers: int = 0
    """Nodes of this type kept running even when idle."""
    max_workers: int = 4
    """Most nodes of this type the autoscaler starts."""
    spot: bool = False
    """Launch as spot instances (cheaper; AWS may reclaim them, and Tune retries the trial)."""
    resources: dict[str, int] = field(default_factory=dict)
    """Resources advertised to Ray, e.g. {"CPU": 30}; empty: Ray detects them from the type."""

    def __post_init__(self) -> None:
        where = f"worker type {self.name!r}"
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise LaunchError(f"{where}: name must be letters, digits, '_' or '-'")
        if self.name == HEAD_NODE_TYPE:
            raise LaunchError(f"{where}: {HEAD_NODE_TYPE!r} is the head node type's name")
        _check_instance(self.instance_type, f"{where}: instance_type")
        for key in ("min_workers", "max_workers"):
            if not is_int(getattr(self, key), minimum=0):
                raise LaunchError(f"{where}: {key} must be an integer >= 0")
        if self.min_workers > self.max_workers:
            raise LaunchError(
                f"{where}: min_workers {self.min_workers} > max_workers {self.max_workers}"
            )
        _check_resources(self.resources, f"{where}: resources")

    @classmethod
    def parse(cls, text: str, spot: bool = False) -> WorkerType:
        """`TYPE[:MIN:MAX][:spot]`, e.g. `c6i.8xlarge:0:10:spot` (the CLI's --worker)."""
        parts = text.split(":")
        is_spot = spot or parts[-1] == "spot"
        if parts[-1] == "spot":
            parts = parts[:-1]
        if len(parts) not in (1, 3):
            raise LaunchError(f"--worker {text!r}: expected TYPE[:MIN:MAX][:spot]")
        counts = {}
        if len(parts) == 3:
            try:
                counts = {"min_workers": int(parts[1]), "max_workers": int(parts[2])}
            except ValueError:
                raise LaunchError(f"--worker {text!r}: MIN and MAX must be integers") from None
        name = parts[0].replace(".", "-") + ("-spot" if is_spot else "")
        return cls(name=name, instance_type=parts[0], spot=is_spot, **counts)


@dataclass(frozen=True)
class Ec2Cluster:
    """An autoscaled Ray cluster on EC2 for rlsweep sweeps (see `cluster_config`)."""

    cluster_name: str
    """Names the instances, Ray's security group and the cluster in `ray` commands."""
    image_id: str
    """AMI of every node: Ubuntu with NVIDIA drivers and `python` (e.g. an AWS Deep Learning
    Base GPU AMI). Required: Ray's fallback AMI is Ubuntu 18.04, too old for Python 3.11."""
    install: str | None = None
    """What pip installs as rlsweep: `rlsweep==X`, a VCS URL (`git+https://...@tag`) or a local
    wheel/sdist path (shipped to the nodes). Required without `docker_image` (no index is trusted
    by default); None with it (the image carries rlsweep)."""
    docker_image: str | None = None
    """The image every node runs Ray in, built from the repository's Dockerfile (README: "A
    container image"), e.g. ACCOUNT.dkr.ecr.REGION.amazonaws.com/rlsweep:TAG; an ECR image is
    pulled after `docker login` with the node's instance profile (it needs ECR read access).
    The AMI then needs Docker and the NVIDIA container toolkit (AWS's Deep Learning Base GPU
    AMIs have both). None: a venv on the AMI, with `install` pip-installed into it."""
    region: str = "us-east-1"
    """AWS region, e.g. us-east-1."""
    availability_zone: str | None = None
    """Zone(s) in `region`, comma-separated, tried in order; None: Ray picks."""
    head_instance_type: str = "g5.xlarge"
    """The head node: a GPU instance, for the learners of trials with num_gpus > 0."""
    head_resources: dict[str, int] = field(default_factory=dict)
    """Resources the head advertises to Ray; empty: detected from the instance type."""
    workers: tuple[WorkerType, ...] = field(default_factory=lambda: (WorkerType("cpu"),))
    """Autoscaled worker node types (CPU instances for CPU trials and EnvRunners)."""
    max_workers: int | None = None
    """Cap on worker nodes of all types together; None: the sum of the types' max_workers."""
    idle_timeout_minutes: float = 5
    """A worker idle this long is terminated."""
    cache_stopped_nodes: bool = False
    """Stop (not terminate) idle nodes for reuse. Off: stopped nodes still bill their disks, and
    a sweep's cluster is short-lived."""
    iam_instance_profile: str | None = None
    """Head's instance profile, by ARN or name (it launches workers: needs EC2 + iam:PassRole);
    None: Ray creates and uses `ray-autoscaler-v1`."""
    worker_iam_instance_profile: str | None = None
    """Workers' instance profile, by ARN or name: e.g. S3 access for `--storage s3://...`."""
    key_name: str | None = None
    """EC2 key pair name; with `ssh_private_key`. None (both): Ray creates a key pair."""
    ssh_private_key: str | None = None
    """Local path of the key pair's private key (the path only; Ray reads it at `ray up`)."""
    ssh_user: str = "ubuntu"
    """Login user of the AMI."""
    security_group_ids: tuple[str, ...] = ()
    """Security groups of every node (sg-...); empty: Ray creates one (intra-cluster + SSH)."""
    python: str = "python3.11"
    """Interpreter on the AMI the venv is created with (rlsweep needs 3.11+; not used with
    docker_image)."""
    torch: str = DEFAULT_TORCH
    """torch requirement, installed before rlsweep: the CUDA build on GPU nodes, CPU elsewhere
    (not used with docker_image: the image has its torch)."""
    torch_gpu_index: str | None = None
    """pip index of the CUDA torch build; None: PyPI's (CUDA on Linux x86_64)."""
    dashboard_host: str = "127.0.0.1"
    """Address the dashboard listens on; 0.0.0.0 exposes it to the security group."""
    file_mounts: dict[str, str] = field(default_factory=dict)
    """Files shipped to every node at `ray up`: remote path -> local path (e.g. a spec)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "workers", tuple(self.workers))
        object.__setattr__(self, "security_group_ids", tuple(self.security_group_ids))
        if not isinstance(self.cluster_name, str) or not _NAME.fullmatch(self.cluster_name):
            raise LaunchError(
                f"cluster_name: got {self.cluster_name!r}; allowed: letters, digits, '_', '-'"
            )
        if not isinstance(self.region, str) or not AWS_REGION.fullmatch(self.region):
            raise LaunchError(f"region: got {self.region!r}; allowed: e.g. us-east-1, eu-west-2")
        zones = self.availability_zone.split(",") if self.availability_zone else []
        for zone in map(str.strip, zones):
            if not (zone.startswith(self.region) and re.fullmatch(r"[a-z0-9-]+[a-z]", zone)):
                raise LaunchError(
                    f"availability_zone: got {zone!r}; allowed: zones of {self.region}, "
                    f"e.g. {self.region}a"
                )
        if not isinstance(self.image_id, str) or not _AMI.fullmatch(self.image_id):
            raise LaunchError(f"image_id: got {self.image_id!r}; allowed: an AMI id, ami-...")
        _check_instance(self.head_instance_type, "head_instance_type")
        _check_resources(self.head_resources, "head_resources")
        if not self.workers or not all(isinstance(w, WorkerType) for w in self.workers):
            raise LaunchError("workers: allowed: one or more WorkerType")
        names = [w.name for w in self.workers]
        if len(set(names)) != len(names):
            raise LaunchError(f"workers: names must be distinct, got {names}")
        if self.max_workers is not None:
            if not is_int(self.max_workers, minimum=0):
                raise LaunchError(f"max_workers: got {self.max_workers!r}; allowed: integer >= 0")
            floor = sum(w.min_workers for w in self.workers)
            if floor > self.max_workers:
                raise LaunchError(
                    f"max_workers: {self.max_workers} < {floor}, the sum of the types' min_workers"
                )
        timeout = self.idle_timeout_minutes
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise LaunchError(f"idle_timeout_minutes: got {timeout!r}; allowed: a number >= 0")
        for key in ("iam_instance_profile", "worker_iam_instance_profile"):
            value = getattr(self, key)
            if value is not None and not (
                _PROFILE_ARN.fullmatch(value) or _PROFILE_NAME.fullmatch(value)
            ):
                raise LaunchError(
                    f"{key}: got {value!r}; allowed: an instance-profile ARN "
                    "(arn:aws:iam::123456789012:instance-profile/NAME) or its NAME"
                )
        # Ray overwrites KeyName with its own key pair unless ssh_private_key is set, and with
        # ssh_private_key it refuses nodes without KeyName: the two come together.
        if (self.key_name is None) != (self.ssh_private_key is None):
            raise LaunchError("key_name and ssh_private_key: give both (your key pair) or neither")
        if self.key_name is not None and not re.fullmatch(r"[\x20-\x7e]{1,255}", self.key_name):
            raise LaunchError(f"key_name: got {self.key_name!r}; allowed: a key pair name")
        if self.ssh_private_key is not None and (
            "\n" in self.ssh_private_key or "PRIVATE KEY" in self.ssh_private_key
        ):
            raise LaunchError("ssh_private_key: a path to the key file, never the key itself")
        if not _NAME.fullmatch(self.ssh_user or ""):
            raise LaunchError(f"ssh_user: got {self.ssh_user!r}; allowed: a login name")
        for sg in self.security_group_ids:
            if not _SG.fullmatch(sg):
                raise LaunchError(f"security_group_ids: got {sg!r}; allowed: sg-... ids")
        if self.docker_image is None:
            _check_install(self.install)
        elif self.install is not None:
            raise LaunchError("install: None with docker_image (the image carries rlsweep)")
        elif not isinstance(self.docker_image, str) or not _IMAGE.fullmatch(self.docker_image):
            raise LaunchError(
                f"docker_image: got {self.docker_image!r}; allowed: an image reference, e.g. "
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/rlsweep:0.1.0"
            )
        try:
            ipaddress.ip_address(self.dashboard_host)
        except ValueError:
            raise LaunchError(
                f"dashboard_host: got {self.dashboard_host!r}; allowed: an IP address "
                "(127.0.0.1 keeps it on the head; reach it with `ray dashboard`)"
            ) from None
        for remote, local in self.file_mounts.items():
            _check_mount(remote, local)

    @property
    def local_package(self) -> Path | None:
        """The local wheel/sdist `install` names, if it is one (shipped via file_mounts)."""
        if (
            self.install is None
            or "://" in self.install
            or not self.install.endswith(_LOCAL_PACKAGE)
        ):
            return None
        return Path(self.install).expanduser().resolve()


def cluster_config(c: Ec2Cluster) -> dict[str, Any]:
    """The Ray cluster-launcher config (what `ray up` reads) for `c`.

    Every top-level key Ray's AWS defaults set is given here, so `ray up`'s merge with its
    defaults adds nothing (its default head command would bind the dashboard to 0.0.0.0)."""
    provider: dict[str, Any] = {"type": "aws", "region": c.region}
    if c.availability_zone:
        provider["availability_zone"] = c.availability_zone
    provider["cache_stopped_nodes"] = c.cache_stopped_nodes
    auth: dict[str, Any] = {"ssh_user": c.ssh_user}
    if c.ssh_private_key is not None:
        # Ray passes it to `ssh -i` unexpanded; a path, never the key (Ray reads it at `ray up`).
        auth["ssh_private_key"] = str(Path(c.ssh_private_key).expanduser())

    head_gpu = _is_gpu(c.head_instance_type, c.head_resources)
    node_types: dict[str, Any] = {
        HEAD_NODE_TYPE: {
            "resources": dict(c.head_resources),
            "min_workers": 0,
            "max_workers": 0,
            "node_config": _node_config(c, c.head_instance_type, c.iam_instance_profile, False),
        }
    }
    for w in c.workers:
        node_type: dict[str, Any] = {
            "resources": dict(w.resources),
            "min_workers": w.min_workers,
            "max_workers": w.max_workers,
            "node_config": _node_config(c, w.instance_type, c.worker_iam_instance_profile, w.spot),
        }
        if c.docker_image is None and _is_gpu(w.instance_type, w.resources):
            # A node type's own worker_setup_commands replace setup + worker setup commands.
            node_type["worker_setup_commands"] = _venv_commands(c) + _install_commands(c, True)
        node_types[w.name] = node_type

    file_mounts = dict(c.file_mounts)
    if c.local_package is not None:
        file_mounts[f"{REMOTE_DIST}/{c.local_package.name}"] = str(c.local_package)
    ulimit = "ulimit -n 65536"  # Ray's own start commands raise it: many workers' sockets
    ray = "ray" if c.docker_image else f"{VENV}/bin/ray"  # the image has it on PATH
    config: dict[str, Any] = {
        "cluster_name": c.cluster_name,
        "max_workers": (
            c.max_workers if c.max_workers is not None else sum(w.max_workers for w in c.workers)
        ),
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": c.idle_timeout_minutes,
        "provider": provider,
        "auth": auth,
        "available_node_types": node_types,
        "head_node_type": HEAD_NODE_TYPE,
        "file_mounts": file_mounts,
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
        "initialization_commands": [],
        "setup_commands": _venv_commands(c),
        "head_setup_commands": _install_commands(c, head_gpu),
        "worker_setup_commands": _install_commands(c, False),
        "head_start_ray_commands": [
            f"{ray} stop",
            f"{ulimit}; {ray} start --head --port=6379 --object-manager-port=8076 "
            f"--dashboard-host={c.dashboard_host} {shlex.quote(ray_start_system_config())} "
            "--autoscaling-config=~/ray_bootstrap_config.yaml",
        ],
        "worker_start_ray_commands": [
            f"{ray} stop",
            f"{ulimit}; {ray} start --address=$RAY_HEAD_IP:6379 --object-manager-port=8076",
        ],
    }
    if c.docker_image:
        config.update(_docker(c))
    return config


def ray_commands(
    yaml_path: str | Path,
    c: Ec2Cluster,
    spec: str | Path | None = None,
    storage: str | None = None,
) -> list[tuple[str, str]]:
    """The `ray` commands that run a sweep on the cluster, as (command, what it does) pairs.

    `ray submit` runs `python <script>`, so the sweep (a console script) goes through `ray exec`
    in tmux: it survives the SSH session. `spec` is the local spec file: used from `file_mounts`
    if it is mounted there, otherwise copied with `ray rsync-up`. `storage` (e.g.
    `s3://bucket/sweeps`) is passed to `rlsweep run --storage`: trials on worker nodes checkpoint
    there, which Ray requires to be reachable from every node."""
    y = shlex.quote(str(yaml_path))
    spec_name = Path(spec).name if spec is not None else "spec.yaml"
    mounted = {_local(local): remote for remote, local in c.file_mounts.items()}
    remote = mounted.get(_local(spec)) if spec is not None else None
    steps = [(f"ray up -y {y}", "start the head; workers start and stop with the trials' demand")]
    if remote is None:
        remote = f"{REMOTE_SPECS}/{spec_name}"
        local = shlex.quote(str(spec)) if spec is not None else spec_name
        steps.append((f"ray rsync-up {y} {local} '{remote}'", "copy the spec to the head"))
    run = f"rlsweep run {remote} --address auto"
    if storage:
        run += f" --storage {shlex.quote(storage)}"
    steps += [
        (f"ray exec --tmux {y} {shlex.quote(run)}", "run the sweep on the head, in tmux"),
        (f"ray attach --tmux {y}", "watch it (detach: Ctrl-b d)"),
        (f"ray dashboard {y}", "dashboard at http://localhost:8265, over SSH"),
    ]
    if not storage:
        steps.append(
            (f"ray rsync-down {y} '~/results/' results/", "fetch results (spec's storage_path)")
        )
    steps.append((f"ray down -y {y}", "terminate every node"))
    return steps


def write_cluster_yaml(
    c: Ec2Cluster,
    path: str | Path,
    spec: str | Path | None = None,
    storage: str | None = None,
) -> Path:
    """Write `cluster_config(c)` to `path`, headed by the commands that use it."""
    path = Path(path)
    lines = [
        f"# Ray cluster launcher config for rlsweep: {c.cluster_name} ({c.region}).",
        "# Written by `rlsweep cluster ec2`. Run a sweep with:",
        "#",
    ]
    for cmd, what in ray_commands(path, c, spec, storage):
        lines += [f"#   {cmd}", f"#       ({what})"]
    lines += [
        "#",
        "# AWS credentials come from your local AWS config for `ray up`, and from the instance",
        "# profiles on the nodes; none are written here.",
        "",
    ]
    body = yaml.safe_dump(cluster_config(c), sort_keys=False, default_flow_style=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + body)
    return path


# --- pieces ------------------------------------------------------------------------------------
def _node_config(c: Ec2Cluster, instance_type: str, profile: str | None, spot: bool) -> dict:
    """EC2 RunInstances parameters of one node type (references only: profile, key, groups)."""
    cfg: dict[str, Any] = {"InstanceType": instance_type, "ImageId": c.image_id}
    if profile is not None:
        cfg["IamInstanceProfile"] = (
            {"Arn": profile} if profile.startswith("arn:") else {"Name": profile}
        )
    if c.key_name is not None:
        cfg["KeyName"] = c.key_name
    if c.security_group_ids:
        cfg["SecurityGroupIds"] = list(c.security_group_ids)
    if spot:
        cfg["InstanceMarketOptions"] = {"MarketType": "spot"}
    return cfg


def _venv_commands(c: Ec2Cluster) -> list[str]:
    """A venv on every node, active in Ray's login shells (`ray exec` finds `rlsweep`)."""
    activate = f"source {VENV}/bin/activate"
    return [
        f"test -x {VENV}/bin/python || {shlex.quote(c.python)} -m venv {VENV}",
        f"grep -qxF '{activate}' ~/.bashrc || echo '{activate}' >> ~/.bashrc",
        _region_command(c),
        f"{VENV}/bin/pip install -U pip",
    ]


def _region_command(c: Ec2Cluster) -> str:
    # pyarrow's S3 filesystem (--storage s3://) needs a region; the instance role has no default.
    region = f"export AWS_DEFAULT_REGION={c.region}"
    return f"grep -qxF '{region}' ~/.bashrc || echo '{region}' >> ~/.bashrc"


def _docker(c: Ec2Cluster) -> dict[str, Any]:
    """The keys that run every node's Ray inside `c.docker_image`: Ray's `docker:` section
    (host networking; the NVIDIA runtime and /dev/shm's size Ray sets itself), an ECR login on
    the host with the instance profile, and no venv or install (the image has rlsweep)."""
    keys: dict[str, Any] = {
        "docker": {
            "image": c.docker_image,
            "container_name": DOCKER_CONTAINER,
            "pull_before_run": True,
            "run_options": ["--ulimit nofile=65536:65536"],
        },
        "setup_commands": [_region_command(c)],
        "head_setup_commands": [],
        "worker_setup_commands": [],
    }
    if m := _ECR.match(c.docker_image):
        registry, region = m.groups()
        keys["initialization_commands"] = [
            f"aws ecr get-login-password --region {region} | "
            f"docker login --username AWS --password-stdin {registry}"
        ]
    return keys


def _install_commands(c: Ec2Cluster, gpu: bool) -> list[str]:
    """torch first (CUDA or CPU build), then rlsweep, whose `torch` range the pin satisfies."""
    pip = f"{VENV}/bin/pip install"
    index = c.torch_gpu_index if gpu else TORCH_CPU_INDEX
    torch = f"{pip} {shlex.quote(c.torch)}"
    if index:
        torch += f" --index-url {shlex.quote(index)}"
    package = f"{REMOTE_DIST}/{c.local_package.name}" if c.local_package else shlex.quote(c.install)
    return [torch, f"{pip} {package}"]


def _local(path: str | Path) -> str:
    return str(Path(path).expanduser().resolve())


def _is_gpu(instance_type: str, resources: dict[str, int]) -> bool:
    if "GPU" in resources:
        return resources["GPU"] > 0
    return bool(_GPU_FAMILY.match(instance_type))


def _check_instance(value: Any, where: str) -> None:
    if not isinstance(value, str) or not _INSTANCE.fullmatch(value):
        raise LaunchError(
            f"{where}: got {value!r}; allowed: an EC2 instance type, e.g. c6i.8xlarge"
        )


def _check_resources(resources: Any, where: str) -> None:
    # Ray's schema: resource amounts of a node type are integers >= 0.
    if not isinstance(resources, dict) or not all(
        isinstance(k, str) and is_int(v, minimum=0) for k, v in resources.items()
    ):
        raise LaunchError(f"{where}: got {resources!r}; allowed: {{name: integer >= 0}}")


def _check_install(install: Any) -> None:
    if not isinstance(install, str) or not install.strip():
        raise LaunchError(
            "install: allowed: rlsweep==X, a git+https:// URL or a wheel/sdist path "
            "(or a docker_image instead)"
        )
    # A token in a URL (https://user:token@host/...) would be written into the YAML and to every
    # node's shell history; ssh URLs carry only a user name (git@github.com).
    for m in re.finditer(r"([a-z][a-z0-9+.-]*)://([^/@\s]+)@", install):
        scheme, userinfo = m.group(1), m.group(2)
        if ":" in userinfo or not scheme.endswith("ssh"):
            raise LaunchError(
                "install: the URL carries credentials; use a public URL, an ssh:// URL with a "
                "deploy key on the AMI, or a local wheel"
            )
    local = install.endswith(_LOCAL_PACKAGE) and "://" not in install
    if local and not Path(install).expanduser().is_file():
        raise LaunchError(f"install: {install!r} is not a file (a local wheel/sdist to ship)")


def _check_mount(remote: Any, local: Any) -> None:
    if not isinstance(remote, str) or not isinstance(local, str) or not remote or not local:
        raise LaunchError(f"file_mounts: got {remote!r}: {local!r}; allowed: remote -> local path")
    parts = Path(local).expanduser().parts
    if {".aws", ".ssh", ".netrc"} & set(parts) or Path(local).name == "credentials":
        raise LaunchError(f"file_mounts: {local!r} looks like a credentials location; not shipped")


# --- command line (`rlsweep cluster ec2`) -------------------------------------------------------
def _default(name: str) -> Any:
    return field_default(Ec2Cluster, name)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="YAML to write, e.g. cluster.yaml")
    p.add_argument("--name", required=True, help="cluster name")
    p.add_argument(
        "--image",
        required=True,
        help="AMI id (NVIDIA drivers, Python 3.11; --docker-image: Docker, NVIDIA's toolkit)",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--install", help="rlsweep for pip into a venv: rlsweep==X, git+https://..., or a wheel"
    )
    where.add_argument(
        "--docker-image", help="run every node in this image (the Dockerfile's, e.g. on ECR)"
    )
    p.add_argument("--region", default=_default("region"), help="AWS region (default: %(default)s)")
    p.add_argument("--zone", help="availability zone(s), comma-separated")
    p.add_argument(
        "--head", default=_default("head_instance_type"), help="head instance type (%(default)s)"
    )
    p.add_argument(
        "--worker",
        action="append",
        metavar="TYPE[:MIN:MAX][:spot]",
        help="worker node type, repeatable (default: "
        + ", ".join(
            f"{w.instance_type}:{w.min_workers}:{w.max_workers}" for w in _default("workers")
        )
        + ")",
    )
    p.add_argument("--spot", action="store_true", help="all workers on spot instances")
    p.add_argument("--max-workers", type=int, help="cap on worker nodes (default: sum of MAX)")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=_default("idle_timeout_minutes"),
        help="minutes before scale-down (%(default)s)",
    )
    p.add_argument("--iam-profile", help="head instance profile, ARN or name (by reference)")
    p.add_argument("--worker-iam-profile", help="workers' instance profile (e.g. S3 access)")
    p.add_argument("--key-name", help="EC2 key pair name (with --ssh-key)")
    p.add_argument("--ssh-key", help="path of that key pair's private key file")
    p.add_argument("--ssh-user", default=_default("ssh_user"), help="AMI login user (%(default)s)")
    p.add_argument("--security-group", action="append", help="sg-... id, repeatable")
    p.add_argument(
        "--torch", default=_default("torch"), help="torch requirement (default: %(default)s)"
    )
    p.add_argument(
        "--dashboard-host",
        default=_default("dashboard_host"),
        help="dashboard address (%(default)s)",
    )
    p.add_argument("--spec", help="sweep spec to ship to the nodes (file_mounts; validated)")
    p.add_argument("--storage", help="results URI for the run command, e.g. s3://bucket/sweeps")


def cluster_from_args(args: argparse.Namespace) -> Ec2Cluster:
    """The cluster `rlsweep cluster ec2` describes; the spec it ships is loaded (validated)
    by the one loader, `SweepSpec.from_yaml`. Raises SpecError (LaunchError) on bad input."""
    from rlsweep.spec.spec import SweepSpec

    mounts = {}
    if args.spec:
        SweepSpec.from_yaml(args.spec)  # the cluster would fail on it: fail here instead
        mounts[f"{REMOTE_SPECS}/{Path(args.spec).name}"] = str(Path(args.spec).resolve())
    workers = [WorkerType.parse(w, spot=args.spot) for w in args.worker or []]
    return Ec2Cluster(
        cluster_name=args.name,
        image_id=args.image,
        install=args.install,
        docker_image=args.docker_image,
        region=args.region,
        availability_zone=args.zone,
        head_instance_type=args.head,
        workers=workers or [dataclasses.replace(w, spot=args.spot) for w in _default("workers")],
        max_workers=args.max_workers,
        idle_timeout_minutes=args.idle_timeout,
        iam_instance_profile=args.iam_profile,
        worker_iam_instance_profile=args.worker_iam_profile,
        key_name=args.key_name,
        ssh_private_key=args.ssh_key,
        ssh_user=args.ssh_user,
        security_group_ids=args.security_group or (),
        torch=args.torch,
        dashboard_host=args.dashboard_host,
        file_mounts=mounts,
    )


def check_storage(c: Ec2Cluster, storage: str | None, spec: str | Path | None) -> None:
    """Raise LaunchError where worker nodes may run trials and the sweep would store them on
    the head's disk: Ray checkpoints a trial on another node only to storage every node reaches
    (a local path fails its first checkpoint there)."""
    from rlsweep.spec.spec import SweepSpec
    from rlsweep.storage import is_uri

    workers = c.max_workers if c.max_workers is not None else sum(w.max_workers for w in c.workers)
    spec_storage = SweepSpec.from_yaml(spec).storage_path if spec else None
    if workers and not is_uri(storage or spec_storage or ""):
        raise LaunchError(
            f"--storage: got {storage!r}"
            + (f" (the spec's storage_path: {spec_storage!r})" if spec else "")
            + "; allowed: a URI every node reaches, e.g. s3://bucket/sweeps: trials on worker "
            "nodes checkpoint only there (Ray refuses the head's disk), or --max-workers 0"
        )


def main(args: argparse.Namespace) -> int:
    """Write the cluster YAML and print the commands that run the sweep on it."""
    cluster = cluster_from_args(args)
    check_storage(cluster, args.storage, args.spec)
    path = write_cluster_yaml(cluster, args.out, spec=args.spec, storage=args.storage)
    print(f"wrote {path}; run the sweep with:\n")
    for command, what in ray_commands(path, cluster, args.spec, args.storage):
        print(f"  {command}\n      # {what}")
    return 0
