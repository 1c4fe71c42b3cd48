"""rlsweep.ablate: named ablations, their smoke runs and the write-up-style table."""

import tomllib
from pathlib import Path

import pytest

from rlsweep.ablate import (
    ABLATIONS_DIR,
    SMOKE_NOTE,
    ablation_names,
    ablation_path,
    load_ablation,
    write_ablation_table,
)
from rlsweep.spec import SpecError, data_dir

ROOT = Path(__file__).resolve().parents[1]


def test_names_and_paths_resolve(tmp_path):
    assert ABLATIONS_DIR == ROOT / "search_spaces" / "ablations"
    assert "augmentations" in ablation_names()
    assert ablation_path("model") == ABLATIONS_DIR / "model.yaml"
    with pytest.raises(SpecError, match=r"unknown ablation 'augs'; allowed: algorithm, augment"):
        ablation_path("augs")
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: plain\n")
    with pytest.raises(SpecError, match=r"plain.yaml: variants: an ablation needs variants"):
        load_ablation(str(plain))


def test_smoke_and_overrides_go_through_the_one_loader(tmp_path):
    full = load_ablation("augmentations")
    smoke = load_ablation("augmentations", smoke=True, budget=2048, storage_path=str(tmp_path))
    assert full.num_trials == 16 * 3 * 7 and full.smoke  # the smoke section is kept, validated
    assert (smoke.name, smoke.games, smoke.budget) == (
        "ablation-augmentations-smoke",
        ["leaper"],
        2048,
    )
    assert smoke.storage_path == str(tmp_path) and list(smoke.variants) == list(full.variants)
    assert smoke.params["distribution_mode"] == "easy"  # params merge with the smoke's


def test_ablations_ship_in_the_wheel_like_baselines(tmp_path, monkeypatch):
    """pyproject installs both under <prefix>/share/rlsweep/, where data_dir looks when the
    package has no checkout beside it."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    files = data["data-files"]
    assert files["share/rlsweep/baselines"] == ["baselines/*.yaml"]
    assert files["share/rlsweep/ablations"] == ["search_spaces/ablations/*.yaml"]
    installed = tmp_path / "share" / "rlsweep" / "ablations"
    installed.mkdir(parents=True)
    monkeypatch.setattr("sys.prefix", str(tmp_path))
    assert data_dir("no-such-checkout/ablations") == installed
    assert data_dir("search_spaces/ablations") == ABLATIONS_DIR  # a checkout wins


def test_ablation_table_has_the_write_up_layout(tmp_path):
    """`rlsweep ablate NAME --smoke` end to end on the fake trainable (real trials: `make
    demo`-like time; see the README). Ray starts for this test only (~10 s)."""
    import ray

    from rlsweep.sweep import run_sweep
    from rlsweep.testing import fake_trial

    spec = load_ablation("augmentations", smoke=True, storage_path=str(tmp_path))
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        result = run_sweep(spec, trainable=fake_trial, num_cpus=2)
    finally:
        ray.shutdown()
    note = SMOKE_NOTE.format(budget=spec.budget)
    table = write_ablation_table(spec, result.path, n_resamples=200, note=note).read_text()
    lines = table.splitlines()
    assert lines[0] == "# ablation-augmentations-smoke" and lines[2] == note
    assert "1,024 env steps per trial is far too few to learn" in note
    assert lines[4] == (
        "| game | No Augs | All Augs | Flip | Rotate | Crop Resize | Translate | Pad Crop |"
    )
    assert lines[6].startswith("| leaper | ")
    assert (result.path / "report" / "ablation.csv").exists()
    assert (result.path / "report" / "report.md").exists()
