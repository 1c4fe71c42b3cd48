"""`rlsweep plan`: concurrency on a box (GPU packing included), the ETA, where its steps/s came
from, and refusing packings that cannot fit. Cost estimates: tests/test_cost.py."""

import json

import pytest

from rlsweep.cli import main
from rlsweep.plan import (
    CPU_BENCHMARK,
    DEFAULT_STEPS_PER_CPU_S,
    GPU_BENCHMARK,
    Throughput,
    duration,
    make_plan,
    measured_throughput,
)
from rlsweep.spec import SpecError, SweepSpec

# 16 trials of a quarter GPU and 4 CPUs each.
GPU_SPEC = {
    "name": "packed",
    "games": ["coinrun", "starpilot", "maze", "bigfish"],
    "seeds": [0, 1, 2, 3],
    "budget": 8_000_000,
    "params": {"num_gpus": 0.25, "num_cpus": 4},
}


def test_duration_shows_minutes_below_an_hour():
    assert [duration(s) for s in (10, 100, 173, 3000, 3600, 5 * 3600)] == [
        "<1 min",
        "2 min",
        "3 min",
        "50 min",
        "1.0 h",
        "5.0 h",
    ]
    spec = SweepSpec.from_dict({"name": "tiny", "budget": 20_000})
    plan = make_plan(spec, cpus=2, steps_per_cpu_s=110)  # 20k steps at 110/s: 3 min
    assert plan.summary().endswith("estimated wall time 3 min")


def test_steps_per_s_come_from_the_last_benchmark(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rate = measured_throughput()
    assert (rate.per_cpu_s, rate.gpu_packed) == (DEFAULT_STEPS_PER_CPU_S, None)
    assert rate.source == "default 110/CPU/s"
    CPU_BENCHMARK.parent.mkdir(parents=True)
    CPU_BENCHMARK.write_text(json.dumps({"trial_env_steps_per_s": 300.0}))  # CPUs unknown
    assert measured_throughput().per_cpu_s == DEFAULT_STEPS_PER_CPU_S
    CPU_BENCHMARK.write_text(json.dumps({"trial_env_steps_per_s": 300.0, "setup": {"cpus": 2}}))
    # a CPU-path run of benchmarks/gpu.py is no GPU figure
    GPU_BENCHMARK.write_text(json.dumps({"device": "cpu", "packed": {"1": 50.0}}))
    rate = measured_throughput()
    assert rate.per_cpu_s == 150.0 and rate.gpu_packed is None
    assert rate.source == "results/benchmarks/throughput.json: 300 env steps/s on 2 CPUs"
    spec = SweepSpec.from_dict({"name": "t", "budget": 1_500_000, "seeds": [0, 1]})
    plan = make_plan(spec, cpus=2)  # 2 trials of 1 CPU at 150/s each, at once
    assert plan.est_wall_s == pytest.approx(1_500_000 / 150)
    assert "150 env steps/s per trial (results/benchmarks/throughput.json" in plan.summary()
    assert make_plan(spec, cpus=2, steps_per_cpu_s=100).steps_per_s_source == "--steps-per-s"
    GPU_BENCHMARK.write_text(json.dumps({"device": "cuda", "packed": {"1": 9e3, "4": 24e3}}))
    assert measured_throughput().gpu_packed == {1: 9e3, 4: 24e3}


def test_gpu_packing_shows_concurrency_and_eta():
    spec = SweepSpec.from_dict(GPU_SPEC)
    cpu_rate = Throughput(DEFAULT_STEPS_PER_CPU_S, "default 110/CPU/s")
    plan = make_plan(spec, cpus=16, gpus=1, gpu_memory=80, throughput=cpu_rate)
    assert (plan.concurrent, plan.bound) == (4, "GPU")
    assert (plan.cpus_per_trial, plan.gpus_per_trial) == (4, 0.25)
    # no GPU measured: the CPU rate, and the plan says so; 4 waves of 8M steps at 440/s
    assert plan.trial_steps_per_s == 440.0
    assert plan.est_wall_s == pytest.approx(4 * 8_000_000 / 440)
    text = plan.summary()
    assert "16 trials x budget = 128,000,000 env steps; 4 at a time on 16 CPUs, 1 GPU" in text
    assert "(GPU-bound; 4 CPUs, 0.25 GPU, ~8.3 GiB GPU memory per trial)" in text
    assert "(default 110/CPU/s (GPU trials unmeasured: the CPU rate))" in text
    # measured packings: 4 per GPU ran 24k env steps/s in all, 6k each: 4 waves of 1333 s
    gpu_rate = Throughput(110, "x", {1: 9e3, 2: 16e3, 4: 24e3}, "gpu.json")
    plan = make_plan(spec, cpus=16, gpus=1, throughput=gpu_rate)
    assert plan.trial_steps_per_s == 6e3 and plan.steps_per_s_source == "gpu.json, 4 per GPU"
    assert plan.est_wall_s == pytest.approx(4 * 8_000_000 / 6e3)
    assert plan.summary().endswith("estimated wall time 1.5 h")
    # twice the CPUs do not help a GPU-bound packing; two GPUs do
    assert make_plan(spec, cpus=32, gpus=1, throughput=gpu_rate).concurrent == 4
    plan = make_plan(spec, cpus=32, gpus=2, throughput=gpu_rate)
    assert (plan.concurrent, plan.bound) == (8, "GPU") and "on 32 CPUs, 2 GPUs" in plan.summary()
    # 8 CPUs: only 2 at a time share the GPU, each at the 2-per-GPU rate
    plan = make_plan(spec, cpus=8, gpus=1, throughput=gpu_rate)
    assert (plan.concurrent, plan.bound, plan.trial_steps_per_s) == (2, "CPU", 8e3)


def test_plan_refuses_packings_that_cannot_fit():
    spec = SweepSpec.from_dict({**GPU_SPEC, "params": {"num_gpus": 0.125, "num_cpus": 2}})
    with pytest.raises(SpecError, match=r"params.num_gpus: got 0.125: a trial's share of the "):
        make_plan(spec, cpus=16, gpus=1, gpu_memory=24)
    with pytest.raises(SpecError, match="the planned machine has 0 GPUs"):
        make_plan(spec, cpus=16)
    with pytest.raises(SpecError, match="params.num_cpus: a trial needs 2 CPUs"):
        make_plan(spec, cpus=1, gpus=1)
    make_plan(spec, cpus=16, gpus=1, gpu_memory=80)
    # 16 default trials on one 80 GB GPU (5 GiB each): refused in fp32, planned in bf16
    sixteen = {**GPU_SPEC, "params": {"num_gpus": 0.0625, "num_cpus": 1}}
    with pytest.raises(SpecError, match=r"needs ~8.3 GiB .*allowed: num_gpus >= 0.104"):
        make_plan(SweepSpec.from_dict(sixteen), cpus=16, gpus=1, gpu_memory=79.6)
    sixteen["params"] = {**sixteen["params"], "bf16": True}
    plan = make_plan(SweepSpec.from_dict(sixteen), cpus=16, gpus=1, gpu_memory=79.6)
    assert plan.concurrent == 16


def test_plan_cli_on_a_gpu_box(tmp_path, capsys):
    path = tmp_path / "packed.yaml"
    path.write_text(json.dumps(GPU_SPEC))  # JSON is YAML
    argv = ["plan", str(path), "--gpus", "1", "--cpus", "16", "--steps-per-s", "110"]
    assert main(argv) == 0
    assert "4 at a time on 16 CPUs, 1 GPU (GPU-bound" in capsys.readouterr().out
    # --instance: the table's GPUs and their memory (g5: one 24 GB A10G, 16 vCPUs): a quarter
    # of it holds a bf16 trial, not an fp32 one
    assert main(["plan", str(path), "--instance", "g5.4xlarge"]) == 2
    assert "g5.4xlarge's 22.3 GiB GPUs is 5.6 GiB (4 trials per GPU)" in capsys.readouterr().err
    bf16 = tmp_path / "bf16.yaml"
    bf16.write_text(json.dumps({**GPU_SPEC, "params": {**GPU_SPEC["params"], "bf16": True}}))
    assert main(["plan", str(bf16), "--instance", "g5.4xlarge", "--steps-per-s", "110"]) == 0
    out = capsys.readouterr().out
    assert "4 at a time on 16 CPUs, 1 GPU" in out and "1 x g5.4xlarge" in out
