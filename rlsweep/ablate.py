"""`rlsweep ablate NAME`: run a named ablation and write its table in a write-up's layout.

An ablation is a sweep spec in `search_spaces/ablations/NAME.yaml` whose `variants` are the
table's columns; its `smoke:` section (spec overrides, see `SweepSpec.smoke`) runs the whole
machinery in minutes (`--smoke`). The output, next to the sweep's results: `ablation.md` (rows =
games, columns = variants in the file's order, cells = normalized unseen-level score, mean ± CI
over seeds), `ablation.csv`, and the full report (`report.md`, plots) of `rlsweep report`.
"""

from __future__ import annotations

from pathlib import Path

from rlsweep.spec import SpecError, SweepSpec, data_dir

ABLATIONS_DIR = data_dir("search_spaces/ablations")
"""The shipped ablations: the checkout's, else the wheel's <prefix>/share/rlsweep/ablations."""

SMOKE_NOTE = (
    "smoke run: {budget:,} env steps per trial is far too few to learn anything, so every "
    "variant scores like a random policy and the cells look alike; it checks the machinery, "
    "not the ablation (drop --smoke for the real budget)"
)


def ablation_names() -> list[str]:
    return sorted(p.stem for p in ABLATIONS_DIR.glob("*.yaml"))


def ablation_path(name: str) -> Path:
    """`name` of a shipped ablation (search_spaces/ablations/NAME.yaml), or a YAML path."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else ABLATIONS_DIR / f"{name}.yaml"
    if not path.exists():
        raise SpecError(
            None, "", f"unknown ablation {name!r}; allowed: {', '.join(ablation_names())}"
        )
    return path


def load_ablation(
    name: str, *, smoke: bool = False, budget: int | None = None, storage_path: str | None = None
) -> SweepSpec:
    """The ablation's spec (`SweepSpec.from_yaml`, the one loader); `smoke` applies its
    `smoke:` overrides, `budget` and `storage_path` override the file's."""
    path = ablation_path(name)
    spec = SweepSpec.from_yaml(path, smoke=smoke, budget=budget, storage_path=storage_path)
    if not spec.variants:
        raise SpecError(str(path), "variants", "an ablation needs variants (its table's columns)")
    return spec


def write_ablation_table(
    spec: SweepSpec, experiment_dir: Path, n_resamples: int | None = None, note: str = ""
) -> Path:
    """report.md + plots via `rlsweep.report`, then ablation.md/.csv with the spec's columns.

    n_resamples: bootstrap resamples (default: the report's); note: a line under the title."""
    from rlsweep import report, results, tables

    n = {"n_resamples": n_resamples} if n_resamples is not None else {}
    out = experiment_dir / "report"
    report.build_report([experiment_dir], by=["variant"], out=out, **n)
    exp = results.load_experiment([experiment_dir], by=["variant"])
    # Columns are the variants' own labels, in the file's order (not 'variant=...' sorted).
    for frame in (exp.final, exp.curves):
        frame["variant"] = frame["variant"].str.removeprefix("variant=")
    exp.variants = list(spec.variants)  # all of them: "—" where none finished
    table = tables.score_table(exp, **n)
    head = f"# {spec.name}\n\n" + (f"{note}\n\n" if note else "")
    (out / "ablation.md").write_text(head + table)
    cols = ["game", "seed", "variant", "status", "test/return_norm", "train/return_norm"]
    exp.final[[c for c in cols if c in exp.final]].to_csv(out / "ablation.csv", index=False)
    return out / "ablation.md"
