"""rlsweep.node.carry without Ray running: parts verified before anything is written, a target
never overwritten. A real sweep carried and resumed: tests/test_recovery.py; two GPU-style
sittings: tests/test_study_sitting.py."""

import gzip
import random
from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pytest

from rlsweep.cli import main
from rlsweep.node.carry import (
    SHUFFLE_MIN_BYTES,
    CarryError,
    pack,
    shuffle,
    unpack,
    unshuffle,
)

TUNE_STATE = "experiment_state-2026-11-30_00-00-00.json"


@pytest.fixture
def experiment(tmp_path) -> Path:
    exp = tmp_path / "node1" / "study"
    (exp / "trial_0" / "checkpoint_000002").mkdir(parents=True)
    (exp / "sweep.yaml").write_text("name: study\n")
    (exp / TUNE_STATE).write_text('{"trial_data": []}')  # Tune's state, naming no trial
    (exp / "trial_0" / "result.json").write_text('{"training_iteration": 1}\n')
    (exp / "trial_0" / "checkpoint_000002" / "weights.bin").write_bytes(
        random.Random(0).randbytes(16384)
    )
    return exp


def test_pack_and_unpack_restore_the_dir_byte_for_byte_elsewhere(tmp_path, experiment):
    manifest = pack(experiment, tmp_path / "parts", part_bytes=2000)
    assert manifest["experiment"] == "study" and len(manifest["parts"]) > 1
    assert manifest["checkpoints_left_out"] == []  # the state names no trial that ended
    target = unpack(tmp_path / "parts", tmp_path / "node2")
    assert target == tmp_path / "node2" / "study"
    files = sorted(p.relative_to(experiment) for p in experiment.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(target) for p in target.rglob("*") if p.is_file())
    assert all((target / f).read_bytes() == (experiment / f).read_bytes() for f in files)


def test_unpack_refuses_an_altered_or_missing_part_and_an_existing_dir(tmp_path, experiment):
    manifest = pack(experiment, tmp_path / "parts", part_bytes=2000)
    with pytest.raises(CarryError, match="holds a sweep already"):
        unpack(tmp_path / "parts", experiment.parent)
    second = tmp_path / "parts" / manifest["parts"][1]["name"]
    data = second.read_bytes()
    second.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(CarryError, match=f"{second.name}: checksum mismatch"):
        unpack(tmp_path / "parts", tmp_path / "node2")
    second.unlink()
    with pytest.raises(CarryError, match=f"{second.name}: missing part"):
        unpack(tmp_path / "parts", tmp_path / "node2")
    assert not (tmp_path / "node2" / "study").exists()  # nothing written before the check


def test_unpack_fills_a_dir_that_holds_no_sweep_keeping_its_own_files(tmp_path, experiment):
    # A study's committed notes (STATUS.md, report/) where its experiment dir goes.
    pack(experiment, tmp_path / "parts", part_bytes=1 << 20)
    notes = tmp_path / "node2" / "study"
    notes.mkdir(parents=True)
    (notes / "STATUS.md").write_text("where it stands\n")
    assert unpack(tmp_path / "parts", tmp_path / "node2") == notes
    assert (notes / "STATUS.md").read_text() == "where it stands\n"
    assert (notes / "sweep.yaml").read_text() == "name: study\n"
    assert (notes / "trial_0" / "checkpoint_000002" / "weights.bin").exists()


def test_the_cli_packs_unpacks_and_names_what_is_not_an_experiment(tmp_path, experiment, capsys):
    parts = str(tmp_path / "parts")
    assert main(["pack", str(experiment), "--out", parts, "--part-mb", "0.001"]) == 0
    assert "unpack it: rlsweep unpack" in capsys.readouterr().out
    assert main(["unpack", parts, "--dest", str(tmp_path / "node2")]) == 0
    assert "resume it: rlsweep resume" in capsys.readouterr().out
    assert main(["pack", str(tmp_path), "--out", parts]) == 2
    assert "not an experiment dir (no sweep.yaml)" in capsys.readouterr().err


def test_unshuffle_takes_back_what_shuffle_did_for_any_length():
    data = random.Random(1).randbytes(64)
    for n in range(len(data)):
        assert unshuffle(shuffle(data[:n])) == data[:n]
    assert shuffle(bytes([1, 2, 3, 4, 5, 6, 7, 8, 9])) == bytes([1, 5, 2, 6, 3, 7, 4, 8, 9])


def test_a_checkpoints_large_files_go_in_shuffled_smaller_and_come_back_whole(tmp_path, experiment):
    """Weights-like float32 (normal, a spread of magnitudes as Adam's moments have) in a
    checkpoint: the pack stores them shuffled, smaller than gzip makes them as they are, and
    unpack restores them byte for byte; a large file outside a checkpoint goes in as it is."""
    rng = np.random.default_rng(0)
    weights = (rng.standard_normal(SHUFFLE_MIN_BYTES // 4) * 0.02).astype(np.float32).tobytes()
    (experiment / "trial_0" / "checkpoint_000002" / "state.pkl").write_bytes(weights)
    (experiment / "trial_0" / "log.bin").write_bytes(weights)
    manifest = pack(experiment, tmp_path / "parts", part_bytes=1 << 30)
    assert manifest["byte_shuffled"] == ["trial_0/checkpoint_000002/state.pkl"]
    archive = (tmp_path / "parts" / manifest["parts"][0]["name"]).read_bytes()
    as_is = len(gzip.compress(weights, 6))
    assert len(gzip.compress(shuffle(weights), 6)) < 0.95 * as_is
    assert len(archive) < 2 * as_is  # both as they are, and 16 KiB of random bytes: more
    target = unpack(tmp_path / "parts", tmp_path / "node2")
    assert (target / "trial_0" / "checkpoint_000002" / "state.pkl").read_bytes() == weights
    assert (target / "trial_0" / "log.bin").read_bytes() == weights


def test_a_dir_without_tune_state_is_refused(tmp_path, experiment):
    """A sweep that stopped before Tune took it up: no resume could continue it, and carried on
    it would cost every later machine its start."""
    (experiment / TUNE_STATE).unlink()
    with pytest.raises(CarryError, match="holds no Tune state that reads"):
        pack(experiment, tmp_path / "parts", part_bytes=2000)
    (experiment / TUNE_STATE).write_text('{"trial_dat')  # torn by a kill mid-write
    with pytest.raises(CarryError, match="holds no Tune state that reads"):
        pack(experiment, tmp_path / "parts", part_bytes=2000)
    assert not (tmp_path / "parts").exists()


def test_each_pack_names_the_carry_its_dir_continues(tmp_path, experiment):
    """A dir's first pack continues none; one unpacked elsewhere and packed again continues the
    parts it came from, and so does a second pack where it was packed: what a take-back needs
    to tell a newer carry from an older one returned again."""
    first = pack(experiment, tmp_path / "one", part_bytes=2000)
    assert first["continues"] is None
    moved = unpack(tmp_path / "one", tmp_path / "node2")
    second = pack(moved, tmp_path / "two", part_bytes=2000)
    assert second["continues"] == first["archive_sha256"] != second["archive_sha256"]
    third = pack(moved, tmp_path / "three", part_bytes=2000)  # the same node, a sitting later
    assert third["continues"] == second["archive_sha256"]
    assert (
        pack(experiment, tmp_path / "four", part_bytes=2000)["continues"]
        == (first["archive_sha256"])
    )


def test_a_carried_state_tracks_only_the_checkpoints_the_pack_carries(tmp_path):
    """keep_checkpoints: 2. The pack carries each unfinished trial's newest checkpoint only, but
    the state it carried tracked the older one too: at the trial's next checkpoint on the next
    machine Tune deleted that missing one, and its `_delete_fs_path` raised FileNotFoundError
    (an ERROR traceback in the resumed sweep's log, the new checkpoint unregistered)."""
    from ray.train import Checkpoint
    from ray.train._internal.session import _TrainingResult
    from tune_state import report, trial_entry, write_state

    from rlsweep._ray_compat import TuneState
    from rlsweep.manifest import write_manifest

    exp = tmp_path / "node1" / "study"
    for index, iteration in ((0, 3), (1, 6)):
        path = exp / "t" / f"checkpoint_{index:06d}"
        path.mkdir(parents=True)
        write_manifest(str(path), iteration, 256.0 * iteration, report(iteration))
    (exp / "t" / "result.json").write_text("")
    (exp / "sweep.yaml").write_text("name: study\n")
    tracked = [("t/checkpoint_000000", 3), ("t/checkpoint_000001", 6)]
    write_state(exp, [trial_entry(exp, "t", tracked, last=6, keep=2)])
    manifest = pack(exp, tmp_path / "parts", part_bytes=1 << 20)
    assert manifest["checkpoints_left_out"] == ["t/checkpoint_000000"]
    elsewhere = unpack(tmp_path / "parts", tmp_path / "node2")
    state = TuneState(pafs.LocalFileSystem(), str(elsewhere))
    (trial,) = state.trials
    assert trial.checkpoint == "checkpoint_000001"  # still the one it restores from
    # Tune at the trial's next checkpoint there (the paths as Tune's restore moves them):
    manager = state._trials[0][1]["checkpoint_manager"]
    for tracked_result in manager._checkpoint_results:
        name = tracked_result.checkpoint.path.rsplit("/", 1)[-1]
        tracked_result.checkpoint = Checkpoint(path=f"{elsewhere}/t/{name}")
    new = elsewhere / "t" / "checkpoint_000002"
    new.mkdir()
    manager.register_checkpoint(_TrainingResult(checkpoint=Checkpoint(path=str(new)), metrics={}))
    assert (elsewhere / "t" / "checkpoint_000001").is_dir()  # kept: two, the newest
    assert (exp / "t" / "checkpoint_000000").is_dir()  # the source dir is not changed


def test_a_bounded_pack_drops_the_least_advanced_trial_and_a_refused_one_keeps_the_last(
    tmp_path,
):
    """What a sitting carries out, bounded to what comes back: each unfinished trial's newest
    checkpoint and no ended trial's; over the bound, the checkpoint of the trial that got
    least far goes first; a lean pack leaves out the report and TensorBoard's files. A pack
    refused (nothing left to drop) leaves the last pack in `out` whole: it deleted its parts
    first, and kept a manifest naming parts that were gone."""
    from tune_state import report, trial_entry, write_state

    from rlsweep.manifest import write_manifest

    exp = tmp_path / "node1" / "study"
    entries = []
    for name, iteration, status in (("a", 2, "PAUSED"), ("b", 8, "PAUSED"), ("c", 9, "TERMINATED")):
        for index in range(2):  # an older checkpoint, and the newest
            path = exp / name / f"checkpoint_{index:06d}"
            path.mkdir(parents=True)
            (path / "weights.bin").write_bytes(random.Random(index).randbytes(1 << 19))
            write_manifest(
                str(path),
                iteration - 1 + index,
                256.0 * (iteration - 1 + index),
                report(iteration - 1 + index),
            )
        (exp / name / "result.json").write_text("")
        (exp / name / "events.out.tfevents.1.node").write_text("tensorboard")
        tracked = [(f"{name}/checkpoint_{i:06d}", iteration - 1 + i) for i in range(2)]
        entries.append(trial_entry(exp, name, tracked, last=iteration, keep=2, status=status))
    (exp / "report").mkdir()
    (exp / "report" / "report.md").write_text("# report\n")
    (exp / "sweep.yaml").write_text("name: study\n")
    write_state(exp, entries)

    out = tmp_path / "parts"
    full = pack(exp, out, part_bytes=1 << 18, lean=True)
    assert full["checkpoints_left_out"] == [
        "a/checkpoint_000000",
        "b/checkpoint_000000",
        "c/checkpoint_000000",
        "c/checkpoint_000001",  # c ended: no resume loads it
    ]
    assert full["checkpoints_dropped_to_fit"] == []
    bounded = pack(exp, out, part_bytes=1 << 18, lean=True, max_bytes=(1 << 19) + (1 << 18))
    assert bounded["checkpoints_dropped_to_fit"] == ["a/checkpoint_000001"]  # a got least far
    assert sum(p["bytes"] for p in bounded["parts"]) <= (1 << 19) + (1 << 18)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json", *(p["name"] for p in bounded["parts"])]
    )  # the first pack's longer run of parts gone
    elsewhere = unpack(out, tmp_path / "node2")
    kept = sorted(str(p.relative_to(elsewhere)) for p in elsewhere.glob("*/checkpoint_*"))
    assert kept == ["b/checkpoint_000001"]
    assert not (elsewhere / "report").exists() and not list(elsewhere.glob("*/events.out.*"))

    with pytest.raises(CarryError, match="no checkpoint left to leave out"):
        pack(exp, out, part_bytes=1 << 18, lean=True, max_bytes=1)
    again = unpack(out, tmp_path / "node3")  # the last pack, whole
    assert sorted(str(p.relative_to(again)) for p in again.glob("*/checkpoint_*")) == kept
