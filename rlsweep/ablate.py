"""`rlsweep ablate NAME`: run a named ablation and write its table in a write-up's layout.

An ablation is a sweep spec in `search_spaces/ablations/NAME.yaml` whose `variants` are the
table's columns, plus a `smoke:` section of spec overrides that runs the whole machinery in
minutes (`--smoke`). The output, next to the sweep's results: `ablation.md` (rows = games,
columns = variants in the file's order, cells = normalized unseen-level score, mean ± CI over
seeds), `ablation.csv`, and the full report (`report.md`, plots) of `rlsweep report`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlsweep.spec import SpecError, SweepSpec, _numbers_from_strings, _read_yaml

ABLATIONS_DIR = Path(__file__).resolve().parent.parent / "search_spaces" / "ablations"


def ablation_names() -> list[str]:
    return sorted(p.stem for p in ABLATIONS_DIR.glob("*.yaml"))


def is_ablation(path: str | Path) -> bool:
    path = Path(path)
    raw = _read_yaml(path) if path.exists() else None
    return path.parent == ABLATIONS_DIR or (isinstance(raw, dict) and "smoke" in raw)


def load_ablation(
    name: str, *, smoke: bool = False, budget: int | None = None, storage_path: str | None = None
) -> SweepSpec:
    """The ablation's spec; `smoke` applies its smoke overrides (params merge, others replace)."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else ABLATIONS_DIR / f"{name}.yaml"
    if not path.exists():
        raise SpecError(
            None, "", f"unknown ablation {name!r}; allowed: {', '.join(ablation_names())}"
        )
    raw = _numbers_from_strings(_read_yaml(path))
    if not isinstance(raw, dict):
        raise SpecError(str(path), "", "an ablation is a mapping of spec keys")
    smoke_overrides: dict[str, Any] = raw.pop("smoke", {}) or {}
    if not raw.get("variants"):
        raise SpecError(str(path), "variants", "an ablation needs variants (its table's columns)")
    if smoke:
        if not isinstance(smoke_overrides, dict):
            raise SpecError(str(path), "smoke", "a mapping of spec overrides")
        for key, value in smoke_overrides.items():
            raw[key] = {**raw.get(key, {}), **value} if key == "params" else value
        raw["name"] = f"{raw.get('name', path.stem)}-smoke"
    if budget is not None:
        raw["budget"] = budget
    if storage_path is not None:
        raw["storage_path"] = storage_path
    return SweepSpec.from_dict(raw, source=str(path))


def write_ablation_table(spec: SweepSpec, experiment_dir: Path, n_resamples: int = 2000) -> Path:
    """report.md + plots via `rlsweep.report`, then ablation.md/.csv with the spec's columns."""
    from rlsweep import report

    out = experiment_dir / "report"
    report.build_report([experiment_dir], by=["variant"], out=out, n_resamples=n_resamples)
    exp = report.load([experiment_dir], by=["variant"])
    # Columns are the variants' own labels, in the file's order (not 'variant=...' sorted).
    for frame in (exp.final, exp.curves):
        frame["variant"] = frame["variant"].str.removeprefix("variant=")
    exp.variants = [v for v in spec.variants if v in set(exp.final["variant"])]
    table = report.score_table(exp, n_resamples=n_resamples)
    (out / "ablation.md").write_text(f"# {spec.name}\n\n{table}")
    cols = ["game", "seed", "variant", "status", "test/return_norm", "train/return_norm"]
    exp.final[[c for c in cols if c in exp.final]].to_csv(out / "ablation.csv", index=False)
    return out / "ablation.md"
