"""rlsweep._moved: the module paths from before the layers became folders still import, to the
very modules now at the new paths; and an experiment dir written then (Tune's pickles name
`rlsweep.tune_bridge`, `rlsweep.spec`, ...) resumes to the end and reports."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from rlsweep import _moved
from rlsweep.spec.config import TrialConfig
from rlsweep.testing import ITER_S_ENV, fake_trial

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "old_layout_sweep.tar.gz"


def test_every_new_path_exists_and_every_old_one_imports_it():
    assert len(_moved.MOVED) == 48
    for old, new in _moved.MOVED.items():
        module = importlib.import_module(new)
        if old in _moved.PACKAGED:  # a package now: its old names forwarded
            assert importlib.import_module(old).__name__ == old
        else:
            assert importlib.import_module(old) is module, old


def test_a_user_s_old_imports_work():
    from rlsweep.placement import check_fits
    from rlsweep.sweep import run_sweep
    from rlsweep.tune_bridge import DriverCallback

    from rlsweep.envs import ProcgenVectorEnv
    from rlsweep.plan import make_plan
    from rlsweep.results import trials_table
    from rlsweep.run.sweep import run_sweep as new_run_sweep
    from rlsweep.spec import SweepSpec, resolve_config

    assert run_sweep is new_run_sweep
    assert DriverCallback.__module__ == "rlsweep.run.tune_bridge"
    assert SweepSpec.__module__ == resolve_config.__module__ == "rlsweep.spec.spec"
    assert make_plan.__module__ == "rlsweep.plan.plan"
    assert trials_table.__module__ == "rlsweep.results.results"
    assert ProcgenVectorEnv.__module__ == "rlsweep.envs.vector_env"
    assert check_fits.__module__ == "rlsweep.plan.placement"
    with pytest.raises(ImportError):
        from rlsweep.spec import no_such_name  # noqa: F401


def test_python_m_on_an_old_path_runs_the_module_now_there():
    out = subprocess.run(
        [sys.executable, "-m", "rlsweep.wheelhouse", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.startswith("usage: wheelhouse"), out.stderr


def test_an_experiment_dir_from_before_the_move_resumes_and_reports(
    tmp_path, monkeypatch, no_ray_running
):
    """tests/fixtures/make_old_layout_fixture.py made it: 4 trials of the fake trainable, two
        stopped by the time limit mid-way (checkpointed), two never started. It predates TrialConfig
        fields (relu_after_pool): the resume keeps the param_space Tune saved, whose keys Tune would
        not let a re-specified one change, and each trial's missing field takes its default, or the
    value it ran with where the default has changed since (init, pool_padding)."""
    from rlsweep import resume_sweep
    from rlsweep.results.report import build_report
    from rlsweep.results.results import load_curves
    from rlsweep.spec.spec import TRIAL_FILE

    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    path = tmp_path / "old_layout"
    pickled = (path / "tuner.pkl").read_bytes()
    assert b"rlsweep.tune_bridge" in pickled and b"rlsweep.run" not in pickled
    assert b"relu_after_pool" not in pickled and "relu_after_pool" in TrialConfig.field_names()
    state = "".join(p.read_text() for p in path.glob("experiment_state*.json"))
    assert b"rlsweep.tune_bridge".hex() in state  # Tune's pickles, hex-encoded

    monkeypatch.setenv(ITER_S_ENV, "0")
    df = resume_sweep(path, trainable=fake_trial, num_cpus=2).trials
    assert len(df) == 4 and (df["status"] == "TERMINATED").all(), df
    assert (df["iteration"] == 30).all()
    # Before init and pool_padding, every net started and pooled as PyTorch's (EARLIER_DEFAULTS):
    # the trials ran so, the two started by the resume too, and report so.
    ran = load_curves(path).drop_duplicates("trial_id")
    assert len(ran) == 4 and {*ran["init"], *ran["pool_padding"]} == {"torch"}
    recorded = [json.loads(f.read_text()) for f in path.glob(f"*/{TRIAL_FILE}")]
    assert [(r["init"], r["pool_padding"]) for r in recorded] == [("torch", "torch")] * 4
    assert all(Path(d).parent == path for d in df["trial_dir"])
    assert "4 TERMINATED" in build_report([path]).read_text()
    # the old paths were this tree's modules, under both names (not another checkout's)
    for old, new in _moved.MOVED.items():
        if old in sys.modules and old not in _moved.PACKAGED:
            assert sys.modules[old] is sys.modules[new], old
    assert "rlsweep.tune_bridge" in sys.modules
