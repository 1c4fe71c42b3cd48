import pytest
import torch

from rlsweep.errors import ConfigError
from rlsweep.spec.subconfigs import AUGMENTATIONS
from rlsweep.trial.augment import (
    TRANSFORMS,
    AugmentConfig,
    _apply_one,
    apply_params,
    augment,
    crop_resize,
    flip,
    pad_crop,
    rotate,
    sample_params,
    translate,
)


def images(batch: int = 8, frames: int = 1, size: int = 64, seed: int = 0) -> torch.Tensor:
    """Random uint8 noise: no symmetry, so any non-identity transform changes it."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (batch, 3 * frames, size, size), dtype=torch.uint8, generator=g)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def changed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(B,) bool: which samples differ."""
    return (a != b).flatten(1).any(1)


def test_names():
    assert AUGMENTATIONS == (
        "none",
        "flip",
        "rotate",
        "crop_resize",
        "translate",
        "pad_crop",
        "all",
    )
    assert set(TRANSFORMS) == set(AUGMENTATIONS) - {"none", "all"}


def test_flip_matches_torch_flip():
    x = images()
    assert torch.equal(flip(x), torch.flip(x, dims=[-1]))
    out = augment(x, AugmentConfig("flip", augment_p=1.0), gen())
    assert torch.equal(out, torch.flip(x, dims=[-1]))


def test_rotate_matches_rot90_per_sample():
    x = images(batch=6)
    k = torch.tensor([1, 2, 3, 1, 3, 2])
    out = rotate(x, k)
    for i in range(6):
        assert torch.equal(out[i], torch.rot90(x[i], int(k[i]), dims=(-2, -1)))
    assert torch.equal(rotate(x, 1), torch.rot90(x, 1, dims=(-2, -1)))


def test_rotate_through_augment_uses_the_drawn_turns():
    x = images(batch=32)
    cfg = AugmentConfig("rotate", augment_p=1.0)
    params = sample_params(cfg, 32, gen(3))
    assert set(params.quarter_turns.tolist()) == {1, 2, 3}
    out = augment(x, cfg, gen(3))
    for i in range(32):
        expected = torch.rot90(x[i], int(params.quarter_turns[i]), dims=(-2, -1))
        assert torch.equal(out[i], expected)


def test_rotate_refuses_quarter_turns_of_non_square_images():
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.uint8).view(2, 3, 4, 5)
    assert torch.equal(rotate(x, torch.tensor([2, 2])), torch.rot90(x, 2, dims=(-2, -1)))
    with pytest.raises(ValueError, match="square"):
        rotate(x, torch.tensor([1, 2]))


def shifted(img: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """Reference translate of one (C, H, W) image, by slicing."""
    out = torch.zeros_like(img)
    h, w = img.shape[-2:]
    ys, yd = slice(max(0, -dy), min(h, h - dy)), slice(max(0, dy), min(h, h + dy))
    xs, xd = slice(max(0, -dx), min(w, w - dx)), slice(max(0, dx), min(w, w + dx))
    out[:, yd, xd] = img[:, ys, xs]
    return out


def test_translate_shifts_content_by_the_offset_with_zero_fill():
    x = images(batch=4)
    shift = torch.tensor([[3, -2], [-4, 4], [0, 0], [1, 0]])
    out = translate(x, shift)
    for i in range(4):
        dy, dx = shift[i].tolist()
        assert torch.equal(out[i], shifted(x[i], dy, dx))
    # Spot-check the convention: content moves down / right for positive shifts.
    assert torch.equal(out[0, :, 3:, :62], x[0, :, :61, 2:])
    assert (out[0, :, :3] == 0).all() and (out[0, :, :, 62:] == 0).all()


def test_translate_through_augment_uses_the_drawn_offsets():
    x = images(batch=16)
    cfg = AugmentConfig("translate", augment_p=1.0, augment_pad=4)
    params = sample_params(cfg, 16, gen(1))
    shift = params.offset - cfg.augment_pad
    assert shift.min() >= -4 and shift.max() <= 4
    out = augment(x, cfg, gen(1))
    for i in range(16):
        assert torch.equal(out[i], shifted(x[i], *shift[i].tolist()))


def test_pad_crop_at_pad_pad_is_identity():
    x = images()
    offset = torch.full((8, 2), 5)
    assert torch.equal(pad_crop(x, offset, pad=5), x)


def test_pad_crop_is_an_edge_padded_crop():
    x = images(batch=3)
    pad = 4
    offset = torch.tensor([[0, 0], [8, 3], [2, 7]])
    out = pad_crop(x, offset, pad)
    # Reference: explicit edge padding (via index clamping), then slicing the window.
    idx = torch.arange(-pad, 64 + pad).clamp(0, 63)
    padded = x[:, :, idx][:, :, :, idx]
    for i in range(3):
        oy, ox = offset[i].tolist()
        assert torch.equal(out[i], padded[i, :, oy : oy + 64, ox : ox + 64])


def test_crop_resize_scale_one_is_identity():
    x = images()
    for corner in (torch.zeros(8, 2), torch.rand(8, 2, generator=gen())):
        assert torch.equal(crop_resize(x, torch.ones(8), corner), x)
    assert torch.equal(augment(x, AugmentConfig("crop_resize", augment_scale_min=1.0), gen()), x)


def test_crop_resize_zooms_into_the_chosen_corner():
    # Top-left quadrant 200, rest 0: a half-side crop at the top-left corner fills the frame
    # (only the last row / column blends with the neighbouring pixels, as bilinear does).
    x = torch.zeros(2, 3, 64, 64, dtype=torch.uint8)
    x[:, :, :32, :32] = 200
    corner = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    out = crop_resize(x, torch.full((2,), 0.5), corner)
    assert (out[0, :, :63, :63] == 200).all()
    assert (out[1, :, 1:, 1:] == 0).all()  # bottom-right quadrant, first row / column blends


def test_p_zero_is_identity_and_p_one_changes_every_sample():
    x = images(batch=64)
    for name in AUGMENTATIONS:
        assert torch.equal(augment(x, AugmentConfig(name, augment_p=0.0), gen()), x)
    for name in ("flip", "rotate", "crop_resize"):
        out = augment(x, AugmentConfig(name, augment_p=1.0), gen())
        assert changed(out, x).all(), name
    for name in ("translate", "pad_crop"):
        # A drawn offset of (pad, pad) is a zero shift; every other draw changes the sample.
        cfg = AugmentConfig(name, augment_p=1.0, augment_pad=2)
        params = sample_params(cfg, 64, gen())
        moved = (params.offset != cfg.augment_pad).any(1)
        assert moved.sum() > 50
        assert torch.equal(changed(augment(x, cfg, gen()), x), moved), name


def test_intermediate_p_augments_exactly_the_drawn_samples():
    x = images(batch=256)
    cfg = AugmentConfig("flip", augment_p=0.3)
    applied = sample_params(cfg, 256, gen(7)).op >= 0
    assert 40 < applied.sum() < 120
    out = augment(x, cfg, gen(7))
    assert torch.equal(changed(out, x), applied)
    assert torch.equal(out[applied], x[applied].flip(-1))
    assert torch.equal(out[~applied], x[~applied])


@pytest.mark.parametrize("name", AUGMENTATIONS)
def test_every_frame_of_a_stack_gets_the_same_transform(name):
    frames = [images(batch=32, seed=s) for s in (1, 2)]
    stack = torch.cat(frames, dim=1)  # (B, 6, H, W), oldest frame first
    cfg = AugmentConfig(name, augment_p=0.7)
    params = sample_params(cfg, 32, gen(5))
    out = apply_params(stack, params)
    assert torch.equal(out, augment(stack, cfg, gen(5)))
    for f, frame in enumerate(frames):
        assert torch.equal(out[:, 3 * f : 3 * f + 3], apply_params(frame, params))
    # A stack of two identical frames stays two identical frames.
    same = augment(torch.cat([frames[0], frames[0]], dim=1), cfg, gen(5))
    assert torch.equal(same[:, :3], same[:, 3:])


@pytest.mark.parametrize("name", AUGMENTATIONS)
def test_shape_dtype_and_device_preserved_and_input_untouched(name):
    x = images(batch=16, frames=2)
    before = x.clone()
    out = augment(x, AugmentConfig(name, augment_p=0.8), gen())
    assert out.shape == x.shape and out.dtype == torch.uint8 and out.device == x.device
    assert torch.equal(x, before)
    xf = x.float() / 255
    outf = augment(xf, AugmentConfig(name, augment_p=0.8), gen())
    assert outf.shape == xf.shape and outf.dtype == torch.float32


@pytest.mark.parametrize("name", AUGMENTATIONS)
def test_deterministic_given_the_generator_seed(name):
    x = images(batch=64, frames=2)
    cfg = AugmentConfig(name, augment_p=0.9)
    assert torch.equal(augment(x, cfg, gen(11)), augment(x, cfg, gen(11)))
    if name != "none":
        assert not torch.equal(augment(x, cfg, gen(11)), augment(x, cfg, gen(12)))


def test_all_uses_every_transform_and_applies_each_draw():
    x = images(batch=200)
    cfg = AugmentConfig("all", augment_p=1.0, augment_pad=3, augment_scale_min=0.6)
    params = sample_params(cfg, 200, gen(2))
    assert set(params.op.tolist()) == set(range(len(TRANSFORMS)))
    out = augment(x, cfg, gen(2))
    for i in range(200):
        name = TRANSFORMS[int(params.op[i])]
        expected = _apply_one(name, x[i : i + 1], params.take(torch.tensor([i])))
        assert torch.equal(out[i : i + 1], expected), (i, name)


def test_default_config_is_valid_and_off():
    cfg = AugmentConfig()
    assert cfg.augment == "none"
    x = images()
    assert augment(x, cfg, gen()) is x


@pytest.mark.parametrize(
    ("kwargs", "key", "message"),
    [
        (
            {"augment": "cutout"},
            "augment",
            "got 'cutout'; allowed: none, flip, rotate, crop_resize, translate, pad_crop, all",
        ),
        ({"augment_p": 1.5}, "augment_p", "got 1.5; allowed: a number in [0, 1]"),
        ({"augment_p": -0.1}, "augment_p", "got -0.1; allowed: a number in [0, 1]"),
        ({"augment_p": True}, "augment_p", "got True; allowed: a number in [0, 1]"),
        (
            {"augment_p": "0.5"},
            "augment_p",
            "got '0.5' (a string, in quotes; unquoted, 0.5 is allowed); "
            "allowed: a number in [0, 1]",
        ),
        ({"augment_pad": 0}, "augment_pad", "got 0; allowed: an integer >= 1"),
        ({"augment_pad": 2.5}, "augment_pad", "got 2.5; allowed: an integer >= 1"),
        ({"augment_pad": True}, "augment_pad", "got True; allowed: an integer >= 1"),
        ({"augment_scale_min": 0}, "augment_scale_min", "got 0; allowed: a number in (0, 1]"),
        ({"augment_scale_min": 1.2}, "augment_scale_min", "got 1.2; allowed: a number in (0, 1]"),
        ({"augment_scale_min": None}, "augment_scale_min", "got None; allowed: a number in (0, 1]"),
    ],
)
def test_bad_config_values(kwargs, key, message):
    with pytest.raises(ConfigError) as info:
        AugmentConfig(**kwargs)
    assert info.value.path == key
    assert info.value.message == message
    assert str(info.value) == f"{key}: {message}"


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        AugmentConfig().augment_p = 0.5  # type: ignore[misc]
