"""rlsweep.results.importance: Optuna distributions of space parameters, a study built from finished
trials or read from where an Optuna sweep persisted it, and fANOVA importances. No Ray: the
frames and the SQLite study are made here (tests/test_tracking.py runs the real sweeps)."""

import numpy as np
import optuna
import pandas as pd
import pytest

from rlsweep import metrics as M
from rlsweep.results.importance import MIN_TRIALS, distribution, importances, study_from_trials
from rlsweep.spec.space import parse_space
from rlsweep.spec.spec import SweepSpec

SPACE = {"lr": {"loguniform": [1e-5, 1e-3]}, "entropy_coeff": {"uniform": [0.0, 0.02]}}


def test_distributions():
    D = optuna.distributions
    space = parse_space(
        {
            "widths": {"choice": [[16, 32, 32], [32, 64, 64]]},
            "num_epochs": {"int": [1, 9], "q": 2},
            "lr": {"loguniform": [1e-5, 1e-3]},
            "gamma": {"uniform": [0.9, 0.99], "q": 0.01},
        }
    )
    # As results tables hold them: lists as strings.
    assert distribution(space["widths"]) == D.CategoricalDistribution(
        ["[16, 32, 32]", "[32, 64, 64]"]
    )
    # A quantized range: the multiples of q inside it, the values Tune draws (Param.bounds).
    assert distribution(space["num_epochs"]) == D.IntDistribution(2, 8, step=2)
    assert distribution(space["lr"]) == D.FloatDistribution(1e-5, 1e-3, log=True)
    assert distribution(space["gamma"]) == D.FloatDistribution(0.9, 0.99, step=0.01)


def _final(n: int, seed: int = 0) -> pd.DataFrame:
    """n finished trials whose score is log10(lr); entropy_coeff is noise."""
    rng = np.random.default_rng(seed)
    lr = 10 ** rng.uniform(-5, -3, n)
    return pd.DataFrame(
        {
            "lr": lr,
            "entropy_coeff": rng.uniform(0, 0.02, n),
            M.TEST_RETURN_NORM: np.log10(lr) + 5,
        }
    )


def test_study_from_trials_keeps_only_usable_rows():
    spec = SweepSpec(name="r", space=SPACE, search={"algorithm": "random"})
    final = _final(6)
    final.loc[0, M.TEST_RETURN_NORM] = np.nan  # not finished
    final.loc[1, "lr"] = np.nan  # a parameter missing
    final.loc[2, "entropy_coeff"] = 0.5  # outside the sampled range (a conditional's default)
    study = study_from_trials(spec, final)
    assert [t.value for t in study.trials] == pytest.approx(final[M.TEST_RETURN_NORM][3:])
    assert study.trials[0].params == {
        "lr": final.loc[3, "lr"],
        "entropy_coeff": final.loc[3, "entropy_coeff"],
    }
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE


def test_a_quantized_int_searched_by_tune_gives_a_study():
    """Tune draws the multiples of q (2, 4, 6, 8 of [1, 9]); the study takes every such row,
    and leaves out one outside the range (a conditional's default) rather than fail."""
    space = {"num_epochs": {"int": [1, 9], "q": 2}, **SPACE}
    spec = SweepSpec(name="r", space=space, search={"algorithm": "random"})
    final = _final(6).assign(num_epochs=[2, 4, 6, 8, 4, 2])
    assert len(study_from_trials(spec, final).trials) == 6
    final.loc[0, "num_epochs"] = 10
    assert len(study_from_trials(spec, final).trials) == 5


def test_importances_from_finished_trials():
    spec = SweepSpec(name="r", space=SPACE, search={"algorithm": "random"})
    scores, source = importances(spec, _final(24))
    assert source == "finished trials (24 configurations)"
    assert set(scores.index) == {"lr", "entropy_coeff"}
    assert scores.sum() == pytest.approx(1.0) and scores["lr"] > 0.8
    assert importances(spec, _final(MIN_TRIALS - 1)) is None
    assert importances(SweepSpec(name="g"), _final(24)) is None  # nothing sampled


def test_importances_from_the_persisted_study(tmp_path):
    spec = SweepSpec(name="tpe", space=SPACE, search={"algorithm": "optuna"})
    experiment = tmp_path / "tpe"
    assert importances(spec, _final(8), experiment)[1] == "finished trials (8 configurations)"
    # What OptunaSearch persists during a sweep: the study named after it, in optuna.db.
    study = optuna.create_study(
        study_name="tpe", storage=spec.optuna_storage_url(experiment, create=True)
    )
    dists = {"lr": optuna.distributions.FloatDistribution(1e-5, 1e-3, log=True)}
    dists["entropy_coeff"] = optuna.distributions.FloatDistribution(0.0, 0.02)
    for _, row in _final(5, seed=1).iterrows():
        params = {"lr": row["lr"], "entropy_coeff": row["entropy_coeff"]}
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=dists, value=row.iloc[-1])
        )
    scores, source = importances(spec, _final(8), experiment)
    assert source == "the persisted Optuna study (5 trials)"
    assert scores.sum() == pytest.approx(1.0)


def test_a_sweep_that_optimized_another_metric_is_explained_by_the_reports_score(tmp_path):
    """A search that minimized its generalization gap: its report ranks by the final
    unseen-level score, so its history's "best so far" and its importances follow that score,
    higher better, not the gap nor the lowest score; its persisted study (of the gap) is not
    read."""
    from rlsweep.results.importance import report_study

    spec = SweepSpec(
        name="gap",
        space=SPACE,
        search={"algorithm": "optuna"},
        metric=M.GAP_NORM,
        mode="min",
    )
    final = _final(8)
    for study in (study_from_trials(spec, final), report_study(final, ["lr"], [spec])):
        assert study.direction == optuna.study.StudyDirection.MAXIMIZE
        assert study.best_value == pytest.approx(final[M.TEST_RETURN_NORM].max())
    experiment = tmp_path / "gap"
    persisted = optuna.create_study(
        study_name="gap", storage=spec.optuna_storage_url(experiment, create=True)
    )
    persisted.add_trial(
        optuna.trial.create_trial(
            params={"lr": 1e-4}, distributions={"lr": distribution(spec.space["lr"])}, value=0.0
        )
    )
    assert importances(spec, final, experiment)[1] == "finished trials (8 configurations)"


def test_report_study_takes_the_spaces_distributions_else_infers_them():
    """A search report's figures come from this study: log axes where the space is log
    (declared by the spec, or inferred from values spanning two decades), in the order given."""
    from rlsweep.results.importance import report_study

    D = optuna.distributions
    spec = SweepSpec(name="r", space=SPACE, search={"algorithm": "random"})
    final = _final(12).assign(framestack=["none", "gap"] * 6)
    study = report_study(final, ["lr", "entropy_coeff", "framestack"], [spec])
    dists = study.trials[0].distributions
    assert dists["lr"] == D.FloatDistribution(1e-5, 1e-3, log=True)
    assert dists["entropy_coeff"] == D.FloatDistribution(0.0, 0.02)
    assert dists["framestack"] == D.CategoricalDistribution(["gap", "none"])
    assert [t.value for t in study.trials] == pytest.approx(final[M.TEST_RETURN_NORM])
    inferred = report_study(final, ["lr", "entropy_coeff"]).trials[0].distributions
    assert inferred["lr"].log and not inferred["entropy_coeff"].log
    assert inferred["lr"].low == final["lr"].min()


def test_a_reports_studies_log_nothing_and_leave_optunas_verbosity_as_it_was():
    """`rlsweep report` printed Optuna's "A new study created in memory ..." for each study it
    built (its figures', its importances'); a sweep's own study still logs as Optuna does."""
    import logging

    from rlsweep.results.importance import report_study

    class Lines(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.getMessage())

    lines = Lines()
    logger = logging.getLogger("optuna")  # Optuna's own handler writes to stderr: not captured
    logger.addHandler(lines)
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.INFO)  # Optuna's default
    try:
        spec = SweepSpec(name="r", space=SPACE, search={"algorithm": "random"})
        assert len(report_study(_final(6), ["lr"], [spec]).trials) == 6
        assert importances(spec, _final(MIN_TRIALS)) is not None
        assert lines.messages == []
        assert optuna.logging.get_verbosity() == optuna.logging.INFO
        optuna.create_study()  # outside a report: as Optuna logs it
        assert [m.split(" with name")[0] for m in lines.messages] == [
            "A new study created in memory"
        ]
    finally:
        logger.removeHandler(lines)
        optuna.logging.set_verbosity(before)


def test_a_grid_list_is_a_parameter_of_the_study_and_one_parameter_gets_no_table(tmp_path):
    """The study held the sampled parameters only: a grid's share of the score's variance went
    to them, and with one sampled parameter its importance was 1 whatever it did. The grid list
    is a choice of the study now; one searched parameter gets a note, not a table of 1.000."""
    from types import SimpleNamespace

    from rlsweep.results.report import importance_section

    space = {"lr": {"loguniform": [1e-5, 1e-3]}, "framestack": ["none", "gap"]}
    spec = SweepSpec(name="r", space=space, search={"algorithm": "random", "num_samples": 4})
    final = _final(8).assign(framestack=["none", "gap"] * 4)
    study = study_from_trials(spec, final)
    assert set(study.trials[0].params) == {"lr", "framestack"}
    # A choice of null reads back as a missing value (NaN): its trials stay in the study.
    space = {"lr": space["lr"], "num_levels": [None, 200]}
    spec = SweepSpec(name="r", space=space, search={"algorithm": "random", "num_samples": 4})
    final = _final(8).assign(num_levels=[None, 200] * 4)
    assert len(study_from_trials(spec, final).trials) == 8

    one = SweepSpec(name="one", space={"lr": space["lr"]}, search={"algorithm": "random"})
    d = tmp_path / "one"
    d.mkdir()
    (d / "sweep.yaml").write_text(one.to_yaml())
    counted = _final(8).assign(  # a report's counted trials: a configuration each
        sweep="one", game="coinrun", seed=0, variant=[f"c{i}" for i in range(8)]
    )
    counted["trial_id"] = [f"coinrun_s0_x_{i:05d}" for i in range(8)]
    lines, files = importance_section([d], SimpleNamespace(counted=counted), tmp_path)
    assert files == [] and not (tmp_path / "importance.csv").exists()
    assert (
        "`one`: one searched parameter, `lr`: its share of the variance is 1 by construction"
        in ("\n".join(lines))
    )
