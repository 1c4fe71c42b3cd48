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
