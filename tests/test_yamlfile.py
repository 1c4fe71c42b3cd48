"""rlsweep.spec.yamlfile: the one YAML loader of specs, baselines and price tables."""

import pytest

from rlsweep.errors import SpecError
from rlsweep.spec.yamlfile import numbers_from_strings, parse_yaml


def test_exponent_strings_become_numbers():
    data = numbers_from_strings(parse_yaml("lr: 1e-4\nbudget: 25e6\nname: x\n"))
    assert data == {"lr": 1e-4, "budget": 25_000_000, "name": "x"}


def test_a_key_written_twice_is_an_error_at_its_path_with_both_lines():
    """YAML's loaders keep the second silently: the first block's values would be lost."""
    text = (
        "params:\n  lr: 1e-4\n  num_levels: 500\nspace:\n  lr: [1, 2]\n  lr: [3]\nparams:\n  x: 1\n"
    )
    with pytest.raises(SpecError) as e:
        parse_yaml(text, "spec.yaml")
    assert [str(x) for x in e.value.errors] == [
        "spec.yaml: space.lr: written twice (lines 5 and 6); write it once",
        "spec.yaml: params: written twice (lines 1 and 7); write it once",
    ]


def test_keys_repeated_in_different_mappings_and_merges_are_fine():
    text = "a: &base {x: 1}\nb:\n  <<: *base\n  x: 2\nc: [{x: 1}, {x: 2}]\n"
    assert parse_yaml(text) == {"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]}


def test_invalid_yaml_names_the_file():
    with pytest.raises(SpecError, match=r"^spec.yaml: not valid YAML"):
        parse_yaml("a: [1,\n", "spec.yaml")
