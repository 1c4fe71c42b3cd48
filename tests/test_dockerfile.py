"""The Dockerfile (no Docker engine here: it is parsed, not built) against what rlsweep
declares: its system packages are exactly `rlsweep.envs.qt.SYSTEM_LIBRARIES`' and it installs
rlsweep with the commands docs/cluster.md gives and the pinned torch."""

import re
import shlex
from pathlib import Path

from rlsweep.envs import qt
from rlsweep.launch.ec2 import DEFAULT_TORCH

ROOT = Path(__file__).resolve().parents[1]


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        out.append((keyword.upper(), args.strip()))
        pending = ""
    return out


def commands(steps: list[tuple[str, str]]) -> list[list[str]]:
    """Every shell command of every RUN, split into words, with ${ARG}s at their defaults."""
    args: dict[str, str] = {}
    out = []
    for keyword, rest in steps:
        if keyword == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            args[name] = value
        elif keyword == "RUN":
            expanded = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest)
            out += [shlex.split(part) for part in expanded.split("&&")]
    return out


def installed(cmds: list[list[str]], tool: list[str]) -> list[list[str]]:
    """The names each `<tool> install` command installs (its words that are not options)."""
    n = len(tool)
    return [
        [word for word in cmd[n + 1 :] if not word.startswith("-")]
        for cmd in cmds
        if cmd[: n + 1] == [*tool, "install"]
    ]


def documented_install() -> list[str]:
    """The pip commands in the first sh block of docs/cluster.md's "A container image"."""
    text = (ROOT / "docs" / "cluster.md").read_text()
    section = text.split("## A container image", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#")[0].strip() for line in block.splitlines() if line.startswith("pip ")]


STEPS = instructions((ROOT / "Dockerfile").read_text())
COMMANDS = commands(STEPS)


def test_the_apt_packages_are_the_declared_system_libraries():
    lists = installed(COMMANDS, ["apt-get"])
    declared = qt.apt_packages()
    libraries = [packages for packages in lists if set(packages) & set(declared)]
    assert len(libraries) == 1, "one apt-get install of the system libraries"
    assert sorted(libraries[0]) == sorted(declared)
    assert len(libraries[0]) == len(set(libraries[0]))


def test_rlsweep_is_installed_as_the_docs_say_with_torch_pinned_first():
    pip = [words for words in installed(COMMANDS, ["pip"]) if words != ["pip"]]
    toolkit = [words for words in pip if any(w.startswith("sagemaker-training") for w in words)]
    rlsweep = [f"pip install {' '.join(words)}" for words in pip if words not in toolkit]
    assert rlsweep == documented_install() == [f"pip install {DEFAULT_TORCH}", "pip install ."]
    # `.` is the copied checkout: the last WORKDIR before that RUN is where `COPY .` put it.
    at = next(i for i, (kw, rest) in enumerate(STEPS) if kw == "RUN" and rest == "pip install .")
    (copied,) = [rest.split() for kw, rest in STEPS[:at] if kw == "COPY"]
    workdir = [rest for kw, rest in STEPS[:at] if kw == "WORKDIR"][-1]
    assert copied[0] == "." and workdir == copied[1]


def test_sagemakers_toolkit_is_installed_and_the_build_ends_with_doctor():
    pip = installed(COMMANDS, ["pip"])
    assert any(w.startswith("sagemaker-training==") for words in pip for w in words)
    assert COMMANDS[-1] == ["rlsweep", "doctor"]
    assert [rest for keyword, rest in STEPS if keyword == "ARG"][0].startswith(
        "BASE_IMAGE=nvidia/cuda:"
    )
    assert not any("/opt/ml/code" in rest for _, rest in STEPS)  # the toolkit's, left empty


def test_the_parser_reads_continuations_and_args():
    steps = instructions("ARG X=1\n# note\nRUN a ${X} \\\n    && b 'c d'\n")
    assert steps == [("ARG", "X=1"), ("RUN", "a ${X}  && b 'c d'")]
    assert commands(steps) == [["a", "1"], ["b", "c d"]]
