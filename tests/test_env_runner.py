"""rlsweep.env_runner: a GPU trial without remote EnvRunners samples with CentralInferenceEnvRunner
in its own process (the other layouts keep RLlib's), and that runner is RLlib's sampling with the
module on the learner's device: here, on the CPU (`rllib`: real RLlib on real Procgen)."""

import pytest

from rlsweep.algos import algorithm_config
from rlsweep.config import TrialConfig
from rlsweep.env_runner import CentralInferenceEnvRunner


@pytest.mark.rllib
def test_a_gpu_trial_samples_in_its_process_through_rllibs_env_runner():
    gpu = TrialConfig(
        num_gpus=0.5, num_cpus=1, num_envs_per_env_runner=2, rollout_length=8, minibatch_size=16
    )
    c = algorithm_config(gpu)
    assert c.env_runner_cls is CentralInferenceEnvRunner and c.num_env_runners == 0
    assert (c.num_gpus_per_learner, c.env_config["envpool_threads"]) == (0.5, 1)
    remote = algorithm_config(TrialConfig(num_gpus=0.5, num_env_runners=2))
    assert remote.env_runner_cls is not CentralInferenceEnvRunner
    assert (remote.num_env_runners, remote.num_gpus_per_learner) == (2, 0.5)
    # The GPU trial's runner, on the CPU: RLlib's sampling through our make_module.
    runner = CentralInferenceEnvRunner(config=c.learners(num_gpus_per_learner=0))
    try:
        episodes = runner.sample(num_timesteps=16)
        assert sum(len(e) for e in episodes) >= 16
        assert next(runner.module.parameters()).device.type == "cpu"
    finally:
        runner.stop()
