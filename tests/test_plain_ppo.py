"""benchmarks/plain_ppo.py's options beyond CleanRL's loop (2020's RLlib PPO, as the lars12llt
baseline runs it): its framestack against rlsweep's, the learning-rate schedule, the adaptive KL
coefficient, and one iteration in lars12llt's setting on real Procgen. (Its update against
rlsweep's: tests/test_ppo_reference.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from plain_ppo import FrameStack, PlainPPO, PPOArgs, adapted_kl_coeff  # noqa: E402

from rlsweep.envs.vector_env import FrameStacker
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import load_baseline


@pytest.mark.parametrize("mode", ["gap", "stack", "none"])
def test_the_framestack_shows_what_rlsweeps_shows(mode):
    """Two implementations of one definition, on random frames with episodes starting at
    random steps: the same observations, step by step."""
    rng = np.random.default_rng(0)
    ours, theirs = FrameStack(mode, 4), FrameStacker(mode, 4)
    frames = rng.integers(0, 256, (5, 3, 8, 8), dtype=np.uint8)
    assert np.array_equal(ours(frames, None), theirs.push(frames))
    for _ in range(20):
        frames = rng.integers(0, 256, (5, 3, 8, 8), dtype=np.uint8)
        new = rng.random(5) < 0.2
        assert np.array_equal(ours(frames, new), theirs.push(frames, new))
    shown = {"gap": 6, "stack": 12, "none": 3}[mode]
    assert ours(frames, None).shape == (5, shown, 8, 8)


def test_the_learning_rate_follows_its_schedule_between_points_and_stays_after():
    args = PPOArgs(lr_schedule=((0, 1e-4), (500_000, 8e-4), (1_000_000, 1e-4)))
    assert args.lr_at(0) == pytest.approx(1e-4)
    assert args.lr_at(250_000) == pytest.approx(4.5e-4)
    assert args.lr_at(2_000_000) == pytest.approx(1e-4)
    assert PPOArgs(lr=3e-4).lr_at(10**9) == 3e-4


def test_the_kl_coefficient_adapts_as_rllibs():
    assert adapted_kl_coeff(0.2, kl=0.03, target=0.01) == pytest.approx(0.3)
    assert adapted_kl_coeff(0.2, kl=0.004, target=0.01) == pytest.approx(0.1)
    assert adapted_kl_coeff(0.2, kl=0.01, target=0.01) == 0.2


def test_an_iteration_in_lars12llts_setting():
    """The loop takes lars12llt's setting from its TrialConfig (`of_trial`): a gap framestack
    (6 channels), the wide pooled network (pool, then ReLU), raw rewards, no gradient clipping;
    its learning rate follows the schedule
    and its KL coefficient moves after the update."""
    params = load_baseline("lars12llt") | {
        "num_envs_per_env_runner": 4,
        "rollout_length": 16,
        "train_batch_size": None,
        "minibatch_size": 32,
        "num_epochs": 1,
    }
    cfg = TrialConfig(**params, game="bigfish")
    args = PPOArgs.of_trial(cfg, num_threads=1)
    # RLlib's vf_loss_coeff 0.5 on the squared error: PPO2's vf_coef 1.0 on half of it.
    assert (args.vf_coef, args.vf_clip, args.kl_coeff, args.max_grad_norm) == (1.0, 30.0, 0.2, None)
    assert (args.framestack, args.net.widths, args.net.global_pool) == ("gap", (32, 64, 64), True)
    assert args.model().relu_after_pool  # pool, then ReLU, as the entry's Keras head
    assert (args.model().init, args.model().center_inputs) == ("keras", True)  # its Keras model's
    ppo = PlainPPO(args)
    try:
        assert ppo.next_obs.shape == (4, 6, 64, 64)
        ppo.train_iteration()
        before = ppo.env_steps  # a batch's real transitions, or a step's envs more
        assert 64 <= before < 68
        ppo.train_iteration()
        assert ppo.optimizer.param_groups[0]["lr"] == pytest.approx(args.lr_at(before))
        assert ppo.optimizer.param_groups[0]["lr"] > args.lr_at(0)
        assert ppo.kl_coeff != 0.2  # a tiny first update's KL is far below the target
    finally:
        ppo.close()
