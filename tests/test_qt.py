"""rlsweep.envs.qt: the declared system libraries are what the Qt wheel links, each with the package
that ships it, and a missing one is named (with its package) by the loader's error."""

import re
import shutil
import subprocess

import pytest

from rlsweep.envs import qt

# What every Python process already has: glibc, the dynamic loader and the C++ runtime.
BASE = {
    "linux-vdso.so.1",
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
    "libstdc++.so.6",
    "libgcc_s.so.1",
}


@pytest.mark.skipif(shutil.which("ldd") is None, reason="needs ldd")
def test_the_declared_libraries_are_what_the_qt_wheel_links():
    """ldd of the installed PyQt5-Qt5's libQt5Gui (which links libQt5Core): every library it
    takes from the system, beyond glibc and the C++ runtime, is declared, and nothing else."""
    wheel = qt._wheel_lib_dir()
    assert wheel, "PyQt5-Qt5 is a dependency"
    out = subprocess.run(
        ["ldd", f"{wheel}/libQt5Gui.so.5"], capture_output=True, text=True, check=True
    ).stdout
    linked = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)(?: => (\S+))?", line)
        linked[m.group(1).rsplit("/", 1)[-1]] = m.group(2) or ""
    from_system = {name for name, path in linked.items() if not path.startswith(wheel)} - BASE
    assert from_system == {lib.soname for lib in qt.SYSTEM_LIBRARIES}


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs dpkg (Debian/Ubuntu)")
def test_each_library_comes_from_its_declared_package():
    for lib in qt.SYSTEM_LIBRARIES:
        out = subprocess.run(
            ["dpkg", "-S", f"*/{lib.soname}"], capture_output=True, text=True, check=True
        ).stdout
        assert {line.split(":")[0] for line in out.splitlines()} == {lib.package}, lib


def test_apt_packages_names_each_package_once_in_order():
    packages = qt.apt_packages()
    assert packages[:4] == ["libgl1", "libglx0", "libglvnd0", "libglib2.0-0"]
    assert len(packages) == len(set(packages)) == len(qt.SYSTEM_LIBRARIES) - 1  # glib ships 2


def test_every_declared_library_loads_here():
    assert qt.missing_system_libraries() == []


def test_missing_libraries_are_named_with_the_loaders_message(libraries_unavailable):
    libraries_unavailable("libGLX.so.0", "libgthread-2.0.so.0")
    missing = qt.missing_system_libraries()
    assert [lib.soname for lib, _ in missing] == ["libGLX.so.0", "libgthread-2.0.so.0"]
    assert [lib.package for lib, _ in missing] == ["libglx0", "libglib2.0-0"]
    assert missing[0][1].startswith("libGLX.so.0: cannot open shared object file")


def test_load_qt5_names_each_missing_library_and_its_package(libraries_unavailable):
    libraries_unavailable("libGL.so.1", "libGLX.so.0")
    with pytest.raises(qt.QtRuntimeMissing) as e:
        qt.load_qt5.__wrapped__()  # uncached: this process loaded Qt already
    message = str(e.value)
    assert "libGL.so.1 (libgl1), libGLX.so.0 (libglx0)" in message
    assert "apt-get install -y libgl1 libglx0" in message
    assert "make syslibs" in message


def test_load_qt5_without_the_wheel_and_system_qt_says_install_the_wheel(
    monkeypatch, libraries_unavailable
):
    monkeypatch.setattr(qt, "_wheel_lib_dir", lambda: None)
    libraries_unavailable("libQt5Core.so.5")
    with pytest.raises(qt.QtRuntimeMissing, match="pip install PyQt5-Qt5"):
        qt.load_qt5.__wrapped__()
