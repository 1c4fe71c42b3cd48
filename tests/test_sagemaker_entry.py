"""The SageMaker entry script (rlsweep.launch.sagemaker_entry), offline: its steps (resource
config, head choice, `ray start` argv, auth, arguments), then a real bootstrap of a two-"host"
Ray cluster on this machine that runs a sweep. Nothing reaches AWS."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rlsweep._ray_compat import SYSTEM_CONFIG
from rlsweep.launch import sagemaker_entry as entry
from rlsweep.launch.sagemaker import CHECKPOINT_DIR

ROOT = Path(__file__).resolve().parent.parent
# Distinctive fake credentials: the test greps for them in everything the job wrote.
FAKE_SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKERLSWEEP12345",
    "AWS_SECRET_ACCESS_KEY": "rlsweepFAKEsmSecret/abc123",
    "AWS_SESSION_TOKEN": "rlsweepFAKEsmSessionToken",
    "WANDB_API_KEY": "rlsweepFAKEwandbKey0123456789",
}


# --- the entry script's steps -------------------------------------------------------------------
HETERO_CONFIG = {
    "current_host": "algo-2",
    "current_instance_type": "ml.c5.18xlarge",
    "current_group_name": "rollout",
    "hosts": ["algo-1", "algo-2", "algo-3"],
    # SageMaker need not list the groups in the request's order: the head comes from head_group.
    "instance_groups": [
        {
            "instance_group_name": "rollout",
            "instance_type": "ml.c5.18xlarge",
            "hosts": ["algo-2", "algo-3"],
        },
        {"instance_group_name": "learner", "instance_type": "ml.g5.2xlarge", "hosts": ["algo-1"]},
    ],  # fmt: skip
    "network_interface_name": "eth0",
}


def test_resource_config_and_head():
    cfg = entry.parse_resource_config(HETERO_CONFIG)
    assert cfg.current_host == "algo-2" and cfg.current_group == "rollout"
    assert cfg.groups == {"rollout": ["algo-2", "algo-3"], "learner": ["algo-1"]}
    assert entry.pick_head(cfg, "learner") == "algo-1"
    assert entry.pick_head(cfg) == "algo-2"  # no head_group: the first group listed
    with pytest.raises(ValueError, match="head group"):
        entry.pick_head(cfg, "nope")
    homogeneous = entry.parse_resource_config(
        {"current_host": "algo-2", "hosts": ["algo-1", "algo-2"], "network_interface_name": "eth0"}
    )
    assert entry.pick_head(homogeneous) == "algo-1"
    assert homogeneous.groups == {"homogeneousCluster": ["algo-1", "algo-2"]}
    with pytest.raises(ValueError, match="current_host"):
        entry.parse_resource_config({"hosts": ["algo-1"]})


def test_heterogeneous_jobs_place_learners_and_env_runners_by_group(tmp_path):
    """The learner (trial process) goes to the learner group, EnvRunners to the rollout group,
    through the custom resources of the trial's placement-group bundles; a homogeneous job is
    left unconstrained."""
    from rlsweep.plan.placement import placement
    from rlsweep.spec.config import TrialConfig

    path = tmp_path / "spec.yaml"
    path.write_text("name: hetero\nparams: {num_env_runners: 2, num_envs_per_env_runner: 32}\n")
    spec = entry.placed_spec(str(path), entry.parse_resource_config(HETERO_CONFIG), "learner")
    (trial,) = spec.trials()
    share = entry.PLACEMENT_SHARE
    rollout = entry.ROLLOUT_RESOURCE
    assert placement(trial).bundles == (
        {"CPU": 1, "group_learner": share},
        {"CPU": 1, rollout: share},
        {"CPU": 1, rollout: share},
    )
    # Several rollout groups (say spot c5 and c6i): EnvRunners may go to any of their nodes.
    several = {
        **HETERO_CONFIG,
        "hosts": [*HETERO_CONFIG["hosts"], "a4"],
        "instance_groups": [
            *HETERO_CONFIG["instance_groups"],
            {"instance_group_name": "c6i", "instance_type": "ml.c6i.8xlarge", "hosts": ["a4"]},
        ],
    }
    spec = entry.placed_spec(str(path), entry.parse_resource_config(several), "learner")
    (trial,) = spec.trials()
    assert trial.env_runner_resources == {rollout: share}
    homogeneous = entry.parse_resource_config({"current_host": "a", "hosts": ["a", "b"]})
    (trial,) = entry.placed_spec(str(path), homogeneous, "homogeneousCluster").trials()
    assert trial.learner_resources == {} and trial.env_runner_resources == {}
    # What the spec sets itself wins.
    path.write_text("name: own\nparams: {learner_resources: {gpu_box: 1}}\n")
    spec = entry.placed_spec(str(path), entry.parse_resource_config(HETERO_CONFIG), "learner")
    (trial,) = spec.trials()
    assert trial.learner_resources == {"gpu_box": 1}
    assert trial.env_runner_resources == {rollout: share}
    assert TrialConfig.from_dict(trial.to_dict()) == trial


def test_resource_config_path_from_env(tmp_path, monkeypatch):
    path = tmp_path / "rc.json"
    path.write_text(json.dumps(HETERO_CONFIG))
    monkeypatch.setenv(entry.RESOURCE_CONFIG_ENV, str(path))
    assert entry.read_resource_config().hosts == ["algo-1", "algo-2", "algo-3"]


def test_host_map_and_addresses():
    host_map = entry.parse_host_map("algo-1=127.0.0.1, algo-2=10.0.0.2")
    assert host_map == {"algo-1": "127.0.0.1", "algo-2": "10.0.0.2"}
    assert entry.address_of("algo-2", host_map) == "10.0.0.2"
    assert entry.address_of("localhost", {}) == "127.0.0.1"  # DNS otherwise
    with pytest.raises(ValueError, match="HOST=ADDRESS"):
        entry.parse_host_map("algo-1")


def test_ray_start_argv():
    head = entry.ray_start_argv(node_ip="10.0.0.1", port=6379, group="learner", dashboard=True)
    assert head[head.index("--node-ip-address") + 1] == "10.0.0.1"
    assert "--head" in head and head[head.index("--port") + 1] == "6379"
    assert head[head.index("--dashboard-host") + 1] == "127.0.0.1"  # never on the network
    assert "--block" in head and "--disable-usage-stats" in head
    # The head hands every node rlsweep's RayConfig: no workers prestarted for the first driver.
    (config,) = [json.loads(a.split("=", 1)[1]) for a in head if a.startswith("--system-config=")]
    assert config == SYSTEM_CONFIG
    assert json.loads(head[head.index("--resources") + 1]) == {"group_learner": 1}
    assert head[head.index("--labels") + 1] == "sagemaker-group=learner"
    worker = entry.ray_start_argv(
        node_ip="10.0.0.2",
        port=6379,
        head_address="10.0.0.1:6379",
        group="rollout group",
        rollout=True,
        num_cpus=4,
        ports={"dashboard-agent-listen-port": 50001},
    )
    assert "--head" not in worker and worker[worker.index("--address") + 1] == "10.0.0.1:6379"
    assert not any(a.startswith("--system-config") for a in worker)  # the head's to set
    assert "--dashboard-host" not in worker and worker[worker.index("--num-cpus") + 1] == "4"
    resources = json.loads(worker[worker.index("--resources") + 1])
    assert resources == {"group_rollout_group": 1, entry.ROLLOUT_RESOURCE: 1}
    assert worker[worker.index("--dashboard-agent-listen-port") + 1] == "50001"
    assert len(set(entry.free_ports(5))) == 5


def test_ray_auth_is_explicit(tmp_path):
    assert entry.ray_auth_env(None) == {"RAY_AUTH_MODE": "disabled"}
    env = entry.ray_auth_env(str(tmp_path / "token"))
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"].endswith("token")


def test_sagemaker_arguments_are_accepted():
    """SageMaker passes hyperparameters as `--head_group value`: both spellings parse."""
    argv = ["--spec", "s.yaml", "--head_group", "learner", "--storage", "/x", "--time_limit", "60"]
    args = entry.parse_args(argv)
    assert args.head_group == "learner" and args.storage == "/x" and args.time_limit == 60
    assert args.checkpoint_dir == CHECKPOINT_DIR and args.dashboard
    assert entry.load_trainable("rlsweep.testing:fake_trial").__name__ == "fake_trial"


def test_a_jobs_sweep_stops_itself_inside_its_time_limit_and_says_how_to_go_on(
    tmp_path, monkeypatch
):
    """The head's sweep under `--time_limit` (the request's max_run less a margin), counted
    from the entry's start: the trials checkpoint and stop in time, exit code 3, and the
    summary and SageMaker's failure reason say where it stopped and how to go on. Real Tune,
    the fake trainable, local Ray (the bootstrap is the test below)."""
    import ray

    from rlsweep.experiment.interrupt import SHUTDOWN_S
    from rlsweep.spec.spec import SweepSpec
    from rlsweep.testing import ITER_S_ENV, fake_trial

    if ray.is_initialized():
        ray.shutdown()
    spec = SweepSpec(
        name="sm-limited",
        games=["coinrun"],
        seeds=[0, 1],
        budget=30 * 16384,
        params={"checkpoint_interval": 4},
    )
    monkeypatch.setenv(ITER_S_ENV, "0.4")  # 12 s a trial: the limit falls mid-way
    limit = SHUTDOWN_S + 20
    argv = ["--spec", "sm.yaml", "--time_limit", str(limit)]
    argv += ["--checkpoint-dir", str(tmp_path / "ckpt"), "--model-dir", str(tmp_path / "model")]
    args = entry.parse_args([*argv, "--output-dir", str(tmp_path / "output")])
    args.started, args.trainable_fn = time.monotonic() - 5, fake_trial  # bootstrap took 5 s
    start = time.monotonic()
    assert entry.sweep(args, spec, None, {"head": "algo-1"}) == 3
    assert time.monotonic() - start < limit - 5
    summary = json.loads((tmp_path / "model" / "summary.json").read_text())
    # Stopped before the end (on a loaded machine, before the trials' first result even).
    assert set(summary["statuses"]) <= {"INCOMPLETE"} and summary["head"] == "algo-1"
    # What was left of the limit after the 5 s before the sweep (formatted to the second).
    assert re.match(
        rf"time limit ({limit - 6:.0f}|{limit - 5:.0f})s: sweep sm-limited", summary["stopped"]
    )
    assert "same checkpoint S3 URI" in summary["go_on"]
    failure = (tmp_path / "output" / "failure").read_text()
    assert failure.startswith("rlsweep: time limit") and "submit the job again" in failure
    assert "rlsweep resume" not in failure  # a SageMaker job goes on by a new job


def test_a_restarted_spot_job_counts_its_time_limit_over_its_attempts(tmp_path, monkeypatch):
    """A managed spot job restarted after an interruption keeps its checkpoint dir: the job
    clock there says how long the head ran before, and the sweep gets the limit less that; a
    clock of another job (a new job on the same checkpoint URI) counts nothing. The clock is
    written while the sweep runs and at its end."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / entry.JOB_CLOCK).write_text('{"job": "pool-spot-1", "run_s": 1200.0}\n')
    monkeypatch.setenv("TRAINING_JOB_NAME", "pool-spot-1")
    monkeypatch.setattr(entry, "CLOCK_EVERY_S", 0.05)
    seen = {}

    class Stop(Exception):
        pass

    def run(spec, *, address, storage, trainable, time_limit):
        seen["time_limit"] = time_limit
        time.sleep(0.3)  # the clock ticks meanwhile
        seen["ticked"] = json.loads((ckpt / entry.JOB_CLOCK).read_text())["run_s"]
        raise Stop

    monkeypatch.setattr(entry, "run", run)
    argv = ["--spec", "sm.yaml", "--time_limit", "3300", "--checkpoint-dir", str(ckpt)]
    args = entry.parse_args(argv)
    args.started, args.trainable_fn = time.monotonic() - 60, None  # the bootstrap took 60 s
    with pytest.raises(Stop):
        entry.sweep(args, None, None, {})
    assert 3300 - 1260 - 2 < seen["time_limit"] <= 3300 - 1260
    assert seen["ticked"] >= 1260.2
    final = json.loads((ckpt / entry.JOB_CLOCK).read_text())
    assert final["job"] == "pool-spot-1" and final["run_s"] >= 1260.3
    monkeypatch.setenv("TRAINING_JOB_NAME", "pool-spot-2")  # a new job: its own max_run
    args.started = time.monotonic()
    with pytest.raises(Stop):
        entry.sweep(args, None, None, {})
    assert 3300 - 2 < seen["time_limit"] <= 3300


# --- the bootstrap: two "hosts" on 127.0.0.1 ----------------------------------------------------
def _tagged_pids(tag: str) -> list[int]:
    """Processes whose environment carries `tag` (everything the two entry processes started:
    Ray's processes and its renamed workers inherit the environment)."""
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if tag.encode() in environ.read_bytes():
                pids.append(int(environ.parent.name))
    return pids


def test_bootstrap_two_hosts_runs_the_sweep(tmp_path):
    spec = tmp_path / "sm.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "sm",
                "games": ["coinrun"],
                "seeds": [0, 1],
                "budget": 1024,
                "params": {
                    "num_envs_per_env_runner": 8,
                    "rollout_length": 64,
                    "minibatch_size": 256,
                    "num_cpus": 1,
                },
            }
        )
    )
    groups = [
        {"instance_group_name": "learner", "instance_type": "ml.g5.xlarge", "hosts": ["algo-1"]},
        {"instance_group_name": "rollout", "instance_type": "ml.c5.xlarge", "hosts": ["algo-2"]},
    ]
    ckpt, model = tmp_path / "checkpoints", tmp_path / "model"
    # Short: Ray's socket paths under it must stay within the OS's limit.
    ray_tmp = Path(tempfile.mkdtemp(prefix="rsm", dir="/tmp"))
    tag = f"RLSWEEP_SM_TEST={ray_tmp.name}"
    env = {**os.environ, **FAKE_SECRETS, "RLSWEEP_SM_TEST": ray_tmp.name}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    port = entry.free_ports(1)[0]
    procs: dict[str, subprocess.Popen] = {}
    logs: dict[str, Path] = {}
    try:
        for host, group in (("algo-1", "learner"), ("algo-2", "rollout")):
            config = {"current_host": host, "current_group_name": group}
            config |= {"hosts": ["algo-1", "algo-2"], "instance_groups": groups}
            (tmp_path / f"{host}.json").write_text(json.dumps(config))
            argv = [sys.executable, "-m", "rlsweep.launch.sagemaker_entry", "--spec", str(spec)]
            argv += ["--resource-config", str(tmp_path / f"{host}.json"), "--head_group", "learner"]
            argv += ["--host-map", "algo-1=127.0.0.1,algo-2=127.0.0.1", "--port", str(port)]
            argv += ["--checkpoint-dir", str(ckpt), "--model-dir", str(model)]
            argv += ["--trainable", "rlsweep.testing:fake_trial", "--num-cpus", "1"]
            argv += ["--object-store-memory", str(100 * 2**20), "--temp-dir", str(ray_tmp / host)]
            argv += ["--no-dashboard", "--join-timeout", "90", "--head-gone-s", "2"]
            logs[host] = tmp_path / f"{host}.log"
            with open(logs[host], "wb") as out:
                procs[host] = subprocess.Popen(
                    argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
        deadline = time.monotonic() + 150
        codes = {}
        for host, proc in procs.items():
            try:
                codes[host] = proc.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                codes[host] = "timeout"
        text = {host: log.read_text(errors="replace") for host, log in logs.items()}
        assert codes == {"algo-1": 0, "algo-2": 0}, text["algo-1"][-3000:] + text["algo-2"][-3000:]

        summary = json.loads((model / "summary.json").read_text())
        assert summary["statuses"] == {"TERMINATED": 2} and summary["trials"] == 2
        assert summary["head"] == "algo-1" and summary["storage"] == str(ckpt)
        resources = [n["resources"] for n in summary["nodes"]]
        assert len(resources) == 2  # both hosts joined before the sweep
        assert {"group_learner", "group_rollout"} <= {k for r in resources for k in r}
        # Only the rollout group's node takes EnvRunners.
        assert [entry.ROLLOUT_RESOURCE in r for r in resources].count(True) == 1
        assert all(("group_rollout" in r) == (entry.ROLLOUT_RESOURCE in r) for r in resources)
        assert sum(r.get("CPU", 0) for r in resources) == 2
        assert "is the head" in text["algo-1"] and "head 127.0.0.1" in text["algo-2"]

        import pandas as pd

        trials = pd.read_csv(model / "trials.csv")
        assert (trials["status"] == "TERMINATED").all() and len(trials) == 2
        for trial_dir in trials["trial_dir"]:
            assert Path(trial_dir).is_relative_to(ckpt / "sm")
            assert (Path(trial_dir) / "result.json").stat().st_size > 0

        # No credentials in anything written: logs, results, summary.
        written = [*logs.values(), *ckpt.rglob("*"), *model.rglob("*")]
        leaked = [
            str(f)
            for f in written
            if f.is_file() and any(v.encode() in f.read_bytes() for v in FAKE_SECRETS.values())
        ]
        assert not leaked

        # Each host stopped its own Ray: nothing the two processes started is left.
        deadline = time.monotonic() + 20
        while (left := _tagged_pids(tag)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not left, f"Ray processes left behind: {left}"
    finally:
        for proc in procs.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for pid in _tagged_pids(tag):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for proc in procs.values():
            proc.wait()
        shutil.rmtree(ray_tmp, ignore_errors=True)
