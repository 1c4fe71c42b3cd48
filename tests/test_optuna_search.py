"""rlsweep.run.optuna_search: an Optuna sweep's experiment dir, moved, resumes with the study in
it (Tune's fake trainable, real Tune and Optuna)."""

import functools
import pickle
import shutil

import optuna
import pytest

from rlsweep.run.sweep import resume_sweep, run_sweep
from rlsweep.spec.spec import OPTUNA_DB, SweepSpec
from rlsweep.testing import fake_trial


# The first run's trials crash by design: Tune's Repeater then averages no scores (NumPy warns).
@pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")
def test_a_moved_optuna_sweep_resumes_with_the_study_where_it_is_now(tmp_path):
    """Its study is SQLite in the experiment dir. Tune pickled the searcher whole, and its
    RDBStorage opens its URL as it is unpickled: at the old path, which another machine has
    not got ('unable to open database file'; on the same machine the copy wrote the
    original's study). What rlsweep's searcher pickles names no storage."""
    spec = SweepSpec(
        name="tpe",
        games=["coinrun"],
        seeds=[0],
        budget=2 * 16384,
        space={"lr": {"loguniform": [1e-5, 1e-3]}},
        search={"algorithm": "optuna", "num_samples": 2, "seed": 0},
        storage_path=str(tmp_path / "here"),
    )
    crash = functools.partial(fake_trial, crash=True)
    first = run_sweep(spec, trainable=crash, num_cpus=2, max_failures=0)
    assert (first.trials["status"] == "ERROR").all()
    for saved in first.path.glob("searcher-state-*.pkl"):
        assert b"sqlite" not in saved.read_bytes()  # no storage, so no path
    moved = tmp_path / "there" / "tpe"
    shutil.move(first.path, moved)  # another machine: nothing at the old path
    result = resume_sweep(str(moved), trainable=functools.partial(fake_trial), num_cpus=2)
    assert (result.trials["status"] == "TERMINATED").all()
    assert not (tmp_path / "here" / "tpe").exists()  # nothing made or written at the old path
    study = optuna.load_study(study_name="tpe", storage=f"sqlite:///{moved / OPTUNA_DB}")
    assert len(study.trials) == 2
    assert sorted(result.trials["lr"]) == sorted(t.params["lr"] for t in study.trials)
    # What the resume saved restores again, at that study.
    (state,) = sorted(moved.glob("searcher-state-*.pkl"))[-1:]
    assert "_ot_study" not in pickle.loads(state.read_bytes())
