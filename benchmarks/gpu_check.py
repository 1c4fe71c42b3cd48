"""One command for a GPU node (`make gpu-check`): install, `rlsweep doctor`, the benchmarks.

    python3 benchmarks/gpu_check.py run [--wheelhouse DIR | --no-install] [--syslibs DIR]
                                        [--quick] [-- GPU.PY ARGS]
    python benchmarks/gpu_check.py fetch-syslibs [--dest DIR]   # where apt has an index
    python3 benchmarks/gpu_check.py calls [--carried DIR]       # what each device call carries
    python benchmarks/gpu_check.py stand-in --python PY --constraints FREEZE  # a node, here

Stdlib only: it runs with the node's own Python (and its torch) before anything is installed.
Stages, each printing its output as it comes and keeping it in a log under $OUT (default
results/benchmarks/, gpu.py's), so a run stopped by a time limit still leaves what it finished:

1. install: `wheelhouse.py install WHEELHOUSE -- --target build/gpu-check/site` (README
   "Offline install"); every later stage finds the wheelhouse's packages on PYTHONPATH, behind
   this checkout (the code being checked) and in front of the node's own (torch). `--no-install`
   uses this Python's environment as it is.
2. system libraries: those of `rlsweep.envs.qt.SYSTEM_LIBRARIES` that do not load here are unpacked
   from their .debs in SYSLIBS (fetched with `fetch-syslibs`, i.e. `make syslibs`, on a machine
   with an index) and put on LD_LIBRARY_PATH for the later stages: a node without a package
   index cannot apt-get them.
3. `rlsweep doctor --gpu` (without `--gpu` when `--quick`): doctor.log, doctor.json.
4. the tests that need a GPU (`GPU_TESTS`, skipped where there is none): gpu-tests.log.
5. `benchmarks/probes/sampler.py` (RLlib's sampling loop against rlsweep's batched one, by part;
   `--quick` likewise): sampler.log, sampler.json.
6. `benchmarks/gpu.py` (`--quick` on the CPU path), which writes gpu.json / gpu_quick.json
   into $OUT itself: gpu.log.
7. `benchmarks/probes/learner_ops.py` (the torch ops of a PPO update per minibatch, by part; on the
   GPU where there is one): learner-ops.log, learner_ops.json.

gpu-check.json sums up the stages (exit code, seconds) and what was unpacked. A stage that
fails does not stop the next, except a failed install (nothing after it could run). Exit code
0 when every stage succeeded, else 1.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "build" / "gpu-check"
"""Installed packages and unpacked libraries: big, so never under $OUT (which is shipped back)."""
GPU_TESTS = (
    "test_cuda_graphs.py",
    "test_connectors.py::test_to_host_together_gives_each_tensor_its_values_dtype_and_shape",
    "test_models.py::test_sample_categorical_draws_what_torchs_categorical_draws",
)
"""The tests that run only where there is a GPU (skipped elsewhere): run here, on one."""
NODE_TORCH = "torch==2.11.0"
"""The lent GPU nodes' torch (2.11.0+cu130; the device tool's KINDS.md, 2026-11): `stand-in`'s."""
DEFAULT_OUT = REPO / "results" / "benchmarks"
"""Where results go without $OUT: gpu.py's own default, where `rlsweep plan` reads gpu.json."""


@functools.cache
def qt_module() -> ModuleType:
    """rlsweep/envs/qt.py of this checkout, loaded as a file (once): `import rlsweep` would need the
    dependencies this script may be about to install."""
    spec = importlib.util.spec_from_file_location(
        "rlsweep_qt_file", REPO / "rlsweep" / "envs" / "qt.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# --- system libraries ------------------------------------------------------------------------
def debs_for(packages: list[str], folder: Path) -> dict[str, Path]:
    """The .deb of each package in `folder` (apt-get download's names, PACKAGE_VERSION_ARCH.deb,
    or the package's t64 rename's, as fetched on Ubuntu 24.04; the last name when there are
    several); packages without one are left out."""
    found = {}
    for package in packages:
        candidates = sorted(folder.glob(f"{package}_*.deb")) + sorted(
            folder.glob(f"{package}t64_*.deb")
        )
        if candidates:
            found[package] = candidates[-1]
    return found


def unpack_deb(deb: Path, dest: Path) -> None:
    """`dpkg-deb -x`, or where there is no dpkg, the deb's data archive read here (an `ar`
    archive holding data.tar.{xz,gz,bz2}; zstd needs dpkg-deb)."""
    dest.mkdir(parents=True, exist_ok=True)
    if shutil.which("dpkg-deb"):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
        return
    data = deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise ValueError(f"{deb}: not a .deb (no ar header)")
    pos = 8
    while pos + 60 <= len(data):
        name = data[pos : pos + 16].decode().strip().rstrip("/")
        size = int(data[pos + 48 : pos + 58].decode().strip())
        body = data[pos + 60 : pos + 60 + size]
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                tar.extractall(dest, filter="data")
            return
        pos += 60 + size + size % 2
    raise ValueError(f"{deb}: no data.tar member")


def library_dirs(root: Path) -> list[Path]:
    """The folders under `root` that hold shared libraries (usr/lib/x86_64-linux-gnu, ...)."""
    return sorted({p.parent for p in root.rglob("*.so*") if p.is_file() or p.is_symlink()})


def provide_system_libraries(syslibs: Path, dest: Path, log) -> tuple[list[str], list[Path]]:
    """Unpack the .debs of the declared libraries that do not load here: (packages unpacked,
    their library folders for LD_LIBRARY_PATH). Says what is missing and what it did."""
    qt = qt_module()
    missing = qt.missing_system_libraries()
    if not missing:
        log(f"system libraries: all {len(qt.SYSTEM_LIBRARIES)} of rlsweep.envs.qt load here")
        return [], []
    log("system libraries that do not load: " + ", ".join(lib.soname for lib, _ in missing))
    packages = qt.apt_packages(tuple(lib for lib, _ in missing))
    debs = debs_for(packages, syslibs) if syslibs.is_dir() else {}
    if absent := [p for p in packages if p not in debs]:
        log(
            f"no .deb in {syslibs} for {', '.join(absent)}: run `make syslibs` where apt has an "
            f"index and carry {syslibs.name}/ here, or {qt.install_hint([m for m, _ in missing])}"
        )
    shutil.rmtree(dest, ignore_errors=True)
    for deb in debs.values():
        unpack_deb(deb, dest)
        log(f"unpacked {deb.name}")
    return list(debs), library_dirs(dest) if debs else []


def fetch_syslibs(dest: Path) -> int:
    """`apt-get download` the declared packages into `dest` (this machine's release: Debian 12
    here; its libraries run on newer glibc too)."""
    packages = qt_module().apt_packages()
    dest.mkdir(parents=True, exist_ok=True)
    for package in packages:
        # Ubuntu 24.04 and Debian 13 only provide libglib2.0-0 (apt-get install resolves it,
        # apt-get download does not): there it is libglib2.0-0t64.
        for name in (package, f"{package}t64"):
            if subprocess.run(["apt-get", "download", name], cwd=dest).returncode == 0:
                break
        else:
            print(f"gpu-check: apt-get download {package} failed; `apt-get update` first?")
            return 1
    debs = debs_for(packages, dest)
    size = sum(p.stat().st_size for p in debs.values()) / 2**20
    print(f"{dest}: {len(debs)} .debs, {size:.1f} MiB, for {' '.join(packages)}")
    return 0


# --- stages ----------------------------------------------------------------------------------
class Run:
    """Stages run one after another, each teed to the console and to OUT/<name>.log (or, with
    `one_log`, all to OUT/<summary>.log: where few files may come back), summed up in
    OUT/<summary>.json."""

    def __init__(
        self, out: Path, env: dict[str, str], summary: str = "gpu-check", one_log: bool = False
    ) -> None:
        self.out, self.env, self.summary, self.one_log = out, env, summary, one_log
        self.stages: list[dict] = []
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"{summary}.log").write_text("")
        (self.out / f"{summary}.json").unlink(missing_ok=True)

    def log(self, line: str) -> None:
        print(f"{self.summary}: {line}", flush=True)
        with open(self.out / f"{self.summary}.log", "a") as f:
            f.write(line + "\n")

    def stage(self, name: str, argv: list[str], timeout: float | None = None) -> int:
        """Run `argv`; its exit code (124 when `timeout` seconds ran out first)."""
        self.log(f"[{name}] {' '.join(argv)}")
        t = time.monotonic()
        log_name = f"{self.summary if self.one_log else name}.log"
        with open(self.out / log_name, "a" if self.one_log else "w") as log:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",  # a stage's stray byte must not end the stages after it
                env=self.env,
                cwd=REPO,
                start_new_session=timeout is not None,  # the backstop kills its whole group
            )
            timer = None
            if timeout is not None:
                timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL))
            if timer:
                timer.start()
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
                log.flush()
            rc = proc.wait()
            if timer and not timer.is_alive() and rc < 0:
                rc = 124
            if timer:
                timer.cancel()
        wall = time.monotonic() - t
        self.stages.append({"stage": name, "rc": rc, "wall_s": round(wall, 1)})
        self.log(f"[{name}] exit code {rc} after {wall:.0f} s")
        self.write_summary()
        return rc

    def write_summary(self, **extra) -> None:
        path = self.out / f"{self.summary}.json"
        summary = json.loads(path.read_text()) if path.exists() else {}
        summary.update(extra, stages=self.stages)
        path.write_text(json.dumps(summary, indent=1) + "\n")


def prepend(env: dict[str, str], key: str, paths: list[Path | str]) -> None:
    parts = [str(p) for p in paths] + ([env[key]] if env.get(key) else [])
    env[key] = os.pathsep.join(parts)


def prepare(r: Run, wheelhouse: Path | None, syslibs: Path) -> int:
    """Make this node run rlsweep, in r.env: install `wheelhouse` (None: use this Python's
    environment as it is) into WORK/site, on PYTHONPATH behind this checkout, and put the system
    libraries that do not load here on LD_LIBRARY_PATH from `syslibs`' .debs. An exit code: 0
    ready, 1 the install failed, 2 no wheelhouse (nothing after either could run)."""
    pythonpath: list[Path | str] = [REPO]
    if wheelhouse is not None:
        wheelhouse = wheelhouse.resolve()
        if not (wheelhouse / "wheelhouse.py").is_file():
            r.log(f"no wheelhouse at {wheelhouse} (README: Offline install); or --no-install")
            return 2
        site = WORK / "site"
        shutil.rmtree(site, ignore_errors=True)  # pip --target skips what it finds there
        argv = [sys.executable, str(wheelhouse / "wheelhouse.py"), "install", str(wheelhouse)]
        if r.stage("install", [*argv, "--", "--target", str(site)]):
            return 1
        pythonpath.append(site)
        prepend(r.env, "PATH", [site / "bin"])
    prepend(r.env, "PYTHONPATH", pythonpath)
    packages, dirs = provide_system_libraries(syslibs.resolve(), WORK / "syslibs", r.log)
    if dirs:
        prepend(r.env, "LD_LIBRARY_PATH", dirs)
        r.log(f"LD_LIBRARY_PATH={r.env['LD_LIBRARY_PATH']}")
    r.write_summary(unpacked=packages, ld_library_path=[str(d) for d in dirs])
    return 0


CALL_BYTES = 64 * 2**20
"""What one device call carries in (the device tool's limit), this checkout included."""
CALL_PATHS = 8
"""Paths one device call may name to carry."""
CALL_SLACK = 2**20
"""Bytes of a call's room `calls` leaves free: what the checkout may gain between the plan and
the call (a note edited, a report taken back), which would otherwise push a full call over."""


def checkout_bytes(repo: Path = REPO) -> int:
    """What every device call carries of the checkout: its tracked files, and the untracked
    ones git does not ignore."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sum((repo / n).stat().st_size for n in names.split("\0") if (repo / n).is_file())


def _bytes(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def _parts(folder: Path, extra: list[Path] = ()) -> list[list[Path]]:
    """A folder of parts with a manifest.json (a wheelhouse, `rlsweep pack`'s): one group per
    part, the manifest (and `extra`) with the first."""
    names = [p["name"] for p in json.loads((folder / "manifest.json").read_text())["parts"]]
    groups = [[folder / n] for n in names]
    groups[0][:0] = [folder / "manifest.json", *extra]
    return groups


def calls(wheelhouse: Path, syslibs: Path, carried: Path | None, room: int) -> list[list[Path]]:
    """The device calls that bring a sitting's files to a node, each the paths it carries: the
    wheelhouse's parts (its manifest and installer with the first), `syslibs` and `carried`'s
    parts (its manifest with the first), packed first-fit decreasing into calls of `room` bytes
    and CALL_PATHS paths, a part never split. A warm node keeps what earlier calls brought, so
    the order does not matter; the last call runs the sitting. Raises ValueError naming a part
    larger than `room`."""
    groups = _parts(wheelhouse, extra=[wheelhouse / "wheelhouse.py"])
    if syslibs.is_dir():
        groups.append([syslibs])
    if carried is not None:
        groups += _parts(carried)
    sized = sorted(((sum(map(_bytes, g)), g) for g in groups), key=lambda x: -x[0])
    paths: list[list[Path]] = []
    used: list[int] = []
    for n, group in sized:
        if n > room:
            raise ValueError(
                f"{group[-1]}: {n / 2**20:.1f} MiB, more than a call's room "
                f"({room / 2**20:.1f} MiB beside the checkout): cut it smaller (a wheelhouse: "
                "`make wheelhouse PART_MB=...`)"
            )
        for i, call in enumerate(paths):
            if used[i] + n <= room and len(call) + len(group) <= CALL_PATHS:
                call += group
                used[i] += n
                break
        else:
            paths.append(list(group))
            used.append(n)
    return paths


def stand_in_requirements(excluded: list[str], pins: list[str], torch: str) -> list[str]:
    """What a stand-in for the node installs: the projects the wheelhouse leaves out because the
    node has them (its manifest's `excluded`), at their versions in `pins`, and the node's
    torch. Pinned projects the node lacks are the wheelhouse's to install, so are left out."""
    from rlsweep.node.wheelhouse import names_in, normalize

    node_has = {normalize(n) for n in excluded} - {"torch"}
    return [line.strip() for line in pins if names_in([line]) & node_has] + [torch]


def stand_in(args: argparse.Namespace) -> int:
    """`stand-in`: a venv here that stands in for the node's Python environment (its Python
    version, its torch, what else the wheelhouse expects it to have), to rehearse a sitting's
    install and run with the very wheelhouse the node is sent (docs/gpu.md)."""
    manifest = json.loads((args.wheelhouse / "manifest.json").read_text())
    reqs = stand_in_requirements(
        manifest["excluded"], args.constraints.read_text().splitlines(), args.torch
    )
    python = args.python or f"python{manifest['python']}"
    subprocess.run([python, "-m", "venv", str(args.dest)], check=True)
    subprocess.run([args.dest / "bin" / "pip", "install", "-q", *reqs], check=True)
    print(f"{args.dest}: Python {manifest['python']} with {len(reqs)} projects ({args.torch});")
    print(f"rehearse: make study-sitting GPU_PYTHON={args.dest / 'bin' / 'python'} SMOKE=1")
    return 0


def out_dir(default: Path = DEFAULT_OUT) -> Path:
    """$OUT (what a GPU sitting brings back), else `default`."""
    return Path(os.environ.get("OUT") or default).resolve()


def run(args: argparse.Namespace) -> int:
    out = out_dir()
    env = {**os.environ, "OUT": str(out), "PYTHONUNBUFFERED": "1"}
    python = sys.executable
    r = Run(out, env)
    r.log(f"results under {out}; {python} (Python {sys.version.split()[0]})")
    r.write_summary(python=python, quick=args.quick, started=time.strftime("%Y-%m-%d %H:%M:%S"))
    if shutil.which("nvidia-smi"):
        r.stage("nvidia-smi", ["nvidia-smi"])
    if code := prepare(r, None if args.no_install else args.wheelhouse, args.syslibs):
        return code
    doctor = [python, "-m", "rlsweep.cli", "doctor", "--json", str(out / "doctor.json")]
    r.stage("doctor", doctor if args.quick else [*doctor, "--gpu"])
    quick = ["--quick"] if args.quick else []
    tests = [str(REPO / "tests" / t) for t in GPU_TESTS]
    r.stage("gpu-tests", [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests])
    r.stage("sampler", [python, str(REPO / "benchmarks" / "probes" / "sampler.py"), *quick])
    r.stage("gpu", [python, str(REPO / "benchmarks" / "gpu.py"), *quick, *args.gpu_args])
    r.stage("learner-ops", [python, str(REPO / "benchmarks" / "probes" / "learner_ops.py")])
    failed = [s["stage"] for s in r.stages if s["rc"]]
    r.log(f"done: {'failed: ' + ', '.join(failed) if failed else 'every stage passed'}")
    return 1 if failed else 0


def print_calls(args: argparse.Namespace) -> int:
    """`calls`: each device call's carry (paths from the checkout's root) and command."""
    checkout = checkout_bytes()
    try:
        room = CALL_BYTES - CALL_SLACK - checkout
        plan = calls(args.wheelhouse, args.syslibs, args.carried, room)
        for path in (p for paths in plan for p in paths):
            if not path.resolve().is_relative_to(REPO):
                raise ValueError(f"{path}: outside the checkout, which is what a call carries from")
    except (OSError, ValueError, KeyError) as e:
        print(f"gpu_check calls: error: {e}", file=sys.stderr)
        return 2
    for i, paths in enumerate(plan, 1):
        mib = (checkout + sum(map(_bytes, paths))) / 2**20
        then = "the sitting (or gpu-check)" if i == len(plan) else "true"
        rel = [str(p.resolve().relative_to(REPO)) for p in paths]
        print(f"call {i}: {mib:.1f} MiB with the checkout; then {then}\n  carry {json.dumps(rel)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="install, doctor, gpu.py; results under $OUT")
    r.add_argument("--wheelhouse", type=Path, default=REPO / "wheelhouse", help="%(default)s")
    r.add_argument("--no-install", action="store_true", help="use this Python's environment")
    r.add_argument("--syslibs", type=Path, default=REPO / "syslibs", help="%(default)s")
    r.add_argument("--quick", action="store_true", help="the CPU path: doctor, gpu.py --quick")
    r.add_argument("gpu_args", nargs="*", help="more gpu.py arguments (after --)")
    f = sub.add_parser("fetch-syslibs", help="apt-get download the declared system libraries")
    f.add_argument("--dest", type=Path, default=REPO / "syslibs", help="%(default)s")
    c = sub.add_parser("calls", help="the device calls that carry the wheelhouse and the rest in")
    c.add_argument("--wheelhouse", type=Path, default=REPO / "wheelhouse", help="%(default)s")
    c.add_argument("--syslibs", type=Path, default=REPO / "syslibs", help="%(default)s")
    c.add_argument("--carried", type=Path, help="the parts the last sitting packed (carried/)")
    s = sub.add_parser("stand-in", help="a venv here like the node's, to rehearse a sitting in")
    s.add_argument("--wheelhouse", type=Path, default=REPO / "wheelhouse", help="%(default)s")
    s.add_argument("--python", help="the node's Python version's interpreter (python3.12)")
    s.add_argument("--constraints", type=Path, required=True, help="the wheelhouse's pins")
    s.add_argument("--torch", default=NODE_TORCH, help="the node's torch (%(default)s)")
    s.add_argument(
        "--dest", type=Path, default=REPO / "build" / "node-stand-in", help="%(default)s"
    )
    args = p.parse_args(argv)
    if args.cmd == "stand-in":
        return stand_in(args)
    if args.cmd == "fetch-syslibs":
        return fetch_syslibs(args.dest)
    if args.cmd == "calls":
        return print_calls(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
