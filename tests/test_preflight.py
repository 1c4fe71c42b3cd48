"""What the commands check before Ray starts (issue 40, items 1-3): storage that cannot be
used, a sweep too long to start unasked, and flags that say what they mean."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from rlsweep.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "search_spaces" / "demo.yaml")
GAMES = (
    "[bigfish, bossfight, caveflyer, chaser, climber, coinrun, dodgeball, fruitbot, heist, "
    "jumper, leaper, maze, miner, ninja, plunder, starpilot]"
)
HUGE = (
    f"name: huge\nextends: cobbe2019\ngames: {GAMES}\nseeds: [0, 1, 2, 3, 4]\nbudget: 25e6\n"
    "space:\n  framestack: [none, stack, gap]\n  lr: {loguniform: [1e-4, 1e-3]}\n"
    "search: {algorithm: random, num_samples: 20}\n"
)


def _ray_started() -> bool:
    import sys

    return "ray" in sys.modules and sys.modules["ray"].is_initialized()


# --- 1. storage -----------------------------------------------------------------------------


def test_a_local_storage_that_cannot_be_made_or_written_is_bad_input(tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for storage, cause in (
        ("/proc/nope", "/proc/nope/demo: cannot be written: No such file or directory"),
        (str(a_file / "sub"), f"{a_file}/sub/demo: cannot be made: {a_file} is a file"),
    ):
        for command in ("validate", "plan", "run"):
            assert main([command, DEMO, "--storage", storage]) == 2, command
            err = capsys.readouterr().err.strip()
            assert err == f"rlsweep: error: {DEMO}: storage_path: {cause}"
    assert main(["resume", "/proc/nope/demo"]) == 2
    assert "error: /proc/nope/demo: cannot be written" in capsys.readouterr().err
    assert not _ray_started()
    # A path that can be made passes, and the check leaves nothing behind.
    from rlsweep.storage import check_storage

    check_storage(tmp_path / "new" / "results" / "demo")
    assert not (tmp_path / "new").exists()


def test_an_s3_bucket_that_cannot_be_reached_or_read_is_bad_input(s3_server, monkeypatch, capsys):
    bucket = f"s3://{s3_server.bucket}/sweeps"
    assert main(["validate", DEMO, "--storage", bucket]) == 0
    capsys.readouterr()
    missing = "s3://rlsweep-no-such-bucket/sweeps"
    for command in ("validate", "plan", "run"):
        assert main([command, DEMO, "--storage", missing]) == 2
        err = capsys.readouterr().err
        assert err.startswith(
            f"rlsweep: error: {DEMO}: storage_path: {missing}/demo: cannot be reached or read "
            "with the credentials at hand: bucket 'rlsweep-no-such-bucket' does not exist"
        ), err
        assert "--no-storage-check" in err
    # --no-storage-check: for a cluster that reaches what this machine cannot
    assert main(["validate", DEMO, "--storage", missing, "--no-storage-check"]) == 0
    capsys.readouterr()
    # No answer (an endpoint nothing listens on): refused at once, saying why.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{port}")
    assert main(["validate", DEMO, "--storage", bucket]) == 2
    err = capsys.readouterr().err
    assert "cannot be reached or read" in err and "NETWORK_CONNECTION" in err
    assert main(["resume", f"{bucket}/demo"]) == 2
    assert "NETWORK_CONNECTION" in capsys.readouterr().err
    assert not _ray_started()


# --- 2. a guard on size ---------------------------------------------------------------------


def test_a_sweep_over_a_week_is_said_long_and_not_started_unasked(tmp_path, monkeypatch, capsys):
    import rlsweep.run.sweep

    huge = tmp_path / "huge.yaml"
    huge.write_text(HUGE)
    monkeypatch.chdir(tmp_path)
    factors = "4,800 trials (20 search.num_samples x 16 games x 5 seeds x 3 space.framestack)"
    for command in ("validate", "plan"):
        assert main([command, str(huge), "--num-cpus", "2"]) == 0
        err = capsys.readouterr().err
        assert err.startswith("rlsweep: warning: estimated wall time 26.2 years on 2 CPUs, over a")
        assert f"{factors} x 25,000,000 env steps each" in err and "--allow-long" in err
    for command, spec in (("run", huge), ("ablate", huge)):
        if command == "ablate":
            spec.write_text(HUGE + "variants: {a: {}, b: {}}\n")
        assert main([command, str(spec), "--num-cpus", "2"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("rlsweep: error: not started: estimated wall")
        assert err[0].endswith("or start it anyway with --allow-long")
    assert not _ray_started() and not (tmp_path / "results").exists()
    ran = []
    monkeypatch.setattr(
        rlsweep.run.sweep, "run_sweep", lambda spec, **kw: ran.append(spec) or 1 / 0
    )
    with pytest.raises(ZeroDivisionError):  # started: the stub stands for the sweep
        main(["run", str(huge), "--num-cpus", "2", "--allow-long"])
    assert ran and "over a week" in capsys.readouterr().err


# --- 3. flags -------------------------------------------------------------------------------


def test_flags_say_what_they_mean(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for argv in (["run", DEMO, "--spot"], ["plan", DEMO, "--spot"]):
        assert main(argv) == 2
        assert "--spot needs --instance TYPE" in capsys.readouterr().err
    for value in ("0", "-3"):
        for command in ("run", "validate", "plan"):
            with pytest.raises(SystemExit) as e:
                main([command, DEMO, "--num-cpus", value])
            assert e.value.code == 2
            err = capsys.readouterr().err
            assert f"argument --num-cpus: got '{value}'; allowed: an integer >= 1" in err
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "each from its last checkpoint (default: 2)" in help_text
    assert "--allow-long" in help_text and "--no-storage-check" in help_text
    # A trial too big for --num-cpus: the error names the flag, not only the spec's key.
    two = tmp_path / "two.yaml"
    two.write_text(
        "name: two\ngames: [coinrun]\nseeds: [0]\nbudget: 16384\nparams: {num_cpus: 2}\n"
    )
    assert main(["validate", str(two), "--num-cpus", "1"]) == 2
    assert (
        "a trial needs 2 CPUs (num_cpus 2 + num_env_runners 0); this machine at --num-cpus 1 "
        "has 1" in capsys.readouterr().err
    )


def test_a_path_for_results_on_a_cluster_of_several_nodes_is_warned():
    """Ray fails a trial on another node than the driver's at its first checkpoint to a path
    that node does not reach: said before the sweep starts (a warning, for every node may
    mount the same filesystem), not a sweep's worth of ERROR trials later."""
    from rlsweep.run.fits import cluster_machine
    from rlsweep.run.preflight import local_storage_on_nodes
    from rlsweep.spec.spec import SweepSpec

    two = cluster_machine({"CPU": 16.0}, [{"CPU": 8.0}, {"CPU": 8.0}])
    local = SweepSpec(name="s", storage_path="/tmp/results")
    assert "the cluster has 2 nodes and the results go to /tmp/results/s, a path" in (
        local_storage_on_nodes(local, two)
    )
    on_s3 = SweepSpec(name="s", storage_path="s3://bucket/sweeps")
    assert local_storage_on_nodes(on_s3, two) is None
    one = cluster_machine({"CPU": 8.0}, [{"CPU": 8.0}])
    assert local_storage_on_nodes(local, one) is None


def test_a_sweep_that_would_repeat_its_trials_is_refused_and_one_recorded_so_still_reads(tmp_path):
    """`search.num_samples: 2` with nothing sampled runs each trial twice alike: validate,
    plan, run and ablate refuse it before Ray starts. A rule of the spec, it also refused the
    sweeps recorded with it (`report`, `resume`, `unpack` read their sweep.yaml): it is a
    check of the sweeps that start."""
    from rlsweep.errors import SpecError
    from rlsweep.experiment.experiment_dir import sweep_spec
    from rlsweep.run import preflight
    from rlsweep.spec.spec import SweepSpec

    spec = SweepSpec(name="r", search={"algorithm": "random", "num_samples": 2})
    (tmp_path / "sweep.yaml").write_text(spec.to_yaml())
    assert sweep_spec(tmp_path) == spec
    with pytest.raises(SpecError, match="search.num_samples: got 2 with no sampled parameter"):
        preflight.check(spec)
