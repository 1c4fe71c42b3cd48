import pytest

from rlsweep.errors import ConfigError
from rlsweep.run.tune_bridge import to_tune
from rlsweep.spec.space import KINDS, Param, apply_conditions, parse_space


def test_a_plain_list_is_a_grid_and_round_trips():
    space = parse_space({"lr": [1e-4, 5e-4], "framestack_k": {"int": [2, 4], "q": 2}})
    assert space["lr"] == Param("grid", (1e-4, 5e-4)) and space["lr"].is_grid
    assert {k: p.to_raw() for k, p in space.items()} == {
        "lr": [1e-4, 5e-4],
        "framestack_k": {"int": [2, 4], "q": 2},
    }
    assert parse_space({k: p.to_raw() for k, p in space.items()}) == space


def test_int_includes_its_upper_bound_in_tune():
    domain = to_tune(Param.parse({"int": [1, 4]}))
    assert (domain.lower, domain.upper) == (1, 5)  # Tune's randint excludes the upper bound
    assert Param.parse({"int": [1, 4]}).candidates == (1, 4)


@pytest.mark.parametrize("q", [0.5, 1.5, 2.0001])
def test_q_of_an_int_parameter_must_be_an_integer(q):
    """Tune's qrandint takes an integer q: int(0.5) would quantize to multiples of 0."""
    with pytest.raises(ConfigError) as e:
        Param.parse({"int": [1, 4], "q": q})
    assert str(e.value) == f"q: got {q!r}; allowed: an integer >= 1 for an int parameter"


def test_an_integer_q_of_an_int_parameter_reaches_tune():
    domain = to_tune(Param.parse({"int": [2, 8], "q": 2}))
    assert (domain.lower, domain.upper, domain.sampler.q) == (2, 8, 2)


@pytest.mark.parametrize(
    ("raw", "values"),
    [
        ({"int": [1, 9], "q": 2}, [2, 4, 6, 8]),
        ({"int": [1, 9], "q": 1}, list(range(1, 10))),  # qrandint's q of 1 drops 9
        ({"int": [1, 9]}, list(range(1, 10))),
        ({"uniform": [0.15, 0.95], "q": 0.1}, [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]),
    ],
)
def test_tunes_random_search_and_optuna_draw_the_multiples_of_q_inside_the_range(raw, values):
    """What `q` says (samples are multiples of q inside [low, high], both ends included) holds
    under both searchers: Tune's random search draws multiples of q, OptunaSearch gives Optuna
    low + k q, which agree only between `Param.bounds`."""
    import numpy as np
    from ray.tune.search.optuna import OptunaSearch

    p = Param.parse(raw)
    domain = to_tune(p)
    drawn = domain.sample(size=2000, random_state=np.random.RandomState(0))
    assert sorted({round(float(v), 9) for v in drawn}) == pytest.approx(values)
    optuna = OptunaSearch.convert_search_space({"x": domain})["x"]
    lo, hi, step = optuna.low, optuna.high, optuna.step
    assert [lo + k * step for k in range(round((hi - lo) / step) + 1)] == pytest.approx(values)
    assert p.candidates == pytest.approx((values[0], values[-1]))


@pytest.mark.parametrize("raw", [{"int": [5, 7], "q": 4}, {"uniform": [0.11, 0.19], "q": 0.1}])
def test_a_q_without_a_multiple_in_the_range_is_refused(raw):
    """Tune's sampler would raise on the driver after Ray started."""
    with pytest.raises(ConfigError, match=r"^q: got .*: no multiple of it lies in \["):
        Param.parse(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"normal": [0, 1]}, "got {'normal': [0, 1]}; allowed: exactly one of grid, choice"),
        ({"uniform": [1, 0]}, "uniform: got [1, 0]; allowed: [low, high], low < high"),
        ({"uniform": [0, True]}, "uniform: got [0, True]; allowed: [low, high], low < high"),
        ({"loguniform": [0, 1]}, "loguniform: got low 0; allowed: low > 0 on a log scale"),
        ({"int": [1.5, 3]}, "int: got [1.5, 3]; allowed: integer bounds"),
        ({"uniform": [0, 1], "q": 0}, "q: got 0; allowed: a number > 0"),
        ({"choice": [1, 2], "q": 1}, "choice: takes values only (no range or q)"),
        # the same trials twice (YAML reads 1e-4 and 0.0001 alike), or one value favoured
        ([1e-4, 0.0001], "got [0.0001, 0.0001]: 0.0001 is in it twice; allowed: distinct values"),
        ({"choice": ["gap", "none", "gap"]}, "choice: got ['gap', 'none', 'gap']: 'gap' is in"),
        ({"grid": [1, 2], "when": {"augment": ["flip"]}}, "when: a grid parameter cannot be"),
        ({"choice": [1], "when": {"augment": []}}, "when.augment: needs a non-empty list"),
    ],
)
def test_bad_parameters_are_refused_at_construction(raw, message):
    with pytest.raises(ConfigError) as e:
        Param.parse(raw)
    assert str(e.value).startswith(message)
    assert KINDS == ("grid", "choice", "uniform", "loguniform", "int")


def test_errors_carry_the_key_path_under_space():
    with pytest.raises(ConfigError, match=r"^space\.lr\.q: got -1"):
        parse_space({"lr": {"uniform": [1e-4, 1e-3], "q": -1}})


def test_conditional_parameter_falls_back_to_default():
    space = parse_space({"framestack_k": {"choice": [2, 8], "when": {"framestack": ["gap"]}}})
    defaults = {"framestack": "none", "framestack_k": 4}
    assert (
        apply_conditions({"framestack": "none", "framestack_k": 8}, space, defaults)["framestack_k"]
        == 4
    )
    assert (
        apply_conditions({"framestack": "gap", "framestack_k": 8}, space, defaults)["framestack_k"]
        == 8
    )
    # A condition on two params holds where both hold, not where either does.
    both = parse_space(
        {"augment_p": {"uniform": [0.2, 1], "when": {"augment": ["flip"], "framestack": ["gap"]}}}
    )
    defaults = {"augment": "none", "framestack": "none", "augment_p": 1.0}
    for augment, framestack, p in (
        ("flip", "gap", 0.5),
        ("flip", "none", 1.0),
        ("none", "gap", 1.0),
    ):
        config = {"augment": augment, "framestack": framestack, "augment_p": 0.5}
        assert apply_conditions(config, both, defaults)["augment_p"] == p, (augment, framestack)
