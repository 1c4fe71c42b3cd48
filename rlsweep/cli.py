"""`rlsweep` command line: thin argument parsing over the Python API."""

from __future__ import annotations

import argparse
import sys

from rlsweep.spec import SpecError, SweepSpec


def _table(df) -> str:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
        return df.drop(columns=["trial_dir"], errors="ignore").to_string(index=False)


def _load(path: str) -> SweepSpec:
    """A sweep spec, or an ablation file (a spec plus a `smoke:` section)."""
    from rlsweep.ablate import is_ablation, load_ablation

    return load_ablation(path) if is_ablation(path) else SweepSpec.from_yaml(path)


def env_steps(text: str) -> int:
    """argparse type of `--budget`: env steps as the spec language writes them (25e6 too)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: a number of env steps") from None
    if not value.is_integer() or value <= 0:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: a whole number of env steps > 0")
    return int(value)


def _with_budget(spec: SweepSpec, budget: int | None, source: str) -> SweepSpec:
    if budget is None:
        return spec
    return SweepSpec.from_dict({**spec.to_dict(), "budget": budget}, source=source)


def cmd_validate(args: argparse.Namespace) -> int:
    spec = _load(args.spec)
    print(f"{args.spec}: ok — {len(spec.trials())} trials of {spec.budget:,} env steps")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    import os

    import pandas as pd

    from rlsweep.cost import load_prices
    from rlsweep.plan import make_plan

    for flag, value in (("--instances", args.instances), ("--head", args.head)):
        if value is not None and args.instance is None:
            print(f"rlsweep: error: {flag} needs --instance TYPE", file=sys.stderr)
            return 2
    spec = _with_budget(_load(args.spec), args.budget, args.spec)
    plan = make_plan(
        spec,
        cpus=args.cpus or os.cpu_count() or 1,
        steps_per_cpu_s=args.steps_per_s,
        instance=args.instance,
        spot=args.spot,
        prices=load_prices(args.prices) if args.prices else None,
        # --instance alone plans for one instance, not for this machine's CPUs.
        instances=args.instances or (1 if args.instance and not args.cpus else None),
        head=args.head,
    )
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(pd.DataFrame(plan.rows).to_string(index=False))
    print(f"\n{spec.name}: {plan.summary()}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from rlsweep.sweep import run_sweep

    spec = _with_budget(SweepSpec.from_yaml(args.spec), args.budget, args.spec)
    n = len(spec.trials())
    print(f"rlsweep: {spec.name}: {n} trials x {spec.budget:,} env steps", flush=True)
    result = run_sweep(spec, storage_path=args.storage, **_where(args))
    return _summary(result)


def cmd_resume(args: argparse.Namespace) -> int:
    from rlsweep.sweep import resume_sweep

    where = _where(args)
    where.pop("max_failures")  # the sweep's own setting is restored with it
    try:
        result = resume_sweep(args.dir, **where)
    except FileNotFoundError as e:
        print(f"rlsweep: error: {e}", file=sys.stderr)
        return 2
    return _summary(result)


def _where(args: argparse.Namespace) -> dict:
    """run_sweep's "where and how to run" options, shared by run, resume and ablate."""
    from rlsweep.sweep import Dashboard, Instance

    wandb = None
    if args.wandb:
        wandb = {"mode": args.wandb, "project": args.wandb_project}
    where = {
        "address": args.address,
        "num_cpus": args.num_cpus,
        "max_failures": args.max_failures,
        "wandb": wandb,
        "dashboard": Dashboard(port=args.dashboard_port) if args.dashboard else False,
    }
    if instance := getattr(args, "instance", None):
        where["instance"] = Instance(instance, spot=args.spot)
    return where


def _summary(result) -> int:
    print(f"\nresults: {result.path}\n")
    print(_table(result.trials))
    failed = (result.trials["status"] != "TERMINATED").sum()
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    from rlsweep.report import build_report

    by = [p for arg in args.by or [] for p in arg.split(",") if p]
    try:
        path = build_report(
            args.dirs, by=by, out=args.out, n_resamples=args.resamples, prices=args.prices
        )
    except (OSError, ValueError) as e:  # OSError: also S3 access denied / unreachable
        print(f"rlsweep: error: {e}", file=sys.stderr)
        return 2
    print((path.parent / "table.md").read_text())
    print(f"report: {path}")
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    from rlsweep.ablate import load_ablation, write_ablation_table
    from rlsweep.sweep import run_sweep

    spec = load_ablation(args.name, smoke=args.smoke, budget=args.budget, storage_path=args.storage)
    print(f"rlsweep: ablation {spec.name}: {spec.num_trials} trials x {spec.budget:,} env steps")
    result = run_sweep(spec, **_where(args))
    table = write_ablation_table(spec, result.path)
    print(table.read_text())
    print(f"table: {table}\nreport: {table.parent / 'report.md'}")
    return 0


def _add_where(p: argparse.ArgumentParser, retries: bool = True) -> None:
    p.add_argument("--address", help="join a running Ray cluster (default: start one here)")
    p.add_argument("--num-cpus", type=int, help="CPUs of the embedded Ray instance")
    if retries:
        p.add_argument(
            "--max-failures",
            type=int,
            default=2,
            help="retries of a crashed trial, each from its last checkpoint (default: 2)",
        )
        p.add_argument(
            "--instance", help="instance type trials run on (recorded; reports price it)"
        )
        p.add_argument("--spot", action="store_true", help="--instance is billed as spot")
    else:
        p.set_defaults(max_failures=None)
    p.add_argument(
        "--wandb",
        nargs="?",
        const="auto",
        choices=["auto", "offline", "online"],
        help="log trials to W&B: offline files unless credentials exist (auto, the default)",
    )
    p.add_argument("--wandb-project", default="rlsweep", help="W&B project (default: rlsweep)")
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="start the Ray dashboard on 127.0.0.1 (Tune's live view; URL printed)",
    )
    p.add_argument("--dashboard-port", type=int, default=8265, help="dashboard port (8265)")


def cmd_cluster_ec2(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlsweep.launch import ec2

    try:
        workers = [ec2.WorkerType.parse(w, spot=args.spot) for w in args.worker or []]
        if not workers:
            workers = [ec2.WorkerType("cpu", spot=args.spot)]
        mounts = {}
        if args.spec:
            mounts[f"{ec2.REMOTE_SPECS}/{Path(args.spec).name}"] = str(Path(args.spec).resolve())
        cluster = ec2.Ec2Cluster(
            cluster_name=args.name,
            image_id=args.image,
            install=args.install,
            region=args.region,
            availability_zone=args.zone,
            head_instance_type=args.head,
            workers=workers,
            max_workers=args.max_workers,
            idle_timeout_minutes=args.idle_timeout,
            iam_instance_profile=args.iam_profile,
            worker_iam_instance_profile=args.worker_iam_profile,
            key_name=args.key_name,
            ssh_private_key=args.ssh_key,
            ssh_user=args.ssh_user,
            security_group_ids=args.security_group or (),
            torch=args.torch or ec2.DEFAULT_TORCH,
            dashboard_host=args.dashboard_host,
            file_mounts=mounts,
        )
    except ValueError as e:
        print(f"rlsweep: error: {e}", file=sys.stderr)
        return 2
    path = ec2.write_cluster_yaml(cluster, args.out, spec=args.spec, storage=args.storage)
    print(f"wrote {path}; run the sweep with:\n")
    for command, what in ec2.ray_commands(path, cluster, args.spec, args.storage):
        print(f"  {command}\n      # {what}")
    return 0


def cmd_sagemaker(args: argparse.Namespace) -> int:
    from rlsweep.launch import sagemaker

    return sagemaker.main(args)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rlsweep", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="check a spec completely, without starting Ray")
    v.add_argument("spec")
    v.set_defaults(func=cmd_validate)

    pl = sub.add_parser("plan", help="list a spec's trials, total env steps and wall time")
    pl.add_argument("spec")
    pl.add_argument("--cpus", type=int, help="CPUs to plan for (default: this machine's)")
    pl.add_argument(
        "--steps-per-s",
        type=float,
        default=110.0,
        help="measured env steps per second per trial CPU (default: 110, benchmarks/)",
    )
    pl.add_argument("--instance", metavar="TYPE", help="estimate the cost on this EC2 type")
    pl.add_argument(
        "--instances", type=int, metavar="N", help="N instances (default: enough for --cpus, or 1)"
    )
    pl.add_argument("--spot", action="store_true", help="spot prices (default: on-demand)")
    pl.add_argument(
        "--head", metavar="TYPE", help="add a head node of this type (on-demand, runs no trials)"
    )
    pl.add_argument("--prices", metavar="FILE", help="price table (default: rlsweep/prices.yaml)")
    pl.add_argument(
        "--budget", type=env_steps, help="env steps per trial, e.g. 25e6 (overrides the spec)"
    )
    pl.set_defaults(func=cmd_plan)

    r = sub.add_parser("run", help="run a sweep and print its per-trial table")
    r.add_argument("spec")
    r.add_argument("--storage", help="results dir or s3:// URI (overrides the spec's)")
    r.add_argument(
        "--budget", type=env_steps, help="env steps per trial, e.g. 25e6 (overrides the spec)"
    )
    _add_where(r)
    r.set_defaults(func=cmd_run)

    rs = sub.add_parser("resume", help="continue an interrupted sweep from its checkpoints")
    rs.add_argument("dir", help="the sweep's experiment dir (<storage>/<name>, or s3://...)")
    _add_where(rs, retries=False)
    rs.set_defaults(func=cmd_resume)

    ab = sub.add_parser("ablate", help="run a named ablation, write its write-up-style table")
    ab.add_argument("name", help="search_spaces/ablations/NAME.yaml (or a path)")
    ab.add_argument("--smoke", action="store_true", help="tiny budget: the machinery in minutes")
    ab.add_argument(
        "--budget", type=env_steps, help="env steps per trial, e.g. 25e6 (overrides the file)"
    )
    ab.add_argument("--storage", help="results directory (overrides the file)")
    _add_where(ab)
    ab.set_defaults(func=cmd_ablate)

    rep = sub.add_parser("report", help="tables, plots and report.md from experiment dirs")
    rep.add_argument("dirs", nargs="+", metavar="DIR", help="experiment (or storage) directories")
    rep.add_argument(
        "--by",
        action="append",
        metavar="PARAM",
        help="variant parameter(s), repeat or comma-separate (default: the swept ones)",
    )
    rep.add_argument("--out", help="output directory (default: DIR/report)")
    rep.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    rep.add_argument("--prices", help="price table for the cost section (default: shipped)")
    rep.set_defaults(func=cmd_report)

    cl = sub.add_parser("cluster", help="write a cluster config to run sweeps on")
    cluster = cl.add_subparsers(dest="provider", required=True)
    ec2 = cluster.add_parser("ec2", help="autoscaled EC2 cluster: a Ray cluster-launcher YAML")
    ec2.add_argument("out", help="YAML to write, e.g. cluster.yaml")
    ec2.add_argument("--name", required=True, help="cluster name")
    ec2.add_argument("--image", required=True, help="AMI id (NVIDIA drivers, Python 3.11)")
    ec2.add_argument(
        "--install", required=True, help="rlsweep for pip: rlsweep==X, git+https://..., or a wheel"
    )
    ec2.add_argument("--region", default="us-east-1", help="AWS region (default: us-east-1)")
    ec2.add_argument("--zone", help="availability zone(s), comma-separated")
    ec2.add_argument("--head", default="g5.xlarge", help="head instance type (default: g5.xlarge)")
    ec2.add_argument(
        "--worker",
        action="append",
        metavar="TYPE[:MIN:MAX][:spot]",
        help="worker node type, repeatable (default: c6i.8xlarge:0:4)",
    )
    ec2.add_argument("--spot", action="store_true", help="all workers on spot instances")
    ec2.add_argument("--max-workers", type=int, help="cap on worker nodes (default: sum of MAX)")
    ec2.add_argument("--idle-timeout", type=float, default=5, help="minutes before scale-down")
    ec2.add_argument("--iam-profile", help="head instance profile, ARN or name (by reference)")
    ec2.add_argument("--worker-iam-profile", help="workers' instance profile (e.g. S3 access)")
    ec2.add_argument("--key-name", help="EC2 key pair name (with --ssh-key)")
    ec2.add_argument("--ssh-key", help="path of that key pair's private key file")
    ec2.add_argument("--ssh-user", default="ubuntu", help="AMI login user (default: ubuntu)")
    ec2.add_argument("--security-group", action="append", help="sg-... id, repeatable")
    ec2.add_argument("--torch", default=None, help="torch requirement (default: torch==2.13.0)")
    ec2.add_argument("--dashboard-host", default="127.0.0.1", help="default: 127.0.0.1")
    ec2.add_argument("--spec", help="sweep spec to ship to the nodes (file_mounts)")
    ec2.add_argument("--storage", help="results URI for the run command, e.g. s3://bucket/sweeps")
    ec2.set_defaults(func=cmd_cluster_ec2)

    from rlsweep.launch.sagemaker import add_arguments as sagemaker_arguments

    sm = sub.add_parser(
        "sagemaker", help="a SageMaker training job running a spec: print its request, or --submit"
    )
    sagemaker_arguments(sm)
    sm.set_defaults(func=cmd_sagemaker)

    args = p.parse_args(argv)
    try:
        return args.func(args)
    except SpecError as e:
        print(f"rlsweep: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
