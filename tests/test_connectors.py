"""rlsweep's batched EnvRunner connectors sample exactly what RLlib's default pipelines sample:
same module weights and torch seed -> the same episodes, value for value (real RLlib EnvRunner on
real Procgen, no Ray cluster)."""

import numpy as np
import pytest
import torch
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rlsweep.spec.config import TrialConfig
from rlsweep.testing import EPSILON_GREEDY_DQN, NARROW_PPO
from rlsweep.trial.algos import algorithm_config
from rlsweep.trial.connectors import BatchObservations, SampleActions, to_host_together

# Leaper and 4 envs: random-policy episodes end within the 8 x 16 x 4 sampled steps.
SMALL = dict(NARROW_PPO, num_envs_per_env_runner=4)
DQN_SMALL = dict(SMALL, **EPSILON_GREEDY_DQN)


def _runner(cfg: TrialConfig, rllib_defaults: bool) -> SingleAgentEnvRunner:
    config = algorithm_config(cfg)
    if rllib_defaults:
        config = config.copy(copy_frozen=False).env_runners(
            env_to_module_connector=None,
            add_default_connectors_to_env_to_module_pipeline=True,
            module_to_env_connector=None,
            add_default_connectors_to_module_to_env_pipeline=True,
        )
    torch.manual_seed(0)  # module initialization
    return SingleAgentEnvRunner(config=config)


def _sampled(runner: SingleAgentEnvRunner, explore: bool) -> list[dict[str, np.ndarray]]:
    torch.manual_seed(1)  # action sampling
    episodes = []
    for _ in range(8):
        for e in runner.sample(explore=explore):
            extra = {k: e.get_extra_model_outputs(k) for k in e.extra_model_outputs}
            episodes.append(
                dict(
                    obs=e.get_observations(),
                    actions=e.get_actions(),
                    rewards=e.get_rewards(),
                    ends=np.array([e.t_started, e.t, e.is_terminated, e.is_truncated]),
                    **{f"extra/{k}": np.asarray(v) for k, v in extra.items()},
                )
            )
    return episodes


@pytest.mark.rllib
@pytest.mark.parametrize(
    ("overrides", "explore"),
    [(SMALL, True), (SMALL, False), (DQN_SMALL, True)],
    ids=["ppo-explore", "ppo-greedy", "dqn-epsilon-greedy"],
)
def test_batched_connectors_sample_what_rllibs_defaults_sample(overrides, explore):
    cfg = TrialConfig(**overrides)
    ours, rllibs = _runner(cfg, rllib_defaults=False), _runner(cfg, rllib_defaults=True)
    try:
        pipelines = (ours._env_to_module.connectors, ours._module_to_env.connectors)
        assert [type(c) for c in pipelines[0]] == [BatchObservations]
        assert [type(c) for c in pipelines[1]] == [SampleActions]
        assert len(rllibs._module_to_env.connectors) > 1

        a, b = _sampled(ours, explore), _sampled(rllibs, explore)
        assert len(a) == len(b)
        if explore:  # (the greedy policy may stand still for all 128 steps)
            assert any(e["ends"][2] for e in a)  # chunks that end and restart compared too
        for x, y in zip(a, b, strict=True):
            assert x.keys() == y.keys()
            for k in x:
                np.testing.assert_array_equal(x[k], y[k], err_msg=k)
        if cfg.algorithm == "ppo" and explore:
            assert {"extra/action_logp", "extra/vf_preds"} <= a[0].keys()
    finally:
        ours.stop()
        rllibs.stop()


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
        ),
    ],
)
def test_to_host_together_gives_each_tensor_its_values_dtype_and_shape(device):
    g = torch.Generator().manual_seed(0)
    tensors = {
        "logits": torch.randn(5, 15, generator=g),
        "actions": torch.randint(0, 15, (5,), generator=g),
        "flags": torch.rand(5, generator=g) < 0.5,
        "vf": torch.randn(5, generator=g, dtype=torch.float64)[::2],  # not contiguous
        "scalar": torch.tensor(3, dtype=torch.int32),
        "empty": torch.zeros(0, 2),
    }
    host = to_host_together({k: t.to(device) for k, t in tensors.items()})
    assert list(host) == ["actions", "vf", "logits", "scalar", "empty", "flags"]  # widest first
    for k, t in tensors.items():
        assert host[k].dtype == t.numpy().dtype and host[k].shape == tuple(t.shape), k
        assert host[k].flags.aligned, k
        np.testing.assert_array_equal(host[k], t.numpy(), err_msg=k)
    assert to_host_together({}) == {}
