"""A GPU rollout's forward replayed from a CUDA graph (`RolloutGraph`).

At 64 frames the IMPALA-CNN's forward is some 50 small kernels, each launched from Python
through torch's dispatcher: on an H200 a step's inference took 2.0-2.2 ms in a trial where the
GPU's own work is a fraction of that (`benchmarks/gpu.py` (a), (e)). A CUDA graph launches the
whole forward at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from rlsweep.trial.models import pinned_frames

logger = logging.getLogger(__name__)

Forward = Callable[..., dict[str, torch.Tensor]]
"""`forward(*inputs) -> {column: tensor}`."""


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    static_in: tuple[torch.Tensor, ...]
    static_out: dict[str, torch.Tensor]
    staging: dict[int, torch.Tensor]
    """Pinned host memory each host input (by position) passes through to its `static_in`."""
    staged: torch.cuda.Event
    """Recorded after the copies out of `staging`: the next inputs wait for it."""


class RolloutGraph:
    """`forward(*inputs) -> {column: tensor}` on a CUDA device, captured once per inputs'
    shapes and dtypes and replayed after.

    What a replay reads: the inputs (the frames; the noise the actions are sampled with),
    copied into the graph's own input buffers (through pinned memory when they come from the
    host), and the parameters where they lie. Weight syncs copy into the parameters in place
    (`load_state_dict`), which the graph sees; a parameter moved or replaced (a new address,
    `params()` says) makes the next call capture again. What it returns: fresh tensors (clones
    of the graph's outputs, which the next replay overwrites).

    When it is not used: at capture the replay must equal the eager forward bit for bit on the
    same inputs (cuDNN picks its algorithms once per shape, so they do); if it does not, or the
    capture fails, the graph is dropped, a warning says so, and every later call runs eagerly.
    The forward must not draw random numbers (random inputs are drawn by the caller, outside
    the graph, so that a replay computes what the eager forward does) or run autograd (a
    rollout's `no_grad` exploration forward does neither). The warnings call it the `name`
    forward.
    """

    def __init__(
        self, forward: Forward, params: Callable[[], Iterable[torch.Tensor]], name: str = "rollout"
    ) -> None:
        self.forward, self.params, self.name = forward, params, name
        self.captured: dict[tuple, _Captured] = {}
        self.addresses: tuple[int, ...] = ()
        self.eager = False
        """Set when a capture failed or failed its check: the eager forward from then on."""

    def __call__(
        self, inputs: tuple[torch.Tensor, ...], device: torch.device
    ) -> dict[str, torch.Tensor]:
        if self.eager:
            return self.forward(*(x.to(device) for x in inputs))
        addresses = tuple(p.data_ptr() for p in self.params())
        if addresses != self.addresses:
            self.captured.clear()
            self.addresses = addresses
        key = tuple((tuple(x.shape), x.dtype, x.device.type) for x in inputs)
        c = self.captured.get(key)
        if c is None:
            try:
                c = self._capture(inputs, device)
            except RuntimeError as e:  # an op torch cannot capture: not worth a failed trial
                logger.warning("rlsweep: no CUDA graph of the %s forward (%s)", self.name, e)
                c = None
            if c is None:
                self.eager = True
                logger.warning("rlsweep: the %s forward runs eagerly", self.name)
                return self.forward(*(x.to(device) for x in inputs))
            self.captured[key] = c
        if c.staging:
            c.staged.synchronize()
        for i, x in enumerate(inputs):
            if i in c.staging:
                pinned_frames(x, out=c.staging[i])
                c.static_in[i].copy_(c.staging[i], non_blocking=True)
            else:
                c.static_in[i].copy_(x)
        if c.staging:
            c.staged.record()
        c.graph.replay()
        return {k: v.clone() for k, v in c.static_out.items()}

    def _capture(self, inputs: tuple[torch.Tensor, ...], device: torch.device) -> _Captured | None:
        static_in = tuple(x.to(device, copy=True) for x in inputs)
        staging = {
            i: torch.empty(x.shape, dtype=x.dtype, pin_memory=True)
            for i, x in enumerate(inputs)
            if x.device.type == "cpu"
        }
        # Warm-up on a side stream, as torch asks: cuDNN's autotuning and lazy initialization
        # happen there, not in the graph.
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                eager = self.forward(*static_in)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # thread_local: with `overlap` the learner's thread keeps launching work meanwhile.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            static_out = self.forward(*static_in)
        graph.replay()
        same = static_out.keys() == eager.keys() and all(
            torch.equal(static_out[k], eager[k]) for k in eager
        )
        if not same:
            logger.warning(
                "rlsweep: the CUDA graph of the %s forward did not reproduce the eager "
                "forward on %s",
                self.name,
                ", ".join(str(tuple(x.shape)) for x in inputs),
            )
            return None
        return _Captured(graph, static_in, static_out, staging, torch.cuda.Event())
