"""rlsweep.environ: variables set for a block come back as they were, error or not."""

import os

import pytest

from rlsweep.environ import set_env


def test_set_env_restores_old_values_and_removes_new_ones(monkeypatch):
    monkeypatch.setenv("RLSWEEP_TEST_OLD", "old")
    monkeypatch.delenv("RLSWEEP_TEST_NEW", raising=False)
    with set_env({"RLSWEEP_TEST_OLD": "a", "RLSWEEP_TEST_NEW": "b"}):
        assert os.environ["RLSWEEP_TEST_OLD"] == "a" and os.environ["RLSWEEP_TEST_NEW"] == "b"
    assert os.environ["RLSWEEP_TEST_OLD"] == "old" and "RLSWEEP_TEST_NEW" not in os.environ

    with pytest.raises(RuntimeError), set_env({"RLSWEEP_TEST_NEW": "c"}):
        raise RuntimeError
    assert "RLSWEEP_TEST_NEW" not in os.environ

    with set_env({}):
        assert os.environ["RLSWEEP_TEST_OLD"] == "old"
