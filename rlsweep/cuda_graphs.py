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

from rlsweep.models import pinned_frames

logger = logging.getLogger(__name__)

Forward = Callable[[torch.Tensor], dict[str, torch.Tensor]]


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    static_in: torch.Tensor
    static_out: dict[str, torch.Tensor]
    staging: torch.Tensor
    """Pinned host memory the frames pass through on their way to `static_in`."""
    staged: torch.cuda.Event
    """Recorded after the copy out of `staging`: the next frames wait for it."""


class RolloutGraph:
    """`forward(obs) -> {column: tensor}` on a CUDA device, captured once per input shape and
    dtype and replayed after.

    What a replay reads: the frames, copied into the graph's own input buffer (through pinned
    memory when they come from the host), and the parameters where they lie. Weight syncs copy
    into the parameters in place (`load_state_dict`), which the graph sees; a parameter moved or
    replaced (a new address, `params()` says) makes the next call capture again. What it
    returns: fresh tensors (clones of the graph's outputs, which the next replay overwrites).

    When it is not used: at capture the replay must equal the eager forward bit for bit on the
    same frames (cuDNN picks its algorithms once per shape, so they do); if it does not, or the
    capture fails, the graph is dropped, a warning says so, and every later call runs eagerly.
    The forward must not draw random numbers or run autograd (a rollout's `no_grad`
    exploration forward does neither).
    """

    def __init__(self, forward: Forward, params: Callable[[], Iterable[torch.Tensor]]) -> None:
        self.forward, self.params = forward, params
        self.captured: dict[tuple, _Captured] = {}
        self.addresses: tuple[int, ...] = ()
        self.eager = False
        """Set when a capture failed or failed its check: the eager forward from then on."""

    def __call__(self, obs: torch.Tensor, device: torch.device) -> dict[str, torch.Tensor]:
        if self.eager:
            return self.forward(obs.to(device))
        addresses = tuple(p.data_ptr() for p in self.params())
        if addresses != self.addresses:
            self.captured.clear()
            self.addresses = addresses
        key = (tuple(obs.shape), obs.dtype)
        c = self.captured.get(key)
        if c is None:
            try:
                c = self._capture(obs, device)
            except RuntimeError as e:  # an op torch cannot capture: not worth a failed trial
                logger.warning("rlsweep: no CUDA graph of the rollout forward (%s)", e)
                c = None
            if c is None:
                self.eager = True
                logger.warning("rlsweep: sampling runs eagerly")
                return self.forward(obs.to(device))
            self.captured[key] = c
        if obs.device.type == "cpu":
            c.staged.synchronize()
            pinned_frames(obs, out=c.staging)
            c.static_in.copy_(c.staging, non_blocking=True)
            c.staged.record()
        else:
            c.static_in.copy_(obs)
        c.graph.replay()
        return {k: v.clone() for k, v in c.static_out.items()}

    def _capture(self, obs: torch.Tensor, device: torch.device) -> _Captured | None:
        static_in = obs.to(device, copy=True)
        staging = torch.empty(obs.shape, dtype=obs.dtype, pin_memory=True)
        # Warm-up on a side stream, as torch asks: cuDNN's autotuning and lazy initialization
        # happen there, not in the graph.
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                eager = self.forward(static_in)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # thread_local: with `overlap` the learner's thread keeps launching work meanwhile.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            static_out = self.forward(static_in)
        graph.replay()
        same = static_out.keys() == eager.keys() and all(
            torch.equal(static_out[k], eager[k]) for k in eager
        )
        if not same:
            logger.warning(
                "rlsweep: the CUDA graph of the rollout forward did not reproduce the eager "
                "forward on %s frames",
                tuple(obs.shape),
            )
            return None
        return _Captured(graph, static_in, static_out, staging, torch.cuda.Event())
