"""What the learner's host syncs cost on a GPU, without Ray (torch and rlsweep.trial.models alone):
one PPO update's 24 minibatches of 2048 (the IMPALA net, bf16 autocast, Adam, global-norm
clipping as RLlib clips) with RLlib's per-minibatch syncs (TorchLearner.apply_gradients'
`isfinite(grad).all()` per parameter, twice; the PPO loss's two tensors made on the host) and
with RlsweepPPOLearner's sync-free versions; then, for the learner's batch, cuDNN benchmark
mode's first forward of a new batch size (ReferenceGAE's bootstrap chunks vary in size) and a
~200 MB observation copy to the GPU from pageable and from pinned memory.

    python benchmarks/probes/learner_syncs.py   # on a CUDA machine; prints one JSON line
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from rlsweep.spec.subconfigs import ModelConfig  # noqa: E402
from rlsweep.trial.models import ImpalaActorCritic  # noqa: E402

ROWS, MINIBATCH, EPOCHS, CLIP = 16_384, 2048, 3, 0.5


def clip_global_norm(grads: list[torch.Tensor]) -> None:
    """ray.rllib.utils.torch_utils.clip_gradients, grad_clip_by global_norm (sync-free)."""
    norms = [torch.norm(g, 2.0).nan_to_num(neginf=-10e8, posinf=10e8) for g in grads]
    total = torch.norm(torch.stack(norms), 2.0).nan_to_num(neginf=-10e8, posinf=10e8)
    coeff = torch.clamp(CLIP / torch.clamp(total + 1e-6, min=CLIP), max=1.0)
    for g in grads:
        g.mul_(coeff)


def update(net, opt, obs, targets, perm, *, rllib: bool) -> None:
    dev = obs.device
    for e in range(EPOCHS):
        for j in range(ROWS // MINIBATCH):
            idx = perm[e, j * MINIBATCH : (j + 1) * MINIBATCH]
            logits, values = net(obs[idx])
            loss = (values - targets[idx]).pow(2).mean() - logits.log_softmax(-1).mean()
            kl = torch.tensor(0.0, device=dev) if rllib else torch.zeros((), device=dev)
            y, diff = targets[idx], targets[idx] - values
            ev = 1 - diff.var() / (y.var() + 1e-6)
            ev = torch.max(torch.tensor([-1.0]).to(dev), ev)[0] if rllib else ev.clamp(min=-1.0)
            metrics = [loss.detach(), kl, ev.detach()]  # kept as tensors, as RLlib's logger does
            opt.zero_grad(set_to_none=True)
            (loss + 0 * kl).backward()
            params = [p for p in net.parameters() if p.grad is not None]
            clip_global_norm([p.grad for p in params])
            if rllib:  # TorchLearner.apply_gradients, torch_skip_nan_gradients False
                for p in params:
                    if not torch.isfinite(p.grad).all():
                        p.grad = torch.nan_to_num(p.grad)
                if all(torch.isfinite(p.grad).all() for p in params):
                    opt.step()
            else:
                flag = torch.stack([torch.isfinite(p.grad).all() for p in params]).all()
                for p in params:
                    p.grad = torch.nan_to_num(p.grad)
                opt.step()
                metrics.append(flag)
    torch.cuda.synchronize()


def main() -> None:
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    out: dict[str, object] = {"device": torch.cuda.get_device_name()}
    net = ImpalaActorCritic((3, 64, 64), 15, ModelConfig(precision="bf16")).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=5e-4, eps=1e-5)
    gen = torch.Generator().manual_seed(0)
    obs = torch.randint(0, 256, (ROWS, 3, 64, 64), dtype=torch.uint8, generator=gen).to(dev)
    targets = torch.randn(ROWS, generator=gen).to(dev)
    perm = torch.stack([torch.randperm(ROWS, generator=gen) for _ in range(EPOCHS)]).to(dev)
    times: dict[str, list[float]] = {"rllib": [], "rlsweep": []}
    for rep in range(6):
        for name in ("rllib", "rlsweep"):
            t0 = time.perf_counter()
            update(net, opt, obs, targets, perm, rllib=name == "rllib")
            if rep:  # the first is warm-up (cuDNN's benchmarking, Adam's state)
                times[name].append(time.perf_counter() - t0)
    out["update_s (24 minibatches)"] = {k: [round(t, 4) for t in v] for k, v in times.items()}

    # ReferenceGAE's bootstrap forwards: a new batch size under cudnn.benchmark, then again.
    first, again = [], []
    with torch.no_grad():
        for n in range(1, 17):
            for seen in (first, again):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                net(obs[:n])
                torch.cuda.synchronize()
                seen.append(time.perf_counter() - t0)
    out["bootstrap forward, new size (s)"] = round(float(np.median(first)), 4)
    out["bootstrap forward, seen size (s)"] = round(float(np.median(again)), 4)
    out["bootstrap forwards, sizes 1-16, first time (s)"] = round(sum(first), 3)

    # The observation batch to the GPU: ~200 MB (16,433 x 3 x 64 x 64 uint8).
    frames = np.random.default_rng(0).integers(0, 256, (16_433, 3, 64, 64), dtype=np.uint8)
    pinned = torch.empty(frames.shape, dtype=torch.uint8, pin_memory=True)
    copies: dict[str, list[float]] = {"pageable": [], "pinned (copy in, then to GPU)": []}
    for _ in range(4):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.from_numpy(frames).to(dev)
        torch.cuda.synchronize()
        copies["pageable"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        pinned.numpy()[:] = frames  # what np.concatenate(out=...) would write
        pinned.to(dev, non_blocking=True)
        torch.cuda.synchronize()
        copies["pinned (copy in, then to GPU)"].append(time.perf_counter() - t0)
    out["obs to GPU (s)"] = {k: [round(t, 4) for t in v[1:]] for k, v in copies.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
