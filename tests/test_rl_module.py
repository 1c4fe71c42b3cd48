"""The RLlib module around the IMPALA-CNN (built directly: no Ray cluster needed)."""

import gymnasium as gym
import numpy as np
import torch

from rlsweep.rl_module import ImpalaPPOModule


def _module(augment=None):
    return ImpalaPPOModule(
        observation_space=gym.spaces.Box(0, 255, (6, 64, 64), np.uint8),
        action_space=gym.spaces.Discrete(15),
        model_config={"widths": [8, 16, 16], "augment": augment or {}, "augment_seed": 0},
    )


def _obs():
    return torch.randint(0, 256, (5, 6, 64, 64), dtype=torch.uint8, generator=torch.Generator())


def test_value_and_policy_share_one_trunk_pass():
    m = _module()
    obs = _obs()
    out = m.forward_train({"obs": obs})
    v_from_embeddings = m.compute_values({"obs": obs}, embeddings=out["embeddings"])
    torch.testing.assert_close(v_from_embeddings, m.compute_values({"obs": obs}))
    assert out["action_dist_inputs"].shape == (5, 15)


def test_augmentation_applies_to_training_minibatches_never_to_rollouts():
    m = _module({"name": "flip", "p": 1.0})
    obs = _obs()
    logits_train = m.forward_train({"obs": obs})["action_dist_inputs"]
    flipped = torch.flip(obs, dims=[-1])
    torch.testing.assert_close(logits_train, m.net.pi(m.net.features(flipped)))
    # Rollouts (exploration/inference) see the clean observation.
    clean = m.net.pi(m.net.features(obs))
    torch.testing.assert_close(m.forward_exploration({"obs": obs})["action_dist_inputs"], clean)
    torch.testing.assert_close(m.forward_inference({"obs": obs})["action_dist_inputs"], clean)
    # GAE's value estimates (compute_values without embeddings) use clean observations too.
    torch.testing.assert_close(
        m.compute_values({"obs": obs}), m.net.vf(m.net.features(obs)).squeeze(-1)
    )
