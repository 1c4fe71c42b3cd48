"""Whether a sweep's trials fit where it runs: a trial that fits nowhere would leave Tune
waiting forever for resources that never come.

`check_fits` is the one check that `validate`, `plan`, `run` and `resume` make; the rule for one
trial on one machine (CPUs, GPUs, GPU memory) is `rlsweep.plan.placement.check_fits`, and for a
sweep on a machine already known `check_sweep_fits` there (`plan`'s, on the machine it plans
for). What is here reads the machine a sweep runs on, joining a Ray cluster to ask it: the run
layer's, not the plan's (which imports no Ray).
"""

from __future__ import annotations

import dataclasses

from rlsweep.errors import SpecError
from rlsweep.plan import placement
from rlsweep.plan.placement import Machine, starts_local_ray
from rlsweep.run.session import ray_running, ray_session
from rlsweep.spec.spec import SweepSpec

NO_GPU_HINT = (
    "; run it where there are GPUs (`--address` of a Ray cluster that has them), or see what "
    "it needs with `rlsweep plan SPEC --gpus N`"
)
"""Said after a GPU trial is refused on this machine for want of GPUs."""


def check_fits(
    spec: SweepSpec,
    address: str | None = None,
    num_cpus: float | None = None,
    *,
    machine: Machine | None = None,
) -> None:
    """Raise SpecError (naming the spec key to change) unless every trial of `spec` fits where
    the sweep runs:

    - `machine`, where given: `plan`'s, the machine it plans for;
    - else, while this process runs no Ray and the sweep would start one here (no `address`,
      no RAY_ADDRESS), this machine: its CPUs (or `num_cpus`), GPUs and GPU memory. Read
      without starting Ray, so a misfit fails at once; GPUs are counted (by torch) only for a
      spec that asks for them;
    - else what the Ray that the sweep runs on offers: the one this process is in (run and
      resume check again once Ray is up, since Ray may see fewer CPUs than the machine has,
      e.g. in a container), or the cluster at `address`, joined for the check. A joined
      cluster may be autoscaled, its nodes not all up yet: a misfit there is a warning."""
    if machine is not None:
        _check(spec, machine)
    elif starts_local_ray(address) and not ray_running():
        _check_this_machine(spec, num_cpus)
    else:
        _check_ray(spec, address)


def _check(spec: SweepSpec, machine: Machine) -> None:
    placement.check_sweep_fits(spec, machine)


def target_machine(address: str | None = None, num_cpus: float | None = None) -> Machine:
    """Where a sweep's trials would run, as `check_fits` reads it: this machine (its CPUs, or
    `num_cpus`; its GPUs, looked up where a driver says there may be some) while the sweep would
    start Ray here, else what the Ray it runs on offers (the cluster at `address`, joined for
    it). What `rlsweep.plan.layout` lays trials out for and the size guard estimates on."""
    if starts_local_ray(address) and not ray_running():
        return _this_machine(num_cpus, look_up_gpus=placement.gpus_may_exist())
    import ray

    with ray_session(address=address, num_cpus=None, jemalloc=False, dashboard=None):
        total = ray.cluster_resources()
        nodes = [n["Resources"].get("CPU", 0) for n in ray.nodes() if n.get("Alive")]
    return Machine(
        total.get("CPU", 0),
        total.get("GPU", 0),
        where="the cluster",
        node_cpus=max(nodes, default=0),
    )


def _this_machine(num_cpus: float | None, look_up_gpus: bool) -> Machine:
    """This machine, named as `--num-cpus` gives it where given (errors then name the flag)."""
    here = placement.local_machine(num_cpus, look_up_gpus=look_up_gpus)
    if num_cpus is None:
        return here
    return dataclasses.replace(here, where=f"this machine at --num-cpus {num_cpus:g}")


def _check_this_machine(spec: SweepSpec, num_cpus: float | None) -> None:
    here = _this_machine(num_cpus, look_up_gpus=spec.takes_gpus)
    try:
        _check(spec, here)
    except SpecError as e:
        if here.gpus or not e.path.endswith("num_gpus"):
            raise
        raise SpecError(e.source, e.path, e.message + NO_GPU_HINT) from None


def _check_ray(spec: SweepSpec, address: str | None) -> None:
    import ray

    with ray_session(address=address, num_cpus=None, jemalloc=False, dashboard=None):
        total = ray.cluster_resources()
    try:
        _check(spec, Machine(total.get("CPU", 0), total.get("GPU", 0), where="the cluster"))
    except SpecError as e:
        if starts_local_ray(address):  # a Ray started here: no node will join it
            raise
        print(f"rlsweep: warning: {e} now; trials wait for the autoscaler to add nodes")
