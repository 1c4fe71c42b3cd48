"""The rollout forward replayed from a CUDA graph (rlsweep.trial.cuda_graphs) computes the eager
one.

Those that capture need a GPU (CUDA graphs exist nowhere else): on a machine without one they
are skipped, and `benchmarks/gpu_check.py` runs them on a GPU node."""

import copy
import logging
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlsweep.trial.cuda_graphs import RolloutGraph
from rlsweep.trial.models import bf16_weights_for_rollouts
from rlsweep.trial.rl_module import ImpalaPPOModule

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


def _module(precision: str, seed: int = 0, **model: Any) -> ImpalaPPOModule:
    torch.manual_seed(seed)
    return ImpalaPPOModule(
        observation_space=gym.spaces.Box(0, 255, (3, 64, 64), np.uint8),
        action_space=gym.spaces.Discrete(15),
        model_config={
            "widths": [16, 32, 32],
            "precision": precision,
            "channels_last": True,
            **model,
        },
    )


def _frames(seed: int, n: int = 64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, 64, 64), dtype=torch.uint8, generator=g)


def _assert_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_graphed_rollout_forward_computes_the_eager_one(precision):
    torch.backends.cudnn.benchmark = True  # as a GPU trial runs
    eager = _module(precision)
    bf16_weights_for_rollouts(eager)  # as a GPU trial's EnvRunner holds it
    eager.to("cuda")
    graphed = copy.deepcopy(eager)
    graphed.graph_rollouts()

    def both(frames: torch.Tensor, seed: int) -> tuple[dict, dict]:
        """Each module's exploration forward, the actions' noise drawn from the same state."""
        torch.manual_seed(seed)
        a = graphed.forward_exploration({"obs": frames})
        torch.manual_seed(seed)
        return a, eager.forward_exploration({"obs": frames})

    first, _ = both(_frames(0), seed=0)
    assert first.keys() == {"action_dist_inputs", "vf_preds", "actions", "action_logp"}
    kept = {k: v.clone() for k, v in first.items()}
    for seed in range(3):
        _assert_equal(*both(_frames(seed), seed))
    _assert_equal(first, kept)  # what a call returned is its own: later replays leave it be
    graph = graphed._rollout_graph
    assert not graph.eager and len(graph.captured) == 1
    # Each replay samples with fresh noise: the same frames, other draws, other actions.
    again = graphed.forward_exploration({"obs": _frames(0)})
    assert torch.equal(again["action_dist_inputs"], first["action_dist_inputs"])
    assert not torch.equal(again["actions"], first["actions"])

    # A weight sync copies into the parameters in place: the graph computes with the new ones.
    synced = _module(precision, seed=1).get_state()
    eager.set_state(synced)
    graphed.set_state(synced)
    after, expected = both(_frames(0), seed=7)
    _assert_equal(after, expected)
    assert not torch.equal(after["action_dist_inputs"], kept["action_dist_inputs"])

    # Parameters that moved are captured again; another batch size gets a graph of its own.
    graphed.to("cpu").to("cuda")
    _assert_equal(*both(_frames(5), seed=8))
    _assert_equal(*both(_frames(6, n=8), seed=9))
    assert len(graph.captured) == 2


@cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_graphed_evaluation_forward_computes_the_eager_one(precision):
    """The evaluation's forward (`forward_inference`: the logits of every env's frames, one
    shape) is replayed from a graph of its own, beside the rollout's."""
    torch.backends.cudnn.benchmark = True
    eager = _module(precision)
    bf16_weights_for_rollouts(eager)
    eager.to("cuda")
    graphed = copy.deepcopy(eager)
    graphed.graph_rollouts()

    def both(frames: torch.Tensor) -> tuple[dict, dict]:
        frames = frames.to("cuda")  # as `policy_logits` gives them
        return graphed.forward_inference({"obs": frames}), eager.forward_inference({"obs": frames})

    first, _ = both(_frames(0))
    assert first.keys() == {"action_dist_inputs"}
    for seed in range(3):
        _assert_equal(*both(_frames(seed)))
    graph = graphed._inference_graph
    assert not graph.eager and len(graph.captured) == 1 and graph.name == "evaluation"
    synced = _module(precision, seed=1).get_state()  # a weight sync, in place
    eager.set_state(synced)
    graphed.set_state(synced)
    after, expected = both(_frames(0))
    _assert_equal(after, expected)
    assert not torch.equal(after["action_dist_inputs"], first["action_dist_inputs"])


@cuda
def test_a_graph_that_does_not_reproduce_the_eager_forward_is_not_used(caplog):
    # Random numbers drawn in the graph differ from the eager call's: the check catches it.
    def noisy(x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"y": x.float() + torch.rand(x.shape, device=x.device)}

    graph = RolloutGraph(noisy, lambda: [])
    with caplog.at_level(logging.WARNING, logger="rlsweep.trial.cuda_graphs"):
        out = graph((_frames(0, n=4),), torch.device("cuda"))
    assert graph.eager and not graph.captured
    assert "rollout forward runs eagerly" in caplog.text
    assert out["y"].shape == (4, 3, 64, 64) and out["y"].device.type == "cuda"


def test_a_module_without_a_gpu_samples_eagerly():
    """A CPU module never holds a graph: `graph_rollouts` is for a GPU EnvRunner's module
    (rlsweep.trial.env_runner.CentralInferenceEnvRunner calls it on CUDA alone)."""
    m = _module("fp32")
    out = m.forward_exploration({"obs": _frames(0, n=4)})
    assert m._rollout_graph is None
    feats = m.net.features(_frames(0, n=4))
    torch.testing.assert_close(out["action_dist_inputs"], m.net.pi(feats))
    torch.testing.assert_close(out["vf_preds"], m.net.vf(feats).squeeze(-1))
    assert m._inference_graph is None
    logits = m.forward_inference({"obs": _frames(0, n=4)})["action_dist_inputs"]
    torch.testing.assert_close(logits, m.net.pi(feats))


def test_cuda_graph_false_keeps_the_eager_forward():
    """`cuda_graph: false` (ModelConfig) reaches the trial's module, whose `graph_rollouts`
    then leaves the forward eager."""
    from rlsweep.spec.config import TrialConfig
    from rlsweep.trial.algos import algorithm_config

    for cuda_graph in (True, False):
        spec = algorithm_config(TrialConfig(cuda_graph=cuda_graph)).rl_module_spec
        assert spec.model_config["cuda_graph"] is cuda_graph
        m = _module("fp32", cuda_graph=cuda_graph)
        m.graph_rollouts()
        assert (m._rollout_graph is not None) is cuda_graph
        assert (m._inference_graph is not None) is cuda_graph


def test_a_capture_that_fails_leaves_the_eager_forward(caplog, monkeypatch):
    """An op torch cannot capture costs the trial its graph, not its run (on any machine: the
    capture is made to fail)."""

    def fail(*args):
        raise RuntimeError("operation not permitted when stream is capturing")

    m = _module("fp32")
    graph = RolloutGraph(m._rollout_outputs, m.parameters)
    monkeypatch.setattr(graph, "_capture", fail)
    frames = _frames(0, n=4)
    with caplog.at_level(logging.WARNING, logger="rlsweep.trial.cuda_graphs"):
        out = graph((frames,), torch.device("cpu"))
    assert graph.eager and not graph.captured
    assert "not permitted" in caplog.text and "rollout forward runs eagerly" in caplog.text
    torch.testing.assert_close(out["vf_preds"], m._rollout_outputs(frames)["vf_preds"])
    monkeypatch.undo()  # later calls go straight to the eager forward, never to a capture
    assert torch.equal(graph((frames,), torch.device("cpu"))["vf_preds"], out["vf_preds"])
