"""`rlsweep ablate NAME`: run a named ablation and write its table in a write-up's layout.

An ablation is a sweep spec in `search_spaces/ablations/NAME.yaml` whose `variants` are the
table's columns; its `smoke:` section (spec overrides, see `SweepSpec.smoke`) runs the whole
machinery in minutes (`--smoke`). A study (`search_spaces/studies/NAME.yaml`) is one too, for
one question asked at a real budget, with the published numbers it sets its answer beside
(`reference:`). The output, next to the sweep's results: `ablation.md` (rows = games, columns =
variants in the file's order, cells = normalized unseen-level score, mean [95% CI] over seeds; then
the final raw returns beside the spec's published numbers, and the first variant against each
other one: differences and P(X > Y) with CIs, and, while trials are unfinished, those
differences so far), `ablation.csv`, and the full report (`report.md`, plots) of `rlsweep report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rlsweep import formatting
from rlsweep import metrics as M
from rlsweep.spec.overrides import Override
from rlsweep.spec.spec import SpecError, SweepSpec, data_dir
from rlsweep.spec.validators import did_you_mean

if TYPE_CHECKING:
    from rlsweep.results.results import Experiment

ABLATIONS_DIR = data_dir("search_spaces/ablations")
"""The shipped ablations: the checkout's, else the wheel's <prefix>/share/rlsweep/ablations."""
STUDIES_DIR = data_dir("search_spaces/studies")
"""The shipped studies (ablations at a real budget, with published numbers beside), found by
name as ablations are."""


def ablation_names() -> list[str]:
    return sorted(p.stem for p in ABLATIONS_DIR.glob("*.yaml"))


def study_names() -> list[str]:
    return sorted(p.stem for p in STUDIES_DIR.glob("*.yaml"))


def ablation_path(name: str) -> Path:
    """`name` of a shipped ablation (search_spaces/ablations/NAME.yaml) or study
    (search_spaces/studies/NAME.yaml), or a YAML path (as it is: its loader says if it cannot
    be read)."""
    if name.endswith((".yaml", ".yml")) or "/" in name:
        return Path(name)
    found = [d / f"{name}.yaml" for d in (ABLATIONS_DIR, STUDIES_DIR)]
    path = next((p for p in found if p.exists()), found[0])
    if not path.exists():
        studies = f" (studies: {', '.join(study_names())})" if study_names() else ""
        hint = did_you_mean(name, [*ablation_names(), *study_names()])
        if not hint and (here := Path(f"{name}.yaml")).is_file():
            hint = f" (for the file here, give its path: {here})"
        raise SpecError(
            None,
            "",
            f"unknown ablation {name!r}{hint}; allowed: {', '.join(ablation_names())}{studies}",
        )
    return path


def load_ablation(
    name: str,
    *,
    smoke: bool = False,
    budget: int | None = None,
    storage_path: str | None = None,
    overrides: Sequence[str | Override] = (),
) -> SweepSpec:
    """The ablation's spec (`SweepSpec.from_yaml`, the one loader); `smoke` applies its
    `smoke:` overrides, `budget` and `storage_path` override the file's, `overrides` its keys
    (`rlsweep.spec.overrides`: `--games`, `--seeds`, `key=value`)."""
    path = ablation_path(name)
    spec = SweepSpec.from_yaml(
        path, smoke=smoke, budget=budget, storage_path=storage_path, overrides=overrides
    )
    if not spec.variants:
        raise SpecError(str(path), "variants", "an ablation needs variants (its table's columns)")
    return spec


def ablation_of(experiment: str | Path) -> SweepSpec | None:
    """The spec of the ablation (or study) a local experiment dir holds; None for another sweep
    or a dir at a URI. `rlsweep ablate`, `resume` and `report` write its ablation.md."""
    from rlsweep.experiment.experiment_dir import sweep_spec
    from rlsweep.storage import is_uri

    if is_uri(str(experiment)) or not Path(experiment).is_dir():
        return None
    spec = sweep_spec(experiment)
    return spec if spec is not None and spec.variants else None


def write_ablation_table(
    spec: SweepSpec,
    experiment_dir: Path,
    n_resamples: int | None = None,
    prices: str | Path | None = None,
) -> Path:
    """report.md + plots via `rlsweep.results.report`, then ablation.md/.csv with the spec's
    columns, under report.md's note on short trials where it has one (what the trials ran, not
    which command wrote the table: `ablate`, `resume` and `report` write the same).

    n_resamples: bootstrap resamples (default: the report's); prices: the report's price table
    (default: the shipped one)."""
    from rlsweep.results import report, results, tables

    n = {"n_resamples": n_resamples} if n_resamples is not None else {}
    out = Path(experiment_dir) / "report"
    also = ["ablation.md", "ablation.csv"]
    report.build_report([experiment_dir], by=["variant"], out=out, prices=prices, also=also, **n)
    # Every variant of the spec, in its file's order ("—" where none finished), split further
    # where the trials of one variant differ (a `space:` beside the variants).
    exp = results.load_experiment([experiment_dir], by=["variant"], spec=spec)
    table = tables.score_table(exp, **n)
    head = f"# {spec.name}\n\n" + "".join(f"{line}\n" for line in report.notes(exp))
    (out / "ablation.md").write_text(head + table + _raw_sections(spec, exp, n_resamples))
    cols = ["game", "seed", "variant", "status", "env_steps", "test/return_norm"]
    cols += ["train/return_norm", "test/return", "train/return"]
    exp.final[[c for c in cols if c in exp.final]].to_csv(out / "ablation.csv", index=False)
    return out / "ablation.md"


def _raw_sections(spec: SweepSpec, exp: Experiment, n_resamples: int | None) -> str:
    """ablation.md's sections on final raw returns: beside the spec's published numbers, and
    the first variant (the table's first column) against each other one."""
    from rlsweep.results import tables

    n = tables.REPORT_RESAMPLES if n_resamples is None else n_resamples
    kw = {"n_resamples": n, "seed": 0}
    how = f"Percentile bootstrap, {n} resamples, seed 0; CIs from {tables.MIN_CI_RUNS} runs on."
    lines = [
        "",
        "## Raw returns" + (" beside published numbers" if spec.reference else ""),
        "",
        *tables.reference_table(exp, spec.reference, **kw),
        "",
        "Final raw returns of the finished trials (`train/return` on the training levels, "
        "`test/return` on unseen levels): mean over seeds [95% bootstrap CI], its runs and "
        "their mean env steps. " + how,
    ]
    if spec.reference:
        lines.append(
            "Published: a number as its source gives it (its ± and what that is, where said), "
            "with the env steps and runs it was measured at, on the row of the levels it was "
            "measured on; set beside rlsweep's, never averaged into it. (context): a number from "
            f"another setup, for scale. {tables.NOT_RUN}: a game this sweep did not run."
        )
    if len(exp.variants) > 1:
        x, others = exp.variants[0], exp.variants[1:]
        lines += [
            "",
            f"## Differences: {x} against each other variant",
            "",
            *tables.difference_table(exp, x, others, **kw),
            "",
            "Final raw returns, per game. mean(X) − mean(Y): X's and Y's runs resampled "
            "independently within the game (rliable's StratifiedIndependentBootstrap), 95% "
            "percentile CI; P(X > Y): the chance that a run of X beats a run of Y (ties count "
            "half), with its CI from the same resampling. " + how + " With fewer runs: the "
            "point estimate alone, and why; —: a variant has no finished run there.",
        ]
        lines += _so_far(exp, x, others, kw)
    return "\n".join(lines) + "\n"


def _so_far(exp: Experiment, x: str, others: Sequence[str], kw: dict) -> list[str]:
    """The differences of an unfinished ablation as they stand: each pair at the newest
    evaluation all its evaluated trials have reached (`Experiment.so_far`)."""
    from rlsweep.results import tables

    sections = []
    for y in others:
        if (found := exp.so_far([x, y])) is None:
            continue
        now, iteration = found
        steps = formatting.steps(now.final[M.ENV_STEPS].mean())
        sections += [
            "",
            f"### {x} − {y} at {steps} env steps (iteration {iteration:,})",
            "",
            *tables.difference_table(now, x, [y], **kw),
        ]
    if not sections:
        return []
    return [
        "",
        "## So far: the unfinished comparisons",
        "",
        f"Not every trial of {x} and the variant set against it has finished, so the "
        "differences above count only the finished ones. Here each pair's trials stand at "
        "the newest evaluation all of them that have evaluated have reached, their raw returns "
        "there compared as above: an interim read, which the final one replaces.",
        *sections,
    ]
