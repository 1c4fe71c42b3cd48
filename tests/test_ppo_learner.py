"""rlsweep.ppo_learner's pieces against their references, without Ray: PPO2's value clipping
(baselines' ppo2/model.py), CleanRL's advantage normalization and its minibatch loop
(ppo_procgen.py). tests/test_ppo_reference.py holds the whole update equal to CleanRL's."""

import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rlsweep.ppo_learner import ppo2_value_excess, shuffled_minibatches, standardize


def test_ppo2_value_clipping_by_hand():
    """PPO2's value loss max((v - R)^2, (v_old + clamp(v - v_old, -c, c) - R)^2), c = 1, all
    v_old = 0: within the clip, or moved away from the target, it is the plain squared error;
    moved past the clip towards (or beyond) the target, the clipped error counts, which has no
    gradient."""
    values = torch.tensor([1.0, 3.0, 4.0, 8.0, -4.0], requires_grad=True)
    targets = torch.tensor([2.0, 0.0, 5.0, 5.0, -5.0])
    excess = ppo2_value_excess(values, torch.zeros(5), targets, clip=1.0)
    # clipped values 1, 1, 1, 1, -1: squared errors 1, 1, 16, 16, 16; unclipped 1, 9, 1, 9, 1
    assert excess.tolist() == [0.0, 0.0, 15.0, 7.0, 15.0]
    ((values - targets) ** 2 + excess).sum().backward()
    assert values.grad.tolist() == [-2.0, 6.0, 0.0, 0.0, 0.0]


def test_standardize_is_cleanrls_advantage_normalization_over_the_real_rows():
    """CleanRL: (adv - adv.mean()) / (adv.std() + 1e-8), torch's unbiased std; with a mask the
    statistics come from the real rows (bootstrap rows excluded) and apply to every row."""
    adv = torch.tensor([1.0, -2.0, 0.5, 3.0, 100.0])
    torch.testing.assert_close(standardize(adv), (adv - adv.mean()) / (adv.std() + 1e-8))
    mask = torch.tensor([True, True, True, True, False])
    real = adv[:4]
    torch.testing.assert_close(standardize(adv, mask), (adv - real.mean()) / (real.std() + 1e-8))


def test_shuffled_minibatches_are_cleanrls_loop_over_the_real_rows():
    """Every epoch one torch.randperm of the real transitions (CleanRL's `b_inds`, with the
    generator given), cut into minibatches of exactly minibatch_size; bootstrap rows
    (LOSS_MASK False) are never drawn."""
    n = 10
    mask = torch.ones(n, dtype=torch.bool)
    mask[[4, 9]] = False  # two episode chunks' bootstrap rows
    rows = SampleBatch({Columns.OBS: torch.arange(n), Columns.LOSS_MASK: mask})
    batch = MultiAgentBatch({"default_policy": rows}, env_steps=n)
    got = list(
        shuffled_minibatches(
            batch,
            num_epochs=2,
            minibatch_size=3,
            minibatches_per_epoch=2,
            generator=torch.Generator().manual_seed(5),
        )
    )
    real = torch.arange(n)[mask]
    reference = torch.Generator().manual_seed(5)
    expected = []
    for _ in range(2):
        perm = torch.randperm(len(real), generator=reference)
        expected += [real[perm[j * 3 : (j + 1) * 3]].tolist() for j in range(2)]
    assert [b.policy_batches["default_policy"][Columns.OBS].tolist() for b in got] == expected
    assert all(b.env_steps() == 3 for b in got)
    # Real rows alone: no mask left for the losses to index by (a wait for the GPU per term).
    assert all(Columns.LOSS_MASK not in b.policy_batches["default_policy"] for b in got)
    with pytest.raises(ValueError, match="8 transitions cannot fill 3 minibatches of 3"):
        next(
            shuffled_minibatches(
                batch,
                num_epochs=1,
                minibatch_size=3,
                minibatches_per_epoch=3,
                generator=torch.Generator(),
            )
        )
