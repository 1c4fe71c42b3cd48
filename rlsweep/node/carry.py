"""Carry an experiment dir to another machine in parts of bounded size: a sweep stopped by
`--time-limit` on one node (a spot node, a SLURM allocation, a GPU held for minutes) goes on
with `rlsweep resume` on the next.

    rlsweep pack results/study --out parts --part-mb 16    # on the machine that stops
    rlsweep unpack parts --dest results                     # on the next: results/study

`pack` writes what a resume needs: the whole experiment dir except the checkpoints of trials
that ended (Tune's TERMINATED: a resume never loads them again), as one gzipped tar cut into
parts with a manifest (sha256 of every part and of the whole, what was left out). `unpack`
refuses a missing or altered part by name before it writes anything, then restores the dir
under `dest`, at any path: nothing in it holds the old one in a way a resume reads
(tests/test_recovery.py moves one through these parts and resumes it).
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from pathlib import Path

from rlsweep.experiment.experiment_dir import SWEEP_FILE, holds_sweep
from rlsweep.node.wheelhouse import (
    MANIFEST,
    WheelhouseError,
    cut,
    read_manifest,
    reassemble,
    sha256,
)
from rlsweep.storage import CHECKPOINT_DIR

ARCHIVE = "experiment.tar.gz"


class CarryError(RuntimeError):
    """Parts that cannot be packed or unpacked: names the file and what is wrong."""


def ended_trials(experiment: Path) -> list[str]:
    """The trial dirs whose trials ended (Tune's TERMINATED in the newest experiment state):
    a resume never loads their checkpoints (rlsweep.experiment.recovery skips them too)."""
    import pyarrow.fs as pafs

    from rlsweep._ray_compat import TuneState

    state = TuneState(pafs.LocalFileSystem(), str(experiment))
    return sorted(t.dirname for t in state.trials if t.status == "TERMINATED")


def pack(experiment: Path, out: Path, part_bytes: int) -> dict:
    """Write `experiment` (less the ended trials' checkpoints) into `out` as parts of at most
    `part_bytes` bytes and `manifest.json`. Returns the manifest."""
    experiment = experiment.resolve()
    if not (experiment / SWEEP_FILE).is_file():
        raise CarryError(f"{experiment}: not an experiment dir (no {SWEEP_FILE})")
    ended = set(ended_trials(experiment))

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts  # <experiment>/<trial>/checkpoint_000003/...
        if len(parts) >= 3 and parts[1] in ended and CHECKPOINT_DIR.match(parts[2]):
            return None
        return info

    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(f"{ARCHIVE}.part*"):
        stale.unlink()  # a part of an earlier, longer pack would be taken for this one's
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        archive = Path(tmp) / ARCHIVE
        with tarfile.open(archive, "w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as tar:
            tar.add(experiment, arcname=experiment.name, filter=keep)
        manifest = {
            "experiment": experiment.name,
            "bytes": sum(f.stat().st_size for f in experiment.rglob("*") if f.is_file()),
            "checkpoints_left_out": sorted(ended),
            "archive_sha256": sha256(archive),
            "parts": cut(archive, out, part_bytes),
        }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def unpack(parts: Path, dest: Path) -> Path:
    """Verify the parts in `parts`, then restore the experiment dir under `dest`; its path.
    Refuses to write over a sweep; a dir there that holds none (a study's committed notes and
    report) takes the experiment's files in, its own kept unless the experiment has them."""
    try:
        manifest = read_manifest(parts)
        target = dest / manifest["experiment"]
        if holds_sweep(str(target)):
            raise CarryError(f"{target}: holds a sweep already; move it away or unpack elsewhere")
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest) as tmp:
            archive = Path(tmp) / ARCHIVE
            reassemble(parts, manifest, archive)
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            shutil.copytree(Path(tmp) / manifest["experiment"], target, dirs_exist_ok=True)
    except WheelhouseError as e:
        raise CarryError(str(e)) from None
    return target
