"""The RLlib module around the IMPALA-CNN (built directly: no Ray cluster needed)."""

import gymnasium as gym
import numpy as np
import torch

from rlsweep.trial.rl_module import ImpalaDQNModule, ImpalaPPOModule, row_chunks


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
    passes = []
    m.net.trunk.register_forward_hook(lambda *_: passes.append(1))
    out = m.forward_train({"obs": obs})
    v_from_embeddings = m.compute_values({"obs": obs}, embeddings=out["embeddings"])
    assert len(passes) == 1  # the loss's values come from forward_train's trunk pass
    torch.testing.assert_close(v_from_embeddings, m.compute_values({"obs": obs}))
    assert len(passes) == 2  # without embeddings (GAE's rows), a pass of their own
    assert out["action_dist_inputs"].shape == (5, 15)


def test_augmentation_applies_to_training_minibatches_never_to_rollouts():
    m = _module({"augment": "flip", "augment_p": 1.0})
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


def test_rollout_passes_build_no_autograd_graph():
    # RLlib's own _forward_exploration/_forward_inference run under no_grad; overriding them
    # must keep that, or every rollout step records a graph it never uses (slower sampling).
    obs = {"obs": _obs()}
    space = gym.spaces.Box(0, 255, (6, 64, 64), np.uint8)
    dqn = ImpalaDQNModule(
        observation_space=space,
        action_space=gym.spaces.Discrete(15),
        model_config={"widths": [8, 16, 16]},
    )
    for m in (_module(), dqn):
        for name, out in (
            ("exploration", m.forward_exploration(obs, t=0)),
            ("inference", m.forward_inference(obs)),
        ):
            grads = [k for k, v in out.items() if torch.is_tensor(v) and v.requires_grad]
            assert not grads, f"{type(m).__name__}.forward_{name}: {grads} carry a graph"


def test_rollouts_switch_to_eval_mode_once_and_training_switches_back():
    # TorchRLModule toggles eval()/train() over every submodule on each rollout step; ours
    # switch to eval mode once and stay there until the learner's forward_train.
    m = _module()
    obs = {"obs": _obs()}
    assert m.training
    torch.manual_seed(0)
    first = m.forward_exploration(obs, t=0)
    assert not any(sub.training for sub in m.modules())
    flips = []
    conv = next(x for x in m.modules() if isinstance(x, torch.nn.Conv2d))
    conv.register_forward_pre_hook(lambda mod, _: flips.append(mod.training))
    m.forward_exploration(obs, t=0)
    m.forward_inference(obs)
    assert flips == [False, False] and not m.training
    m.forward_train(obs)
    assert all(sub.training for sub in m.modules())
    torch.manual_seed(0)
    torch.testing.assert_close(m.forward_exploration(obs, t=0), first)


def test_row_chunks_slice_every_row_column_and_pass_the_rest_whole():
    """At most `rows` rows per chunk, in order, as views of the batch; a column that is not one
    row per observation (a scalar, a per-batch tensor) passes whole; None: the whole batch."""
    obs = _obs()
    batch = {"obs": obs, "vf_preds": torch.arange(5.0), "scale": torch.tensor(2.0), "n": 5}
    chunks = list(row_chunks(batch, 2))
    assert [len(c["obs"]) for c in chunks] == [2, 2, 1]
    torch.testing.assert_close(torch.cat([c["vf_preds"] for c in chunks]), batch["vf_preds"])
    assert chunks[1]["obs"].data_ptr() == obs[2:].data_ptr()  # a view, not a copy
    assert all(c["scale"] is batch["scale"] and c["n"] == 5 for c in chunks)
    (whole,) = row_chunks(batch, None)
    assert whole["obs"].shape == obs.shape
