"""The README and docs/ stay true to the tree: the Layout table names every module and only
paths that exist, and every relative link and #anchor resolves (GitHub's heading slugs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _layout_paths() -> list[str]:
    table = _section((ROOT / "README.md").read_text(), "Layout")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    return [p for row in rows for p in re.findall(r"`([^`]+)`", row.split("|")[1])]


def slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # no headings in code
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_slug_is_githubs():
    assert slug("Offline install (no package index)") == "offline-install-no-package-index"
    assert slug("How close `rlsweep plan` comes") == "how-close-rlsweep-plan-comes"
    assert slug("Checking a machine: rlsweep doctor") == "checking-a-machine-rlsweep-doctor"


def test_the_layout_names_only_paths_that_exist():
    paths = _layout_paths()
    assert len(paths) > 40
    assert [p for p in paths if not (ROOT / p).exists()] == []


def test_every_module_is_in_the_layout():
    listed = set(_layout_paths())
    modules = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "rlsweep").rglob("*.py")
        if p.name != "__init__.py"
    )
    assert [m for m in modules if m not in listed] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        missing_anchor = bool(anchor) and dest.suffix == ".md" and anchor not in _anchors(dest)
        if not dest.exists() or missing_anchor:
            broken.append(target)
    assert broken == []


def test_the_readmes_complete_example_is_the_shipped_spec():
    """Its commands run on search_spaces/framestack.yaml: the README's block is that file, and the
    file is valid, its smoke a few trials."""
    from rlsweep.spec.spec import SweepSpec

    readme = (ROOT / "README.md").read_text()
    block = readme.split("```yaml\n# search_spaces/framestack.yaml\n", 1)[1].split("```", 1)[0]
    shipped = ROOT / "search_spaces" / "framestack.yaml"
    assert shipped.read_text() == block
    spec = SweepSpec.from_yaml(shipped)
    assert spec.num_trials == 72 and spec.smoke_spec().num_trials == 3
