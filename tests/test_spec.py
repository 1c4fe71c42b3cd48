from pathlib import Path

import pytest

from rlsweep.spec import SpecError, SweepSpec

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "search_spaces").rglob("*.yaml")) + sorted(
    (ROOT / "baselines").rglob("*.yaml")
)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_spec_validates(path):
    spec = SweepSpec.from_yaml(path)
    assert spec.trials()


def test_expansion_is_games_x_seeds_x_grid():
    spec = SweepSpec(
        name="x",
        games=["coinrun", "maze"],
        seeds=[0, 1, 2],
        budget=1000,
        grid={"framestack": ["none", "gap"], "lr": [1e-4, 5e-4]},
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
    assert all(t.total_env_steps == 1000 for t in trials)


def test_yaml_exponent_numbers_are_floats(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(
        "name: s\nparams:\n  lr: 1e-4\n  entropy_coeff: 5E-3\ngrid:\n  kl_target: [1e-2, 2e-2]\n"
    )
    spec = SweepSpec.from_yaml(f)
    assert spec.params == {"lr": 1e-4, "entropy_coeff": 5e-3}
    assert spec.grid == {"kl_target": [0.01, 0.02]}


def test_yaml_round_trip(tmp_path):
    spec = SweepSpec(
        name="rt",
        games=["heist"],
        seeds=[4, 5],
        budget=2048,
        params={
            "lr": 1e-4,
            "widths": [32, 64, 64],
            "num_envs_per_env_runner": 16,
            "minibatch_size": 512,
        },
        grid={"framestack": ["none", "stack"]},
        max_concurrent=2,
    )
    f = tmp_path / "rt.yaml"
    f.write_text(spec.to_yaml())
    assert SweepSpec.from_yaml(f) == spec


BAD = [
    ({"games": []}, "games: got []; allowed: a non-empty list"),
    ({"games": ["coinrun", "pong"]}, "games[1]: got 'pong'; allowed: bigfish"),
    ({"seeds": [0, 0]}, "seeds: got [0, 0]; values must be distinct"),
    ({"budget": 0}, "budget: got 0; allowed: an integer number of env steps > 0"),
    ({"budget": "1e6"}, "budget: got 1000000.0; allowed: an integer number of env steps > 0"),
    (
        {"grid": {"framestak": ["gap"]}},
        "grid.framestak: unknown parameter (did you mean 'framestack'?)",
    ),
    (
        {"grid": {"framestack": ["none", "gap4"]}},
        "grid.framestack[1]: got 'gap4'; allowed: none, stack, gap",
    ),
    ({"grid": {"lr": []}}, "grid.lr: got []; allowed: a non-empty list of values"),
    ({"grid": {"lr": [1e-3]}, "params": {"lr": 1e-4}}, "grid.lr: also set in params"),
    ({"params": {"gamma": 2}}, "params.gamma: got 2; allowed: 0 < gamma <= 1"),
    ({"params": {"seed": 3}}, "params.seed: set this with the top-level 'seeds' key"),
    (
        {"params": {"minibatch_size": 9000}},
        "params.minibatch_size: got 9000; allowed: <= the train batch",
    ),
    (
        {"params": {"distribution_mode": "extreme"}},
        "params.distribution_mode: got 'extreme'; allowed for coinrun",
    ),
    ({"metric": "reward"}, "metric: got 'reward'; allowed: env_steps, train/return"),
    ({"mode": "maximize"}, "mode: got 'maximize'; allowed: max, min"),
    ({"name": "a b"}, "name: got 'a b'; allowed: letters, digits"),
    ({"budegt": 1}, "budegt: unknown key (did you mean 'budget'?); allowed: name, games"),
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
    with pytest.raises(SpecError, match="name: missing"):
        SweepSpec.from_dict({"games": ["coinrun"]})


def test_validation_needs_no_ray():
    import subprocess
    import sys

    code = (
        "import sys; from rlsweep.spec import SweepSpec; "
        f"SweepSpec.from_yaml({str(ROOT / 'search_spaces/demo.yaml')!r}).trials(); "
        "assert 'ray' not in sys.modules, 'validation imported ray'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
