"""Where a command's CPU time goes, by kind of process: every process on the machine sampled
from /proc while the command runs (Linux), its last CPU time counted under its kind.

    python benchmarks/suite_cpu.py [--every 0.5] -- .venv/bin/python -m pytest -q -n 2 ...

For `make test`: Ray's worker processes outlive the pytest worker that started their Ray (they
are reparented when its raylet exits), so `time` and pytest's own figures miss them; this counts
them by the name Ray gives them (`ray::ImplicitFunc` is a trial, `ray::IDLE` a worker that never
ran one). Processes that live less than one sampling interval are missed, and so is the CPU a
process spends after its last sample: the sum is a lower bound of the machine's busy time,
which is printed beside it (/proc/stat). The sampler's own CPU is counted under `sampler`.

    python benchmarks/suite_cpu.py --per-test tests.jsonl -- .venv/bin/python -m pytest -q

`--per-test FILE`, for a pytest command in one process (no `-n`): also the machine's busy CPU
seconds during each test, its setup and teardown in (this file loaded as a pytest plugin,
`-p suite_cpu`), a JSON line per test in FILE, and the largest tests and modules printed. A
test's wall time under xdist also holds what the other worker took from it
(test_ppo_reference.py: 271 s under two workers, 121 s alone, 2026-11-30); its busy CPU seconds
in one process are what it costs the suite.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")

KINDS = {
    "default_worker.py": "ray worker (starting)",
    "gcs_server": "ray: gcs_server",
    "raylet": "ray: raylet",
    "log_monitor.py": "ray: log_monitor",
    "monitor.py": "ray: monitor",
    "dashboard.py": "ray: dashboard",
    "rlsweep.cli": "rlsweep CLI",
    "pytest": "pytest",
    "pip": "pip",
}
"""What a process runs (its program's, script's or `-m` module's name) -> its kind; Ray's named
workers go by their name."""

XDIST = "import sys;exec(eval(sys.stdin.readline()))"
"""The code a pytest-xdist worker's Python runs (`python -c ...`)."""

PER_TEST = "SUITE_CPU_PER_TEST"
"""The environment variable naming the file the pytest plugin below appends its lines to."""

_started: dict[str, tuple[float, float]] = {}


def kind(comm: str, cmdline: str) -> str:
    """A process's kind from its name (`comm`, which Ray sets to `ray::<actor>` once a worker
    runs one) and command line: what its program runs, not what its arguments name."""
    if cmdline.startswith("ray::"):  # the full name (comm keeps 15 characters), less the
        return cmdline.split()[0].split(".")[0]  # method it runs now (`ray::ImplicitFunc.train`)
    if comm.startswith("ray::"):
        return comm
    argv = cmdline.split()
    runs = [Path(argv[0]).name] if argv else []
    options = iter(argv[1:])
    for arg in options:  # the interpreter's options, up to what it runs
        if arg == "-m":
            runs.append(next(options, ""))
        elif arg == "-c":
            runs.append("xdist" if " ".join(options).startswith(XDIST) else "")
        elif not arg.startswith("-"):
            runs.append(Path(arg).name)
        else:
            continue
        break
    if runs[-1:] == ["xdist"]:
        return "pytest-xdist worker"
    return next((KINDS[r] for r in reversed(runs) if r in KINDS), comm)


def _stat(pid: str) -> tuple[str, str, float] | None:
    """(start time, comm, CPU seconds so far) of a process, None where it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19], comm, (int(fields[11]) + int(fields[12])) / HZ


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _busy_s() -> float:
    """The machine's busy CPU seconds since boot (every core; /proc/stat's first line)."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / HZ  # all but idle and iowait


def _processes() -> dict[tuple[str, str], tuple[str, float]]:
    """(pid, start time) -> (comm, CPU seconds) of every process now."""
    now = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if (got := _stat(pid)) is not None:
            start, comm, cpu = got
            now[pid, start] = comm, cpu
    return now


def sample(proc: subprocess.Popen, every: float, before: dict) -> dict[tuple[str, str], list]:
    """(pid, start time) -> [kind, CPU seconds since `before`, comm] of every process seen
    until `proc` ends (a process in `before` counts from its CPU time there, a new one from 0).
    A process's command line is read when it is first seen, and again when Ray names it after
    the actor it runs (its comm becomes `ray::...`): not at every sample."""
    seen: dict[tuple[str, str], list] = {}
    me = str(os.getpid())
    while proc.poll() is None:
        for key, (comm, cpu) in _processes().items():
            entry = seen.get(key)
            if entry is None or (comm != entry[2] and comm.startswith("ray::")):
                name = "sampler" if key[0] == me else kind(comm, _cmdline(key[0]))
                entry = seen[key] = [name, 0.0, comm]
            entry[1] = cpu - before.get(key, ("", 0.0))[1]
        time.sleep(every)
    return seen


# --- the pytest plugin (`-p suite_cpu`, which --per-test adds) ---------------------------------


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    _started[nodeid] = time.monotonic(), _busy_s()


def pytest_runtest_logfinish(nodeid: str, location: tuple) -> None:
    """One JSON line per test: its wall seconds and the machine's busy CPU seconds from its
    setup's start to its teardown's end (Ray's daemons and reparented workers included)."""
    started, busy = _started.pop(nodeid)
    row = {"test": nodeid, "wall_s": time.monotonic() - started, "busy_cpu_s": _busy_s() - busy}
    with open(os.environ[PER_TEST], "a") as f:
        f.write(json.dumps(row) + "\n")


def with_plugin(command: list[str]) -> list[str]:
    """`command` (a pytest run) loading this file as a plugin: `-p suite_cpu` after
    `-m pytest` or the `pytest` program."""
    for i, arg in enumerate(command):
        if (arg == "pytest" and i and command[i - 1] == "-m") or Path(arg).name == "pytest":
            return [*command[: i + 1], "-p", "suite_cpu", *command[i + 1 :]]
    raise ValueError(f"--per-test needs a pytest command, not {' '.join(command)}")


def print_per_test(path: Path, most: int = 15) -> None:
    """The largest tests and modules by busy CPU seconds, from --per-test's lines."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    modules: collections.Counter[str] = collections.Counter()
    for r in rows:
        modules[r["test"].split("::")[0]] += r["busy_cpu_s"]
    total = sum(r["busy_cpu_s"] for r in rows)
    print(f"\n{len(rows)} tests, {total:.0f} busy CPU-s in them; the largest:")
    print(f"{'CPU-s':>8} {'wall s':>7}  test")
    for r in sorted(rows, key=lambda r: -r["busy_cpu_s"])[:most]:
        print(f"{r['busy_cpu_s']:8.1f} {r['wall_s']:7.1f}  {r['test']}")
    print(f"{'CPU-s':>8}  module")
    for name, seconds in modules.most_common(most):
        print(f"{seconds:8.1f}  {name}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    p.add_argument("--json", type=Path, help="also write the totals here")
    p.add_argument("--per-test", type=Path, help="a pytest command's CPU per test, here")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command: give it after --")
    env = None
    if args.per_test:
        command = with_plugin(command)
        args.per_test.write_text("")
        path = os.pathsep.join(
            filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")])
        )
        env = {**os.environ, PER_TEST: str(args.per_test.resolve()), "PYTHONPATH": path}
    before, busy, started = _processes(), _busy_s(), time.monotonic()
    proc = subprocess.Popen(command, env=env)
    seen = sample(proc, args.every, before)
    wall, busy = time.monotonic() - started, _busy_s() - busy
    cpu: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for name, seconds, _ in seen.values():
        cpu[name] += seconds
        count[name] += 1
    print(f"\n{' '.join(command)}: exit code {proc.returncode}, {wall:.0f} s wall")
    print(f"machine busy {busy:.0f} CPU-s; counted by process {sum(cpu.values()):.0f} CPU-s")
    print(f"{'CPU-s':>8} {'share':>6} {'procs':>6}  kind")
    for name, seconds in cpu.most_common():
        if seconds >= 1:
            print(f"{seconds:8.0f} {seconds / busy:6.1%} {count[name]:6d}  {name}")
    if args.json:
        rows = {name: {"cpu_s": cpu[name], "processes": count[name]} for name in cpu}
        record = {"command": command, "wall_s": wall, "busy_cpu_s": busy, "kinds": rows}
        args.json.write_text(json.dumps(record, indent=1))
    if args.per_test:
        print_per_test(args.per_test)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
