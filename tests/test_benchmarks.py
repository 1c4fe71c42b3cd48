"""benchmarks/throughput.py's statistics: the ratio's interval, the verdict read from it, the
ratio's split into the share of the machine and the work per step, and the side-by-side mode's
common window and core pinning; benchmarks/gpu.py's record, written stage by stage;
benchmarks/plan_costs.py's figures from its measurements; benchmarks/learning.py's reference arm
stopped by its time limit and resumed; benchmarks/suite_cpu.py's CPU time by kind of process;
benchmarks/eval_lengths.py's evaluation of an untrained policy."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import suite_cpu  # noqa: E402
from plan_costs import SHAPES, costs, parts  # noqa: E402
from throughput import (  # noqa: E402
    Run,
    cores_used,
    cpu_ms,
    pinned,
    pooled,
    ratio_interval,
    side_by_side,
    verdict,
)

T_975_DF3 = 3.182446305284263
"""Student's t, 97.5th percentile, 3 degrees of freedom (printed tables: 3.182)."""


def test_ratio_interval_is_a_t_interval_on_log_ratios():
    # make bench's four rounds on 2026-11-25 (trial and peer env-steps/s per round).
    trial, peer = [124.4, 125.6, 122.2, 112.9], [147.2, 140.7, 123.8, 124.4]
    logs = [math.log(t / p) for t, p in zip(trial, peer, strict=True)]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    center, low, high = ratio_interval(trial, peer)
    assert center == pytest.approx(math.exp(mean), rel=1e-12)
    assert low == pytest.approx(math.exp(mean - T_975_DF3 * sd / 2), rel=1e-9)
    assert high == pytest.approx(math.exp(mean + T_975_DF3 * sd / 2), rel=1e-9)
    assert (round(center, 2), round(low, 2), round(high, 2)) == (0.91, 0.82, 1.0)


def test_equal_ratios_have_a_zero_width_interval_and_one_round_none():
    assert ratio_interval([98, 196], [100, 200]) == pytest.approx((0.98, 0.98, 0.98))
    center, low, high = ratio_interval([98], [100])
    assert center == pytest.approx(0.98) and math.isnan(low) and math.isnan(high)


def test_verdict_reads_the_whole_interval():
    assert verdict(0.96, 1.02, 0.95).endswith("yes (the whole 95% interval)")
    assert "no (the whole 95% interval is below)" in verdict(0.85, 0.94, 0.95)
    assert "not decided" in verdict(0.93, 0.99, 0.95)
    assert "--rounds 3" in verdict(math.nan, math.nan, 0.95)


def _run(arm: str, env_steps: float, seconds: float, cpu_s: float) -> Run:
    return Run(arm, env_steps, seconds, cpu_s, [seconds], [env_steps], seconds + 30, (0.0, 0.0))


def test_the_pooled_ratio_is_the_share_of_cores_times_the_work_per_step():
    # The trial keeps 1.88 of 2 cores busy (Ray's daemons take the rest), the peer 1.95, and
    # the trial spends 1% more CPU per step.
    trial = [_run("trial", 4096, 30.0, 1.88 * 30.0), _run("trial", 8192, 66.0, 1.88 * 66.0)]
    peer = [_run("peer", 4096, 28.0, 1.95 * 28.0 / 1.01), _run("peer", 4096, 29.0, 1.95 * 29.0)]
    assert cores_used(trial) == pytest.approx(1.88)
    share = cores_used(trial) / cores_used(peer)
    work = cpu_ms(peer) / cpu_ms(trial)
    assert pooled(trial) / pooled(peer) == pytest.approx(share * work)
    assert share < 1 and work < 1


def _timed(arm: str, ends: list[float], seconds: float = 10.0) -> Run:
    """Iterations `seconds` long of 100 steps and 15 CPU-seconds each, ending at `ends`."""
    n = len(ends)
    return Run(
        arm,
        100.0 * n,
        seconds * n,
        15.0 * n,
        [seconds] * n,
        [100.0] * n,
        99.0,
        (0.0, 0.0),
        iteration_end=list(ends),
        iteration_cpu_s=[15.0] * n,
    )


def test_side_by_side_keeps_only_iterations_inside_both_arms_timed_span():
    # The trial starts its timed iterations at t=1000 (Ray's start-up and its warm-up before);
    # the peer started earlier and trains on after the trial's last timed iteration (t=1040).
    trial = _timed("trial", [1010, 1020, 1030, 1040])
    peer = _timed("peer", [995, 1005, 1015, 1025, 1035, 1045, 1055])
    t, q = side_by_side(trial, peer)
    assert t.iteration_end == [1010, 1020, 1030, 1040]  # the whole window [1000, 1040] is its
    assert q.iteration_end == [1015, 1025, 1035]  # 995-1005 and 1035-1045 straddle an edge
    assert (q.env_steps, q.seconds, q.cpu_s) == (300.0, 30.0, 45.0)
    assert q.iteration_steps == [100.0] * 3 and q.iteration_cpu_s == [15.0] * 3
    assert peer.env_steps == 700.0  # the originals are left as they were


def test_side_by_side_refuses_runs_that_never_overlapped():
    with pytest.raises(RuntimeError, match="no timed iteration inside"):
        side_by_side(_timed("trial", [1010, 1020]), _timed("peer", [2010, 2020]))


def test_pinned_confines_the_command_and_its_children_to_one_core():
    core = max(os.sched_getaffinity(0))
    child = "import os, subprocess, sys; print(sorted(os.sched_getaffinity(0)))"
    grandchild = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    out = subprocess.run(
        pinned([sys.executable, "-c", grandchild], core), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"[{core}]"
    assert pinned(["true"], None) == ["true"]


def test_the_gpu_benchmark_writes_each_stage_as_it_ends(tmp_path, monkeypatch):
    """A run cut short keeps what it finished: every line is in gpu.txt and the JSON record as
    soon as it is printed, and a failed stage is recorded without stopping the next."""
    import json

    from gpu import Record, Setup

    monkeypatch.setenv("OUT", str(tmp_path))
    rec = Record(Setup(device="cpu"), quick=True, header="header")
    rec.say("header", "(a) 1,000")
    assert (tmp_path / "gpu_quick.txt").read_text() == "header\n(a) 1,000\n"
    rec.data["packed"]["1"] = 9e3
    assert rec.stage("(b)", lambda: 1 / 0) is None
    assert rec.stage("K=1", lambda: 42) == 42
    assert rec.failed == ["(b)"]
    assert "(b) FAILED after 0 s: division by zero" in (tmp_path / "gpu_quick.txt").read_text()
    saved = json.loads((tmp_path / "gpu_quick.json").read_text())
    assert saved["packed"] == {"1": 9e3} and saved["errors"] == {"(b)": "division by zero"}


def test_plan_costs_parts_solve_the_shapes_and_scale_to_the_sweep():
    """Iteration times made from known parts give those parts back; scaled so that the sweep's
    3-epoch trial (6 iterations, evaluating at 3 and 6: 2 x 2 splits x 32 envs x coinrun's
    1,000 steps each) gets the training time it took, in a sweep 30 s longer than it."""
    from rlsweep.plan.plan import Costs
    from rlsweep.spec.config import TrialConfig

    known = {
        "vector_step_s": 0.004,
        "env_step_s": 0.001,
        "minibatch_s": 0.05,
        "sample_s": 0.002,
        "iteration_s": 0.3,
    }
    fixed = {"eval_steps_per_cpu_s": 1.0, "trial_start_s": 0.0, "ray_start_s": 0.0}
    made = Costs(**known, **fixed)
    times = {}
    for name, (envs, rollout, minibatch, epochs) in SHAPES.items():
        cfg = TrialConfig(
            num_envs_per_env_runner=envs,
            rollout_length=rollout,
            minibatch_size=minibatch,
            num_epochs=epochs,
            total_env_steps=envs * rollout,
        )
        times[name] = made.iteration(cfg)
    assert parts(times) == pytest.approx(known)

    three = {"num_epochs": 3, "env_steps": 6144, "iterations": 6, "wall_s": 100.0, "eval_s": 40.0}
    one = {**three, "num_epochs": 1, "wall_s": 80.0}
    sweep = {"sweep_wall_s": 130.0, "trials": [three, one]}
    figures = costs(ray_s=8.0, sweep=sweep, training=known)
    demo = TrialConfig(num_envs_per_env_runner=16, rollout_length=64, minibatch_size=512)
    assert Costs(**figures).iteration(demo) == pytest.approx(60 / 6)  # the trial's 60 s
    factor = 10 / made.iteration(demo)
    assert figures == pytest.approx(
        {k: v * factor for k, v in known.items()}
        | {"eval_steps_per_cpu_s": 4 * 64_000 / 80, "trial_start_s": 30.0, "ray_start_s": 8.0}
    )


# --- benchmarks/learning.py: the reference arm, stopped in time and resumed ---------------------
def _tiny_lars12llt(seed: int = 0):
    from rlsweep.spec.config import TrialConfig
    from rlsweep.spec.spec import load_baseline

    small = {
        "num_envs_per_env_runner": 4,
        "rollout_length": 16,
        "train_batch_size": 64,
        "minibatch_size": 32,
        "num_epochs": 1,
    }
    base = {**load_baseline("lars12llt"), **small}
    return TrialConfig(**base, game="bigfish", eval_episodes=2, seed=seed)


def test_the_reference_arm_stops_in_time_saves_and_goes_on_to_its_end(tmp_path):
    # learning.py --plain-only --time-limit S --state DIR: where the next iteration would not
    # end before the limit, the run saves what it learned and drew, and stops; run again, it
    # goes on from there to the budget, with every evaluation a whole run makes (iterations 2
    # and 4; an iteration samples 64 real env steps and at most 3 more).
    from types import SimpleNamespace

    from learning import run_plain

    args = SimpleNamespace(baseline="lars12llt", threads=1, device="cpu", eval_every=2)
    budget, state = 4 * 64, tmp_path / "plain.pt"
    assert (
        run_plain(_tiny_lars12llt(), budget, args, deadline=time.monotonic(), state=state) is None
    )
    saved = torch.load(state, weights_only=False)
    assert (saved["done"], saved["iteration"], saved["rows"]) == (False, 1, [])
    assert saved["ppo"]["env_steps"] >= 64 and saved["run"]["seed"] == 0
    resumed = run_plain(_tiny_lars12llt(), budget, args, deadline=None, state=state)
    assert [r["env_steps"] // 64 for r in resumed] == [2, 4] and resumed[-1]["env_steps"] >= budget
    assert all(set(r) == {"env_steps", "train/return", "test/return"} for r in resumed)
    assert torch.load(state, weights_only=False)["done"]
    assert run_plain(_tiny_lars12llt(), budget, args, state=state) == resumed  # ended: at once
    with pytest.raises(SystemExit, match="the state of another run"):
        run_plain(_tiny_lars12llt(seed=1), budget, args, state=state)


def test_the_reference_arm_saves_as_it_goes_and_resumes_only_from_a_state(tmp_path, monkeypatch):
    """A GPU sitting's call may be cut off from outside: the run saves every SAVE_EVERY_S, not
    only before it stops itself (a kill lost everything since the start). `--resume` refuses
    a missing state (a call whose carried state did not come in started over in silence)."""
    from types import SimpleNamespace

    import learning
    from plain_ppo import PlainPPO

    args = SimpleNamespace(baseline="lars12llt", threads=1, device="cpu", eval_every=2)
    state = tmp_path / "plain.pt"
    with pytest.raises(SystemExit, match="no state to resume"):
        learning.run_plain(
            _tiny_lars12llt(), 4 * 64, SimpleNamespace(**vars(args), resume=True), state=state
        )
    monkeypatch.setattr(learning, "SAVE_EVERY_S", -1.0)  # every iteration
    trained = PlainPPO.train_iteration
    calls = []

    def killed_at_the_third(self):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the call cut off
        return trained(self)

    monkeypatch.setattr(PlainPPO, "train_iteration", killed_at_the_third)
    with pytest.raises(KeyboardInterrupt):  # under a time limit, as on a device call
        learning.run_plain(_tiny_lars12llt(), 8 * 64, args, time.monotonic() + 3600, state)
    saved = torch.load(state, weights_only=False)
    assert (saved["done"], saved["iteration"]) == (False, 2)  # saved before the third


def test_a_reference_loop_given_anothers_state_holds_what_it_learned_and_drew():
    from plain_ppo import PlainPPO, PPOArgs

    args = PPOArgs.of_trial(_tiny_lars12llt(), num_threads=1)
    a = PlainPPO(args)
    a.train_iteration()
    b = PlainPPO(args)
    try:
        b.load_state_dict(a.state_dict())
        sa, sb = a.state_dict(), b.state_dict()
        assert sb["kl_coeff"] == sa["kl_coeff"] != args.kl_coeff  # adapted after one update
        assert sb["env_steps"] == sa["env_steps"] > 0 and sb["normalizer"] == sa["normalizer"]
        assert all(torch.equal(sa["net"][k], v) for k, v in sb["net"].items())
        steps = [s["step"] for s in sa["optimizer"]["state"].values()]
        assert [s["step"] for s in sb["optimizer"]["state"].values()] == steps != []
        assert torch.equal(b.generator.get_state(), a.generator.get_state())
    finally:
        a.close()
        b.close()


def test_a_processs_kind_is_its_ray_name_or_what_its_command_runs():
    worker = "/v/bin/python /v/ray/_private/workers/default_worker.py --node-ip-address=1"
    assert suite_cpu.kind("python", worker) == "ray worker (starting)"
    assert suite_cpu.kind("ray::ImplicitFu", "ray::ImplicitFunc.train") == "ray::ImplicitFunc"
    assert suite_cpu.kind("ray::IDLE", "ray::IDLE") == "ray::IDLE"
    assert suite_cpu.kind("python", "python -m rlsweep.cli run s.yaml") == "rlsweep CLI"
    assert suite_cpu.kind("xz", "xz -0") == "xz"
    assert suite_cpu.kind("python", f"/v/bin/python -c {suite_cpu.XDIST}") == "pytest-xdist worker"
    assert suite_cpu.kind("python", "python -u /v/ray/_private/log_monitor.py --x") == (
        "ray: log_monitor"
    )
    # What it runs, not what its arguments name.
    assert suite_cpu.kind("python", "python /tmp/pytest-of-root/pytest-1/child.py") == "python"


def test_suite_cpu_counts_a_child_that_outlives_its_parent(tmp_path):
    """A command whose child outlives its parent (as Ray's workers outlive the raylet that
    started them) and burns CPU after the parent exited: counted all the same, under its kind,
    and the command's exit code passed on."""
    (tmp_path / "child.py").write_text(
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 1:\n    pass\n"
    )
    child = [sys.executable, str(tmp_path / "child.py")]
    (tmp_path / "parent.py").write_text(f"import subprocess\nsubprocess.Popen({child!r})\n")
    out = tmp_path / "cpu.json"
    argv = [sys.executable, str(Path(suite_cpu.__file__)), "--every", "0.1", "--json", str(out)]
    argv += ["--", "sh", "-c", f"{sys.executable} {tmp_path / 'parent.py'}; sleep 2; exit 3"]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert run.returncode == 3, run.stderr
    record = json.loads(out.read_text())
    assert record["wall_s"] >= 2 and record["busy_cpu_s"] >= 1
    python = Path(sys.executable).name[:15]  # the name the kernel keeps (/proc/PID/comm)
    assert record["kinds"].get(python, {}).get("cpu_s", 0) >= 0.9, record  # the child's second


def test_suite_cpu_per_test_gives_each_test_the_cpu_it_burned(tmp_path):
    """`--per-test`: a pytest run in one process, `-p suite_cpu` added for it; a line per test
    with the machine's busy CPU seconds from its setup to its teardown, a fixture's included,
    and the largest printed. A test that spins 0.5 CPU-s gets at least that; one that sleeps
    gets its wall time."""
    (tmp_path / "test_burn.py").write_text(
        "import time\nimport pytest\n\n"
        "def spin(seconds):\n    t = time.process_time()\n"
        "    while time.process_time() - t < seconds:\n        pass\n\n"
        "@pytest.fixture\ndef warm():\n    spin(0.25)\n\n"
        "def test_spins(warm):\n    spin(0.25)\n\n"
        "def test_sleeps():\n    time.sleep(0.5)\n"
    )
    lines = tmp_path / "tests.jsonl"
    argv = [sys.executable, str(Path(suite_cpu.__file__)), "--per-test", str(lines), "--"]
    argv += [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_burn.py"]
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {r["test"]: r for r in map(json.loads, lines.read_text().splitlines())}
    assert rows.keys() == {"test_burn.py::test_spins", "test_burn.py::test_sleeps"}
    assert rows["test_burn.py::test_spins"]["busy_cpu_s"] >= 0.45, rows
    assert rows["test_burn.py::test_sleeps"]["wall_s"] >= 0.5, rows
    assert "2 tests, " in run.stdout and "test_burn.py::test_spins" in run.stdout
    with pytest.raises(ValueError, match="needs a pytest command"):
        suite_cpu.with_plugin(["make", "test"])
    assert suite_cpu.with_plugin(["/v/bin/pytest", "-q"]) == [
        "/v/bin/pytest",
        "-p",
        "suite_cpu",
        "-q",
    ]


# --- benchmarks/eval_lengths.py: an untrained evaluation against plan's bound ---------------


def test_an_untrained_evaluation_lasts_its_slowest_episode_within_the_time_limit():
    """The trial's own evaluator and envs under random actions: as many lockstep steps as the
    slowest of the envs' first episodes, never past the game's time limit (plan's bound)."""
    from eval_lengths import random_evaluation

    from rlsweep.envs import procgen
    from rlsweep.trial.evaluation import steps_taken

    played = random_evaluation("starpilot", "easy", seed=0, episodes=3, num_levels=200)
    assert [len(ev.returns) for ev in played.values()] == [3, 3]  # one episode an env
    slowest = max(int(ev.lengths.max()) for ev in played.values())
    assert steps_taken(played) == slowest <= procgen.max_episode_steps("starpilot", "easy")
