"""What every trial's RLlib Learner shares: `ConfigAfterRestore`, and the learner classes of the
algorithms that train with RLlib's own update (IMPALA, APPO, DQN) with it. PPO's learner, which
takes it too: `rlsweep.trial.ppo_learner.RlsweepPPOLearner`."""

from __future__ import annotations

from ray.rllib.algorithms.appo.torch.appo_torch_learner import APPOTorchLearner
from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
from ray.rllib.algorithms.impala.torch.impala_torch_learner import IMPALATorchLearner

from rlsweep._ray_compat import OptimizerHooks

ADAM_EPS = "rlsweep_adam_eps"
"""learner_config_dict key: Adam's epsilon (PPO's learner builds its optimizers with it)."""


class ConfigAfterRestore(OptimizerHooks):
    """Mixin for an RLlib torch Learner: after a restore, its optimizers run at the config's
    fixed lr and Adam epsilon, not the checkpoint's. RLlib's restore puts back the optimizer's
    whole state, hyperparameters too (ray#62173): a PBT exploit, which restores another trial's
    checkpoint under a perturbed config, would train an update at the old values while `hp/lr`
    showed the new. Every algorithm's learner takes it (`rlsweep.trial.algos`)."""

    def set_state(self, state) -> None:
        super().set_state(state)
        eps = self.config.learner_config_dict.get(ADAM_EPS)  # PPO's only
        for optimizer, schedule in self.lr_schedules.items():
            if not schedule.use_schedule:
                self.set_optimizer_lr(optimizer, float(schedule.get_current_value()))
            for group in optimizer.param_groups if eps is not None else ():
                group["eps"] = float(eps)


class RlsweepIMPALALearner(ConfigAfterRestore, IMPALATorchLearner):
    """RLlib's IMPALA torch learner, the config's lr after a restore."""


class RlsweepAPPOLearner(ConfigAfterRestore, APPOTorchLearner):
    """RLlib's APPO torch learner, the config's lr after a restore."""


class RlsweepDQNLearner(ConfigAfterRestore, DQNTorchLearner):
    """RLlib's DQN torch learner, the config's lr after a restore."""
