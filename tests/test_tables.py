"""rlsweep.results.tables: the numbers and markdown tables of a report, from hand-made frames."""

import re

import numpy as np
import pandas as pd
import pytest

from rlsweep import metrics as M
from rlsweep.results import stats as S
from rlsweep.results import tables as T
from rlsweep.results.results import TERMINATED, Experiment
from rlsweep.spec.spec import Reference, SweepSpec


def _experiment(runs: dict[tuple[str, str, int], tuple[float, float]]) -> Experiment:
    """(variant, game, seed) -> (train, test) normalized final scores, all TERMINATED."""
    final = pd.DataFrame(
        [
            {
                "sweep": "s",
                "trial_id": f"{v}_{g}_{s}",
                "game": g,
                "seed": s,
                "variant": v,
                "iteration": 4,
                M.ENV_STEPS: 4000,
                M.TRAIN_RETURN_NORM: train,
                M.TEST_RETURN_NORM: test,
                "status": TERMINATED,
                "error": "",
            }
            for (v, g, s), (train, test) in runs.items()
        ]
    )
    variants = sorted(final["variant"].unique())
    games = sorted(final["game"].unique())
    return Experiment(final.copy(), final, ["variant"], variants, games)


def test_gap_table_shows_the_ci_or_says_why_there_is_none():
    three = {
        ("A", "coinrun", s): (0.5 + 0.1 * s, 0.2 + 0.1 * s + 0.05 * (s == 2)) for s in range(3)
    }
    one = {("B", "coinrun", 0): (0.4, 0.3)}
    exp = _experiment({**three, **one})
    train, test = exp.scores("A", M.TRAIN_RETURN_NORM), exp.scores("A")
    gap = S.generalization_gap(train, test, n_resamples=200, seed=0)
    assert gap.has_ci and gap.low < gap.value < gap.high
    assert T.gap_table(exp, ["A", "B"], n_resamples=200) == [
        "| variant | train − test [95% CI] | runs |",
        "| --- | --- | --- |",
        f"| A | {gap.value:.3f} [{gap.low:.3f}, {gap.high:.3f}] | 3 |",
        "| B | 0.100 (no CI: a game has < 3 runs) | 1 |",
    ]
    # A training score missing for every run of some game (older trials): no row at all.
    exp.final.loc[exp.final["variant"] == "B", M.TRAIN_RETURN_NORM] = np.nan
    assert [r.split(" |")[0] for r in T.gap_table(exp, ["A", "B"], n_resamples=200)[2:]] == ["| A"]


def test_score_table_has_a_column_for_every_variant():
    exp = _experiment({("A", "coinrun", s): (0.5, 0.25 * (s + 1)) for s in range(3)})
    exp.variants = ["A", "B"]  # B: declared by the spec, no finished trial
    lines = T.score_table(exp, n_resamples=200).splitlines()
    assert lines[0] == "| game | A | B |"
    # [lo, hi] as the IQM's: a percentile interval of a few runs is rarely symmetric
    assert re.fullmatch(r"\| coinrun \| 0\.500 \[0\.\d{3}, 0\.\d{3}\] \| — \|", lines[2])
    assert lines[3].startswith("| **IQM** | 0.500 [") and lines[3].endswith(" | — |")


def test_a_cell_with_fewer_seeds_than_the_fullest_says_how_many():
    """(n=k) marks a cell whose CI stands on fewer finished seeds than the fullest cell's."""
    runs = {("A", "coinrun", s): (0.5, 0.1 * s) for s in range(4)}
    runs |= {("B", "coinrun", s): (0.5, 0.2 * s) for s in range(3)}
    row = T.score_table(_experiment(runs), n_resamples=200).splitlines()[2]
    a, b = row.split(" | ")[1:3]
    assert "(n=" not in a and b.endswith(" (n=3) |"), row


def test_two_runs_give_the_mean_alone_and_say_why():
    """Issue 40 (5): two seeds that agree gave "0.000 ± 0.000" and an IQM "CI" [0.000, 0.000]
    (a bootstrap over 2 runs is no CI). Below MIN_CI_RUNS runs a game, every table shows the
    estimate alone and says why; from 3 runs, the CI."""
    two = {("A", "coinrun", s): (0.5, 0.0) for s in range(2)}
    two |= {("B", "coinrun", s): (0.5, 0.1 * s) for s in range(3)}
    exp = _experiment(two)
    lines = T.score_table(exp, n_resamples=200).splitlines()
    assert lines[2].startswith("| coinrun | 0.000 (2 runs: too few for a CI) | 0.100 [0.")
    assert lines[3].startswith("| **IQM** | 0.000 (no CI: a game has < 3 runs) | 0.100 [0.")
    assert "[0.000, 0.000]" not in "\n".join(lines)
    aggs = T.aggregates(exp.all_scores(), n_resamples=200)
    assert not any(iv.has_ci for iv in aggs["A"].values())
    assert all(iv.has_ci for iv in aggs["B"].values())
    rows = T.improvement_table(exp, ["A", "B"], n_resamples=200)
    assert rows[2:] == [  # P alone, no "[x, y]", and why
        "| A |  | 0.167 (no CI: a game has < 3 runs) |",
        "| B | 0.833 (no CI: a game has < 3 runs) |  |",
    ]
    assert T.gap_table(exp, ["A"], n_resamples=200)[2] == (
        "| A | 0.500 (no CI: a game has < 3 runs) | 2 |"
    )
    # Straight from stats (rliable's rule, 2 runs) the same scores had a zero-width "CI".
    assert S.interval(exp.scores("A"), "iqm", n_resamples=200).has_ci


def test_improvement_table_is_pairwise():
    exp = _experiment(
        {
            **{("A", "coinrun", s): (1.0, 0.8 + 0.01 * s) for s in range(3)},
            **{("B", "coinrun", s): (1.0, 0.1 + 0.01 * s) for s in range(3)},
        }
    )
    rows = T.improvement_table(exp, ["A", "B"], n_resamples=200)
    assert rows == [
        "| X \\ Y | A | B |",
        "| --- | --- | --- |",
        "| A |  | 1.000 [1.000, 1.000] |",
        "| B | 0.000 [0.000, 0.000] |  |",
    ]


def test_runs_on_a_shared_grid():
    a = (np.array([0.0, 10.0, 20.0]), np.array([0.0, 1.0, 2.0]))
    b = (np.array([5.0, 15.0]), np.array([5.0, 6.0]))
    grid, values = T.on_grid([a, b], 3)
    np.testing.assert_allclose(grid, [5.0, 10.0, 15.0])  # only what both runs cover
    np.testing.assert_allclose(values, [[0.5, 5.0], [1.0, 5.5], [1.5, 6.0]])
    assert T.on_grid([a, (np.array([30.0, 40.0]), np.array([0.0, 0.0]))], 3) is None
    assert T.on_grid([(np.array([]), np.array([]))], 3) is None
    # One evaluation each, a few env steps apart (asynchronous sampling): one point, not None.
    grid, values = T.on_grid(
        [(np.array([1024.0]), np.array([0.1])), (np.array([1040.0]), np.array([0.3]))], 3
    )
    assert grid.tolist() == [1032.0] and values.tolist() == [[0.1, 0.3]]
    run = pd.DataFrame(
        {M.ENV_STEPS: [1.0, 2.0, 3.0], "y": [0.1, np.nan, 0.3], M.TEST_FRESH: [True, True, False]}
    )
    x, y = T.points(run, "y", fresh_only=False)
    assert x.tolist() == [1.0, 3.0] and y.tolist() == [0.1, 0.3]  # NaN points dropped
    x, _ = T.points(run, "y", fresh_only=True)
    assert x.tolist() == [1.0]


def test_runs_evaluated_at_the_same_iterations_keep_their_measured_points():
    """Seeds of one schedule evaluate at the same iterations, their env steps a few apart (a
    batch overshoots where an episode ends): their evaluations are the curve's points, as
    measured (the grid would cut the peak at 1,000k), at the seeds' mean env steps."""
    a = (np.array([500_100.0, 1_000_200.0, 1_500_300.0]), np.array([1.0, 9.0, 2.0]))
    b = (np.array([500_000.0, 1_000_000.0, 1_500_000.0]), np.array([3.0, 7.0, 4.0]))
    grid, values = T.on_grid([a, b], 100)
    assert grid.tolist() == [500_050.0, 1_000_100.0, 1_500_150.0]
    assert values.tolist() == [[1.0, 3.0], [9.0, 7.0], [2.0, 4.0]]
    # An evaluation more in one run (e.g. one that did not set the schedule): the grid.
    c = (np.array([250_000.0, 500_000.0, 1_000_000.0]), np.array([0.0, 3.0, 7.0]))
    grid, values = T.on_grid([a, c], 100)
    assert len(grid) == 100 and (grid[0], grid[-1]) == (500_100.0, 1_000_000.0)
    assert values[:, 0].max() < 9.0  # the peak is where the grid does not reach
    # A seed one evaluation behind: the curve ends where every seed got to.
    behind = (np.array([500_200.0, 1_000_100.0]), np.array([5.0, 8.0]))
    grid, values = T.on_grid([a, behind], 100)
    assert grid.tolist() == [500_150.0, 1_000_150.0]
    assert values.tolist() == [[1.0, 5.0], [9.0, 8.0]]


@pytest.mark.parametrize(
    "usd, text", [(1234.5, "$1,234.50"), (0.0001234, "$0.0001234"), (0.0, "$0.00")]
)
def test_usd_text(usd, text):
    assert T.usd_text(usd) == text


def test_a_search_is_ranked_in_one_pass_with_a_ci_where_seeds_repeat():
    runs = {("lr=1e-4", "coinrun", s): (0.5, 0.2 + 0.01 * (s % 9)) for s in (0, 10, 2)}
    runs |= {("lr=3e-4", "coinrun", 0): (0.5, 0.9), ("lr=5e-4", "coinrun", 0): (0.5, 0.1)}
    exp = _experiment(runs)
    ranked = T.ranking(exp)
    assert list(ranked["variant"]) == ["lr=3e-4", "lr=1e-4", "lr=5e-4"]
    assert ranked["score"].tolist() == pytest.approx([0.9, 0.21, 0.1])
    assert ranked["seeds"].tolist() == [[0], [0, 2, 10], [0]]  # as numbers, not as text
    rows = T.top_table(exp, ranked, 2, n_resamples=200)
    assert rows[0] == "| rank | configuration | score | 95% CI | seeds | games | trials |"
    assert (
        rows[2]
        == "| 1 | lr=3e-4 | 0.900 | — (1 run: too few for a CI) | seed 0 | 1 | lr=3e-4_coinrun_0 |"
    )
    assert (
        rows[3].startswith("| 2 | lr=1e-4 | 0.210 | [0.20") and "| seeds 0, 2, 10 | 1 |" in rows[3]
    )
    assert len(rows) == 4  # the top 2 only
    # Ties keep the variants' order; a configuration with 3 runs of one game and 1 of
    # another has no CI, and says its fewest.
    tied = {("B", "coinrun", s): (0.5, 0.5) for s in (0, 1, 2)}
    tied |= {("A", "coinrun", s): (0.5, 0.5) for s in (0, 1, 2)} | {("A", "maze", 0): (0.5, 0.5)}
    exp = _experiment(tied)
    ranked = T.ranking(exp)
    assert list(ranked["variant"]) == ["A", "B"] == exp.variants
    assert T.top_table(exp, ranked, 1, n_resamples=200)[2].startswith(
        "| 1 | A | 0.500 | — (1 run: too few for a CI) |"
    )


def test_a_searchs_configurations_are_scored_as_ranked_in_the_order_their_first_trial_ran():
    """Two games x two seeds a configuration: one row each, scored as `ranking` scores it (the
    mean over games of the mean over seeds), not a row per trial."""
    counted = pd.DataFrame(
        {
            "trial_id": [f"{g}_s{s}_x_{n:05d}" for n, (g, s) in enumerate([("a", 0)] * 8)],
            "variant": ["lr=2"] * 4 + ["lr=1"] * 4,
            "lr": [2.0] * 4 + [1.0] * 4,
            "game": ["coinrun", "coinrun", "maze", "maze"] * 2,
            "seed": [0, 1] * 4,
            M.TEST_RETURN_NORM: [0.1, 0.3, 0.5, 0.9, 0.0, 0.0, 0.4, 0.6],
            "sweep": "s",
        }
    ).iloc[[4, 0, 1, 2, 3, 5, 6, 7]]  # lr=1's first trial ran after lr=2's
    configs = T.configurations(counted, ["lr"])
    assert configs["variant"].tolist() == ["lr=2", "lr=1"]
    assert configs["lr"].tolist() == [2.0, 1.0]
    assert configs[M.TEST_RETURN_NORM].tolist() == pytest.approx([(0.2 + 0.7) / 2, 0.25])
    assert T.configuration_scores(counted).to_dict() == pytest.approx({"lr=2": 0.45, "lr=1": 0.25})
    # Unequal runs a game: each game weighs alike (three coinrun runs and one of maze: 0.5, not
    # the 0.25 of a flat mean over the four runs).
    uneven = counted.assign(game=["coinrun"] * 3 + ["maze"] + ["coinrun"] * 3 + ["maze"])
    uneven = uneven.assign(**{M.TEST_RETURN_NORM: [0.0, 0.0, 0.0, 1.0] * 2})
    assert T.configuration_scores(uneven).to_dict() == pytest.approx({"lr=1": 0.5, "lr=2": 0.5})
    # A search by its variants' labels (more than a comparison holds, or `--by variant`)
    by_label = T.configurations(counted, ["variant"])
    assert list(by_label.columns) == ["variant", M.TEST_RETURN_NORM] and len(by_label) == 2


def test_trials_in_the_order_tune_started_them():
    final = pd.DataFrame(
        {
            "sweep": ["s"] * 4,
            "trial_id": ["maze_s0_ab_00001", "coinrun_s0_ab_00002", "coinrun_s0_ab_00000", "x"],
        }
    )
    assert T.trial_order(final).tolist() == [1, 2, 0, 3]  # by Tune's number, not by name


def test_a_reference_to_a_game_the_sweep_did_not_run_gets_its_own_rows_marked_not_run():
    """Kept through a `--games` cut, a published number of another game is set beside "not
    run here", not beside a row of no finished runs per variant and levels, which read as
    crashed trials."""
    exp = _experiment({(v, "coinrun", s): (0.5, 0.25) for v in ("A", "B") for s in range(3)})
    exp.final[M.TRAIN_RETURN] = exp.final[M.TEST_RETURN] = 1.0
    refs = [
        Reference(
            game="bigfish", variant="A", value=v, split="train", budget=b, seeds=1, source="L"
        )
        for v, b in ((17.7, 4e6), (23.1, 8e6))
    ]
    refs.append(
        Reference(game="bigfish", value=16.46, split="train", budget=25e6, seeds=3, source="C")
    )
    rows = [r.split(" | ") for r in T.reference_table(exp, refs, n_resamples=100)[2:]]
    bigfish = [r[1:5] + [r[6]] for r in rows if r[0] == "| bigfish"]
    assert bigfish == [
        ["A", "training", T.NOT_RUN, "", "17.7"],
        ["A", "training", "", "", "23.1"],  # said once, as rlsweep's cells are
        ["(context)", "training", "", "", "16.46"],
    ]
    assert len([r for r in rows if r[0] == "| coinrun"]) == 4  # A and B, each split: ours
    # A game of the spec whose trials have not started yet is no game the sweep does not run.
    exp.specs = {"s": SweepSpec(name="s", games=["coinrun", "bigfish"])}
    table = "\n".join(T.reference_table(exp, refs, n_resamples=100))
    assert T.NOT_RUN not in table and "| bigfish | B | unseen | — | 0 |" in table


def test_every_game_shows_its_references_of_a_variant_the_columns_split():
    """A reference to variant `A`, whose runs the table splits by a searched value (`A,
    lr=...`), gets a row of its own on each of its games, not only on the first."""
    runs = {
        (v, g, s): (0.5, 0.25)
        for v in ("A, lr=0.0001", "A, lr=0.0005")
        for g in ("bigfish", "coinrun")
        for s in range(3)
    }
    exp = _experiment(runs)
    exp.final[M.TRAIN_RETURN] = exp.final[M.TEST_RETURN] = 1.0
    refs = [
        Reference(
            game=g, variant="A", value=v, split="train", budget=4_000_000, seeds=1, source="X"
        )
        for g, v in (("bigfish", 17.7), ("coinrun", 9.9))
    ]
    rows = T.reference_table(exp, refs, n_resamples=100)[2:]
    published = [r.split(" | ")[:3] + [r.split(" | ")[6]] for r in rows if "| X |" in r]
    assert published == [
        ["| bigfish", "A", "training", "17.7"],
        ["| coinrun", "A", "training", "9.9"],
    ]


def test_a_published_number_reads_as_its_spec_wrote_it():
    """`value: 7.0` in a spec printed `7`, and `error: 2.70` printed `2.7` beside it: a number
    keeps the point it was written with (YAML reads `7` as an int, `7.0` as a float)."""
    text = (
        "name: s\ngames: [coinrun]\nseeds: [0]\nvariants: {A: {}}\nreference:\n"
        "  - {game: coinrun, variant: A, value: 7.0, error: 2.0, error_kind: std, split: train,"
        " budget: 4e6, seeds: 3, source: X}\n"
        "  - {game: coinrun, variant: A, value: 8, split: test, budget: 4e6, seeds: 1, source: Y}\n"
    )
    refs = SweepSpec.from_yaml_text(text, source="s.yaml").reference
    exp = _experiment({("A", "coinrun", s): (0.5, 0.25) for s in range(3)})
    exp.final[M.TRAIN_RETURN] = exp.final[M.TEST_RETURN] = 1.0
    rows = [r.split(" | ") for r in T.reference_table(exp, refs, n_resamples=100)[2:]]
    assert [r[6] for r in rows if r[6]] == ["7.0 ± 2.0 (std)", "8"]


def test_the_differences_name_variants_whose_runs_scored_the_same():
    """Near-random policies of two variants scored the same on every run (seeded evaluation:
    the same levels and draws): "0.000" and P = 0.5 read as "the variant was not applied"
    unless the table says why."""
    runs = {(v, "coinrun", s): (0.1 * s, 0.2 * s) for v in ("A", "B", "C") for s in range(3)}
    runs.update({("C", "coinrun", s): (0.1 * s, 0.3 * s) for s in range(3)})  # C's test differs

    def experiment(runs):
        exp = _experiment(runs)
        exp.final[M.TRAIN_RETURN] = exp.final[M.TRAIN_RETURN_NORM]
        exp.final[M.TEST_RETURN] = exp.final[M.TEST_RETURN_NORM]
        return exp

    exp = experiment(runs)
    lines = T.difference_table(exp, "A", ["B", "C"], n_resamples=100)
    table, notes = lines[: 2 + 4], lines[2 + 4 :]
    assert all(line.startswith("|") for line in table) and notes[0] == ""
    assert [n[: n.index(":")] for n in notes[1:]] == [
        "A and B scored the same on every run (coinrun training, coinrun unseen)",
        "A and C scored the same on every run (coinrun training)",  # its unseen scores differ
    ]
    # Runs that differ somewhere: no note.
    runs.update({("B", "coinrun", 0): (0.05, 0.01)})
    assert T.difference_table(experiment(runs), "A", ["B"], n_resamples=100)[-1].startswith("|")


def test_the_score_table_counts_the_trials_not_started():
    """An interrupted sweep's table said "not counted: none" with trials not yet started:
    the Runs section alone said so."""
    exp = _experiment({("A", "coinrun", s): (0.5, 0.25 + 0.1 * s) for s in range(3)})
    exp.specs = {"s": SweepSpec(name="s", games=["coinrun"], seeds=[0, 1, 2, 3, 4])}
    table = T.score_table(exp, n_resamples=100)
    assert "Counted: 3 finished trials; not counted: 2 not started." in table
