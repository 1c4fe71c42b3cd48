"""Environment variables set for the length of a `with` block, then put back as they were."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def set_env(values: Mapping[str, str]) -> Iterator[None]:
    """Set `values` in os.environ (what child processes started meanwhile inherit); on exit,
    each variable regains its old value, or is removed if it had none."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
