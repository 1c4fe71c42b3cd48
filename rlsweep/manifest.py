"""What makes a checkpoint dir complete: its manifest, the last file a trial writes into it.

A driver killed without warning (SIGKILL, an OOM kill, a reclaimed node) can leave a trial's
newest checkpoint half copied to storage. The manifest lists every other file of the checkpoint
with its size, so a resume (`rlsweep.experiment.recovery`) tells a whole checkpoint from a torn one
by reading the files' sizes, without loading any of them. It also says which iteration the
checkpoint holds and what the trial reported with it, for a checkpoint whose result row the
driver never wrote (killed between the trial's upload and its logging of the report).

Pure and torch-free: the trial writes it (`rlsweep.trial.checkpoint.save`), the driver reads it.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pyarrow.fs as pafs

MANIFEST = "rlsweep_manifest.json"
"""In each checkpoint dir: {"iteration": int, "env_steps": float, "files": {path: size},
"result": the trial's report of that iteration (absent from manifests before it),
"written_at": Unix time}."""


def write_manifest(
    path: str, iteration: int, env_steps: float, result: dict[str, Any] | None = None
) -> None:
    """List every file under the checkpoint dir `path` with its size, then write the manifest
    there, with `result`, the metrics the trial reports with this checkpoint: call it after
    everything else is written."""
    files = {}
    for parent, _, names in os.walk(path):
        for name in names:
            full = os.path.join(parent, name)
            files[os.path.relpath(full, path)] = os.path.getsize(full)
    files.pop(MANIFEST, None)
    record = {
        "iteration": int(iteration),
        "env_steps": float(env_steps),
        "files": files,
        "result": result,
        "written_at": time.time(),
    }
    with open(os.path.join(path, MANIFEST), "w") as f:
        json.dump(record, f, default=_plain)


def _plain(value: Any) -> Any:
    """A numpy scalar as its Python value; anything else JSON cannot write, as its text (as
    Tune's result.json writes it)."""
    return value.item() if hasattr(value, "item") else str(value)


def complete_manifest(fs: pafs.FileSystem, path: str) -> dict[str, Any] | None:
    """The manifest of the checkpoint dir `path` on `fs` if every file it lists is there with
    its size; None for a torn checkpoint, or one without a manifest (written by an rlsweep
    before manifests: a resume leaves those to Tune's own record)."""
    try:
        with fs.open_input_stream(f"{path}/{MANIFEST}") as f:
            record = json.loads(f.read().decode())
        files = record["files"]
        int(record["iteration"])
    except (FileNotFoundError, OSError, ValueError, KeyError, TypeError):
        return None
    infos = fs.get_file_info([f"{path}/{name}" for name in files]) if files else []
    for info, size in zip(infos, files.values(), strict=True):
        if info.type != pafs.FileType.File or info.size != size:
            return None
    return record
