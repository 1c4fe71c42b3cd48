"""GPUs used where they are (issue 40, item 8): a spec that sets no resources gets its target's
best layout (packed GPU trials, the measured packing; CPU trials where there is no GPU), the
commands say which and why, a spec that sets resources keeps them, and the shipped specs pin
nothing their question does not need."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlsweep.cli import main
from rlsweep.plan import layout, placement
from rlsweep.plan.placement import Machine
from rlsweep.plan.plan import DEFAULT_GPU_PACKED, make_plan
from rlsweep.spec.spec import SweepSpec

ROOT = Path(__file__).resolve().parents[1]
STUDY = str(ROOT / "search_spaces" / "study.yaml")
H100_BOX = Machine(cpus=16, gpus=1, gpu_memory_gib=79.6, where="this machine")


def test_gpu_trials_packed_as_measured_best_where_there_are_gpus():
    spec = SweepSpec.from_yaml(STUDY)  # 24 trials, no resources set
    chosen = layout.choose(spec, H100_BOX, DEFAULT_GPU_PACKED, "an H100's")
    assert chosen.params == {"num_gpus": 0.125, "num_cpus": 2, "num_env_runners": 0}
    assert chosen.line().startswith(
        "rlsweep: layout: 8 trials per GPU (num_gpus 0.125, num_cpus 2, num_env_runners 0: "
        "sampling in the trial's process, inference on the GPU): of the packings its CPUs and "
        "GPU memory hold, the fastest in all (measured: 30,300 env steps/s; an H100's)"
    )
    laid = chosen.apply(spec)
    assert {t.num_gpus for t in laid.trials()} == {0.125}
    assert laid.trials()[0].model_config().precision == "bf16"  # a GPU trial's default
    # A measured K = 4 faster than 8 in all; 7 per GPU fit (1/7 rounded down to Ray's unit).
    assert layout.choose(spec, H100_BOX, {4: 31e3, 8: 30e3}).params["num_gpus"] == 0.25
    assert layout.gpu_share(7) == 0.1428 and placement.trials_per_gpu(0.1428) == 7
    # Fewer CPUs than the best packing needs: as many as the CPUs hold, a CPU each, at the
    # rate read between the packings measured (1 and 8).
    four = Machine(cpus=4, gpus=1, gpu_memory_gib=79.6)
    chosen = layout.choose(spec, four, DEFAULT_GPU_PACKED)
    assert chosen.params["num_gpus"] == 0.25 and "read between the packings measured" in chosen.why
    # A small GPU: as many as its memory holds (fp32: ~9.5 GiB each, so 2 on 24 GiB).
    fp32 = spec.with_overrides(params={**spec.params, "precision": "fp32"})
    small = Machine(cpus=16, gpus=1, gpu_memory_gib=22.3)
    assert layout.choose(fp32, small, DEFAULT_GPU_PACKED).params["num_gpus"] == 0.5
    # Fewer trials than the packing: no idle shares, the GPU's CPUs to each.
    two = spec.with_overrides(games=["coinrun"], seeds=[0])
    assert layout.choose(two, H100_BOX, DEFAULT_GPU_PACKED).params == {
        "num_gpus": 0.5,
        "num_cpus": 8,
        "num_env_runners": 0,
    }


def test_cpu_trials_where_there_is_none_and_a_spec_that_sets_resources_keeps_them(tmp_path):
    spec = SweepSpec.from_yaml(STUDY)
    chosen = layout.choose(spec, Machine(cpus=2), DEFAULT_GPU_PACKED)
    assert chosen.params == {} and chosen.apply(spec) is spec  # TrialConfig's: 1 CPU each
    assert "CPU trials, 1 CPU each" in chosen.why and "has no GPU" in chosen.why
    spread = layout.choose(spec, Machine(cpus=128), DEFAULT_GPU_PACKED)
    assert spread.params == {"num_gpus": 0, "num_cpus": 5, "num_env_runners": 0}  # 128 // 24
    pinned = spec.with_overrides(params={**spec.params, "num_env_runners": 4})
    kept = layout.choose(pinned, H100_BOX, DEFAULT_GPU_PACKED)
    assert kept.params == {} and kept.apply(pinned) is pinned
    assert kept.why.startswith("the spec's own (params.num_env_runners)")
    variants = SweepSpec(name="v", variants={"a": {"num_cpus": 2}, "b": {}})
    assert layout.pinned(variants) == ["variants.a.num_cpus"]
    searched = SweepSpec(name="s", space={"num_cpus": [1, 2]})
    assert layout.pinned(searched) == ["space.num_cpus"]
    (tmp_path / "base.yaml").write_text("params: {num_env_runners: 2}\n")
    based = SweepSpec(name="b", extends=str(tmp_path / "base.yaml"))
    assert layout.pinned(based) == [f"extends({tmp_path / 'base.yaml'}).num_env_runners"]
    # One CPU trial on a big box gets the spare CPUs, up to CPU_TRIAL_MAX_CPUS.
    lone = SweepSpec(name="l", games=["leaper"], seeds=[0])
    big = layout.choose(lone, Machine(cpus=64), DEFAULT_GPU_PACKED)
    assert big.params["num_cpus"] == layout.CPU_TRIAL_MAX_CPUS == 8
    # 3 trials on 2 GPUs: 2 to a GPU (a half each), not 1 and a third left waiting.
    three = SweepSpec(name="t", games=["leaper"], seeds=[0, 1, 2])
    two_gpus = Machine(cpus=32, gpus=2, gpu_memory_gib=79.6)
    assert layout.choose(three, two_gpus, DEFAULT_GPU_PACKED).params["num_gpus"] == 0.5


def test_a_trial_on_a_cluster_gets_no_more_cpus_than_its_largest_node_has():
    """A cluster's CPUs are summed over nodes, but one trial runs on one node: two 1-CPU
    workers give a lone trial 1 CPU, not 2 (it would wait for a node that never comes)."""
    one = SweepSpec(name="one", games=["leaper"], seeds=[0], budget=16384)
    two_nodes = Machine(cpus=2, where="the cluster", node_cpus=1)
    assert layout.choose(one, two_nodes, DEFAULT_GPU_PACKED).params == {}
    assert layout.choose(one, Machine(cpus=2), DEFAULT_GPU_PACKED).params["num_cpus"] == 2
    gpu_nodes = Machine(cpus=40, gpus=2, gpu_memory_gib=79.6, where="the cluster", node_cpus=16)
    spec = SweepSpec.from_yaml(STUDY)
    assert layout.choose(spec, gpu_nodes, DEFAULT_GPU_PACKED).params["num_cpus"] == 2  # 16 / 8


def test_a_gpus_trials_share_the_cpus_of_its_node_not_the_clusters():
    """A 1-CPU head with the GPU beside an 8-CPU worker (a joined cluster as Ray gives it):
    the GPU's trials run on the head, so each gets the head's CPU; sized from the largest node,
    4 trials of 2 CPUs each could never start there, and the sweep waited for ever."""
    from rlsweep.run.fits import cluster_machine

    head, worker = {"CPU": 1.0, "GPU": 1.0}, {"CPU": 8.0}
    cluster = cluster_machine({"CPU": 9.0, "GPU": 1.0}, [head, worker])
    assert (cluster.cpus_per_gpu, cluster.node_cpus, cluster.cpu_only_cpus) == (1, 8, 8)
    spec = SweepSpec(name="four", games=["leaper"], seeds=[0, 1, 2, 3], budget=16384)
    chosen = layout.choose(spec, cluster, DEFAULT_GPU_PACKED)
    assert (chosen.params["num_gpus"], chosen.params["num_cpus"]) == (1, 1)
    assert "the 8 CPUs of the nodes without a GPU run none of these trials" in chosen.why
    alone = cluster_machine({"CPU": 16.0, "GPU": 1.0}, [{"CPU": 16.0, "GPU": 1.0}])
    assert (alone.cpus_per_gpu, alone.cpu_only_cpus) == (16, 0)


def test_shipped_specs_pin_no_resources():
    shipped = [*ROOT.glob("search_spaces/*.yaml"), *ROOT.glob("search_spaces/ablations/*.yaml")]
    assert len(shipped) >= 8
    for path in shipped:
        spec = SweepSpec.from_yaml(path)
        assert layout.pinned(spec) == [], path
        if spec.smoke:
            assert layout.pinned(spec.smoke_spec()) == [], path


def test_plan_validate_and_run_lay_trials_out_on_their_target(monkeypatch, tmp_path, capsys):
    """The issue's command: the study on a 16-core, 1-GPU box plans 8 packed GPU trials."""
    import rlsweep.run.sweep

    monkeypatch.chdir(tmp_path)  # no benchmark here: the H100's packing (DEFAULT_GPU_PACKED)
    assert main(["plan", STUDY, "--num-cpus", "16", "--gpus", "1"]) == 0
    out = capsys.readouterr().out
    assert "rlsweep: layout: 8 trials per GPU (num_gpus 0.125, num_cpus 2" in out
    assert "8 at a time on 16 CPUs, 1 GPU (GPU-bound; 2 CPUs, 0.125 GPU" in out
    plan = make_plan(SweepSpec.from_yaml(STUDY), cpus=16, gpus=1)
    assert plan.layout.params["num_gpus"] == 0.125 and plan.est_wall_s < 12 * 3600
    # validate and run: this machine as placement reads it (an H100 box here)
    monkeypatch.setattr(placement, "local_machine", lambda cpus=None, look_up_gpus=True: H100_BOX)
    assert main(["validate", STUDY]) == 0
    assert "rlsweep: layout: 8 trials per GPU" in capsys.readouterr().out
    ran = []
    monkeypatch.setattr(
        rlsweep.run.sweep, "run_sweep", lambda spec, **kw: ran.append(spec) or 1 / 0
    )
    with pytest.raises(ZeroDivisionError):
        main(["run", STUDY, "--smoke"])
    # The smoke run's 2 trials: half a GPU and 8 CPUs each, recorded in its sweep.yaml.
    assert ran[0].params["num_gpus"] == 0.5 and ran[0].params["num_cpus"] == 8
    assert "  num_gpus: 0.5\n" in ran[0].to_yaml()


def test_run_sweep_from_python_lays_trials_out_as_the_cli_does(monkeypatch, tmp_path, capsys):
    """A notebook's `run_sweep(spec)` on a GPU box packs its trials on the GPU as `rlsweep run`
    would (not 1 CPU each); a spec the CLI laid out runs as it is."""
    import rlsweep.run.sweep
    from rlsweep.run.sweep import run_sweep

    monkeypatch.chdir(tmp_path)  # no benchmark here: the H100's packing (DEFAULT_GPU_PACKED)
    monkeypatch.setattr(placement, "local_machine", lambda cpus=None, look_up_gpus=True: H100_BOX)
    checked = []
    monkeypatch.setattr(
        rlsweep.run.sweep, "check_fits", lambda spec, *a: checked.append(spec) or 1 / 0
    )
    spec = SweepSpec.from_yaml(STUDY).with_overrides(storage_path=str(tmp_path))
    with pytest.raises(ZeroDivisionError):  # where Ray would start
        run_sweep(spec)
    assert {t.num_gpus for t in checked[0].trials()} == {0.125}
    assert "rlsweep: layout: 8 trials per GPU" in capsys.readouterr().out
    with pytest.raises(ZeroDivisionError):
        run_sweep(checked[0])
    assert checked[1] is checked[0] and "layout" not in capsys.readouterr().out
