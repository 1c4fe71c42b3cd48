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


CLUSTER = "the cluster"
"""`Machine.where` of what a Ray that is already running offers (joined to read it)."""


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
    - else where the sweep runs, as `target_machine` reads it (`fits_where_it_runs`).
    Run and resume check again once Ray is up, since Ray may see fewer CPUs than the machine
    has (e.g. in a container)."""
    if machine is not None:
        placement.check_sweep_fits(spec, machine)
    else:
        where = target_machine(address, num_cpus, look_up_gpus=spec.takes_gpus)
        fits_where_it_runs(spec, where, address)


def fits_where_it_runs(spec: SweepSpec, machine: Machine, address: str | None) -> None:
    """`check_fits` on `machine`, read by `target_machine(address, ...)`: a misfit on this
    machine says where GPUs may be had; on a joined cluster, which may be autoscaled, its
    nodes not all up yet, it is a warning."""
    try:
        placement.check_sweep_fits(spec, machine)
    except SpecError as e:
        if machine.where == CLUSTER:
            if starts_local_ray(address):  # a Ray started here: no node will join it
                raise
            print(f"rlsweep: warning: {e} now; trials wait for the autoscaler to add nodes")
        elif machine.gpus or not e.path.endswith("num_gpus"):
            raise
        else:
            raise SpecError(e.source, e.path, e.message + NO_GPU_HINT) from None


def target_machine(
    address: str | None = None, num_cpus: float | None = None, *, look_up_gpus: bool = False
) -> Machine:
    """Where a sweep's trials would run: while the sweep would start Ray here (no `address`,
    no RAY_ADDRESS) and this process runs none, this machine: its CPUs (or `num_cpus`), GPUs
    and GPU memory, read without starting Ray, so a misfit fails at once; its GPUs are counted
    (by torch) where `look_up_gpus` or a driver says there may be some. Else what the Ray it
    runs on offers: the one this process is in, or the cluster at `address`, joined to ask it.
    What `check_fits` checks, `rlsweep.plan.layout` lays trials out for and the size guard
    estimates on."""
    if starts_local_ray(address) and not ray_running():
        return _this_machine(num_cpus, look_up_gpus or placement.gpus_may_exist())
    import ray

    with ray_session(address=address, num_cpus=None, jemalloc=False, dashboard=None):
        total = ray.cluster_resources()
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    return cluster_machine(total, nodes)


def cluster_machine(total: dict[str, float], nodes: list[dict[str, float]]) -> Machine:
    """A joined cluster as the layout and the fit checks see it, from Ray's resources in all
    (`total`) and of each live node (`nodes`): a GPU's trials run on its node, so they share
    that node's CPUs, not the cluster's."""
    gpu_nodes = [n for n in nodes if n.get("GPU", 0) > 0]
    return Machine(
        total.get("CPU", 0),
        total.get("GPU", 0),
        where=CLUSTER,
        node_cpus=max((n.get("CPU", 0) for n in nodes), default=0),
        cpus_per_gpu=min((n.get("CPU", 0) / n["GPU"] for n in gpu_nodes), default=None),
        cpu_only_cpus=sum(n.get("CPU", 0) for n in nodes if n.get("GPU", 0) <= 0),
        nodes=len(nodes),
    )


def _this_machine(num_cpus: float | None, look_up_gpus: bool) -> Machine:
    """This machine, named as `--num-cpus` gives it where given (errors then name the flag)."""
    here = placement.local_machine(num_cpus, look_up_gpus=look_up_gpus)
    if num_cpus is None:
        return here
    return dataclasses.replace(here, where=f"this machine at --num-cpus {num_cpus:g}")
