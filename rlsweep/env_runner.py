"""The EnvRunner of a GPU trial that samples in its own process (`rlsweep.placement`'s central
inference). The other layouts sample with RLlib's own SingleAgentEnvRunner."""

from __future__ import annotations

from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rlsweep.device import learner_device


class CentralInferenceEnvRunner(SingleAgentEnvRunner):
    """A GPU trial's sampler, SEED-style inside the node: RLlib's own EnvRunner, local to the
    trial's process (num_env_runners=0), stepping all of the trial's envs in one envpool and
    running one batched forward per step on the GPU the local learner trains on.

    RLlib cannot place it there by itself: a local EnvRunner asks `get_device` for 0 GPUs
    whatever the config (SingleAgentEnvRunner.__init__, Ray 2.60), and a remote GPU EnvRunner
    would ship every rollout's frames through the object store to the learner's process. So
    `make_module` (public EnvRunner API) moves the module to RLlib's own choice of the learner's
    device (`rlsweep.device.learner_device`), and the model moves each step's uint8 frames
    there (pinned: see `rlsweep.models.ImpalaCNN.forward`). Each frame crosses to the GPU
    twice: once in its step's forward, and once in the learner's batch (RLlib's episodes hold
    numpy frames; one copy per iteration, 200 MB for 16,384 64x64 RGB frames)."""

    def make_module(self) -> None:
        super().make_module()
        device = learner_device(self.config)
        if self.module is not None and device is not None:
            self.module.to(device)
