"""rlsweep.trial.checkpoint: what a trial's checkpoint keeps beside RLlib's own state (the replay
buffer, every RNG, the trainable's state), on real RLlib algorithms training on real Procgen with
tiny batches (marked `rllib`)."""

import dataclasses

import numpy as np
import pytest
import torch

from rlsweep.spec.config import TrialConfig
from rlsweep.testing import TINY_DQN, TINY_PPO
from rlsweep.trial import checkpoint
from rlsweep.trial.algos import build_algorithm, read_result

pytestmark = pytest.mark.rllib

TINY = dict(TINY_PPO, num_epochs=1, widths=[8, 16, 16], dense=64)


def test_dqn_checkpoint_keeps_its_replay_buffer_and_target_cadence(ray_local, tmp_path):
    """RLlib's new API stack checkpoints no replay buffer; with checkpoint_replay_buffer a
    restored DQN trial replays exactly what it had, and trains on it at once. The env step of
    its last target sync (in no Learner state) is restored too."""
    cfg = TrialConfig(**TINY_DQN, checkpoint_replay_buffer=True)
    algo = build_algorithm(cfg)
    try:
        for _ in range(2):
            algo.train()
        buffer = algo.local_replay_buffer
        saved_steps = buffer.get_num_timesteps()
        saved_obs = np.asarray(buffer.episodes[0].get_observations())
        saved_targets = checkpoint.learning_state(algo)["target_updates"]
        checkpoint.save(algo, cfg, str(tmp_path / "with"))
        checkpoint.save(algo, TrialConfig(**TINY_DQN), str(tmp_path / "without"))
    finally:
        algo.stop()
    assert saved_steps >= 2 * 256
    assert saved_targets["default_policy"] >= 256  # its target synced (target_update_freq 256)
    assert (tmp_path / "with" / checkpoint.REPLAY_FILE).exists()
    assert not (tmp_path / "without" / checkpoint.REPLAY_FILE).exists()

    restored = build_algorithm(cfg)
    try:
        assert restored.local_replay_buffer.get_num_timesteps() == 0
        assert checkpoint.restore(restored, str(tmp_path / "with")).replay_buffer
        # Its target syncs keep their cadence: restored at 0, the next update would sync at once.
        assert checkpoint.learning_state(restored)["target_updates"] == saved_targets
        buffer = restored.local_replay_buffer
        assert buffer.get_num_timesteps() == saved_steps
        np.testing.assert_array_equal(np.asarray(buffer.episodes[0].get_observations()), saved_obs)
        assert read_result(restored.train())["train/module_steps_trained"] > 0
        assert not checkpoint.restore(restored, str(tmp_path / "without")).replay_buffer
    finally:
        restored.stop()


def _same_state(a, b) -> bool:
    """RNG states (nested dicts/tuples/lists of tensors, arrays, numbers) equal, value for value."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(map(_same_state, a, b))
    if isinstance(a, torch.Tensor | np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


@dataclasses.dataclass
class SavedAndRestored:
    """A trial trained two iterations and checkpointed, and a fresh one of its config that
    restored the checkpoint: what each held of its RNGs and of what learning adapted."""

    saved_rng: dict
    saved_learning: dict
    fresh_rng: dict
    """The restored trial's RNGs before it restored: where a fresh trial's are."""
    fresh_learning: dict
    found: checkpoint.Restored
    restored_rng: dict
    restored_learning: dict


@pytest.fixture(scope="module")
def saved_and_restored(ray_local, tmp_path_factory):
    """`get(runners)`: a PPO trial that samples in its own process (0) or in a remote
    EnvRunner (1), with augmentations and a KL coefficient that adapts (kl_target: every KL
    below half of it, x0.5 each update), saved and restored once per module for the tests
    that read it: each is two algorithms built, trained and stopped."""
    cache: dict[int, SavedAndRestored] = {}

    def get(runners: int) -> SavedAndRestored:
        if runners not in cache:
            cache[runners] = _save_and_restore(runners, tmp_path_factory.mktemp("ckpt"))
        return cache[runners]

    return get


def _save_and_restore(runners: int, path) -> SavedAndRestored:
    cfg = TrialConfig(**TINY, augment="flip", kl_coeff=0.2, kl_target=1e3, num_env_runners=runners)
    algo = build_algorithm(cfg)
    try:
        for _ in range(2):
            algo.train()
        own = {"evaluation": torch.Generator().manual_seed(cfg.seed)}
        torch.rand(3, generator=own["evaluation"])
        torch.rand(3)  # as a local EnvRunner's action sampling draws (a remote one samples)
        checkpoint.save(algo, cfg, str(path), {"iteration": 2}, own)
        saved_rng, saved_learning = checkpoint.rng_state(algo, own), checkpoint.learning_state(algo)
    finally:
        algo.stop()
    restored = build_algorithm(cfg)
    try:
        fresh = {"evaluation": torch.Generator().manual_seed(cfg.seed)}
        fresh_rng = checkpoint.rng_state(restored, fresh)
        fresh_learning = checkpoint.learning_state(restored)
        found = checkpoint.restore(restored, str(path), fresh)
        return SavedAndRestored(
            saved_rng,
            saved_learning,
            fresh_rng,
            fresh_learning,
            found,
            checkpoint.rng_state(restored, fresh),
            checkpoint.learning_state(restored),
        )
    finally:
        restored.stop()


def test_checkpoint_restores_every_rng_of_the_trial(saved_and_restored):
    """A restored trial draws what the uninterrupted one draws next, from every RNG it owns:
    the process's and each remote EnvRunner's torch/numpy/random (action sampling), PPO's
    minibatch permutations, the augmentations' draws and the trainable's own generators (the
    evaluation's actions)."""
    trial = saved_and_restored(1)
    saved = trial.saved_rng
    assert set(saved["learners"][0]) == {"shuffle", "augment/default_policy"}
    assert set(saved["env_runners"]) == {1}

    def drawn(state) -> dict:  # the RNGs training and evaluating draw from
        return {
            "torch": state["process"]["torch"],
            **{f"runner/{i}": r["torch"] for i, r in state["env_runners"].items()},
            **{f"learner/{k}": v for k, v in state["learners"][0].items()},
            **{f"own/{k}": v for k, v in state["generators"].items()},
        }

    before = drawn(trial.fresh_rng)
    assert not any(_same_state(v, drawn(saved)[k]) for k, v in before.items())
    assert trial.found.trial == {"iteration": 2}
    assert _same_state(trial.restored_rng, saved)


@pytest.mark.parametrize("runners", [0, 1])
def test_checkpoint_keeps_what_learning_adapted(saved_and_restored, runners):
    """What RLlib 2.60 restores no trial with: PPO's KL coefficient (its Learner state leaves it
    out: restored, a trial would start again from `kl_coeff`, and each sitting of a study
    resumes every trial) and the reward normalization's running statistics (in the sampling
    envs, which no checkpoint holds). A restored trial goes on with what its updates reached,
    whether it samples in its own process or in a remote EnvRunner."""
    trial = saved_and_restored(runners)
    saved = trial.saved_learning
    assert saved["kl_coeffs"] == {"default_policy": pytest.approx(0.05)}
    sampler = str(runners)  # the EnvRunner that samples: the trial's own (0) or the remote one
    assert saved["reward_norm"][sampler]["count"] > 2 * TINY["rollout_length"]
    fresh = trial.fresh_learning
    assert fresh["reward_norm"][sampler]["count"] == 1e-4 and not fresh["kl_coeffs"]
    assert trial.restored_learning == saved


def _optimizer_values(learner) -> list[tuple[float, float]]:
    return [
        (group["lr"], group["eps"])
        for _, optimizer in learner.get_optimizers_for_module("default_policy")
        for group in optimizer.param_groups
    ]


@pytest.mark.parametrize("algorithm", ["ppo", "dqn"])
def test_a_trial_restored_under_a_perturbed_config_trains_at_its_values(
    ray_local, tmp_path, algorithm
):
    """A PBT exploit restores another trial's checkpoint under a perturbed config: RLlib's
    restore puts back the optimizer's lr and Adam epsilon with its moments (ray#62173), so the
    first update ran at the checkpoint's values while `hp/lr` said the config's. Every
    algorithm's learner now trains at the config's; before, PPO's alone took the lr (and no
    learner the epsilon)."""
    base = TINY if algorithm == "ppo" else TINY_DQN
    cfg = TrialConfig(**dict(base, lr=1e-3, adam_eps=1e-5))
    algo = build_algorithm(cfg)
    try:
        algo.train()
        checkpoint.save(algo, cfg, str(tmp_path))
    finally:
        algo.stop()
    perturbed = dataclasses.replace(cfg, lr=3e-4, adam_eps=1e-3)
    restored = build_algorithm(perturbed)
    try:
        checkpoint.restore(restored, str(tmp_path))
        (values,) = [r.get() for r in restored.learner_group.foreach_learner(_optimizer_values)]
    finally:
        restored.stop()
    assert values and {lr for lr, _ in values} == {3e-4}, values
    if algorithm == "ppo":  # its optimizer is built with adam_eps (RLlib's others: torch's)
        assert {eps for _, eps in values} == {1e-3}, values
