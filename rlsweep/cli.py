"""`rlsweep` command line: thin argument parsing over the Python API."""

from __future__ import annotations

import argparse
import sys

from rlsweep.spec import SpecError, SweepSpec


def _table(df) -> str:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
        return df.drop(columns=["trial_dir"], errors="ignore").to_string(index=False)


def cmd_validate(args: argparse.Namespace) -> int:
    spec = SweepSpec.from_yaml(args.spec)
    print(f"{args.spec}: ok — {len(spec.trials())} trials of {spec.budget:,} env steps")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from rlsweep.sweep import run_sweep

    spec = SweepSpec.from_yaml(args.spec)
    if args.budget is not None:
        spec = SweepSpec.from_dict({**spec.to_dict(), "budget": args.budget}, source=args.spec)
    n = len(spec.trials())
    print(f"rlsweep: {spec.name}: {n} trials x {spec.budget:,} env steps", flush=True)
    result = run_sweep(
        spec, address=args.address, storage_path=args.storage, num_cpus=args.num_cpus
    )
    print(f"\nresults: {result.path}\n")
    print(_table(result.trials))
    failed = (result.trials["status"] != "TERMINATED").sum()
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rlsweep", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="check a spec completely, without starting Ray")
    v.add_argument("spec")
    v.set_defaults(func=cmd_validate)

    r = sub.add_parser("run", help="run a sweep and print its per-trial table")
    r.add_argument("spec")
    r.add_argument("--address", help="join a running Ray cluster (default: start one here)")
    r.add_argument("--storage", help="results directory (overrides the spec's storage_path)")
    r.add_argument("--budget", type=int, help="env steps per trial (overrides the spec)")
    r.add_argument("--num-cpus", type=int, help="CPUs of the embedded Ray instance")
    r.set_defaults(func=cmd_run)

    args = p.parse_args(argv)
    try:
        return args.func(args)
    except SpecError as e:
        print(f"rlsweep: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
