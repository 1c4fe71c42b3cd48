import pytest

from rlsweep.config import TrialConfig
from rlsweep.errors import ConfigError


def test_defaults_are_train_procgens_run():
    """TrialConfig's defaults are baselines/cobbe2019.yaml (train-procgen), field for field."""
    from rlsweep.spec import load_baseline

    cobbe = load_baseline("cobbe2019")
    defaults = TrialConfig().to_dict()
    assert {k: defaults[k] for k in cobbe} == cobbe
    assert TrialConfig(**cobbe) == TrialConfig()
    assert TrialConfig().effective_train_batch_size == 64 * 256


def test_round_trip_through_dict():
    cfg = TrialConfig(widths=[32, 64, 64], lr_schedule=[[0, 1e-4], [1000, 8e-4]], seed=3)
    d = cfg.to_dict()
    assert d["widths"] == [32, 64, 64] and d["lr_schedule"] == [[0, 1e-4], [1000, 8e-4]]
    assert TrialConfig.from_dict(d) == cfg


def test_train_batch_follows_runners():
    assert TrialConfig(num_env_runners=3, minibatch_size=64).effective_train_batch_size == 3 * 16384
    assert TrialConfig(train_batch_size=32768).effective_train_batch_size == 32768


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"gamma": 0}, "gamma: got 0; allowed: 0 < gamma <= 1"),
        ({"gamma": 1.5}, "gamma: got 1.5; allowed: 0 < gamma <= 1"),
        ({"lambda_": -0.1}, "lambda_: got -0.1; allowed: 0 <= lambda_ <= 1"),
        ({"lr": 0}, "lr: got 0; allowed: a number > 0"),
        ({"lr": "fast"}, "lr: got 'fast'; allowed: a number > 0"),
        (
            {"minibatch_size": 32768},
            "minibatch_size: got 32768; allowed: <= the train batch (16384",
        ),
        (
            {"minibatch_size": 3000},
            "minibatch_size: got 3000; allowed: a divisor of the train batch",
        ),
        ({"minibatching": "cyclic"}, "minibatching: got 'cyclic'; allowed: shuffle, rllib"),
        (
            {"advantage_norm": "none"},
            "advantage_norm: got 'none'; allowed: minibatch, batch, rllib",
        ),
        ({"adam_eps": 0}, "adam_eps: got 0; allowed: a number > 0"),
        ({"time_limit": "cut"}, "time_limit: got 'cut'; allowed: terminate, truncate"),
        ({"reward_norm_gamma": 0}, "reward_norm_gamma: got 0; allowed: 0 < reward_norm_gamma"),
        ({"train_batch_size": 5000}, "train_batch_size: got 5000; allowed: a multiple of"),
        ({"widths": [16, 0]}, "widths: got (16, 0); allowed: a non-empty list of positive"),
        ({"downsample": "avg"}, "downsample: got 'avg'; allowed: maxpool, conv"),
        ({"lr_schedule": [[10, 1e-4]]}, "lr_schedule: got ((10, 0.0001),); allowed: [[env_step"),
        ({"num_envs_per_env_runner": 0}, "num_envs_per_env_runner: got 0; allowed: an integer > 0"),
        ({"grad_clip": -1}, "grad_clip: got -1; allowed: a number > 0, or null"),
        ({"game": "pong"}, "game: got 'pong'; allowed: bigfish"),
        ({"seed": True}, "seed: got True; allowed: an integer >= 0"),
    ],
)
def test_bad_values_name_the_key_and_the_allowed_values(overrides, message):
    with pytest.raises(ConfigError) as e:
        TrialConfig(**overrides)
    assert str(e.value).startswith(message)


def test_unknown_key_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"^params.lamda: unknown key \(did you mean 'lambda_'"):
        TrialConfig.from_dict({"lamda": 0.9}, path="params")


def test_grad_clip_may_be_disabled():
    assert TrialConfig(grad_clip=None).grad_clip is None


def test_rllib_config_mapping():
    """The one place RLlib's builder is touched maps every field we own."""
    from rlsweep.algos import ppo_config
    from rlsweep.ppo_learner import RlsweepPPOLearner

    cfg = TrialConfig(
        game="maze",
        gamma=0.99,
        lambda_=0.9,
        lr_schedule=[[0, 1e-4], [500_000, 8e-4]],
        clip_param=0.3,
        vf_clip_param=30.0,
        vf_clip_mode="loss",
        vf_loss_coeff=0.7,
        entropy_coeff=0.02,
        kl_coeff=0.2,
        kl_target=0.02,
        grad_clip=1.0,
        rollout_length=32,
        num_envs_per_env_runner=8,
        num_env_runners=2,
        minibatch_size=128,
        num_epochs=4,
        framestack="gap",
        widths=[32, 64, 64],
        global_pool=True,
        seed=7,
    )
    c = ppo_config(cfg)
    assert (c.gamma, c.lambda_, c.clip_param, c.vf_clip_param) == (0.99, 0.9, 0.3, 30.0)
    assert (c.vf_loss_coeff, c.entropy_coeff, c.kl_coeff, c.kl_target) == (0.7, 0.02, 0.2, 0.02)
    assert c.use_kl_loss and c.grad_clip == 1.0 and c.grad_clip_by == "global_norm"
    assert c.lr == [[0, 1e-4], [500_000, 8e-4]]
    assert (c.rollout_fragment_length, c.num_envs_per_env_runner, c.num_env_runners) == (32, 8, 2)
    assert c.train_batch_size_per_learner == 32 * 8 * 2
    assert (c.minibatch_size, c.num_epochs, c.seed) == (128, 4, 7)
    assert c.gym_env_vectorize_mode.name == "VECTOR_ENTRY_POINT"
    assert c.learner_class is RlsweepPPOLearner
    assert c.env_config["game"] == "maze" and c.env_config["framestack"] == "gap"
    assert c.rl_module_spec.model_config["widths"] == [32, 64, 64]
    assert c.rl_module_spec.model_config["global_pool"] is True
    assert c.learner_config_dict == {
        "rlsweep_minibatching": "shuffle",
        "rlsweep_advantage_norm": "minibatch",
        "rlsweep_adam_eps": 1e-5,
        "rlsweep_shuffle_seed": 7,
    }
    assert not ppo_config(TrialConfig()).use_kl_loss  # kl_coeff 0 turns the KL term off


def test_env_options_reach_the_env_config():
    cfg = TrialConfig(reward_norm_gamma=0.999, time_limit="truncate", normalize_reward=False)
    env = cfg.env_config()
    assert (env.reward_norm_gamma, env.time_limit, env.normalize_reward) == (
        0.999,
        "truncate",
        False,
    )
