"""Spec keys overridden on the command line (issue 40, item 7): `--games`, `--seeds` and
Hydra-style `key=value` for any key, validated as the file is, errors naming the override,
recorded in sweep.yaml; the same on validate, plan, run, ablate (resume refuses them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlsweep.cli import main
from rlsweep.errors import SpecError
from rlsweep.spec import overrides
from rlsweep.spec.spec import SweepSpec

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "search_spaces" / "demo.yaml")
SEARCH = [
    "params.precision=fp32",
    "search.algorithm=random",
    "search.num_samples=8",
    "space.lr={loguniform: [1e-4, 1e-3]}",
]


def test_an_override_is_a_key_path_and_a_yaml_value():
    o = overrides.parse("space.lr={loguniform: [1e-4, 1e-3]}")
    assert o.path == ("space", "lr") and o.value == {"loguniform": [1e-4, 1e-3]}
    assert overrides.parse("search.num_samples=8").value == 8
    assert overrides.parse("params.precision=fp32").value == "fp32"
    assert overrides.list_flag("--seeds", "seeds", "0,1,2").value == [0, 1, 2]
    assert overrides.list_flag("--games", "games", "bigfish").text == "--games bigfish"
    for bad in ("params.precision", "=fp32", "params..lr=1", "--games=x"):
        with pytest.raises(SpecError, match="allowed: KEY=VALUE"):
            overrides.parse(bad)
    with pytest.raises(SpecError, match=r"--seeds 0,,1: allowed: a comma-separated list"):
        overrides.list_flag("--seeds", "seeds", "0,,1")


def test_overrides_set_any_key_and_are_validated_as_the_file_is():
    spec = SweepSpec.from_yaml(DEMO, overrides=[*SEARCH, overrides.parse("seeds=[0, 1, 2]")])
    assert spec.params["precision"] == "fp32" and spec.params["num_levels"] == 200  # merged
    assert spec.search.algorithm == "random" and spec.search.num_samples == 8
    assert spec.space["lr"].to_raw() == {"loguniform": [1e-4, 1e-3]}  # 1e-4: a number
    assert spec.seeds == [0, 1, 2] and spec.num_trials == 3 * 2 * 8
    assert spec.default_warnings() == []
    # An error at a key an override set names the override, as the file's would name the file.
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(DEMO, overrides=["params.precision=fp33", "search.num_samples=0"])
    assert [str(x) for x in e.value.errors] == [
        f"{DEMO}: search.num_samples (from search.num_samples=0): got 0; allowed: an integer >= 1",
        f"{DEMO}: params.precision (from params.precision=fp33): got 'fp33' (did you mean "
        "'fp32'?); allowed: auto, fp32, tf32, bf16",
    ]
    with pytest.raises(SpecError, match=r"space.lr \(from space.lr=\{loguniform.*\): a sampled"):
        SweepSpec.from_yaml(DEMO, overrides=SEARCH[-1:])  # the demo's grid search
    with pytest.raises(SpecError, match=r"gamez \(from gamez=\[x\]\): unknown key \(did you mean"):
        SweepSpec.from_yaml(DEMO, overrides=["gamez=[x]"])
    with pytest.raises(SpecError, match=r"games.x=1: games is not a mapping"):
        SweepSpec.from_yaml(DEMO, overrides=["games.x=1"])


def test_an_override_sets_a_key_the_file_gets_wrong(tmp_path):
    """The file was validated alone before the command line's keys were set, so no override or
    flag could fix a key it got wrong (`--budget 20000` over `budget: 100`), and a bad override
    was not reported while the file had errors. An error at a key an override set a key under
    names it too."""
    f = tmp_path / "s.yaml"
    f.write_text("name: s\ngames: [coinrun, coinrun]\nbudget: 100\nsearch: {algorithm: randm}\n")
    games = overrides.list_flag("--games", "games", "coinrun")
    spec = SweepSpec.from_yaml(f, budget=20_000, overrides=[games, "search.algorithm=grid"])
    assert (spec.games, spec.budget, spec.search.algorithm) == (["coinrun"], 20_000, "grid")
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(f, budget=20_000, overrides=["search.algorithm=grid", "params.lr.x=3"])
    assert [str(x).split(": ", 1)[1] for x in e.value.errors] == [
        "games: got ['coinrun', 'coinrun']; allowed: a non-empty list of distinct games",
        "params.lr (from params.lr.x=3): got {'x': 3}; allowed: a number > 0",
    ]
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n")  # not a spec: said so, not a traceback from the override
    with pytest.raises(
        SpecError, match=r"a spec is a mapping of keys \(name, games, ...\), got list"
    ):
        SweepSpec.from_yaml(listed, budget=20_000, overrides=["search.algorithm=grid"])


def test_games_and_seeds_flags_and_what_sweep_yaml_records(tmp_path):
    from rlsweep.experiment.experiment_dir import SWEEP_FILE, record_run, sweep_spec

    games = overrides.list_flag("--games", "games", "BigFish")
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(DEMO, overrides=[games])
    assert str(e.value) == (
        f"{DEMO}: games[0] (from --games BigFish): got 'BigFish' (did you mean 'bigfish'?); "
        "allowed: bigfish, bossfight, caveflyer, chaser, climber, coinrun, dodgeball, fruitbot, "
        "heist, jumper, leaper, maze, miner, ninja, plunder, starpilot"
    )
    given = [overrides.list_flag("--games", "games", "bigfish,leaper"), "params.precision=fp32"]
    spec = SweepSpec.from_yaml(DEMO, budget=16384, overrides=given)
    assert spec.games == ["bigfish", "leaper"] and spec.budget == 16384
    record_run(spec, str(tmp_path), address=None, instance=None, wandb=None)
    text = (tmp_path / SWEEP_FILE).read_text()
    assert text.splitlines()[0] == (
        "# overridden on the command line: --games bigfish,leaper params.precision=fp32"
    )
    assert sweep_spec(tmp_path) == spec  # the spec that ran, read back
    # --budget and --storage name themselves too.
    with pytest.raises(SpecError, match=r"budget \(from --budget 1000\): got 1000; allowed: >="):
        SweepSpec.from_yaml(DEMO, budget=1000)
    with pytest.raises(SpecError, match=r"storage_path \(from --storage \): got ''"):
        SweepSpec.from_yaml(DEMO, storage_path="")


def test_the_cli_takes_overrides_on_validate_plan_run_and_ablate(tmp_path, monkeypatch, capsys):
    import rlsweep.results.ablate
    import rlsweep.run.sweep

    assert main(["validate", DEMO, *SEARCH, "--games", "bigfish", "--seeds", "0,1,2"]) == 0
    assert f"{DEMO}: ok — 48 trials of 12,288 env steps" in capsys.readouterr().out
    sampled = ["search.algorithm=random", "space.lr={loguniform: [1e-4, 1e-3]}"]
    assert main(["plan", DEMO, "--seeds", "0,1,2", *sampled, "search.num_samples=2"]) == 0
    assert "demo: 12 trials x budget" in capsys.readouterr().out
    # Without a sampled parameter, each trial would run twice alike.
    assert main(["plan", DEMO, "search.num_samples=2"]) == 2
    err = capsys.readouterr().err
    assert "demo.yaml: search.num_samples: got 2 with no sampled parameter in space" in err
    assert main(["validate", DEMO, "--games", "BigFish"]) == 2
    assert "games[0] (from --games BigFish): got 'BigFish' (did you mean" in capsys.readouterr().err

    ran = []

    def run_sweep(spec, **kw):
        ran.append(spec)
        raise SpecError(None, "", "stub: not run")

    monkeypatch.setattr(rlsweep.run.sweep, "run_sweep", run_sweep)
    monkeypatch.chdir(tmp_path)
    # The command: the model ablation cut down to one game and three seeds at 4M steps.
    assert (
        main(["ablate", "model", "--games", "bigfish", "--seeds", "0,1,2", "--budget", "4e6"]) == 2
    )
    (spec,) = ran
    assert (spec.games, spec.seeds, spec.budget) == (["bigfish"], [0, 1, 2], 4_000_000)
    assert (
        spec.num_trials == 15
        and spec.variants == rlsweep.results.ablate.load_ablation("model").variants
    )
    out = capsys.readouterr().out
    assert "rlsweep: ablation ablation-model: 15 trials x 4,000,000 env steps" in out
    assert main(["run", DEMO, "params.num_levels=100", "--seeds", "3"]) == 2
    assert ran[-1].params["num_levels"] == 100 and ran[-1].seeds == [3]
    # A resume runs the sweep its sweep.yaml records: an override is refused, saying so.
    assert main(["resume", str(tmp_path / "results" / "demo"), "params.lr=1e-3"]) == 2
    err = capsys.readouterr().err
    assert "params.lr=1e-3: a resume runs the sweep as its sweep.yaml records it" in err
