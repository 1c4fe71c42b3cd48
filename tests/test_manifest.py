"""rlsweep.manifest: a checkpoint is whole where its manifest says so, file by file and size by
size; a torn or unreadable one is not, and reads as None (a resume then takes an older one)."""

import json

import numpy as np
import pyarrow.fs as pafs

from rlsweep.manifest import MANIFEST, complete_manifest, write_manifest

FS = pafs.LocalFileSystem()


def test_a_checkpoint_is_whole_only_as_its_manifest_lists_it(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "weights.bin").write_bytes(b"w" * 1000)
    (tmp_path / "sub" / "state.pkl").write_bytes(b"s" * 10)
    write_manifest(str(tmp_path), 7, 1792.0, {"loss": np.float32(0.5), "x": 1})
    write_manifest(str(tmp_path), 7, 1792.0, {"loss": np.float32(0.5), "x": 1})  # again
    record = complete_manifest(FS, str(tmp_path))
    assert record["files"] == {"weights.bin": 1000, "sub/state.pkl": 10}  # not itself
    assert (record["iteration"], record["env_steps"]) == (7, 1792.0)
    assert record["result"] == {"loss": 0.5, "x": 1}  # numpy's float as a number
    # Torn as a killed copy leaves it: a file short, or missing.
    (tmp_path / "weights.bin").write_bytes(b"w" * 999)
    assert complete_manifest(FS, str(tmp_path)) is None
    (tmp_path / "weights.bin").unlink()
    assert complete_manifest(FS, str(tmp_path)) is None


def test_a_manifest_that_does_not_read_is_no_manifest(tmp_path):
    assert complete_manifest(FS, str(tmp_path)) is None  # an rlsweep before manifests
    for text in ("{garbage", json.dumps({"files": {}}), json.dumps({"iteration": "x"})):
        (tmp_path / MANIFEST).write_text(text)
        assert complete_manifest(FS, str(tmp_path)) is None, text
    (tmp_path / MANIFEST).write_text(json.dumps({"iteration": 3, "files": {}}))
    assert complete_manifest(FS, str(tmp_path))["iteration"] == 3
