"""`rlsweep` command line: thin argument parsing over the Python API.

Exit codes: 0 done, 1 some trials failed (doctor: some check failed), 2 bad input (a spec, a
flag: rlsweep.errors.SpecError), 3 stopped by --time-limit (resume it), 130 interrupted by
Ctrl-C (143: SIGTERM).
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

from rlsweep.errors import SpecError
from rlsweep.spec.spec import SweepSpec

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

SMOKE_NOTE = (
    "smoke run: {budget:,} env steps per trial is far too few to learn anything, so every "
    "variant scores like a random policy and the cells look alike; it checks the machinery, "
    "not the {what} (drop --smoke for the real budget)"
)
"""What a `--smoke` run's scores are worth: run and ablate end with it (`_smoke_note`)."""


def _table(df) -> str:
    """The trials as run and resume print them: env steps as the count they are
    (`formatting.count`: 12,378, not the 12378.0 of a float column), searched parameters to 3
    significant digits, and the error column only where some trial has an error (else it is
    blank on every row)."""
    import pandas as pd

    from rlsweep import formatting
    from rlsweep.metrics import ENV_STEPS

    if df.empty:  # stopped before Tune started one (pandas would print "Empty DataFrame")
        return "no trial started"
    drop = ["trial_dir"]
    if "error" in df and not df["error"].fillna("").astype(str).ne("").any():
        drop.append("error")
    df = df.drop(columns=drop, errors="ignore")
    if ENV_STEPS in df:  # mapped, not a to_string formatter: that one skips NaN ("?" here)
        df = df.assign(**{ENV_STEPS: df[ENV_STEPS].map(formatting.count)})
    # A searched parameter as its labels show it (3 significant digits: 0.00132, not 0.001),
    # not at the display precision the scores get; metric names hold a "/".
    params = [c for c in df.select_dtypes("float").columns if "/" not in c]
    df = df.assign(**{c: df[c].map(formatting.searched) for c in params})
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
        return df.to_string(index=False)


def _load(args: argparse.Namespace) -> SweepSpec:
    """The spec of validate, plan and run: the one loader (`SweepSpec.from_yaml`) with the
    overrides `_add_spec` defines; warns of defaults the file did not choose."""
    spec = _read(args)
    _warn_defaults(spec)
    return spec


def _read(args: argparse.Namespace, budget: bool = True) -> SweepSpec:
    """`SweepSpec.from_yaml` of `args.spec` with the command line's overrides (`budget=False`:
    all but --budget). A name that is no file (`augmentations`) is a shipped ablation's or
    study's, as `ablate` takes it."""
    spec = args.spec
    if not spec.endswith((".yaml", ".yml")) and not Path(spec).exists():
        from rlsweep.results.ablate import ablation_path

        spec = str(ablation_path(spec))
    return SweepSpec.from_yaml(
        spec,
        smoke=args.smoke,
        budget=args.budget if budget else None,
        storage_path=args.storage,
        overrides=_overrides(args),
    )


def _overrides(args: argparse.Namespace) -> list:
    """The spec keys the command line sets (`rlsweep.spec.overrides`): --games, --seeds, then each
    KEY=VALUE in order."""
    from rlsweep.spec import overrides

    flags = [
        overrides.list_flag(flag, key, value)
        for flag, key, value in (("--games", "games", args.games), ("--seeds", "seeds", args.seeds))
        if value is not None
    ]
    return flags + [overrides.parse(text) for text in args.overrides]


def positive_int(text: str) -> int:
    """argparse type of `--num-cpus`: a whole number >= 1 (argparse names the flag)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: an integer >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: an integer >= 1")
    return value


def _number(text: str, *, zero: bool) -> float:
    """argparse type of a finite number > 0 (>= 0 where `zero`)."""
    allowed = f"a number {'>=' if zero else '>'} 0"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {allowed}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {allowed}")
    return value


def positive_number(text: str) -> float:
    """argparse type of `--steps-per-s`, `--gpu-memory`: a finite number > 0."""
    return _number(text, zero=False)


def count_of_gpus(text: str) -> float:
    """argparse type of `--gpus`: a finite number >= 0 (a fraction: a share of one)."""
    return _number(text, zero=True)


def _checked(args: argparse.Namespace, spec: SweepSpec, warn: bool = True):
    """`preflight.check` of `spec` where `args` say it runs; prints its layout (stdout) and,
    for a long sweep, a warning (stderr) if `warn`."""
    from rlsweep.run import preflight

    checked = preflight.check(
        spec,
        address=args.address,
        num_cpus=args.num_cpus,
        remote_storage=not args.no_storage_check,
    )
    if checked.plan is not None and checked.plan.layout is not None:
        print(checked.plan.layout.line(), flush=True)
    if warn and (warning := preflight.long_warning(checked.plan)):
        print(f"rlsweep: warning: {warning}", file=sys.stderr, flush=True)
    return checked


def _warn_defaults(spec: SweepSpec) -> None:
    for line in spec.default_warnings() + spec.unread_warnings() + spec.setting_warnings():
        print(f"rlsweep: warning: {line}", file=sys.stderr, flush=True)


def env_steps(text: str) -> int:
    """argparse type of `--budget`: env steps as the spec language writes them (25e6 too)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: a number of env steps") from None
    if not value.is_integer() or value <= 0:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: a whole number of env steps > 0")
    return int(value)


def time_limit(text: str) -> float:
    """argparse type of `--time-limit`: a duration (8m30s, 2h, 540), in seconds, longer than
    what the limit keeps for the sweep's end (`interrupt.SHUTDOWN_S`): a limit within it would
    stop the sweep before any trial could start."""
    from rlsweep.experiment.interrupt import SHUTDOWN_S, check_time_limit
    from rlsweep.formatting import parse_duration

    try:
        return check_time_limit(parse_duration(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"got {text!r}; allowed: a duration > {SHUTDOWN_S:g}s, the time it keeps for the "
            "sweep's end (8m30s, 2h)"
        ) from None


def cmd_validate(args: argparse.Namespace) -> int:
    """Everything `run` checks before it starts the sweep: the spec (with its smoke: section),
    the overrides, its storage, and that every trial fits where it would run (in the layout
    it would run in); a sweep too long to start unasked is warned of (`rlsweep.run.preflight`)."""
    spec = _checked(args, _load(args)).spec
    print(f"{args.spec}: ok — {spec.num_trials:,} trials of {spec.budget:,} env steps")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    import os

    import pandas as pd

    from rlsweep.plan.cost import load_prices
    from rlsweep.plan.placement import gpus_may_exist, local_machine
    from rlsweep.plan.plan import make_plan, scaling_warnings
    from rlsweep.run import preflight

    for flag, value in (
        ("--instances", args.instances),
        ("--head", args.head),
        ("--spot", args.spot),
    ):
        if value and args.instance is None:
            raise SpecError(None, "", f"{flag} needs --instance TYPE")
    spec = _load(args)
    preflight.refuse_repeats(spec)
    preflight.check_spec_storage(spec, remote=not args.no_storage_check)
    if args.budget is not None:
        for line in scaling_warnings(_read(args, budget=False), spec):
            print(f"rlsweep: warning: {line}", file=sys.stderr, flush=True)
    gpus = args.gpus
    if gpus is None:  # this machine's, unless the flags describe another
        here = not (args.num_cpus or args.instance)
        gpus = local_machine(look_up_gpus=gpus_may_exist()).gpus if here else 0
    plan = make_plan(
        spec,
        cpus=args.num_cpus or os.cpu_count() or 1,
        gpus=gpus,
        gpu_memory=args.gpu_memory,
        steps_per_cpu_s=args.steps_per_s,  # None: make_plan's (the last measured benchmark's)
        instance=args.instance,
        spot=args.spot,
        prices=load_prices(args.prices) if args.prices else None,
        # --instance alone plans for one instance, not for this machine's CPUs.
        instances=args.instances or (1 if args.instance and not args.num_cpus else None),
        head=args.head,
        machine_name=f"the planned machine (--num-cpus {args.num_cpus})" if args.num_cpus else None,
    )
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(pd.DataFrame(plan.rows).to_string(index=False))
    if spec.configurations_in_every_cell:
        how = (
            "proposed by Optuna"
            if spec.search.algorithm == "optuna"
            else f"drawn once, from search.seed {spec.search.seed}"
        )
        print(
            f"configurations: {spec.search.num_samples:,} of the sampled parameters, {how}; "
            "each runs in every row"
        )
    elif spec.sampled_keys:
        print(f"population: {spec.search.num_samples:,} a row, each trial drawing its own start")
    if plan.layout is not None:
        print(f"\n{plan.layout.line()}")
    print(f"\n{spec.name}: {plan.summary()}")
    if warning := preflight.long_warning(plan):
        print(f"rlsweep: warning: {warning}", file=sys.stderr, flush=True)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from rlsweep.run import preflight
    from rlsweep.run.sweep import run_sweep

    where = _where(args)
    spec = _load(args)
    n = spec.num_trials
    print(f"rlsweep: {spec.name}: {n:,} trials x {spec.budget:,} env steps", flush=True)
    checked = _checked(args, spec, warn=args.allow_long)
    preflight.refuse_long(checked.plan, args.allow_long)
    result = run_sweep(checked.spec, **where)
    code = _summary(result)
    if args.smoke:
        _smoke_note(checked.spec, "sweep")
    return code


def cmd_resume(args: argparse.Namespace) -> int:
    from rlsweep.run.sweep import resume_sweep
    from rlsweep.storage import check_storage

    if args.overrides:
        raise SpecError(
            None,
            "",
            f"{' '.join(args.overrides)}: a resume runs the sweep as its sweep.yaml records it; "
            "to change it, run the spec anew (rlsweep run SPEC KEY=VALUE ... --overwrite)",
        )
    _not_a_spec(args.dir)
    check_storage(args.dir, remote=not args.no_storage_check)
    where = _where(args)
    where.pop("max_failures", None)  # the sweep's own setting is restored with it
    try:
        result = resume_sweep(args.dir, **where)
    except FileNotFoundError as e:
        raise SpecError(None, "", f"{e}; {_results_hint('resume')}") from None
    code = _summary(result)
    _ablation_table(result)
    return code


def _ablation_table(result) -> None:
    """An ablation's (or study's) ablation.md, once its sweep has run (`ablate`, `resume`)."""
    from rlsweep.results.ablate import ablation_of, write_ablation_table

    if (spec := ablation_of(result.path)) is not None:
        table = write_ablation_table(spec, result.path)
        print(f"\n{table.read_text()}\ntable: {table}\nreport: {table.parent / 'report.md'}")


def _results_hint(command: str) -> str:
    return f"{command} takes a sweep's results dir, <storage_path>/<name> (e.g. results/demo)"


def _not_a_spec(path: str, command: str = "resume") -> None:
    """`rlsweep resume spec.yaml` (or `report`): say which results dir that spec's sweep lives
    in, and the command for it."""
    from pathlib import Path

    from rlsweep.experiment.experiment_dir import can_resume, experiment_path, holds_sweep
    from rlsweep.experiment.interrupt import resume_command

    if not (path.endswith((".yaml", ".yml")) and Path(path).is_file()):
        return
    try:
        spec = SweepSpec.from_yaml(path)
    except SpecError:  # not a spec that loads: its own errors are validate's to say
        raise SpecError(path, "", f"a file, not a results dir; {_results_hint(command)}") from None
    experiment = experiment_path(spec)
    if command == "report":
        if holds_sweep(experiment):
            raise SpecError(
                path,
                "",
                f"a spec, not a results dir; its sweep's report: rlsweep report {experiment}",
            )
        raise SpecError(
            path, "", f"a spec, not a results dir; its sweep has not run yet: rlsweep run {path}"
        )
    hint = resume_command(experiment)
    if not can_resume(experiment):
        hint += (
            f" (it stopped before Tune started it: rlsweep run {path} --overwrite)"
            if holds_sweep(experiment)
            else f" (it holds no sweep yet: rlsweep run {path})"
        )
    raise SpecError(path, "", f"a spec, not a results dir; its sweep resumes with: {hint}")


def _where(args: argparse.Namespace) -> dict:
    """run_sweep's "where and how to run" options, shared by run, resume and ablate."""
    from rlsweep.experiment.experiment_dir import Instance
    from rlsweep.run.session import Dashboard

    # Flags left unset are not passed: run_sweep's, WandbSettings' and Dashboard's defaults hold
    # (each written once, there).
    for flag, parent in (("wandb_project", "wandb"), ("dashboard_port", "dashboard")):
        if getattr(args, flag) and not getattr(args, parent):
            raise SpecError(
                None,
                "",
                f"--{flag.replace('_', '-')}: given without --{parent}, whose setting it is; "
                f"add --{parent}",
            )
    wandb = None
    if args.wandb:
        wandb = {"mode": args.wandb} | ({"project": p} if (p := args.wandb_project) else {})
    port = {"port": args.dashboard_port} if args.dashboard_port else {}
    where = {
        "address": args.address,
        "num_cpus": args.num_cpus,
        "max_failures": args.max_failures,
        "wandb": wandb,
        "dashboard": Dashboard(**port) if args.dashboard else False,
        "verbose": args.verbose,
        "time_limit": args.time_limit,
    }
    if where["max_failures"] is None:
        del where["max_failures"]
    if getattr(args, "overwrite", False):
        where["overwrite"] = True
    if getattr(args, "spot", False) and not getattr(args, "instance", None):
        raise SpecError(None, "", "--spot needs --instance TYPE (the type whose spot price it is)")
    if instance := getattr(args, "instance", None):
        where["instance"] = Instance(instance, spot=args.spot)
    return where


def _summary(result) -> int:
    print(f"\nresults: {result.path}\n")
    print(_table(result.trials))
    return result.exit_code


def _smoke_note(spec: SweepSpec, what: str) -> None:
    """SMOKE_NOTE on stderr, after a `--smoke` run's table: its scores are a random policy's."""
    print(f"rlsweep: {SMOKE_NOTE.format(budget=spec.budget, what=what)}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlsweep.results.ablate import ablation_of, write_ablation_table
    from rlsweep.results.report import build_report

    by = [p for arg in args.by or [] for p in arg.split(",") if p]
    for d in args.dirs:
        _not_a_spec(d, "report")
    # One ablation's dir, reported as `ablate` reports it: report/ with ablation.md.
    plain = len(args.dirs) == 1 and not (by or args.out or args.pool)
    ablation = ablation_of(args.dirs[0]) if plain else None
    try:
        # --resamples unset: build_report's default (rlsweep.results.tables.REPORT_RESAMPLES)
        n = {"n_resamples": args.resamples} if args.resamples is not None else {}
        with warnings.catch_warnings(record=True) as caught:  # e.g. repeated trials
            warnings.simplefilter("always", UserWarning)
            if ablation is not None:
                table = write_ablation_table(ablation, Path(args.dirs[0]), prices=args.prices, **n)
                path = table.parent / "report.md"
                print(f"{table.read_text()}\ntable: {table}")
            else:
                path = build_report(
                    args.dirs, by=by, out=args.out, pool=args.pool, prices=args.prices, **n
                )
    except FileNotFoundError as e:
        raise SpecError(None, "", f"{e}; {_results_hint('report')}") from None
    except (OSError, ValueError) as e:  # OSError: also S3 access denied / unreachable
        raise SpecError(None, "", str(e)) from None
    for text in dict.fromkeys(str(w.message) for w in caught if w.category is UserWarning):
        print(f"rlsweep: warning: {text}", file=sys.stderr)
    print((path.parent / "table.md").read_text())
    print(f"report: {path}")
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    from rlsweep.results.ablate import load_ablation, write_ablation_table
    from rlsweep.run import preflight
    from rlsweep.run.sweep import run_sweep

    where = _where(args)
    spec = load_ablation(
        args.spec,
        smoke=args.smoke,
        budget=args.budget,
        storage_path=args.storage,
        overrides=_overrides(args),
    )
    _warn_defaults(spec)
    print(f"rlsweep: ablation {spec.name}: {spec.num_trials:,} trials x {spec.budget:,} env steps")
    checked = _checked(args, spec, warn=args.allow_long)
    preflight.refuse_long(checked.plan, args.allow_long)
    spec = checked.spec
    result = run_sweep(spec, **where)
    table = write_ablation_table(spec, result.path)
    print(table.read_text())
    print(f"table: {table}\nreport: {table.parent / 'report.md'}")
    if args.smoke:
        _smoke_note(spec, "ablation")
    return result.exit_code


def cmd_pack(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlsweep import formatting
    from rlsweep.node.carry import CarryError, pack

    try:
        most = None if args.max_mb is None else int(args.max_mb * 2**20)
        part = max(1, int(args.part_mb * 2**20))  # a byte at least, however small the MiB
        m = pack(Path(args.dir), Path(args.out), part, args.lean, max_bytes=most)
    except CarryError as e:
        raise SpecError(None, "", str(e)) from None
    for name in m["checkpoints_dropped_to_fit"]:
        print(
            f"rlsweep: {name}: left out to fit --max-mb {args.max_mb:g}: its trial starts anew "
            "at the resume",
            file=sys.stderr,
        )
    size = sum(p["bytes"] for p in m["parts"])
    # Those dropped to fit are named above: a resume would have loaded them.
    unread = len(m["checkpoints_left_out"]) - len(m["checkpoints_dropped_to_fit"])
    left = f"{formatting.plural(unread, 'checkpoint')} no resume loads"
    if args.lean:
        left += ", TensorBoard's event files and the report"
    print(
        f"{args.out}: {m['experiment']}, {m['packed_bytes'] / 2**20:.1f} of its "
        f"{m['bytes'] / 2**20:.1f} MiB, in {len(m['parts'])} part(s) of "
        f"{size / 2**20:.1f} MiB gzipped; left out: {left}\n"
        f"unpack it: rlsweep unpack {args.out} --dest DIR"
    )
    return 0


def cmd_unpack(args: argparse.Namespace) -> int:
    """Unpack, then what to do with the dir: resume it, or, where every trial has ended (a
    resume would run nothing), report it."""
    from pathlib import Path

    from rlsweep.experiment.experiment_dir import sweep_spec
    from rlsweep.experiment.interrupt import resume_command
    from rlsweep.node.carry import CarryError, unpack
    from rlsweep.results.results import resume_points
    from rlsweep.storage import user_path

    try:
        target = unpack(Path(args.parts), Path(args.dest))
    except CarryError as e:
        raise SpecError(None, "", str(e)) from None
    try:
        spec = sweep_spec(target)
    except SpecError:  # recorded under rules since changed: unpacked all the same
        spec = None
    # resume's own rule: what it would continue or start (the restarts it is given shape its
    # lines only; pack reconciled the dir already).
    if spec is not None and not resume_points(spec, str(target), ()).to_run:
        print(f"{target}\nevery trial has ended; report it: rlsweep report {user_path(target)}")
    else:
        print(f"{target}\nresume it: {resume_command(target)}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """One line per check as it finishes (rlsweep.node.doctor); exit code 1 if any failed."""
    import json

    from rlsweep.node import doctor

    results = []
    for check in doctor.run(gpu=args.gpu):
        print(check.line(), flush=True)
        results.append(check)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doctor.as_json(results, args.gpu), f, indent=1)
    return 0 if doctor.passed(results) else 1


SPEC_HELP = "sweep spec YAML (e.g. search_spaces/demo.yaml; an ablation file too)"


def _add_spec(p: argparse.ArgumentParser, help: str = SPEC_HELP, **kw: str) -> None:
    """The spec argument and its overrides, the same on validate, plan, run and ablate."""
    from rlsweep.spec.overrides import EXAMPLE

    p.add_argument("spec", help=help, **kw)
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help=f"set any spec key, its value in YAML: {EXAMPLE}; "
        "space.lr='{loguniform: [1e-4, 1e-3]}' (validated as the file is; recorded in sweep.yaml)",
    )
    p.add_argument(
        "--budget", type=env_steps, help="env steps per trial, e.g. 25e6 (overrides the spec)"
    )
    p.add_argument("--games", metavar="G,G", help="games, comma-separated (overrides the spec's)")
    p.add_argument("--seeds", metavar="S,S", help="seeds, comma-separated: 0,1,2 (overrides)")
    p.add_argument("--storage", help="results dir or s3:// URI (overrides the spec's)")
    p.add_argument("--smoke", action="store_true", help="apply the spec's smoke: overrides")
    _add_storage_check(p)


def _add_storage_check(p: argparse.ArgumentParser) -> None:
    from rlsweep.storage import SKIP_REMOTE_CHECK

    p.add_argument(
        SKIP_REMOTE_CHECK,
        action="store_true",
        help="do not ask an s3:// store from here before Ray starts (for a cluster that reaches "
        "storage this machine cannot)",
    )


def _add_machine(p: argparse.ArgumentParser) -> None:
    """Where trials run: what validate checks them against and run starts them on."""
    p.add_argument("--address", help="join a running Ray cluster (default: start one here)")
    p.add_argument("--num-cpus", type=positive_int, help="CPUs of the embedded Ray instance")


def _add_where(p: argparse.ArgumentParser, *, recorded: bool = True) -> None:
    """run_sweep's "where and how" flags. recorded=False (resume): the flags whose values a
    sweep records when it starts (--max-failures in Tune's state, --instance in run.json) are
    left out, as a resumed sweep keeps them; each is its own decision, not one hidden by the
    other."""
    from rlsweep.experiment.history import MAX_FAILURES
    from rlsweep.plan.plan import ALLOW_LONG

    _add_machine(p)
    if recorded:
        p.add_argument(
            "--max-failures",
            type=int,
            help="retries of a crashed trial, each from its last checkpoint (default: "
            f"{MAX_FAILURES})",
        )
        p.add_argument(
            ALLOW_LONG,
            action="store_true",
            help="start a sweep whose estimate passes a week (default: refuse it, saying why)",
        )
        p.add_argument(
            "--instance", help="instance type trials run on (recorded; reports price it)"
        )
        p.add_argument("--spot", action="store_true", help="--instance is billed as spot")
        p.add_argument(
            "--overwrite",
            action="store_true",
            help="delete a sweep already in the results dir (default: refuse; resume it instead)",
        )
    else:
        p.set_defaults(max_failures=None)
    p.add_argument(
        "--verbose",
        action="store_true",
        help="Tune's own progress reporter and the trials' output, not rlsweep's progress line",
    )
    p.add_argument(
        "--wandb",
        nargs="?",
        const="auto",
        choices=["auto", "offline", "online"],
        help="log trials to W&B: offline files unless credentials exist (auto, the default)",
    )
    p.add_argument(
        "--wandb-project", help="with --wandb: the W&B project (default: WandbSettings.project)"
    )
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="start the Ray dashboard on 127.0.0.1 (Tune's live view; URL printed)",
    )
    p.add_argument(
        "--dashboard-port", type=int, help="with --dashboard: its port (default: Dashboard's)"
    )
    p.add_argument(
        "--time-limit",
        type=time_limit,
        metavar="DURATION",
        help="stop by then (8m30s, 2h, 540): running trials checkpoint after their current "
        "iteration, ending in time for the sweep's own end (20 s kept), the sweep exits 3 "
        "(INCOMPLETE) and prints the resume command",
    )


class _Renamed(argparse.Action):
    """A flag's former name, hidden from --help: an error that names the flag to write."""

    def __init__(self, option_strings: list[str], dest: str, new: str, **kw) -> None:
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kw)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        parser.error(f"{option_string}: renamed: write {self.new}")


def _parser(sub, name: str, help: str, examples: str, description: str = "", **kw):
    """A subcommand whose --help ends with examples."""
    return sub.add_parser(
        name,
        help=help,
        description=description or help,
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kw,
    )


def parser() -> argparse.ArgumentParser:
    from rlsweep import __version__
    from rlsweep.launch import ec2, sagemaker
    from rlsweep.results.ablate import ablation_names, study_names

    p = argparse.ArgumentParser(
        prog="rlsweep",
        description="Hyperparameter sweeps for PPO generalization on Procgen (Ray Tune + RLlib).",
        epilog="a study, step by step:\n"
        "  rlsweep validate search_spaces/study.yaml     # everything run checks, no Ray\n"
        "  rlsweep plan search_spaces/study.yaml --instance c6i.8xlarge --instances 4\n"
        "  rlsweep run search_spaces/study.yaml --address auto\n"
        "  rlsweep report results/framestack-study\n\n"
        "exit codes: 0 done, 1 some trials failed, 2 bad input, 3 stopped by --time-limit, "
        "130 interrupted (Ctrl-C)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"rlsweep {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    v = _parser(
        sub,
        "validate",
        "check a spec completely, without starting Ray",
        "  rlsweep validate search_spaces/demo.yaml\n"
        "  rlsweep validate search_spaces/ablations/model.yaml --smoke\n"
        "  rlsweep validate study.yaml --address auto   # against a running cluster\n",
        "Everything `run` checks before it starts: every trial built and validated (the spec's\n"
        "smoke: section too), and every trial fits this machine (or --num-cpus, or the running\n"
        "cluster at --address). Exit code 2 on bad input.",
    )
    _add_spec(v)
    _add_machine(v)
    v.set_defaults(func=cmd_validate)

    pl = _parser(
        sub,
        "plan",
        "list a spec's trials, total env steps and wall time",
        "  rlsweep plan search_spaces/study.yaml --num-cpus 32\n"
        "  rlsweep plan search_spaces/demo.yaml --budget 25e6 --num-cpus 64\n"
        "  rlsweep plan study.yaml --instance c6i.8xlarge --instances 4 --spot\n",
    )
    _add_spec(pl)
    pl.add_argument(
        "--num-cpus",
        type=positive_int,
        help="CPUs to plan for (default: this machine's), as run takes it",
    )
    pl.add_argument("--cpus", action=_Renamed, new="--num-cpus")
    pl.add_argument(
        "--steps-per-s",
        type=positive_number,
        default=None,
        help="env steps per second per trial CPU (default: the last benchmark's, see plan.py)",
    )
    pl.add_argument(
        "--gpus",
        type=count_of_gpus,
        default=None,
        help="GPUs to plan for (default: this machine's, or 0 with --num-cpus or --instance)",
    )
    pl.add_argument(
        "--gpu-memory",
        type=positive_number,
        metavar="GIB",
        help="memory of each GPU, to check packings",
    )
    pl.add_argument("--instance", metavar="TYPE", help="estimate the cost on this EC2 type")
    pl.add_argument(
        "--instances",
        type=positive_int,
        metavar="N",
        help="N instances (default: enough for --num-cpus, or 1)",
    )
    pl.add_argument("--spot", action="store_true", help="spot prices (default: on-demand)")
    pl.add_argument(
        "--head", metavar="TYPE", help="add a head node of this type (on-demand, runs no trials)"
    )
    pl.add_argument(
        "--prices", metavar="FILE", help="price table (default: rlsweep/plan/prices.yaml)"
    )
    pl.set_defaults(func=cmd_plan)

    r = _parser(
        sub,
        "run",
        "run a sweep and print its per-trial table",
        "  rlsweep run search_spaces/demo.yaml\n"
        "  rlsweep run search_spaces/study.yaml --address auto --storage s3://bucket/sweeps\n"
        "  rlsweep run spec.yaml --instance c6i.8xlarge --spot   # recorded: reports price it\n",
        "Exit code 0: every trial ended (finished, or stopped by the scheduler); 1: some\n"
        "failed or did not end; 2: bad input; 3: stopped by\n"
        "--time-limit; 130: interrupted (continue with `rlsweep resume <storage_path>/<name>`).",
    )
    _add_spec(r)
    _add_where(r)
    r.set_defaults(func=cmd_run)

    rs = _parser(
        sub,
        "resume",
        "continue an interrupted sweep from its checkpoints",
        "  rlsweep resume results/demo\n  rlsweep resume s3://bucket/sweeps/study --address auto\n"
        "  rlsweep resume /new/place/study --time-limit 8m30s   # moved: it resumes there\n",
    )
    rs.add_argument("dir", help="the sweep's experiment dir (<storage_path>/<name>, or s3://...)")
    rs.add_argument("overrides", nargs="*", help=argparse.SUPPRESS)  # refused, saying why
    _add_storage_check(rs)
    _add_where(rs, recorded=False)
    rs.set_defaults(func=cmd_resume)

    names, studies = ablation_names(), study_names()
    ab = _parser(
        sub,
        "ablate",
        "run a named ablation or study, write its write-up-style table",
        f"  rlsweep ablate {names[0] if names else 'NAME'} --smoke   # the machinery in minutes\n"
        "  rlsweep ablate augmentations --budget 25e6 --address auto\n"
        "  rlsweep ablate pooling-bigfish   # a study: its published numbers beside ours\n",
        f"ablations: {', '.join(names)}\nstudies: {', '.join(studies) or 'none'}\n"
        "(search_spaces/ablations/NAME.yaml, search_spaces/studies/NAME.yaml; a path works too)",
    )
    _add_spec(ab, metavar="NAME", help=f"one of: {', '.join(names + studies)}; or a YAML path")
    _add_where(ab)
    ab.set_defaults(func=cmd_ablate)

    rep = _parser(
        sub,
        "report",
        "tables, plots and report.md from experiment dirs",
        "  rlsweep report results/demo\n"
        "  rlsweep report results/            # every sweep in it, one report each\n"
        "  rlsweep report results/a results/b --pool --by lr --out report/\n",
        "Tables with 95% bootstrap CIs, plots and report.md from finished, stopped or running\n"
        "sweeps (an ablation's dir: ablation.md too, as `ablate` writes it). Exit code 0; 2: bad\n"
        "input (a directory that cannot be read or holds no sweep, --by, --prices); 130:\n"
        "interrupted.",
    )
    rep.add_argument("dirs", nargs="+", metavar="DIR", help="experiment (or storage) directories")
    rep.add_argument(
        "--by",
        action="append",
        metavar="PARAM",
        help="variant parameter(s), repeat or comma-separate (default: the swept ones, or an "
        "ablation's variant)",
    )
    rep.add_argument("--out", help="output directory (default: DIR/report)")
    rep.add_argument(
        "--pool",
        action="store_true",
        help="pool trials of different sweeps whose configs agree except seed (default: one "
        "report per sweep)",
    )
    rep.add_argument(
        "--resamples",
        type=positive_int,
        help="bootstrap resamples (default: rlsweep.results.tables.REPORT_RESAMPLES)",
    )
    rep.add_argument("--prices", help="price table for the cost section (default: shipped)")
    rep.set_defaults(func=cmd_report)

    pk = _parser(
        sub,
        "pack",
        "an experiment dir as gzipped parts of bounded size, to resume on another machine",
        "  rlsweep pack results/study --out parts --part-mb 16\n"
        "  rlsweep unpack parts --dest results && rlsweep resume results/study   # elsewhere\n",
        "Everything a resume needs: the experiment dir less the checkpoints no resume loads "
        "(an ended trial's; of the others, all but the one a resume restores it from); a "
        "manifest holds every part's sha256.",
    )
    pk.add_argument("dir", metavar="DIR", help="experiment dir (e.g. results/demo)")
    pk.add_argument("--out", required=True, help="folder for the parts and manifest.json")
    pk.add_argument(
        "--part-mb",
        type=positive_number,
        default=16.0,
        help="largest part, MiB (default %(default)s)",
    )
    pk.add_argument(
        "--lean",
        action="store_true",
        help="also leave out what neither a resume nor a report reads: TensorBoard's event "
        "files, and the report (`rlsweep report` writes it again)",
    )
    pk.add_argument(
        "--max-mb",
        type=positive_number,
        help="the most the parts may weigh, MiB: where more, the checkpoints of the unfinished "
        "trials that got least far are left out, one by one, and those trials start anew",
    )
    pk.set_defaults(func=cmd_pack)
    up = _parser(
        sub,
        "unpack",
        "restore a packed experiment dir, verified, under DEST",
        "  rlsweep unpack parts --dest results     # then: rlsweep resume results/<name>\n",
    )
    up.add_argument("parts", metavar="PARTS", help="the folder `rlsweep pack` wrote")
    up.add_argument("--dest", default="results", help="where it goes (default %(default)s)")
    up.set_defaults(func=cmd_unpack)

    dr = _parser(
        sub,
        "doctor",
        "check this machine: Python, torch, CUDA, Ray, Qt's libraries, envpool, Procgen",
        "  rlsweep doctor          # a CPU machine passes; a missing GPU is reported\n"
        "  rlsweep doctor --gpu --json doctor.json   # a GPU node: no CUDA GPU fails\n",
        "One line per check with a fix; exit code 1 if any check failed.",
    )
    dr.add_argument("--gpu", action="store_true", help="fail without a CUDA GPU")
    dr.add_argument("--json", metavar="FILE", help="also write the checks as JSON")
    dr.set_defaults(func=cmd_doctor)

    ec2_example = (
        "  rlsweep cluster ec2 cluster.yaml --name sweeps --image ami-0123456789abcdef0 \\\n"
        "      --install rlsweep==0.1.0 --worker c6i.8xlarge:0:10:spot --spec study.yaml\n"
    )
    cl = _parser(
        sub,
        "cluster",
        "write a cluster config to run sweeps on",
        ec2_example + "  rlsweep cluster ec2 --help   # every option of the EC2 config\n",
    )
    cluster = cl.add_subparsers(dest="provider", required=True)
    e = _parser(cluster, "ec2", "autoscaled EC2 cluster: a Ray cluster-launcher YAML", ec2_example)
    ec2.add_arguments(e)
    e.set_defaults(func=ec2.main)

    sm = _parser(
        sub,
        "sagemaker",
        "a SageMaker training job running a spec: print its request, or --submit",
        "  rlsweep sagemaker search_spaces/study.yaml --job-name study --role-arn ARN \\\n"
        "      --image-uri URI --instance-type ml.c5.9xlarge --checkpoint-s3 s3://b/ck \\\n"
        "      --output-s3 s3://b/out --source-s3 s3://b/src.tar.gz\n",
    )
    sagemaker.add_arguments(sm)
    sm.set_defaults(func=sagemaker.main)
    return p


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = (a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def resume_options(argv: list[str]) -> list[str]:
    """The options of an `ablate` (or `run`) command line that `resume` takes too: where and how
    the sweep runs (--num-cpus, --verbose, --wandb ...), in their order. The rest (the spec,
    its KEY=VALUE overrides, --budget, --smoke ...) is left out: a resumed sweep runs as its
    sweep.yaml records it. For a caller that repeats one command line at each stop and resume
    (benchmarks/study_sitting.py)."""
    commands = _subcommands()
    takes, resume = (commands[c]._option_string_actions for c in ("ablate", "resume"))
    kept, i = [], 0
    while i < len(argv):
        name, inline, _ = argv[i].partition("=")
        action = takes.get(name) if argv[i].startswith("--") else None
        n = 0
        if action is not None and not inline:
            if action.nargs is None:
                n = 1
            elif action.nargs == "?":  # its value only where one of its choices follows
                n = int(i + 1 < len(argv) and argv[i + 1] in (action.choices or ()))
        if action is not None and name in resume:
            kept += argv[i : i + 1 + n]
        i += 1 + n
    return kept


def _parse(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`p.parse_args(argv)`, where KEY=VALUE overrides may also come after the flags
    (`rlsweep run spec.yaml --seeds 0,1 search.num_samples=8`: argparse takes a positional
    list in one place only)."""
    args, extra = p.parse_known_args(argv)
    late = [a for a in extra if "=" in a and not a.startswith("-")]
    if late and isinstance(getattr(args, "overrides", None), list):
        args.overrides += late
        extra = [a for a in extra if a not in late]
    if extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    from rlsweep.experiment.interrupt import SweepInterrupted

    args = _parse(parser(), argv)
    try:
        return args.func(args)
    except SpecError as e:  # every kind of bad input: spec, flag, price table, launcher
        for problem in e.errors:  # all of a spec's independent errors, a line each
            print(f"rlsweep: error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SweepInterrupted as e:  # Ctrl-C, SIGTERM, --time-limit: the last line resumes
        print(f"\nresults: {e.result.path}\n\n{_table(e.result.trials)}\n", flush=True)
        print(f"rlsweep: interrupted: {e}", file=sys.stderr, flush=True)
        print(e.command, flush=True)
        return e.exit_code
    except KeyboardInterrupt:
        print("rlsweep: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
