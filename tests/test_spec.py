import dataclasses
import math
from pathlib import Path

import pytest

from rlsweep.spec.spec import Reference, SearchConfig, SpecError, SweepSpec
from rlsweep.spec.validators import rule_of

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(
    [*(ROOT / "search_spaces").glob("*.yaml"), *(ROOT / "search_spaces").glob("studies/*.yaml")]
)
ABLATIONS = sorted(p.stem for p in (ROOT / "search_spaces" / "ablations").glob("*.yaml"))
BASELINES = sorted(p.stem for p in (ROOT / "baselines").glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_spec_validates_and_plans(path):
    from rlsweep.plan.placement import placement
    from rlsweep.plan.plan import make_plan

    spec = SweepSpec.from_yaml(path)
    cpus = max(2, *(placement(t).cpus for t in spec.trials()))  # study.yaml's trials need 5
    assert spec.trials() and make_plan(spec, cpus=cpus).num_trials == spec.num_trials
    if spec.smoke:  # the smoke run fits this 2-core machine
        assert make_plan(spec.smoke_spec(), cpus=2).num_trials == spec.smoke_spec().num_trials


@pytest.mark.parametrize("name", ABLATIONS)
@pytest.mark.parametrize("smoke", [False, True])
def test_every_ablation_validates_and_plans(name, smoke):
    from rlsweep.plan.plan import make_plan
    from rlsweep.results.ablate import load_ablation

    spec = load_ablation(name, smoke=smoke)
    assert len(spec.variants) >= 2
    plan = make_plan(spec, cpus=2)
    assert plan.num_trials == len(spec.games) * len(spec.seeds) * len(spec.variants)
    if smoke:
        assert spec.name.endswith("-smoke") and plan.est_wall_s < 600


def test_the_six_ablations_ship():
    assert sorted(ABLATIONS) == [
        "algorithm",
        "augmentations",
        "framestack",
        "lr_schedule",
        "model",
        "reward_shaping",
    ]


def test_the_four_baselines_ship():
    assert BASELINES == ["aicrowd_starter", "cleanrl_ppo_procgen", "cobbe2019", "lars12llt"]


@pytest.mark.parametrize("name", BASELINES)
def test_every_baseline_builds_a_valid_trial(name):
    (trial,) = SweepSpec(name="b", extends=name).trials()
    assert trial.minibatch_size <= trial.effective_train_batch_size
    text = (ROOT / "baselines" / f"{name}.yaml").read_text()
    assert text.startswith("#")  # every baseline cites its source


def test_a_spec_takes_gpus_where_any_of_its_trials_does():
    """What this machine's check looks GPUs up for, and what keeps GPU trials in fresh
    processes (rlsweep.run.tune_bridge.reuses_processes)."""
    spec = SweepSpec(name="x", games=["coinrun"], seeds=[0], budget=20_000)
    assert not spec.takes_gpus
    one = dataclasses.replace(spec, variants={"cpu": {}, "gpu": {"num_gpus": 0.5}})
    assert one.takes_gpus


def test_a_spec_that_sets_nothing_runs_the_default_trial():
    from rlsweep.spec.config import TrialConfig

    assert SweepSpec(name="x").trials() == [TrialConfig()]


def test_expansion_is_games_x_seeds_x_grid():
    spec = SweepSpec(
        name="x",
        games=["coinrun", "maze"],
        seeds=[0, 1, 2],
        budget=20_000,
        space={"framestack": ["none", "gap"], "lr": [1e-4, 5e-4]},
    )
    trials = spec.trials()
    assert len(trials) == 2 * 3 * 2 * 2
    assert {(t.game, t.seed, t.framestack, t.lr) for t in trials} == {
        (g, s, f, lr)
        for g in ("coinrun", "maze")
        for s in (0, 1, 2)
        for f in ("none", "gap")
        for lr in (1e-4, 5e-4)
    }
    assert all(t.total_env_steps == 20_000 for t in trials)


def test_yaml_exponent_numbers_are_floats(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(
        "name: s\nbudget: 25e6\nparams:\n  lr: 1e-4\n  entropy_coeff: 5E-3\n  kl_coeff: 2e-1\n"
        "space:\n  kl_target: [1e-2, 2e-2]\n"
    )
    spec = SweepSpec.from_yaml(f)
    assert spec.params == {"lr": 1e-4, "entropy_coeff": 5e-3, "kl_coeff": 0.2}
    assert spec.space["kl_target"].values == (0.01, 0.02)
    assert spec.budget == 25_000_000 and isinstance(spec.budget, int)


def test_yaml_round_trip(tmp_path):
    spec = SweepSpec(
        name="rt",
        games=["heist"],
        seeds=[4, 5],
        budget=2048,
        params={
            "rollout_length": 128,
            "lr": 1e-4,
            "widths": [32, 64, 64],
            "num_envs_per_env_runner": 16,
            "minibatch_size": 512,
        },
        space={"framestack": ["none", "stack"]},
        max_concurrent=2,
    )
    f = tmp_path / "rt.yaml"
    f.write_text(spec.to_yaml())
    assert SweepSpec.from_yaml(f) == spec
    # The text itself round-trips through from_yaml_text (the README's promise) ...
    assert SweepSpec.from_yaml_text(spec.to_yaml()) == spec
    with_smoke = SweepSpec(name="sm", smoke={"budget": 16384, "params": {"lr": 1e-3}})
    assert SweepSpec.from_yaml_text(with_smoke.to_yaml()) == with_smoke
    # ... and from_yaml, which takes a path, says so instead of printing the YAML as a name.
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(spec.to_yaml())
    assert str(e.value) == (
        "from_yaml takes a file path; for YAML text use SweepSpec.from_yaml_text"
    )


def test_smoke_section_is_validated_with_the_spec():
    spec = SweepSpec(
        name="ab",
        params={"num_envs_per_env_runner": 16, "minibatch_size": 512},
        smoke={"games": ["leaper"], "budget": 1024, "params": {"rollout_length": 32}},
    )
    smoke = spec.smoke_spec()
    assert (smoke.name, smoke.games, smoke.budget) == ("ab-smoke", ["leaper"], 1024)
    # params merge: the spec's minibatch stays, the smoke's rollout is added
    assert smoke.params == {**spec.params, "rollout_length": 32} and smoke.smoke == {}
    bad = [
        ({"params": {"minibatch_size": 10**9}}, "smoke.params.minibatch_size: got 1000000000"),
        ({"gamez": ["leaper"]}, "smoke.gamez: unknown key (did you mean 'games'?)"),
        ({"name": "x"}, "smoke.name: allowed: spec keys but name and smoke"),
        ({"params": 3}, "smoke.params: got 3; allowed: a mapping"),
        ([1], "smoke: got [1]; allowed: a mapping of spec overrides"),
    ]
    for section, message in bad:
        with pytest.raises(SpecError) as e:
            SweepSpec(name="ab", smoke=section)
        assert str(e.value).startswith(message), (section, str(e.value))
    with pytest.raises(SpecError, match="smoke: this spec has no smoke: section"):
        SweepSpec(name="plain").smoke_spec()


def test_a_key_the_trials_are_built_from_refused_whole_does_not_hide_the_params_errors():
    """`seeds: 0` (or duplicate games, a missing baseline) refuses a key every trial is built
    from, so no trial is built; the params' own rules were not asked either."""
    with pytest.raises(SpecError) as e:
        SweepSpec(name="s", seeds=0, params={"lr": -1, "gamma": 1.5})
    assert [x.path for x in e.value.errors] == ["seeds", "params.lr", "params.gamma"]


def test_a_refused_search_is_not_judged_against_the_space_as_a_grid():
    """`search: {algorithm: random, num_samples: 0}` fell back to a neutral (grid) search for
    the other checks, which then said the sampled lr needs random or optuna."""
    lr = {"lr": {"loguniform": [1e-4, 1e-3]}}
    for search in ({"algorithm": "random", "num_samples": 0}, {"algorithm": "randm"}):
        with pytest.raises(SpecError) as e:
            SweepSpec(name="s", space=lr, search=search)
        assert [x.path for x in e.value.errors] == [f"search.{next(reversed(search))}"]


def test_python_declares_what_yaml_does_budgets_numpy_seeds_and_tuples():
    """In Python `25e6` is a float, numpy's integers are not `int`, and a tuple is a sequence
    as a list is: each was refused, with messages that contradicted themselves (`seeds: got
    (0, 1); allowed: a non-empty list of distinct seeds`). They are held as YAML holds them."""
    import numpy as np

    spec = SweepSpec(name="s", budget=25e6, seeds=list(np.arange(2)), games=("coinrun",))
    assert (spec.budget, spec.seeds, spec.games) == (25_000_000, [0, 1], ["coinrun"])
    assert [type(x) for x in (spec.budget, *spec.seeds)] == [int, int, int]
    assert SweepSpec.from_yaml_text(spec.to_yaml()) == spec
    # Inside params, variants and space too: once accepted, they broke sweep.yaml after Ray
    # started (yaml.safe_dump writes no numpy scalar).
    spec = SweepSpec(
        name="s",
        params={"num_levels": np.int64(200), "widths": (16, 32, 32)},
        variants={"a": {"gamma": np.float64(0.99)}},
        space={"framestack": ("none", "gap")},
    )
    assert spec.params == {"num_levels": 200, "widths": [16, 32, 32]}
    assert type(spec.params["num_levels"]) is int and type(spec.variants["a"]["gamma"]) is float
    assert SweepSpec.from_yaml_text(spec.to_yaml()) == spec
    with pytest.raises(SpecError, match=r"budget: got 2\.5; allowed: an integer >= 1"):
        SweepSpec(name="s", budget=2.5)
    with pytest.raises(SpecError, match=r"seeds\[0\]: got True; allowed: an integer >= 0"):
        SweepSpec(name="s", seeds=[True])


def test_the_smokes_errors_come_with_the_specs_own_each_once():
    """The smoke was checked only once the rest of the spec was right, so its errors waited for
    another run of validate; now they come together, less the ones the smoke inherits (the
    spec's bad game again, at smoke.games[0]). A key refused whole leaves no smoke to build."""
    with pytest.raises(SpecError) as e:
        SweepSpec(
            name="ab",
            games=["coinrunn"],
            smoke={"seeds": ["a"], "params": {"num_epochs": 0}},
        )
    assert sorted(x.path for x in e.value.errors) == [
        "games[0]",
        "smoke.params.num_epochs",
        "smoke.seeds[0]",
    ], e.value.errors
    with pytest.raises(SpecError) as e:
        SweepSpec(name="ab", params=5, smoke={"params": {"gamma": 3}})
    assert [x.path for x in e.value.errors] == ["params"]
    # A smoke made of a variant that is no mapping: the spec's error, not a traceback.
    with pytest.raises(SpecError) as e:
        SweepSpec(name="ab", variants={"a": 3}, smoke={"seeds": [0]})
    assert [x.path for x in e.value.errors] == ["variants.a"]
    # What the smoke's batch makes of the spec's own bad minibatch is said once, at its key.
    tiny = {"num_envs_per_env_runner": 16, "rollout_length": 64, "minibatch_size": 384}
    with pytest.raises(SpecError) as e:
        SweepSpec(name="ab", params=tiny, smoke={"params": {"rollout_length": 32}})
    assert [x.path for x in e.value.errors] == ["params.minibatch_size"]


def test_overrides_keep_track_of_what_the_file_chose(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("name: m\ngames: [heist]\n")
    spec = SweepSpec.from_yaml(f)
    assert [w.split(":")[1].strip() for w in spec.default_warnings()] == ["budget", "seeds"]
    over = SweepSpec.from_yaml(f, budget=20_000, storage_path=str(tmp_path / "r"))
    assert (over.budget, over.storage_path, over.source) == (20_000, str(tmp_path / "r"), str(f))
    assert [w.split(":")[1].strip() for w in over.default_warnings()] == ["seeds"]
    assert SweepSpec(name="py").default_warnings() == []  # a Python spec chose what it wrote


def test_search_algorithms_name_is_not_config_algorithms():
    from rlsweep.spec import config, spec

    assert spec.SEARCH_ALGORITHMS == ("grid", "random", "optuna")
    assert not hasattr(spec, "ALGORITHMS") and "ppo" in config.ALGORITHMS


BAD = [
    ({"games": []}, "games: got []; allowed: a non-empty list"),
    ({"games": ["coinrun", "pong"]}, "games[1]: got 'pong'; allowed: bigfish"),
    ({"seeds": [0, 0]}, "seeds: got [0, 0]; allowed: a non-empty list of distinct seeds"),
    ({"budget": 0}, "budget: got 0; allowed: an integer >= 1"),
    ({"budget": 1500.5}, "budget: got 1500.5; allowed: an integer >= 1"),
    (
        {"space": {"framestak": ["gap"]}},
        "space.framestak: unknown parameter (did you mean 'framestack'?)",
    ),
    (
        {"space": {"framestack": ["none", "gap4"]}},
        "space.framestack[1]: got 'gap4' (did you mean 'gap'?); allowed: none, stack, gap",
    ),
    (
        {"space": {"lr": []}},
        "space.lr: got []; allowed: a non-empty list of values (a grid: each one runs), or a "
        "mapping with one of grid, choice, uniform, loguniform, int",
    ),
    ({"space": {"lr": {"grid": []}}}, "space.lr.grid: got []; allowed: a non-empty list"),
    (
        {"budget": 100},
        "budget: got 100; allowed: >= 16,384 env steps, one iteration (the train batch",
    ),
    ({"space": {"lr": [1e-3]}, "params": {"lr": 1e-4}}, "space.lr: also set in params"),
    (
        {"space": {"lr": {"uniform": [1e-3, 1e-4]}}},
        "space.lr.uniform: got [0.001, 0.0001]; allowed",
    ),
    (
        {"space": {"lr": {"loguniform": [0, 1e-3]}}},
        "space.lr.loguniform: got low 0; allowed: low > 0",
    ),
    (
        {"space": {"lr": {"normal": [0, 1]}}},
        "space.lr: got {'normal': [0, 1]}; allowed: exactly one",
    ),
    ({"space": {"lr": {"uniform": [1e-4, 1e-3], "q": -1}}}, "space.lr.q: got -1; allowed"),
    (
        {"space": {"gamma": {"uniform": [0.9, 1.1]}}, "search": {"algorithm": "random"}},
        "space.gamma: got 1.1; allowed: a number in (0, 1]",
    ),
    (
        {"space": {"lr": {"loguniform": [1e-5, 1e-3]}}},
        "space.lr: a sampled parameter needs search.algorithm random or optuna",
    ),
    (
        {"space": {"framestack": ["none", "gap"]}, "search": {"algorithm": "optuna"}},
        "space.framestack: optuna samples every parameter; write {choice: [...]}",
    ),
    (
        {
            "space": {"lr": {"loguniform": [1e-5, 1e-3], "q": 1e-5}},
            "search": {"algorithm": "optuna"},
        },
        "space.lr.q: optuna cannot quantize a loguniform parameter; leave q out",
    ),
    ({"search": {"algorithm": "bayes"}}, "search.algorithm: got 'bayes'; allowed: grid, random"),
    (
        {"search": {"synch": "yes"}},
        "search.synch: got 'yes' (a string, in quotes; unquoted, yes is allowed); allowed: true,",
    ),
    (
        {"search": {"reduction_factor": 1}},
        "search.reduction_factor: got 1; allowed: an integer >= 2",
    ),
    ({"search": {"storage": None}}, "search.storage: renamed: write search.optuna_storage"),
    ({"search": {"num_sample": 3}}, "search.num_sample: unknown key (did you mean 'num_samples'?)"),
    (
        {
            "games": ["coinrun", "maze"],
            "space": {"lr": {"loguniform": [1e-5, 1e-3]}},
            "search": {"algorithm": "random", "scheduler": "pbt", "mutations": ["lr"]},
        },
        "search.scheduler: pbt exploits across the population, so one PBT sweep trains one game",
    ),
    (  # an exploit takes the clone's variant: the arms would merge
        {
            "variants": {"A": {"framestack": "none"}, "B": {"framestack": "gap"}},
            "space": {"lr": {"loguniform": [1e-5, 1e-3]}},
            "search": {"algorithm": "random", "scheduler": "pbt", "mutations": ["lr"]},
        },
        "variants: pbt exploits across the population: a member that exploits another takes its "
        "variant too, so the variants would merge into the best one's; run one PBT sweep per "
        "variant (got A, B)",
    ),
    (
        {
            "space": {"lr": {"loguniform": [1e-5, 1e-3]}, "num_epochs": [1, 3]},
            "search": {"algorithm": "random", "scheduler": "pbt", "mutations": ["lr"]},
        },
        "space.num_epochs: a grid under pbt: a member that exploits another takes its value too",
    ),
    (
        {
            "space": {"lr": {"loguniform": [1e-5, 1e-3]}},
            "search": {"algorithm": "random", "scheduler": "pbt", "mutations": ["lr", "gamma"]},
        },
        "search.mutations[1]: got 'gamma'; allowed: a sampled parameter of space (lr)",
    ),
    (  # a restore takes the KL coefficient the copied trial's updates adapted
        {
            "space": {"kl_coeff": {"uniform": [0.1, 0.3]}},
            "search": {"algorithm": "random", "scheduler": "pbt", "mutations": ["kl_coeff"]},
        },
        "search.mutations[0]: pbt cannot perturb kl_coeff: a restored trial goes on with the KL",
    ),
    (  # PBT's default mutations are those of lr, entropy_coeff, clip_param that are sampled
        {
            "space": {"gamma": {"uniform": [0.9, 0.99]}},
            "search": {"algorithm": "random", "scheduler": "pbt"},
        },
        "search.mutations: not set, and space samples none of lr, entropy_coeff, clip_param",
    ),
    (
        {
            "space": {"framestack_k": {"int": [2, 4], "when": {"framestak": ["gap"]}}},
            "search": {"algorithm": "random"},
        },
        "space.framestack_k.when.framestak: unknown parameter",
    ),
    (  # a typo in a condition's value would leave augment_p at its default in every trial
        {
            "space": {
                "augment": {"choice": ["none", "crop_resize"]},
                "augment_p": {"uniform": [0.2, 1.0], "when": {"augment": ["crop_resiz"]}},
            },
            "search": {"algorithm": "random"},
        },
        "space.augment_p.when.augment: got 'crop_resiz' (did you mean 'crop_resize'?); allowed: "
        "a value space.augment takes (none, crop_resize)",
    ),
    (
        {
            "space": {"framestack_k": {"int": [2, 4], "when": {"framestack": ["gap"]}}},
            "search": {"algorithm": "random"},
        },
        "space.framestack_k.when.framestack: framestack is 'none' in every trial (neither "
        "searched nor set by a variant), so this condition never holds",
    ),
    (
        {
            "params": {"eval_interval": 25},
            "space": {"lr": {"loguniform": [1e-5, 1e-3]}},
            "search": {"algorithm": "random", "scheduler": "pbt", "mutations": ["lr"]},
        },
        "params.eval_interval: got 25; pbt evaluates and checkpoints at each perturbation",
    ),
    (
        {"extends": "lars12llt", "budget": 16000, "space": {"lr": [1e-4, 5e-4]}},
        "space.lr: ignored: extends(lars12llt).lr_schedule is set and replaces lr; set "
        "lr_schedule: null to use lr",
    ),
    (  # checked on every game, not on the first alone: coinrun has no memory mode
        {
            "games": ["maze", "coinrun"],
            "space": {"distribution_mode": {"choice": ["easy", "memory"]}},
            "search": {"algorithm": "random"},
        },
        "space.distribution_mode[1]: got 'memory'; allowed for coinrun: easy, hard, exploration",
    ),
    (  # and in every variant
        {
            "variants": {"PPO": {}, "DQN": {"algorithm": "dqn"}},
            "space": {"augment": {"choice": ["none", "flip"]}},
            "search": {"algorithm": "random"},
        },
        "space.augment[1]: got 'flip'; allowed: none for algorithm dqn",
    ),
    ({"params": {"gamma": 2}}, "params.gamma: got 2; allowed: a number in (0, 1]"),
    ({"params": {"seed": 3}}, "params.seed: set this with the top-level 'seeds' key"),
    (
        {"params": {"minibatch_size": 20000}},
        "params.minibatch_size: got 20000; allowed: <= the train batch",
    ),
    (
        {"params": {"distribution_mode": "extreme"}},
        "params.distribution_mode: got 'extreme'; allowed for coinrun",
    ),
    ({"extends": "nope"}, "extends: got 'nope'; allowed: aicrowd_starter"),
    ({"extends": "cobe2019"}, "extends: got 'cobe2019' (did you mean 'cobbe2019'?); allowed: "),
    ({"extends": "../nosuch.yaml"}, "extends: got '../nosuch.yaml': no file ../nosuch.yaml"),
    ({"extends": 3}, "extends: got 3; allowed: a baseline's name or a YAML path, or null"),
    ({"metric": "reward"}, "metric: got 'reward'; allowed: env_steps, train/return"),
    (
        {"params": {"distribution_mode": "exploration"}},
        "metric: got 'test/return_norm', which is NaN for coinrun exploration",
    ),
    ({"mode": "maximize"}, "mode: got 'maximize'; allowed: max, min"),
    ({"name": "a b"}, "name: got 'a b'; allowed: letters, digits"),
    ({"max_concurrent": 0}, "max_concurrent: got 0; allowed: an integer >= 1, or null"),
    ({"storage_path": ""}, "storage_path: got ''; allowed: a directory or s3:// URI"),
    ({"tags": ["a", 1]}, "tags: got ['a', 1]; allowed: a list of strings"),
    ({"description": 3}, "description: got 3; allowed: text, or null"),
    ({"variants": ["a"]}, "variants: got ['a']; allowed: a mapping label -> params"),
    (
        {"variants": {1e-4: {"lr": 1e-4}}},
        "variants.0.0001: got the label 0.0001; allowed: text (quote it: '0.0001')",
    ),
    ({"budegt": 1}, "budegt: unknown key (did you mean 'budget'?); allowed: name, extends"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_bad_specs_name_file_key_and_allowed_values(overrides, message):
    with pytest.raises(SpecError) as e:
        SweepSpec.from_dict({"name": "bad", **overrides}, source="bad.yaml")
    assert str(e.value).startswith(f"bad.yaml: {message}")


def test_missing_name_and_not_a_mapping(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("- coinrun\n")
    with pytest.raises(SpecError, match="s.yaml: a spec is a mapping"):
        SweepSpec.from_yaml(f)
    f.write_text("")
    with pytest.raises(SpecError, match=r"\(name, games, ...\), got an empty file$"):
        SweepSpec.from_yaml(f)
    f.write_text("name: x\ngames: [coinrun\nseeds: [0]\n")  # a YAML error names its file
    with pytest.raises(SpecError, match=f'not valid YAML: .*\n  in "{f}", line 2, column 8'):
        SweepSpec.from_yaml(f)
    with pytest.raises(SpecError, match="name: missing"):
        SweepSpec.from_dict({"games": ["coinrun"]})


def test_validation_needs_no_ray():
    import subprocess
    import sys

    code = (
        "import sys; from rlsweep.spec.spec import SweepSpec; "
        f"SweepSpec.from_yaml({str(ROOT / 'search_spaces/demo.yaml')!r}).trials(); "
        "assert 'ray' not in sys.modules, 'validation imported ray'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_sampled_space_round_trips_and_counts_trials(tmp_path):
    spec = SweepSpec(
        name="search",
        games=["coinrun", "maze"],
        seeds=[0, 1],
        space={
            "framestack": ["none", "gap"],
            "lr": {"loguniform": [1e-5, 1e-3]},
            "entropy_coeff": {"uniform": [0.0, 0.02], "q": 0.001},
            "num_epochs": {"int": [1, 4]},
            "framestack_k": {"choice": [3, 4], "when": {"framestack": ["gap"]}},
        },
        search={"algorithm": "random", "num_samples": 3, "scheduler": "asha"},
    )
    assert spec.grid_keys == ["framestack"]
    assert spec.sampled_keys == ["lr", "entropy_coeff", "num_epochs", "framestack_k"]
    assert spec.num_trials == 2 * 2 * 2 * 3
    f = tmp_path / "s.yaml"
    f.write_text(spec.to_yaml())
    assert SweepSpec.from_yaml(f) == spec


def test_extends_a_baseline_and_overrides_it():
    spec = SweepSpec(name="b", extends="lars12llt", params={"entropy_coeff": 0.02})
    t = spec.trials()[0]
    assert t.framestack == "gap" and t.widths == (32, 64, 64) and t.global_pool
    assert t.lr_schedule[1] == (500_000, 8e-4) and t.gamma == 0.99
    assert t.entropy_coeff == 0.02  # spec params override the baseline


def test_plan_counts_steps_and_estimates_time():
    from rlsweep.plan.plan import Costs, Throughput, make_plan

    spec = SweepSpec(
        name="p",
        games=["coinrun", "maze"],
        seeds=[0, 1, 2],
        budget=1_000_000,
        space={"framestack": ["none", "gap"], "lr": {"loguniform": [1e-5, 1e-3]}},
        search={"algorithm": "random", "num_samples": 2},
    )
    # Training only, at 100 env steps/s per CPU whatever the shape (tests/test_plan.py's `flat`)
    parts = dict(vector_step_s=0.0, minibatch_s=0.0, sample_s=0.0, iteration_s=0.0)
    fixed = dict(eval_steps_per_cpu_s=math.inf, trial_start_s=0.0, ray_start_s=0.0)
    training_only = Throughput(Costs(env_step_s=1 / 100, **parts, **fixed))
    plan = make_plan(spec, cpus=4, throughput=training_only)
    assert plan.num_trials == 2 * 3 * 2 * 2 and len(plan.rows) == 12
    assert plan.sweep_env_steps == 24_000_000
    assert plan.concurrent == 4 and plan.cpus_per_trial == 1
    # 24 trials in 6 waves, each 62 iterations of 16,384 env steps
    assert plan.est_wall_s == pytest.approx(6 * 62 * 16384 / 100.0)
    assert plan.rows[0]["lr"] == "loguniform(1e-05, 0.001)"


def test_variants_expand_and_validate():
    spec = SweepSpec(
        name="v",
        seeds=[0, 1],
        variants={"No Augs": {"augment": "none"}, "Flip": {"augment": "flip", "augment_p": 0.5}},
    )
    assert spec.num_trials == 4
    assert [t.augment for t in spec.trials()] == ["none", "flip", "none", "flip"]
    flop = r"^variants.Flip.augment: got 'flop' \(did you mean 'flip'\?\); allowed: none"
    with pytest.raises(SpecError, match=flop):
        SweepSpec(name="v", variants={"Flip": {"augment": "flop"}})
    with pytest.raises(SpecError, match=r"^variants.X.augmnt: unknown parameter \(did you mean"):
        SweepSpec(name="v", variants={"X": {"augmnt": "flip"}})


@pytest.mark.parametrize(
    "searched",
    [
        {"space": {"minibatch_size": [256, 512]}},
        {"space": {"minibatch_size": {"choice": [256, 512]}}, "search": {"algorithm": "random"}},
        {"space": {"minibatch_size": {"choice": [256, 512]}}, "search": {"algorithm": "optuna"}},
        {"variants": {"small": {"minibatch_size": 256}, "large": {"minibatch_size": 512}}},
    ],
)
def test_a_field_no_trial_runs_at_its_default_is_judged_at_the_values_that_run(searched):
    """Under a train batch of 1,024 the default minibatch (2,048) is invalid; a search or the
    variants that set every trial's minibatch stand, and every trial runs one of theirs."""
    params = {"num_envs_per_env_runner": 16, "rollout_length": 64}
    spec = SweepSpec(name="mb", budget=65536, params=params, **searched)
    assert {t.minibatch_size for t in spec.trials()} <= {256, 512}
    too_big = {"space": {"minibatch_size": [256, 4096]}}
    with pytest.raises(SpecError, match=r"^space\.minibatch_size\[1\]: got 4096; allowed: <="):
        SweepSpec(name="mb", budget=65536, params=params, **too_big)


def test_pbt_trials_evaluate_at_each_perturbation_in_plan_as_in_tune(tmp_path):
    """What validate and plan count is what Tune's param_space runs: PBT's interval, over
    the baseline's own (every 6 iterations here)."""
    from rlsweep.plan.plan import make_plan

    (tmp_path / "base.yaml").write_text("params: {eval_interval: 6, checkpoint_interval: 6}\n")
    spec = SweepSpec(
        name="p",
        extends=str(tmp_path / "base.yaml"),
        budget=30 * 16_384,
        space={"lr": {"loguniform": [1e-5, 1e-3]}},
        search={
            "algorithm": "random",
            "scheduler": "pbt",
            "mutations": ["lr"],
            "perturbation_interval": 5,
        },
    )
    assert {(t.eval_interval, t.checkpoint_interval) for t in spec.trials()} == {(5, 5)}
    assert (spec.defaults()["eval_interval"], spec.defaults()["checkpoint_interval"]) == (5, 5)
    assert make_plan(spec, cpus=2).longest.evaluations == 6  # at 5, 10, ..., 30


# --- a spec's defaults: one definition, read once (issue 12 item 2) ---------------------------


def _augment_spec(tmp_path: Path) -> SweepSpec:
    """A baseline with augment_p 0.5, and augment_p sampled only for crop_resize trials."""
    (tmp_path / "base.yaml").write_text("params: {augment_p: 0.5}\n")
    return SweepSpec(
        name="cond",
        extends="base.yaml",
        space={
            "augment": ["none", "crop_resize"],
            "augment_p": {"uniform": [0.1, 0.9], "when": {"augment": ["crop_resize"]}},
        },
        search={"algorithm": "random"},
        source=str(tmp_path / "spec.yaml"),
    )


def test_a_failed_condition_falls_back_to_the_baseline_in_validate_plan_and_resolve(tmp_path):
    spec = _augment_spec(tmp_path)
    none, crop = spec.trials()  # what validate and plan build
    assert (none.augment, none.augment_p) == ("none", 0.5)  # was TrialConfig()'s 1.0
    assert (crop.augment, crop.augment_p) == ("crop_resize", 0.5)  # sampled; baseline shown
    # What the trial runs, from a config as Tune records it (a sampled 0.7 that does not apply).
    recorded = {**spec.defaults(), "augment": "none", "augment_p": 0.7}
    assert spec.resolve(recorded)["augment_p"] == none.augment_p
    assert spec.resolve({**recorded, "augment": "crop_resize"})["augment_p"] == 0.7
    assert spec.defaults()["augment_p"] == 0.5


def test_the_baseline_is_read_once_per_spec(monkeypatch):
    import yaml

    from rlsweep.results.ablate import load_ablation
    from rlsweep.spec.spec import _baseline_params

    _baseline_params.cache_clear()  # read once per process: earlier tests may have read it
    reads = []
    safe_load = yaml.safe_load
    monkeypatch.setattr(yaml, "safe_load", lambda text: reads.append(1) or safe_load(text))
    spec = load_ablation("augmentations")  # 336 trials, each built (validated) once
    assert spec.num_trials == 336 and spec.extends == "cobbe2019"
    assert len(reads) == 2  # the ablation file and its baseline (was 337)
    spec.trials(), spec.defaults(), spec.resolve({"game": "coinrun"}), spec.base_params()
    assert len(reads) == 2


def test_every_independent_error_is_reported_at_once(tmp_path):
    """Unknown keys and each field's bad value, together (one run to fix them all), a known
    param's too beside an unknown one; the trials are not built from keys that failed, so
    nothing is said twice."""
    f = tmp_path / "s.yaml"
    f.write_text(
        "name: s\nbudegt: 1e6\nmode: maximize\n"
        "params: {gamma: 2, lr: -1, num_envs_per_env_runner: 0, gama: 0.9}\n"
        "space: {framestack: [], lr_schedule: {normal: 1}}\n"
        "search: {num_sample: 3}\n"
    )
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(f)
    problems = [(x.source, x.path) for x in e.value.errors]
    assert problems == [
        (str(f), "budegt"),
        (str(f), "search.num_sample"),
        (str(f), "space.framestack"),
        (str(f), "space.lr_schedule"),
        (str(f), "mode"),
        (str(f), "params.gama"),
        # each known param's own value error too: they do not depend on the unknown one
        (str(f), "params.gamma"),
        (str(f), "params.lr"),
        (str(f), "params.num_envs_per_env_runner"),
    ]
    assert str(e.value).splitlines()[0] == (
        f"{f}: budegt: unknown key (did you mean 'budget'?); allowed: name, extends, games, "
        "seeds, budget, params, space, variants, search, metric, mode, max_concurrent, "
        "keep_checkpoints, storage_path, tags, description, reference, smoke"
    )
    # Once the keys are known, every field's own value error at once, then the trials' rules.
    f.write_text(
        "name: s\nmode: maximize\nparams: {gamma: 2, lr: -1, num_envs_per_env_runner: 0}\n"
    )
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(f)
    assert [x.path for x in e.value.errors] == [
        "mode",
        "params.gamma",
        "params.lr",
        "params.num_envs_per_env_runner",
    ]
    assert [x.message for x in e.value.errors][1:] == [
        "got 2; allowed: a number in (0, 1]",
        "got -1; allowed: a number > 0",
        "got 0; allowed: an integer >= 1",
    ]


def test_the_cli_prints_each_error_on_its_own_line(tmp_path, capsys):
    from rlsweep.cli import main

    f = tmp_path / "s.yaml"
    f.write_text("name: s\nbudget: 100\nparams: {gamma: 2}\nmetric: reward\n")
    assert main(["validate", str(f)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"rlsweep: error: {f}: metric: got 'reward'; allowed: env_steps, train/return, "
        "train/return_norm, test/return, test/return_norm, gap/return_norm, time/wall_s, "
        "time/eval_s",
        f"rlsweep: error: {f}: params.gamma: got 2; allowed: a number in (0, 1]",
    ]
    f.write_text("name: s\nbudget: 100\n")  # the budget, once gamma is fixed
    assert main(["validate", str(f)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"rlsweep: error: {f}: budget: got 100; allowed: >= 16,384 env steps, one iteration "
        "(the train batch: rollout_length x num_envs_per_env_runner x max(1, num_env_runners), "
        "or train_batch_size)"
    ]


@pytest.mark.parametrize("name", BASELINES)
def test_a_baseline_runs_as_a_spec(name, capsys):
    """`rlsweep validate baselines/<name>.yaml`: `description:` is a spec key too, and a file
    that names no sweep runs under its own name (said, as the other defaults are)."""
    from rlsweep.cli import main

    path = ROOT / "baselines" / f"{name}.yaml"
    spec = SweepSpec.from_yaml(path)
    assert spec.name == name and spec.description
    # The baseline's params are the spec's: the same trial as a spec that extends it.
    assert spec.trials() == SweepSpec(name="b", extends=name).trials()
    assert main(["validate", str(path)]) == 0
    captured = capsys.readouterr()
    assert f"{path}: ok — 1 trials of 25,000,000 env steps" in captured.out
    assert captured.err.splitlines()[0] == (
        f"rlsweep: warning: {path}: name: not set; named after its file: results go to "
        f"results/{name}"
    )
    described = SweepSpec(name="d", description="the demo, smaller")
    assert SweepSpec.from_yaml_text(described.to_yaml()) == described


# --- one way to change a spec; each key's rule declared with it (issue 26) --------------------


def test_with_overrides_sets_what_it_is_given_and_keeps_what_the_file_wrote(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("name: m\ngames: [heist]\nmax_concurrent: 2\n")
    spec = SweepSpec.from_yaml(f)
    over = spec.with_overrides(budget=16_384, max_concurrent=None)  # None is a value too
    assert (over.budget, over.max_concurrent, over.games, over.source) == (
        16_384,
        None,
        ["heist"],
        str(f),
    )
    assert [w.split(":")[1].strip() for w in over.default_warnings()] == ["seeds"]
    assert spec.with_overrides() is spec
    with pytest.raises(SpecError, match="budget: got 0; allowed: an integer >= 1"):
        spec.with_overrides(budget=0)  # validated again


def test_dataclasses_replace_builds_a_valid_spec_that_forgets_what_was_written(tmp_path):
    """dataclasses.replace runs the same validation; the spec it returns counts as built in
    Python (every key chosen), as `_given` is no init field."""
    f = tmp_path / "m.yaml"
    f.write_text("name: m\n")
    spec = SweepSpec.from_yaml(f)
    replaced = dataclasses.replace(spec, budget=16_384)
    assert replaced == spec.with_overrides(budget=16_384)
    assert replaced.default_warnings() == [] and spec.default_warnings()
    with pytest.raises(SpecError, match="budget: got 0"):
        dataclasses.replace(spec, budget=0)


def test_what_the_file_wrote_is_no_key_and_not_compared(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("name: m\n")
    from_file, in_python = SweepSpec.from_yaml(f), SweepSpec(name="m", source=str(f))
    assert from_file == in_python and "_given" not in repr(from_file)
    assert "_given" not in SweepSpec.key_names() and "_given" not in from_file.to_dict()
    with pytest.raises(SpecError, match="_given: unknown key"):
        SweepSpec.from_dict({"name": "m", "_given": ["name"]})


def test_every_spec_key_declares_its_rule_but_the_sections_parsed_on_their_own():
    unruled = [key for key in SweepSpec.key_names() if rule_of(SweepSpec, key) is None]
    assert unruled == ["space", "search", "reference"]  # parse_space, SearchConfig, Reference
    assert all(rule_of(SearchConfig, f.name) for f in dataclasses.fields(SearchConfig))
    assert all(rule_of(Reference, f.name) for f in dataclasses.fields(Reference))


def test_a_search_reports_every_bad_value_at_once():
    with pytest.raises(SpecError) as e:
        SweepSpec(name="s", search={"algorithm": "bayes", "num_samples": 0, "mutations": "lr"})
    assert [str(x) for x in e.value.errors] == [
        "search.algorithm: got 'bayes'; allowed: grid, random, optuna",
        "search.num_samples: got 0; allowed: an integer >= 1",
        "search.mutations: got 'lr'; allowed: a list of parameter names, or null for those of "
        "lr, entropy_coeff, clip_param it samples",
    ]
    assert SweepSpec(name="s", search={"mutations": ["lr"]}).search.mutations == ("lr",)
    # Not set: those of the defaults the space samples (it said entropy_coeff and clip_param
    # were no sampled parameters, though the spec never named them).
    pbt = {"algorithm": "random", "scheduler": "pbt"}
    lr = {"lr": {"loguniform": [1e-5, 1e-3]}}
    assert SweepSpec(name="s", space=lr, search=pbt).pbt_mutations == ("lr",)


REFERENCE = {
    "game": "bigfish",
    "variant": "Avg Pool",
    "value": 17.7,
    "split": "train",
    "budget": 4_000_000,
    "seeds": 1,
    "source": "LOGS.md",
}
POOLING = {"name": "r", "variants": {"Avg Pool": {"global_pool": True}, "No Pool": {}}}


def test_references_validate_round_trip_and_survive_smoke():
    context = {**REFERENCE, "variant": None, "value": 16, "error": 2.71, "error_kind": "std"}
    spec = SweepSpec.from_dict(
        {**POOLING, "reference": [REFERENCE, context], "smoke": {"budget": 16384}}
    )
    first, second = spec.reference
    assert first == Reference(
        game="bigfish",
        variant="Avg Pool",
        value=17.7,
        split="train",
        budget=4_000_000,
        seeds=1,
        source="LOGS.md",
    )
    assert (second.variant, second.value, second.error, second.error_kind) == (
        None,
        16.0,
        2.71,
        "std",
    )
    assert SweepSpec.from_yaml_text(spec.to_yaml()) == spec  # sweep.yaml keeps them
    assert spec.smoke_spec().reference == spec.reference
    assert SweepSpec(name="p").reference == []


def test_reference_errors_name_the_entry_the_key_the_value_and_what_is_allowed():
    bad = [
        {**REFERENCE, "variant": "Avg pool"},
        {**REFERENCE, "split": "val", "budget": 0},
        {"game": "BigFish", "value": "high", "sed": 1},
        3,
        {**REFERENCE, "seeds": None, "error": -1.0},
        {**REFERENCE, "error_kind": "std"},  # a rule across fields: checked once they pass
        {**REFERENCE, "error": 2.0, "error_kind": "stderr"},  # close to std, means sem
        {**REFERENCE, "variant": "no pool", "split": "unseen"},  # each said, at once
    ]
    with pytest.raises(SpecError) as e:
        SweepSpec.from_dict({**POOLING, "reference": bad}, source="s.yaml")
    lines = str(e.value).splitlines()
    expected = [
        "s.yaml: reference[0].variant: got 'Avg pool' (did you mean 'Avg Pool'?); allowed: "
        "Avg Pool, No Pool, or null (context for the game)",
        "s.yaml: reference[1].split: got 'val'",
        "s.yaml: reference[1].budget: got 0; allowed: an integer >= 1",
        "s.yaml: reference[5].error_kind: got 'std'; allowed: null where there is no error",
        "s.yaml: reference[2].split: missing; every reference needs it",
        "s.yaml: reference[2].source: missing; every reference needs it",
        "s.yaml: reference[2].game: got 'BigFish' (did you mean 'bigfish'?)",
        "s.yaml: reference[2].value: got 'high'; allowed: a number",
        "s.yaml: reference[2].sed: unknown key (did you mean 'seeds'?)",
        "s.yaml: reference[3]: got 3; allowed: a mapping",
        "s.yaml: reference[4].error: got -1.0; allowed: a number >= 0, or null",
        "s.yaml: reference[6].error_kind: got 'stderr' (did you mean 'sem'?); allowed: std (a "
        "standard deviation), sem (a standard error of the mean), ci95 (a 95% CI's half-width)",
        "s.yaml: reference[7].variant: got 'no pool' (did you mean 'No Pool'?)",
        "s.yaml: reference[7].split: got 'unseen'",
    ]
    for want in expected:
        assert any(line.startswith(want) for line in lines), (want, lines)
    assert not any("reference[4].seeds" in line for line in lines)  # null: unknown, allowed
    # One error per problem (the CLI prints each with its prefix), reference[1]'s two too.
    assert all("\n" not in str(x) for x in e.value.errors) and len(e.value.errors) == len(lines)
    with pytest.raises(SpecError, match=r"^s.yaml: reference\[0\].game: got 'bigfsh'"):
        SweepSpec.from_dict({**POOLING, "reference": [{**REFERENCE, "game": "bigfsh"}]}, "s.yaml")
    without = r"reference\[0\].variant: got 'Avg Pool'; allowed: null \(the spec has no variants\)"
    with pytest.raises(SpecError, match=without):
        SweepSpec.from_dict({"name": "r", "reference": [REFERENCE]})
    with pytest.raises(SpecError, match=r"^reference: got \{.*allowed: a list of mappings"):
        SweepSpec.from_dict({"name": "r", "reference": REFERENCE})


def test_a_trial_counts_up_to_its_budget_towards_the_sweeps_env_steps():
    spec = SweepSpec(name="s", games=["coinrun", "maze"], seeds=[0, 1, 2], budget=100_000)
    assert spec.sweep_env_steps == 6 * 100_000
    assert spec.counted_steps(40_960) == 40_960
    assert spec.counted_steps(100_352) == 100_000  # its last batch overshot the budget


def test_a_search_key_its_scheduler_or_algorithm_does_not_read_is_warned(tmp_path, capsys):
    """`grace_period` with no scheduler does nothing: said, not refused (an override such as
    search.scheduler=none cannot take the key out of the file)."""
    from rlsweep.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ngames: [coinrun]\nseeds: [0]\nbudget: 16384\n"
        "search: {algorithm: grid, scheduler: asha, grace_period: 2}\n"
    )
    assert SweepSpec.from_yaml(path).unread_warnings() == []
    off = SweepSpec.from_yaml(path, overrides=["search.scheduler=none"])
    assert off.unread_warnings() == [
        f"{path}: search.grace_period: ignored: only search.scheduler asha reads it (this "
        "spec's is none)"
    ]
    assert main(["validate", str(path), "search.scheduler=none"]) == 0
    assert "rlsweep: warning: " + off.unread_warnings()[0] in capsys.readouterr().err


def test_reward_shaping_the_normalizer_undoes_is_warned_where_it_is_set(tmp_path, capsys):
    """Shaped and normalized, a game with one reward trains as unshaped (the normalizer undoes
    the rescale: tests/test_envs.py); the shipped reward_shaping ablation does not normalize."""
    from rlsweep.cli import main
    from rlsweep.results.ablate import load_ablation

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ngames: [leaper, bigfish, maze]\nseeds: [0, 1]\nbudget: 16384\n"
        "variants: {Raw: {}, Shaped: {reward_shaping: true}}\n"
    )
    spec = SweepSpec.from_yaml(path)
    assert spec.setting_warnings() == [
        f"{path}: variants.Shaped.reward_shaping: true does nothing under normalize_reward: "
        "true in leaper, maze: shaping only rescales a game's one reward (a level's "
        "completion), and the normalizer undoes any rescale; set normalize_reward: false to "
        "compare shaped rewards"
    ]
    assert main(["validate", str(path)]) == 0
    assert "rlsweep: warning: " + spec.setting_warnings()[0] in capsys.readouterr().err
    assert (
        SweepSpec.from_yaml(path, overrides=["params.normalize_reward=false"]).setting_warnings()
        == []
    )
    assert load_ablation("reward_shaping").setting_warnings() == []


def _errors(**kw) -> list[str]:
    """The errors of a spec `u.yaml` of these keys, each as it prints; none if it stands."""
    try:
        SweepSpec(name="u", source="u.yaml", **kw)
    except SpecError as e:
        return [str(x) for x in e.errors]
    return []


def test_a_setting_no_trial_it_reaches_reads_is_refused_at_its_key():
    """config.UNREAD: `framestack_k` in every trial of framestack none, `reward_norm_gamma` in
    a variant that normalizes no reward. Read by one trial it reaches, it stands; so does one
    conditioned in `space` (`when:`), and one whose condition is sampled."""

    none = {"A": {"framestack": "none"}, "B": {"framestack": "none", "lr": 3e-4}}
    assert _errors(params={"framestack_k": 3}, variants=none) == [
        "u.yaml: params.framestack_k: ignored: variants.A.framestack is none; set framestack: "
        "stack or gap to use framestack_k"
    ]
    assert _errors(params={"framestack_k": 3}, variants={**none, "C": {"framestack": "gap"}}) == []
    plain = {"A": {}, "B": {"normalize_reward": False, "reward_norm_gamma": 0.9}}
    assert _errors(variants=plain) == [
        "u.yaml: variants.B.reward_norm_gamma: ignored: variants.B.normalize_reward is false; "
        "set normalize_reward: true to use reward_norm_gamma"
    ]
    when = {"framestack": ["none", "gap"]}
    when |= {"framestack_k": {"int": [2, 4], "when": {"framestack": ["gap"]}}}
    assert _errors(space=when, search={"algorithm": "random"}) == []
    sampled = {"augment": {"choice": ["none", "flip"]}}
    assert _errors(params={"augment_p": 0.5}, space=sampled, search={"algorithm": "random"}) == []
    assert _errors(params={"augment_p": 0.5}) == [
        "u.yaml: params.augment_p: ignored: the default augment is none; set an augmentation "
        "to use augment_p"
    ]


def test_another_algorithms_option_is_refused_where_no_trial_runs_that_algorithm():
    """config.UNREAD's algorithm conditions: PPO's clip under DQN, V-trace's clips under PPO, a
    KL target under IMPALA (its first condition that holds is said, once). An option read by
    one variant's algorithm stands: the shipped algorithm ablation sets DQN's replay for all."""

    assert _errors(params={"algorithm": "dqn", "clip_param": 0.1}) == [
        "u.yaml: params.clip_param: ignored: params.algorithm is neither ppo nor appo; set "
        "algorithm: ppo or appo to use clip_param"
    ]
    assert _errors(params={"vtrace_clip_rho": 0.5}) == [
        "u.yaml: params.vtrace_clip_rho: ignored: the default algorithm is neither impala nor "
        "appo; set algorithm: impala or appo to use vtrace_clip_rho"
    ]
    impala = {"IMPALA": {"algorithm": "impala", "kl_target": 0.02, "minibatch_size": 256}}
    assert _errors(variants=impala) == [
        "u.yaml: variants.IMPALA.kl_target: ignored: variants.IMPALA.algorithm is neither ppo "
        "nor appo; set algorithm: ppo or appo to use kl_target"
    ]
    mixed = {"PPO": {}, "DQN": {"algorithm": "dqn"}}
    assert _errors(params={"learning_starts": 256, "entropy_coeff": 0.02}, variants=mixed) == []
    assert _errors(params={"entropy_coeff": 0.02}, variants={"DQN": {"algorithm": "dqn"}}) == [
        "u.yaml: params.entropy_coeff: ignored: variants.DQN.algorithm is dqn; set algorithm: "
        "ppo, impala or appo to use entropy_coeff"
    ]
    from rlsweep.results.ablate import load_ablation

    load_ablation("algorithm", smoke=True)  # sets DQN's replay for every variant: it stands


@pytest.mark.parametrize(
    ("variants", "error"),
    [
        ("variant: {Base: {}}", "variant: unknown key (did you mean 'variants'?)"),
        ("variants: [Base]", "variants: got ['Base']; allowed: a mapping label -> params"),
    ],
)
def test_a_references_variant_is_not_refused_for_a_variants_section_refused_itself(
    tmp_path, variants, error
):
    """A misspelt or ill-formed `variants:` said also that the references' labels were wrong
    ("allowed: null (the spec has no variants)"), which hid the one mistake."""
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: s\ngames: [leaper]\nseeds: [0]\n{variants}\nreference:\n"
        "  - {game: leaper, variant: Base, value: 7, split: train, budget: 1e6, seeds: 1, "
        "source: x}\n"
    )
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(path)
    (only,) = e.value.errors
    assert str(only).startswith(f"{path}: {error}")
    # Beside a `variants:` that stands, a stray `variant:` hides no reference's wrong label.
    path.write_text(path.read_text().replace("variant: Base,", "variant: Bsae,"))
    if variants.startswith("variant:"):
        path.write_text(path.read_text() + "variants: {Base: {}}\n")
        with pytest.raises(SpecError) as e:
            SweepSpec.from_yaml(path)
        assert [x.path for x in e.value.errors] == ["variant", "reference[0].variant"]


def test_a_spaces_bad_values_come_at_once_beside_its_bad_shapes_and_conditions(tmp_path):
    """A newcomer's space took three runs of validate: a bad shape or condition hid the
    sampled values, and one sampled param's bad low bound (the grid trials are built with it)
    hid another's bad choice."""
    f = tmp_path / "s.yaml"
    f.write_text(
        "name: s\ngames: [coinrun]\nseeds: [0]\nsearch: {algorithm: random, num_samples: 2}\n"
        "space:\n"
        "  lr: {loguniform: [0, 1e-3]}\n"
        "  entropy_coeff: {uniform: [-0.01, 0.05]}\n"
        "  gamma: {choice: [0.99, 1.5]}\n"
        "  clip_param: {normal: [0.2, 0.05]}\n"
        "  augment: {choice: [none, crop_resize]}\n"
        "  augment_p: {uniform: [0.2, 1.0], when: {augment: [crop_resiz]}}\n"
    )
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(f)
    assert sorted(x.path for x in e.value.errors) == [
        "space.augment_p.when.augment",
        "space.clip_param",
        "space.entropy_coeff",
        "space.gamma[1]",
        "space.lr.loguniform",
    ]


def test_an_unknown_param_name_does_not_hide_the_games_and_spaces_errors(tmp_path):
    """The trials were not built while a name was unknown, so a bad game or grid value waited
    for the next run of validate; they are built without the unknown names now."""
    f = tmp_path / "s.yaml"
    f.write_text(
        "name: s\ngames: [coinrun, BigFish]\nparams: {bogus_key: 1}\n"
        "space:\n  framestack: [none, gap5]\n"
    )
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(f)
    paths = sorted(x.path for x in e.value.errors)
    assert paths == ["games[1]", "params.bogus_key", "space.framestack[1]"], e.value.errors


def test_a_params_error_does_not_hide_the_games_and_spaces_errors(tmp_path):
    """Every trial starts from the params' defaults (`_defaults`, built without a game), so a
    value they refuse, by its own rule (a quoted `num_levels: "200"`) or by a rule across keys
    (a minibatch larger than the batch), failed each trial alone, and a bad game or grid value
    waited for the next run of validate."""
    f = tmp_path / "s.yaml"
    cases = {
        'num_levels: "200", gamma: 2': ["params.gamma", "params.num_levels"],
        "rollout_length: 16, num_envs_per_env_runner: 16": ["params.minibatch_size"] * 2,
    }
    for params, said in cases.items():
        f.write_text(
            f"name: s\ngames: [coinrun, BigFish]\nparams: {{{params}}}\n"
            "space:\n  framestack: [none, gap5]\n"
        )
        with pytest.raises(SpecError) as e:
            SweepSpec.from_yaml(f)
        paths = sorted(x.path for x in e.value.errors)
        assert paths == sorted(["games[1]", *said, "space.framestack[1]"]), e.value.errors
    # The trials' fallback takes a sampled parameter at its first candidate, as the defaults
    # do: not at TrialConfig's (minibatch_size 2,048, over this batch of 1,024).
    with pytest.raises(SpecError) as e:
        SweepSpec(
            name="s",
            budget=512,
            params={"rollout_length": 64, "num_envs_per_env_runner": 16},
            space={"minibatch_size": {"choice": [256, 512]}},
            search={"algorithm": "random"},
        )
    assert [x.path for x in e.value.errors] == ["budget"], e.value.errors
