"""benchmarks/study_sitting.py: the pooling study's smoke through two sittings, on the CPU path
(`--no-install`, real RLlib on real bigfish): the first runs it until its time limit and packs
it, checkpoints and all, into $OUT; the next takes the parts up at another path as a fresh node
would, goes on from the checkpoints and packs it again; after each, `--take-back` keeps the
parts for the next sitting and the report to commit."""

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from rlsweep import formatting
from rlsweep.metrics import RESUMED_AT

REPO = Path(__file__).resolve().parents[1]
SITTING = REPO / "benchmarks" / "study_sitting.py"
sys.path.insert(0, str(SITTING.parent))

import study_sitting  # noqa: E402

STUDY = "study-pooling-bigfish-smoke"
"""The smoke's experiment dir (and its folder in the take-back's storage)."""
TUNE_STATE = "experiment_state-2026-11-30_00-00-00.json"
"""A Tune state file's name, for dirs made here (`{"trial_data": []}`: it names no trial)."""


def _take_back(tmp_path: Path, out: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(SITTING), "pooling-bigfish", "--take-back", str(tmp_path / out)]
    argv += ["--carried", str(tmp_path / "carried"), "--storage", str(tmp_path / "repo")]
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return run


def _sitting(tmp_path: Path, out: str, storage: str, *more: str) -> dict:
    argv = [sys.executable, str(SITTING), "pooling-bigfish", "--smoke", "--no-install"]
    argv += ["--storage", str(tmp_path / storage), *more]
    env = {**os.environ, "OUT": str(tmp_path / out)}
    run = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    summary = json.loads((tmp_path / out / "sitting.json").read_text())
    assert run.returncode == summary["sweep_rc"], run.stdout[-4000:] + run.stderr[-4000:]
    summary["stages"] = [s for s in summary["stages"] if s["stage"] != "nvidia-smi"]
    log = (tmp_path / out / "sitting.log").read_text()
    assert summary["out"]["fits"] and summary["out"]["files"] <= 8, summary
    return summary | {"log": log}


def _rows(trial_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]


@pytest.mark.rllib
def test_two_sittings_stop_mid_study_and_the_next_goes_on_from_the_checkpoints(tmp_path):
    """As the study's sittings run: the first stops at its time limit with its trial mid-way
    (a budget no sitting here reaches), packs its checkpoints and is taken back; the next
    takes the parts up at another path, as a fresh node would, and the trial goes on from its
    checkpoint, each iteration reported once."""
    budget = ["--budget", "1e6"]  # the smoke's trials, long: no sitting here ends them
    # A sweep this node began that stopped before Tune took it up: no state to resume.
    (tmp_path / "node1" / STUDY).mkdir(parents=True)
    (tmp_path / "node1" / STUDY / "sweep.yaml").write_text("name: study-pooling-bigfish-smoke\n")
    # One trial at a time (kept in sweep.yaml, so the resume runs one too): what is tested is
    # the sitting's stop, pack and take-up, which one trial goes through as three would; two
    # at once cost the suite 198 CPU-s here against 122. Several trials stopped by one time
    # limit: test_recovery.py and test_sagemaker_entry.py (the fake trainable, two at once).
    first = _sitting(
        tmp_path, "out1", "node1", "--minutes", "1.5", "--", "max_concurrent=1", *budget
    )
    assert first["sweep_rc"] == 3, first  # stopped by its time limit, to be resumed
    assert [s["stage"] for s in first["stages"]] == ["sweep", "report", "pack"], first["stages"]
    assert first["trials"] and {t["status"] for t in first["trials"]} == {"INCOMPLETE"}
    assert "--time-limit" in first["log"] and "rlsweep.cli ablate pooling-bigfish" in first["log"]
    assert f"{STUDY}: no Tune state to resume from; the sweep starts anew" in first["log"]
    assert "rlsweep: interrupted: time limit" in first["log"]
    table = tmp_path / "node1" / STUDY / "report" / "ablation.md"
    text = table.read_text()  # what an unfinished study's report says
    assert text.splitlines()[2].startswith("**How scores are measured**: trained on easy mode")
    assert text.splitlines()[4].startswith("> **Short trials**: none ran more than ")
    assert "| game | Avg Pool | No Pool | Avg Pool fp32 |" in text
    assert "17.7" in text and "16.46 ± 2.71" in text and "single run" in text
    assert "## Differences: Avg Pool against each other variant" in text
    report = (table.parent / "report.md").read_text()  # its metric is a raw return: so are
    assert "Raw returns (`train/return`, `test/return`)" in report  # its curves

    # Here: the parts kept for the next sitting, the report and the sitting's summary to commit.
    said = _take_back(tmp_path, "out1").stdout  # and where the study stands, for STATUS.md
    reached = formatting.steps(sum(float(t["env_steps"]) for t in first["trials"]))
    assert f"- `{STUDY}`: 1 of 3 trials (1 INCOMPLETE); 2 not started; {reached} of 3M env" in said
    study = tmp_path / "repo" / STUDY
    carried = tmp_path / "carried"
    assert sorted(p.name for p in carried.iterdir()) == sorted(
        p.name for p in (tmp_path / "out1" / "carry").iterdir()
    )
    assert (study / "report" / "ablation.md").read_text() == text
    assert json.loads((study / "sittings" / "001.json").read_text())["sweep_rc"] == 3
    manifest = json.loads((carried / "manifest.json").read_text())
    assert manifest["checkpoints_left_out"] == []  # no trial ended: each one's is needed
    assert manifest["lean"]  # what comes back is bounded: nothing a resume never reads
    names = "".join(_names(carried))
    assert "/checkpoint_" in names and "tfevents" not in names and "/report/" not in names

    # The next node: the parts carried in, the experiment dir restored at another path.
    # Its command line as the first's (`make study-sitting ABLATE_ARGS=...` each time): the
    # resume takes the options of where it runs, the spec's own are in sweep.yaml.
    again = ["--", "max_concurrent=1", *budget, "--num-cpus", "2"]
    # 1.5 minutes, as the first: the unpack and the sitting's start leave the sweep ~75 s here,
    # and 61 s under a load of 6 (2026-12-01), above the least a sitting starts a sweep with
    # (60 s); 1.4 left it 57 s there.
    second = _sitting(
        tmp_path, "out2", "node2", "--minutes", "1.5", "--carried", str(carried), *again
    )
    assert second["sweep_rc"] == 3, second
    assert [s["stage"] for s in second["stages"]] == ["unpack", "sweep", "report", "pack"]
    assert (
        f"rlsweep.cli resume {tmp_path / 'node2' / STUDY} --num-cpus 2 --time-limit"
        in second["log"]
    )
    moved = tmp_path / "node2" / STUDY
    points = re.findall(r"\n  (\S+): from iteration (\d+), ([\d,]+) env steps", second["log"])
    went_on = {name: int(k) for name, k, _ in points}
    assert went_on, second["log"]  # at least one trial had checkpointed in the first sitting
    # The first sitting's table and stop line stood where the checkpoints did, a trial that
    # checkpointed after the driver stopped waiting for it included.
    reached = [float(t["env_steps"]) for t in first["trials"]]
    assert {float(n.replace(",", "")) for *_, n in points} <= set(reached), (points, reached)
    stop = rf"trials finished \(\d started\), {re.escape(formatting.steps(sum(reached)))} of "
    assert re.search(stop, first["log"]), first["log"]
    for name, k in went_on.items():
        rows = _rows(moved / name)
        assert [r["training_iteration"] for r in rows] == list(range(1, len(rows) + 1))
        assert len(rows) > k and all(r[RESUMED_AT] == k for r in rows[k:]), (name, k)
        assert rows[k]["env_steps"] > rows[k - 1]["env_steps"]
    steps = lambda s: sum(float(t["env_steps"]) for t in s["trials"])  # noqa: E731
    assert steps(second) > steps(first)
    assert "/checkpoint_" in "".join(_names(tmp_path / "out2" / "carry"))
    _take_back(tmp_path, "out2")
    assert (tmp_path / "carried.prev" / "manifest.json").read_bytes() == (
        tmp_path / "out1" / "carry" / "manifest.json"
    ).read_bytes()  # the last sitting's, until the next one's unpacked whole
    assert (
        json.loads((carried / "manifest.json").read_text())["parts"]
        == json.loads((tmp_path / "out2" / "carry" / "manifest.json").read_text())["parts"]
    )
    assert [p.name for p in sorted((study / "sittings").iterdir())] == ["001.json", "002.json"]
    assert (
        json.loads((carried / "manifest.json").read_text())["continues"]
        == (
            manifest["archive_sha256"]  # the second sitting's parts continue the first's
        )
    )
    assert "taken back already" in _take_back(tmp_path, "out2").stdout  # the same, again
    # The first sitting's parts, returned again after the second's: they would put the study
    # back, and the next take-back would delete the second's, kept only in carried.prev then.
    with pytest.raises(SystemExit, match="they are not the next sitting's"):
        study_sitting.take_back(tmp_path / "out1", carried, tmp_path / "repo")
    assert len(list((study / "sittings").iterdir())) == 2
    assert (tmp_path / "carried.prev" / "manifest.json").read_bytes() == (
        tmp_path / "out1" / "carry" / "manifest.json"
    ).read_bytes()


def _names(carry: Path) -> list[str]:
    """The files in a sitting's packed parts."""
    parts = sorted(carry.glob("experiment.tar.gz.part*"))
    joined = carry.parent / f"{carry.name}.joined.tar.gz"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    try:
        with tarfile.open(joined) as tar:
            return tar.getnames()
    finally:
        joined.unlink()


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


def test_taking_back_the_same_sitting_again_changes_nothing(tmp_path):
    """A take-back done twice (a command run again): `carried/` holds the returned parts
    already, so nothing is unpacked, counted or rotated: `carried.prev/` keeps the sitting
    before."""
    (tmp_path / "out" / "carry").mkdir(parents=True)
    (tmp_path / "out" / "carry" / "manifest.json").write_text('{"parts": []}')
    (tmp_path / "out" / "sitting.json").write_text("{}")
    for folder, manifest in (("carried", '{"parts": []}'), ("carried.prev", '{"before": 1}')):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "manifest.json").write_text(manifest)
    carried, repo = tmp_path / "carried", tmp_path / "repo"
    assert study_sitting.take_back(tmp_path / "out", carried, repo) is None
    assert (tmp_path / "carried.prev" / "manifest.json").read_text() == '{"before": 1}'
    assert not repo.exists() and not (tmp_path / "carried.new").exists()


def test_a_sitting_without_the_carried_parts_of_a_study_that_has_had_sittings_refuses(tmp_path):
    """The study's committed sittings/ says it has run before: a sitting whose carried parts
    did not come in (a call lost, no --carried) stops, where `ablate` would start it over and
    the take-back would keep that."""
    (tmp_path / "repo" / STUDY / "sittings").mkdir(parents=True)
    (tmp_path / "repo" / STUDY / "sittings" / "001.json").write_text("{}")
    argv = [sys.executable, str(SITTING), "pooling-bigfish", "--smoke", "--no-install"]
    argv += ["--minutes", "5", "--storage", str(tmp_path / "repo")]
    env = {**os.environ, "OUT": str(tmp_path / "out")}
    run = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    log = (tmp_path / "out" / "sitting.log").read_text()
    assert f"{STUDY} has had 1 sitting(s) (its sittings/), but no carried parts came in" in log
    assert "ablate" not in log.split("no carried parts")[0]  # nothing ran
    assert not (tmp_path / "repo" / STUDY / "sweep.yaml").exists()


@pytest.mark.parametrize("moving", [["name=elsewhere"], ["--storage", "other"]])
def test_a_sitting_refuses_ablate_args_that_move_the_experiment(tmp_path, moving):
    """The sitting packs the dir the study's spec names: arguments that would put the sweep
    elsewhere (an override of its name or storage, ablate's --storage) are refused before
    anything runs, where the sitting would have packed nothing and lost its GPU time."""
    argv = [sys.executable, str(SITTING), "pooling-bigfish", "--smoke", "--no-install"]
    argv += ["--minutes", "5", "--storage", str(tmp_path / "repo"), "--", *moving]
    env = {**os.environ, "OUT": str(tmp_path / "out")}
    run = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"{moving[0]}: would put the experiment elsewhere" in run.stderr
    assert not (tmp_path / "out").exists()  # nothing ran


def test_a_take_back_keeps_whole_parts_even_where_the_report_fails(tmp_path):
    """The returned parts unpack whole: they are the next sitting's at once, before the report
    is built here, so a report that fails (or a sitting.json that did not come back) never
    keeps `carried/` at the sitting before."""
    from rlsweep.node.carry import pack

    exp = tmp_path / "node" / STUDY
    (exp / "trial_0" / "checkpoint_000001").mkdir(parents=True)
    (exp / "sweep.yaml").write_text("name: study\n")  # no trial reported: no report
    (exp / TUNE_STATE).write_text('{"trial_data": []}')
    pack(exp, tmp_path / "out" / "carry", part_bytes=1 << 20)
    (tmp_path / "carried").mkdir()
    (tmp_path / "carried" / "manifest.json").write_text('{"parts": []}')
    carried, repo = tmp_path / "carried", tmp_path / "repo"
    with pytest.raises(SystemExit, match="holds the sitting's parts all the same"):
        study_sitting.take_back(tmp_path / "out", carried, repo)
    assert (carried / "manifest.json").read_bytes() == (
        tmp_path / "out" / "carry" / "manifest.json"
    ).read_bytes()
    assert (tmp_path / "carried.prev" / "manifest.json").read_text() == '{"parts": []}'
    assert not list((repo / STUDY / "sittings").iterdir())  # no sitting.json came back


def test_a_sitting_its_call_would_cut_off_before_its_pack_is_refused(tmp_path):
    """A device call runs 10 minutes at most: a sitting of more than 9.5 would be ended before
    its pack, its sweep outliving the call, and its progress lost. Refused before anything runs."""
    argv = [sys.executable, str(SITTING), "pooling-bigfish", "--smoke", "--no-install"]
    argv += ["--minutes", "9.6", "--storage", str(tmp_path / "repo")]
    env = {**os.environ, "OUT": str(tmp_path / "out")}
    run = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "ends the sitting before its pack; at most 9.5" in run.stderr
    assert not (tmp_path / "out").exists()  # nothing ran
    longer = subprocess.run(
        [*argv[:-2], "--call-minutes", "60", "--help"], capture_output=True, text=True, timeout=60
    )
    assert longer.returncode == 0 and "--call-minutes" in longer.stdout


def test_the_progress_of_a_sitting_is_never_the_last_sittings(tmp_path):
    """On the node the study's folder holds the committed report, the last sitting's: where this
    sitting's report did not run (cut off), its progress is unknown, not that report's."""
    import time

    exp = tmp_path / STUDY
    (exp / "report").mkdir(parents=True)
    final = "variant,seed,env_steps,status\nA,0,8000,INCOMPLETE\n"
    (exp / "report" / "final.csv").write_text(final)
    started = time.time() + 1  # the sweep's start, after the report came in
    assert study_sitting.progress(exp, started) == []
    assert study_sitting.progress(exp, started - 60)[0]["env_steps"] == "8000"
