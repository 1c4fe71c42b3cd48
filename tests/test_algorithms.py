"""IMPALA, APPO and DQN (RLlib new API stack) on the IMPALA-CNN: config mapping without Ray, and
real training on real Procgen with tiny batches (marked `rllib`).

Leaper: a random policy ends its episodes in ~70 steps, so train returns exist within an iteration.
"""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlsweep.errors import ConfigError
from rlsweep.spec.config import TrialConfig
from rlsweep.testing import TINY_DQN, TINY_PPO

TINY = dict(TINY_PPO, num_epochs=1, widths=[8, 16, 16], dense=64)


# --- config mapping (no Ray) ---------------------------------------------------------------
def test_default_algorithm_is_ppo_and_round_trips():
    assert TrialConfig().algorithm == "ppo"
    cfg = TrialConfig(**TINY_DQN)
    assert TrialConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"algorithm": "sac"}, "algorithm: got 'sac'; allowed: ppo, impala, appo, dqn"),
        ({"replay_capacity": 0}, "replay_capacity: got 0; allowed: an integer >= 1"),
        ({"replay_alpha": 1.5}, "replay_alpha: got 1.5; allowed: a number in [0, 1]"),
        ({"epsilon_end": -0.1}, "epsilon_end: got -0.1; allowed: a number in [0, 1]"),
        ({"learning_starts": -1}, "learning_starts: got -1; allowed: an integer >= 0"),
        ({"dueling": 1}, "dueling: got 1; allowed: true, false"),
        ({"training_intensity": 0}, "training_intensity: got 0; allowed: a number > 0, or null"),
        ({"vtrace_clip_rho": 0}, "vtrace_clip_rho: got 0; allowed: a number > 0"),
        (
            {"algorithm": "dqn", "n_step": 300},
            "n_step: got 300; allowed: <= rollout_length (256)",
        ),
        (
            {"algorithm": "dqn", "augment": "flip"},
            "augment: got 'flip'; allowed: none for algorithm",
        ),
        ({"vf_clip_mode": "huber"}, "vf_clip_mode: got 'huber'; allowed: loss, ppo2"),
        (
            {"algorithm": "impala", "minibatch_size": 100},
            "minibatch_size: got 100; allowed: a multiple of rollout_length (256) for impala",
        ),
    ],
)
def test_bad_algorithm_values_name_the_key(overrides, message):
    with pytest.raises(ConfigError) as e:
        TrialConfig(**overrides)
    assert str(e.value).startswith(message)


def test_ppo_vf_clip_modes_reach_rllib():
    from rlsweep.trial.algos import algorithm_config
    from rlsweep.trial.ppo_learner import PPO2_VF_CLIP

    c = algorithm_config(TrialConfig(vf_clip_param=0.2, vf_clip_mode="ppo2"))
    assert c.vf_clip_param == math.inf and c.learner_config_dict[PPO2_VF_CLIP] == 0.2
    c = algorithm_config(TrialConfig(vf_clip_param=0.2, vf_clip_mode="loss"))
    assert c.vf_clip_param == 0.2 and PPO2_VF_CLIP not in c.learner_config_dict


@pytest.mark.parametrize("algorithm", ["ppo", "impala", "appo", "dqn"])
def test_discrete_actions_skip_rllibs_unsquash_and_clip(algorithm):
    # Procgen's actions are Discrete(15): unsquashing/clipping is a no-op that deep-copies each
    # env's action on every rollout step.
    from rlsweep.trial.algos import algorithm_config

    c = algorithm_config(TrialConfig(algorithm=algorithm))
    assert (c.normalize_actions, c.clip_actions) == (False, False)


def test_dqn_config_mapping():
    from rlsweep.trial.algos import algorithm_config
    from rlsweep.trial.rl_module import ImpalaDQNModule

    cfg = TrialConfig(
        algorithm="dqn",
        gamma=0.99,
        lr=1e-4,
        grad_clip=10.0,
        minibatch_size=256,
        replay_capacity=10_000,
        replay_alpha=0.5,
        replay_beta=0.6,
        learning_starts=2000,
        target_update_freq=4000,
        epsilon_start=0.9,
        epsilon_end=0.02,
        epsilon_steps=50_000,
        n_step=5,
        double_q=False,
        dueling=False,
        training_intensity=2.0,
        rollout_length=32,
        num_envs_per_env_runner=8,
    )
    c = algorithm_config(cfg)
    assert c.algo_class.__name__ == "DQN"
    assert (c.gamma, c.lr, c.grad_clip, c.train_batch_size_per_learner) == (0.99, 1e-4, 10.0, 256)
    assert c.replay_buffer_config == {
        "type": "PrioritizedEpisodeReplayBuffer",
        "capacity": 10_000,
        "alpha": 0.5,
        "beta": 0.6,
    }
    assert (c.num_steps_sampled_before_learning_starts, c.target_network_update_freq) == (
        2000,
        4000,
    )
    assert c.epsilon == [[0, 0.9], [50_000, 0.02]]
    assert (c.n_step, c.double_q, c.dueling, c.num_atoms, c.training_intensity) == (
        5,
        False,
        False,
        1,
        2.0,
    )
    assert c.min_sample_timesteps_per_iteration == 32 * 8
    assert c.rl_module_spec.module_class is ImpalaDQNModule
    assert c.rl_module_spec.model_config["eval_epsilon"] == 0.02
    c.validate()


@pytest.mark.parametrize("algorithm", ["impala", "appo"])
def test_vtrace_config_mapping(algorithm):
    from rlsweep.trial.algos import algorithm_config
    from rlsweep.trial.rl_module import ImpalaAPPOModule, ImpalaPPOModule

    cfg = TrialConfig(
        algorithm=algorithm,
        gamma=0.99,
        vf_loss_coeff=0.7,
        entropy_coeff=0.02,
        vtrace_clip_rho=2.0,
        vtrace_clip_pg_rho=1.5,
        clip_param=0.3,
        rollout_length=32,
        num_envs_per_env_runner=8,
        minibatch_size=64,
        num_epochs=2,
    )
    c = algorithm_config(cfg)
    assert c.algo_class.__name__ == algorithm.upper()
    assert (c.gamma, c.vf_loss_coeff, c.entropy_coeff) == (0.99, 0.7, 0.02)
    assert (c.vtrace_clip_rho_threshold, c.vtrace_clip_pg_rho_threshold) == (2.0, 1.5)
    assert (c.train_batch_size_per_learner, c.minibatch_size, c.num_epochs) == (256, 64, 2)
    expected = ImpalaAPPOModule if algorithm == "appo" else ImpalaPPOModule
    assert c.rl_module_spec.module_class is expected
    if algorithm == "appo":
        assert c.clip_param == 0.3
    c.validate()


def test_dqn_module_evaluates_epsilon_greedy_and_trains_against_its_target():
    from rlsweep.trial.rl_module import ImpalaDQNModule

    m = ImpalaDQNModule(
        observation_space=gym.spaces.Box(0, 255, (3, 64, 64), np.uint8),
        action_space=gym.spaces.Discrete(15),
        model_config={"widths": [8, 16, 16], "dense": 32, "eval_epsilon": 0.1},
    )
    m.make_target_networks()
    obs = torch.randint(0, 256, (4, 3, 64, 64), dtype=torch.uint8)
    out = m.forward_inference({"obs": obs})
    probs = out["action_dist_inputs"].exp()
    torch.testing.assert_close(probs.sum(-1), torch.ones(4))
    greedy = m.compute_q_values({"obs": obs})["qf_preds"].argmax(-1)
    assert (out["actions"] == greedy).all()
    assert torch.allclose(
        probs.gather(-1, greedy[:, None]).squeeze(-1), torch.tensor(0.9 + 0.1 / 15)
    )
    train = m.forward_train({"obs": obs, "new_obs": obs})
    torch.testing.assert_close(train["qf_target_next_preds"], train["qf_preds"])  # synced copy
    assert "_target_q_net.adv.weight" not in m.get_state(inference_only=True)


# --- real training ---------------------------------------------------------------------------
def _weights(algo) -> dict[str, np.ndarray]:
    return {k: v.detach().clone().numpy() for k, v in algo.get_module().state_dict().items()}


@pytest.mark.rllib
@pytest.mark.parametrize(
    ("overrides", "changed_key"),
    [
        (dict(TINY, algorithm="impala"), "net.trunk.stages.0.down.0.weight"),
        (dict(TINY, algorithm="appo"), "net.trunk.stages.0.down.0.weight"),
        (TINY_DQN, "q_net.trunk.stages.0.down.0.weight"),
    ],
    ids=["impala", "appo", "dqn"],
)
def test_algorithm_trains_on_procgen(ray_local, overrides, changed_key):
    from rlsweep.trial.algos import build_algorithm, read_result

    algo = build_algorithm(TrialConfig(**overrides))
    try:
        before = _weights(algo)
        results = [read_result(algo.train()) for _ in range(3)]
        after = _weights(algo)
        logits = algo.get_module().forward_inference(
            {"obs": torch.zeros((2, 3, 64, 64), dtype=torch.uint8)}
        )["action_dist_inputs"]
    finally:
        algo.stop()
    assert all(r["train/module_steps_trained"] > 0 for r in results), results
    last = results[-1]
    assert math.isfinite(last["loss/total"]) and math.isfinite(last["loss/value"]), results
    # An iteration in which no episode ended reports no episode return (NaN): some did end.
    returns = [r["train/episode_return_mean"] for r in results]
    assert last["env_steps"] >= 3 * 256 and last["train/episodes_lifetime"] > 0, results
    assert any(math.isfinite(r) for r in returns), results
    assert not np.array_equal(before[changed_key], after[changed_key])
    assert logits.shape == (2, 15)


@pytest.mark.parametrize(
    ("learner", "expected"),
    [
        # PPO (unchanged keys)
        (
            {"total_loss": 1.0, "policy_loss": 2.0, "vf_loss": 3.0, "rlsweep_lr_in_update": 1e-3},
            {"loss/total": 1.0, "loss/policy": 2.0, "loss/value": 3.0, "hp/lr": 1e-3},
        ),
        # IMPALA: per-sample means, not batch sums
        (
            {
                "total_loss": 1.0,
                "pi_loss": 90.0,
                "mean_pi_loss": 2.0,
                "vf_loss": 90.0,
                "mean_vf_loss": 3.0,
                "default_optimizer_learning_rate": 5e-4,
            },
            {"loss/total": 1.0, "loss/policy": 2.0, "loss/value": 3.0, "hp/lr": 5e-4},
        ),
        # DQN: the TD loss is the value loss; no policy loss
        (
            {"total_loss": 0.5, "qf_loss": 0.5},
            {"loss/total": 0.5, "loss/value": 0.5, "loss/policy": math.nan},
        ),
    ],
    ids=["ppo", "impala", "dqn"],
)
def test_read_result_maps_every_algorithm_to_the_same_keys(learner, expected):
    """Stable keys for all; NaN for a loss an algorithm does not have."""
    from rlsweep.trial.algos import read_result

    m = read_result({"learners": {"default_policy": learner}, "env_runners": {}})
    ppo_keys = read_result({"learners": {"default_policy": {}}, "env_runners": {}}).keys()
    assert m.keys() == ppo_keys
    for key, value in expected.items():
        assert m[key] == pytest.approx(value, nan_ok=True), key


def test_no_update_reads_as_zero_samples_trained_and_nan_losses():
    """DQN before learning_starts: trainable.py must not mistake that for a diverged loss."""
    from rlsweep.trial.algos import read_result

    m = read_result({"env_runners": {"num_env_steps_sampled_lifetime": 256}})
    assert m["train/module_steps_trained"] == 0 and math.isnan(m["loss/total"])


def test_read_result_keys_are_metric_constants_no_evaluator_key_overwrites():
    """Every key is a rlsweep.metrics constant, and none is one the evaluator's scores (merged
    after it in each report) would overwrite: RLlib's training-episode count was reported as
    `train/episodes` and then replaced by the evaluator's episode count."""
    from rlsweep import metrics as M
    from rlsweep.trial.algos import read_result
    from rlsweep.trial.evaluation import EvalResult, score_metrics

    constants = {v for k, v in vars(M).items() if k.isupper() and isinstance(v, str)}
    keys = set(read_result({}))
    assert keys <= constants, keys - constants
    ev = EvalResult(np.ones(2), np.ones(2), np.zeros(2, np.int64))
    for split in ("train", "test"):
        assert not keys & set(score_metrics(TrialConfig(), split, ev))
