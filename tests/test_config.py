import pytest

from rlsweep.errors import ConfigError
from rlsweep.spec.config import EARLIER_DEFAULTS, UNREAD, TrialConfig, recorded_config
from rlsweep.spec.subconfigs import ALGORITHMS, AUGMENTATIONS, FRAMESTACKS


def test_defaults_are_train_procgens_run():
    """TrialConfig's defaults are baselines/cobbe2019.yaml (train-procgen), field for field."""
    from rlsweep.spec.spec import load_baseline

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


def test_a_recorded_config_runs_as_its_rlsweep_ran_it():
    """A config recorded before a field whose default changed ran with the earlier value; one
    that records the field keeps it; the entries are defaults that did change."""
    now = TrialConfig().to_dict()
    assert all(now[k] != v for k, v in EARLIER_DEFAULTS.items())
    before = {k: v for k, v in now.items() if k not in EARLIER_DEFAULTS}
    assert TrialConfig.from_dict(recorded_config(before)).init == "torch"
    assert TrialConfig.from_dict(recorded_config(before)).pool_padding == "torch"
    assert recorded_config(now) == now


def test_train_batch_follows_runners():
    assert TrialConfig(num_env_runners=3, minibatch_size=64).effective_train_batch_size == 3 * 16384
    assert TrialConfig(train_batch_size=32768).effective_train_batch_size == 32768


# Each field's own rule: tests/test_subconfigs.py's table. Here, the rules across fields.
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"minibatch_size": 32768},
            "minibatch_size: got 32768; allowed: <= the train batch (16384 env steps)",
        ),
        (
            {"minibatch_size": 3000},
            "minibatch_size: got 3000; allowed: a divisor of the train batch (16384 env steps)",
        ),
        (
            {"train_batch_size": 5000},
            "train_batch_size: got 5000; allowed: a multiple of rollout_length x "
            "num_envs_per_env_runner x max(1, num_env_runners) = 16384",
        ),
        (
            {"total_env_steps": 16383},
            "total_env_steps: got 16383; allowed: >= 16,384 env steps, one iteration",
        ),
        (
            {"algorithm": "appo", "minibatch_size": 1000},
            "minibatch_size: got 1000; allowed: a multiple of rollout_length (256) for appo",
        ),
        ({"algorithm": "dqn", "augment": "flip"}, "augment: got 'flip'; allowed: none for"),
        ({"algorithm": "dqn", "n_step": 300}, "n_step: got 300; allowed: <= rollout_length (256)"),
        (
            {"algorithm": "dqn", "replay_capacity": 1000},
            "replay_capacity: got 1000; allowed: >= minibatch_size (2048)",
        ),
        (
            {"game": "coinrun", "distribution_mode": "memory"},
            "distribution_mode: got 'memory'; allowed for coinrun: easy, hard, exploration",
        ),
    ],
)
def test_rules_across_fields_name_the_key_and_the_allowed_values(overrides, message):
    with pytest.raises(ConfigError) as e:
        TrialConfig(**overrides)
    assert str(e.value).startswith(message)


def test_every_error_at_once_and_each_rule_across_fields_once_its_fields_are_valid():
    with pytest.raises(ConfigError) as e:
        TrialConfig(gamma=2, minibatch_size=32768, distribution_mode="memory", lr=-1)
    # distribution_mode is the env's rule across fields (its fields are all valid); the batch
    # rules wait for gamma and lr.
    assert [x.path for x in e.value.errors] == ["gamma", "lr", "distribution_mode"]
    with pytest.raises(ConfigError) as e:
        TrialConfig(algorithm="dqn", augment="flip", n_step=300, minibatch_size=32768)
    assert [x.path for x in e.value.errors] == ["minibatch_size", "augment", "n_step"]


def test_unknown_key_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"^params.lamda: unknown key \(did you mean 'lambda_'"):
        TrialConfig.from_dict({"lamda": 0.9}, path="params")
    with pytest.raises(ConfigError) as e:  # beside the known keys' errors
        TrialConfig.from_dict({"lamda": 0.9, "lr": 0}, path="params")
    assert [x.path for x in e.value.errors] == ["params.lamda", "params.lr"]


def test_lists_become_tuples_and_a_refused_list_is_shown_as_written():
    cfg = TrialConfig(widths=[32, 64], lr_schedule=[[0, 1e-4], [10, 1e-5]])
    assert cfg.widths == (32, 64) and cfg.lr_schedule == ((0, 1e-4), (10, 1e-5))
    with pytest.raises(ConfigError, match=r"^widths: got \[16, 0\]; allowed"):
        TrialConfig(widths=[16, 0])
    with pytest.raises(ConfigError, match=r"^lr_schedule: got \[\[10, 0.0001\]\]; allowed"):
        TrialConfig(lr_schedule=[[10, 1e-4]])


def test_grad_clip_may_be_disabled():
    """null turns clipping off down to RLlib's config, where the learner reads it
    (`RlsweepPPOLearner.postprocess_gradients_for_module` clips nothing without it)."""
    from rlsweep.trial.algos import ppo_config

    assert ppo_config(TrialConfig(grad_clip=None)).grad_clip is None
    assert ppo_config(TrialConfig(grad_clip=0.5)).grad_clip == 0.5


def test_rllib_config_mapping():
    """The one place RLlib's builder is touched maps every field we own."""
    from rlsweep.trial.algos import ppo_config
    from rlsweep.trial.ppo_learner import RlsweepPPOLearner

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
        "rlsweep_rollout_values": True,
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


def _reads(key: str, cfg: TrialConfig) -> object:
    """What the part of a trial that reads `key` makes of `cfg` (config.UNREAD's readers)."""
    import numpy as np
    import torch

    from rlsweep.envs.vector_env import FrameStacker, ProcgenVectorEnv
    from rlsweep.trial import algos
    from rlsweep.trial.augment import augment

    if key == "lr":
        return algos._lr(cfg)
    if key == "framestack_k":
        frames = np.arange(6, dtype=np.uint8).reshape(2, 3, 1, 1)
        stacker = FrameStacker(cfg.framestack, cfg.framestack_k)
        return [stacker.push(frames + i, np.zeros(2, bool)).tolist() for i in range(3)]
    if key in ("reward_norm_gamma", "reward_clip"):
        env = ProcgenVectorEnv(cfg.env_config(), num_envs=1)
        try:
            return (
                env.reward_normalizer
                if env.reward_normalizer is None
                else vars(env.reward_normalizer)
            )
        finally:
            env.close()
    if key == "kl_target":
        loss = algos._kl_loss(cfg)
        return loss if loss["use_kl_loss"] else {"use_kl_loss": False}
    if key.startswith("augment"):
        obs = torch.arange(4 * 3 * 8 * 8, dtype=torch.uint8).reshape(4, 3, 8, 8)
        return augment(obs, cfg.augment_config(), torch.Generator().manual_seed(0)).tolist()
    raise AssertionError(f"no reader check for {key}")


_CANDIDATES = {
    "lr_schedule": (None, [[0, 1e-4], [100, 2e-4]]),
    "framestack": FRAMESTACKS,
    "normalize_reward": (False, True),
    "kl_coeff": (0.0, 0.2),
    "augment": AUGMENTATIONS,
    "algorithm": ALGORITHMS,
}
"""Values of each field a condition of UNREAD looks at: the first it accepts makes the field
unread, the first it refuses lets it be read."""
_VALUES = {
    "lr": (1e-4, 3e-4),
    "framestack_k": (2, 3),
    "reward_norm_gamma": (0.9, 0.99),
    "reward_clip": (5.0, 10.0),
    "kl_coeff": (0.1, 0.2),
    "kl_target": (0.01, 0.02),
    "augment_p": (0.5, 1.0),
    "augment_pad": (1, 3),
    "augment_scale_min": (0.3, 0.8),
    "lambda_": (0.9, 0.95),
    "vf_clip_param": (0.2, 10.0),
    "vf_clip_mode": ("loss", "ppo2"),
    "minibatching": ("shuffle", "fixed"),
    "advantage_norm": ("minibatch", "batch"),
    "adam_eps": (1e-5, 1e-8),
    "clip_param": (0.1, 0.3),
    "vf_loss_coeff": (0.25, 0.5),
    "entropy_coeff": (0.01, 0.02),
    "num_epochs": (1, 3),
    "vtrace_clip_rho": (1.0, 0.5),
    "vtrace_clip_pg_rho": (1.0, 0.5),
    "replay_capacity": (4096, 8192),
    "replay_alpha": (0.6, 0.5),
    "replay_beta": (0.4, 0.5),
    "learning_starts": (1000, 2000),
    "target_update_freq": (1000, 2000),
    "epsilon_start": (1.0, 0.5),
    "epsilon_end": (0.01, 0.05),
    "epsilon_steps": (1000, 2000),
    "n_step": (1, 3),
    "double_q": (True, False),
    "dueling": (True, False),
    "training_intensity": (None, 2.0),
}
"""Two values of each UNREAD field that its reader tells apart."""


def _condition_values(unread) -> tuple[object, object]:
    """The first candidate of `unread.by` under which the field is unread, and the first under
    which it is read."""
    candidates = _CANDIDATES[unread.by]
    return (
        next(c for c in candidates if unread.test(c)),
        next(c for c in candidates if not unread.test(c)),
    )


@pytest.mark.parametrize(
    ("key", "i"), [(key, i) for key in sorted(UNREAD) for i in range(len(UNREAD[key]))]
)
def test_each_unread_field_is_read_by_nothing_under_its_condition_and_read_otherwise(key, i):
    """`config.UNREAD` says a field does nothing while another holds some value; each claim
    held against the part of a trial that reads the field (an algorithm's options: the RLlib
    config `algos.algorithm_config` builds): two values of it, under the condition, give that
    reader the same; away from it, not. The field's other conditions are held away."""
    from rlsweep.trial import algos

    unread = UNREAD[key][i]
    lo, hi = _condition_values(unread)
    every = {u.by: _condition_values(u)[1] for j, u in enumerate(UNREAD[key]) if j != i}
    if key in ("augment_pad", "augment_scale_min"):
        every["augment_p"] = 1.0  # every image augmented, so that the pad or scale shows
    for condition, same in ((lo, True), (hi, False)):
        a, b = (TrialConfig(**{**every, unread.by: condition, key: v}) for v in _VALUES[key])
        if unread.by == "algorithm":
            reads = lambda c: algos.algorithm_config(c).to_dict()  # noqa: E731
        else:
            reads = lambda c: _reads(key, c)  # noqa: E731
        assert (reads(a) == reads(b)) is same, (key, unread.by, condition)


def test_the_fields_no_config_reads_are_those_every_config_holds_unread():
    """Results drop from their CSVs the settings no trial read: DQN's replay in a PPO sweep,
    the KL target without a KL term; a field one trial reads stays. A frame's missing
    lr_schedule (NaN) is no schedule: lr is read."""
    from rlsweep.spec.config import unread_everywhere

    ppo = TrialConfig().to_dict() | {"lr_schedule": float("nan")}
    dqn = TrialConfig(algorithm="dqn").to_dict()
    only_ppo = unread_everywhere([ppo, ppo])
    assert {"replay_capacity", "vtrace_clip_rho", "kl_target", "framestack_k"} <= set(only_ppo)
    assert not {"lr", "clip_param", "entropy_coeff", "lambda_"} & set(only_ppo)
    mixed = unread_everywhere([ppo, dqn])
    assert "replay_capacity" not in mixed and "lambda_" not in mixed and "vtrace_clip_rho" in mixed
    assert unread_everywhere([]) == []
