"""rlsweep.results.report: a golden table.md for a small fixed experiment, every file written, and a
folder of several sweeps (reported one by one, or pooled only where configs agree)."""

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

from rlsweep import metrics as M
from rlsweep.cli import main
from rlsweep.results.report import FILES, build_report

# (game, framestack, seed): final unseen-level score; None: the trial did not finish.
FINISHED = {
    ("coinrun", "none", 0): 0.2,
    ("coinrun", "none", 1): 0.4,
    ("coinrun", "gap", 0): 0.5,
    ("coinrun", "gap", 1): 0.5,
    ("coinrun", "stack", 0): 0.7,
    ("maze", "none", 0): 0.1,
    ("maze", "none", 1): 0.3,
    ("maze", "gap", 0): 0.6,
    ("maze", "gap", 2): 0.8,
}

GOLDEN = """\
| game | framestack=gap | framestack=none | framestack=stack |
| :--- | ---: | ---: | ---: |
| coinrun | 0.500 (2 runs: too few for a CI) | 0.300 (2 runs: too few for a CI) | 0.700 (1 run: \
too few for a CI) |
| maze | 0.700 (2 runs: too few for a CI) | 0.200 (2 runs: too few for a CI) | — |
| **IQM** | 0.550 (no CI: a game has < 3 runs) | 0.250 (no CI: a game has < 3 runs) | — |

Normalized return on unseen levels (`test/return_norm`) at the end of training; columns by \
`framestack`.
Cells: mean over seeds [95% bootstrap CI]; (n=k): fewer finished seeds than the fullest cell; \
(k runs: too few for a CI): fewer than 3 runs, the mean alone (a bootstrap of 2 runs that agree \
gives a CI of width 0); —: no finished seed.
IQM: interquartile mean of all seeds × games [95% CI, bootstrap stratified by game, where every \
game has 3+ runs]; — where a game has no finished seed.
Percentile bootstrap, 2000 resamples, seed 0. Counted: 9 finished trials; not counted: 1 ERROR, \
2 INCOMPLETE.
"""


def _trial(exp: Path, game: str, fs: str, seed: int, final: float, iters: int = 4) -> Path:
    d = exp / f"{game}_s{seed}_{fs}"
    d.mkdir(parents=True)
    params = {"game": game, "seed": seed, "framestack": fs, "lr": 5e-4, "total_env_steps": 4000}
    (d / "params.json").write_text(json.dumps(params))
    lines = []
    for i in range(1, iters + 1):
        test = final * i / 4
        r = {
            "training_iteration": i,
            M.ENV_STEPS: 1000 * i + seed,
            M.TRAIN_RETURN: 0.0,
            M.TRAIN_RETURN_NORM: test + 0.1 + 0.02 * seed,
            M.TEST_RETURN: 0.0,
            M.TEST_RETURN_NORM: test,
            M.GAP_NORM: 0.1,
            M.WALL_S: float(i),
            M.TEST_FRESH: i % 2 == 0,
        }
        lines.append(json.dumps(r))
    (d / "result.json").write_text("\n".join(lines) + "\n")
    return d


@pytest.fixture
def experiment(tmp_path) -> Path:
    exp = tmp_path / "results" / "syn"
    for (game, fs, seed), final in FINISHED.items():
        _trial(exp, game, fs, seed, final)
    # Not counted, with scores that would move their cells if they were averaged in.
    err = _trial(exp, "maze", "gap", 1, 9.0, iters=3)  # crashed, no retry finished it
    (err / "error.txt").write_text("Traceback (most recent call last):\nValueError: boom\n")
    _trial(exp, "coinrun", "stack", 1, 5.0, iters=2)  # interrupted half-way
    d = exp / "maze_s0_stack"  # not started
    d.mkdir()
    (d / "params.json").write_text(
        json.dumps({"game": "maze", "seed": 0, "framestack": "stack", "lr": 5e-4})
    )
    return exp


def test_golden_table(experiment, tmp_path):
    report = build_report([experiment], out=tmp_path / "out")
    assert (report.parent / "table.md").read_text() == GOLDEN


def test_every_file_is_written(experiment):
    report = build_report([experiment])
    out = experiment / "report"  # the default: DIR/report
    assert report == out / "report.md"
    for name in (*FILES, "scores.parquet"):
        assert (out / name).stat().st_size > 0, name
    for png in FILES:
        if png.endswith(".png"):
            assert (out / png).read_bytes()[:4] == b"\x89PNG"
    md = report.read_text()
    for png in ("learning_curves.png", "aggregates.png", "sample_efficiency.png"):
        assert f"]({png})" in md  # relative links
    assert GOLDEN.split("\n\n")[0] in md
    assert (
        "| syn | maze_s1_gap | framestack=gap | ERROR | 3 | 3,001 / 4,000 | ValueError: boom |"
        in md
    )
    assert "coinrun_s1_stack" in md and "maze_s0_stack" in md
    # A report dir inside the sweep dir is not mistaken for a trial on the next run.
    assert build_report([experiment]) == report


def test_cli(experiment, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["report", str(experiment), "--by", "lr", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    # A column holds one config: --by lr alone would pool the framestacks as seeds.
    assert "| game | lr=0.0005, framestack=gap | lr=0.0005, framestack=none |" in text
    assert "columns by `lr`, `framestack` (`framestack` added: trials differ in it" in text
    assert f"report: {out / 'report.md'}" in text
    assert main(["report", str(experiment), "--by", "nope", "--out", str(out)]) == 2
    assert "--by nope: not a parameter" in capsys.readouterr().err


def test_uncalibrated_mode_has_no_normalized_score_and_the_report_says_why(tmp_path):
    from rlsweep.results import results as R

    exp = tmp_path / "results" / "modes"
    for seed in (0, 1):
        _trial(exp, "maze", "none", seed, 0.5)
    # maze memory: one trial as older rlsweep recorded it (hard mode's constants borrowed), one
    # as it records now (NaN normalized scores, raw returns only).
    borrowed = _trial(exp / "memory", "maze", "none", 0, 0.9)
    nan = _trial(exp / "memory", "maze", "none", 1, 0.9)
    lines = [json.loads(ln) for ln in (nan / "result.json").read_text().splitlines()]
    for r in lines:
        r.update({M.TEST_RETURN: 7.0, M.TRAIN_RETURN_NORM: float("nan")})
        r.update({M.TEST_RETURN_NORM: float("nan"), M.GAP_NORM: float("nan")})
    (nan / "result.json").write_text("\n".join(map(json.dumps, lines)) + "\n")
    for d in (borrowed, nan):
        d.rename(exp / f"{d.name}_memory")
        params = json.loads((exp / f"{d.name}_memory" / "params.json").read_text())
        (exp / f"{d.name}_memory" / "params.json").write_text(
            json.dumps({**params, "distribution_mode": "memory"})
        )
    (exp / "memory").rmdir()
    for d in exp.iterdir():
        if not d.name.endswith("_memory"):
            params = json.loads((d / "params.json").read_text())
            (d / "params.json").write_text(json.dumps({**params, "distribution_mode": "easy"}))

    final = R.final_scores(R.load_curves(exp))
    memory = final[final["distribution_mode"] == "memory"]
    assert list(memory["status"]) == [R.TERMINATED, R.TERMINATED]  # NaN by design, no error
    for col in (M.TEST_RETURN_NORM, M.TRAIN_RETURN_NORM, M.GAP_NORM):
        assert memory[col].isna().all()  # never the borrowed constants
    assert memory[M.TEST_RETURN].notna().all()

    report = build_report([exp], out=tmp_path / "out")
    table = (report.parent / "table.md").read_text()
    note = (
        "no reference normalization constants for maze memory (train-procgen calibrates easy "
        "and hard only)"
    )
    assert table.startswith(
        "| game | distribution_mode=easy | distribution_mode=memory |\n"
        "| :--- | ---: | ---: |\n"
        "| maze | 0.500 (2 runs: too few for a CI) | — |\n"
    )
    assert "not counted: 2 TERMINATED in a mode without normalization constants." in table
    assert f"Not normalized (NaN, shown as —): {note}; raw returns" in table
    md = report.read_text()
    assert "| modes | maze_s1_none_memory | distribution_mode=memory | TERMINATED | 4 " in md
    assert md.count(f"| {note} |") == 2  # why each memory trial is not counted


def test_a_variant_without_a_score_keeps_its_column(tmp_path):
    """Every variant the sweep's spec runs has a column: "—" when all its trials are NaN
    (errored) or when none has a trial dir yet (an interrupted sweep's pending trials)."""
    from rlsweep.experiment.experiment_dir import SWEEP_FILE
    from rlsweep.spec.spec import SweepSpec

    exp = tmp_path / "results" / "syn"
    for game, seed in [("coinrun", 0), ("coinrun", 1), ("maze", 0), ("maze", 1)]:
        _trial(exp, game, "none", seed, 0.2 + 0.1 * seed)
        _trial(exp, game, "gap", seed, float("nan"))  # NaN where it evaluated: ERROR
    spec = SweepSpec(
        name="syn",
        games=["coinrun", "maze"],
        seeds=[0, 1],
        budget=16384,
        params={"lr": 5e-4},
        space={"framestack": ["none", "gap", "stack"]},  # stack: never started
    )
    (exp / SWEEP_FILE).write_text(spec.to_yaml())
    report = build_report([exp], out=tmp_path / "out")
    table = (report.parent / "table.md").read_text()
    assert table.startswith(
        "| game | framestack=gap | framestack=none | framestack=stack |\n"
        "| :--- | ---: | ---: | ---: |\n"
        "| coinrun | — | 0.250 (2 runs: too few for a CI) | — |\n"
        "| maze | — | 0.250 (2 runs: too few for a CI) | — |\n"
        "| **IQM** | — | 0.250 (no CI: a game has < 3 runs) | — |\n"
    )
    assert "not counted: 4 ERROR, 4 not started." in table  # stack's 4
    md = report.read_text()
    assert "Not aggregated (a game without finished runs): framestack=gap, framestack=stack" in md
    # How far it got: each trial's env steps (4,000 or 4,001) of the sweep's 12 x 16,384.
    assert "- `syn`: 8 of 12 trials (4 TERMINATED, 4 ERROR); 4 not started; 32k of 197k env " in md
    assert "steps (16%)\n" in md
    # A spec that does not describe the trials found (another grid) adds no column.
    other = SweepSpec(name="syn", budget=16384, space={"framestack": ["gap", "stack"]})
    (exp / SWEEP_FILE).write_text(other.to_yaml())
    report = build_report([exp], out=tmp_path / "o2")
    table = (report.parent / "table.md").read_text()
    assert table.startswith("| game | framestack=gap | framestack=none |\n")
    assert "- `syn`: 8 trials (4 TERMINATED, 4 ERROR)\n" in report.read_text()


# --- a folder of sweeps (issue 27): never pooled unless asked, and then only like trials ---

TINY = {"num_envs_per_env_runner": 16, "rollout_length": 16, "minibatch_size": 128}
"""256 env steps per iteration."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory, start_ray) -> Path:
    """Five sweeps of the fake trainable in one storage dir, as a user's results/ ends up:
    `grid` and `grid-again` the same spec under two names, `grid-seeds` the same grid on other
    seeds, `long` the same config at 6,144 env steps beside the others' 2,048, and an ablation
    (on leaper). Real Tune runs (~1 min on 2 busy cores): the files are the ones Tune writes."""
    from rlsweep.run.sweep import run_sweep
    from rlsweep.spec.spec import SweepSpec
    from rlsweep.testing import fake_trial

    root = tmp_path_factory.mktemp("results")
    grid = dict(games=["coinrun"], budget=2048, params=TINY, space={"entropy_coeff": [0.01, 0.02]})
    specs = [
        SweepSpec(name="grid", seeds=[0, 1], **grid),
        SweepSpec(name="grid-again", seeds=[0, 1], **grid),
        SweepSpec(name="grid-seeds", seeds=[2, 3], **grid),
        SweepSpec(name="long", seeds=[0, 1], budget=6144, params={**TINY, "entropy_coeff": 0.01}),
        SweepSpec(
            name="ablation",
            games=["leaper"],
            seeds=[0, 1],
            budget=1024,
            params=TINY,
            variants={"No Stack": {"framestack": "none"}, "Gap": {"framestack": "gap"}},
        ),
    ]
    with start_ray(2):
        for spec in specs:
            spec.storage_path = str(root)
            run_sweep(spec, trainable=fake_trial, num_cpus=2)
    return root


def _iqm_row(table: str) -> str:
    return next(line for line in table.splitlines() if line.startswith("| **IQM** |"))


def test_a_folder_of_sweeps_is_reported_sweep_by_sweep(folder, tmp_path):
    report = build_report([folder], out=tmp_path / "out", n_resamples=200)
    out = report.parent
    names = ["ablation", "grid", "grid-again", "grid-seeds", "long"]
    assert sorted(d.name for d in out.iterdir() if d.is_dir()) == names
    headers = {
        "ablation": "| game | No Stack | Gap |",  # the spec's order
        "grid": "| game | entropy_coeff=0.01 | entropy_coeff=0.02 |",
        "grid-again": "| game | entropy_coeff=0.01 | entropy_coeff=0.02 |",
        "grid-seeds": "| game | entropy_coeff=0.01 | entropy_coeff=0.02 |",
        "long": "| game | all |",
    }
    index = report.read_text()
    for name in names:
        table = (out / name / "table.md").read_text()
        assert table.splitlines()[0] == headers[name]
        assert "nan" not in table and "—" not in _iqm_row(table)
        # 2 seeds in every cell: nothing pooled across sweeps, nothing missing.
        assert "(n=" not in table.split("\n\n")[0] and "—" not in table.split("\n\n")[0]
        assert (out / name / "report.md").exists() and f"({name}/report.md)" in index
        assert table in index and table in (out / "table.md").read_text()
    assert "- `grid-again` repeats 4 trials of `grid` (same config and seed)" in index


def test_pooled_only_where_configs_agree_except_seed(folder, tmp_path, capsys):
    out = tmp_path / "pooled"
    assert main(["report", str(folder), "--pool", "--out", str(out), "--resamples", "200"]) == 0
    printed = capsys.readouterr()
    # grid-again ran grid's configs with grid's seeds: counted once, and said so.
    assert printed.err.startswith(
        "rlsweep: warning: 4 trial(s) repeat another trial's config and seed and are counted "
        "once, not as more seeds: grid-again/coinrun_s0_"
    )
    # The ablation ran other games: a report of its own, as aggregates need the same games.
    assert sorted(d.name for d in out.iterdir() if d.is_dir()) == ["coinrun", "leaper"]
    leaper = (out / "leaper" / "table.md").read_text()
    assert leaper.splitlines()[0] == "| game | No Stack | Gap |"

    table = (out / "coinrun" / "table.md").read_text()
    assert table in printed.out
    lines = table.splitlines()
    assert lines[0] == (
        "| game | entropy_coeff=0.01, total_env_steps=2048 | entropy_coeff=0.01, "
        "total_env_steps=6144 | entropy_coeff=0.02, total_env_steps=2048 |"
    )
    final = pd.read_csv(out / "coinrun" / "final.csv")
    cells = [c.strip() for c in lines[2].split("|")[2:-1]]
    for cell, (ec, budget, sweeps) in zip(
        cells,
        [
            (0.01, 2048, ["grid", "grid-seeds"]),
            (0.01, 6144, ["long"]),
            (0.02, 2048, ["grid", "grid-seeds"]),
        ],
        strict=True,
    ):
        runs = final[
            (final["entropy_coeff"] == ec)
            & (final["total_env_steps"] == budget)
            & final["sweep"].isin(sweeps)
        ]
        assert len(runs) == 4 if budget == 2048 else 2
        mean = f"{runs[M.TEST_RETURN_NORM].mean():.3f}"
        # 2 runs (6,144 env steps): the mean alone, too few for a CI (issue 40)
        few = budget == 6144
        assert cell == f"{mean} (2 runs: too few for a CI)" if few else cell.startswith(f"{mean} [")
    assert "—" not in _iqm_row(table) and "nan" not in table
    assert "columns by `entropy_coeff`, `total_env_steps` (`total_env_steps` added" in table
    assert "Counted: 10 finished trials; not counted: 4 repeating a counted trial's" in table
    md = (out / "coinrun" / "report.md").read_text()
    assert md.count("(same config and seed): counted once |") == 4
    assert "| grid-again | coinrun_s0_" in md and "| repeats grid/coinrun_s0_" in md


def test_scores_csv_holds_each_score_where_it_was_measured(experiment, tmp_path):
    """Rows between evaluations keep their env steps and times, not the carried scores."""
    report = build_report([experiment], out=tmp_path / "out", n_resamples=200)
    scores = pd.read_csv(report.parent / "scores.csv")
    fresh = scores[M.TEST_FRESH].astype(bool)
    done = scores["status"] == "TERMINATED"
    evaluated = [M.TRAIN_RETURN, M.TRAIN_RETURN_NORM, M.TEST_RETURN_NORM, M.GAP_NORM]
    assert scores.loc[~fresh, evaluated].isna().all().all()
    assert scores.loc[fresh & done, evaluated].notna().all().all()
    assert scores.loc[~fresh & (scores["iteration"] > 0), M.WALL_S].notna().all()


def _add_to_rows(trial_dir: Path, figures: dict, first: dict | None = None) -> None:
    """`figures` in every row of a trial's result.json (`first` over them in its first row)."""
    path = trial_dir / "result.json"
    rows = [{**json.loads(line), **figures} for line in path.read_text().splitlines()]
    rows[0] |= first or {}
    path.write_text("\n".join(map(json.dumps, rows)) + "\n")


def test_the_memory_section_gives_each_sweeps_peaks_and_gpu_columns_for_gpu_trials(
    experiment, tmp_path
):
    """Trials that reported no memory figure (before 2026-11-30): no section. CPU trials'
    host peaks: the host's columns alone. GPU trials: their GPU's columns beside, each figure
    the largest over a trial's processes (a retried trial's first peaked higher)."""
    assert "## Memory" not in build_report([experiment], out=tmp_path / "none").read_text()
    for path in experiment.glob("*/result.json"):  # 11 trials reported (one never did)
        first = {M.HOST_RSS_PEAK_GIB: 2.0} if path.parent.name == "coinrun_s1_gap" else None
        _add_to_rows(path.parent, {M.HOST_RSS_PEAK_GIB: 1.0}, first)
    md = build_report([experiment], out=tmp_path / "cpu").read_text()
    memory = md[md.index("## Memory") :]
    assert "| sweep | trials | host, median | host, max |\n" in memory
    assert "| syn | 11 | 1.00 | 2.00 |\n" in memory and "GPU" not in memory.split("\n\n")[1]
    for name, reserved in (("coinrun_s0_gap", 7.5), ("coinrun_s1_gap", 8.1)):
        gpu = {M.GPU_RESERVED_PEAK_GIB: reserved, M.GPU_ALLOCATED_PEAK_GIB: 6.0}
        first = (
            {M.GPU_RESERVED_PEAK_GIB: 9.0, M.HOST_RSS_PEAK_GIB: 2.0} if reserved == 8.1 else None
        )
        _add_to_rows(experiment / name, {**gpu, M.GPU_LIMIT_GIB: 9.2}, first)
    md = build_report([experiment], out=tmp_path / "gpu").read_text()
    assert "| syn | 11 | 1.00 | 2.00 | 2 | 9.2 | 8.25 | 9.00 | 6.00 |" in md  # 7.5 and 9.0


def test_the_runs_section_says_where_and_how_long_each_run_and_trial_ran(experiment, tmp_path):
    """From runs.jsonl (a time-limited run on one GPU node, a resume on another, killed) and
    each trial's `perf/device` (a trial resumed on the other node says both): each start's
    machine, limit, wall time and end; the plan against the real wall time; per trial its wall
    time, env steps/s, share evaluating and devices. A dir without runs.jsonl: trials only."""
    md = build_report([experiment], out=tmp_path / "none").read_text()
    trials = _section(md, "Runs and wall time")
    assert "**Plan**" not in md and len(trials) == 12  # every trial dir, in Tune's order
    machine = {"cpus": 16, "gpus": 1, "cpu_model": "AMD EPYC 9454", "time_limit_s": 555}
    plan = {"box": "16 CPUs, 1 GPU", "concurrent": 6, "est_wall_s": 4620.0}
    plan |= {"longest_trial_s": 2460.0, "longest_eval_s": 1320.0, "eval_unmeasured": True}
    plan |= {"eval_limit": 6000}
    lines = [
        {"event": "start", "at": "2026-11-28T10:00:03+00:00", "command": "run", "host": "a"}
        | machine
        | {"gpu_types": ["H100"], "plan": plan},
        {"event": "end", "at": "2026-11-28T10:09:10+00:00", "outcome": "time limit 9m15s"}
        | {"wall_s": 547.2},
        {"event": "start", "at": "2026-11-29T11:00:00+00:00", "command": "resume", "host": "b"}
        | machine
        | {"gpu_types": ["H200"], "plan": None},
    ]
    (experiment / "runs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    for path in experiment.glob("*/result.json"):  # a quarter of each trial's time evaluating
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for i, r in enumerate(rows):
            r[M.EVAL_S] = 0.25 * r[M.WALL_S]
            if path.parent.name == "coinrun_s0_gap":  # resumed on another node
                r[M.DEVICE] = "NVIDIA H100 80GB HBM3" if i < 2 else "NVIDIA H200"
        path.write_text("\n".join(map(json.dumps, rows)) + "\n")

    md = build_report([experiment], out=tmp_path / "runs").read_text()
    starts = _section(md, "Runs and wall time")[:2]
    assert starts == [
        "| 1 | 2026-11-28 10:00:03 | run | a | 16 (AMD EPYC 9454) | 1 (H100) | 9m15s | 9m07s | "
        "time limit 9m15s |",
        "| 2 | 2026-11-29 11:00:00 | resume | b | 16 (AMD EPYC 9454) | 1 (H200) | 9m15s | ? | "
        "no end recorded (killed?) |",
    ]
    assert (
        "**Plan** (`rlsweep plan` at its first run, on 16 CPUs, 1 GPU, 6 trials at a time): "
        "1h17m, its longest trial 41m00s (evaluating 22m00s, each to the 6,000-step time limit, "
        "at the CPU rate: unmeasured on a GPU). **Real:** 9m07s of wall time over 2 runs (1 "
        "without a recorded end, not counted), 9 of 12 trials finished; the longest trial 4s "
        "(evaluating 1s)."
    ) in md
    (resumed,) = [r for r in _section(md, "Runs and wall time") if "coinrun_s0_gap" in r]
    assert resumed == (  # its game too: the fixture's trials play two
        "| coinrun_s0_gap | coinrun | framestack=gap | 0 | TERMINATED | NVIDIA H100 80GB HBM3, "
        "then NVIDIA H200 | 4,000 | 4s | 1,000 | 25% |"
    )


# --- two kinds of report (issue 41): an ablation compares, a search ranks -----------------


def test_an_ablation_says_what_it_is_and_that_its_trials_are_short(experiment, tmp_path):
    """The fixture's trials run 4,000 env steps: the report says at its top that such scores
    are typically a near-random policy's (issue 40); its kind, and why, come next."""
    md = build_report([experiment], out=tmp_path / "out", n_resamples=200).read_text()
    short = md.index("> **Short trials**: none ran more than 4,002 env steps.")
    kind = md.index("**An ablation's report**: 3 variants, compared with each other (by ")
    assert short < kind < md.index("## Unseen-level score")
    assert "Computed among every variant that ran every game (2)." in md
    assert "search_params.png" not in md


def _levels_experiment(exp: Path, trials: list[tuple[str, str, int | None]]):
    """Two seeds of each (game, distribution_mode, num_levels), loaded as a report loads them."""
    from rlsweep.results import results as R

    for game, mode, levels in trials:
        for seed in (0, 1):
            d = _trial(exp, game, f"{mode}{levels}", seed, 0.3)
            params = json.loads((d / "params.json").read_text())
            params.update(distribution_mode=mode, num_levels=levels)
            (d / "params.json").write_text(json.dumps(params))
    return R.experiment(R.load_curves(exp), [exp])


def test_the_top_says_how_every_score_was_measured_each_setting_that_differs_with_each_value():
    from types import SimpleNamespace

    from rlsweep.results.report import setup_note

    final = pd.DataFrame(
        {
            # None: a trial that did not record it (a cell index alone), left out
            "game": ["bigfish", "bigfish", "coinrun", None, "maze"],
            "distribution_mode": ["easy", "easy", "hard", "easy", None],
            "num_levels": [None, 100, None, None, None],  # None: the mode's default, 200 or 500
            "start_level": [0, 1000, 0, 0, 0],
            "eval_episodes": [32, 32, 8, 32, 32],
            "eval_interval": [10] * 5,
            "total_env_steps": [4_000_000] * 5,
        }
    )

    def note(final: pd.DataFrame, counted: pd.DataFrame | None = None) -> str:
        exp = SimpleNamespace(final=final, counted=final.iloc[:0] if counted is None else counted)
        (line, blank) = setup_note(exp)
        assert blank == ""
        return line

    assert note(final) == (
        "**How scores are measured**: trained on easy mode, 200 levels (level seeds 0-199) or "
        "easy mode, 100 levels (level seeds 1000-1099) or hard mode, 500 levels (level seeds "
        "0-499), scored there (`train/`) and on unseen levels (`test/`: procgen's whole level "
        "distribution, `num_levels: 0`, the training levels among them); an evaluation plays "
        "one episode in each of 32 or 8 envs per split, actions sampled, every 10 iterations "
        "and at the end, and a final score is the last one's mean; 4,000,000 env steps per "
        "trial; `_norm` = (R − min) / (max − min), with train-procgen's (min, max) (Cobbe et "
        "al. 2019): bigfish easy (1, 40), coinrun hard (5, 10)."
    )
    # The counted trials' settings, where any is counted: not a crashed trial's.
    assert "each of 8 envs" in note(final, counted=final.iloc[[2]])
    exploring = final.iloc[[2]].assign(distribution_mode="exploration")
    assert "trained on exploration mode's one fixed level, scored there (`train/`) and on " in (
        note(exploring)
    )
    assert "on those same levels again (`test/`: they have no unseen level)" in note(exploring)
    assert "on unseen levels where a trial has any" in note(pd.concat([final, exploring]))
    partial = final.drop(columns="eval_interval")
    assert setup_note(SimpleNamespace(final=partial, counted=partial)) == []


def test_trials_without_unseen_levels_are_named_at_the_top(tmp_path):
    """A trial on every level (num_levels 0) or in exploration mode never meets a level it did
    not train on: the report's top says its unseen-level scores are not a test of generalization
    (before the tables that call them unseen); level splits say nothing."""
    from rlsweep.results.report import no_unseen_levels_note

    split = _levels_experiment(
        tmp_path / "split", [("coinrun", "easy", 200), ("maze", "hard", None)]
    )
    assert no_unseen_levels_note(split) == []
    mixed = [("coinrun", "easy", 0), ("coinrun", "easy", 200), ("maze", "exploration", None)]
    note = no_unseen_levels_note(_levels_experiment(tmp_path / "mixed", mixed))[0]
    assert note.startswith(
        "> **No unseen levels**: 4 of the 6 trials trained on every level (`num_levels: 0`) or "
        "played exploration mode (one fixed level per game). Their unseen-level (`test/`) scores"
    )
    every = tmp_path / "results" / "every"
    _levels_experiment(every, [("coinrun", "easy", 0), ("coinrun", "hard", 0)])
    md = build_report([every], out=tmp_path / "out", n_resamples=200).read_text()
    at = md.index("> **No unseen levels**: Every trial trained on every level (`num_levels: 0`).")
    assert md.index("> **Short trials**") < at < md.index("## Unseen-level score")


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from report_scale import write_search  # noqa: E402


def _section(md: str, title: str) -> list[str]:
    """The table rows (after the header and rule) of report.md's section `title`."""
    part = md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in part.splitlines() if line.startswith("| ")]
    return rows[2:]


def test_a_search_of_300_trials_is_ranked(tmp_path, monkeypatch):
    """100 sampled configurations x 3 seeds, written as Tune writes them (the benchmark's
    `write_search`): the report is a search's, ranked. Its parts: the top 10 with a CI each
    (the seeds repeat), score against each searched hyperparameter and the search's history
    (Optuna's figures), importances; P(X > Y) among the top 5 only; no figure taller than a
    page."""
    from PIL import Image

    from rlsweep.results import plots
    from rlsweep.results.report import PAIRWISE_TOP, SEARCH_FILES, TOP

    exp = write_search(tmp_path, 300, seeds=(0, 1, 2))
    drawn = {}  # the study the history is drawn from, then drawn as the report draws it
    history = plots.plot_search_history
    monkeypatch.setattr(
        plots,
        "plot_search_history",
        lambda study, path: history(drawn.setdefault("s", study), path),
    )
    report = build_report([exp], n_resamples=200)
    out, md = report.parent, report.read_text()
    # The search's figures and importances are of its configurations, scored as ranked: 100
    # points, not the 300 trials whose seeds score apart; its best is the top-ranked score.
    ranked = pd.read_csv(out / "ranking.csv")
    assert len(drawn["s"].trials) == 100
    assert drawn["s"].best_value == pytest.approx(ranked["score"].iloc[0])
    assert "`search`: from finished trials (100 configurations)." in md
    assert "by construction, not a finding" not in md  # its lr and gamma vary
    assert "winner's curse" not in md  # its seeds repeat
    assert (
        "**A search's report**: the spec samples `lr` (loguniform), `gamma` (uniform) with "
        "random search: 100 configurations." in md
    )
    top = _section(md, "Top configurations")
    assert len(top) == TOP and [r.split(" | ")[0] for r in top] == [f"| {i}" for i in range(1, 11)]
    scores = [float(r.split(" | ")[2]) for r in top]
    assert scores == sorted(scores, reverse=True)
    for row in top:  # lr=2.24e-4, gamma=0.998: 3 significant digits; a CI from 3 seeds
        config, ci, seeds = row.split(" | ")[1], row.split(" | ")[3], row.split(" | ")[4]
        assert re.fullmatch(r"gamma=0\.\d{1,3}, lr=\d(\.\d{1,2})?e-4", config), config
        assert re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]", ci) and seeds == "seeds 0, 1, 2"
    assert (out / "table.md").read_text().startswith("| rank | configuration | score |")
    assert len(pd.read_csv(out / "ranking.csv")) == 100
    assert ranked.columns.tolist() == ["variant", "score", "runs", "games", "seeds_run", "trials"]
    assert ranked["seeds_run"].iloc[0] == "0 1 2"  # which seeds, not how many
    assert len(_section(md, "Probability of improvement")) == PAIRWISE_TOP
    for title in ("Aggregates", "Generalization gap"):  # the top ones, and it says so
        assert md.split(f"## {title}\n\n", 1)[1].startswith(f"The top {TOP} configurations.")
        assert len(_section(md, title)) == TOP
    assert f"among the top {PAIRWISE_TOP} configurations only (of 100)" in md
    assert len(_section(md, "Aggregates")) == TOP
    assert _section(md, "Hyperparameter importance")  # as an ablation's: fANOVA
    for name in (*FILES, *SEARCH_FILES, "importance.png"):
        assert (out / name).stat().st_size > 0, name
        if name.endswith(".png"):
            with Image.open(out / name) as im:
                assert im.size[1] <= plots.PAGE_HEIGHT * plots.DPI, name
            assert f"]({name})" in md or name in ("importance.png",)
    assert "the other 90 in grey" in md
    # Past TRIAL_ROWS trials, their wall times are summed up by device, not listed one by one.
    (by_device,) = _section(md, "Runs and wall time")
    assert by_device.startswith("| ? | 300 | ")


def test_a_search_of_single_runs_says_its_best_reads_high(tmp_path):
    """The best of many single-seed runs is picked by luck too: said under the ranking."""
    md = build_report([write_search(tmp_path, 12)], n_resamples=100).read_text()
    assert "the best of 12 configurations, each run once, is chosen by its luck" in md


def test_a_searched_parameter_that_took_one_value_is_said_to_have_no_importance(tmp_path):
    """fANOVA gives 0 to a parameter that never varied among the configurations counted (an
    interrupted search whose finished trials all drew one gamma): the report says so, lest
    0 read as "gamma does not matter"."""
    from rlsweep.spec.spec import TRIAL_FILE

    exp = write_search(tmp_path, 12)
    for d in exp.iterdir():
        for name in (TRIAL_FILE, "params.json"):
            if (d / name).exists():
                config = json.loads((d / name).read_text())
                (d / name).write_text(json.dumps({**config, "gamma": 0.99}))
    out = build_report([exp], n_resamples=200)
    md = out.read_text()
    final = pd.read_csv(out.parent / "final.csv")  # less what no trial read: DQN's, V-trace's
    assert {"lr", "gamma", "clip_param"} <= set(final) and "replay_capacity" not in final
    assert "vtrace_clip_rho" not in pd.read_csv(out.parent / "scores.csv")
    assert (
        "`search`: `gamma` took one value in the configurations counted here: its importance "
        "is 0 by construction, not a finding." in md
    )


def test_a_gpu_trial_is_priced_by_its_share_of_the_instances_gpus(tmp_path):
    """One GPU of a g5.xlarge (4 vCPUs, 1 GPU) for an hour: the whole instance's hour, not the
    quarter its one CPU would bill."""
    from rlsweep.experiment.experiment_dir import RUN_FILE
    from rlsweep.plan.cost import load_prices
    from rlsweep.results.report import cost_section
    from rlsweep.results.results import Experiment
    from rlsweep.results.tables import usd_text

    d = tmp_path / "gpu"
    d.mkdir()
    (d / RUN_FILE).write_text(json.dumps({"instance_type": "g5.xlarge", "spot": False}))
    final = pd.DataFrame(
        [{"sweep": "gpu", "num_cpus": 1, "num_env_runners": 0, "num_gpus": 1, M.WALL_S: 3600.0}]
    )
    exp = Experiment(final, final, ["variant"], [], ["coinrun"])
    hourly = load_prices()["g5.xlarge"].on_demand
    row = f"| gpu | g5.xlarge (on-demand) | 1 | {usd_text(hourly)} | {usd_text(hourly)} |"
    assert row in cost_section([d], exp)
