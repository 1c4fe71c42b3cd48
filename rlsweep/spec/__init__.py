"""What to run: the sweep spec and its checks, the trial config and its parts, search-space
primitives, validators, YAML and overrides. Torch-free and Ray-free (pyproject's import
contracts).

`rlsweep.spec` was a module before the layers became folders: its names still import from here
(`rlsweep._moved`), loaded only when asked for.
"""

from rlsweep import _moved

__getattr__ = _moved.forward(
    __name__,
    ("spec", "spec_checks", "config", "subconfigs", "space", "validators", "yamlfile", "overrides"),
)
