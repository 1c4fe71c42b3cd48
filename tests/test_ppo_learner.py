"""rlsweep.trial.ppo_learner's pieces against their references: PPO2's value clipping (baselines'
ppo2/model.py), CleanRL's advantage normalization and its minibatch loop (ppo_procgen.py), GAE's
values, all without Ray; and (`rllib`) the learner's batch against the one RLlib's default
learner connectors build from the same episodes. tests/test_ppo_reference.py holds the whole
update equal to CleanRL's."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.connectors.learner import AddOneTsToEpisodesAndTruncate, LearnerConnectorPipeline
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rlsweep.spec.config import TrialConfig
from rlsweep.trial.ppo_learner import (
    EpisodesToTrainBatch,
    ReferenceGAE,
    ppo2_value_excess,
    shuffled_minibatches,
    standardize,
)
from rlsweep.trial.rl_module import ImpalaPPOModule, row_chunks


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


def _module() -> ImpalaPPOModule:
    return ImpalaPPOModule(
        observation_space=gym.spaces.Box(0, 255, (6, 64, 64), np.uint8),
        action_space=gym.spaces.Discrete(15),
        model_config={"widths": [8, 16, 16]},
    )


def test_gae_reuses_rollout_values_and_recomputes_only_bootstrap_rows():
    """With `rollout_values` the real rows take the rollout's values as they are; the bootstrap
    rows (LOSS_MASK False: a copied, stale value) get the network's, in forwards of at most
    `chunk_rows` rows. Without it, every row's value is the network's."""
    m = _module()
    obs = torch.randint(0, 256, (5, 6, 64, 64), dtype=torch.uint8, generator=torch.Generator())
    with torch.no_grad():
        true_values = m.compute_values({Columns.OBS: obs})
    torch.testing.assert_close(m.forward_exploration({Columns.OBS: obs})["vf_preds"], true_values)
    stale = true_values.clone()
    stale[[1, 2, 4]] = 123.0
    mask = torch.tensor([1, 0, 0, 1, 0]).bool()
    batch = {Columns.OBS: obs, Columns.VF_PREDS: stale, Columns.LOSS_MASK: mask}
    gae = ReferenceGAE(gamma=0.99, lambda_=0.95, chunk_rows=2, rollout_values=True)
    rows_seen: list[int] = []
    hook = m.net.trunk.register_forward_pre_hook(lambda _, args: rows_seen.append(len(args[0])))
    with torch.no_grad():
        torch.testing.assert_close(gae.values(m, batch), true_values)
        # One forward per chunk of 2 rows that has bootstrap rows: rows 1; 2; 4.
        assert rows_seen == [1, 1, 1]
        batch[Columns.VF_PREDS] = torch.zeros(5)
        reused = gae.values(m, batch)
        assert reused[mask].eq(0).all()  # rollout values taken as they are
        recomputed = ReferenceGAE(gamma=0.99, lambda_=0.95, chunk_rows=2).values(m, batch)
    hook.remove()
    torch.testing.assert_close(recomputed, true_values)


@pytest.mark.rllib
def test_the_batch_is_the_one_rllibs_default_connectors_build(ray_local):
    """A real trial's episodes: RlsweepPPOLearner's batch (EpisodesToTrainBatch, ReferenceGAE
    with the rollout's values) holds every column of the batch RLlib's default learner
    connectors and the GAE before it built, value for value, dtype and row order alike, and
    counts the same env steps."""
    from rlsweep.trial import algos

    # 8 envs x 32 steps: a 64-row chunk holds two bootstrap rows or more, one forward.
    cfg = TrialConfig(
        game="leaper",
        num_envs_per_env_runner=8,
        rollout_length=32,
        minibatch_size=64,
        num_epochs=1,
        widths=[8, 16, 16],
        dense=64,
        advantage_norm="batch",
    )
    algo = algos.build_algorithm(cfg)
    try:
        episodes = algo.env_runner_group.local_env_runner.sample()
        learners = []
        algo.learner_group.foreach_learner(learners.append)
        (learner,) = learners
        assert isinstance(learner.learner_connector.connectors[0], EpisodesToTrainBatch)
        got = learner.make_batch(TrainingData(episodes=copy.deepcopy(episodes)))
        expected = rllib_batch(learner, copy.deepcopy(episodes), cfg.minibatch_size)
    finally:
        algo.stop()
    assert got.env_steps() == expected.env_steps()
    (module_id,) = expected.policy_batches
    want, have = expected.policy_batches[module_id], got.policy_batches[module_id]
    assert list(have.keys()) == list(want.keys())
    per_chunk = [int((~m).sum()) for m in want[Columns.LOSS_MASK].split(cfg.minibatch_size)]
    assert max(per_chunk) > 1, per_chunk
    for column, values in want.items():
        assert have[column].dtype == values.dtype, column
        assert torch.equal(have[column], values), column


def rllib_batch(learner, episodes, chunk_rows: int) -> MultiAgentBatch:
    """The batch as RLlib's pipeline built it before EpisodesToTrainBatch: RLlib's default
    learner connectors (PPOLearner prepends AddOneTsToEpisodesAndTruncate) and the GAE whose
    values replaced each `chunk_rows`-row chunk's bootstrap rows by a boolean mask."""

    class ChunkMaskGAE(ReferenceGAE):
        def values(self, module, batch):
            out = []
            for rows in row_chunks(batch, self.chunk_rows):
                values, fresh = rows[Columns.VF_PREDS].clone(), ~rows[Columns.LOSS_MASK]
                if fresh.any():
                    values[fresh] = module.compute_values({Columns.OBS: rows[Columns.OBS][fresh]})
                out.append(values)
            return torch.cat(out)

    defaults = learner.config.build_learner_connector(None, None, device=learner.device)
    gae = ChunkMaskGAE(
        gamma=learner.config.gamma, lambda_=learner.config.lambda_, chunk_rows=chunk_rows
    )
    pipeline = LearnerConnectorPipeline(
        connectors=[AddOneTsToEpisodesAndTruncate(), *defaults.connectors, gae]
    )
    with torch.no_grad():
        columns = pipeline(rl_module=learner.module, batch={}, episodes=episodes)
    batch = MultiAgentBatch(
        {k: SampleBatch(v) for k, v in columns.items()},
        env_steps=sum(len(e) for e in episodes),  # as Learner counts: after the pipeline
    )
    learner.standardize_advantages(batch)
    return batch
