"""The private Ray/RLlib names rlsweep relies on still exist, and only rlsweep._ray_compat names
them. Fast: builds a Learner and a W&B callback object, starts no Ray."""

import os
import re
from pathlib import Path

import ray

from rlsweep._ray_compat import CHECKED, HOOKS, LearnerHooks, resolve

PACKAGE = Path(__file__).resolve().parents[1] / "rlsweep"


def _instances() -> dict[str, object]:
    """One object per owner whose hooked attributes are set by its __init__."""
    from ray.air.integrations.wandb import WandbLoggerCallback
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

    return {
        "ray.rllib.core.learner.learner.Learner": PPOTorchLearner(config=PPOConfig()),
        "ray.air.integrations.wandb.WandbLoggerCallback": WandbLoggerCallback(
            project="p", mode="offline"
        ),
    }


def test_every_hooked_name_exists_on_the_installed_ray():
    instances = _instances()
    missing = []
    for hook in HOOKS:
        if hook.kind == "file":
            ok = os.path.exists(os.path.join(os.path.dirname(ray.__file__), hook.attribute))
        elif hook.kind == "instance":
            ok = hasattr(instances[hook.owner], hook.attribute)
        else:
            ok = hasattr(resolve(hook.owner), hook.attribute)
        if not ok:
            missing.append(f"{hook.owner}.{hook.attribute} (checked {hook.checked}): {hook.use}")
    assert not missing, "gone from this Ray:\n" + "\n".join(missing)


def test_hooks_were_checked_against_the_installed_ray():
    # An upgrade is deliberate: re-read each hook's Ray source, then bump CHECKED.
    assert ray.__version__ == CHECKED
    assert {h.checked for h in HOOKS} == {CHECKED}
    assert all(h.kind in ("class", "instance", "file") for h in HOOKS)


def test_learner_hooks_public_names_do_not_shadow_rllibs():
    """LearnerHooks' public names must stay free in RLlib, or a Ray upgrade would silently
    route RLlib's own calls to them."""
    from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

    public = [n for n in vars(LearnerHooks) if not n.startswith("_")]
    assert public
    assert [n for n in public if hasattr(PPOTorchLearner, n)] == []
    private = [n for n in vars(LearnerHooks) if n.startswith("_") and not n.startswith("__")]
    hooked = {h.attribute for h in HOOKS}
    assert set(private) <= hooked


def _sources() -> dict[str, str]:
    return {
        str(p.relative_to(PACKAGE.parent)): p.read_text()
        for p in PACKAGE.rglob("*.py")
        if p.name != "_ray_compat.py"
    }


# RLlib documents RLModule's _forward* methods as what a custom module overrides: they are
# overridden in rlsweep/rl_module.py (and `_forward` is a common name elsewhere).
_OVERRIDDEN_IN_PLACE = "ray.rllib.core.rl_module.rl_module.RLModule"


def test_no_other_module_names_a_private_ray_name():
    offenders = []
    for path, text in _sources().items():
        for hook in HOOKS:
            name = hook.attribute.split("/")[-1]
            if hook.owner != _OVERRIDDEN_IN_PLACE and re.search(rf"\b{re.escape(name)}\b", text):
                offenders.append(f"{path}: {name}")
        for pattern in (r"ray\._private", r"_internal\b", r"from ray[\w.]* import [^\n]*\b_[a-z]"):
            if re.search(pattern, text):
                offenders.append(f"{path}: {pattern}")
    assert offenders == []
