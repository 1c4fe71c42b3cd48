"""The SageMaker job's entry script: one Ray cluster across the job's hosts, then the sweep.

Every host runs it (`python -m rlsweep.launch.sagemaker_entry`, or as a file: SageMaker's script
mode runs `sagemaker_program` with the job's hyperparameters as `--spec ... --head_group ...`).
/opt/ml/input/config/resourceconfig.json names this host and all hosts; the head is the first
host of `--head-group` (the request's first instance group) or, homogeneous, of `hosts`. Every
host reads the same file and arguments, so all agree on the head without talking.

- head: `ray start --head` on its own address, waits until every host's node has joined, runs
  the sweep stored in the checkpoint dir (SageMaker syncs it to S3 and restores it when a spot
  job restarts) within `--time-limit` (the request's max_run less a margin, counted over the
  job's attempts, JOB_CLOCK: the trials
  checkpoint and stop before SageMaker would kill them, exit code 3, how to go on in the job's
  failure reason), writes summary.json and trials.csv into the model dir, stops its node.
- the others: wait for the head's port, `ray start --address head:port`, and stop their node
  once the head's port has been closed for `--head-gone-s` (the head is done).

Addresses: hosts talk to each other over the job's private network, so each node uses its
host's own address (`socket.gethostbyname(host)`) as its Ray node address; the dashboard stays
on 127.0.0.1. `--host-map algo-1=127.0.0.1,...` replaces the lookup (tests run every "host" on
one machine). Ray 2.60 itself limits what can be kept local: `ray start` replaces a loopback
node address with the machine's own IP, and its gRPC servers (GCS, raylet, object manager,
workers) listen on all interfaces; only the dashboard honours a bind address. So a job's Ray is
reachable by whatever can reach its hosts: SageMaker's private network, or the job's VPC when
the job has a VpcConfig (then use `--auth-token-file`).
Nodes carry a custom resource `group_<instance group>` (1 per node) and a label
`sagemaker-group=<group>`, so trials can be placed on a group.

Each node is `ray start --block` in a process group of its own: stopping it is SIGTERM to that
process (Ray's own shutdown of the processes it started), then the group. Never `ray stop`: it
stops every Ray on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsweep._ray_compat import ray_start_system_config
from rlsweep.errors import LaunchError, SpecError

RESOURCE_CONFIG = "/opt/ml/input/config/resourceconfig.json"
RESOURCE_CONFIG_ENV = "RLSWEEP_SM_RESOURCE_CONFIG"
CHECKPOINT_DIR = "/opt/ml/checkpoints"
MODEL_DIR = "/opt/ml/model"
OUTPUT_DIR = "/opt/ml/output"
"""SageMaker shows the text of `failure` in it as the job's FailureReason."""
GROUP_LABEL = "sagemaker-group"


@dataclass(frozen=True)
class ResourceConfig:
    """What SageMaker tells each host about the job's hosts (resourceconfig.json)."""

    current_host: str
    hosts: list[str]
    """Every host of the job, in the file's order (SageMaker sorts them)."""
    groups: dict[str, list[str]]
    """Instance group -> its hosts, in the file's order; one group for homogeneous jobs."""
    current_group: str

    @property
    def head_group_default(self) -> str:
        return next(iter(self.groups))


def parse_resource_config(d: dict[str, Any]) -> ResourceConfig:
    """SageMaker's format: current_host, hosts, and (heterogeneous jobs, newer hosts also for
    homogeneous ones) current_group_name and instance_groups [{instance_group_name,
    instance_type, hosts}]."""
    try:
        current, hosts = d["current_host"], list(d["hosts"])
    except (KeyError, TypeError) as e:
        raise LaunchError(f"resource config: missing {e}") from None
    groups = {g["instance_group_name"]: list(g["hosts"]) for g in d.get("instance_groups") or []}
    groups = {name: g for name, g in groups.items() if g}  # a group may have no hosts listed
    if not groups:
        groups = {"homogeneousCluster": hosts}
    current_group = d.get("current_group_name") or next(
        (name for name, g in groups.items() if current in g), next(iter(groups))
    )
    if current not in hosts or not all(h in hosts for g in groups.values() for h in g):
        raise LaunchError(f"resource config: hosts {hosts} do not cover {current!r} / {groups}")
    return ResourceConfig(current, hosts, groups, current_group)


def read_resource_config(path: str | None = None) -> ResourceConfig:
    path = path or os.environ.get(RESOURCE_CONFIG_ENV) or RESOURCE_CONFIG
    return parse_resource_config(json.loads(Path(path).read_text()))


def pick_head(cfg: ResourceConfig, head_group: str | None = None) -> str:
    """The head: the first host of `head_group` (default: the first group listed)."""
    group = head_group or cfg.head_group_default
    if group not in cfg.groups:
        raise LaunchError(f"head group {group!r} is not one of the job's {list(cfg.groups)}")
    return cfg.groups[group][0]


def parse_host_map(text: str | None) -> dict[str, str]:
    """'algo-1=10.0.0.1,algo-2=10.0.0.2' -> {host: address}."""
    out = {}
    for item in filter(None, (text or "").split(",")):
        host, sep, addr = item.partition("=")
        if not sep or not host or not addr:
            raise LaunchError(f"--host-map: {item!r} is not HOST=ADDRESS")
        out[host.strip()] = addr.strip()
    return out


def address_of(host: str, host_map: dict[str, str]) -> str:
    return host_map.get(host) or socket.gethostbyname(host)


def group_resource(group: str) -> str:
    """The custom resource naming an instance group: trials request a fraction of it."""
    return "group_" + re.sub(r"[^A-Za-z0-9_]", "_", group)


ROLLOUT_RESOURCE = "rollout_node"
"""The custom resource every node of a heterogeneous job's rollout groups (all groups but the
learner's) advertises, so that EnvRunners can be placed on any of them."""

PLACEMENT_SHARE = 0.001
"""What one trial process or EnvRunner asks of a placement resource (1 per node): a tag, not a
limit."""


def placed_spec(spec_path: str, cfg: ResourceConfig, learner_group: str):
    """The spec with its trials placed by instance group in a heterogeneous job: the trial
    process (the learner) on the learner group's nodes, remote EnvRunners on the nodes of the
    rollout groups (every other group). Placement the spec sets itself is kept."""
    from rlsweep.spec.spec import SweepSpec

    spec = SweepSpec.from_yaml(spec_path)
    rollout = [g for g in cfg.groups if g != learner_group]
    if not rollout:
        return spec
    base = spec.base_params()
    params = dict(spec.params)
    if not base.get("learner_resources"):
        params["learner_resources"] = {group_resource(learner_group): PLACEMENT_SHARE}
    if not base.get("env_runner_resources"):
        params["env_runner_resources"] = {ROLLOUT_RESOURCE: PLACEMENT_SHARE}
    return spec.with_overrides(params=params)


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free now (all held open while choosing, so no two are the same)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in socks]


def ray_start_argv(
    *,
    node_ip: str,
    port: int,
    head_address: str | None = None,
    group: str | None = None,
    rollout: bool = False,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    object_store_memory: int | None = None,
    temp_dir: str | None = None,
    dashboard: bool = False,
    dashboard_host: str = "127.0.0.1",
    dashboard_port: int = 8265,
    ports: dict[str, int] | None = None,
) -> list[str]:
    """`ray start --block` for the head (head_address None) or a node joining head_address.

    ports: extra `--<name> <port>` (e.g. dashboard-agent-listen-port, whose default 52365 two
    nodes on one machine would share)."""
    argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block"]
    argv += ["--node-ip-address", node_ip, "--disable-usage-stats"]
    if head_address is None:
        argv += ["--head", "--port", str(port), ray_start_system_config()]
        argv += [f"--include-dashboard={str(dashboard).lower()}"]
        if dashboard:
            argv += ["--dashboard-host", dashboard_host, "--dashboard-port", str(dashboard_port)]
    else:
        argv += ["--address", head_address]
    for flag, value in (
        ("--num-cpus", num_cpus),
        ("--num-gpus", num_gpus),
        ("--object-store-memory", object_store_memory),
        ("--temp-dir", temp_dir),
    ):
        if value is not None:
            argv += [flag, str(value)]
    if group is not None:
        resources = {group_resource(group): 1} | ({ROLLOUT_RESOURCE: 1} if rollout else {})
        argv += ["--resources", json.dumps(resources)]
        argv += ["--labels", f"{GROUP_LABEL}={re.sub(r'[^A-Za-z0-9_.-]', '_', group)}"]
    for name, value in (ports or {}).items():
        argv += [f"--{name}", str(value)]
    return argv


class RayNode:
    """One `ray start --block` process and the Ray processes it starts, in their own group."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.proc: subprocess.Popen | None = None

    def start(self) -> RayNode:
        print("rlsweep: " + " ".join(self.argv), flush=True)
        # Draining on SIGTERM is for Ray Serve; a stopping worker's GCS is gone, so it would
        # only wait out its 30 s timeout.
        env = {**os.environ, "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
        self.proc = subprocess.Popen(self.argv, start_new_session=True, env=env)
        return self

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, timeout: float = 30.0) -> None:
        """Ray's own shutdown (SIGTERM to `ray start --block`), then anything left in the group."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, timeout: float, alive: Callable[[], bool] = lambda: True):
    deadline = time.monotonic() + timeout
    while not port_open(host, port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{host}:{port} did not open in {timeout:g} s")
        if not alive():
            raise RuntimeError(f"gave up waiting for {host}:{port}: our Ray node exited")
        time.sleep(0.5)


def wait_for_nodes(address: str, n: int, timeout: float) -> list[dict[str, Any]]:
    """Block until `n` nodes are alive in the cluster at `address`; their `ray.nodes()` rows."""
    import ray

    ray.init(address=address, logging_level="WARNING", configure_logging=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            alive = [node for node in ray.nodes() if node.get("Alive")]
            if len(alive) >= n:
                return alive
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(alive)} of {n} Ray nodes joined in {timeout:g} s")
            time.sleep(1.0)
    finally:
        ray.shutdown()


def ray_auth_env(token_file: str | None) -> dict[str, str]:
    """Ray's token authentication, explicitly on or off for every process of this host.

    Explicit, because otherwise `ray start --head` turns it on whenever a token happens to lie
    in ~/.ray while joining nodes and drivers leave it off, and cannot connect. Off by default:
    the job's hosts are alone on SageMaker's private network (unless the job has a VpcConfig);
    a token file has to reach every host by other means than the request (which is visible to
    anyone who can describe the job), e.g. inside the source tarball."""
    if token_file is None:
        return {"RAY_AUTH_MODE": "disabled"}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(Path(token_file).resolve())}


def load_trainable(path: str | None):
    """'package.module:attribute' -> the trainable; None: run_sweep's default (the real one)."""
    if path is None:
        return None
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise LaunchError(f"--trainable {path!r}: expected package.module:attribute")
    return getattr(importlib.import_module(module), attr)


JOB_CLOCK = ".rlsweep-job-clock.json"
"""In the checkpoint dir, which SageMaker keeps over a managed spot job's attempts: how long
this job's head has run in them, by job name. The time limit is counted over all of them, so a
restarted attempt stops its sweep before max_run, should SageMaker count max_run over the
attempts (if it counts each attempt alone, the sweep stops early and the next job goes on)."""
CLOCK_EVERY_S = 30.0
"""How often the job clock is written: an attempt ended without warning loses at most this."""


class JobClock:
    """The seconds this training job's head has run: in its attempts before this one
    (`before`, from `directory`/JOB_CLOCK where it names this job) and in this one, since
    `started` (time.monotonic())."""

    def __init__(self, directory: Path, job: str, started: float) -> None:
        self.path, self.job, self.started = directory / JOB_CLOCK, job, started
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}
        self.before = float(data.get("run_s", 0.0)) if data.get("job") == job else 0.0

    def run_s(self) -> float:
        return self.before + time.monotonic() - self.started

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"job": self.job, "run_s": round(self.run_s(), 1)}) + "\n")
        os.replace(tmp, self.path)

    @contextlib.contextmanager
    def ticking(self):
        """Write the clock every CLOCK_EVERY_S while the block runs, and once at its end."""
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(CLOCK_EVERY_S):
                self.write()

        thread = threading.Thread(target=tick, name="rlsweep-job-clock", daemon=True)
        self.write()
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
            self.write()


def job_name() -> str:
    """This training job's name (SageMaker's TRAINING_JOB_NAME, or SM_TRAINING_ENV's); "" outside
    a job."""
    if name := os.environ.get("TRAINING_JOB_NAME"):
        return name
    try:
        return str(json.loads(os.environ.get("SM_TRAINING_ENV", "{}")).get("job_name") or "")
    except ValueError:
        return ""


def run(spec, *, address: str, storage: str, trainable=None, time_limit: float | None = None):
    """The job's sweep: the one call site that runs it. A spot job restarted after an
    interruption finds its sweep in the restored checkpoint dir and resumes it."""
    from rlsweep.run.sweep import run_or_resume

    return run_or_resume(
        spec, address=address, storage_path=storage, trainable=trainable, time_limit=time_limit
    )


def sweep(args: argparse.Namespace, spec, address: str, summary: dict[str, Any]) -> int:
    """Run the job's sweep within what is left of its time limit (`--time-limit`, counted from
    the entry's start over all the job's attempts: JOB_CLOCK), write the summary (and where it
    stopped early, SageMaker's failure reason: how to go on); the job's exit code (rlsweep's)."""
    from rlsweep.experiment.interrupt import SHUTDOWN_S, SweepInterrupted

    storage = args.storage or args.checkpoint_dir
    clock = JobClock(Path(args.checkpoint_dir), job_name(), args.started)
    left = None
    if args.time_limit is not None:  # the least a limit takes: it stops the sweep at once
        left = max(SHUTDOWN_S + 1.0, args.time_limit - clock.run_s())
    summary = {**summary, "storage": storage, "earlier_attempts_s": round(clock.before, 1)}
    try:
        trainable = args.trainable_fn
        with clock.ticking():
            result = run(
                spec, address=address, storage=storage, trainable=trainable, time_limit=left
            )
    except SweepInterrupted as e:
        how = (
            "submit the job again under a new job name (SageMaker refuses one used before) "
            "with the same checkpoint S3 URI (a restarted spot job does it by itself): it "
            "resumes the sweep"
        )
        path = write_summary(args.model_dir, e.result, {**summary, "stopped": e.what, "go_on": how})
        print(f"rlsweep: {e.what}\nrlsweep: summary {path}; to go on, {how}", flush=True)
        failure = Path(args.output_dir) / "failure"
        failure.parent.mkdir(parents=True, exist_ok=True)
        failure.write_text(f"rlsweep: {e.what}; to go on, {how}\n")
        return e.exit_code
    path = write_summary(args.model_dir, result, summary)
    print(f"rlsweep: summary {path}", flush=True)
    return result.exit_code


def write_summary(model_dir: str, result, summary: dict[str, Any]) -> Path:
    """summary.json (statuses, where the sweep is) and trials.csv into the model dir."""
    out = Path(model_dir)
    out.mkdir(parents=True, exist_ok=True)
    trials = result.trials
    statuses = trials["status"].value_counts().to_dict() if len(trials) else {}
    summary = {
        **summary,
        "spec": result.spec.name,
        "experiment": str(result.path),
        "trials": len(trials),
        "statuses": {str(k): int(v) for k, v in statuses.items()},
    }
    trials.to_csv(out / "trials.csv", index=False)
    path = out / "summary.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path


def run_head(args: argparse.Namespace, cfg: ResourceConfig, node_ip: str) -> int:
    node = RayNode(ray_start_argv(node_ip=node_ip, port=args.port, **_node_kwargs(args, cfg)))
    node.start()
    try:
        wait_for_port(node_ip, args.port, 120, alive=lambda: node.exited() is None)
        address = f"{node_ip}:{args.port}"
        nodes = wait_for_nodes(address, len(cfg.hosts), args.join_timeout)
        print(f"rlsweep: {len(nodes)} Ray nodes up; running {args.spec}", flush=True)
        spec = placed_spec(args.spec, cfg, args.head_group or cfg.head_group_default)
        summary = {
            "head": cfg.current_host,
            "hosts": cfg.hosts,
            "nodes": [{"resources": n["Resources"], "labels": n.get("Labels", {})} for n in nodes],
        }
        return sweep(args, spec, address, summary)
    finally:
        node.stop()


def run_worker(args: argparse.Namespace, cfg: ResourceConfig, node_ip: str, head_ip: str) -> int:
    wait_for_port(head_ip, args.port, args.join_timeout)
    head = f"{head_ip}:{args.port}"
    argv = ray_start_argv(
        node_ip=node_ip, port=args.port, head_address=head, **_node_kwargs(args, cfg)
    )
    node = RayNode(argv)
    node.start()
    try:
        last_seen = time.monotonic()
        while (code := node.exited()) is None:
            if port_open(head_ip, args.port):
                last_seen = time.monotonic()
            elif time.monotonic() - last_seen > args.head_gone_s:
                print(f"rlsweep: head {head} is gone; stopping this node", flush=True)
                return 0
            time.sleep(0.5)
        # Our node died first: fine if the head went away too (its raylet follows the GCS).
        return 0 if not port_open(head_ip, args.port) else code or 1
    finally:
        node.stop()


def _node_kwargs(args: argparse.Namespace, cfg: ResourceConfig) -> dict[str, Any]:
    # Ray's fixed default ports (dashboard agent, client server) would clash between nodes on
    # one machine (and with anyone else's Ray there): take free ones.
    head = cfg.current_host == args.head
    names = ["dashboard-agent-listen-port"] + (["ray-client-server-port"] if head else [])
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    learner_group = args.head_group or cfg.head_group_default
    return {
        "group": cfg.current_group,
        "rollout": len(cfg.groups) > 1 and cfg.current_group != learner_group,
        "num_cpus": args.num_cpus,
        "num_gpus": args.num_gpus,
        "object_store_memory": args.object_store_memory,
        "temp_dir": args.temp_dir,
        "dashboard": head and args.dashboard,
        "dashboard_port": args.dashboard_port,
        "ports": ports,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # SageMaker passes hyperparameters as --name value, names as written: accept both spellings.
    p.add_argument("--spec", required=True, help="sweep spec (relative to the code dir)")
    p.add_argument("--head-group", "--head_group", help="instance group of the head")
    p.add_argument("--storage", help="sweep storage (default: --checkpoint-dir)")
    p.add_argument("--resource-config", "--resource_config", help="default: SageMaker's")
    p.add_argument("--host-map", "--host_map", help="HOST=ADDRESS,... instead of DNS")
    p.add_argument("--port", type=int, default=6379, help="the head's Ray (GCS) port")
    p.add_argument("--checkpoint-dir", default=CHECKPOINT_DIR)
    p.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", MODEL_DIR))
    p.add_argument("--output-dir", default=os.environ.get("SM_OUTPUT_DIR", OUTPUT_DIR))
    p.add_argument(
        "--time-limit",
        "--time_limit",
        type=float,
        help="s from the entry's start to the sweep's stop, over all the job's attempts (the "
        "request sets max_run less STOP_BEFORE_MAX_RUN_S; default: none)",
    )
    p.add_argument("--trainable", help="module:attr (tests only: rlsweep.testing:fake_trial)")
    p.add_argument("--num-cpus", type=int, help="CPUs of this node (default: Ray detects)")
    p.add_argument("--num-gpus", type=int, help="GPUs of this node (default: Ray detects)")
    p.add_argument("--object-store-memory", type=int, help="bytes (default: Ray's)")
    p.add_argument("--temp-dir", help="Ray's temp dir on this node (default: Ray's)")
    p.add_argument(
        "--dashboard",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the Ray dashboard on the head, bound to 127.0.0.1",
    )
    p.add_argument("--dashboard-port", type=int, default=8265)
    p.add_argument(
        "--auth-token-file",
        "--auth_token_file",
        help="Ray token authentication with this token file, on every host (default: none)",
    )
    p.add_argument("--join-timeout", type=float, default=900.0, help="s to wait for the nodes")
    p.add_argument("--head-gone-s", type=float, default=10.0, help="s before a worker stops")
    args, unknown = p.parse_known_args(argv)
    if unknown:  # e.g. hyperparameters a newer rlsweep passes: say so, but run
        print(f"rlsweep: ignoring unknown arguments {unknown}", file=sys.stderr, flush=True)
    return args


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    args = parse_args(argv)
    args.started = started
    # SageMaker stops a job (and spot reclaims it) with SIGTERM: unwind, so `finally` stops Ray.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    # Before anything imports ray, which reads it once; `ray start` and trials inherit it.
    os.environ.update(ray_auth_env(args.auth_token_file))
    args.trainable_fn = load_trainable(args.trainable)
    cfg = read_resource_config(args.resource_config)
    host_map = parse_host_map(args.host_map)
    args.head = pick_head(cfg, args.head_group)
    node_ip = address_of(cfg.current_host, host_map)
    role = "head" if cfg.current_host == args.head else f"worker of {args.head}"
    print(f"rlsweep: {cfg.current_host} ({cfg.current_group}, {node_ip}) is the {role}", flush=True)
    try:
        if cfg.current_host == args.head:
            return run_head(args, cfg, node_ip)
        return run_worker(args, cfg, node_ip, address_of(args.head, host_map))
    except SpecError as e:  # bad input (the spec, a flag): exit 2, as `rlsweep` does
        for problem in e.errors:
            print(f"rlsweep: error: {problem}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    if not __package__:  # run as a file (SageMaker's sagemaker_program): find `rlsweep`, and
        # keep this directory off the path (its sagemaker.py would shadow the SageMaker SDK).
        sys.path[0] = str(Path(__file__).resolve().parents[2])
    sys.exit(main())
