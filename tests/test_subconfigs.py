import dataclasses
import subprocess
import sys

import pytest

from rlsweep.errors import ConfigError
from rlsweep.spec.config import SUB_CONFIGS, TrialConfig
from rlsweep.spec.subconfigs import AugmentConfig, EnvConfig, ModelConfig
from rlsweep.spec.validators import rule_of

# A bare env plays raw rewards; a trial normalizes them as train-procgen did.
OVERRIDDEN = {"normalize_reward", "precision"}


def test_a_trial_declares_no_part_field_again_but_the_overridden_default():
    """One definition of each key: TrialConfig inherits the parts' fields rather than copying."""
    part_fields = {f.name for cls in SUB_CONFIGS for f in dataclasses.fields(cls)}
    redeclared = part_fields & set(TrialConfig.__annotations__)
    assert redeclared == OVERRIDDEN
    assert set(TrialConfig.field_names()) >= part_fields
    assert TrialConfig().normalize_reward and not EnvConfig().normalize_reward
    assert (TrialConfig().precision, ModelConfig().precision) == ("auto", "fp32")


def test_a_trial_builds_its_parts_by_field_name():
    cfg = TrialConfig(
        game="maze", framestack="gap", widths=[32, 64, 64], augment="crop_resize", augment_p=0.5
    )
    assert cfg.env_config() == EnvConfig(game="maze", framestack="gap", normalize_reward=True)
    assert cfg.model_config() == ModelConfig(widths=(32, 64, 64))
    assert cfg.augment_config() == AugmentConfig(augment="crop_resize", augment_p=0.5)


GAMES = "bigfish, bossfight, caveflyer, chaser, climber, coinrun, dodgeball, fruitbot, heist, "
GAMES += "jumper, leaper, maze, miner, ninja, plunder, starpilot"
RESOURCES = "a mapping of Ray resource name -> amount > 0"
RULES = {  # every field of a trial: a value its rule refuses, and what the rule allows
    # EnvConfig
    "game": ("pong", GAMES),
    "distribution_mode": ("medium", "easy, hard, extreme, memory, exploration"),
    "num_levels": (-1, "an integer >= 0, or null"),
    "start_level": (1.5, "an integer >= 0"),
    "framestack": ("gap4", "none, stack, gap"),
    "framestack_k": (1, "an integer >= 2"),
    "reward_shaping": ("yes", "true, false"),
    "normalize_reward": (1, "true, false"),
    "reward_norm_gamma": (0, "a number in (0, 1]"),
    "reward_clip": (True, "a number > 0"),
    "time_limit": ("cut", "terminate, truncate"),
    # ModelConfig
    "widths": ("wide", "a non-empty list of positive integers"),
    "downsample": ("avg", "maxpool, conv"),
    "pool_padding": ("valid", "tf_same, torch"),
    "global_pool": (None, "true, false"),
    "relu_after_pool": ("no", "true, false"),
    "dense": (0, "an integer >= 1"),
    "init": ("xavier", "glorot, torch, keras"),
    "center_inputs": ("yes", "true, false"),
    "channels_last": ("no", "true, false"),
    "precision": ("fp16", "auto, fp32, tf32, bf16"),
    "cuda_graph": ("on", "true, false"),
    # AugmentConfig
    "augment": ("cutout", "none, flip, rotate, crop_resize, translate, pad_crop, all"),
    "augment_p": (2, "a number in [0, 1]"),
    "augment_pad": (0, "an integer >= 1"),
    "augment_scale_min": (0, "a number in (0, 1]"),
    # BudgetConfig
    "seed": (True, "an integer >= 0"),
    "total_env_steps": (1e6, "an integer >= 1"),
    "eval_interval": (0, "an integer >= 1"),
    "eval_episodes": (-1, "an integer >= 1"),
    "checkpoint_every_s": (-1, "a number >= 0"),
    "checkpoint_interval": (0.5, "an integer >= 0"),
    # AlgorithmConfig
    "algorithm": ("sac", "ppo, impala, appo, dqn"),
    "gamma": (1.5, "a number in (0, 1]"),
    "lambda_": (-0.1, "a number in [0, 1]"),
    "lr": ("fast", "a number > 0"),
    "lr_schedule": (
        [[10, 1e-4]],
        "[[env_step, lr], ...] with steps increasing from 0 and every lr > 0, or null",
    ),
    "clip_param": (0, "a number > 0"),
    "vf_clip_param": (-1, "a number > 0"),
    "vf_clip_mode": ("huber", "loss, ppo2"),
    "vf_loss_coeff": (-0.5, "a number >= 0"),
    "entropy_coeff": (float("nan"), "a number >= 0"),
    "kl_coeff": ("0", "a number >= 0"),
    "kl_target": (0, "a number > 0"),
    "grad_clip": (-1, "a number > 0, or null to disable"),
    "rollout_length": (0, "an integer >= 1"),
    "num_envs_per_env_runner": (0, "an integer >= 1"),
    "num_env_runners": (-1, "an integer >= 0"),
    "env_groups": (0, "an integer >= 1"),
    "train_batch_size": (0, "an integer >= 1, or null"),
    "minibatch_size": (512.0, "an integer >= 1"),
    "num_epochs": (0, "an integer >= 1"),
    "minibatching": ("cyclic", "shuffle, fixed, rllib"),
    "advantage_norm": ("none", "minibatch, batch, rllib"),
    "adam_eps": (0, "a number > 0"),
    "overlap": ("yes", "true, false"),
    # ResourcesConfig
    "num_gpus": (1.5, "0 (CPU), a fraction 0 < x <= 1 of one GPU, or a whole number of GPUs"),
    "deterministic": ("on", "true, false"),
    "num_cpus": (0, "an integer >= 1"),
    "learner_resources": ({"g": 0}, RESOURCES),
    "env_runner_resources": (["g"], RESOURCES),
    # VTraceConfig
    "vtrace_clip_rho": (0, "a number > 0"),
    "vtrace_clip_pg_rho": (None, "a number > 0"),
    # DQNConfig
    "replay_capacity": (0, "an integer >= 1"),
    "replay_alpha": (1.5, "a number in [0, 1]"),
    "replay_beta": (-0.1, "a number in [0, 1]"),
    "learning_starts": (-1, "an integer >= 0"),
    "target_update_freq": (0, "an integer >= 1"),
    "epsilon_start": (2, "a number in [0, 1]"),
    "epsilon_end": (-0.1, "a number in [0, 1]"),
    "epsilon_steps": (0, "an integer >= 1"),
    "n_step": (0, "an integer >= 1"),
    "double_q": ("yes", "true, false"),
    "dueling": (1, "true, false"),
    "training_intensity": (0, "a number > 0, or null for one update per sampling round"),
    "checkpoint_replay_buffer": ("no", "true, false"),
}

PART_ALLOWED = {"precision": "fp32, tf32, bf16"}  # a part runs one; a trial may say `auto`
QUOTED = " (a string, in quotes; unquoted, {} is allowed)"
HINTS = {  # what a refused value may have meant (issue 40): a close name, or unquoted YAML
    "framestack": " (did you mean 'gap'?)",
    "precision": " (did you mean 'bf16'?)",
    **{k: QUOTED.format(RULES[k][0]) for k in ("reward_shaping", "channels_last", "cuda_graph")},
    **{k: QUOTED.format(RULES[k][0]) for k in ("kl_coeff", "overlap", "deterministic")},
    **{k: QUOTED.format(RULES[k][0]) for k in ("double_q", "checkpoint_replay_buffer")},
    **{k: QUOTED.format(RULES[k][0]) for k in ("relu_after_pool", "center_inputs")},
}


def test_every_field_of_a_trial_declares_a_rule():
    assert list(RULES) == TrialConfig.field_names()  # the table lists them in field order
    assert all(rule_of(TrialConfig, key) for key in RULES)


@pytest.mark.parametrize("key", list(RULES))
def test_a_bad_value_names_the_trial_key_and_what_is_allowed(key):
    """Each field's rule, as the trial and the part that declares it report it (the trial's
    key path: there is no re-keying)."""
    bad, allowed = RULES[key]
    assert rule_of(TrialConfig, key).allowed == allowed
    with pytest.raises(ConfigError) as e:
        TrialConfig.from_dict({key: bad}, path="params")
    hint = HINTS.get(key, "")
    assert [str(x) for x in e.value.errors] == [
        f"params.{key}: got {bad!r}{hint}; allowed: {allowed}"
    ]
    (part,) = [cls for cls in SUB_CONFIGS if key in {f.name for f in dataclasses.fields(cls)}]
    with pytest.raises(ConfigError) as e:
        part(**{key: bad})
    allowed = PART_ALLOWED.get(key, allowed)
    assert str(e.value) == f"{key}: got {bad!r}{hint}; allowed: {allowed}"


@pytest.mark.parametrize("module", ["rlsweep", "rlsweep.spec", "rlsweep.spec.spec"])
def test_importing_the_package_or_loading_specs_imports_no_torch(module):
    """Config dataclasses live in torch-free modules: validate, plan and report stay light."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()}
    heavy = sorted(m for m in imported if m.split(".")[0] in ("torch", "gymnasium", "ray"))
    assert heavy == []
