"""Checkpoint timing and the resume command (the signal handling itself is exercised end to end
by tests/test_resume.py, with real trials)."""

import os
import signal
import threading
from pathlib import Path

import pandas as pd
import pytest

from rlsweep.errors import ConfigError
from rlsweep.experiment.interrupt import (
    Interrupts,
    SweepInterrupted,
    checkpoint_due,
    requested,
    resume_command,
)
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import SweepSpec


def test_trials_checkpoint_every_10_minutes_by_default(monkeypatch):
    cfg = TrialConfig()
    assert cfg.checkpoint_every_s == 600 and cfg.checkpoint_interval == 0
    monkeypatch.setattr("time.monotonic", lambda: 1000.0)
    assert not checkpoint_due(cfg, iteration=7, saved_at=500.0)
    assert checkpoint_due(cfg, iteration=7, saved_at=400.0)
    off = TrialConfig(checkpoint_every_s=0, checkpoint_interval=3)
    assert not checkpoint_due(off, iteration=7, saved_at=0.0)
    assert checkpoint_due(off, iteration=9, saved_at=1000.0)
    with pytest.raises(ConfigError, match="checkpoint_every_s"):
        TrialConfig(checkpoint_every_s=-1)


def test_no_flag_outside_a_sweep():
    assert requested() is False


def test_resume_command_and_exit_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resume_command(tmp_path / "results" / "demo") == "rlsweep resume results/demo"
    assert resume_command("/elsewhere/my sweep") == "rlsweep resume '/elsewhere/my sweep'"
    assert resume_command("s3://b/sweeps/demo") == "rlsweep resume s3://b/sweeps/demo"

    class Result:
        spec = SweepSpec(name="demo", games=["coinrun"], seeds=[0, 1])
        path = Path("results/demo")
        trials = pd.DataFrame({"status": ["TERMINATED", "INCOMPLETE"]})

    e = SweepInterrupted(Result(), signal.SIGTERM)
    assert e.exit_code == 143 and e.command == "rlsweep resume results/demo"
    assert "1 of 2 trials finished" in str(e)


def test_interrupts_keep_tunes_sigint_handler_off_only_while_active(monkeypatch):
    monkeypatch.setenv("TUNE_DISABLE_SIGINT_HANDLER", "0")
    previous = signal.getsignal(signal.SIGINT)
    with Interrupts(say=lambda _: None) as interrupts:
        assert os.environ["TUNE_DISABLE_SIGINT_HANDLER"] == "1"
        assert signal.getsignal(signal.SIGINT) == interrupts._handle
    assert os.environ["TUNE_DISABLE_SIGINT_HANDLER"] == "0"
    assert signal.getsignal(signal.SIGINT) == previous

    # Off the main thread they do nothing, and leave the user's setting alone.
    seen = []

    def in_a_thread():
        with Interrupts(say=lambda _: None):
            seen.append(os.environ["TUNE_DISABLE_SIGINT_HANDLER"])
        seen.append(os.environ.get("TUNE_DISABLE_SIGINT_HANDLER"))

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen == ["0", "0"]
