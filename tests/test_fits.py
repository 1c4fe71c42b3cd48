"""rlsweep.run.fits: every trial of a spec fits where the sweep runs (the machine plan plans for,
this machine before Ray starts, or what the Ray it runs on offers), with errors at spec keys."""

import pytest

from rlsweep.errors import SpecError
from rlsweep.plan.placement import Machine
from rlsweep.run.fits import check_fits
from rlsweep.spec.spec import SweepSpec

FOUR_CPUS = {"num_env_runners": 3, "minibatch_size": 512}
"""A trial of 1 + 3 CPUs."""


def test_every_trial_must_fit_the_machine_given():
    spec = SweepSpec(name="r", params=FOUR_CPUS, source="r.yaml")
    with pytest.raises(SpecError) as e:
        check_fits(spec, machine=Machine(cpus=2, gpus=0))
    assert str(e.value) == (
        "r.yaml: params.num_env_runners: a trial needs 4 CPUs (num_cpus 1 + num_env_runners 3); "
        "this machine has 2"
    )
    gpu = SweepSpec(name="g", params={"num_gpus": 1})
    with pytest.raises(SpecError, match=r"params.num_gpus: got 1; the cluster has 0 GPUs"):
        check_fits(gpu, machine=Machine(8, 0, where="the cluster"))
    check_fits(spec, machine=Machine(cpus=4, gpus=0))


def test_this_machine_before_ray_starts_or_num_cpus(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    spec = SweepSpec(name="r", params=FOUR_CPUS, source="r.yaml")
    with pytest.raises(
        SpecError, match=r"a trial needs 4 CPUs .*; this machine at --num-cpus 3 has 3$"
    ):
        check_fits(spec, num_cpus=3)
    check_fits(spec, num_cpus=4)


def test_no_gpu_here_suggests_a_cluster_or_a_plan(monkeypatch):
    from rlsweep.plan.placement import local_machine

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if local_machine().gpus:
        pytest.skip("this machine has a GPU")
    spec = SweepSpec(name="g", params={"num_gpus": 1}, source="g.yaml")
    with pytest.raises(SpecError) as e:
        check_fits(spec)
    assert str(e.value) == (
        "g.yaml: params.num_gpus: got 1; this machine has 0 GPUs; run it where there are GPUs "
        "(`--address` of a Ray cluster that has them), or see what it needs with `rlsweep plan "
        "SPEC --gpus N`"
    )


def test_a_running_ray_is_where_trials_must_fit(monkeypatch, capsys, start_ray):
    """Once Ray runs, what it offers counts, not this machine nor `num_cpus`: a Ray started
    here refuses a misfit; a cluster joined at an address (it may be autoscaled) warns."""
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    spec = SweepSpec(name="r", params=FOUR_CPUS, source="r.yaml")
    with start_ray(2):
        with pytest.raises(SpecError, match=r"a trial needs 4 CPUs .*; the cluster has 2$"):
            check_fits(spec, num_cpus=8)
        check_fits(spec, address="auto")
        assert capsys.readouterr().out == (
            "rlsweep: warning: r.yaml: params.num_env_runners: a trial needs 4 CPUs (num_cpus 1 "
            "+ num_env_runners 3); the cluster has 2 now; trials wait for the autoscaler to add "
            "nodes\n"
        )
        assert ray.is_initialized()  # the check joined the running Ray and left it running
        # The checks before a run (layout, fits, plan) read the cluster once: a join at an
        # address costs seconds.
        from rlsweep.run import fits, preflight

        joined = []

        def counted(**kwargs):
            joined.append(kwargs["address"])
            return session(**kwargs)

        session = fits.ray_session
        monkeypatch.setattr(fits, "ray_session", counted)
        checked = preflight.check(spec, address="auto", remote_storage=False)
        assert joined == ["auto"], joined
        assert checked.plan is None  # trials that wait for the autoscaler's nodes
        assert capsys.readouterr().out.count("rlsweep: warning: ") == 1
