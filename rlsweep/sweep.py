"""`run_sweep()`: validate a spec on the driver, start (or join) Ray, run every trial, collect.

Where the sweep runs is an argument, never part of the spec: by default an embedded local Ray
instance; `address=` joins a running cluster.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rlsweep import metrics as M
from rlsweep.spec import SweepSpec, check_resources

# Per-trial result columns, in table order.
RESULT_COLUMNS = (
    M.ENV_STEPS,
    M.TRAIN_RETURN,
    M.TRAIN_RETURN_NORM,
    M.TEST_RETURN,
    M.TEST_RETURN_NORM,
    M.GAP_NORM,
    M.WALL_S,
)


def jemalloc_path() -> str | None:
    """Ray ships jemalloc; preloading it into trial processes ~2.4x'es RLlib PPO on CPU."""
    import ray

    path = os.path.join(os.path.dirname(ray.__file__), "core", "libjemalloc.so")
    return path if os.path.exists(path) else None


def runtime_env(jemalloc: bool = True) -> dict[str, Any]:
    env_vars = {}
    if jemalloc and (path := jemalloc_path()):
        env_vars["LD_PRELOAD"] = path
    return {"env_vars": env_vars}


def _local_gpus() -> int:
    import torch

    return torch.cuda.device_count()


@dataclass
class SweepResult:
    """A finished (or stopped) sweep: its spec, where it lives, and one row per trial."""

    spec: SweepSpec
    path: Path
    trials: pd.DataFrame

    def to_dataframe(self) -> pd.DataFrame:
        return self.trials.copy()


def trials_frame(spec: SweepSpec, result_grid) -> pd.DataFrame:
    """One row per trial: game, seed, swept params, final metrics, status, error."""
    from rlsweep.tune_bridge import resolved_config

    swept = list(spec.space)
    rows = []
    for result in result_grid:
        cfg = resolved_config(spec, result.config) if result.config else {}
        last = result.metrics or {}
        row: dict[str, Any] = {"game": cfg.get("game"), "seed": cfg.get("seed")}
        if spec.variants:
            row["variant"] = (result.config or {}).get("variant")
        row.update({k: _cell(cfg.get(k)) for k in swept})
        row.update({k: last.get(k, math.nan) for k in RESULT_COLUMNS})
        row["iterations"] = last.get("training_iteration", 0)
        row["status"] = "ERROR" if result.error else "TERMINATED"
        row["error"] = _first_line(result.error) if result.error else ""
        row["trial_dir"] = str(result.path)
        rows.append(row)
    df = pd.DataFrame(rows)
    if spec.variants:  # in the spec's order, as the write-up's columns are
        df["variant"] = pd.Categorical(df["variant"], categories=list(spec.variants))
        swept = ["variant", *swept]
    return df.sort_values(["game", *swept, "seed"], kind="stable").reset_index(drop=True)


def _cell(v: Any) -> Any:
    return str(v) if isinstance(v, list | tuple | dict) else v


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[-1] if text else ''}"


def run_sweep(
    spec: SweepSpec | str | Path,
    *,
    address: str | None = None,
    storage_path: str | None = None,
    trainable=None,
    num_cpus: int | None = None,
    jemalloc: bool = True,
    max_failures: int = 0,
) -> SweepResult:
    """Run every trial of `spec` and return the per-trial table.

    spec: a SweepSpec or the path of a YAML spec (validated before Ray starts).
    address: a running Ray cluster ("auto", "ray://..."); None starts Ray in-process.
    storage_path: overrides the spec's storage_path.
    trainable: the Tune trainable (default: the real RLlib trial, `train_trial`).
    num_cpus: CPUs of the embedded Ray instance (default: all).
    jemalloc: preload Ray's jemalloc into trial processes.
    """
    if not isinstance(spec, SweepSpec):
        spec = SweepSpec.from_yaml(spec)
    if address is None:  # checked before Ray starts; a cluster is checked once joined
        check_resources(spec, cpus=num_cpus or os.cpu_count() or 1, gpus=_local_gpus())
    import ray

    from rlsweep.tune_bridge import build_tuner

    if trainable is None:
        from rlsweep.trainable import train_trial as trainable

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address,
            num_cpus=num_cpus if address is None else None,
            runtime_env=runtime_env(jemalloc),
            include_dashboard=False,
            configure_logging=True,
            logging_level="WARNING",
        )
    try:
        if address is not None or not started_here:
            total = ray.cluster_resources()
            check_resources(spec, total.get("CPU", 0), total.get("GPU", 0), where="the cluster")
        tuner = build_tuner(spec, trainable, storage_path=storage_path, max_failures=max_failures)
        grid = tuner.fit()
    finally:
        if started_here:
            ray.shutdown()
    path = Path(grid.experiment_path)
    return SweepResult(spec=spec, path=path, trials=trials_frame(spec, grid))
