"""The layers' import contracts (pyproject.toml's [tool.importlinter], run by `make lint`) hold on
this tree, and each kind fails on a copy of it with one import added against it: a contract
that could not fail would check nothing."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the package under `root`, as `make lint` runs it."""
    env = {**os.environ, "PYTHONPATH": str(root)}  # that tree's rlsweep, not an installed one
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tree_keeps_its_contracts():
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


@pytest.mark.parametrize(
    ("module", "added", "broken"),
    [
        # results must stay torch-free: a report that needs torch to read a table
        ("rlsweep/results/stats.py", "import torch", "load no torch"),
        # ... and Ray-free, through a module of its own layer as well
        ("rlsweep/results/tables.py", "from rlsweep.run import session", "load no Ray"),
        # the spec layer is below the run: it cannot reach up to the sweep
        ("rlsweep/spec/config.py", "from rlsweep.run import sweep", "import downwards only"),
        # two layers side by side do not import each other
        ("rlsweep/results/plots.py", "from rlsweep.trial import models", "downwards only"),
    ],
)
def test_an_import_against_a_contract_fails_it(tmp_path, module, added, broken):
    shutil.copytree(
        ROOT / "rlsweep", tmp_path / "rlsweep", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    path = tmp_path / module
    text = path.read_text()
    head, sep, rest = text.partition("\nfrom __future__ import annotations\n")
    path.write_text(head + sep + added + "  # noqa\n" + rest if sep else added + "\n" + text)
    out = lint_imports(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    failed = [line for line in out.stdout.splitlines() if " BROKEN" in line]
    assert [line for line in failed if broken in line], out.stdout
    dotted = module.removesuffix(".py").replace("/", ".")
    assert dotted in out.stdout  # the report names the import that broke it


def test_no_module_imports_a_path_from_before_the_folders():
    """The old paths still import (rlsweep._moved), and lint-imports cannot see them (it drops
    imports of modules that do not exist): each import in the package, the tests and the
    benchmarks names the module where it is now."""
    from rlsweep._moved import MOVED, PACKAGED

    old = set(MOVED) - set(PACKAGED)
    stale = []
    for path in sorted(ROOT.glob("rlsweep/**/*.py")) + sorted(ROOT.glob("benchmarks/**/*.py")):
        stale += _old_imports(path, old)
    for path in sorted(ROOT.glob("tests/*.py")):
        if path.name != "test_moved.py":  # which imports the old paths on purpose
            stale += _old_imports(path, old)
    assert stale == []


def _old_imports(path: Path, old: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names = {a.name for a in node.names}
        else:
            continue
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in sorted(names & old)]
    return found
