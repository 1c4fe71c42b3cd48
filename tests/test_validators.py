import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
import yaml

from rlsweep.errors import ConfigError
from rlsweep.spec.validators import (
    Rule,
    Validated,
    build,
    check_each_field,
    check_num_gpus,
    checked,
    did_you_mean,
    failures,
    flag,
    fraction,
    integer,
    is_int,
    is_number,
    mapping,
    non_negative,
    one_of,
    optional,
    positive,
    probability,
    rule_of,
    text,
    unknown,
)


@pytest.mark.parametrize(
    ("value", "minimum", "ok"),
    [(3, None, True), (0, 0, True), (-1, 0, False), (True, None, False), (2.0, None, False)],
)
def test_is_int_refuses_bools_and_floats(value, minimum, ok):
    assert is_int(value, minimum) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (1, True),
        (0.5, True),
        (np.float32(0.5), True),
        (np.int64(2), True),
        (False, False),
        (np.bool_(True), False),
        (math.nan, False),
        (np.float32("inf"), False),
        (math.inf, False),
        ("1", False),
        (Fraction(1, 2), False),  # YAML cannot write it
    ],
)
def test_is_number_is_finite_and_not_a_bool(value, ok):
    assert is_number(value) is ok


# --- the rules declared with each field -------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "good", "bad", "allowed"),
    [
        (integer(1), [1, 7], [0, 1.0, True, "1", None], "an integer >= 1"),
        (integer(0), [0, 3], [-1, 0.5], "an integer >= 0"),
        (positive, [1e-9, 3], [0, -1, math.inf, False, "1"], "a number > 0"),
        (non_negative, [0, 0.5], [-1e-9, math.nan, True], "a number >= 0"),
        (probability, [0, 0.5, 1], [-0.1, 1.1, True], "a number in [0, 1]"),
        (fraction, [1e-9, 1], [0, 1.1, None], "a number in (0, 1]"),
        (flag, [True, False], [0, 1, "yes", None], "true, false"),
        (text, ["", "x"], [None, 1, ["x"]], "text"),
        (mapping, [{}, {"a": 1}], [[], None, "a: 1"], "a mapping"),
        (one_of(("max", "min")), ["max", "min"], ["Max", None, ["max"], 1], "max, min"),
        (
            optional(positive, "to disable"),
            [None, 2],
            [0, "none"],
            "a number > 0, or null to disable",
        ),
        (optional(integer(0)), [None, 0], [-1, False], "an integer >= 0, or null"),
    ],
)
def test_each_rule_says_what_it_allows(rule, good, bad, allowed):
    assert rule.allowed == allowed
    assert all(rule(v) for v in good)
    assert not any(rule(v) for v in bad)


TUPLES = Rule(lambda v: isinstance(v, list | tuple), "a list", convert=tuple)


@dataclass(frozen=True)
class Part(Validated):
    low: int = checked(0, rule=integer(0))
    high: int = checked(1, rule=integer(0))
    values: tuple[int, ...] = checked((), rule=optional(TUPLES))

    def _across_fields(self) -> list[ConfigError]:
        return failures(self, [("high", self.low < self.high, f"> low ({self.low})")])


@dataclass(frozen=True)
class Whole(Part):
    size: int = checked(1, rule=integer(1))

    def _across_fields(self) -> list[ConfigError]:
        return failures(self, [("size", self.size <= self.high, f"<= high ({self.high})")])


def test_every_field_is_checked_and_every_error_raised_at_once():
    with pytest.raises(ConfigError) as e:
        Whole(low=-1, high="2", size=0)
    assert [str(x) for x in e.value.errors] == [
        "low: got -1; allowed: an integer >= 0",
        "high: got '2' (a string, in quotes; unquoted, 2 is allowed); allowed: an integer >= 0",
        "size: got 0; allowed: an integer >= 1",
    ]


def test_rules_across_fields_run_once_the_fields_they_read_are_valid():
    # Part's rule reads valid fields (low, high), so it runs beside the error of `size`; Whole's
    # rule would read the bad size, so it waits.
    with pytest.raises(ConfigError) as e:
        Whole(low=3, high=2, size=0)
    assert [x.path for x in e.value.errors] == ["size", "high"]
    with pytest.raises(ConfigError) as e:
        Whole(low=1, high=2, size=5)  # each class's rules, the base's first
    assert [str(x) for x in e.value.errors] == ["size: got 5; allowed: <= high (2)"]
    with pytest.raises(ConfigError) as e:
        Whole(low=2, high=2, size=5)
    assert [x.path for x in e.value.errors] == ["high", "size"]


def test_a_value_that_passes_is_converted_and_a_refused_one_is_shown_as_given():
    assert Part(values=[1, 2]).values == (1, 2)
    assert Part(values=None).values is None
    with pytest.raises(ConfigError, match=r"^values: got 3; allowed: a list, or null$"):
        Part(values=3)


def test_a_numpy_value_is_held_as_the_python_one_yaml_and_tune_hold():
    from rlsweep.spec.config import TrialConfig

    config = TrialConfig(
        lr=np.float32(2.5e-4),
        gamma=np.float64(0.99),
        num_levels=np.int64(200),
        widths=list(np.array([16, 32, 32])),  # inside containers too
        lr_schedule=[[np.int64(0), np.float32(1e-4)], (1000, np.float64(2e-4))],
        learner_resources={"acc": np.float32(0.5)},
    )
    assert [type(v) for v in (config.lr, config.gamma, config.num_levels)] == [float, float, int]
    assert config.lr == pytest.approx(2.5e-4) and config.num_levels == 200
    assert config.widths == (16, 32, 32) and {type(w) for w in config.widths} == {int}
    assert config.learner_resources == {"acc": 0.5}
    held = yaml.safe_load(yaml.safe_dump(config.to_dict()))
    assert held["gamma"] == 0.99 and held["lr_schedule"] == [[0, pytest.approx(1e-4)], [1000, 2e-4]]


def test_check_each_field_returns_the_errors_instead():
    part = Part()
    object.__setattr__(part, "low", "x")
    assert [str(e) for e in check_each_field(part)] == ["low: got 'x'; allowed: an integer >= 0"]
    assert rule_of(Part, "low").allowed == "an integer >= 0"
    assert rule_of(Part, "missing") is None


def test_build_reports_unknown_keys_and_bad_values_together():
    assert build(Part, {"high": 3, "values": [3]}) == Part(high=3, values=(3,))
    with pytest.raises(ConfigError) as e:
        build(Part, {"lwo": 1, "high": -1})
    assert [str(x) for x in e.value.errors] == [
        "lwo: unknown key (did you mean 'low'?); allowed: low, high, values",
        "high: got -1; allowed: an integer >= 0",
    ]
    with pytest.raises(ConfigError, match=r"^got \[1\]; allowed: a mapping$"):
        build(Part, [1])


def test_unknown_suggests_the_closest_known_name_or_none():
    assert unknown("parameter", "lamda", ["lambda_", "lr"]) == (
        "unknown parameter (did you mean 'lambda_'?); allowed: lambda_, lr"
    )
    assert did_you_mean("zzz", ["lambda_", "lr"]) == ""


@pytest.mark.parametrize(
    ("num_gpus", "ok"),
    [(0, True), (0.125, True), (1, True), (2, True), (3.0, True), (1.5, False), (2.5, False)],
)
def test_num_gpus_is_a_fraction_of_one_gpu_or_whole_gpus(num_gpus, ok):
    """Ray's rule: a trial holds a fraction 0 < x <= 1 of one GPU, or whole GPUs."""
    assert check_num_gpus(num_gpus) is ok


def test_a_refused_value_says_what_it_may_have_meant():
    """Issue 40: `games: [BigFish]` gets a did-you-mean; a quoted "false" is said to be a
    string, which unquoted would pass."""
    from rlsweep.errors import SpecError
    from rlsweep.spec.spec import SweepSpec

    with pytest.raises(SpecError) as e:
        SweepSpec.from_dict(
            {"name": "s", "games": ["BigFish", "coinrn"], "params": {"num_levels": 200}}
        )
    assert [x.message.split("; allowed")[0] for x in e.value.errors] == [
        "got 'BigFish' (did you mean 'bigfish'?)",
        "got 'coinrn' (did you mean 'coinrun'?)",
    ]
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml_text('name: s\nparams: {normalize_reward: "false"}\n', "s.yaml")
    assert str(e.value) == (
        "s.yaml: params.normalize_reward: got 'false' (a string, in quotes; unquoted, false is "
        "allowed); allowed: true, false"
    )
    assert one_of(("none", "gap")).hint("pong") == ""  # nothing close: no guess
    assert integer(1).hint("x") == "" and integer(1).hint("0") == ""  # 0 would fail too
