"""rlsweep's Procgen (envpool + the PyQt5-Qt5 wheel's Qt) against OpenAI's procgen 0.10.7.

`fixtures/procgen_0.10.7_frames.json` holds what procgen 0.10.7 showed for a few fixed cases
(frame hashes, rewards, dones, level seeds; recorded by `fixtures/make_procgen_fixture.py`).
Each case is replayed here through `ProcgenVectorEnv` and must match exactly. Frames differ
(a few pixels at sprite edges) when Qt renders differently: PyQt5-Qt5 5.15.19 does, 5.15.2
matches procgen 0.10.7 bit for bit.

Autoreset differs, and the replay maps it: procgen resets inside the step that ends an episode
(that step returns the next episode's first frame), envpool on the next step (the done step
returns the episode's last frame; the step after it ignores its action and returns the new
first frame with reward 0). So after each done, envpool takes one extra step, which must show
the frame procgen showed at the done step.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os

import numpy as np
import pytest

from rlsweep.envs.vector_env import ProcgenVectorEnv
from rlsweep.spec.subconfigs import EnvConfig

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "procgen_0.10.7_frames.json")

with open(FIXTURE) as _f:
    CASES = json.load(_f)["cases"]


def _frame_hash(obs: np.ndarray) -> str:
    """Same hash as the recorder: sha256 of the (64, 64, 3) HWC frame, first 12 hex digits."""
    frame = np.ascontiguousarray(obs[0].transpose(1, 2, 0))  # (1, 3, 64, 64) CHW -> HWC
    return hashlib.sha256(frame.tobytes()).hexdigest()[:12]


def _qt() -> str:
    from rlsweep.envs.qt import load_qt5

    try:
        version = importlib.metadata.version("PyQt5-Qt5")
    except importlib.metadata.PackageNotFoundError:
        version = "not installed"
    return f"PyQt5-Qt5 {version}, Qt loaded from {load_qt5()}"


def replay(case: dict) -> list[str]:
    """Play `case` on envpool through rlsweep; the mismatches against procgen, first first."""
    game, mode = case["game"], case["mode"]
    if mode == "exploration":
        cfg = EnvConfig(game=game, distribution_mode=mode)
    else:
        cfg = EnvConfig(
            game=game,
            distribution_mode=mode,
            num_levels=case["num_levels"],
            start_level=case["start_level"],
        )
    actions = [int(c, 16) for c in case["actions"]]
    frames = case["frames"]
    rewards = {t: r for t, r in case["rewards"]}
    dones = set(case["dones"])
    seeds = np.zeros(len(frames), np.int64)  # level seed of frames[i]
    for i, seed in case["level_seeds"]:
        seeds[i:] = seed

    env = ProcgenVectorEnv(cfg, num_envs=1, seed=case["rand_seed"], num_threads=1)
    out: list[str] = []
    frame_diffs = 0

    def frame(obs: np.ndarray, i: int, where: str) -> None:
        nonlocal frame_diffs
        if frames[i] is not None and _frame_hash(obs) != frames[i]:
            frame_diffs += 1
            if frame_diffs == 1:
                out.append(f"{where}: frame differs (hash {_frame_hash(obs)}, procgen {frames[i]})")

    def level(i: int, where: str) -> None:
        if env.level_seeds[0] != seeds[i]:
            out.append(f"{where}: level seed {env.level_seeds[0]}, procgen {seeds[i]}")

    try:
        obs, _ = env.reset()
        frame(obs, 0, "reset")
        level(0, "reset")
        restart = False
        for t, a in enumerate(actions):
            if restart:  # envpool's reset step shows what procgen's done step t-1 showed
                obs, r, term, trunc, _ = env.step(np.array([a]))
                where = f"step {t - 1} (envpool's reset step after it)"
                frame(obs, t, where)
                level(t, where)
                if r[0] != 0 or term[0] or trunc[0]:
                    out.append(f"{where}: reward {r[0]}, done {term[0] or trunc[0]}")
            obs, r, term, trunc, _ = env.step(np.array([a]))
            done = bool(term[0] or trunc[0])
            if r[0] != rewards.get(t, 0.0):
                out.append(f"step {t}: reward {r[0]}, procgen {rewards.get(t, 0.0)}")
            if done != (t in dones):
                out.append(f"step {t}: done {done}, procgen {t in dones}")
                break  # the episodes no longer line up
            if done:
                level(t, f"step {t} (done)")  # envpool still reports the ended episode's level
            else:
                frame(obs, t + 1, f"step {t}")
                level(t + 1, f"step {t}")
            restart = done
    finally:
        env.close()
    if frame_diffs:
        n = sum(f is not None for f in frames)
        out.append(f"{frame_diffs} of {n} recorded frames differ")
    return out


def _id(case: dict) -> str:
    if case["mode"] == "exploration":
        return f"{case['game']}-exploration"
    return f"{case['game']}-{case['mode']}-L{case['start_level']}x{case['num_levels']}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_envpool_replays_procgen_0_10_7_exactly(case):
    mismatches = replay(case)
    assert not mismatches, (
        f"{case['game']} {case['mode']} (start_level {case['start_level']}, num_levels "
        f"{case['num_levels']}, seed {case['rand_seed']}) differs from procgen 0.10.7:\n  "
        + "\n  ".join(mismatches[:6])
        + f"\nFrames that differ point at Qt's rendering: check the PyQt5-Qt5 version "
        f"({_qt()}); 5.15.2 renders as procgen 0.10.7 does. Rewards, dones or level seeds that "
        f"differ point at the env itself (time limits, level settings, autoreset)."
    )


def test_fixture_covers_the_games_qt_renders_differently():
    covered = {(c["game"], c["mode"]) for c in CASES}
    for game in ("bossfight", "caveflyer", "dodgeball", "fruitbot", "heist", "starpilot"):
        assert any(g == game for g, _ in covered), game
    assert {("leaper", "hard"), ("plunder", "easy"), ("jumper", "memory")} <= covered
    assert any(c["dones"] for c in CASES if c["mode"] == "exploration")
    assert any(len({s for _, s in c["level_seeds"]}) > 2 for c in CASES)  # several levels
