"""Loads the Qt5 runtime that envpool's Procgen links against, before envpool.procgen imports;
declares the system libraries that runtime needs (`SYSTEM_LIBRARIES`).

The `PyQt5-Qt5` wheel ships `libQt5Core.so.5` and `libQt5Gui.so.5` but nothing puts them on the
loader path, so we dlopen them with RTLD_GLOBAL; the system's Qt5 is the fallback. The wheel does
not ship what those two link from the system (OpenGL's dispatch libraries, GLib, X11's client
libraries): GPU images often lack them, and then the load fails and names what is missing.

Stdlib only, and importable as a plain file: `benchmarks/gpu_check.py` reads the list on a node
before anything else is installed.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
from typing import NamedTuple

_LIBS = ("libQt5Core.so.5", "libQt5Gui.so.5")


class SystemLibrary(NamedTuple):
    """A shared library the Qt runtime loads from the system, and the package that ships it."""

    soname: str
    package: str
    """The Debian/Ubuntu package (Debian 12, Ubuntu 22.04 and 24.04). Ubuntu 24.04 and Debian
    13 renamed libglib2.0-0 to libglib2.0-0t64, which provides the old name: `apt-get install
    libglib2.0-0` installs it there too, so the list keeps the name every release resolves."""


SYSTEM_LIBRARIES: tuple[SystemLibrary, ...] = (
    SystemLibrary("libGL.so.1", "libgl1"),
    SystemLibrary("libGLX.so.0", "libglx0"),
    SystemLibrary("libGLdispatch.so.0", "libglvnd0"),
    SystemLibrary("libglib-2.0.so.0", "libglib2.0-0"),
    SystemLibrary("libgthread-2.0.so.0", "libglib2.0-0"),
    SystemLibrary("libX11.so.6", "libx11-6"),
    SystemLibrary("libxcb.so.1", "libxcb1"),
    SystemLibrary("libXau.so.6", "libxau6"),
    SystemLibrary("libXdmcp.so.6", "libxdmcp6"),
    SystemLibrary("libbsd.so.0", "libbsd0"),
    SystemLibrary("libmd.so.0", "libmd0"),
    SystemLibrary("libpcre2-8.so.0", "libpcre2-8-0"),
    SystemLibrary("libz.so.1", "zlib1g"),
)
"""Every library PyQt5-Qt5 5.15.2's libQt5Core and libQt5Gui load from the system, directly or
through one another (`ldd`), besides glibc and the C++ runtime that every Python has. The
Dockerfile installs exactly these packages; `rlsweep doctor` and `load_qt5`'s error name the
missing ones; `benchmarks/gpu_check.py` unpacks their .debs on a node without a package index.
Procgen draws with Qt's raster engine and never opens a GL context, so no GL driver is needed."""


class QtRuntimeMissing(RuntimeError):
    pass


def apt_packages(libraries: tuple[SystemLibrary, ...] = SYSTEM_LIBRARIES) -> list[str]:
    """The packages that ship `libraries`, each once, in the list's order."""
    return list(dict.fromkeys(lib.package for lib in libraries))


def _dlopen(name: str, mode: int = ctypes.RTLD_LOCAL) -> ctypes.CDLL:
    """The one place this module loads a library (tests replace it to make one unavailable)."""
    return ctypes.CDLL(name, mode=mode)


def missing_system_libraries() -> list[tuple[SystemLibrary, str]]:
    """Each of `SYSTEM_LIBRARIES` that cannot be loaded here, with the loader's message (which
    names another library when it is a dependency that is missing)."""
    missing = []
    for lib in SYSTEM_LIBRARIES:
        try:
            _dlopen(lib.soname)
        except OSError as e:
            missing.append((lib, str(e)))
    return missing


def install_hint(libraries: list[SystemLibrary]) -> str:
    """How to provide `libraries`: apt, or their .debs unpacked where there is no index."""
    packages = " ".join(apt_packages(tuple(libraries)))
    return (
        f"apt-get install -y {packages} (Debian/Ubuntu); without a package index, `make syslibs` "
        "on a machine with one and `make gpu-check` beside the .debs unpacks them onto "
        "LD_LIBRARY_PATH"
    )


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
                _dlopen(os.path.join(wheel_dir, lib), ctypes.RTLD_GLOBAL)
            return f"wheel:{wheel_dir}"
        except OSError as e:
            errors.append(f"PyQt5-Qt5 wheel at {wheel_dir}: {e}")
    try:
        for lib in _LIBS:
            _dlopen(lib, ctypes.RTLD_GLOBAL)
        return "system"
    except OSError as e:
        errors.append(f"system Qt5: {e}")
    if missing := missing_system_libraries():
        names = ", ".join(f"{lib.soname} ({lib.package})" for lib, _ in missing)
        fix = f"missing system libraries: {names}. Install: {install_hint([m for m, _ in missing])}"
    else:
        fix = "Install it with `pip install PyQt5-Qt5` (or the system package, e.g. libqt5gui5)"
    raise QtRuntimeMissing(
        "envpool's Procgen needs the Qt5 runtime (libQt5Core.so.5, libQt5Gui.so.5) and the "
        f"system libraries it links; {fix}. Tried: " + "; ".join(errors)
    )
