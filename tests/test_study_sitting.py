"""benchmarks/study_sitting.py: the pooling study's smoke through two sittings, on the CPU path
(`--no-install`, real RLlib on real bigfish): the first runs it and packs it into $OUT, the next
takes the parts up at another path as a fresh node would, resumes and packs it again; after
each, `--take-back` keeps the parts for the next sitting and the report to commit."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SITTING = REPO / "benchmarks" / "study_sitting.py"
sys.path.insert(0, str(SITTING.parent))

import study_sitting  # noqa: E402


def _take_back(tmp_path: Path, out: str) -> Path:
    argv = [sys.executable, str(SITTING), "pooling-bigfish", "--take-back", str(tmp_path / out)]
    argv += ["--carried", str(tmp_path / "carried"), "--storage", str(tmp_path / "repo")]
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return tmp_path / "repo" / "study-pooling-bigfish-smoke"


def _sitting(tmp_path: Path, out: str, storage: str, *more: str) -> dict:
    argv = [sys.executable, str(SITTING), "pooling-bigfish", "--smoke", "--no-install"]
    argv += ["--minutes", "6", "--storage", str(tmp_path / storage), *more]
    env = {**os.environ, "OUT": str(tmp_path / out)}
    run = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    summary = json.loads((tmp_path / out / "sitting.json").read_text())
    summary["stages"] = [s for s in summary["stages"] if s["stage"] != "nvidia-smi"]
    log = (tmp_path / out / "sitting.log").read_text()
    assert summary["out"]["fits"] and summary["out"]["files"] <= 8, summary
    return summary | {"log": log}


@pytest.mark.rllib
def test_two_sittings_run_the_studys_smoke_and_carry_it_between_nodes(tmp_path):
    first = _sitting(tmp_path, "out1", "node1", "--", "--num-cpus", "2")
    assert [s["stage"] for s in first["stages"]] == ["sweep", "pack"], first["stages"]
    assert sorted((t["variant"], t["status"]) for t in first["trials"]) == [
        (f"variant={v}", "TERMINATED") for v in ("Avg Pool", "Avg Pool fp32", "No Pool")
    ]
    assert "--time-limit" in first["log"] and "rlsweep.cli ablate pooling-bigfish" in first["log"]
    assert "rlsweep: smoke run: 1,024 env steps per trial is far too few" in first["log"]
    table = tmp_path / "node1" / "study-pooling-bigfish-smoke" / "report" / "ablation.md"
    text = table.read_text()
    assert text.splitlines()[2].startswith("> **Short trials**: none ran more than 1,0")
    assert "| game | Avg Pool | No Pool | Avg Pool fp32 |" in text
    assert "17.7" in text and "16.46 ± 2.71" in text and "single run" in text
    assert "## Differences: Avg Pool against each other variant" in text
    report = (table.parent / "report.md").read_text()  # its metric is a raw return: so are
    assert "Raw returns (`train/return`, `test/return`)" in report  # its curves

    # Here: the parts kept for the next sitting, the report and the sitting's summary to commit.
    study = _take_back(tmp_path, "out1")
    carried = tmp_path / "carried"
    assert sorted(p.name for p in carried.iterdir()) == sorted(
        p.name for p in (tmp_path / "out1" / "carry").iterdir()
    )
    assert (study / "report" / "ablation.md").read_text() == text
    assert json.loads((study / "sittings" / "001.json").read_text())["sweep_rc"] == 0

    # The next node: the parts carried in, the experiment dir restored at another path.
    manifest = json.loads((carried / "manifest.json").read_text())
    assert len(manifest["checkpoints_left_out"]) == 3  # every trial ended: none is needed
    second = _sitting(tmp_path, "out2", "node2", "--carried", str(carried))
    assert [s["stage"] for s in second["stages"]] == ["unpack", "sweep", "pack"]
    assert "rlsweep.cli resume" in second["log"]
    moved = tmp_path / "node2" / "study-pooling-bigfish-smoke"
    again = (moved / "report" / "ablation.md").read_text()  # resume reports it again, there
    assert again == text
    parts = sorted((tmp_path / "out2" / "carry").glob("experiment.tar.gz.part*"))
    joined = tmp_path / "joined.tar.gz"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(joined) as tar:
        names = tar.getnames()
    assert any(n.endswith("/progress.csv") for n in names)
    assert not [n for n in names if "/checkpoint_" in n]
    _take_back(tmp_path, "out2")
    assert (tmp_path / "carried.prev" / "manifest.json").read_bytes() == (
        tmp_path / "out1" / "carry" / "manifest.json"
    ).read_bytes()  # the last sitting's, until the next one's unpacked whole
    assert (
        json.loads((carried / "manifest.json").read_text())["parts"]
        == json.loads((tmp_path / "out2" / "carry" / "manifest.json").read_text())["parts"]
    )
    assert [p.name for p in sorted((study / "sittings").iterdir())] == ["001.json", "002.json"]


def test_taking_back_a_sitting_that_packed_nothing_says_so_and_keeps_carried(tmp_path):
    """A sitting whose install failed (a wheelhouse part lost between calls) brings back its
    log and no carry/: the take-back says so with the log's last lines, and `carried/` stays."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sitting.log").write_text("sitting: [install] exit code 2 after 3 s\n")
    (tmp_path / "carried").mkdir()
    (tmp_path / "carried" / "manifest.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"packed nothing\nsitting: \[install\] exit code 2"):
        study_sitting.take_back(tmp_path / "out", tmp_path / "carried", tmp_path / "repo")
    assert (tmp_path / "carried" / "manifest.json").read_text() == "{}"
