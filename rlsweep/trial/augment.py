"""RAD/DrAC-style image augmentations of observation batches, as pure torch functions.

Meant for the learner's training minibatch, never for rollouts: the policy acts on clean
observations and learns invariance from augmented copies (Laskin et al. 2020, "RAD";
Raileanu et al. 2021, "DrAC").

Observations are (B, C, H, W) with C = 3 * frames (a framestack concatenates RGB frames along
channels). Every transform is spatial and drawn once per sample, so all frames of a stack get
the same transform with the same parameters: the stack stays a coherent clip.

Randomness comes only from the `torch.Generator` passed in, in a fixed order of draws that does
not depend on the data, so a seed reproduces a batch exactly. `sample_params` draws, and
`apply_params` applies; `augment` does both. The explicit per-transform functions (`flip`,
`rotate`, `crop_resize`, `translate`, `pad_crop`) take their parameters as tensors, for tests
and for reuse.

`rotate` turns by a multiple of 90 degrees (90, 180 or 270, uniformly per sample) as RAD did:
exact on the pixel grid, with no interpolation or fill, and never the identity turn, so
`augment_p` alone sets how often a sample is left as is. (DrAC found rotate among the weakest
on Procgen, whose games have a fixed up; it is here for completeness.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from rlsweep.spec.subconfigs import TRANSFORMS, AugmentConfig


@dataclass(frozen=True)
class AugmentParams:
    """Per-sample draws for one batch. All fields are drawn for every sample (whatever `op`
    is), which keeps the stream of draws independent of the data."""

    op: Tensor
    """(B,) int64: index into TRANSFORMS, or -1 for a sample left unchanged."""
    quarter_turns: Tensor
    """(B,) int64 in {1, 2, 3}: rotate's counter-clockwise turns (torch.rot90 on (H, W))."""
    offset: Tensor
    """(B, 2) int64 (y, x) in [0, 2 * pad]: translate places the image there in a
    (H + 2 pad, W + 2 pad) zero canvas; pad_crop takes its window there in the edge-padded
    image. Both then crop the centre / window back, so (pad, pad) is the identity."""
    pad: int
    """The `pad` the offsets were drawn for."""
    scale: Tensor
    """(B,) float32 in [augment_scale_min, 1]: crop_resize's crop side as a fraction of the
    image's."""
    corner: Tensor
    """(B, 2) float32 (y, x) in [0, 1): crop_resize's crop position, as a fraction of the room
    left around the crop (0 = top / left edge, 1 = bottom / right edge)."""

    def take(self, index: Tensor) -> AugmentParams:
        """The draws of the samples at `index`."""
        return AugmentParams(
            op=self.op[index],
            quarter_turns=self.quarter_turns[index],
            offset=self.offset[index],
            pad=self.pad,
            scale=self.scale[index],
            corner=self.corner[index],
        )

    def to(self, device: torch.device | str) -> AugmentParams:
        """The same draws on `device` (they are drawn where the generator lives)."""
        return AugmentParams(
            op=self.op.to(device),
            quarter_turns=self.quarter_turns.to(device),
            offset=self.offset.to(device),
            pad=self.pad,
            scale=self.scale.to(device),
            corner=self.corner.to(device),
        )


def sample_params(
    cfg: AugmentConfig, batch_size: int, generator: torch.Generator | None
) -> AugmentParams:
    """Draws one batch's parameters (on the generator's device; CPU when it is None)."""
    g = generator
    dev = g.device if g is not None else torch.device("cpu")
    applied = torch.rand(batch_size, generator=g, device=dev) < cfg.augment_p
    choice = torch.randint(0, len(TRANSFORMS), (batch_size,), generator=g, device=dev)
    quarter_turns = torch.randint(1, 4, (batch_size,), generator=g, device=dev)
    offset = torch.randint(0, 2 * cfg.augment_pad + 1, (batch_size, 2), generator=g, device=dev)
    u = torch.rand(batch_size, generator=g, device=dev)
    corner = torch.rand(batch_size, 2, generator=g, device=dev)
    if cfg.augment == "none":
        applied = torch.zeros_like(applied)
    elif cfg.augment != "all":
        choice = torch.full_like(choice, TRANSFORMS.index(cfg.augment))
    return AugmentParams(
        op=torch.where(applied, choice, -1),
        quarter_turns=quarter_turns,
        offset=offset,
        pad=cfg.augment_pad,
        scale=cfg.augment_scale_min + (1.0 - cfg.augment_scale_min) * u,
        corner=corner,
    )


def augment(obs: Tensor, cfg: AugmentConfig, generator: torch.Generator | None) -> Tensor:
    """`obs` (B, C, H, W) augmented per `cfg`; same shape, dtype and device. Never writes to
    `obs`; may return it as is when no sample is augmented."""
    if cfg.augment == "none" or cfg.augment_p == 0:
        return obs
    return apply_params(obs, sample_params(cfg, obs.shape[0], generator))


def apply_params(obs: Tensor, params: AugmentParams) -> Tensor:
    """`obs` with each sample's drawn transform applied. Samples are grouped by transform, so
    the work is a handful of batched ops, not a loop over samples."""
    params = params.to(obs.device)
    batch = obs.shape[0]
    out: Tensor | None = None
    for op, name in enumerate(TRANSFORMS):
        index = (params.op == op).nonzero().squeeze(1)
        n = index.numel()
        if n == 0:
            continue
        if n == batch:  # the common single-transform, p = 1 case: no gather / scatter
            return _apply_one(name, obs, params)
        if out is None:
            out = obs.clone()
        out[index] = _apply_one(name, obs[index], params.take(index))
    return obs if out is None else out


def _apply_one(name: str, x: Tensor, params: AugmentParams) -> Tensor:
    if name == "flip":
        return flip(x)
    if name == "rotate":
        return rotate(x, params.quarter_turns)
    if name == "crop_resize":
        return crop_resize(x, params.scale, params.corner)
    if name == "translate":
        return translate(x, params.offset - params.pad)
    if name == "pad_crop":
        return pad_crop(x, params.offset, params.pad)
    raise ValueError(f"unknown transform {name!r}")


def flip(x: Tensor) -> Tensor:
    """Mirrors left-right (the last axis)."""
    return x.flip(-1)


def rotate(x: Tensor, quarter_turns: Tensor | int) -> Tensor:
    """Turns sample i by `quarter_turns[i]` * 90 degrees counter-clockwise, as
    `torch.rot90(x[i], k, dims=(-2, -1))`. Odd turns need square images.

    One gather through a per-sample pixel map (about twice as fast on CPU as grouping the
    batch by k and calling rot90 per group)."""
    batch, channels, h, w = x.shape
    k = torch.as_tensor(quarter_turns, device=x.device).remainder(4).expand(batch)
    if h != w and bool((k % 2 == 1).any()):
        raise ValueError(f"rotate by 90 or 270 degrees needs square images, got {tuple(x.shape)}")
    i = torch.arange(h, device=x.device)[:, None]
    j = torch.arange(w, device=x.device)[None, :]
    # Source pixel (flat) of output pixel (i, j) for k = 0, 1, 2, 3 (odd k: h == w).
    maps = torch.stack(
        [i * w + j, j * w + (w - 1 - i), (h - 1 - i) * w + (w - 1 - j), (h - 1 - j) * w + i]
    ).view(4, h * w)
    index = maps[k].view(batch, 1, h * w).expand(batch, channels, h * w)
    return x.reshape(batch, channels, h * w).gather(2, index).view(batch, channels, h, w)


def translate(x: Tensor, shift: Tensor) -> Tensor:
    """Moves sample i's content by `shift[i]` = (dy, dx) pixels (down / right when positive),
    filling the uncovered border with zeros: the image placed at offset pad + shift in a
    zero canvas, cropped back at its centre."""
    return _shift(x, shift, fill="zero")


def pad_crop(x: Tensor, offset: Tensor, pad: int) -> Tensor:
    """RAD/DrQ's random crop: edge-pads by `pad`, then takes the original-size window whose
    top-left corner is at `offset[i]` = (y, x) in the padded image ((pad, pad) = identity).
    Edge padding rather than zeros keeps the border free of artificial black bars."""
    return _shift(x, pad - offset, fill="edge")


def _shift(x: Tensor, shift: Tensor, fill: Literal["zero", "edge"]) -> Tensor:
    """out[i, :, y, x] = x[i, :, y - dy_i, x - dx_i]; out-of-range sources read zero ('zero')
    or the nearest edge pixel ('edge'). One flat gather, no padded copy."""
    batch, channels, h, w = x.shape
    shift = shift.to(x.device, torch.long)
    rows = torch.arange(h, device=x.device) - shift[:, :1]  # (B, H) source rows
    cols = torch.arange(w, device=x.device) - shift[:, 1:]  # (B, W) source columns
    if fill == "zero":  # 0/1 per source row and column; zero fill = two broadcast multiplies
        row_in = ((rows >= 0) & (rows < h)).to(x.dtype)[:, None, :, None]
        col_in = ((cols >= 0) & (cols < w)).to(x.dtype)[:, None, None, :]
    rows, cols = rows.clamp(0, h - 1), cols.clamp(0, w - 1)
    index = (rows[:, :, None] * w + cols[:, None, :]).view(batch, 1, h * w)
    out = x.reshape(batch, channels, h * w).gather(2, index.expand(batch, channels, h * w))
    out = out.view(batch, channels, h, w)
    if fill == "zero":
        out.mul_(row_in).mul_(col_in)  # far cheaper than masked_fill_ with a (B, H, W) mask
    return out


def crop_resize(x: Tensor, scale: Tensor, corner: Tensor) -> Tensor:
    """Crops a square of side `scale[i]` * side (aspect kept) at `corner[i]` (fractions of the
    room around it, (y, x)) and resizes it back bilinearly (align_corners=False, edge
    clamped); scale 1 is the identity. Integer inputs are rounded back to their dtype."""
    batch, _, h, w = x.shape
    work = x if x.is_floating_point() else x.float()
    scale = scale.to(x.device, work.dtype)[:, None]
    corner = corner.to(x.device, work.dtype)
    # Sampling grid in grid_sample's normalized [-1, 1] coordinates: pixel centres scaled by s
    # about a centre that moves within +-(1 - s). Built separably (affine_grid's per-pixel
    # matmul is several times slower on CPU).
    ys = (torch.arange(h, device=x.device, dtype=work.dtype) * 2 + 1) / h - 1
    xs = (torch.arange(w, device=x.device, dtype=work.dtype) * 2 + 1) / w - 1
    gy = scale * ys + (2 * corner[:, :1] - 1) * (1 - scale)  # (B, H)
    gx = scale * xs + (2 * corner[:, 1:] - 1) * (1 - scale)  # (B, W)
    grid = torch.stack((gx[:, None, :].expand(batch, h, w), gy[:, :, None].expand(batch, h, w)), -1)
    out = F.grid_sample(work, grid, mode="bilinear", padding_mode="border", align_corners=False)
    if x.is_floating_point():
        return out
    # Border-padded bilinear is a convex combination of input pixels: no clamp needed.
    return out.round_().to(x.dtype)
