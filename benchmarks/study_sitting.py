"""One sitting of a study on a GPU node held for minutes (`make study-sitting`): install, take
up the experiment dir the last sitting carried out, run it on under a time limit, report it,
and pack it for the next sitting.

    python3 benchmarks/study_sitting.py NAME --minutes 9.5 [--carried DIR] [--smoke]
        [--wheelhouse DIR | --no-install] [--syslibs DIR] [-- ABLATE ARGS]
    python benchmarks/study_sitting.py NAME --take-back RETURNED [--carried DIR]   # here, after

Stdlib only until the install: it runs with the node's own Python (and its torch). Stages,
every one's output in OUT/sitting.log (OUT: $OUT, else results/sittings/), summed up in
OUT/sitting.json (with each started trial's env steps and status), so that what comes back is
a handful of files (a GPU sitting brings back 8 at most, 16 MiB each, 64 MiB in all):

1. install the wheelhouse and the system libraries that do not load (benchmarks/gpu_check.py's
   `prepare`), unless `--no-install`;
2. unpack the experiment dir from `--carried` (the parts the last sitting packed, carried in)
   into results/ (beside the study's committed STATUS.md and report/), unless it is there
   already (a warm node) or this is the first sitting;
3. `rlsweep resume` the experiment dir where it holds Tune state, or else (the first sitting;
   a dir this node began that stopped before Tune took it up) `rlsweep ablate NAME`, with
   the ABLATE ARGS (`max_concurrent=6`, `--num-cpus 16` ...: a resume takes the options of
   where and how it runs, its sweep.yaml holds the rest), and
   `--time-limit` set to what is left of `--minutes` less RESERVE_S, and killed (its whole
   process group: what is on disk survives a SIGKILL, and the next resume starts each trial
   from its newest complete checkpoint) should it still run PACK_S before the sitting's end;
4. `rlsweep report` where the sweep stopped before its end (ablate and resume report a
   finished one themselves), cut off PACK_S before the sitting's end: it gives sitting.json
   each trial's progress;
5. `rlsweep pack --lean` the experiment dir into OUT/carry/, whatever went wrong before: the
   next sitting carries that folder in as `--carried` (one checkpoint per unfinished trial, the
   one its resume restores; no TensorBoard files nor report; a dir without Tune state is
   refused). A sitting that finds no carried parts where the study has had sittings (its
   committed sittings/) refuses to start it over.

Exit code: rlsweep's (0 finished, 3 stopped by the time limit: resume next sitting), or the
first failed stage's. The study's notes: results/<study>/STATUS.md.

`--take-back RETURNED`, here with rlsweep installed, on what a sitting's OUT brought back
(`take_back`): its `carry/` becomes `--carried` for the next sitting, once every part has
unpacked whole (the one before kept as `<carried>.prev`) and continue the ones it holds (an
older sitting's, returned again, is refused); the report is built again here from
the unpacked dir (`rlsweep report`: the same files where the sitting's report stage ran, and
a current report where it was cut off) and goes with the sitting.json to the study's folder in
`--storage`, to commit.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_check  # noqa: E402  (benchmarks/gpu_check.py: stdlib only, like this file)

REPO = gpu_check.REPO
CALL_MARGIN_S = 30.0
"""Seconds a sitting ends before its call's limit (`--call-minutes`): its start (make, Python)
and what runs after the pack (a pack that ran PACK_S over the rehearsals' would still end)."""
MIN_SWEEP_S = 60.0
"""The least time limit a sweep is started with (a trial that stops before its first checkpoint
carries nothing on): the CPU rehearsals' trials checkpointed within it (tests/
test_study_sitting.py, limits of about 81 and 75 s); a GPU trial's start is unmeasured in a
sitting."""
RESERVE_S = 15.0
"""Seconds kept after the sweep's time limit for the report and the pack (the smoke's: 2 s
each on 2 CPU cores)."""
PACK_S = 8.0
"""Seconds kept for the pack, whatever runs over: the sweep (its backstop; the rehearsals' sweeps
exited 9 s before their limit) and the report are stopped by then. The smoke's pack, of a 23.2
MiB dir, took 1.9 and 1.7 s on 2 CPU cores; six of the study's trials weigh about three times
as much."""
PART_MB = 15.5
"""Under the 16 MiB a file may weigh on its way back."""
MAX_BACK = (8, 64 * 2**20)
"""Files and bytes that may come back from OUT."""
CARRY_MB = 63.5
"""The most the packed parts may weigh (`rlsweep pack --max-mb`): what comes back, less room
for the manifest, sitting.log and sitting.json. A heavier pack leaves out the checkpoints of
the trials that got least far (they start anew next sitting) rather than lose the sitting."""


def experiment_dir(r: gpu_check.Run, name: str, smoke: bool, storage: Path) -> Path:
    """The study's experiment dir as its spec names it (rlsweep, once installed, reads it)."""
    code = (
        "from rlsweep.results.ablate import load_ablation; "
        "from rlsweep.experiment.experiment_dir import experiment_path; "
        f"spec = load_ablation({name!r}, smoke={smoke!r}, storage_path={str(storage)!r}); "
        "print(experiment_path(spec))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=r.env, cwd=REPO, capture_output=True, text=True
    )
    if out.returncode:
        r.log(f"the study's spec: {out.stderr.strip()}")
        raise SystemExit(2)
    return Path(out.stdout.strip().splitlines()[-1])


def progress(exp: Path, since: float) -> list[dict]:
    """Each started trial's variant, seed, env steps, budget, status and wall time, from the
    report's final.csv, where the report, ablate or resume wrote it after `since` (a time.time):
    an older one is the last sitting's, which came in with the study's committed report."""
    final = exp / "report" / "final.csv"
    if not final.is_file() or final.stat().st_mtime < since:
        return []
    keys = ("variant", "seed", "env_steps", "total_env_steps", "status", "time/wall_s")
    with open(final, newline="") as f:
        return [{k: row.get(k) for k in keys} for row in csv.DictReader(f)]


def came_back(out: Path) -> dict:
    """What OUT holds against what may come back from it."""
    files = [f for f in out.rglob("*") if f.is_file()]
    size = sum(f.stat().st_size for f in files)
    ok = len(files) <= MAX_BACK[0] and size <= MAX_BACK[1]
    ok = ok and all(f.stat().st_size <= 16 * 2**20 for f in files)
    return {"files": len(files), "mib": round(size / 2**20, 1), "fits": ok}


def take_back(returned: Path, carried: Path, storage: Path, force: bool = False) -> Path | None:
    """After a sitting, here: the parts it packed (`returned`/carry) replace `carried`, the
    next sitting's, once they unpack whole (checksums and all; the old ones kept beside as
    `<carried>.prev`); their experiment's report, built here, replaces
    `storage`/<experiment>/report, and the sitting.json is kept there as sittings/NNN.json.
    Returns that study folder; None where `carried` holds these parts already (taken back
    before: done again, it would count the sitting twice and put `carried` in place of the
    `.prev` it keeps). Refused, unless `force`, where the parts do not continue the ones
    `carried` holds (their manifest's `continues`): an older sitting's, taken back after a
    newer one, would put the study back and, at the next take-back, lose the newer parts."""
    from rlsweep.cli import main as rlsweep  # here, rlsweep is installed (on a node, not yet)
    from rlsweep.node.carry import unpack

    manifest = returned / "carry" / "manifest.json"
    if not manifest.is_file():  # e.g. its install failed
        log = returned / "sitting.log"
        tail = log.read_text().splitlines()[-5:] if log.is_file() else ["(no sitting.log)"]
        raise SystemExit("\n".join([f"{returned}: the sitting packed nothing", *tail]))
    kept = carried / "manifest.json"
    if kept.is_file() and kept.read_bytes() == manifest.read_bytes():
        return None
    continues = json.loads(manifest.read_text()).get("continues")
    held = json.loads(kept.read_text()).get("archive_sha256") if kept.is_file() else None
    if kept.is_file() and continues != held and not force:
        raise SystemExit(
            f"{returned}: its parts continue {_carry_name(continues)}, but {carried} holds "
            f"{_carry_name(held)}: they are not the next sitting's, and taking them back would "
            f"put the study back (an older sitting's returned again?); `--force` takes them all "
            "the same"
        )
    new = carried.with_name(carried.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    shutil.copytree(returned / "carry", new)
    with tempfile.TemporaryDirectory() as tmp:
        exp = unpack(new, Path(tmp))  # CarryError names a missing or altered part
        # Whole: the next sitting's parts, whatever the report does.
        prev = carried.with_name(carried.name + ".prev")
        shutil.rmtree(prev, ignore_errors=True)
        if carried.exists():
            carried.rename(prev)
        new.rename(carried)
        study = storage / exp.name
        sittings = study / "sittings"
        sittings.mkdir(parents=True, exist_ok=True)
        number = 1 + sum(1 for _ in sittings.glob("*.json"))
        if (returned / "sitting.json").is_file():  # it may not have come back
            shutil.copy(returned / "sitting.json", sittings / f"{number:03d}.json")
        with contextlib.redirect_stdout(io.StringIO()) as said:  # it names the temporary dir
            code = rlsweep(["report", str(exp)])
        if code:
            raise SystemExit(
                f"{said.getvalue()}rlsweep report exited {code}; {carried} holds the sitting's "
                f"parts all the same: `rlsweep unpack {carried} --dest DIR` and report it there"
            )
        shutil.rmtree(study / "report", ignore_errors=True)
        shutil.copytree(exp / "report", study / "report")
    return study


def _carry_name(sha: str | None) -> str:
    return f"the carry {sha[:12]}" if sha else "no carry (a first sitting's)"


def _ask(r: gpu_check.Run, code: str, *args: str) -> str:
    """What `code` prints, run by the Python the sweep runs with, rlsweep installed (this
    process has only the stdlib), `args` its sys.argv[1:]."""
    argv = [sys.executable, "-c", f"import sys; {code}", *args]
    return subprocess.run(argv, env=r.env, capture_output=True, text=True, check=True).stdout


def resumable(r: gpu_check.Run, exp: Path) -> bool:
    """Whether `exp` holds Tune state to resume (`rlsweep.experiment.experiment_dir.
    can_resume`)."""
    ask = "from rlsweep.experiment.experiment_dir import can_resume as c; print(c(sys.argv[1]))"
    return _ask(r, ask, str(exp)).strip() == "True"


MOVES_THE_EXPERIMENT = ("name", "storage_path", "--storage")
"""ABLATE ARGS that would move the experiment dir (overrides, and ablate's own flag)."""


def resume_options(r: gpu_check.Run, ablate_args: list[str]) -> list[str]:
    """The ABLATE ARGS a resume takes too (--num-cpus, --verbose ...: `rlsweep.cli.
    resume_options`), asked of the rlsweep the sweep runs with (this process has only the
    stdlib); the spec's own (max_concurrent=6, --smoke ...) are in the dir's sweep.yaml."""
    if not ablate_args:
        return []
    kept = _ask(
        r, "from rlsweep.cli import resume_options as o; print(*o(sys.argv[1:]))", *ablate_args
    )
    r.log(f"ABLATE ARGS {' '.join(ablate_args)}: the resume takes {kept.strip() or 'none'}")
    return kept.split()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", help="the study (or ablation): pooling-bigfish, or a YAML path")
    p.add_argument("--minutes", type=float, help="this sitting's wall time")
    p.add_argument(
        "--call-minutes",
        type=float,
        default=10.0,
        help="the most the call that runs the sitting may run: a device call's (default: 10)",
    )
    p.add_argument("--carried", type=Path, help="the parts the last sitting packed")
    p.add_argument("--smoke", action="store_true", help="the study's smoke: run on a CPU")
    p.add_argument("--storage", type=Path, default=REPO / "results", help="%(default)s")
    p.add_argument("--wheelhouse", type=Path, default=REPO / "wheelhouse", help="%(default)s")
    p.add_argument("--no-install", action="store_true", help="use this Python's environment")
    p.add_argument("--syslibs", type=Path, default=REPO / "syslibs", help="%(default)s")
    p.add_argument(
        "--take-back", type=Path, metavar="RETURNED", help="here: keep what a sitting's OUT brought"
    )
    p.add_argument(
        "--force", action="store_true", help="--take-back parts that do not continue --carried's"
    )
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:cut])
    if args.take_back:
        carried = args.carried or REPO / "carried"
        study = take_back(args.take_back, carried, args.storage, args.force)
        if study is None:
            print(f"{args.take_back}: taken back already ({carried} holds its parts): nothing done")
            return 0
        parts = json.loads((carried / "manifest.json").read_text())["parts"]
        print(f"{carried}: {len(parts)} parts for the next sitting ({carried}.prev: the last)")
        print(f"{study}: report/ and sittings/ updated; say where it stands in STATUS.md:")
        report = (study / "report" / "report.md").read_text().splitlines()
        print(*(line for line in report if line.startswith("- `")), sep="\n")
        return 0
    if args.minutes is None:
        p.error("--minutes: required for a sitting")
    if args.minutes * 60 > args.call_minutes * 60 - CALL_MARGIN_S:
        # Cut off by its call, the sitting would not pack (its sweep, in a session of its own,
        # would outlive the call): the sitting's progress would be lost.
        most = (args.call_minutes * 60 - CALL_MARGIN_S) / 60
        p.error(
            f"--minutes {args.minutes:g}: a call of {args.call_minutes:g} minutes "
            f"(--call-minutes) ends the sitting before its pack; at most {most:g}"
        )
    args.ablate_args = argv[cut + 1 :]  # more `rlsweep ablate` arguments, after --
    if moved := [a for a in args.ablate_args if a.split("=", 1)[0] in MOVES_THE_EXPERIMENT]:
        # This sitting packs (and the next unpacks) the dir the study's spec names.
        p.error(
            f"{' '.join(moved)}: would put the experiment elsewhere than the study's "
            "spec names it, and the sitting would pack nothing; use the sitting's --storage"
        )
    deadline = time.monotonic() + args.minutes * 60
    out = gpu_check.out_dir(REPO / "results" / "sittings")
    r = gpu_check.Run(out, {**os.environ, "PYTHONUNBUFFERED": "1"}, "sitting", one_log=True)
    r.write_summary(study=args.name, minutes=args.minutes, started=time.strftime("%F %T"))
    if shutil.which("nvidia-smi"):
        r.stage("nvidia-smi", ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv"])
    if code := gpu_check.prepare(r, None if args.no_install else args.wheelhouse, args.syslibs):
        return code
    rlsweep = [sys.executable, "-m", "rlsweep.cli"]
    exp = experiment_dir(r, args.name, args.smoke, args.storage.resolve())
    carried = args.carried and (args.carried / "manifest.json").is_file()
    before = sorted((exp / "sittings").glob("*.json"))  # taken back here, committed
    if not carried and before and not (exp / "sweep.yaml").is_file():
        r.log(
            f"{exp.name} has had {len(before)} sitting(s) (its sittings/), but no carried parts "
            f"came in ({args.carried or 'no --carried'} holds no manifest.json): carry in the "
            "last sitting's parts; a new `ablate` would start the study over"
        )
        return 2
    if carried and not (exp / "sweep.yaml").is_file():  # a warm node has it already
        argv = [*rlsweep, "unpack", str(args.carried), "--dest", str(exp.parent)]
        if rc := r.stage("unpack", argv):
            return rc
    began = (exp / "sweep.yaml").is_file()
    if began and resumable(r, exp):
        argv = [*rlsweep, "resume", str(exp), *resume_options(r, args.ablate_args)]
    else:
        argv = [*rlsweep, "ablate", args.name, "--storage", str(args.storage.resolve())]
        argv += [*(["--smoke"] if args.smoke else []), *args.ablate_args]
        if began:  # an ablate of this node's that stopped before Tune took it up
            r.log(f"{exp.name}: no Tune state to resume from; the sweep starts anew")
            argv.append("--overwrite")
    limit = int(deadline - time.monotonic() - RESERVE_S)  # counted from the sweep's start
    r.write_summary(experiment=str(exp), time_limit_s=limit)
    if limit < MIN_SWEEP_S:
        r.log(f"{limit} s left for the sweep: too little to start one")
        return 2
    sweep_rc, since = 2, time.time()
    try:
        backstop = deadline - time.monotonic() - PACK_S
        sweep_rc = r.stage("sweep", [*argv, "--time-limit", f"{limit}s"], timeout=backstop)
        left = deadline - time.monotonic() - PACK_S
        if sweep_rc not in (0, 1) and left > 0 and (exp / "sweep.yaml").is_file():
            r.stage("report", [*rlsweep, "report", str(exp)], timeout=left)
    finally:  # whatever went wrong above, what the trials checkpointed goes back
        if (exp / "sweep.yaml").is_file():
            carry = out / "carry"
            shutil.rmtree(carry, ignore_errors=True)
            argv = [*rlsweep, "pack", str(exp), "--out", str(carry), "--part-mb", str(PART_MB)]
            argv += ["--max-mb", str(CARRY_MB)]
            argv.append("--lean")  # 64 MiB come back at most: no byte a resume never reads
            r.stage("pack", argv)
    trials = progress(exp, since)
    steps = sum(float(t["env_steps"] or 0) for t in trials)
    done = sum(t["status"] == "TERMINATED" for t in trials)
    r.log(f"{exp.name}: {len(trials)} trials started, {done} finished, {steps:,.0f} env steps")
    back = came_back(out)
    r.write_summary(sweep_rc=sweep_rc, trials=trials, out=back, ended=time.strftime("%F %T"))
    r.log(
        f"OUT holds {back['files']} files, {back['mib']} MiB: "
        + ("all of it comes back" if back["fits"] else "MORE THAN COMES BACK: the pack is lost")
    )
    return sweep_rc if back["fits"] else 1


if __name__ == "__main__":
    sys.exit(main())
