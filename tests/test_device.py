"""rlsweep.trial.device: a trial process's torch settings and its learner's GPU, on the CPU."""

from types import SimpleNamespace

import pytest
import torch

from rlsweep.spec.config import TrialConfig
from rlsweep.trial.algos import algorithm_config
from rlsweep.trial.device import configure_torch, learner_device


def test_a_trial_on_a_fraction_of_a_gpu_caps_torchs_allocator_there(monkeypatch):
    """configure_torch's plumbing on the CPU: the two torch.cuda calls are recorded, not made.
    A trial on 1/8 of an 80 GB H100 caps the allocator of its learner's GPU at its share less
    the CUDA context; a whole-GPU trial and a CPU trial set no cap."""
    calls = []
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda device: SimpleNamespace(total_memory=int(79.6 * 2**30)),
    )
    monkeypatch.setattr(
        torch.cuda, "set_per_process_memory_fraction", lambda f, device: calls.append((f, device))
    )
    precisions = (torch.backends.cuda.matmul, torch.backends.cudnn.conv)
    saved = [p.fp32_precision for p in precisions]
    gpu = torch.device("cuda", 0)
    try:
        configure_torch(TrialConfig(num_gpus=0.125, num_cpus=2), gpu)
        assert calls == [(pytest.approx(0.125 - 0.75 / 79.6), gpu)]
        configure_torch(TrialConfig(num_gpus=1), gpu)
        configure_torch(TrialConfig(), None)
        assert len(calls) == 1
    finally:
        for p, value in zip(precisions, saved, strict=True):
            p.fp32_precision = value
    assert learner_device(algorithm_config(TrialConfig())) is None  # a CPU learner


@pytest.mark.parametrize(
    ("fields", "tf32", "deterministic"),
    [
        ({}, "ieee", False),  # precision auto = bf16 on a GPU: float32 ops stay IEEE
        ({"precision": "fp32"}, "ieee", False),
        ({"precision": "tf32"}, "tf32", False),
        ({"precision": "fp32", "deterministic": True}, "ieee", True),
    ],
)
def test_a_gpu_trial_sets_tf32_and_cudnns_algorithm_choice(fields, tf32, deterministic):
    """What a GPU trial's process runs with (no GPU needed to set the flags): TF32 only for
    precision tf32; cuDNN benchmarking unless `deterministic`, whatever RLlib's seeding set
    before (it turns deterministic on and benchmarking off while the algorithm builds)."""
    flags = (torch.backends.cudnn, ("deterministic", "benchmark"))
    precisions = (torch.backends.cuda.matmul, torch.backends.cudnn.conv)
    saved = [p.fp32_precision for p in precisions], [getattr(flags[0], f) for f in flags[1]]
    try:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
        configure_torch(TrialConfig(num_gpus=1, **fields), None)
        assert [p.fp32_precision for p in precisions] == [tf32, tf32]
        assert torch.backends.cudnn.deterministic is deterministic
        assert torch.backends.cudnn.benchmark is not deterministic
    finally:
        for p, value in zip(precisions, saved[0], strict=True):
            p.fp32_precision = value
        for name, value in zip(flags[1], saved[1], strict=True):
            setattr(flags[0], name, value)
