"""Price table, trial / sweep / cluster costs, and the plan's cost estimate."""

import math

import pytest

from rlsweep.cli import main
from rlsweep.plan.cost import (
    PRICES_PATH,
    InstancePrice,
    PriceError,
    cluster_cost,
    hourly,
    instances_for,
    load_prices,
    trial_cost,
    trials_per_instance,
)
from rlsweep.plan.plan import Costs, Throughput, make_plan
from rlsweep.spec.spec import SweepSpec

# Round numbers, so every expected value below is computed by hand.
TABLE = """\
cpu8:  {vcpus: 8, gpus: 0, on_demand: 0.40, spot: 0.10}
gpu4:  {vcpus: 16, gpus: 4, on_demand: 4.00, spot: 2.00}
"""
# 5 trials of 8 CPUs (4 + 4 EnvRunners); 110 steps/s/CPU x 8 CPUs x 3600 s: one hour per trial.
SPEC = {
    "name": "t",
    "budget": 110 * 8 * 3600,
    "seeds": [0, 1, 2, 3, 4],
    "params": {"num_cpus": 4, "num_env_runners": 4},
}


TRAINING_ONLY = Throughput(
    Costs(
        vector_step_s=0.0,
        env_step_s=1 / 110,
        minibatch_s=0.0,
        sample_s=0.0,
        iteration_s=0.0,
        eval_steps_per_cpu_s=math.inf,
        trial_start_s=0.0,
        ray_start_s=0.0,
    )
)
"""No start-up, free evaluations, free updates: each EnvRunner samples 110 env steps/s."""


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(TABLE)
    return load_prices(path)


def test_shipped_table_loads_and_validates():
    table = load_prices()
    assert len(table) >= 30
    assert table["c6i.8xlarge"] == InstancePrice(vcpus=32, gpus=0, on_demand=1.36, spot=0.55)
    assert table["g5.xlarge"].gpus == 1 and table["g4dn.12xlarge"].gpus == 4
    assert table["g5.xlarge"].gpu_memory_gib == 22.3 and table["c6i.8xlarge"].gpu_memory_gib is None
    assert all(0 < p.spot < p.on_demand for p in table.values())
    # The GPU instances Procgen studies rent today, with each GPU's memory (L4, L40S, A100, H100)
    gpus = {t: (table[t].gpus, table[t].gpu_memory_gib) for t in table if t.startswith(("g6", "p"))}
    assert gpus["g6.xlarge"] == (1, 22.3) and gpus["g6e.12xlarge"] == (4, 44.7)
    assert gpus["p4d.24xlarge"] == (8, 37.3) and gpus["p5.48xlarge"] == (8, 74.5)
    assert table["p5.48xlarge"].vcpus == 192 and len([t for t in gpus if t.startswith("g6")]) == 16
    assert "us-east-1" in PRICES_PATH.read_text().split("\n\n")[0]  # the header says where/when
    assert hourly("c6i.8xlarge") == 1.36 and hourly("c6i.8xlarge", spot=True) == 0.55


def test_trial_cost_by_hand(prices):
    # 2 h x $0.40/h x 4/8 of the instance
    assert trial_cost(7200, 4, 0, "cpu8", prices=prices) == pytest.approx(0.40)
    assert trial_cost(7200, 4, 0, "cpu8", spot=True, prices=prices) == pytest.approx(0.10)
    # 1 GPU of 4 outweighs 2 CPUs of 16: 1 h x $4/h x 1/4
    assert trial_cost(3600, 2, 1, "gpu4", prices=prices) == pytest.approx(1.00)
    # 12 CPUs of 16 outweigh 1 GPU of 4: 0.5 h x $2/h x 3/4
    assert trial_cost(1800, 12, 1, "gpu4", spot=True, prices=prices) == pytest.approx(0.75)
    # bigger than the instance: charged for more than one
    assert trial_cost(3600, 16, 0, "cpu8", prices=prices) == pytest.approx(0.80)
    assert cluster_cost(5400, "cpu8", count=3, spot=True, prices=prices) == pytest.approx(0.45)


def test_trial_cost_refuses_what_cannot_run(prices, tmp_path):
    with pytest.raises(PriceError, match=r"prices.yaml: cpu8: has no GPUs"):
        trial_cost(3600, 1, 1, "cpu8", prices=prices)
    with pytest.raises(PriceError, match=r"prices.yaml: cpu9: unknown instance type .*'cpu8'"):
        trial_cost(3600, 1, 0, "cpu9", prices=prices)
    with pytest.raises(ValueError, match=">= 0"):
        trial_cost(-1, 1, 0, "cpu8", prices=prices)


def test_packing(prices):
    cpu8, gpu4 = prices["cpu8"], prices["gpu4"]
    assert trials_per_instance(3, 0, cpu8) == 2  # 6 of 8 vCPUs
    assert trials_per_instance(2, 1, gpu4) == 4  # GPUs bound it, not the 16 vCPUs
    assert trials_per_instance(9, 0, cpu8) == 0
    assert trials_per_instance(1, 0.3, gpu4) == 12  # 3 per GPU: a trial never spans two
    assert trials_per_instance(1, 0.1, gpu4) == 16  # 40 by the GPUs, but 16 vCPUs
    assert instances_for(5, 3, 0, cpu8) == 3
    assert instances_for(2, 12, 0, cpu8) == 4  # each trial spans 2 instances


@pytest.mark.parametrize(
    ("table", "path", "message"),
    [
        ("cpu8: {vcpus: 8, gpus: 0, on_demand: cheap, spot: 0.1}", "cpu8.on_demand", "got 'cheap'"),
        ("cpu8: {vcpus: 8, gpus: 0, on_demand: 0.4}", "cpu8.spot", "missing"),
        ("cpu8: {vcpus: 0, gpus: 0, on_demand: 0.4, spot: 0.1}", "cpu8.vcpus", "integer >= 1"),
        ("cpu8: {vcpus: 8, gpus: 0, on_demand: -1, spot: 0.1}", "cpu8.on_demand", ">= 0"),
        (
            "cpu8: {vcpus: 8, gpus: 0, ondemand: 0.4, spot: 0.1}",
            "cpu8.ondemand",
            "did you mean 'on_demand'",
        ),
        ("cpu8: 0.40", "cpu8", "allowed: a mapping"),
        (
            "g: {vcpus: 8, gpus: 1, on_demand: 1, spot: 0.5, gpu_memory_gib: 0}",
            "g.gpu_memory_gib",
            "allowed: GiB, a number > 0",
        ),
        ("[c5.2xlarge]", "", "maps instance types"),
        ("cpu8: {vcpus: 8", "", "not valid YAML"),
    ],
)
def test_bad_table_names_file_and_key(tmp_path, table, path, message):
    bad = tmp_path / "mine.yaml"
    bad.write_text(table + "\n")
    with pytest.raises(PriceError) as e:
        load_prices(bad)
    assert str(e.value).startswith(f"{bad}: {path + ': ' if path else ''}")
    assert message in str(e.value)


def test_plan_estimate_with_instance(prices):
    spec = SweepSpec.from_dict(SPEC)
    assert make_plan(spec, cpus=16).est_cost_usd is None
    # 16 CPUs: 2 trials at a time, 3 waves of a trial's 49 whole iterations of 64 x 256 x 4
    # EnvRunners = 65,536 env steps, the 4 sampling side by side (2.03 h); 2 x cpu8 at $0.40/h.
    # Training only (the plan's model is tested in test_plan.py).
    hours = 49 * 65536 / (110 * 4) / 3600
    plan = make_plan(spec, cpus=16, instance="cpu8", prices=prices, throughput=TRAINING_ONLY)
    assert (plan.concurrent, plan.instances) == (2, 2)
    assert plan.est_wall_s == pytest.approx(3 * hours * 3600)
    assert plan.est_cost_usd == pytest.approx(2 * 3 * hours * 0.40)
    assert "2 x cpu8 (on-demand, $0.400/h each): estimated cost $4.87" in plan.summary()
    # 3 instances set the CPUs (24): 3 at a time, 2 waves; spot
    plan = make_plan(
        spec,
        cpus=2,
        instance="cpu8",
        instances=3,
        spot=True,
        prices=prices,
        throughput=TRAINING_ONLY,
    )
    assert (plan.concurrent, plan.instances) == (3, 3)
    assert plan.est_cost_usd == pytest.approx(3 * 2 * hours * 0.10)
    # + an on-demand head for the 2 h, whatever the workers' market
    plan = make_plan(
        spec,
        cpus=2,
        instance="cpu8",
        instances=3,
        spot=True,
        head="gpu4",
        prices=prices,
        throughput=TRAINING_ONLY,
    )
    assert plan.head_usd == pytest.approx(2 * hours * 4.00)
    assert plan.est_cost_usd == pytest.approx(3 * 2 * hours * 0.10 + 2 * hours * 4.00)
    assert "+ head gpu4 (on-demand, $16.22): estimated cost $17.43" in plan.summary()
    with pytest.raises(ValueError, match="head: a head instance type needs an instance type"):
        make_plan(spec, cpus=2, head="gpu4", prices=prices)
    # GPU trials on a CPU instance cannot run
    gpu_spec = SweepSpec.from_dict({"name": "g", "params": {"num_gpus": 1}})
    with pytest.raises(PriceError, match="cpu8: has no GPUs"):
        make_plan(gpu_spec, cpus=8, instance="cpu8", prices=prices)


def test_what_runs_at_once_is_capped_by_instances_the_spec_and_its_trials(prices):
    """Trials do not split across instances: 6-CPU trials on 3 x cpu8 run 3 at once, not the 4
    that 24 CPUs hold. A spec's max_concurrent caps it, and so do its trials: 2 trials plan
    2 at a time, and bill as many instances as they need, on 64 CPUs."""
    six = SweepSpec.from_dict({**SPEC, "params": {"num_cpus": 2, "num_env_runners": 4}})
    kw = {"prices": prices, "throughput": TRAINING_ONLY}
    plan = make_plan(six, cpus=2, instance="cpu8", instances=3, **kw)
    assert plan.concurrent == 3
    capped = SweepSpec.from_dict({**SPEC, "max_concurrent": 2})
    plan = make_plan(capped, cpus=64, **kw)
    assert (plan.concurrent, plan.bound) == (2, "spec")
    two = SweepSpec.from_dict({**SPEC, "seeds": [0, 1]})
    plan = make_plan(two, cpus=64, instance="cpu8", **kw)
    assert (plan.concurrent, plan.bound, plan.instances) == (2, "spec", 2)


def test_plan_cli_prints_the_cost(tmp_path, capsys, monkeypatch):
    """The CLI's flags reach make_plan (whose arithmetic is tested above); the plan's figures
    are its defaults here (no benchmark in this directory)."""
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\nbudget: 3168000\nseeds: [0, 1, 2, 3, 4]\n"
        "params: {num_cpus: 4, num_env_runners: 4}\n"
    )
    table = tmp_path / "prices.yaml"
    table.write_text(TABLE)
    argv = ["plan", str(spec), "--num-cpus", "16", "--instance", "cpu8", "--prices", str(table)]
    argv += ["--steps-per-s", "110"]
    loaded = SweepSpec.from_yaml(spec)

    def cost(**kw) -> str:
        plan = make_plan(loaded, steps_per_cpu_s=110, prices=load_prices(table), **kw)
        return f"estimated cost ${plan.est_cost_usd:,.2f}"

    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 x cpu8 (on-demand, $0.400/h each)" in out
    assert cost(cpus=16, instance="cpu8") in out  # ~3 h: $2.40 and a little more
    assert main([*argv, "--spot"]) == 0
    out = capsys.readouterr().out
    assert "2 x cpu8 (spot, $0.100/h each)" in out
    assert cost(cpus=16, instance="cpu8", spot=True) in out
    assert main([*argv, "--spot", "--head", "gpu4"]) == 0
    out = capsys.readouterr().out
    assert "+ head gpu4 (on-demand, $" in out
    assert cost(cpus=16, instance="cpu8", spot=True, head="gpu4") in out
    # the shipped table; --instance alone plans for one instance: 32 vCPUs, 4 trials at once
    assert main(["plan", str(spec), "--instance", "c6i.8xlarge", "--steps-per-s", "110"]) == 0
    out = capsys.readouterr().out
    assert "4 at a time" in out and "1 x c6i.8xlarge (on-demand, $1.360/h each)" in out
    table.write_text("cpu8: {vcpus: 8, gpus: 0, on_demand: 0.4}\n")
    assert main(argv) == 2
    assert f"{table}: cpu8.spot: missing" in capsys.readouterr().err
    assert main(["plan", str(spec), "--head", "gpu4"]) == 2
    assert "--head needs --instance TYPE" in capsys.readouterr().err
    assert main(["plan", str(spec), "--instances", "2"]) == 2
