"""`rlsweep plan`: concurrency on a box (GPU packing included), the ETA's model of a trial,
where its figures came from, refusing packings that cannot fit, and warning of what --budget does
not scale. Cost estimates: tests/test_cost.py. The plan against a real run's wall time:
tests/test_integration.py."""

import dataclasses
import json
import math
from pathlib import Path

import pytest

from rlsweep.cli import main
from rlsweep.plan.plan import (
    COSTS_BENCHMARK,
    DEFAULT_COSTS,
    DEFAULT_GPU_PACKED,
    DEFAULT_GPU_SOURCE,
    GPU_BENCHMARK,
    REFERENCE,
    Costs,
    Throughput,
    evaluations,
    iterations,
    make_plan,
    makespan,
    measured_throughput,
    packed_rate,
    scaling_warnings,
)
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import SpecError, SweepSpec

DEMO = str(Path(__file__).resolve().parents[1] / "search_spaces" / "demo.yaml")
# 16 trials of a quarter GPU and 4 CPUs each.
GPU_SPEC = {
    "name": "packed",
    "games": ["coinrun", "starpilot", "maze", "bigfish"],
    "seeds": [0, 1, 2, 3],
    "budget": 8_000_000,
    "params": {"num_gpus": 0.25, "num_cpus": 4, "precision": "fp32"},
}


def flat(steps_per_cpu_s: float, **fixed: float) -> Costs:
    """Training at `steps_per_cpu_s` env steps/s per CPU whatever the trial's shape (all of it
    per env step), free evaluations, and `fixed` costs (none unless given)."""
    zero = dict(vector_step_s=0.0, minibatch_s=0.0, sample_s=0.0, iteration_s=0.0)
    rest = dict(eval_steps_per_cpu_s=math.inf, trial_start_s=0.0, ray_start_s=0.0)
    return Costs(env_step_s=1 / steps_per_cpu_s, **{**zero, **rest, **fixed})


TRAINING_ONLY = flat(110.0)
"""No fixed costs, free evaluations: env steps over the training rate."""
DEMO_TRIAL = TrialConfig(
    total_env_steps=12_288,
    num_envs_per_env_runner=16,
    rollout_length=64,
    minibatch_size=512,
    eval_interval=6,
)
"""The demo's trial: 12 iterations of 1,024 env steps, evaluating after the 6th and the 12th."""
PARTS = Costs(
    vector_step_s=0.004,
    env_step_s=0.001,
    minibatch_s=0.05,
    sample_s=0.002,
    iteration_s=0.5,
    eval_steps_per_cpu_s=2000.0,
    trial_start_s=20.0,
    ray_start_s=10.0,
)
"""Round figures for sums by hand: the demo's iteration samples 64 vector steps of 16 envs,
64 x (0.004 + 16 x 0.001) = 1.28 s, and updates 3 x (2 x 0.05 + 1024 x 0.002) = 6.444 s."""
DEMO_ITERATION = 0.5 + 1.28 + 6.444


def test_the_estimate_reads_as_a_duration():
    spec = SweepSpec.from_dict({"name": "tiny", "budget": 20_000})
    plan = make_plan(spec, cpus=1, throughput=Throughput(TRAINING_ONLY))  # 1 trial, 1 CPU
    assert plan.est_wall_s == pytest.approx(2 * 16384 / 110)  # 2 whole iterations: 297.9 s
    summary = plan.summary()
    assert "estimated wall time 4m58s (Ray's start 0s; the longest trial 4m58s" in summary


def test_a_trial_is_its_start_iterations_and_evaluations():
    """By hand, `PARTS` on 1 CPU; each evaluation counted as 2 splits x 32 envs x coinrun's
    time limit of 1,000 steps."""
    rate = Throughput(PARTS)
    assert PARTS.iteration(DEMO_TRIAL) == pytest.approx(DEMO_ITERATION)
    t = rate.trial(DEMO_TRIAL)
    assert (t.iterations, t.evaluations) == (12, 2)
    assert (t.start_s, t.eval_s) == (20.0, 2 * 64_000 / 2000)
    assert t.train_s == pytest.approx(12 * DEMO_ITERATION)

    def trial(**change):
        return rate.trial(TrialConfig(**{**DEMO_TRIAL.to_dict(), **change}))

    # eval_interval 5: at 5, 10 and the last (12); a budget of 12,289 takes a 13th iteration
    assert (
        trial(eval_interval=5).evaluations == 3 and trial(total_env_steps=12_289).iterations == 13
    )
    # leaper's time limit is 500: half coinrun's evaluation
    assert trial(game="leaper").eval_s == 32.0
    # Each part as the shape makes it: 1 epoch; 8 envs (twice the vector steps); minibatches
    # of 128 (8 of them); 2 CPUs (both parts on 2 threads); 2 EnvRunners (each samples half
    # the batch on its own CPU, side by side: 2 x 16 envs x 32 steps).
    base = 0.5 + 1.28
    assert trial(num_epochs=1).train_s == pytest.approx(12 * (base + 6.444 / 3))
    assert trial(num_envs_per_env_runner=8, rollout_length=128).train_s == pytest.approx(
        12 * (0.5 + 128 * (0.004 + 8 * 0.001) + 6.444)
    )
    assert trial(minibatch_size=128).train_s == pytest.approx(
        12 * (base + 3 * (8 * 0.05 + 1024 * 0.002))
    )
    assert trial(num_cpus=2).train_s == pytest.approx(12 * (0.5 + (1.28 + 6.444) / 2))
    assert trial(num_cpus=2).eval_s == pytest.approx(2 * 64_000 / 2000 / 2)  # on both CPUs
    runners = trial(num_env_runners=2, rollout_length=32)
    assert runners.train_s == pytest.approx(12 * (0.5 + 32 * (0.004 + 16 * 0.001) + 6.444))
    # Trials start as slots free, in order: 3 of 10 s and one of 25 s on 2 slots end at 35 s.
    assert makespan([10, 10, 10, 25], 2) == 35 and makespan([10, 10], 4) == 10


@pytest.mark.parametrize("interval", [1, 3, 5, 12, 13])
def test_the_plans_count_of_evaluations_is_the_trials_rule(interval):
    """`evaluations` in closed form counts the iterations `TrialConfig.evaluates` (the rule the
    trial runs by) makes evaluate, each iteration a whole batch."""
    cfg = TrialConfig(**{**DEMO_TRIAL.to_dict(), "eval_interval": interval})
    batch = cfg.effective_train_batch_size
    for n in range(1, 30):
        budget = dataclasses.replace(cfg, total_env_steps=n * batch)
        counted = sum(budget.evaluates(i, i * batch) for i in range(1, n + 1))
        assert evaluations(budget, iterations(budget)) == counted, n


def test_the_demo_plan_counts_ray_trials_and_evaluations():
    spec = SweepSpec.from_yaml(DEMO)
    plan = make_plan(spec, cpus=2, throughput=Throughput(PARTS, "mine"))
    # 4 trials, 2 at a time on 2 CPUs: Ray's start, then two waves of the trial above.
    trial = 20.0 + 12 * DEMO_ITERATION + 2 * 64_000 / 2000
    assert plan.concurrent == 2 and plan.est_wall_s == pytest.approx(10 + 2 * trial)
    assert plan.summary().endswith(
        "125 env steps/s per trial (mine); estimated wall time 6m15s (Ray's start 10s; the "
        "longest trial 3m03s: start 20s, training 1m39s over 12 iterations, evaluating "
        "1m04s over 2 evaluations, each to the 1,000-step time limit)"
    )
    # --steps-per-s: the demo's trial trains at that rate, other shapes in proportion
    fast = make_plan(spec, cpus=2, throughput=Throughput(PARTS), steps_per_cpu_s=200)
    assert fast.trial_steps_per_s == pytest.approx(200)
    assert fast.longest.train_s == pytest.approx(12 * 1024 / 200)


def test_figures_come_from_the_last_benchmark_else_the_labelled_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rate = measured_throughput()
    assert (rate.costs, rate.gpu_packed) == (DEFAULT_COSTS, DEFAULT_GPU_PACKED)
    assert rate.source == "defaults: no benchmark here, make bench-plan measures one"
    assert rate.gpu_source == DEFAULT_GPU_SOURCE
    assert DEFAULT_COSTS.iteration(REFERENCE) > 0
    COSTS_BENCHMARK.parent.mkdir(parents=True)
    figures = dataclasses.asdict(PARTS)
    del figures["sample_s"]
    COSTS_BENCHMARK.write_text(json.dumps(figures))  # a part missing: no figure of it is used
    assert measured_throughput().costs == DEFAULT_COSTS
    figures |= {"sample_s": 0.002, "measured_at": "2026-11-25T20:00"}
    COSTS_BENCHMARK.write_text(json.dumps(figures))
    # a CPU-path run of benchmarks/gpu.py is no GPU figure
    GPU_BENCHMARK.write_text(json.dumps({"device": "cpu", "packed": {"1": 50.0}}))
    rate = measured_throughput()
    assert rate.costs == PARTS and rate.gpu_packed == DEFAULT_GPU_PACKED
    assert rate.source == "results/benchmarks/plan_costs.json, measured 2026-11-25T20:00"
    plan = make_plan(SweepSpec.from_yaml(DEMO), cpus=2)
    assert plan.ray_start_s == 10.0 and plan.longest.start_s == 20.0
    assert plan.longest.train_s == pytest.approx(12 * DEMO_ITERATION)
    assert "125 env steps/s per trial (results/benchmarks/plan_costs.json, measured" in (
        plan.summary()
    )
    plan = make_plan(SweepSpec.from_yaml(DEMO), cpus=2, steps_per_cpu_s=100)
    assert plan.steps_per_s_source.startswith("--steps-per-s, results/benchmarks/plan_costs")
    GPU_BENCHMARK.write_text(json.dumps({"device": "cuda", "packed": {"1": 9e3, "4": 24e3}}))
    rate = measured_throughput()
    assert (rate.gpu_packed, rate.gpu_source) == ({1: 9e3, 4: 24e3}, str(GPU_BENCHMARK))
    assert rate.gpu_eval is None  # a record of before evaluations were measured
    record = {"device": "cuda", "packed": {"1": 9e3}, "packed_eval": {"1": 5e3, "8": None}}
    GPU_BENCHMARK.write_text(json.dumps(record))
    assert measured_throughput().gpu_eval == {1: 5e3}


def test_gpu_packing_shows_concurrency_and_eta():
    spec = SweepSpec.from_dict(GPU_SPEC)
    cpu_rate = Throughput(TRAINING_ONLY, "default 110/CPU/s", gpu_packed=None)
    plan = make_plan(spec, cpus=16, gpus=1, gpu_memory=80, throughput=cpu_rate)
    assert (plan.concurrent, plan.bound) == (4, "GPU")
    assert (plan.cpus_per_trial, plan.gpus_per_trial) == (4, 0.25)
    # no GPU measured: the CPU rate, and the plan says so; 4 waves of 8M steps at 440/s
    assert plan.trial_steps_per_s == 440.0
    assert plan.est_wall_s == pytest.approx(4 * 8_000_000 / 440, rel=2e-3)  # whole iterations
    text = plan.summary()
    assert "16 trials x budget = 128,000,000 env steps; 4 at a time on 16 CPUs, 1 GPU" in text
    assert "(GPU-bound; 4 CPUs, 0.25 GPU, ~9.5 GiB GPU memory per trial)" in text
    assert "(default 110/CPU/s (GPU trials unmeasured: the CPU's))" in text
    # measured packings: 4 per GPU ran 24k env steps/s in all, 6k each: 4 waves of 1333 s
    gpu_rate = Throughput(TRAINING_ONLY, "x", {1: 9e3, 2: 16e3, 4: 24e3}, "gpu.json")
    plan = make_plan(spec, cpus=16, gpus=1, throughput=gpu_rate)
    assert plan.trial_steps_per_s == 6e3 and plan.steps_per_s_source == "gpu.json, 4 per GPU"
    assert plan.est_wall_s == pytest.approx(4 * 8_000_000 / 6e3, rel=2e-3)
    assert "estimated wall time 1h29m" in plan.summary()
    assert "evaluations, each to the 1,000-step time limit, at the CPU rate: unmeasured on a " in (
        plan.summary()
    )
    # evaluations measured on the GPU: 4 trials evaluating at once at 8k env steps/s in all
    measured = dataclasses.replace(gpu_rate, gpu_eval={1: 4e3, 4: 8e3})
    plan = make_plan(spec, cpus=16, gpus=1, throughput=measured)
    per_eval = 2 * 32 * 6000 / 2e3  # 2 splits x 32 envs x bigfish's time limit (the longest)
    assert plan.longest.eval_s == pytest.approx(plan.longest.evaluations * per_eval)
    assert "unmeasured" not in plan.summary()
    # twice the CPUs do not help a GPU-bound packing; two GPUs do
    assert make_plan(spec, cpus=32, gpus=1, throughput=gpu_rate).concurrent == 4
    plan = make_plan(spec, cpus=32, gpus=2, throughput=gpu_rate)
    assert (plan.concurrent, plan.bound) == (8, "GPU") and "on 32 CPUs, 2 GPUs" in plan.summary()
    # 8 CPUs: only 2 at a time share the GPU, each at the 2-per-GPU rate
    plan = make_plan(spec, cpus=8, gpus=1, throughput=gpu_rate)
    assert (plan.concurrent, plan.bound, plan.trial_steps_per_s) == (2, "CPU", 8e3)
    # nothing measured here: the H100's figures, 4 per GPU between its 1 and 8
    plan = make_plan(spec, cpus=16, gpus=1, throughput=Throughput(TRAINING_ONLY, "x"))
    assert plan.trial_steps_per_s == pytest.approx((13_700 + 16_600 * 3 / 7) / 4)
    assert plan.steps_per_s_source == (
        "an H100's, 16 cores (no GPU benchmark here: make gpu-check), 4 per GPU, between the 1 "
        "and 8 measured"
    )


def test_a_packing_not_measured_is_read_from_its_neighbours():
    packed = {2: 10e3, 8: 28e3}
    assert packed_rate(packed, 8) == (3.5e3, "8 per GPU")
    # between: the aggregate on the line from 2's to 8's
    assert packed_rate(packed, 4) == (4e3, "4 per GPU, between the 2 and 8 measured")
    # beyond the largest, its aggregate shared; below the smallest, its rate per trial
    assert packed_rate(packed, 16) == (1.75e3, "16 per GPU sharing the aggregate of the 8 measured")
    assert packed_rate(packed, 1) == (5e3, "1 per GPU at the rate of each of the 2 measured")
    assert packed_rate(packed, 0)[0] == 5e3  # a trial of a whole GPU or more: one per GPU
    # more trials on a GPU never make each faster
    rates = [packed_rate(DEFAULT_GPU_PACKED, k)[0] for k in range(1, 33)]
    assert rates == sorted(rates, reverse=True)


def test_plan_refuses_packings_that_cannot_fit():
    fp32 = {"precision": "fp32"}
    spec = SweepSpec.from_dict({**GPU_SPEC, "params": {"num_gpus": 0.125, "num_cpus": 2, **fp32}})
    with pytest.raises(SpecError, match=r"params.num_gpus: got 0.125: a trial's share of the "):
        make_plan(spec, cpus=16, gpus=1, gpu_memory=24)
    with pytest.raises(SpecError, match="the planned machine has 0 GPUs"):
        make_plan(spec, cpus=16)
    with pytest.raises(SpecError, match="params.num_cpus: a trial needs 2 CPUs"):
        make_plan(spec, cpus=1, gpus=1)
    make_plan(spec, cpus=16, gpus=1, gpu_memory=80)
    # 16 trials of the default batch on one 80 GB GPU (5 GiB each): refused in fp32, planned in
    # bf16, a GPU trial's default precision
    sixteen = {**GPU_SPEC, "params": {"num_gpus": 0.0625, "num_cpus": 1, **fp32}}
    with pytest.raises(SpecError, match=r"needs ~9.5 GiB .*allowed: num_gpus >= 0.119"):
        make_plan(SweepSpec.from_dict(sixteen), cpus=16, gpus=1, gpu_memory=79.6)
    sixteen["params"] = {"num_gpus": 0.0625, "num_cpus": 1}
    plan = make_plan(SweepSpec.from_dict(sixteen), cpus=16, gpus=1, gpu_memory=79.6)
    assert plan.concurrent == 16


def test_plan_cli_on_a_gpu_box(tmp_path, capsys):
    path = tmp_path / "packed.yaml"
    path.write_text(json.dumps(GPU_SPEC))  # JSON is YAML
    argv = ["plan", str(path), "--gpus", "1", "--num-cpus", "16", "--steps-per-s", "110"]
    assert main(argv) == 0
    assert "4 at a time on 16 CPUs, 1 GPU (GPU-bound" in capsys.readouterr().out
    # --cpus, plan's name for it before it took run's --num-cpus: an error that names it
    with pytest.raises(SystemExit) as e:
        main([a if a != "--num-cpus" else "--cpus" for a in argv])
    assert e.value.code == 2
    assert "--cpus: renamed: write --num-cpus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    usage = capsys.readouterr().out
    assert "--num-cpus NUM_CPUS" in usage and "--cpus" not in usage
    # --instance: the table's GPUs and their memory (g5: one 24 GB A10G, 16 vCPUs): a quarter
    # of it holds a bf16 trial, not an fp32 one
    assert main(["plan", str(path), "--instance", "g5.4xlarge"]) == 2
    assert "g5.4xlarge's 22.3 GiB GPUs is 5.6 GiB (4 trials per GPU)" in capsys.readouterr().err
    bf16 = tmp_path / "bf16.yaml"
    bf16.write_text(json.dumps({**GPU_SPEC, "params": {**GPU_SPEC["params"], "precision": "bf16"}}))
    assert main(["plan", str(bf16), "--instance", "g5.4xlarge", "--steps-per-s", "110"]) == 0
    out = capsys.readouterr().out
    assert "4 at a time on 16 CPUs, 1 GPU" in out and "1 x g5.4xlarge" in out


def test_an_ablation_plan_shows_each_trials_variant(capsys):
    ablation = Path(DEMO).parent / "ablations" / "framestack.yaml"
    assert main(["plan", str(ablation), "--smoke"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["game", "seed", "variant"]  # nothing sampled: no count
    assert lines[1].split() == ["leaper", "0", "No", "Stack"]
    rows = [tuple(line.split()) for line in lines[1:] if line.startswith("leaper")]
    assert len(rows) == len(set(rows)) == 6  # 2 seeds x 3 variants, no two rows alike


def test_budget_scaled_up_warns_of_what_it_keeps(capsys):
    """--budget 25e6 on the demo keeps its 1,024-step iterations and eval_interval 6: the
    evaluations grow 2,000-fold with it; each warning says what it costs per trial (`PARTS`)."""
    demo, rate = SweepSpec.from_yaml(DEMO), Throughput(PARTS)
    evals, iterations = scaling_warnings(demo, demo.with_overrides(budget=25_000_000), rate)
    assert evals.startswith(
        "--budget 25,000,000 is 2,035x the spec's 12,288, but eval_interval 6 still evaluates "
        "every 6,144 env steps: 4,070 evaluations per trial, ~36h10m of its 3.8 days; "
        "eval_interval 12,208 keeps the spec's 2"
    )
    # 24,415 iterations of 8.224 s (55.8 h) where 1,526 of 16,384 env steps would take
    # 117.4 s each (49.8 h): sampling 256 x (0.004 + 64 x 0.001), 3 epochs of 8 minibatches
    assert iterations == (
        "--budget 25,000,000 keeps the spec's iterations of 1,024 env steps (rollout_length 64 x "
        "num_envs_per_env_runner 16, minibatch_size 512): 24,415 per trial, ~6h00m longer than "
        "the published setup's 16,384 (64 x 256, minibatch_size 2,048: extends: cobbe2019) for "
        "the same env steps, and eval_interval counts them"
    )
    assert scaling_warnings(demo, demo.with_overrides(budget=6144), rate) == []  # scaled down
    assert scaling_warnings(demo, demo.with_overrides(budget=12 * 12_288), rate)  # 12x: a warning
    assert scaling_warnings(demo, demo.with_overrides(budget=9 * 12_288), rate) == []  # 9x: none
    # Where the costs price the small iterations no slower, no word of them (it said "~-53s
    # longer" at 10x under the default costs).
    cheap = Throughput(dataclasses.replace(PARTS, vector_step_s=0, minibatch_s=0, iteration_s=0))
    ten = scaling_warnings(demo, demo.with_overrides(budget=10 * 12_288), cheap)
    assert not any("longer than the published" in w for w in ten)
    # The published setup's iterations: no word of them; its evaluations, counted to bigfish's
    # time limit of 6,000 steps, cost 6% of a bigfish trial: over the 5% a warning takes.
    study = SweepSpec.from_yaml(Path(DEMO).with_name("study.yaml"))
    (warning,) = scaling_warnings(study, study.with_overrides(budget=10 * 25_000_000), rate)
    assert "eval_interval 25 still evaluates every 409,600 env steps: 611 evaluations" in warning
    assert "~32h35m of its 22.1 days" in warning
    # The CLI warns on stderr, before the plan (and, after it, that the sweep is long).
    assert main(["plan", DEMO, "--budget", "25e6"]) == 0
    *err, long = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(e.startswith("rlsweep: warning: --budget 25,000,000") for e in err)
    assert long.startswith("rlsweep: warning: estimated wall time ") and "--allow-long" in long


def test_a_random_search_plan_says_its_configurations_run_in_every_row(tmp_path, capsys):
    spec = tmp_path / "r.yaml"
    spec.write_text(
        "name: r\ngames: [coinrun, maze]\nseeds: [0]\nbudget: 16384\n"
        "space: {lr: {loguniform: [1e-4, 1e-3]}}\n"
        "search: {algorithm: random, num_samples: 5, seed: 3}\n"
    )
    assert main(["plan", str(spec)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["game", "seed", "lr", "configurations"]
    assert lines[3] == (
        "configurations: 5 of the sampled parameters, drawn once, from search.seed 3; each runs "
        "in every row"
    )
    assert "10 trials x budget" in "\n".join(lines)
