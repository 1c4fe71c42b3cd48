"""A trial's checkpoint: one directory, and this module owns its layout.

The Algorithm's own state is RLlib's (`Algorithm.save_to_path`: modules, optimizers, connectors,
counters); beside it lie what RLlib does not save: the state of every random number generator the
trial owns (`rng_state`), PPO's adaptive KL coefficients and the running statistics of the
rewards' normalization (`LEARNING_FILE`), the trainable's own state (its iteration, scores and
clocks) and, with `checkpoint_replay_buffer`, DQN's replay buffer.
`save` writes them all, `restore` puts them back, so that a restored trial draws what the
uninterrupted one would have drawn next. The last file `save` writes is the manifest
(`rlsweep.manifest`), by which a resume knows the checkpoint whole.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pickle
import random
from typing import Any

import numpy as np
import torch
from ray.rllib.algorithms.algorithm import Algorithm

from rlsweep._ray_compat import target_update_steps
from rlsweep.manifest import write_manifest
from rlsweep.spec.config import TrialConfig
from rlsweep.trial.ppo_learner import RlsweepPPOLearner

REPLAY_FILE = "replay_buffer.pkl"
"""The replay buffer's state (RLlib's new API stack saves none; `checkpoint_replay_buffer`)."""
RNG_FILE = "rng_state.pkl"
"""The state of every random number generator the trial owns (`rng_state`)."""
LEARNING_FILE = "learning_state.json"
"""What learning adapted that RLlib 2.60 does not save, or saves in no state a restore reads:
PPO's KL coefficient of each module (`kl_coeffs`: the Learner's state leaves it out, so a
restored trial would start again from `kl_coeff`), DQN's and APPO's env step of each module's
last target-network update (`target_updates`: restored at 0, the first update would sync the
target at once and shift every later sync), and each EnvRunner's reward normalization
statistics (`reward_norm`, by worker index: they live in its env, which no checkpoint holds)."""
TRIAL_FILE = "trial_state.json"
"""The trainable's own state at the checkpoint (its iteration, clocks), as given to `save`: a
JSON object."""


@dataclasses.dataclass(frozen=True)
class Restored:
    """What `restore` found beside the algorithm's state."""

    trial: dict[str, Any]
    """The `trial` dict given to `save` ({} for a checkpoint without one)."""
    replay_buffer: bool
    """False: the algorithm replays, but the checkpoint holds no replay buffer (it starts empty)."""


def save(
    algo: Algorithm,
    cfg: TrialConfig,
    path: str,
    trial: dict[str, Any] | None = None,
    generators: dict[str, torch.Generator] | None = None,
    *,
    iteration: int = 0,
    env_steps: float = 0.0,
    result: dict[str, Any] | None = None,
) -> None:
    """The algorithm's state (modules, optimizers, connectors, counters) to `path`, the state of
    every RNG of the trial (`rng_state`, with the trainable's own `generators`), the
    trainable's `trial` dict (JSON), with `cfg.checkpoint_replay_buffer` the replay buffer, and
    last the manifest, naming the trial's `iteration` and `env_steps` at the checkpoint and
    the `result` it reports with it."""
    algo.save_to_path(path)
    with open(os.path.join(path, RNG_FILE), "wb") as f:
        pickle.dump(rng_state(algo, generators or {}), f, protocol=pickle.HIGHEST_PROTOCOL)
    with open(os.path.join(path, TRIAL_FILE), "w") as f:
        json.dump(trial or {}, f)
    with open(os.path.join(path, LEARNING_FILE), "w") as f:
        json.dump(learning_state(algo), f)
    buffer = _replay_buffer(algo)
    if buffer is not None and cfg.checkpoint_replay_buffer:
        with open(os.path.join(path, REPLAY_FILE), "wb") as f:
            pickle.dump(buffer.get_state(), f, protocol=pickle.HIGHEST_PROTOCOL)
    write_manifest(path, iteration, env_steps, result)


def restore(
    algo: Algorithm, path: str, generators: dict[str, torch.Generator] | None = None
) -> Restored:
    """Restore what `save` wrote, RNGs last (the trainable's `generators` in place), so that
    the next draw of each is the one an uninterrupted run makes next."""
    algo.restore_from_path(path)
    buffer = _replay_buffer(algo)
    replay = os.path.join(path, REPLAY_FILE)
    if buffer is not None and os.path.exists(replay):
        with open(replay, "rb") as f:
            buffer.set_state(pickle.load(f))
    trial: dict[str, Any] = {}
    if os.path.exists(os.path.join(path, TRIAL_FILE)):
        with open(os.path.join(path, TRIAL_FILE)) as f:
            trial = json.load(f)
    if os.path.exists(os.path.join(path, LEARNING_FILE)):
        with open(os.path.join(path, LEARNING_FILE)) as f:
            set_learning_state(algo, json.load(f))
    if os.path.exists(os.path.join(path, RNG_FILE)):
        with open(os.path.join(path, RNG_FILE), "rb") as f:
            set_rng_state(algo, pickle.load(f), generators or {})
    return Restored(trial=trial, replay_buffer=buffer is None or os.path.exists(replay))


# --- what learning adapted that RLlib does not save ---------------------------------------
def learning_state(algo: Algorithm) -> dict[str, Any]:
    """PPO's KL coefficients, DQN's and APPO's target-network update steps and the EnvRunners'
    reward normalization statistics (LEARNING_FILE)."""
    (kl,) = [r.get() for r in algo.learner_group.foreach_learner(_kl_coeffs)]
    (targets,) = [r.get() for r in algo.learner_group.foreach_learner(_target_updates)]
    runners = algo.env_runner_group
    norms = [] if runners is None else runners.foreach_env_runner(_reward_norm)
    return {
        "kl_coeffs": kl,
        "target_updates": targets,
        "reward_norm": {str(i): s for i, s in norms if s is not None},
    }


def set_learning_state(algo: Algorithm, state: dict[str, Any]) -> None:
    """Put back what `learning_state` read; EnvRunners not saved keep fresh statistics."""
    for r in algo.learner_group.foreach_learner(_set_kl_coeffs, coeffs=state["kl_coeffs"]):
        r.get()
    targets = state.get("target_updates", {})  # none in checkpoints before 2026-11-30
    for r in algo.learner_group.foreach_learner(_set_target_updates, steps=targets):
        r.get()
    if algo.env_runner_group is not None and state["reward_norm"]:
        algo.env_runner_group.foreach_env_runner(
            functools.partial(_set_reward_norm, stats=state["reward_norm"])
        )


def _kl_coeffs(learner: Any) -> dict[str, float]:
    """A PPO learner's KL coefficient per module ({} without a KL penalty)."""
    coeffs = getattr(learner, "curr_kl_coeffs_per_module", None)
    return {str(m): float(c) for m, c in (coeffs or {}).items()}


def _set_kl_coeffs(learner: Any, coeffs: dict[str, float]) -> None:
    for module_id, value in coeffs.items():
        learner.curr_kl_coeffs_per_module[module_id].data.fill_(value)


def _target_updates(learner: Any) -> dict[str, int]:
    """A DQN or APPO learner's env step of each module's last target update ({} for others)."""
    steps = target_update_steps(learner)
    return {} if steps is None else {str(m): int(t) for m, t in steps.items()}


def _set_target_updates(learner: Any, steps: dict[str, int]) -> None:
    held = target_update_steps(learner)
    if held is not None:
        held.update(steps)


def _normalizer(runner: Any) -> Any:
    env = getattr(runner, "env", None)
    return getattr(getattr(env, "unwrapped", None), "reward_normalizer", None)


def _reward_norm(runner: Any) -> tuple[int, dict[str, float] | None]:
    """An EnvRunner's index and its env's reward normalization statistics (None: none)."""
    norm = _normalizer(runner)
    return runner.worker_index, None if norm is None else norm.statistics()


def _set_reward_norm(runner: Any, stats: dict[str, dict[str, float]]) -> None:
    norm = _normalizer(runner)
    if norm is not None and str(runner.worker_index) in stats:
        norm.set_statistics(stats[str(runner.worker_index)])


# --- the trial's random number generators --------------------------------------------------
# A trial draws from: its process's global RNGs (torch: action sampling in a local EnvRunner,
# DQN's exploration; numpy and random: RLlib seeds them), those of its remote EnvRunners
# (their action sampling), the learner's generators (PPO's minibatch permutations, the
# augmentations' draws in each module), DQN's replay sampling, and the trainable's own (the
# evaluation's actions).
# The envs' level samplers live inside envpool, whose state cannot be read: see the README.


def _process_rngs(*_: Any) -> dict[str, Any]:
    """The global RNGs of this process (the argument: an EnvRunner, when run on one)."""
    return {
        "random": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
    }


def _set_process_rngs(state: dict[str, Any], *_: Any) -> None:
    random.setstate(state["random"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _learner_generators(learner: Any) -> dict[str, torch.Generator]:
    """A Learner's own generators: RlsweepPPOLearner's minibatch permutations and each
    module's augmentation draws (`rlsweep.trial.rl_module.ImpalaPPOModule`)."""
    out = {}
    if isinstance(learner, RlsweepPPOLearner):
        out["shuffle"] = learner._shuffle_rng
    for module_id in learner.module.keys():  # noqa: SIM118 (a MultiRLModule has no __iter__)
        augment_rng = getattr(learner.module[module_id].unwrapped(), "_augment_rng", None)
        if augment_rng is not None:
            out[f"augment/{module_id}"] = augment_rng
    return out


def _learner_rngs(learner: Any) -> dict[str, torch.Tensor]:
    return {name: g.get_state() for name, g in _learner_generators(learner).items()}


def _set_learner_rngs(learner: Any, states: dict[str, torch.Tensor]) -> None:
    for name, g in _learner_generators(learner).items():
        g.set_state(states[name])


def rng_state(algo: Algorithm, generators: dict[str, torch.Generator]) -> dict[str, Any]:
    """The state of every RNG a trial owns: this process's globals, each remote EnvRunner's
    globals (by worker id), the learners' generators, and the trainable's `generators`."""
    runners = algo.env_runner_group
    remote = runners.healthy_worker_ids() if runners is not None else []
    replay = _replay_buffer(algo)
    return {
        "process": _process_rngs(),
        "env_runners": {
            worker_id: runners.foreach_env_runner(
                _process_rngs, local_env_runner=False, remote_worker_ids=[worker_id]
            )[0]
            for worker_id in remote
        },
        "learners": [r.get() for r in algo.learner_group.foreach_learner(_learner_rngs)],
        "generators": {name: g.get_state() for name, g in generators.items()},
        "replay": None if replay is None else replay.rng.bit_generator.state,
    }


def set_rng_state(
    algo: Algorithm, state: dict[str, Any], generators: dict[str, torch.Generator]
) -> None:
    """Put back what `rng_state` read. EnvRunners that are not the ones saved (fewer, or
    restarted) keep their seeds' streams."""
    _set_process_rngs(state["process"])
    runners = algo.env_runner_group
    for worker_id in runners.healthy_worker_ids() if runners is not None else []:
        if worker_id in state["env_runners"]:
            runners.foreach_env_runner(
                functools.partial(_set_process_rngs, state["env_runners"][worker_id]),
                local_env_runner=False,
                remote_worker_ids=[worker_id],
            )
    (learner_states,) = state["learners"]  # rlsweep's learner is local (num_learners=0)
    for r in algo.learner_group.foreach_learner(_set_learner_rngs, states=learner_states):
        r.get()
    for name, g in generators.items():
        g.set_state(state["generators"][name])
    if state["replay"] is not None and (replay := _replay_buffer(algo)) is not None:
        replay.rng.bit_generator.state = state["replay"]


def _replay_buffer(algo: Algorithm) -> Any:
    """DQN's replay buffer (its `rng` samples replayed episodes; RLlib seeds it from the OS,
    not from the trial seed), or None."""
    return getattr(algo, "local_replay_buffer", None)
