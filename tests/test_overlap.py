"""rlsweep.trial.overlap: with `overlap: true` a PPO trial samples its next batch while it learns,
so each update learns from a batch sampled before the previous update (one update of lag), GAE
recomputes the values, and nothing is in flight between iterations; without it, PPO stays the
reference's synchronous loop (`rllib`: real RLlib on real Procgen, no Tune)."""

from typing import Any

import numpy as np
import pytest
from ray.rllib.algorithms.ppo import PPO
from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

from rlsweep.spec.config import TrialConfig
from rlsweep.testing import NARROW_PPO
from rlsweep.trial import algos
from rlsweep.trial.overlap import OverlappedPPO
from rlsweep.trial.ppo_learner import ROLLOUT_VALUES, learner_options

SMALL = dict(NARROW_PPO, num_envs_per_env_runner=4)


def test_overlap_is_a_ppo_option_that_recomputes_gaes_values():
    assert learner_options(TrialConfig(overlap=True))[ROLLOUT_VALUES] is False
    assert learner_options(TrialConfig())[ROLLOUT_VALUES] is True
    assert algos.ppo_config(TrialConfig(overlap=True)).algo_class is OverlappedPPO
    assert algos.ppo_config(TrialConfig()).algo_class is PPO


def _trained(cfg: TrialConfig, iterations: int) -> tuple[list[set[int]], list[int], Any]:
    """The weights' versions in each update's batch, and the env steps after each iteration."""
    algo = algos.build_algorithm(cfg)
    seen: list[set[int]] = []
    update = algo.learner_group.update

    def recording(*args: Any, episodes: list, **kwargs: Any) -> Any:
        seen.append({int(v) for e in episodes for v in e.get_extra_model_outputs(WEIGHTS_SEQ_NO)})
        return update(*args, episodes=episodes, **kwargs)

    algo.learner_group.update = recording
    steps = []
    try:
        for _ in range(iterations):
            result = algo.train()
            steps.append(algos.read_result(result)["env_steps"])
            if cfg.overlap:  # at rest between iterations: the next batch is sampled, not pending
                episodes, _ = algo._next_batch
                assert episodes and all(e.is_numpy for e in episodes)
    finally:
        algo.stop()
    return seen, steps, algo


@pytest.mark.rllib
def test_each_update_learns_from_the_batch_sampled_before_the_previous_update(ray_local):
    sync, sync_steps, _ = _trained(TrialConfig(**SMALL), 3)
    lagged, lagged_steps, algo = _trained(TrialConfig(**SMALL, overlap=True), 3)
    batch = TrialConfig(**SMALL).effective_train_batch_size
    # Synchronous: every batch sampled with the weights it updates (a new version each time).
    assert [len(s) for s in sync] == [1, 1, 1]
    versions = [min(s) for s in sync]
    assert versions == sorted(set(versions))
    # Overlapped: the first two updates learn from batches sampled with the first weights, the
    # third from the weights of the first update: one update of lag.
    assert [len(s) for s in lagged] == [1, 1, 1]
    first, second, third = (min(s) for s in lagged)
    assert first == second < third
    # The steps reported are the steps trained on, one train batch per iteration.
    assert np.diff([0, *sync_steps]).tolist() == np.diff([0, *lagged_steps]).tolist()
    assert all(b >= batch for b in np.diff([0, *lagged_steps]))
    assert algo._sampling_thread._shutdown  # stop() ends the sampling thread
