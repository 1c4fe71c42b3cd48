import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlsweep.cli import main
from rlsweep.experiment.experiment_dir import record_run
from rlsweep.spec.spec import SweepSpec

DEMO = str(Path(__file__).resolve().parents[1] / "search_spaces" / "demo.yaml")


def test_validate_ok(capsys):
    assert main(["validate", DEMO]) == 0
    assert "ok — 4 trials of 12,288 env steps" in capsys.readouterr().out


def test_validate_reports_file_key_and_allowed_values(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nspace:\n  framestack: [none, gap5]\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: space.framestack[1]: got 'gap5' (did you mean 'gap'?); allowed: none, " in err


def test_budget_is_written_as_in_the_spec_language(capsys):
    """`--budget 25e6` (YAML's notation) on plan, as on run and ablate."""
    assert main(["plan", DEMO, "--budget", "25e6"]) == 0
    out = capsys.readouterr().out
    assert "4 trials x budget = 100,000,000 env steps" in out


def test_budget_rejects_fractions(capsys):
    from rlsweep.cli import env_steps

    assert env_steps("25e6") == 25_000_000 and env_steps("4096") == 4096
    with pytest.raises(SystemExit):
        main(["plan", DEMO, "--budget", "1.5"])
    assert "allowed: a whole number of env steps > 0" in capsys.readouterr().err


# --- the real CLI, as a subprocess (issue 10: validate = what run checks; --budget 25e6) -------
def rlsweep(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed `rlsweep` console script (the one users run), else `python -m`."""
    script = Path(sys.executable).parent / "rlsweep"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "rlsweep.cli"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def _spec(tmp_path: Path, text: str, name: str = "s.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BIG = "name: big\ngames: [coinrun]\nseeds: [0]\nbudget: 16384\nparams: {num_cpus: 64}\n"


def test_validate_refuses_a_trial_too_big_for_this_machine(tmp_path):
    spec = _spec(tmp_path, BIG)
    p = rlsweep("validate", spec)
    assert p.returncode == 2, p.stderr
    cpus = os.cpu_count()
    assert p.stderr.strip() == (
        f"rlsweep: error: {spec}: params.num_cpus: a trial needs 64 CPUs (num_cpus 64 + "
        f"num_env_runners 0); this machine has {cpus}"
    )
    # --num-cpus is run's flag too: the same check, against the CPUs run would give Ray.
    p = rlsweep("validate", spec, "--num-cpus", "64")
    assert p.returncode == 0 and "ok — 1 trials of 16,384 env steps" in p.stdout, p.stderr


def test_validate_plan_and_run_decide_sixteen_trials_on_an_80_gb_gpu(tmp_path, monkeypatch, capsys):
    """K = 16 trials of the default batch on one 80 GB GPU with 16 CPUs: refused in fp32 by
    all three before Ray starts (the one check, rlsweep.plan.placement.check_fits), run in bf16.
    validate and run read this machine from placement.local_machine: an H100 box here."""
    import ray

    from rlsweep.plan import placement

    h100 = placement.Machine(cpus=16, gpus=1, gpu_memory_gib=79.6)
    monkeypatch.setattr(placement, "local_machine", lambda cpus=None, look_up_gpus=True: h100)
    base = f"games: [coinrun]\nseeds: {list(range(16))}\nbudget: 16384\n"
    fp32 = _spec(
        tmp_path, base + "name: k16\nparams: {num_gpus: 0.0625, num_cpus: 1, precision: fp32}\n"
    )
    storage = tmp_path / "results"
    for args in (
        ["validate", fp32],
        ["plan", fp32, "--num-cpus", "16", "--gpus", "1", "--gpu-memory", "79.6"],
        ["run", fp32, "--storage", str(storage)],
    ):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert f"{fp32}: params.num_gpus: got 0.0625: a trial's share of " in err, err
        assert "5.0 GiB (16 trials per GPU) and it needs ~9.5 GiB" in err
        assert err.strip().endswith("allowed: num_gpus >= 0.119")
    assert not ray.is_initialized() and not storage.exists()
    bf16 = _spec(
        tmp_path,
        base + "name: b\nparams: {num_gpus: 0.0625, num_cpus: 1, precision: bf16}\n",
        "b.yaml",
    )
    assert main(["validate", bf16]) == 0
    assert main(["plan", bf16, "--num-cpus", "16", "--gpus", "1", "--gpu-memory", "79.6"]) == 0
    assert "16 at a time on 16 CPUs, 1 GPU" in capsys.readouterr().out


def test_validate_and_run_refuse_a_bad_smoke_section(tmp_path):
    base = "name: abl\ngames: [coinrun]\nseeds: [0]\nbudget: 16384\nvariants: {a: {}, b: {}}\n"
    huge = _spec(tmp_path, base + "smoke: {params: {minibatch_size: 1000000000}}\n", "huge.yaml")
    typo = _spec(tmp_path, base + "smoke: {gamez: [leaper]}\n", "typo.yaml")
    for args in (["validate", huge], ["run", huge]):
        p = rlsweep(*args, "--storage", str(tmp_path / "results"))
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert f"rlsweep: error: {huge}: smoke.params.minibatch_size: got 1000000000" in p.stderr
    assert not (tmp_path / "results").exists()  # refused before anything ran
    p = rlsweep("validate", typo)
    assert p.returncode == 2
    assert f"{typo}: smoke.gamez: unknown key (did you mean 'games'?)" in p.stderr


def test_budget_25e6_on_run_plan_and_ablate(tmp_path):
    """The spec language's 25e6 on all three; run and ablate stop at the resource check (a
    trial of 2 CPUs, --num-cpus 1) after printing the budget they would run."""
    p = rlsweep("plan", DEMO, "--budget", "25e6")
    assert p.returncode == 0, p.stderr
    assert "4 trials x budget = 100,000,000 env steps" in p.stdout
    two = "games: [coinrun]\nseeds: [0]\nbudget: 16384\nparams: {num_cpus: 2}\n"
    run = _spec(tmp_path, "name: r\n" + two, "r.yaml")
    ablation = _spec(tmp_path, "name: a\nvariants: {x: {}, y: {}}\n" + two, "a.yaml")
    for command, spec, trials in (("run", run, 1), ("ablate", ablation, 2)):
        p = rlsweep(command, spec, "--budget", "25e6", "--num-cpus", "1", "--storage", "res")
        assert f"{trials} trials x 25,000,000 env steps" in p.stdout, p.stderr
        assert p.returncode == 2 and "a trial needs 2 CPUs" in p.stderr and "has 1" in p.stderr


# --- in-process: main([...]) ------------------------------------------------------------------
def test_defaults_the_spec_did_not_choose_are_warned(tmp_path, capsys):
    minimal = _spec(tmp_path, "name: minimal\n")
    for command in ("validate", "plan"):
        assert main([command, minimal]) == 0
        err = capsys.readouterr().err.splitlines()
        assert err == [
            f"rlsweep: warning: {minimal}: budget: not set; each trial runs the default "
            "25,000,000 env steps",
            f"rlsweep: warning: {minimal}: games: not set; trials run the default game coinrun",
            f"rlsweep: warning: {minimal}: seeds: not set; trials run the default seed [0] only "
            "(no confidence interval)",
        ]
    # A --budget on the command line is a choice too; the demo chooses all three.
    assert main(["validate", minimal, "--budget", "16384"]) == 0
    assert "budget" not in capsys.readouterr().err
    assert main(["validate", DEMO]) == 0
    assert capsys.readouterr().err == ""


def test_plan_takes_runs_overrides(tmp_path, capsys):
    assert main(["plan", DEMO, "--storage", str(tmp_path), "--smoke"]) == 2  # demo: no smoke:
    assert "demo.yaml: smoke: this spec has no smoke: section (--smoke)" in capsys.readouterr().err
    study = str(Path(DEMO).with_name("study.yaml"))
    assert main(["plan", study, "--smoke", "--budget", "2048"]) == 0
    out = capsys.readouterr().out
    assert "framestack-study-smoke: 2 trials x budget = 4,096 env steps" in out


def test_every_subcommands_help_ends_with_examples():
    import argparse

    from rlsweep.cli import parser

    def commands(p: argparse.ArgumentParser, path: tuple[str, ...] = ()):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield path + (name,), sub
                    yield from commands(sub, path + (name,))

    found = dict(commands(parser()))
    assert ("cluster", "ec2") in found and ("report",) in found
    for path, sub in found.items():
        text = sub.format_help()
        assert "\nexamples:\n  rlsweep " in text, f"rlsweep {' '.join(path)} --help: no examples"


def test_help_version_and_the_ablations(capsys):
    from rlsweep import __version__
    from rlsweep.results.ablate import ablation_names

    for argv in (["--version"], ["ablate", "--help"], ["validate", "--help"], ["run", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
        out = capsys.readouterr().out
        if argv == ["--version"]:
            assert out.strip() == f"rlsweep {__version__}"
        else:
            assert f"examples:\n  rlsweep {argv[0]} " in out
            assert ("NAME" if argv[0] == "ablate" else "sweep spec YAML (e.g.") in out
    with pytest.raises(SystemExit):
        main(["ablate", "--help"])
    out = capsys.readouterr().out
    assert f"ablations: {', '.join(ablation_names())}" in out and "augmentations" in out
    assert "studies: pooling-bigfish" in out  # found by name as the ablations are


def test_report_of_what_is_no_results_dir_says_what_report_takes(tmp_path, monkeypatch, capsys):
    """A newcomer's `rlsweep report typo.yaml` said "no such directory" of a file, and a dir
    without trials did not say what report reads; a spec points at its sweep's results dir."""
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, "name: lost\ngames: [coinrun]\nseeds: [0]\nbudget: 16384\n")
    assert main(["report", spec]) == 2
    assert f"a spec, not a results dir; its sweep has not run yet: rlsweep run {spec}" in (
        capsys.readouterr().err
    )
    record_run(SweepSpec.from_yaml(spec), "results/lost", address=None, instance=None, wandb=None)
    assert main(["report", spec]) == 2
    assert "its sweep's report: rlsweep report " in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: b\ngames: [BigFish]\n")
    (tmp_path / "empty").mkdir()
    for target, what in ((broken, "a file, not a results dir"), ("empty", "no Tune trial")):
        assert main(["report", str(target)]) == 2
        err = capsys.readouterr().err
        assert what in err and "report takes a sweep's results dir, <storage_path>/<name>" in err


def test_resume_of_a_spec_points_at_its_results_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, "name: lost\ngames: [coinrun]\nseeds: [0]\nbudget: 16384\n")
    assert main(["resume", spec]) == 2
    err = capsys.readouterr().err
    assert "its sweep resumes with: rlsweep resume results/lost" in err
    assert f"(it holds no sweep yet: rlsweep run {spec})" in err
    assert main(["resume", str(tmp_path / "results" / "lost")]) == 2
    assert "resume takes a sweep's results dir, <storage_path>/<name>" in capsys.readouterr().err
    # A run that stopped before Tune took it up: `run` again, over it.
    record_run(SweepSpec.from_yaml(spec), "results/lost", address=None, instance=None, wandb=None)
    assert main(["resume", spec]) == 2
    assert f"(it stopped before Tune started it: rlsweep run {spec} --overwrite)" in (
        capsys.readouterr().err
    )


def test_failed_trials_exit_1_for_run_and_ablate(tmp_path):
    """run and ablate share the exit rule: any trial that did not end (TERMINATED, or stopped
    early by the sweep's scheduler) -> 1."""
    import pandas as pd

    from rlsweep.run.sweep import EXIT_FAILED_TRIALS, SweepResult

    spec = SweepSpec(name="x")

    def result(*status: str, early: frozenset = frozenset()) -> SweepResult:
        dirs = [f"{tmp_path}/x/t{i}" for i in range(len(status))]
        return SweepResult(
            spec, tmp_path, pd.DataFrame({"status": status, "trial_dir": dirs}), early
        )

    assert result("TERMINATED", "TERMINATED").exit_code == 0
    assert result("TERMINATED", "INCOMPLETE").exit_code == EXIT_FAILED_TRIALS == 1
    assert result("TERMINATED", "INCOMPLETE", early=frozenset({"t1"})).exit_code == 0
    assert result("ERROR", "INCOMPLETE", early=frozenset({"t1"})).exit_code == 1


def test_launcher_bad_input_is_a_spec_error(tmp_path, capsys):
    """One error type: a launcher's bad flag exits 2 through main's one handler."""
    from rlsweep.errors import LaunchError, SpecError
    from rlsweep.launch.ec2 import WorkerType

    with pytest.raises(LaunchError) as e:
        WorkerType.parse("c6i.8xlarge:3")
    assert isinstance(e.value, SpecError)
    bad = _spec(tmp_path, "name: s\nparams: {lr: -1}\n")
    argv = ["cluster", "ec2", str(tmp_path / "c.yaml"), "--name", "s", "--image", "ami-0123abcd"]
    assert main([*argv, "--install", "rlsweep", "--spec", bad]) == 2  # the spec is validated
    assert f"{bad}: params.lr: got -1" in capsys.readouterr().err


def test_validate_plan_and_report_do_not_load_torch_or_ray():
    # `rlsweep validate` on a CPU sweep, run as users run it: importing torch (~1 s, ~750
    # modules) is for trials and for sweeps that ask for GPUs, and Ray for a sweep that runs
    # or a cluster to check against, not for checking a spec.
    code = (
        "import sys; from rlsweep.cli import main; "
        "rc = main(['validate', 'search_spaces/demo.yaml']); "
        "import rlsweep.results.report, rlsweep.plan.plan; "
        "print('torch' in sys.modules, 'ray' in sys.modules); sys.exit(rc)"
    )
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "False False"


def test_a_resume_takes_the_options_of_where_a_sweep_runs_not_the_specs():
    from rlsweep.cli import parser, resume_options

    argv = ["max_concurrent=6", "--num-cpus", "16", "--budget", "1e6", "--smoke", "--wandb"]
    argv += ["offline", "--verbose", "--seeds", "0,1", "--wandb", "x=1", "--address=auto"]
    kept = resume_options(argv)
    assert kept == [
        "--num-cpus",
        "16",
        "--wandb",
        "offline",
        "--verbose",
        "--wandb",
        "--address=auto",
    ]
    args = parser().parse_args(["resume", "results/demo", *kept])
    assert (args.num_cpus, args.wandb, args.address, args.overrides) == (16, "auto", "auto", [])
    assert resume_options(["--smoke", "--storage", "s3://b/x", "lr=1e-4"]) == []


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--steps-per-s", "0"], "argument --steps-per-s: got '0'; allowed: a number > 0"),
        (["--steps-per-s", "nan"], "argument --steps-per-s: got 'nan'; allowed: a number > 0"),
        (["--gpus", "1", "--gpu-memory", "0"], "argument --gpu-memory: got '0'; allowed: a n"),
        (["--gpus", "-1"], "argument --gpus: got '-1'; allowed: a number >= 0"),
        (["--instances", "0"], "argument --instances: got '0'; allowed: an integer >= 1"),
    ],
)
def test_plan_refuses_flags_that_no_machine_has(flags, message, capsys):
    """Each would have divided by zero, planned a negative time, or blamed a spec key."""
    with pytest.raises(SystemExit) as e:
        main(["plan", "search_spaces/demo.yaml", *flags])
    assert e.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "parent"), [("--wandb-project=p", "--wandb"), ("--dashboard-port=9999", "--dashboard")]
)
def test_a_setting_without_the_flag_it_sets_is_refused(flag, parent, capsys):
    """`--wandb-project p` alone logged nothing and `--dashboard-port` alone started no dashboard:
    each was silently ignored. Refused before anything runs, naming the flag it needs."""
    assert main(["run", "search_spaces/demo.yaml", flag, "--num-cpus", "1"]) == 2
    assert f"{flag.split('=')[0]}: given without {parent}, whose setting it is" in (
        capsys.readouterr().err
    )


def test_an_address_with_no_cluster_is_bad_input_at_once(capsys):
    """Ray's join retried for minutes, its log lines on the console, before a traceback."""
    assert main(["validate", "search_spaces/demo.yaml", "--address", "127.0.0.1:1"]) == 2
    assert "--address 127.0.0.1:1: no Ray cluster to join (" in capsys.readouterr().err


def test_validate_and_plan_take_a_shipped_ablations_name_as_ablate_does(capsys):
    assert main(["validate", "augmentations", "--smoke"]) == 0
    assert "augmentations: ok — 14 trials of 1,024 env steps" in capsys.readouterr().out
    assert main(["plan", "pooling-bigfish", "--gpus", "1", "--num-cpus", "16"]) == 0


def test_the_trials_table_prints_env_steps_as_counts_and_errors_only_where_there_are_some():
    """run's and resume's table (`SweepResult.trials`): env steps printed 12378.0 (a float
    column) and an error column blank on every row of a sweep without errors."""
    import pandas as pd

    from rlsweep import metrics as M
    from rlsweep.cli import _table

    trials = pd.DataFrame(
        {
            "game": ["coinrun", "coinrun"],
            "seed": [0, 1],
            M.ENV_STEPS: [12378.0, 12420.0],
            M.TEST_RETURN_NORM: [0.1875, -0.0625],
            "status": ["TERMINATED", "TERMINATED"],
            "error": pd.Series(["", ""], dtype="string"),
            "trial_dir": ["results/demo/a", "results/demo/b"],
        }
    )
    header, *rows = _table(trials).splitlines()
    assert header.split() == ["game", "seed", M.ENV_STEPS, M.TEST_RETURN_NORM, "status"]
    assert [row.split()[2] for row in rows] == ["12,378", "12,420"]
    # Sampled values to 3 significant digits (two configurations read 0.001 alike), a grid's as
    # written, the scores at the table's precision.
    searched = trials.assign(entropy_coeff=[0.0013214, 0.0010731], lr=[5e-4, 3e-4])
    header, *rows = _table(searched).splitlines()
    assert [row.split()[-2:] for row in rows] == [["0.00132", "0.0005"], ["0.00107", "0.0003"]]
    assert [row.split()[3] for row in rows] == ["0.188", "-0.062"]
    failed = trials.assign(
        status=["TERMINATED", "ERROR"],
        error=pd.Series(["", "RuntimeError: boom"], dtype="string"),
        **{M.ENV_STEPS: [12378.0, float("nan")]},  # it never reported
    )
    header, *rows = _table(failed).splitlines()
    assert header.split()[-1] == "error"
    assert rows[1].split()[2] == "?" and rows[1].endswith("ERROR RuntimeError: boom")
    # A sweep stopped before any trial started: said so, not pandas' "Empty DataFrame".
    assert _table(failed.iloc[:0]) == "no trial started"


def _carried_sweep(root: Path, env_steps: int) -> Path:
    """An experiment dir of one trial that has reached `env_steps` of its 16,384, as pack takes
    it (Tune's state, here naming no trial: nothing for pack's reconcile to change)."""
    import json

    from rlsweep import metrics as M

    spec = SweepSpec(name="carried", games=["coinrun"], seeds=[0], budget=16384)
    exp = root / "carried"
    trial = exp / "coinrun_s0_00000"
    trial.mkdir(parents=True)
    (exp / "sweep.yaml").write_text(spec.to_yaml())
    (exp / "experiment_state-2026-11-30_00-00-00.json").write_text('{"trial_data": []}')
    (trial / "params.json").write_text(json.dumps(spec.trials()[0].to_dict()))
    row = {M.TUNE_ITERATION: 1, M.ENV_STEPS: env_steps, M.TEST_FRESH: True}
    row |= dict.fromkeys([M.TRAIN_RETURN, M.TEST_RETURN], 5.0)
    row |= dict.fromkeys([M.TRAIN_RETURN_NORM, M.TEST_RETURN_NORM, M.GAP_NORM], 0.0)
    (trial / "result.json").write_text(json.dumps(row) + "\n")
    return exp


def test_unpack_of_a_finished_sweep_suggests_its_report_not_a_resume(tmp_path, capsys):
    """unpack's next step by resume's own rule (`resume_points`): where every trial has ended a
    resume would run nothing, so it says `rlsweep report`; an unfinished sweep's, `resume`."""
    for env_steps, name in ((16384, "finished"), (8192, "unfinished")):
        exp = _carried_sweep(tmp_path / name / "node1", env_steps)
        parts = str(tmp_path / name / "parts")
        assert main(["pack", str(exp), "--out", parts]) == 0
        capsys.readouterr()
        assert main(["unpack", parts, "--dest", str(tmp_path / name / "node2")]) == 0
        target = tmp_path / name / "node2" / "carried"
        next_step = (
            f"every trial has ended; report it: rlsweep report {target}"
            if name == "finished"
            else f"resume it: rlsweep resume {target}"
        )
        assert capsys.readouterr().out.splitlines() == [str(target), next_step]
    # A sweep.yaml recorded under rules since changed: unpacked all the same, resume suggested.
    exp = _carried_sweep(tmp_path / "old" / "node1", 8192)
    (exp / "sweep.yaml").write_text("name: carried\nbudgett: 1\n")
    assert main(["pack", str(exp), "--out", str(tmp_path / "old" / "parts")]) == 0
    capsys.readouterr()
    assert main(["unpack", str(tmp_path / "old" / "parts"), "--dest", str(tmp_path / "o2")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("resume it: rlsweep resume ")


def test_pack_and_report_refuse_sizes_and_counts_below_one_by_flag(tmp_path, capsys):
    """`pack --part-mb 0` packed the whole dir, then a traceback (exit 1); `report --resamples
    0` an IndexError, -5 an error naming no flag."""
    exp = _carried_sweep(tmp_path, 8192)
    for argv in (
        ["pack", str(exp), "--out", str(tmp_path / "p"), "--part-mb", "0"],
        ["pack", str(exp), "--out", str(tmp_path / "p"), "--max-mb", "-1"],
        ["report", str(exp), "--resamples", "0"],
        ["report", str(exp), "--resamples", "-5"],
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2, argv
        assert f"argument {argv[-2]}: got {argv[-1]!r}; allowed: " in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


def test_pack_counts_apart_the_checkpoints_it_drops_to_fit(tmp_path, capsys):
    """A checkpoint left out to fit --max-mb is one a resume would load: the summary counted it
    among those "no resume loads"."""
    import random

    from tune_state import report, trial_entry, write_state

    from rlsweep.manifest import write_manifest

    exp = tmp_path / "study"
    checkpoint = exp / "t" / "checkpoint_000000"
    checkpoint.mkdir(parents=True)
    (checkpoint / "weights.bin").write_bytes(random.Random(0).randbytes(1 << 20))
    write_manifest(str(checkpoint), 2, 512.0, report(2))
    (exp / "t" / "result.json").write_text("")
    (exp / "sweep.yaml").write_text("name: study\n")
    write_state(exp, [trial_entry(exp, "t", [("t/checkpoint_000000", 2)], last=2)])
    assert main(["pack", str(exp), "--out", str(tmp_path / "p"), "--max-mb", "0.5"]) == 0
    out, err = capsys.readouterr()
    assert "t/checkpoint_000000: left out to fit --max-mb 0.5: its trial starts anew" in err
    assert "left out: 0 checkpoints no resume loads" in out
    # The size packed, not the dir's: "study (1.0 MiB) in 1 part(s), 0.0 MiB gzipped" read as a
    # hundredfold compression of what was left out.
    assert f"{tmp_path / 'p'}: study, 0.0 of its 1.0 MiB, in 1 part(s) of 0.0 MiB gzipped" in out


def test_run_and_ablate_with_smoke_both_say_its_scores_are_a_random_policys(
    tmp_path, monkeypatch, capsys
):
    """`run --smoke` printed no word that its scores mean nothing while `ablate --smoke` did:
    both end with the one note (SMOKE_NOTE), naming what they ran. The sweep itself is left
    out (run_sweep returns a finished table at once)."""
    import pandas as pd

    import rlsweep.results.ablate
    import rlsweep.run.sweep
    from rlsweep.run.sweep import SweepResult

    def run_sweep(spec: SweepSpec, **where) -> SweepResult:
        trials = pd.DataFrame({"status": ["TERMINATED"], "trial_dir": [f"{tmp_path}/t0"]})
        return SweepResult(spec, tmp_path / spec.name, trials)

    def write_ablation_table(spec: SweepSpec, path, **kw) -> Path:
        (tmp_path / "ablation.md").write_text("| game |\n")
        return tmp_path / "ablation.md"

    monkeypatch.setattr(rlsweep.run.sweep, "run_sweep", run_sweep)
    monkeypatch.setattr(rlsweep.results.ablate, "write_ablation_table", write_ablation_table)
    framestack = str(Path(DEMO).with_name("framestack.yaml"))
    storage = ["--storage", str(tmp_path / "results")]
    for command, spec, budget, what in (
        ("run", framestack, "4,096", "sweep"),
        ("ablate", "augmentations", "1,024", "ablation"),
    ):
        assert main([command, spec, "--smoke", *storage]) == 0
        err = capsys.readouterr().err.splitlines()
        assert [line for line in err if line.startswith("rlsweep: smoke run: ")] == [
            f"rlsweep: smoke run: {budget} env steps per trial is far too few to learn anything, "
            "so every variant scores like a random policy and the cells look alike; it checks "
            f"the machinery, not the {what} (drop --smoke for the real budget)"
        ], err
