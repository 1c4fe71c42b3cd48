"""Reading YAML: the one loader of specs, baselines and price tables (`yaml.safe_load` only).

PyYAML implements YAML 1.1, which reads `1e-4` (no dot) as a string and `1.5e+4` as a float.
Here every plain (unquoted) scalar in exponent notation is a number, an int where it is
integral (a budget of `25e6`), so that specs can be written the natural way; a quoted one
(`name: "1e5"`) stays text, as its writer asked.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import yaml

from rlsweep.errors import SpecError


def parse_yaml(text: str, source: str | None = None) -> Any:
    """The data in YAML `text` (`source`: the file it came from, for errors). A key written
    twice in one mapping is an error: YAML's loaders keep the last silently, so a second
    `params:` block would drop the first's values."""
    stream = io.StringIO(text)
    stream.name = source or "<text>"  # PyYAML's marks name it ("in <unicode string>" else)
    try:
        root = yaml.compose(stream, Loader=yaml.SafeLoader)
        twice = _keys_written_twice(root)
        _exponents_as_numbers(root, set())
        # The values are built by yaml.safe_load, from the node graph with its numbers retagged.
        data = None if root is None else yaml.safe_load(yaml.serialize(root))
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
_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"


def _exponents_as_numbers(node: yaml.Node | None, seen: set[int]) -> None:
    """Retag, in place, each plain scalar under `node` written in exponent notation as the
    number it is: an int where integral, else a float. Quoted scalars are left as text."""
    if node is None or id(node) in seen:  # an alias shares its anchor's node
        return
    seen.add(id(node))
    if isinstance(node, yaml.ScalarNode):
        if node.style is None and _EXP_NUMBER.fullmatch(node.value.strip()):
            number = float(node.value)
            integral = number.is_integer()
            node.tag, node.value = (_INT, str(int(number))) if integral else (_FLOAT, repr(number))
    elif isinstance(node, yaml.MappingNode):
        for _key, value in node.value:
            _exponents_as_numbers(value, seen)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _exponents_as_numbers(item, seen)
