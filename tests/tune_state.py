"""Tune experiment state files written as Tune 2.60 writes them (`TuneState` reads them), for
tests of what a resume or a pack does with one: trials, their tracked checkpoints, their last
reports. The checkpoint dirs and result files on disk are the test's to write."""

import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow.fs as pafs

from rlsweep import metrics as M


def report(iteration: int) -> dict:
    """The result of a trial's `iteration`: 256 env steps an iteration."""
    return {M.TUNE_ITERATION: iteration, M.ENV_STEPS: 256.0 * iteration}


def trial_entry(
    root: Path,
    name: str,
    tracked: list[tuple[str, int]],
    last: int | None,
    keep: int | None = 1,
    status: str = "PAUSED",
) -> list[str]:
    """One trial of the state of the experiment dir `root`, in its dir `name`: Tune's checkpoint
    manager (num_to_keep `keep`) tracking `tracked`, (checkpoint path under `root`, iteration)
    oldest first, the last of them the one it restores from; `last`: the iteration of its last
    report (None: the state records none)."""
    from ray.train import Checkpoint, CheckpointConfig
    from ray.train._internal.checkpoint_manager import _CheckpointManager
    from ray.train._internal.session import _TrainingResult
    from ray.tune.utils.serialization import TuneFunctionEncoder

    fs = pafs.LocalFileSystem()
    manager = _CheckpointManager(CheckpointConfig(num_to_keep=None))
    for path, iteration in tracked:  # all registered, then bounded: Tune deletes none here
        checkpoint = Checkpoint(path=f"{root}/{path}", filesystem=fs)
        result = _TrainingResult(checkpoint=checkpoint, metrics=report(iteration))
        manager.register_checkpoint(result)
    manager._checkpoint_config = CheckpointConfig(num_to_keep=keep)
    storage = SimpleNamespace(trial_fs_path=f"{root}/{name}", storage_filesystem=fs)
    trial = {"relative_logdir": name, "status": status, "trial_id": name, "storage": storage}
    meta = {"checkpoint_manager": manager}
    if last is not None:
        meta["last_result"] = report(last)
    return [json.dumps(x, cls=TuneFunctionEncoder) for x in (trial, meta)]


def write_state(root: Path, entries: list[list[str]]) -> None:
    """`root`'s Tune state file, of the trials `entries` (`trial_entry`)."""
    root.mkdir(parents=True, exist_ok=True)
    state = {"trial_data": entries}
    (root / "experiment_state-2026-11-30_10-00-00.json").write_text(json.dumps(state))
