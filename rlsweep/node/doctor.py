"""`rlsweep doctor`: can this machine run rlsweep's trials? One line per check, with a fix.

The checks, in order: Python; torch; a CUDA GPU; its memory against a default trial's estimate
(`placement.gpu_memory_gib`); Ray (the version `_ray_compat` was checked against) and RLlib; the
system libraries Procgen's Qt runtime links (`rlsweep.envs.qt.SYSTEM_LIBRARIES`) and Qt itself;
`import envpool`; a Procgen env step. Each runs on its own, so one failure hides none of the
others: an exception fails its own check only, and the last two run in a subprocess, where a
broken native library can abort or segfault without taking the report with it.

A machine without a CUDA GPU runs CPU trials: by default that is reported (`info`) and passes;
with `gpu=True` (`rlsweep doctor --gpu`) it fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

OK, INFO, FAIL = "ok", "info", "FAIL"
SUBPROCESS_TIMEOUT_S = 180.0
"""A subprocess check that has not answered by then fails (a hung import or env)."""

_ENVPOOL = "import envpool; print(f'envpool {envpool.__version__} imports')"
_PROCGEN = """
import time
from rlsweep.envs.vector_env import ProcgenVectorEnv
from rlsweep.spec.subconfigs import EnvConfig
t = time.perf_counter()
env = ProcgenVectorEnv(EnvConfig(game="coinrun"), num_envs=4, num_threads=1)
obs, _ = env.reset(seed=0)
for _ in range(16):
    obs, *_ = env.step(env.action_space.sample())
env.close()
assert obs.any(), "the frames are blank"
print(f"coinrun: 4 envs x 16 steps, frames {tuple(obs.shape)} {obs.dtype}, "
      f"{time.perf_counter() - t:.1f} s")
"""


@dataclass(frozen=True)
class Check:
    """One check's outcome: `status` OK, INFO (reported, passes) or FAIL."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        hint = f"  -> {self.fix}" if self.fix and self.status != OK else ""
        return f"{self.status:<4}  {self.name:<9} {self.detail}{hint}"


def check_python() -> Check:
    v = sys.version_info
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    detail = f"Python {v.major}.{v.minor}.{v.micro} at {sys.executable}, {cpus} CPUs"
    if v < (3, 11):
        return Check("python", FAIL, detail, "rlsweep needs Python >= 3.11")
    return Check("python", OK, detail)


def check_torch() -> Check:
    try:
        import torch
    except Exception as e:  # any import failure: a missing wheel, a broken CUDA library
        fix = "pip install torch (a GPU node: the CUDA build it came with)"
        return Check("torch", FAIL, f"import torch: {type(e).__name__}: {e}", fix)
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU build"
    return Check("torch", OK, f"torch {torch.__version__} ({build})")


def check_cuda(gpu: bool) -> Check:
    """A CUDA GPU that this torch has kernels for; without one, FAIL if `gpu` else INFO."""
    import torch

    miss = FAIL if gpu else INFO
    if torch.version.cuda is None:
        return Check(
            "cuda",
            miss,
            f"no CUDA: torch {torch.__version__} is a CPU build (CPU trials only)",
            "install torch's CUDA build, e.g. PyPI's Linux wheel",
        )
    if not torch.cuda.is_available():
        return Check(
            "cuda",
            miss,
            f"no CUDA GPU visible to torch {torch.__version__} (CUDA {torch.version.cuda})",
            f"`nvidia-smi` should list it; the driver must support CUDA {torch.version.cuda}; "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}",
        )
    gpus = []
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        arch = f"sm_{major}{minor}"
        if arch not in torch.cuda.get_arch_list():
            return Check(
                "cuda",
                FAIL,
                f"GPU {i} ({torch.cuda.get_device_name(i)}) is {arch}; this torch has kernels "
                f"for {', '.join(torch.cuda.get_arch_list())}",
                "install a torch built for this GPU",
            )
        gpus.append(f"{torch.cuda.get_device_name(i)} ({arch})")
    return Check("cuda", OK, f"{len(gpus)} GPU(s): {', '.join(gpus)}")


def check_gpu_memory() -> Check:
    """Free memory on each GPU against the estimate of one default GPU trial (its precision
    `auto`: a GPU's)."""
    import torch

    from rlsweep.plan.placement import gpu_memory_gib
    from rlsweep.spec.config import TrialConfig

    if not torch.cuda.is_available():
        return Check("gpu-mem", INFO, "no CUDA GPU: nothing to measure")
    each = gpu_memory_gib(TrialConfig(num_gpus=1))
    parts, short = [], []
    for i in range(torch.cuda.device_count()):
        free, total = (b / 2**30 for b in torch.cuda.mem_get_info(i))
        parts.append(f"GPU {i} {free:.1f} of {total:.1f} GiB free ({int(free // each)} trials)")
        if free < each:
            short.append(i)
    detail = f"{'; '.join(parts)}; a default GPU trial ~{each:.1f} GiB (placement.gpu_memory_gib)"
    if short:
        return Check(
            "gpu-mem", FAIL, detail, f"GPU {short} is held by other processes (nvidia-smi)"
        )
    return Check("gpu-mem", OK, detail)


def check_ray() -> Check:
    from rlsweep._ray_compat import CHECKED

    fix = f"pip install 'ray[tune,rllib,default]=={CHECKED}'"
    try:
        import ray
        import ray.rllib  # noqa: F401  (what every trial imports)
    except Exception as e:
        return Check("ray", FAIL, f"import ray.rllib: {type(e).__name__}: {e}", fix)
    if ray.__version__ != CHECKED:
        return Check(
            "ray",
            FAIL,
            f"Ray {ray.__version__}; rlsweep's Ray hooks are checked against {CHECKED}",
            fix,
        )
    return Check("ray", OK, f"Ray {ray.__version__} with RLlib")


def check_qt() -> Check:
    """The system libraries Qt links, then Qt itself, in this process (a failed dlopen raises;
    it does not crash)."""
    from rlsweep.envs import qt

    if missing := qt.missing_system_libraries():
        names = ", ".join(f"{lib.soname} ({lib.package})" for lib, _ in missing)
        first = missing[0][1]
        return Check(
            "qt",
            FAIL,
            f"cannot load {names} (first: {first})",
            qt.install_hint([lib for lib, _ in missing]),
        )
    try:
        where = qt.load_qt5()
    except qt.QtRuntimeMissing as e:
        return Check("qt", FAIL, str(e), "pip install PyQt5-Qt5==5.15.2")
    n = len(qt.SYSTEM_LIBRARIES)
    return Check("qt", OK, f"Qt5 from {where}; its {n} system libraries load")


def check_envpool(timeout: float = SUBPROCESS_TIMEOUT_S) -> Check:
    ok, text = run_python(_ENVPOOL, timeout)
    if ok:
        return Check("envpool", OK, text)
    return Check(
        "envpool",
        FAIL,
        f"import envpool: {text}",
        "reinstall envpool (an offline node: from a wheelhouse built by this rlsweep)",
    )


def check_procgen(timeout: float = SUBPROCESS_TIMEOUT_S) -> Check:
    ok, text = run_python(_PROCGEN, timeout)
    if ok:
        return Check("procgen", OK, text)
    return Check("procgen", FAIL, text, "see the qt and envpool lines")


_ERROR = "rlsweep-doctor-error: "
_WRAPPER = """
import sys, textwrap
try:
    exec(textwrap.dedent({code!r}))
except BaseException as e:
    print({marker!r} + f"{{type(e).__name__}}: {{e}}", file=sys.stderr, flush=True)
    sys.exit(1)
"""


def run_python(code: str, timeout: float) -> tuple[bool, str]:
    """Run `code` in a fresh interpreter (this one, this environment): (succeeded, its last
    line of output, or how it failed: the exception, the signal, the timeout)."""
    wrapped = _WRAPPER.format(code=code, marker=_ERROR)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", wrapped], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return False, f"no answer in {timeout:g} s"
    if proc.returncode == 0:
        lines = proc.stdout.strip().splitlines()
        return True, lines[-1] if lines else "ok"
    err = proc.stderr.strip().splitlines()
    # The exception itself, not what a destructor printed after it.
    raised = [line.removeprefix(_ERROR) for line in err if line.startswith(_ERROR)]
    last = raised[-1] if raised else err[-1] if err else "(no output)"
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        return False, f"the process died of {name}; last output: {last}"
    return False, last


def checks(gpu: bool = False) -> list[tuple[str, Callable[[], Check]]]:
    """Every check as (name, function), in the order `run` runs them."""
    return [
        ("python", check_python),
        ("torch", check_torch),
        ("cuda", lambda: check_cuda(gpu)),
        ("gpu-mem", check_gpu_memory),
        ("ray", check_ray),
        ("qt", check_qt),
        ("envpool", check_envpool),
        ("procgen", check_procgen),
    ]


def run(gpu: bool = False) -> Iterator[Check]:
    """Each check's outcome as soon as it is known; a check that raises fails alone."""
    for name, fn in checks(gpu):
        t = time.perf_counter()
        try:
            check = fn()
        except Exception as e:  # e.g. no torch: the GPU checks fail, the others still run
            check = Check(name, FAIL, f"the check raised {type(e).__name__}: {e}")
        if (dt := time.perf_counter() - t) > 5:
            check = Check(check.name, check.status, f"{check.detail} [{dt:.0f} s]", check.fix)
        yield check


def passed(results: list[Check]) -> bool:
    return all(c.status != FAIL for c in results)


def as_json(results: list[Check], gpu: bool) -> dict:
    return {"passed": passed(results), "gpu_required": gpu, "checks": [asdict(c) for c in results]}
