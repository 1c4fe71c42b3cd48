"""rlsweep.results.ablate: named ablations, their smoke runs and the write-up-style table."""

import tomllib
from pathlib import Path

import pytest

from rlsweep.results.ablate import (
    ABLATIONS_DIR,
    STUDIES_DIR,
    ablation_names,
    ablation_path,
    load_ablation,
    study_names,
    write_ablation_table,
)
from rlsweep.spec.spec import SpecError, data_dir

ROOT = Path(__file__).resolve().parents[1]


def test_names_and_paths_resolve(tmp_path):
    assert ABLATIONS_DIR == ROOT / "search_spaces" / "ablations"
    assert "augmentations" in ablation_names()
    assert ablation_path("model") == ABLATIONS_DIR / "model.yaml"
    with pytest.raises(SpecError, match=r"unknown ablation 'augs'; allowed: algorithm, augment"):
        ablation_path("augs")
    with pytest.raises(SpecError, match=r"'reward_shapin' \(did you mean 'reward_shaping'\?\)"):
        ablation_path("reward_shapin")
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: plain\n")
    with pytest.raises(SpecError, match=r"plain.yaml: variants: an ablation needs variants"):
        load_ablation(str(plain))


def test_a_missing_file_is_said_to_be_missing_and_a_file_named_as_an_ablation_is_pointed_to(
    tmp_path, monkeypatch
):
    for path in (str(tmp_path / "widht.yaml"), f"{tmp_path}/width"):
        with pytest.raises(SpecError, match=r"cannot read: No such file or directory"):
            load_ablation(path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "width.yaml").write_text("name: width\n")
    with pytest.raises(
        SpecError, match=r"'width' \(for the file here, give its path: width.yaml\)"
    ):
        ablation_path("width")


def test_the_pooling_study_is_found_by_name_and_asks_issue_38s_question():
    from rlsweep.plan.plan import make_plan

    assert STUDIES_DIR == ROOT / "search_spaces" / "studies" and "pooling-bigfish" in study_names()
    assert ablation_path("pooling-bigfish") == STUDIES_DIR / "pooling-bigfish.yaml"
    with pytest.raises(SpecError, match=r"unknown ablation 'pool'; .* \(studies: pooling-bigfish"):
        ablation_path("pool")
    spec = load_ablation("pooling-bigfish")
    assert (spec.extends, spec.games, spec.seeds, spec.budget) == (
        "lars12llt",
        ["bigfish"],
        [0, 1, 2],
        4_000_000,
    )
    assert list(spec.variants) == ["Avg Pool", "No Pool", "Avg Pool fp32"]
    pool, no_pool, fp32 = spec.trials()[:3]
    assert (pool.global_pool, no_pool.global_pool, fp32.global_pool) == (True, False, True)
    assert (pool.precision, fp32.precision) == ("auto", "fp32")  # auto: bf16 on a GPU
    assert (pool.distribution_mode, pool.num_levels) == ("easy", 200)
    # Curves: an evaluation every ~500k env steps (issue 38), 8 in all with the last at 4M.
    every = pool.eval_interval * pool.effective_train_batch_size
    assert every <= 505_000 and pool.total_env_steps // every + 1 >= 8
    published = {(r.variant, r.value, r.budget, r.seeds) for r in spec.reference}
    assert {("Avg Pool", 17.7, 4_000_000, 1), ("No Pool", 6.6, 4_000_000, 1)} <= published
    assert (None, 16.46, 25_000_000, 3) in published
    smoke = load_ablation("pooling-bigfish", smoke=True)
    assert list(smoke.variants) == list(spec.variants) and smoke.reference == spec.reference
    assert make_plan(smoke, cpus=2).est_wall_s < 240  # ~1 min measured on 2 cores


def test_the_logs_replay_is_the_pooling_study_in_the_pairs_own_setup():
    """pooling-bigfish-logs asks LOGS.md's pair again in the setup LARS12llt's history gives
    it (issue 38's item 6: the setups' part in a gap, apart from rlsweep's): its Avg Pool and
    No Pool trials are pooling-bigfish's but for exactly these settings."""
    from rlsweep.plan.plan import make_plan

    study, replay = load_ablation("pooling-bigfish"), load_ablation("pooling-bigfish-logs")
    assert "pooling-bigfish-logs" in study_names() and list(replay.variants) == [
        "Avg Pool",
        "No Pool",
    ]
    assert (replay.games, replay.seeds, replay.budget) == (study.games, study.seeds, study.budget)
    pair_setup = {
        "num_levels": 0,
        "framestack": "none",
        "widths": [16, 32, 64],
        "num_epochs": 2,
        "vf_loss_coeff": 1.0,
        "vf_clip_param": 10.0,
        "lr_schedule": [[0, 1e-4], [1_000_000, 5e-4], [8_000_000, 1e-4]],
    }
    for ours, theirs in zip(study.trials()[:2], replay.trials()[:2], strict=True):
        a, b = ours.to_dict(), theirs.to_dict()
        assert {k: b[k] for k in a if a[k] != b[k]} == pair_setup
    published = {(r.variant, r.value, r.budget) for r in replay.reference}
    assert {("Avg Pool", 17.7, 4_000_000), ("No Pool", 6.6, 4_000_000)} <= published
    assert make_plan(load_ablation("pooling-bigfish-logs", smoke=True), cpus=2).est_wall_s < 240


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
    assert files["share/rlsweep/studies"] == ["search_spaces/studies/*.yaml"]
    installed = tmp_path / "share" / "rlsweep" / "ablations"
    installed.mkdir(parents=True)
    monkeypatch.setattr("sys.prefix", str(tmp_path))
    assert data_dir("no-such-checkout/ablations") == installed
    assert data_dir("search_spaces/ablations") == ABLATIONS_DIR  # a checkout wins


def test_ablation_table_has_the_write_up_layout(tmp_path, start_ray):
    """`rlsweep ablate NAME --smoke` end to end on the fake trainable (real trials: `make
    demo`-like time; see the README). Ray starts for this test only (~10 s)."""
    from rlsweep.run.sweep import run_sweep
    from rlsweep.testing import fake_trial

    spec = load_ablation("augmentations", smoke=True, storage_path=str(tmp_path))
    with start_ray(2):
        result = run_sweep(spec, trainable=fake_trial, num_cpus=2)
    table = write_ablation_table(spec, result.path, n_resamples=200).read_text()
    lines = table.splitlines()
    assert lines[0] == "# ablation-augmentations-smoke"
    # report.md's notes head it, whichever command wrote it: how its scores were measured,
    # and that its trials are short.
    report = (result.path / "report" / "report.md").read_text()
    assert lines[2].startswith("**How scores are measured**: trained on easy mode, 200 levels")
    assert lines[4].startswith("> **Short trials**: none ran more than 1,0")
    assert lines[2] in report and lines[4] in report
    assert lines[6] == (
        "| game | No Augs | All Augs | Flip | Rotate | Crop Resize | Translate | Pad Crop |"
    )
    assert lines[8].startswith("| leaper | ")
    assert (result.path / "report" / "ablation.csv").exists()
    assert "- `ablation.md`\n- `ablation.csv`\n" in report  # its list of the files beside it


# (variant, seed): final raw returns (training levels, unseen levels) on bigfish; the fp32
# variant's seed 2 never finished (its numbers would move every cell they entered).
RAW = {
    ("Avg Pool", 0): (16.0, 10.0),
    ("Avg Pool", 1): (18.0, 12.0),
    ("Avg Pool", 2): (20.0, 14.0),
    ("No Pool", 0): (5.0, 4.0),
    ("No Pool", 1): (6.0, 5.0),
    ("No Pool", 2): (7.0, 6.0),
    ("Avg Pool fp32", 0): (17.0, 11.0),
    ("Avg Pool fp32", 1): (19.0, 13.0),
}
STUDY = """\
name: study
games: [bigfish]
seeds: [0, 1, 2]
budget: 16384
params: {distribution_mode: easy}
variants:
  Avg Pool: {global_pool: true}
  No Pool: {}
  Avg Pool fp32: {global_pool: true, precision: fp32}
reference:
  - {game: bigfish, variant: Avg Pool, value: 17.7, split: train, budget: 4e6, seeds: 1,
     source: LOGS.md}
  - {game: bigfish, variant: No Pool, value: 6.6, split: train, budget: 4e6, seeds: 1,
     source: LOGS.md, note: without pooling}
  - {game: bigfish, value: 16.46, error: 2.71, split: train, budget: 25e6, seeds: 3,
     source: CleanRL, note: full level distribution}
"""


def _raw_trial(
    exp: Path,
    variant: str,
    seed: int,
    train: float,
    test: float,
    iters: int,
    rising: bool = False,
    **searched: float,
) -> None:
    """A trial dir of `iters` iterations of 4,096 env steps (4 finish its budget) that scores
    `train`, `test` at every one, or, `rising`, those times iteration / 4; `searched`: the
    values of a `space:` beside the variants that it ran."""
    import json

    from rlsweep import metrics as M

    name = [f"bigfish_s{seed}_{variant.replace(' ', '_')}", *map(str, searched.values())]
    d = exp / "_".join(name)
    d.mkdir(parents=True)
    params = {"game": "bigfish", "seed": seed, "variant": variant, "total_env_steps": 16384}
    params.update(searched)
    (d / "params.json").write_text(json.dumps({**params, "distribution_mode": "easy"}))
    rows = [
        {
            "training_iteration": i,
            M.ENV_STEPS: 4096 * i,
            M.TRAIN_RETURN: train * f,
            M.TRAIN_RETURN_NORM: train * f / 40,
            M.TEST_RETURN: test * f,
            M.TEST_RETURN_NORM: test * f / 40,
            M.GAP_NORM: (train - test) * f / 40,
            M.WALL_S: float(i),
            M.TEST_FRESH: True,
        }
        for i in range(1, iters + 1)
        for f in [i / 4 if rising else 1.0]
    ]
    (d / "result.json").write_text("\n".join(map(json.dumps, rows)) + "\n")


def test_ablation_md_sets_references_beside_raw_returns_and_gives_differences(tmp_path):
    """From result files written directly (no Ray): the published numbers sit in columns of
    their own, never in rlsweep's cells; the first variant against each other one, per levels."""
    from rlsweep.spec.spec import SweepSpec

    spec = SweepSpec.from_yaml_text(STUDY, source="study.yaml")
    exp = tmp_path / "study"
    for (variant, seed), (train, test) in RAW.items():
        _raw_trial(exp, variant, seed, train, test, iters=4)
    _raw_trial(exp, "Avg Pool fp32", 2, 99.0, 99.0, iters=2)  # interrupted half-way
    text = write_ablation_table(spec, exp, n_resamples=200).read_text()
    raw = text[text.index("## Raw returns beside published numbers") :]
    rows = [line.split(" | ") for line in raw.splitlines() if line.startswith("| bigfish")]
    by = {(r[1], r[2]): r for r in rows if r[3]}  # rlsweep's cell, once per variant and levels

    # rlsweep's mean over its own 3 runs (18), not pulled towards 17.7; the reference beside it.
    avg = by["Avg Pool", "training"]
    assert avg[3].startswith("18.000 [") and avg[4:9] == ["3", "16.4k", "17.7", "4M", "single run"]
    assert by["No Pool", "unseen"][3].startswith("5.000 [") and by["No Pool", "unseen"][6] == ""
    assert by["No Pool", "training"][9:] == ["LOGS.md", "without pooling |"]
    fp32 = by["Avg Pool fp32", "training"]
    assert fp32[3:5] == ["18.000 (2 runs: too few for a CI)", "2"]  # 99 never enters it
    (context,) = [r for r in rows if r[1] == "(context)"]
    assert context[3:6] == ["", "", ""] and context[6:9] == ["16.46 ± 2.71", "25M", "3 seeds"]

    diffs = text[text.index("## Differences: Avg Pool against each other variant") :]
    diffs = diffs[: diffs.index("## So far")]  # the interim read (next test) comes after
    d = {
        (r[1], r[2]): r[3:]
        for r in (line.split(" | ") for line in diffs.splitlines())
        if r[0] == "| bigfish"
    }
    assert set(d) == {
        (levels, f"Avg Pool − {y}")
        for levels in ("training", "unseen")
        for y in ("No Pool", "Avg Pool fp32")
    }
    pool, p_pool, n_pool = d["training", "Avg Pool − No Pool"]
    assert pool.startswith("12.000 [") and p_pool == "1.000 [1.000, 1.000]" and n_pool == "3, 3 |"
    low, high = map(float, pool.removeprefix("12.000 [").removesuffix("]").split(", "))
    assert 9.0 <= low < 12.0 < high <= 15.0
    assert d["unseen", "Avg Pool − Avg Pool fp32"] == [
        "0.000 (2 runs: too few for a CI)",
        "0.500 (2 runs: too few for a CI)",
        "3, 2 |",
    ]


def test_an_ablation_of_two_variants_gives_their_difference(tmp_path):
    """The commonest ablation, A against B: its one difference, per levels."""
    from rlsweep.spec.spec import SweepSpec

    two = STUDY.replace("  Avg Pool fp32: {global_pool: true, precision: fp32}\n", "")
    spec = SweepSpec.from_yaml_text(two, source="study.yaml")
    exp = tmp_path / "study"
    for (variant, seed), (train, test) in RAW.items():
        if variant != "Avg Pool fp32":
            _raw_trial(exp, variant, seed, train, test, iters=4)
    text = write_ablation_table(spec, exp, n_resamples=200).read_text()
    diffs = text[text.index("## Differences: Avg Pool against each other variant") :]
    rows = [line for line in diffs.splitlines() if line.startswith("| bigfish")]
    assert [r.split(" | ")[1:3] for r in rows] == [
        ["training", "Avg Pool − No Pool"],
        ["unseen", "Avg Pool − No Pool"],
    ]


def test_the_report_lists_an_ablations_variants_in_its_files_order(tmp_path):
    """report.md's columns and the plots' legends follow the spec the dir holds (Avg Pool, No
    Pool, Avg Pool fp32), as ablation.md's do, not the labels' alphabetical order."""
    from rlsweep.results import results

    exp = tmp_path / "study"
    for (variant, seed), (train, test) in RAW.items():
        _raw_trial(exp, variant, seed, train, test, iters=4)
    (exp / "sweep.yaml").write_text(STUDY)
    order = ["Avg Pool", "No Pool", "Avg Pool fp32"]
    assert results.load_experiment([exp]).variants == order
    report = (write_ablation_table(results.sweep_spec(exp), exp, n_resamples=200)).parent
    header = next(
        line for line in (report / "report.md").read_text().splitlines() if "| game" in line
    )
    assert header == "| game | " + " | ".join(order) + " |"
    # Without a spec the labels sort by value, as a search's do.
    (exp / "sweep.yaml").unlink()
    assert results.load_experiment([exp]).variants == sorted(order)


def test_an_unfinished_ablation_gives_its_differences_so_far_at_an_evaluation_all_reached(
    tmp_path,
):
    """While a study runs (a sitting stopped it), ablation.md's differences count only the
    finished trials; its "So far" section compares each pair where all its evaluated trials
    stand: here iteration 2, where No Pool's seed 2 stopped, with every trial's score of that
    iteration (half its final one), not of its last."""
    from rlsweep.spec.spec import SweepSpec

    spec = SweepSpec.from_yaml_text(STUDY, source="study.yaml")
    exp = tmp_path / "study"
    for (variant, seed), (train, test) in RAW.items():
        if variant != "Avg Pool fp32":  # not started: no pair with Avg Pool so far
            done = (variant, seed) != ("No Pool", 2)
            _raw_trial(exp, variant, seed, train, test, iters=4 if done else 2, rising=True)
    text = write_ablation_table(spec, exp, n_resamples=200).read_text()
    so_far = text[text.index("## So far: the unfinished comparisons") :]
    assert so_far.count("### ") == 1
    assert "### Avg Pool − No Pool at 8.19k env steps (iteration 2)" in so_far
    rows = {
        r[1]: r[2:]
        for r in (line.split(" | ") for line in so_far.splitlines())
        if r[0] == "| bigfish"
    }
    # At iteration 2, on training levels: Avg Pool 8, 9, 10 (final 16, 18, 20), No Pool 2.5, 3, 3.5.
    pair, diff, better, runs = rows["training"]
    assert pair == "Avg Pool − No Pool" and runs == "3, 3 |" and better == "1.000 [1.000, 1.000]"
    assert diff.startswith("6.000 [")
    assert rows["unseen"][1].startswith("3.500 [")  # (5, 6, 7) - (2, 2.5, 3)
    # The finished comparison above it: No Pool's two finished seeds at their final scores.
    diffs = text[text.index("## Differences") : text.index("## So far")]
    (final,) = [r for r in diffs.splitlines() if "| training | Avg Pool − No Pool" in r]
    assert "12.500 (2 runs: too few for a CI)" in final and final.endswith("| 3, 2 |")

    # Failed there, or finished, it is no longer on its way: the section is gone.
    import shutil

    (exp / "bigfish_s2_No_Pool" / "error.txt").write_text("RuntimeError: CUDA error\n")
    assert "## So far" not in write_ablation_table(spec, exp, n_resamples=200).read_text()
    shutil.rmtree(exp / "bigfish_s2_No_Pool")
    _raw_trial(exp, "No Pool", 2, 7.0, 6.0, iters=4, rising=True)
    assert "## So far" not in write_ablation_table(spec, exp, n_resamples=200).read_text()


def test_an_ablation_searched_beside_its_variants_gets_a_column_per_config(tmp_path):
    """Variants and a `space:` beside them: each column holds one config (`No Pool, lr=0.0005`),
    every finished trial is counted in one, and a published number of a variant that the
    columns split keeps a row of its own."""
    from rlsweep.spec.spec import SweepSpec

    spec = SweepSpec.from_yaml_text(
        STUDY.replace("  Avg Pool fp32: {global_pool: true, precision: fp32}\n", "")
        + "space:\n  lr: [1.0e-4, 5.0e-4]\n",
        source="study.yaml",
    )
    exp = tmp_path / "study"
    for (variant, seed), (train, test) in RAW.items():
        if variant != "Avg Pool fp32":
            for lr, more in ((1e-4, 0.0), (5e-4, 1.0)):
                _raw_trial(exp, variant, seed, train + more, test, iters=4, lr=lr)
    text = write_ablation_table(spec, exp, n_resamples=200).read_text()
    columns = [f"{v}, lr={lr}" for v in ("Avg Pool", "No Pool") for lr in ("0.0001", "0.0005")]
    assert "| game | " + " | ".join(columns) + " |" in text
    assert "Counted: 12 finished trials; not counted: none." in text
    raw = text[text.index("## Raw returns") : text.index("## Differences")]
    rows = [line.split(" | ")[1:6] for line in raw.splitlines() if line.startswith("| bigfish")]
    assert rows[:2] == [
        ["Avg Pool, lr=0.0001", "training", "18.000 [16.000, 20.000]", "3", "16.4k"],
        ["Avg Pool, lr=0.0001", "unseen", "12.000 [10.000, 14.000]", "3", "16.4k"],
    ]
    assert ["No Pool, lr=0.0005", "training", "7.000 [6.000, 8.000]", "3", "16.4k"] in rows
    assert rows[-3:] == [  # LOGS.md's numbers, each on its variant's own row; CleanRL's
        ["Avg Pool", "training", "", "", ""],
        ["No Pool", "training", "", "", ""],
        ["(context)", "training", "", "", ""],
    ]
    assert "| Avg Pool | training |  |  |  | 17.7 | 4M | single run | LOGS.md |" in raw
    diffs = text[text.index("## Differences: Avg Pool, lr=0.0001 against each other variant") :]
    assert "| bigfish | training | Avg Pool, lr=0.0001 − No Pool, lr=0.0001 | 12.000 [" in diffs
