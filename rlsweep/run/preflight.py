"""What `validate`, `plan`, `run`, `resume` and `ablate` check before Ray starts, beyond the spec
itself (`SweepSpec.from_yaml`): that results can be kept where they go
(`storage.check_storage`), the trials' layout on the target (`rlsweep.plan.layout`), that they fit
there (`fits.check_fits`), and how long the sweep would take (`plan.make_plan`): a sweep whose
estimate passes `plan.LONG_SWEEP_S` (a week) is said to be long by validate and plan, and run
and ablate refuse to start it without `--allow-long`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlsweep.errors import SpecError
from rlsweep.experiment.experiment_dir import experiment_path
from rlsweep.plan.layout import Layout, choose, pinned
from rlsweep.plan.placement import Machine
from rlsweep.plan.plan import ALLOW_LONG, Plan, Throughput, make_plan, measured_throughput
from rlsweep.run.fits import fits_where_it_runs, target_machine
from rlsweep.spec.spec import SweepSpec
from rlsweep.storage import SKIP_REMOTE_CHECK, check_storage, is_uri


@dataclass(frozen=True)
class Checked:
    """A spec that passed the checks, as it runs on its target."""

    spec: SweepSpec
    """The spec in the target's layout (`rlsweep.plan.layout`: unchanged where it sets
    resources)."""
    plan: Plan | None
    """Its plan on the target; None where none is known (a cluster's trials that wait for the
    autoscaler's nodes)."""


def check(
    spec: SweepSpec,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    remote_storage: bool = True,
) -> Checked:
    """The checks of validate, run and ablate (see the module docstring), in order: storage,
    the layout on the target (this machine, or the cluster at `address`), fits, the plan.
    `remote_storage=False`: the URI's store is not asked (`SKIP_REMOTE_CHECK`)."""
    refuse_repeats(spec)
    check_spec_storage(spec, remote=remote_storage)
    machine = target_machine(address, num_cpus)
    if why := local_storage_on_nodes(spec, machine):
        print(f"rlsweep: warning: {why}")
    rate = measured_throughput()
    laid, layout = laid_out(spec, machine, rate)
    fits_where_it_runs(laid, machine, address)  # a cluster's misfit: a warning (its autoscaler)
    try:
        plan = make_plan(
            spec,
            cpus=machine.cpus,
            gpus=machine.gpus,
            gpu_memory=machine.gpu_memory_gib,
            throughput=rate,
            machine_name=machine.where,
            layout=layout,
        )
    except SpecError:
        plan = None  # trials that wait for nodes the cluster does not have yet
    return Checked(laid, plan)


def local_storage_on_nodes(spec: SweepSpec, machine: Machine) -> str | None:
    """Why a sweep's results dir may fail its trials on a joined cluster of several nodes (None
    where it is a URI, or the target one machine): Ray checkpoints a trial on another node than
    the driver's only to storage that node reaches, and fails it at its first checkpoint
    otherwise. Not an error: every node may mount the same filesystem there."""
    where = experiment_path(spec)
    if machine.nodes < 2 or is_uri(where):
        return None
    return (
        f"the cluster has {machine.nodes} nodes and the results go to {where}, a path: a trial "
        "on another node than this one fails at its first checkpoint unless that node reaches "
        "the path too (a shared filesystem); else give --storage s3://bucket/prefix"
    )


def plan_on(spec: SweepSpec, cpus: float, gpus: float) -> Plan | None:
    """`spec`'s plan (as laid out) on `cpus` CPUs and `gpus` GPUs, what a Ray session offers:
    the estimate a run records beside its real wall time; None where its trials do not fit."""
    try:
        return make_plan(spec, cpus=cpus, gpus=gpus, throughput=measured_throughput())
    except SpecError:
        return None


def laid_out(
    spec: SweepSpec, machine: Machine, rate: Throughput | None = None
) -> tuple[SweepSpec, Layout]:
    """`spec` in its layout on `machine` (`rlsweep.plan.layout.choose`, with the GPU packings
    measured, `rate`), and the layout."""
    rate = rate or measured_throughput()
    layout = choose(spec, machine, rate.gpu_packed, rate.gpu_source)
    return layout.apply(spec), layout


def on_target(
    spec: SweepSpec, address: str | None = None, num_cpus: int | None = None
) -> tuple[SweepSpec, Layout | None]:
    """`spec` in its layout where it would run (this machine, or the cluster at `address`,
    joined to look), as `check` lays it out; a spec that sets its resources (one `check` laid
    out already) is kept as it is, without looking (layout None)."""
    if pinned(spec):
        return spec, None
    return laid_out(spec, target_machine(address, num_cpus))


def refuse_repeats(spec: SweepSpec) -> None:
    """SpecError for a sweep that would run each trial `search.num_samples` times alike: more
    than one sample with nothing sampled (PBT perturbs sampled parameters: it has some). A rule
    for the sweeps that start (validate, plan, run, ablate, `run_sweep`), not of the spec: a
    sweep recorded with it still reads (its report counts each trial once)."""
    s = spec.search
    if s.num_samples > 1 and not spec.sampled_keys:
        raise SpecError(
            spec.source,
            "search.num_samples",
            f"got {s.num_samples} with no sampled parameter in space: every trial would run "
            f"{s.num_samples} times alike (the seeds repeat a trial); allowed: 1, or a sampled "
            "parameter ({choice|uniform|loguniform|int: ...})",
        )


def check_spec_storage(
    spec: SweepSpec, remote: bool = True, storage_path: str | None = None
) -> None:
    """`storage.check_storage` of the spec's results dir (under `storage_path` where given), its
    error at the spec's `storage_path` (`spec.yaml: storage_path: /proc/nope/demo: cannot be
    written: ...`)."""
    try:
        check_storage(experiment_path(spec, storage_path), remote=remote)
    except SpecError as e:
        raise SpecError(spec.source, "storage_path", e.message) from None


def long_warning(plan: Plan | None) -> str | None:
    """What validate and plan say of a long sweep (None: not long)."""
    if plan is None or not plan.too_long:
        return None
    return f"{plan.size_note()}; run and ablate start it only with {ALLOW_LONG}"


def refuse_long(plan: Plan | None, allow: bool) -> None:
    """Raise SpecError for a long sweep unless `allow` (run, ablate)."""
    if plan is None or not plan.too_long or allow:
        return
    raise SpecError(
        None,
        "",
        f"not started: {plan.size_note()}. Cut it down (--games, --seeds, --budget, KEY=VALUE "
        "overrides such as search.num_samples=4), run it where more trials run at once "
        f"(--address of a cluster; rlsweep plan SPEC --num-cpus N --gpus G), or start it anyway "
        f"with {ALLOW_LONG}",
    )


__all__ = [
    "SKIP_REMOTE_CHECK",
    "Checked",
    "check",
    "check_spec_storage",
    "long_warning",
    "plan_on",
    "refuse_long",
    "refuse_repeats",
]
