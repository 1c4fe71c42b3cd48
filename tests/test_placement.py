"""Device placement, GPU memory estimate, packing arithmetic and resource validation: all pure,
all on the CPU. One `rllib` test: each envpool starts the threads it is given. That Tune reserves
what RLlib would ask for is tested with Tune's side (tests/test_tune_bridge.py)."""

import gc
import os
from dataclasses import replace

import numpy as np
import pytest

from rlsweep.errors import ConfigError
from rlsweep.plan.placement import (
    ENV_RUNNER_CPUS,
    Machine,
    check_fits,
    gpu_memory,
    gpu_memory_gib,
    memory_fraction,
    num_params,
    out_of_memory_message,
    placement,
    saved_activation_bytes,
    starts_local_ray,
    trial_cpus,
    trials_at_once,
    trials_per_gpu,
)
from rlsweep.spec.config import TrialConfig


def test_cpu_trial_keeps_rllibs_layout():
    p = placement(TrialConfig(num_cpus=2, num_env_runners=3, num_envs_per_env_runner=16))
    assert (p.device, p.central_inference) == ("cpu", False)
    # each remote EnvRunner holds one CPU, and steps its envpool with one thread
    assert (p.num_env_runners, p.num_envs_per_env_runner, p.envpool_threads) == (3, 16, 1)
    assert (p.cpus, p.gpus) == (5, 0)
    assert p.bundles == ({"CPU": 2}, {"CPU": 1}, {"CPU": 1}, {"CPU": 1})


def test_gpu_trial_samples_centrally_on_its_cpus():
    p = placement(
        TrialConfig(num_gpus=0.25, num_cpus=4, num_envs_per_env_runner=128, precision="fp32")
    )
    assert (p.device, p.central_inference) == ("cuda", True)
    # one envpool of all the trial's envs, stepped by the trial's CPUs, in the trial's process
    assert (p.num_env_runners, p.num_envs_per_env_runner, p.envpool_threads) == (0, 128, 4)
    assert (p.cpus, p.gpus) == (4, 0.25)
    assert p.bundles == ({"CPU": 4, "GPU": 0.25},)


def test_a_trial_sampling_in_its_own_process_steps_envpool_with_its_cpus():
    # envpool's default, min(envs, the machine's cores), would start 64 threads per trial on a
    # 64-core node, whatever Ray reserved for it.
    p = placement(TrialConfig(num_cpus=3, num_envs_per_env_runner=64))
    assert (p.num_env_runners, p.envpool_threads, p.cpus) == (0, 3, 3)


def test_env_groups_are_one_envpool_unless_the_trial_asks_for_more():
    # Two groups sampled slower than one on an H100 node's 16 CPUs and on 2 (docs/gpu.md).
    def groups(**params) -> int:
        return placement(TrialConfig(**params)).env_groups

    gpu = dict(num_gpus=1, num_cpus=16, precision="fp32")
    assert groups() == groups(**gpu) == groups(**gpu, num_env_runners=2) == 1
    assert groups(env_groups=3) == groups(**gpu, env_groups=3) == 3  # the trial's own choice
    with pytest.raises(ConfigError, match="env_groups.*at most num_envs_per_env_runner"):
        TrialConfig(num_envs_per_env_runner=4, minibatch_size=256, env_groups=5)


def test_env_groups_share_the_trials_envpool_threads():
    def threads(**params) -> int:
        return placement(TrialConfig(**params)).envpool_threads

    assert threads(num_gpus=1, num_cpus=16, env_groups=2) == 8  # 16 at most at once
    assert threads(num_gpus=1, num_cpus=16) == threads(num_cpus=16) == 16  # one group
    assert threads(num_cpus=5, env_groups=2) == 2
    assert threads(num_cpus=1, env_groups=2) == 1  # at least one each
    assert threads(num_env_runners=2, env_groups=2) == ENV_RUNNER_CPUS


def test_gpu_learner_with_remote_cpu_runners_keeps_rllibs_layout():
    # a cluster's GPU node trains, its CPU nodes sample (ec2's GPU head, SageMaker's groups)
    p = placement(TrialConfig(num_gpus=1, num_cpus=2, num_env_runners=4, precision="fp32"))
    assert (p.device, p.central_inference, p.num_env_runners) == ("cuda", False, 4)
    assert (p.cpus, p.gpus) == (6, 1)
    assert p.bundles == ({"CPU": 2, "GPU": 1}, *({"CPU": 1},) * 4)


def test_custom_resources_pin_the_learner_and_the_env_runners_to_nodes():
    """learner_resources / env_runner_resources (a SageMaker learner group, rollout groups) go on
    the trial process's bundle and on each remote EnvRunner's."""
    cfg = TrialConfig(
        num_env_runners=2,
        learner_resources={"group_learner": 0.01},
        env_runner_resources={"group_rollout": 0.01},
    )
    assert placement(cfg).bundles == (
        {"CPU": 1, "group_learner": 0.01},
        {"CPU": 1, "group_rollout": 0.01},
        {"CPU": 1, "group_rollout": 0.01},
    )
    assert placement(TrialConfig()).bundles == ({"CPU": 1},)
    with pytest.raises(ConfigError, match="learner_resources: got {'g': 0}; allowed: a mapping"):
        TrialConfig(learner_resources={"g": 0})


def test_trial_cpus_count_the_process_and_each_remote_env_runner():
    assert trial_cpus(2, 3) == placement(TrialConfig(num_cpus=2, num_env_runners=3)).cpus == 5
    assert list(trial_cpus(np.array([1, 4]), np.array([0, 2]))) == [1, 6]  # a report's columns


@pytest.mark.parametrize(
    ("params", "key", "message"),
    [
        ({"num_gpus": 1.5}, "num_gpus", "a fraction 0 < x <= 1 of one GPU, or a whole number"),
        ({"num_gpus": -1}, "num_gpus", "got -1"),
        ({"deterministic": "yes"}, "deterministic", "true, false"),
    ],
)
def test_gpu_fields_are_validated(params, key, message):
    with pytest.raises(ConfigError) as e:
        TrialConfig(**params)
    assert e.value.path == key and message in e.value.message
    TrialConfig(num_gpus=2, precision="fp32")  # whole GPUs are fine, and so is any fraction of one
    TrialConfig(num_gpus=0.125, precision="tf32", deterministic=True)


def test_parameter_count_matches_the_model():
    from rlsweep.trial.models import ImpalaActorCritic

    for params in [{}, {"widths": (32, 64, 64)}, {"framestack": "stack", "global_pool": True}]:
        cfg = TrialConfig(**params)
        obs_shape = (3 * cfg.env_config().frames_per_obs, 64, 64)
        net = ImpalaActorCritic(obs_shape, 15, cfg.model_config())
        assert num_params(cfg) == sum(p.numel() for p in net.parameters())


H100_GIB = 79.6
"""An 80 GB H100's memory as torch counts it (81,559 MiB)."""


def test_gpu_memory_estimate_by_hand():
    cfg = TrialConfig(
        num_gpus=0.125, num_cpus=2, precision="fp32"
    )  # 64 x 256 batch, minibatch 2048, fp32
    m = gpu_memory(cfg)
    assert m.learner == 4 * 4 * num_params(cfg) / 2**30  # weights, grads, Adam's two moments
    assert m.copies == 4 * num_params(cfg) / 2**30  # the rollout's module, on the same GPU
    # the batch's frames and columns (one bootstrap row per env), twice: PPO shuffle's copy
    assert m.batch == 2 * (16384 + 64) * (12288 + 100) / 2**30
    assert m.activations == 2048 * (12288 + saved_activation_bytes(cfg)) / 2**30
    assert m.workspace == 2048 * 8.4 * (16 * 64 * 64 * 4) / 2**30  # fp32: cuDNN's
    parts = m.learner + m.copies + m.batch + m.activations + m.workspace
    assert m.total == 0.75 + 1.25 * parts  # the CUDA context; the allocator's reserve
    assert gpu_memory_gib(cfg) == m.total == pytest.approx(9.45, abs=0.01)
    # bf16 halves most activations and needs no fp32 workspace; a smaller minibatch shrinks both
    assert gpu_memory(TrialConfig(precision="bf16")).workspace == 0
    assert gpu_memory_gib(TrialConfig(precision="bf16")) < gpu_memory_gib(cfg) / 2
    assert gpu_memory_gib(TrialConfig(minibatch_size=512)) < gpu_memory_gib(cfg) / 2
    # APPO keeps the old policy too and queues batches; DQN holds no batch, 2 x minibatch rows
    assert gpu_memory(TrialConfig(algorithm="appo")).batch == 4 * (16448 * 12388) / 2**30
    net = 4 * num_params(cfg) / 2**30
    appo, ppo = gpu_memory(TrialConfig(algorithm="appo")), gpu_memory(TrialConfig())
    assert appo.copies - ppo.copies == net  # its target network
    # minibatching fixed cuts the one batch: no shuffled copy beside it
    assert gpu_memory(TrialConfig(minibatching="fixed")).batch == (16384 + 64) * 12388 / 2**30
    dqn = gpu_memory(TrialConfig(algorithm="dqn", minibatch_size=32))
    assert dqn.batch == 0 and dqn.activations == 64 * (12288 + 1229824) / 2**30


def test_the_training_step_estimate_is_near_the_measured_peak():
    """benchmarks/gpu.py (a) on an H200, 2048 samples, cuDNN benchmarking (a trial's default):
    torch.cuda.max_memory_allocated of the training step was 6.60 GiB in fp32 and in tf32 (the
    workspace constant comes from it) and 1.67 GiB in bf16 (nothing was fitted to it)."""
    for precision in ("fp32", "tf32"):
        step = gpu_memory(TrialConfig(precision=precision)).training_step
        assert step == pytest.approx(6.60, rel=0.01)
    assert gpu_memory(TrialConfig(precision="bf16")).training_step == pytest.approx(1.67, rel=0.25)


def _saved_by_autograd(cfg: TrialConfig, n: int) -> int:
    """Bytes of the distinct tensors autograd saves for backward in a training forward of `n`
    samples through the real model (its parameters and their casts not counted)."""
    import torch

    from rlsweep.plan.placement import obs_shape
    from rlsweep.trial.models import ImpalaActorCritic

    net = ImpalaActorCritic(obs_shape(cfg), 15, cfg.model_config())
    params = {p.untyped_storage().data_ptr() for p in net.parameters()}
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    obs = torch.randint(0, 256, (n, *obs_shape(cfg)), dtype=torch.uint8)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        net(obs)
    return sum(saved.values())


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"precision": "bf16"},
        {"widths": (32, 64, 64)},
        {"global_pool": True},
        {"downsample": "conv"},
        {"channels_last": False},
        {"framestack": "gap"},
        {"precision": "bf16", "downsample": "conv", "global_pool": True},
    ],
    ids=str,
)
def test_saved_activation_bytes_are_what_autograd_saves(params):
    """The estimate's activations, per sample, against a CPU forward through the real model
    (the difference of two batch sizes: bf16's weight casts are per batch, not per sample)."""
    cfg = TrialConfig(**params)
    per_sample = (_saved_by_autograd(cfg, 16) - _saved_by_autograd(cfg, 8)) / 8
    assert per_sample == pytest.approx(saved_activation_bytes(cfg), rel=0.01)


def test_a_trial_on_a_fraction_caps_its_allocator_at_its_share_less_the_context():
    assert (
        memory_fraction(TrialConfig(num_gpus=0.125, precision="fp32"), H100_GIB)
        == 0.125 - 0.75 / H100_GIB
    )
    assert (
        memory_fraction(TrialConfig(num_gpus=1, precision="fp32"), H100_GIB) is None
    )  # the whole GPU
    assert memory_fraction(TrialConfig(num_gpus=2, precision="fp32"), H100_GIB) is None
    assert memory_fraction(TrialConfig(), H100_GIB) is None  # a CPU trial
    assert (
        memory_fraction(TrialConfig(num_gpus=0.01, precision="fp32"), 40) == 0
    )  # less than its context


def test_the_out_of_memory_message_names_the_share_and_the_estimate():
    cfg = TrialConfig(num_gpus=0.125, num_cpus=2, precision="fp32")
    message = out_of_memory_message(cfg, H100_GIB, 9.1)
    assert message.startswith("out of GPU memory on its share (num_gpus 0.125 of a 79.6 GiB")
    assert "9.9 GiB, 9.2 GiB for torch after the CUDA context" in message
    assert "estimated need ~9.5 GiB" in message and "reserved 9.1 GiB" in message
    assert "larger num_gpus" in message
    assert "(num_gpus 1 (79.6 GiB))" in out_of_memory_message(
        TrialConfig(num_gpus=1, precision="fp32"), H100_GIB, 0
    )


def test_packing_arithmetic():
    assert [trials_per_gpu(g) for g in (1, 0.5, 0.3, 0.25, 0.1, 2)] == [1, 2, 3, 4, 10, 1]
    assert trials_at_once(4, 0.25, cpus=16, gpus=1) == (4, "GPU")
    assert trials_at_once(4, 0.125, cpus=16, gpus=1) == (4, "CPU")  # 8 fit the GPU, 4 the CPUs
    assert trials_at_once(2, 0.125, cpus=16, gpus=1) == (8, "GPU")
    assert trials_at_once(1, 0.3, cpus=64, gpus=4) == (12, "GPU")  # never spans two GPUs
    assert trials_at_once(4, 2, cpus=64, gpus=4) == (2, "GPU")
    assert trials_at_once(3, 0, cpus=8, gpus=0) == (2, "CPU")
    assert trials_at_once(1, 0.1, cpus=64, gpus=1) == (10, "GPU")  # 1 / 0.1 is 10, not 9
    assert trials_at_once(4, 2, cpus=64, gpus=3) == (1, "GPU")  # 2-GPU trials: 3 GPUs hold one


def test_check_fits_refuses_what_cannot_run():
    box = Machine(cpus=16, gpus=1, gpu_memory_gib=H100_GIB, where="the box")
    check_fits(
        TrialConfig(num_gpus=0.125, num_cpus=2, precision="fp32"), box
    )  # ~9.5 of a 9.9 GiB share
    with pytest.raises(ConfigError, match="num_cpus: a trial needs 32 CPUs .*the box has 16"):
        check_fits(TrialConfig(num_cpus=32), box)
    with pytest.raises(ConfigError, match="num_env_runners: a trial needs 18 CPUs"):
        check_fits(TrialConfig(num_cpus=2, num_env_runners=16), box)
    with pytest.raises(ConfigError, match="num_gpus: got 2; the box has 1 GPUs"):
        check_fits(TrialConfig(num_gpus=2, precision="fp32"), box)
    small = Machine(cpus=16, gpus=1, gpu_memory_gib=24, where="the box")
    # a share of 3 GiB: refused, with the fraction that holds the estimate
    with pytest.raises(ConfigError) as e:
        check_fits(TrialConfig(num_gpus=0.125, num_cpus=2, precision="fp32"), small)
    assert e.value.path == "num_gpus"
    assert e.value.message == (
        "got 0.125: a trial's share of the box's 24 GiB GPUs is 3.0 GiB (8 trials per GPU) and "
        "it needs ~9.5 GiB (estimated: rlsweep.plan.placement.gpu_memory_gib); "
        "allowed: num_gpus >= 0.394"
    )
    # ... even when the CPUs run only 2 of them at a time: each caps itself at its share
    with pytest.raises(ConfigError, match="allowed: num_gpus >= 0.394"):
        check_fits(TrialConfig(num_gpus=0.125, num_cpus=8, precision="fp32"), small)
    check_fits(TrialConfig(num_gpus=0.394, num_cpus=8, precision="fp32"), small)
    # a trial bigger than the whole GPU: smaller batches, not fewer trials
    with pytest.raises(ConfigError, match="a smaller minibatch_size or train batch"):
        check_fits(TrialConfig(num_gpus=1, minibatch_size=16384, precision="fp32"), small)
    # unknown GPU memory is not checked
    check_fits(TrialConfig(num_gpus=0.125, num_cpus=2, precision="fp32"), Machine(cpus=16, gpus=1))


def test_sixteen_default_trials_do_not_fit_an_80_gb_gpu_in_fp32_and_do_in_bf16():
    """K trials of the default batch (64 x 256, minibatch 2048) on one H100 with 16 CPUs."""
    h100 = Machine(cpus=16, gpus=1, gpu_memory_gib=H100_GIB, where="the box")
    check_fits(TrialConfig(num_gpus=0.125, num_cpus=2, precision="fp32"), h100)  # K = 8
    with pytest.raises(ConfigError) as e:  # K = 16
        check_fits(TrialConfig(num_gpus=0.0625, num_cpus=1, precision="fp32"), h100)
    assert "share of the box's 79.6 GiB GPUs is 5.0 GiB (16 trials per GPU)" in e.value.message
    assert e.value.message.endswith("allowed: num_gpus >= 0.119")  # 8 per GPU
    check_fits(TrialConfig(num_gpus=0.0625, num_cpus=1, precision="bf16"), h100)  # ~3 GiB each


@pytest.mark.rllib
def test_each_envpool_starts_as_many_threads_as_its_process_holds_cpus():
    """Counted as the process's new threads: a 1-CPU trial's training envpool and its two
    evaluation envpools run one worker each, where envpool's default runs min(envs, this
    machine's cores). Every pool also starts one thread of its own (its state buffer's)."""
    from rlsweep.envs.vector_env import ProcgenVectorEnv
    from rlsweep.trial.algos import algorithm_config, make_procgen_env
    from rlsweep.trial.evaluation import evaluation_envs

    cfg = TrialConfig(num_cpus=1, num_envs_per_env_runner=4, minibatch_size=256, eval_episodes=4)
    env_config = {**algorithm_config(cfg).env_config, "num_envs": 4}

    def new_threads(make) -> int:
        gc.collect()
        before = len(os.listdir("/proc/self/task"))
        envs = make()
        after = len(os.listdir("/proc/self/task"))
        for env in envs:
            env.close()
        del envs
        gc.collect()  # envpool joins a pool's threads when the pool is freed
        return after - before

    new_threads(lambda: [make_procgen_env(env_config)])  # envpool's own start-up threads
    assert new_threads(lambda: [make_procgen_env(env_config)]) == 1 + 1
    assert new_threads(lambda: list(evaluation_envs(cfg).values())) == 2 * (1 + 1)
    grouped = algorithm_config(replace(cfg, num_cpus=2, env_groups=2)).env_config
    assert new_threads(lambda: [make_procgen_env({**grouped, "num_envs": 4})]) == 2 * (1 + 1)
    default = new_threads(lambda: [ProcgenVectorEnv(cfg.env_config(), num_envs=4)])
    assert default == min(4, os.cpu_count() or 1) + 1


def test_a_sweep_joins_the_cluster_ray_init_would_join(monkeypatch):
    # ray.init(address=None) joins RAY_ADDRESS's cluster: no local resource check, num_cpus or
    # quiet RayConfig (which ray.init refuses when joining) then.
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert starts_local_ray(None)
    assert not starts_local_ray("auto") and not starts_local_ray("ray://head:10001")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert not starts_local_ray(None)
    monkeypatch.setenv("RAY_ADDRESS", "")
    assert starts_local_ray(None)
