"""Sweeps on a real multi-node Ray cluster on this machine: `run_sweep(address=...)` joins it and
trials run on all its nodes; a trial whose node is killed mid-run (a spot reclaim) resumes from
its last checkpoint on a node that survived.

The cluster is `ray.cluster_utils.Cluster`: each node is its own raylet (and object store and
workers), the head also runs the GCS. The head has no CPUs, as the driver's machine of a real
cluster often has none to spare: trials can only run on the two 1-CPU worker nodes. Storage is a
local dir, which on one machine every node shares (Ray checks that a node sees the experiment
dir before it uploads a checkpoint from there; the check passes).

Plumbing: the trials are `rlsweep.testing.fake_trial`, pausing `ITER_S` per iteration so that
they overlap and can be killed mid-way; one test runs a real RLlib trial through the CLI.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import ray
import ray._common.utils
import ray._private.utils
from ray._private.node import Node
from ray.cluster_utils import Cluster

from rlsweep import metrics as M
from rlsweep.experiment.experiment_dir import RUN_FILE
from rlsweep.results.results import final_scores, load_curves
from rlsweep.run.sweep import run_sweep
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import SweepSpec
from rlsweep.testing import ITER_S_ENV, fake_trial

ITER_S = 0.5
"""Seconds per fake iteration."""
PER_ITER = TrialConfig().effective_train_batch_size
"""Env steps per iteration (a fake trial with the default TrialConfig)."""

# When the GCS declares a silent node dead: after 3 missed health checks 0.5 s apart, so that Tune
# hears of a killed node within seconds (Ray's defaults: 5 missed, 3 s apart).
FAST_NODE_DEATH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}


@dataclass
class LocalCluster:
    cluster: Cluster

    @property
    def address(self) -> str:
        return self.cluster.address

    @property
    def workers(self) -> list[Node]:
        return sorted(self.cluster.worker_nodes, key=lambda n: n.node_id)

    def add_worker(self) -> Node:
        return self.cluster.add_node(num_cpus=1)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A head (0 CPUs) and two worker nodes (1 CPU each), all on this machine.

    Kept apart from any other Ray on the machine: its own temp dir, and it neither writes nor
    deletes /tmp/ray/ray_current_cluster (where `Cluster` records itself, and where a plain
    `ray.init()` elsewhere would find it and join it)."""
    mp = pytest.MonkeyPatch()
    # Node processes inherit the environment, and trial processes the raylet's.
    mp.setenv(ITER_S_ENV, str(ITER_S))
    mp.setattr(ray._private.utils, "write_ray_address", lambda *a, **k: None)
    mp.setattr(ray._common.utils, "reset_ray_address", lambda *a, **k: None)
    temp_dir = tempfile.mkdtemp(prefix="rlsw-", dir="/tmp")  # short: Unix socket paths
    local = Cluster()
    try:
        local.add_node(  # the first node is the head
            num_cpus=0,
            include_dashboard=False,
            temp_dir=temp_dir,
            _system_config=FAST_NODE_DEATH,
        )
        for _ in range(2):
            local.add_node(num_cpus=1)
        local.wait_for_nodes()
        yield LocalCluster(local)
    finally:
        local.shutdown()
        mp.undo()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _rows(trial_dir: str | Path) -> list[dict[str, Any]]:
    """result.json's rows in file order (one per reported iteration)."""
    path = Path(trial_dir) / "result.json"
    lines = path.read_text().splitlines() if path.exists() else []
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            break
    return rows


def test_joined_cluster_runs_trials_on_all_its_nodes(cluster: LocalCluster, tmp_path: Path):
    """`run_sweep(address=...)` runs the sweep on an already running multi-node cluster: its 4
    trials (1 CPU each, 2 at a time) run on both worker nodes (never on the CPU-less head), all
    finish, and the sweep records the address it ran on; the driver leaves, the cluster stays up."""
    spec = SweepSpec(
        name="placed",
        games=["coinrun"],
        seeds=[0, 1, 2, 3],
        budget=3 * PER_ITER,
        storage_path=str(tmp_path),
    )
    result = run_sweep(spec, address=cluster.address, trainable=fake_trial)

    df = result.trials
    assert len(df) == 4
    assert (df["status"] == "TERMINATED").all() and (df["env_steps"] == spec.budget).all()
    placed = []
    for trial_dir in df["trial_dir"]:
        nodes = {row[M.NODE_ID] for row in _rows(trial_dir)}
        assert len(nodes) == 1, "each trial ran start to end on one node"
        placed.append(nodes.pop())
    workers = {n.node_id for n in cluster.workers}
    assert set(placed) == workers, "trials ran on both worker nodes, and only there"

    run = json.loads((Path(result.path) / RUN_FILE).read_text())
    assert run["ray_address"] == cluster.address
    assert not ray.is_initialized(), "run_sweep disconnected its driver"
    assert cluster.cluster.remaining_processes_alive(), "and left the cluster running"


@dataclass
class Kill:
    """What the killer saw when it killed the trial's node."""

    node_id: str = ""
    steps_seen: int = 0
    """env_steps of the last row in storage's result.json then (each row has a checkpoint)."""
    steps_checkpointed: int = 0
    """env_steps of the newest checkpoint in storage just after the node died."""
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


def _kill_node_mid_trial(
    cluster: LocalCluster, experiment: Path, kill: Kill, *, min_rows: int, timeout_s: float
) -> None:
    """Once the (only) trial has `min_rows` rows in storage, kill the node it runs on, as a spot
    reclaim does: every process of the node at once, no graceful shutdown."""
    try:
        deadline = time.monotonic() + timeout_s
        while not kill.done.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no trial reached {min_rows} rows in {timeout_s} s")
            trial_dirs = list(experiment.glob("coinrun_*"))
            if trial_dirs and len(rows := _rows(trial_dirs[0])) >= min_rows:
                kill.node_id = rows[-1][M.NODE_ID]
                kill.steps_seen = rows[-1][M.ENV_STEPS]
                (node,) = [n for n in cluster.workers if n.node_id == kill.node_id]
                _kill_node(cluster.cluster, node)
                kill.steps_checkpointed = _newest_checkpoint_steps(trial_dirs[0])
                kill.done.set()
            time.sleep(0.05)
    except BaseException as e:  # re-raised by the test
        kill.error = e
        kill.done.set()


def _kill_node(cluster: Cluster, node: Node) -> None:
    """SIGKILL every process of `node` at once, its workers included, as a spot reclaim ends
    them all. (`Cluster.remove_node` alone kills the node's own processes, raylet and agents, but
    not the worker processes the raylet started: a trial's worker lives on for a moment, enough
    to report another checkpointed iteration to the driver.)"""
    own = [info.process.pid for infos in node.all_processes.values() for info in infos]
    for pid in [*own, *(child for parent in own for child in _descendants(parent))]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    cluster.remove_node(node, allow_graceful=False)  # reaps the node's processes, forgets it


def _descendants(pid: int) -> list[int]:
    """The processes `pid` started, and theirs (from /proc: the stat file's 4th field)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])  # after "pid (comm) state"
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _newest_checkpoint_steps(trial_dir: Path) -> int:
    steps = [0]
    for state in trial_dir.glob("checkpoint_*/state.json"):
        try:
            steps.append(json.loads(state.read_text())["env_steps"])
        except (OSError, ValueError, KeyError):  # being written or deleted
            continue
    return max(steps)


def test_trial_on_a_killed_node_resumes_from_its_checkpoint_on_another(
    cluster: LocalCluster, tmp_path: Path
):
    """The spot case: one trial (checkpointing every iteration) runs on worker node A; A is killed
    mid-trial. Tune retries the trial (`max_failures`) on worker node B from A's last checkpoint:
    B's first iteration continues A's env-step count instead of starting again from zero, B does
    the rest of the budget and nothing twice, and the trial counts as finished (recovered)."""
    workers = {n.node_id for n in cluster.workers}
    assert len(workers) == 2
    iterations = 12
    spec = SweepSpec(
        name="spot",
        games=["coinrun"],
        seeds=[0],
        budget=iterations * PER_ITER,
        params={"checkpoint_interval": 1},
        storage_path=str(tmp_path),
    )
    kill = Kill()
    killer = threading.Thread(
        target=_kill_node_mid_trial,
        args=(cluster, tmp_path / spec.name, kill),
        kwargs={"min_rows": 3, "timeout_s": 60},
        daemon=True,
    )
    killer.start()
    try:
        result = run_sweep(spec, address=cluster.address, trainable=fake_trial, max_failures=2)
    finally:
        kill.done.set()
        killer.join(timeout=30)
        while len(cluster.workers) < 2:  # the module's cluster whole again
            cluster.add_worker()
    if kill.error is not None:
        raise kill.error
    assert kill.node_id, "the trial finished before its node was killed"

    (trial,) = result.trials.to_dict("records")
    assert trial["status"] == "TERMINATED" and trial["env_steps"] == spec.budget

    # result.json, in file order: A's rows, then B's. (Rows A reported after the driver's last
    # sync to storage would be missing: restarting a trial, Tune replaces the driver's
    # result.json with the copy in storage before appending.)
    rows = _rows(trial["trial_dir"])
    nodes = [row[M.NODE_ID] for row in rows]
    on_a = nodes.index(next(n for n in nodes if n != kill.node_id))
    before, after = rows[:on_a], rows[on_a:]
    assert set(nodes[:on_a]) == {kill.node_id} and len(before) >= 3
    assert set(nodes[on_a:]) == workers - {kill.node_id}, "the rest ran on the other worker node"
    assert [r[M.ENV_STEPS] for r in before] == [PER_ITER * (i + 1) for i in range(on_a)]

    # B starts from A's newest checkpoint, not from zero: at least the last row seen before the
    # kill (every row came with a checkpoint), at most the newest checkpoint A left in storage.
    # Then B does the rest of the budget, nothing twice.
    resumed_from = after[0][M.ENV_STEPS] - PER_ITER
    assert kill.steps_seen <= resumed_from <= kill.steps_checkpointed
    assert resumed_from >= before[-1][M.ENV_STEPS] >= 3 * PER_ITER
    assert [r[M.ENV_STEPS] for r in after] == list(
        range(resumed_from + PER_ITER, spec.budget + 1, PER_ITER)
    )
    assert all(r["training_iteration"] == r[M.ENV_STEPS] // PER_ITER for r in rows)

    # rlsweep's loader: finished, with the crash it recovered from noted.
    (final,) = final_scores(load_curves(result.path)).to_dict("records")
    assert final["status"] == "TERMINATED" and final[M.ENV_STEPS] == spec.budget
    assert final["error"].startswith("recovered after: ")


@pytest.mark.rllib
def test_cli_runs_a_real_trial_on_the_joined_cluster(cluster: LocalCluster, tmp_path: Path):
    """`rlsweep run --address` from a shell: a real RLlib PPO trial on real Procgen, on a worker
    node of the running cluster (1 CPU), to its budget; the CLI leaves the cluster up."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: joined\ngames: [leaper]\nseeds: [0]\nbudget: 512\n"
        f"storage_path: {tmp_path}\n"
        "params: {num_envs_per_env_runner: 16, rollout_length: 16, minibatch_size: 128,\n"
        "         num_epochs: 1, eval_episodes: 4}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "rlsweep.cli", "run", str(spec), "--address", cluster.address],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "TERMINATED" in proc.stdout
    (trial_dir,) = [p for p in (tmp_path / "joined").iterdir() if p.name.startswith("leaper_s0")]
    rows = _rows(trial_dir)
    assert rows[-1][M.ENV_STEPS] >= 512 and rows[-1][M.TRIAL_DONE]
    assert math.isfinite(rows[-1]["loss/total"]), "a real PPO update (the fake trial has none)"
    assert {r[M.NODE_ID] for r in rows} <= {n.node_id for n in cluster.workers}
    run = json.loads((tmp_path / "joined" / RUN_FILE).read_text())
    assert run["ray_address"] == cluster.address
    assert cluster.cluster.remaining_processes_alive()
