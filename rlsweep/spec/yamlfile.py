"""Reading YAML: the one loader of specs, baselines and price tables (`yaml.safe_load` only).

PyYAML implements YAML 1.1, which reads `1e-4` (no dot) as a string. `numbers_from_strings`
turns strings that are plainly numbers in exponent notation (`1e-4`, `5E+5`) into numbers, so
that specs can be written the natural way.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from rlsweep.errors import SpecError


def parse_yaml(text: str, source: str | None = None) -> Any:
    """The data in YAML `text` (`source`: the file it came from, for errors). A key written
    twice in one mapping is an error: YAML's loaders keep the last silently, so a second
    `params:` block would drop the first's values."""
    try:
        twice = _keys_written_twice(yaml.compose(text, Loader=yaml.SafeLoader))
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpecError(source, "", f"not valid YAML: {e}") from None
    if twice:
        raise SpecError.several(
            [
                SpecError(source, path, f"written twice (lines {a} and {b}); write it once")
                for path, a, b in twice
            ]
        )
    return data


def _keys_written_twice(node: yaml.Node | None, path: str = "") -> list[tuple[str, int, int]]:
    """(key path, first line, second line) of each key a mapping under `node` repeats. Only
    the node graph is composed (no object is built): the values come from `yaml.safe_load`."""
    found: list[tuple[str, int, int]] = []
    if isinstance(node, yaml.MappingNode):
        lines: dict[str, int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.value == "<<":  # a merge may override
                continue
            here, line = f"{path}.{key.value}" if path else key.value, key.start_mark.line + 1
            if key.value in lines:
                found.append((here, lines[key.value], line))
            lines.setdefault(key.value, line)
            found += _keys_written_twice(value, here)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found += _keys_written_twice(item, f"{path}[{i}]")
    return found


def read_yaml(path: str | Path) -> Any:
    """The data in the YAML file `path`."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SpecError(str(path), "", f"cannot read: {e.strerror}") from None
    return parse_yaml(text, str(path))


_EXP_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)[eE][-+]?\d+")


def numbers_from_strings(value: Any) -> Any:
    """YAML 1.1 reads 1e-4 as a string; turn such strings back into numbers, recursively
    (integral ones, like a budget of 25e6, into ints)."""
    if isinstance(value, str) and _EXP_NUMBER.fullmatch(value.strip()):
        number = float(value)
        return int(number) if number.is_integer() else number
    if isinstance(value, dict):
        return {k: numbers_from_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers_from_strings(v) for v in value]
    return value
