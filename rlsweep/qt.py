"""Loads the Qt5 runtime that envpool's Procgen links against, before envpool.procgen imports.

The `PyQt5-Qt5` wheel ships `libQt5Core.so.5` and `libQt5Gui.so.5` but nothing puts them on the
loader path, so we dlopen them with RTLD_GLOBAL; the system's Qt5 is the fallback.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os

_LIBS = ("libQt5Core.so.5", "libQt5Gui.so.5")


class QtRuntimeMissing(RuntimeError):
    pass


def _wheel_lib_dir() -> str | None:
    try:
        dist = importlib.metadata.distribution("PyQt5-Qt5")
    except importlib.metadata.PackageNotFoundError:
        return None
    path = str(dist.locate_file("PyQt5/Qt5/lib"))
    return path if os.path.isdir(path) else None


@functools.cache
def load_qt5() -> str:
    """Load Qt5 once per process; returns where it came from ('wheel:<dir>' or 'system')."""
    wheel_dir = _wheel_lib_dir()
    errors = []
    if wheel_dir:
        try:
            for lib in _LIBS:
                ctypes.CDLL(os.path.join(wheel_dir, lib), mode=ctypes.RTLD_GLOBAL)
            return f"wheel:{wheel_dir}"
        except OSError as e:
            errors.append(f"PyQt5-Qt5 wheel at {wheel_dir}: {e}")
    try:
        for lib in _LIBS:
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
        return "system"
    except OSError as e:
        errors.append(f"system Qt5: {e}")
    raise QtRuntimeMissing(
        "envpool's Procgen needs the Qt5 runtime (libQt5Core.so.5, libQt5Gui.so.5). "
        "Install it with `pip install PyQt5-Qt5` (or the system package, e.g. libqt5gui5). "
        "Tried: " + "; ".join(errors)
    )
