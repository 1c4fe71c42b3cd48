"""benchmarks/gpu_check.py (`make gpu-check`): the system libraries it unpacks from .debs on a
node without a package index, and its CPU path run for real through make."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402

needs_dpkg_deb = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")


def build_deb(folder: Path, package: str, files: dict[str, str]) -> Path:
    """A real .deb (dpkg-deb --build, xz) of `package` holding `files` (path -> text), named
    as `apt-get download` names them."""
    tree = folder / f"{package}-tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: 1.0-1\nArchitecture: amd64\n"
        "Maintainer: rlsweep tests <tests@example.invalid>\nDescription: test\n"
    )
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    deb = folder / f"{package}_1.0-1_amd64.deb"
    subprocess.run(
        ["dpkg-deb", "-Zxz", "--root-owner-group", "--build", str(tree), str(deb)],
        check=True,
        capture_output=True,
    )
    shutil.rmtree(tree)
    return deb


def test_debs_are_found_by_package_name_or_its_t64_rename(tmp_path):
    (tmp_path / "libglib2.0-0t64_2.80_amd64.deb").touch()  # fetched on Ubuntu 24.04
    for name in ("libx11-xcb1_1.8_amd64.deb", "libgl1-mesa-dri_23_amd64.deb"):
        (tmp_path / name).touch()
    (tmp_path / "libgl1_1.6.0-1_amd64.deb").touch()
    found = gpu_check.debs_for(["libglib2.0-0", "libx11-6", "libgl1"], tmp_path)
    assert found == {
        "libglib2.0-0": tmp_path / "libglib2.0-0t64_2.80_amd64.deb",
        "libgl1": tmp_path / "libgl1_1.6.0-1_amd64.deb",
    }


@needs_dpkg_deb
def test_a_deb_unpacks_the_same_with_and_without_dpkg(tmp_path, monkeypatch):
    lib = "usr/lib/x86_64-linux-gnu/libGLX.so.0"
    deb = build_deb(tmp_path, "libglx0", {lib: "not really a library"})
    gpu_check.unpack_deb(deb, tmp_path / "dpkg")
    monkeypatch.setattr(gpu_check.shutil, "which", lambda name: None)  # a node without dpkg
    gpu_check.unpack_deb(deb, tmp_path / "stdlib")
    for root in ("dpkg", "stdlib"):
        assert (tmp_path / root / lib).read_text() == "not really a library"
        assert gpu_check.library_dirs(tmp_path / root) == [(tmp_path / root / lib).parent]


@needs_dpkg_deb
def test_only_the_libraries_that_do_not_load_are_unpacked(tmp_path, libraries_unavailable):
    syslibs = tmp_path / "syslibs"
    syslibs.mkdir()
    build_deb(syslibs, "libglx0", {"usr/lib/x86_64-linux-gnu/libGLX.so.0": "glx"})
    build_deb(syslibs, "libgl1", {"usr/lib/x86_64-linux-gnu/libGL.so.1": "gl"})
    libraries_unavailable("libGLX.so.0", qt=gpu_check.qt_module())
    said = []
    packages, dirs = gpu_check.provide_system_libraries(syslibs, tmp_path / "root", said.append)
    assert packages == ["libglx0"]  # libGL loads here: its .deb stays packed
    assert dirs == [tmp_path / "root" / "usr" / "lib" / "x86_64-linux-gnu"]
    assert said == [
        "system libraries that do not load: libGLX.so.0",
        "unpacked libglx0_1.0-1_amd64.deb",
    ]


def test_a_missing_library_without_its_deb_is_named_with_the_fix(tmp_path, libraries_unavailable):
    libraries_unavailable("libgthread-2.0.so.0", qt=gpu_check.qt_module())
    said = []
    packages, dirs = gpu_check.provide_system_libraries(tmp_path, tmp_path / "root", said.append)
    assert (packages, dirs) == ([], [])
    assert said[1].startswith(f"no .deb in {tmp_path} for libglib2.0-0: run `make syslibs`")
    assert "apt-get install -y libglib2.0-0" in said[1]


def test_every_library_loading_here_unpacks_nothing(tmp_path):
    said = []
    assert gpu_check.provide_system_libraries(tmp_path, tmp_path, said.append) == ([], [])
    assert said == ["system libraries: all 13 of rlsweep.envs.qt load here"]


def _parts_folder(folder: Path, prefix: str, sizes_mib: list[float]) -> Path:
    """A folder of parts (sparse files of these sizes) and its manifest.json."""
    folder.mkdir(parents=True)
    parts = []
    for i, mib in enumerate(sizes_mib):
        name = f"{prefix}.part{i:03d}"
        with open(folder / name, "wb") as f:
            f.truncate(int(mib * 2**20))
        parts.append({"name": name})
    (folder / "manifest.json").write_text(json.dumps({"parts": parts}))
    return folder


def test_calls_pack_the_parts_into_as_few_device_calls_as_fit(tmp_path):
    # A wheelhouse of 60 + 40 MiB, 3 MiB of system libraries, a carried study of 3 x 15.5 MiB:
    # calls of 61 MiB (64 less the checkout) take them largest first, a part never split.
    house = _parts_folder(tmp_path / "wheelhouse", "wheelhouse.tar.xz", [60, 40])
    (house / "wheelhouse.py").write_text("# the installer\n")
    syslibs = tmp_path / "syslibs"
    syslibs.mkdir()
    (syslibs / "libx.deb").write_bytes(b"x" * (3 << 20))
    carried = _parts_folder(tmp_path / "carried", "experiment.tar.gz", [15.5, 15.5, 15.5])
    room = 61 * 2**20
    first = gpu_check.calls(house, syslibs, None, room)
    assert first == [
        [house / "manifest.json", house / "wheelhouse.py", house / "wheelhouse.tar.xz.part000"],
        [house / "wheelhouse.tar.xz.part001", syslibs],
    ]
    later = gpu_check.calls(house, syslibs, carried, room)  # 161.5 MiB: 3 calls (in order, 4)
    assert later == [
        first[0],
        [
            house / "wheelhouse.tar.xz.part001",
            carried / "manifest.json",
            carried / "experiment.tar.gz.part000",
            syslibs,
        ],
        [carried / "experiment.tar.gz.part001", carried / "experiment.tar.gz.part002"],
    ]
    too_small = r"part000: 60.0 MiB, more than a call's room \(50.0 MiB beside the checkout\)"
    with pytest.raises(ValueError, match=too_small):
        gpu_check.calls(house, syslibs, carried, 50 * 2**20)
    # The checkout rides with every call: what git tracks or would track, not what it ignores.
    assert 0 < gpu_check.checkout_bytes() < 8 * 2**20


def test_a_stand_in_has_what_the_wheelhouse_leaves_to_the_node_and_the_nodes_torch():
    # The node has numpy and PyYAML (so the wheelhouse leaves them out): the stand-in installs
    # them at the pins' versions. Ray is the wheelhouse's to install; torch is the node's own.
    pins = ["numpy==2.4.6", "PyYAML==6.0.4", "ray==2.60.0", "torch==2.13.0", "# a comment", ""]
    excluded = ["numpy", "pyyaml", "torch", "jax"]
    assert gpu_check.stand_in_requirements(excluded, pins, "torch==2.11.0") == [
        "numpy==2.4.6",
        "PyYAML==6.0.4",
        "torch==2.11.0",
    ]


def test_without_a_wheelhouse_it_stops_before_anything_runs(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "run"]
        + ["--wheelhouse", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        env={**os.environ, "OUT": str(out)},
        timeout=120,
    )
    assert proc.returncode == 2
    assert f"no wheelhouse at {tmp_path / 'none'}" in proc.stdout
    assert not (out / "doctor.log").exists()


@pytest.mark.rllib  # gpu.py --quick trains a real (tiny) rlsweep trial through Tune
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_gpu_check_runs_its_cpu_path(tmp_path):
    """`make gpu-check QUICK=1 NO_INSTALL=1`: doctor, the GPU tests (skipped: no GPU here),
    probes/sampler.py --quick, gpu.py --quick (K = 1 only, to keep it short), then
    probes/learner_ops.py, each stage's output printed and logged, under $OUT."""
    out = tmp_path / "out"
    proc = subprocess.run(
        ["make", "-s", "gpu-check", "QUICK=1", "NO_INSTALL=1", f"GPU_PYTHON={sys.executable}"]
        + ["GPU_ARGS=--packed 1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OUT": str(out)},
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    console = proc.stdout
    summary = json.loads((out / "gpu-check.json").read_text())
    assert [(s["stage"], s["rc"]) for s in summary["stages"]] == [
        ("doctor", 0),
        ("gpu-tests", 0),  # skipped here: no GPU
        ("sampler", 0),
        ("gpu", 0),
        ("learner-ops", 0),
    ]
    assert summary["unpacked"] == [] and summary["quick"]
    assert json.loads((out / "doctor.json").read_text())["passed"]
    quick = json.loads((out / "gpu_quick.json").read_text())  # gpu.py's own record, in $OUT
    (trial,) = quick["trials"]["1"]["trials"]  # its (c) trial's peak host memory, reported
    assert 0.3 < trial["perf/host_rss_peak_gib"] < 8, trial
    assert "host memory per trial: peak resident " in (out / "gpu.log").read_text()
    arms = json.loads((out / "sampler.json").read_text())["arms"].keys()
    assert arms == {"rllib", "batched", "batched, 2 env groups"}  # the default: 1 group
    floors = json.loads((out / "sampler.json").read_text())["floors"]
    assert floors.keys() == {
        "the envs alone",
        "the envs alone, torch copying the frames",
        "the envs alone, numpy copying the frames",
        "the batched loop alone",
    }
    assert all(v > 0 for v in floors.values())
    # Printed as it ran, in order, and kept in each stage's log.
    order = ["[doctor]", "ok    procgen", "[doctor] exit code 0", "[gpu]", "[gpu] exit code 0"]
    at = [console.index(marker) for marker in order]
    assert at == sorted(at)
    assert "ok    procgen" in (out / "doctor.log").read_text()
    assert "skipped" in (out / "gpu-tests.log").read_text()
    assert (out / "gpu.log").read_text().strip()
    ops = json.loads((out / "learner_ops.json").read_text())
    assert ops["minibatches"] > 0 and ops["ops_per_minibatch"]["postprocess_gradients"] > 0
    assert "every stage passed" in (out / "gpu-check.log").read_text()
