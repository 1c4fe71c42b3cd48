"""Carry an experiment dir to another machine in parts of bounded size: a sweep stopped by
`--time-limit` on one node (a spot node, a SLURM allocation, a GPU held for minutes) goes on
with `rlsweep resume` on the next.

    rlsweep pack results/study --out parts --part-mb 16    # on the machine that stops
    rlsweep unpack parts --dest results                     # on the next: results/study

`pack` writes what a resume needs, once the dir is as a resume would set it
(`rlsweep.experiment.recovery.reconcile`): the whole experiment dir except the checkpoints
a resume never loads (`carried_checkpoints`: none of a trial that ended, Tune's TERMINATED; of
one that did not, all but the one its resume restores it from), as one gzipped tar cut into
parts with a manifest (sha256 of every part and of the whole, what was left out);
a checkpoint's large files (its weights and Adam's moments, float32 arrays that gzip alone
shrinks to 88-92%) go in byte-shuffled (`shuffle`), which gzip shrinks to 83-85%, and
`unpack` puts back;
`lean` also leaves out what neither a resume nor a report reads, where every byte carried
counts (a GPU held for minutes brings 64 MiB back): TensorBoard's event files and the report,
which `rlsweep report` writes again. `unpack`
refuses a missing or altered part by name before it writes anything, then restores the dir
under `dest`, at any path: nothing in it holds the old one in a way a resume reads
(tests/test_recovery.py moves one through these parts and resumes it).

A pack refuses a dir that holds no Tune state that reads (a sweep stopped before Tune took it
up): a resume could not continue it, and carried on it would cost every later machine its start.
Each pack says which carry its dir continues (`continues`: the `archive_sha256` of the pack it
was unpacked from or last packed into, which the dir's `LINEAGE` file keeps), so that who takes
parts back can tell a newer carry from an older one taken back again.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

import numpy as np

from rlsweep._ray_compat import TERMINATED
from rlsweep.experiment.experiment_dir import SWEEP_FILE, holds_sweep
from rlsweep.experiment.recovery import reconcile
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


TENSORBOARD_FILES = "events.out.tfevents.*"
"""A trial dir's TensorBoard event files: a lean pack leaves them out (nothing reads them)."""
SHUFFLE_MIN_BYTES = 1 << 20
"""A file in a carried checkpoint of at least this size goes into the pack byte-shuffled."""
WORD = 4  # float32: the bytes shuffled into planes, first bytes first, then second bytes, ...
LINEAGE = ".carry.json"
"""In an experiment dir: `{"carry": sha}`, the archive_sha256 of the pack it was last unpacked
from or packed into (a pack's `continues`)."""
REPORT_DIR = "report"
"""The experiment dir's report (`rlsweep.results.report.default_out`): a lean pack leaves it
out (`rlsweep report`, `resume` and `ablate` write it again)."""


def carried_checkpoints(experiment: Path) -> dict[str, set[str]]:
    """Per trial dir in Tune's newest experiment state, the checkpoints a resume loads from it:
    of each trial not ended (Tune's TERMINATED), the one `rlsweep.experiment.recovery.reconcile`
    restores it from (its newest complete one, where newer than the one the state names), in
    the dir of the trial it belongs to (PBT's exploit may have given it another's). Trial dirs
    the state does not name are not in it (all of theirs are carried)."""
    import pyarrow.fs as pafs

    from rlsweep._ray_compat import TuneState
    from rlsweep.experiment.recovery import newer_checkpoint

    fs = pafs.LocalFileSystem()
    trials = TuneState(fs, str(experiment)).trials
    carried: dict[str, set[str]] = {trial.dirname: set() for trial in trials}
    for trial in trials:
        if trial.status == TERMINATED:  # ended: it loads none again
            continue
        if trial.checkpoint_owner is not None:  # exploited: the other trial's, as Tune named it
            carried.setdefault(trial.checkpoint_owner, set()).add(trial.checkpoint)
            continue
        newer = newer_checkpoint(fs, str(experiment / trial.dirname), trial.checkpoint)
        checkpoint = newer[0] if newer is not None else trial.checkpoint
        if checkpoint is not None:
            carried[trial.dirname].add(checkpoint)
    return carried


def shuffle(data: bytes) -> bytes:
    """`data`'s 4-byte words as 4 planes (every word's first byte, then every second byte, ...;
    a tail shorter than a word as it is): the exponent bytes of float32 arrays, alike from
    number to number, then sit together where gzip finds them."""
    whole = len(data) // WORD * WORD
    words = np.frombuffer(data, np.uint8, whole).reshape(-1, WORD)
    return words.T.tobytes() + data[whole:]


def unshuffle(data: bytes) -> bytes:
    """What `shuffle` took: `unshuffle(shuffle(b)) == b` for any bytes."""
    whole = len(data) // WORD * WORD
    planes = np.frombuffer(data, np.uint8, whole).reshape(WORD, -1)
    return planes.T.tobytes() + data[whole:]


def pack(
    experiment: Path,
    out: Path,
    part_bytes: int,
    lean: bool = False,
    max_bytes: int | None = None,
) -> dict:
    """Write `experiment` (less the checkpoints a resume never loads; `lean`: less
    TensorBoard's files and the report too) into `out` as parts of at most `part_bytes` bytes
    and `manifest.json`. Returns the manifest. `max_bytes`: the most the parts may weigh in
    all (what a transfer brings back); a pack heavier than that leaves out the checkpoints of
    the unfinished trials that got least far, one by one, until it fits, and its Tune state
    has them start anew (`checkpoints_dropped_to_fit`): the progress of a few trials is lost
    rather than all of it. CarryError where nothing is left to leave out. The archived Tune
    state tracks only the checkpoints carried (the dir's own is not changed)."""
    import pyarrow.fs as pafs

    from rlsweep._ray_compat import TuneState

    experiment = experiment.resolve()
    if not (experiment / SWEEP_FILE).is_file():
        raise CarryError(f"{experiment}: not an experiment dir (no {SWEEP_FILE})")
    if not _tune_state_reads(experiment):
        raise CarryError(
            f"{experiment}: holds no Tune state that reads (the sweep stopped before Tune took "
            "it up): no resume could continue it; start it anew"
        )
    # What a resume does first, done before the checkpoints it would read are left out: where
    # the driver was killed behind its trials (a sitting's backstop), the reports that only the
    # checkpoints between Tune's and the newest keep are written to result.json now.
    reconcile(str(experiment))
    carried = carried_checkpoints(experiment)
    state = TuneState(pafs.LocalFileSystem(), str(experiment))
    # Where it goes, Tune's state tracks no checkpoint the pack leaves out of a trial that will
    # checkpoint again (keep_checkpoints > 1: the older ones).
    untracked = [
        t.dirname
        for t in state.trials
        if t.status != TERMINATED and state.track_only(t.dirname, carried)
    ]
    dropped: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        archive = Path(tmp) / ARCHIVE
        while True:
            changed = state.dumps() if dropped or untracked else None
            left_out, shuffled, packed = _archive(
                experiment, archive, carried, lean, state.path, changed
            )
            size = archive.stat().st_size
            if max_bytes is None or size <= max_bytes:
                break
            least = _least_advanced(experiment, carried)
            if least is None:
                raise CarryError(
                    f"{experiment}: packs into {size / 2**20:.1f} MiB, more than "
                    f"{max_bytes / 2**20:.1f} MiB, with no checkpoint left to leave out"
                )
            owner, name = least
            carried[owner].discard(name)
            for trial in state.trials:  # the trial itself, and any PBT gave it to
                if trial.checkpoint == name and (trial.checkpoint_owner or trial.dirname) == owner:
                    state.forget_checkpoints(trial.dirname)
            dropped.append(f"{owner}/{name}")
        # Only now that this pack stands: an earlier pack's parts and manifest go, whose longer
        # pack's last parts would be taken for this one's (a refused pack leaves them whole).
        for stale in [*out.glob(f"{ARCHIVE}.part*"), out / MANIFEST]:
            stale.unlink(missing_ok=True)
        manifest = {
            "experiment": experiment.name,
            "bytes": sum(f.stat().st_size for f in experiment.rglob("*") if f.is_file()),
            "packed_bytes": packed,
            "checkpoints_left_out": sorted(left_out),
            "checkpoints_dropped_to_fit": dropped,
            "lean": lean,
            "byte_shuffled": [str(Path(n).relative_to(experiment.name)) for n in shuffled],
            "archive_sha256": sha256(archive),
            "continues": _lineage(experiment),
            "parts": cut(archive, out, part_bytes),
        }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    _set_lineage(experiment, manifest["archive_sha256"])
    return manifest


def _archive(
    experiment: Path,
    archive: Path,
    carried: dict[str, set[str]],
    lean: bool,
    state_path: str | None,
    state: bytes | None,
) -> tuple[list[str], list[str], int]:
    """Write the gzipped tar of `experiment` to `archive`, less the checkpoints `carried` does
    not name (`lean`: and what no resume reads), with the Tune state file `state_path` written
    as `state` where given. The checkpoints left out, the members byte-shuffled, and the bytes
    of the files packed (before gzip)."""
    left_out: list[str] = []
    shuffled: list[str] = []
    state_member = None if state is None else f"{experiment.name}/{Path(str(state_path)).name}"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        # <experiment>/<trial>/checkpoint_000003: a dir left out is left out whole.
        parts = Path(info.name).parts
        name = "/".join(parts[1:])
        if info.name == state_member:
            return None  # added below, changed
        if len(parts) == 3 and CHECKPOINT_DIR.match(parts[2]) and parts[1] in carried:
            if parts[2] in carried[parts[1]]:
                return info
            left_out.append(name)
            return None
        if info.isfile() and info.size >= SHUFFLE_MIN_BYTES and _in_checkpoint(parts):
            shuffled.append(info.name)  # added below, shuffled
            return None
        if lean and info.isdir() and name == REPORT_DIR:
            return None
        if lean and len(parts) == 3 and Path(parts[2]).match(TENSORBOARD_FILES):
            return None
        return info

    with tarfile.open(archive, "w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as tar:
        tar.add(experiment, arcname=experiment.name, filter=keep)
        for name in shuffled:
            path = experiment.parent / name
            info = tar.gettarinfo(path, arcname=name)
            tar.addfile(info, io.BytesIO(shuffle(path.read_bytes())))
        if state_member is not None:
            info = tar.gettarinfo(str(state_path), arcname=state_member)
            info.size = len(state)
            tar.addfile(info, io.BytesIO(state))
        packed = sum(m.size for m in tar.getmembers() if m.isfile())
    return left_out, shuffled, packed


def _least_advanced(experiment: Path, carried: dict[str, set[str]]) -> tuple[str, str] | None:
    """(trial dir, checkpoint) of the carried checkpoint that got least far (its env steps, as
    its manifest says; 0 without one), None where none is carried."""
    import pyarrow.fs as pafs

    from rlsweep.manifest import complete_manifest

    fs = pafs.LocalFileSystem()

    def steps(owner: str, name: str) -> float:
        manifest = complete_manifest(fs, str(experiment / owner / name))
        return float(manifest["env_steps"]) if manifest else 0.0

    held = [(steps(o, n), o, n) for o, names in carried.items() for n in names]
    return None if not held else min(held)[1:]


def _tune_state_reads(experiment: Path) -> bool:
    import pyarrow.fs as pafs

    from rlsweep._ray_compat import TuneState

    return TuneState(pafs.LocalFileSystem(), str(experiment)).path is not None


def _lineage(experiment: Path) -> str | None:
    """The carry `experiment` continues (`LINEAGE`), None for one never carried."""
    try:
        return json.loads((experiment / LINEAGE).read_text())["carry"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _set_lineage(experiment: Path, sha: str) -> None:
    (experiment / LINEAGE).write_text(json.dumps({"carry": sha}) + "\n")


def _in_checkpoint(parts: tuple[str, ...]) -> bool:
    """Whether a member's path parts (<experiment>/<trial>/checkpoint_N/...) lie in a checkpoint."""
    return len(parts) > 3 and CHECKPOINT_DIR.match(parts[2]) is not None


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
            for name in manifest.get("byte_shuffled", []):
                path = Path(tmp) / manifest["experiment"] / name
                path.write_bytes(unshuffle(path.read_bytes()))
            shutil.copytree(Path(tmp) / manifest["experiment"], target, dirs_exist_ok=True)
    except WheelhouseError as e:
        raise CarryError(str(e)) from None
    _set_lineage(target, manifest["archive_sha256"])
    return target
