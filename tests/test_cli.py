from pathlib import Path

from rlsweep.cli import main

DEMO = str(Path(__file__).resolve().parents[1] / "search_spaces" / "demo.yaml")


def test_validate_ok(capsys):
    assert main(["validate", DEMO]) == 0
    assert "ok — 4 trials of 12,288 env steps" in capsys.readouterr().out


def test_validate_reports_file_key_and_allowed_values(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nspace:\n  framestack: [none, gap5]\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: space.framestack[1]: got 'gap5'; allowed: none, stack, gap" in err


def test_budget_is_written_as_in_the_spec_language(capsys):
    """`--budget 25e6` (YAML's notation) on plan, as on run and ablate."""
    assert main(["plan", DEMO, "--budget", "25e6"]) == 0
    out = capsys.readouterr().out
    assert "4 trials x budget = 100,000,000 env steps" in out


def test_budget_rejects_fractions(capsys):
    import pytest

    from rlsweep.cli import env_steps

    assert env_steps("25e6") == 25_000_000 and env_steps("4096") == 4096
    with pytest.raises(SystemExit):
        main(["plan", DEMO, "--budget", "1.5"])
    assert "allowed: a whole number of env steps > 0" in capsys.readouterr().err
