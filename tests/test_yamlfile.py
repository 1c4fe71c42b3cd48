"""rlsweep.spec.yamlfile: the one YAML loader of specs, baselines and price tables."""

import pytest

from rlsweep.errors import SpecError
from rlsweep.spec.yamlfile import parse_yaml


def test_plain_exponents_are_numbers_integral_ones_ints():
    """YAML 1.1 reads 1e-4 as text and 1.2288e+4 as a float: written plainly, each is a number."""
    text = "lr: 1e-4\nbudget: 25e6\nb: 1.2288e+4\nl: [5E-1, .5e1]\na: &x {y: 3e2}\nc: *x\nn: x\n"
    data = parse_yaml(text)
    assert data == {
        "lr": 1e-4,
        "budget": 25_000_000,
        "b": 12288,
        "l": [0.5, 5],
        "a": {"y": 300},
        "c": {"y": 300},
        "n": "x",
    }
    assert [type(data[k]) for k in ("lr", "budget", "b")] == [float, int, int]


def test_quoted_text_stays_text_even_where_it_looks_like_a_number():
    text = "name: \"1e5\"\nlabel: '2e3'\nblock: |\n  1e5\nx: 1e5\n"
    assert parse_yaml(text) == {"name": "1e5", "label": "2e3", "block": "1e5\n", "x": 100_000}


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


def test_a_quoted_number_in_a_spec_is_refused_with_the_hint_to_unquote_it(tmp_path):
    from rlsweep.spec.spec import SweepSpec

    f = tmp_path / "s.yaml"
    f.write_text('name: s\nbudget: "4e6"\n')
    with pytest.raises(SpecError) as e:
        SweepSpec.from_yaml(f)
    assert str(e.value) == (
        f"{f}: budget: got '4e6' (a string, in quotes; unquoted, 4e6 is allowed);"
        " allowed: an integer >= 1 (25e6 too)"
    )
    f.write_text("name: s\nbudget: 4e6\n")
    assert SweepSpec.from_yaml(f).budget == 4_000_000
