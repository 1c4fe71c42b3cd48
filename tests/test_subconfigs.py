import dataclasses
import subprocess
import sys

import pytest

from rlsweep.config import SUB_CONFIGS, TrialConfig
from rlsweep.errors import ConfigError
from rlsweep.subconfigs import AugmentConfig, EnvConfig, ModelConfig

# A bare env plays raw rewards; a trial normalizes them as train-procgen did.
OVERRIDDEN = {"normalize_reward"}


def test_a_trial_declares_no_part_field_again_but_the_overridden_default():
    """One definition of each key: TrialConfig inherits the parts' fields rather than copying."""
    part_fields = {f.name for cls in SUB_CONFIGS for f in dataclasses.fields(cls)}
    redeclared = part_fields & set(TrialConfig.__annotations__)
    assert redeclared == OVERRIDDEN
    assert set(TrialConfig.field_names()) >= part_fields
    assert TrialConfig().normalize_reward and not EnvConfig().normalize_reward


def test_a_trial_builds_its_parts_by_field_name():
    cfg = TrialConfig(
        game="maze", framestack="gap", widths=[32, 64, 64], augment="crop_resize", augment_p=0.5
    )
    assert cfg.env_config() == EnvConfig(game="maze", framestack="gap", normalize_reward=True)
    assert cfg.model_config() == ModelConfig(widths=(32, 64, 64))
    assert cfg.augment_config() == AugmentConfig(augment="crop_resize", augment_p=0.5)


BAD = {
    "game": "pong",
    "distribution_mode": "medium",
    "num_levels": -1,
    "start_level": 1.5,
    "framestack": "gap4",
    "framestack_k": 1,
    "reward_shaping": "yes",
    "normalize_reward": 1,
    "reward_norm_gamma": 0,
    "reward_clip": True,
    "time_limit": "cut",
    "widths": "wide",
    "downsample": "avg",
    "global_pool": None,
    "dense": 0,
    "channels_last": "no",
    "bf16": 0,
    "augment": "cutout",
    "augment_p": 2,
    "augment_pad": 0,
    "augment_scale_min": 0,
}


@pytest.mark.parametrize("key", [f.name for cls in SUB_CONFIGS for f in dataclasses.fields(cls)])
def test_a_bad_part_value_names_the_trial_key(key):
    """Every part's validation error names the TrialConfig key (there is no re-keying)."""
    with pytest.raises(ConfigError) as e:
        TrialConfig.from_dict({key: BAD[key]}, path="params")
    assert e.value.path == f"params.{key}"
    assert e.value.message.startswith(f"got {BAD[key]!r}")


@pytest.mark.parametrize("module", ["rlsweep", "rlsweep.spec"])
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
