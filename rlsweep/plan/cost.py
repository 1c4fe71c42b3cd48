"""What a sweep costs on EC2, from an editable price table (`rlsweep/plan/prices.yaml`).

Two views of the same price:

- a trial's own cost (`trial_cost`, used by the report): its wall time x its share of the
  instance it ran on, the share being the larger of its CPU and GPU fractions (a trial holding
  the only GPU of a 4-vCPU g5.xlarge pays for the whole instance). Idle capacity is charged to
  nobody;
- a cluster's bill (`cluster_cost`, and `instances_for` to size it): instances x hours x $/h,
  idle capacity included. `rlsweep plan` estimates this one.

Prices are estimates (see the table's header), so are the results.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rlsweep.errors import SpecError
from rlsweep.plan.placement import trials_at_once
from rlsweep.spec.validators import unknown
from rlsweep.spec.yamlfile import read_yaml

PRICES_PATH = Path(__file__).resolve().parent / "prices.yaml"
_KEYS = ("vcpus", "gpus", "on_demand", "spot")
_OPTIONAL = ("gpu_memory_gib",)


class PriceError(SpecError):
    """A price table or a lookup that cannot be used: names the file, the key path and what is
    allowed (a SpecError, so the CLI reports it the same way)."""


@dataclass(frozen=True)
class InstancePrice:
    """One instance type's size and prices."""

    vcpus: int
    """vCPUs: what Ray counts as the node's CPUs."""
    gpus: int
    """GPUs (0 for CPU instances)."""
    on_demand: float
    """USD per hour, on-demand."""
    spot: float
    """USD per hour, spot (an estimate: spot prices move)."""
    gpu_memory_gib: float | None = None
    """Memory of each GPU (optional; `rlsweep plan` checks packed trials against it)."""
    source: str | None = field(default=None, compare=False, repr=False)
    """Price table the entry was read from (for error messages)."""

    def hourly(self, spot: bool = False) -> float:
        """USD per hour, spot or on-demand."""
        return self.spot if spot else self.on_demand

    def share(self, cpus: float, gpus: float) -> float:
        """The instances a trial of `cpus` CPUs and `gpus` GPUs takes up: its larger share of
        the vCPUs and the GPUs (above 1: a trial larger than one instance)."""
        return max(cpus / self.vcpus, gpus / self.gpus if self.gpus else 0.0)


Prices = Mapping[str, InstancePrice]


def load_prices(path: str | Path | None = None) -> dict[str, InstancePrice]:
    """A price table: `path`, or the shipped `rlsweep/plan/prices.yaml`. Validated completely;
    errors name the file, the key path (`c6i.8xlarge.spot`) and what is allowed."""
    path = Path(path) if path is not None else PRICES_PATH
    source = str(path)
    try:
        data = read_yaml(path)
    except SpecError as e:
        raise PriceError(e.source, e.path, e.message) from None
    if not isinstance(data, dict) or not data:
        raise PriceError(source, "", "a price table maps instance types to {vcpus, gpus, ...}")
    table = {}
    for instance, entry in data.items():
        if not isinstance(instance, str) or not instance:
            raise PriceError(source, str(instance), "an instance type name is a string")
        if not isinstance(entry, dict):
            raise PriceError(
                source, instance, f"got {entry!r}; allowed: a mapping of {', '.join(_KEYS)}"
            )
        for key in entry:
            if key not in (*_KEYS, *_OPTIONAL):
                allowed = [*_KEYS, *_OPTIONAL]
                raise PriceError(source, f"{instance}.{key}", unknown("key", str(key), allowed))
        memory = entry.get("gpu_memory_gib")
        if memory is not None and not (
            isinstance(memory, int | float) and not isinstance(memory, bool) and memory > 0
        ):
            raise PriceError(
                source, f"{instance}.gpu_memory_gib", f"got {memory!r}; allowed: GiB, a number > 0"
            )
        for key in _KEYS:
            if key not in entry:
                raise PriceError(source, f"{instance}.{key}", "missing")
            value = entry[key]
            if key in ("vcpus", "gpus"):
                ok = isinstance(value, int) and not isinstance(value, bool)
                ok = ok and value >= (1 if key == "vcpus" else 0)
                allowed = "an integer >= 1" if key == "vcpus" else "an integer >= 0"
            else:
                ok = isinstance(value, int | float) and not isinstance(value, bool)
                ok = ok and math.isfinite(value) and value >= 0
                allowed = "USD per hour, a number >= 0"
            if not ok:
                raise PriceError(source, f"{instance}.{key}", f"got {value!r}; allowed: {allowed}")
        table[instance] = InstancePrice(**entry, source=source)
    return table


@functools.cache
def _shipped() -> dict[str, InstancePrice]:
    return load_prices()


def price(instance: str, prices: Prices | None = None) -> InstancePrice:
    """`instance`'s entry in `prices` (default: the shipped table)."""
    prices = _shipped() if prices is None else prices
    if instance not in prices:
        source = next((p.source for p in prices.values() if p.source), None)
        raise PriceError(
            source,
            instance,
            unknown("instance type", instance, sorted(prices))
            + " (add it to the price table, or pass your own with --prices FILE)",
        )
    return prices[instance]


def hourly(instance: str, spot: bool = False, prices: Prices | None = None) -> float:
    """USD per hour of one `instance`, spot or on-demand."""
    return price(instance, prices).hourly(spot)


def trial_cost(
    wall_s: float,
    cpus: float,
    gpus: float,
    instance: str,
    spot: bool = False,
    prices: Prices | None = None,
) -> float:
    """USD one trial cost: `wall_s` seconds on `instance`, holding `cpus` CPUs and `gpus` GPUs
    (its Ray resources: `rlsweep.plan.placement.placement(t)`'s cpus and gpus).

    = wall hours x instance $/h x max(cpus / vCPUs, gpus / GPUs). A trial bigger than the
    instance is charged for more than one instance."""
    p = price(instance, prices)
    if not (wall_s >= 0 and cpus >= 0 and gpus >= 0):
        raise ValueError(f"wall_s, cpus, gpus must be >= 0; got {wall_s}, {cpus}, {gpus}")
    check_gpus(gpus, p, instance)
    return wall_s / 3600 * p.hourly(spot) * p.share(cpus, gpus)


def cluster_cost(
    wall_s: float,
    instance: str,
    count: int = 1,
    spot: bool = False,
    prices: Prices | None = None,
) -> float:
    """USD of `count` x `instance` running `wall_s` seconds (what AWS bills, idle included)."""
    return count * wall_s / 3600 * hourly(instance, spot, prices)


def trials_per_instance(cpus: float, gpus: float, p: InstancePrice) -> int:
    """Trials of `cpus` CPUs and `gpus` GPUs that fit on one instance at once (0: none does;
    fractional GPU trials packed per GPU, as `rlsweep.plan.placement.trials_at_once` packs them)."""
    return trials_at_once(cpus, gpus, p.vcpus, p.gpus)[0]


def instances_for(concurrent: int, cpus: float, gpus: float, p: InstancePrice) -> int:
    """Instances that run `concurrent` trials at once; a trial larger than one instance spans
    several (its EnvRunners may be placed on other nodes)."""
    per = trials_per_instance(cpus, gpus, p)
    if per >= 1:
        return math.ceil(concurrent / per)
    return concurrent * math.ceil(p.share(cpus, gpus))


def check_gpus(gpus: float, p: InstancePrice, instance: str) -> None:
    """Refuse GPU trials on an instance type without GPUs."""
    if gpus and not p.gpus:
        raise PriceError(p.source, instance, f"has no GPUs; a trial needs num_gpus {gpus:g}")


def plan_cost(
    est_wall_s: float,
    concurrent: int,
    cpus: float,
    gpus: float,
    instance: str,
    count: int | None = None,
    spot: bool = False,
    prices: Prices | None = None,
) -> tuple[int, float]:
    """(instances, USD) for a plan: `count` (default: enough for `concurrent` trials of `cpus`
    CPUs and `gpus` GPUs at once) x `instance` for the plan's estimated wall time."""
    p = price(instance, prices)
    check_gpus(gpus, p, instance)
    n = count if count is not None else instances_for(concurrent, cpus, gpus, p)
    return n, cluster_cost(est_wall_s, instance, n, spot, prices)
