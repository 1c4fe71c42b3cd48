import numpy as np
import pytest
import torch

from rlsweep.errors import ConfigError
from rlsweep.trial.models import (
    ImpalaActorCritic,
    ImpalaCNN,
    ModelConfig,
    bf16_weights_for_rollouts,
    max_pool,
    pinned_frames,
    sample_categorical,
)

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available(), reason="needs a GPU (make gpu-check runs it)"
        ),
    ),
]


def _obs(b=4, c=3):
    return torch.randint(0, 256, (b, c, 64, 64), dtype=torch.uint8)


@pytest.mark.parametrize(
    "cfg",
    [
        ModelConfig(),
        ModelConfig(widths=(32, 64, 64)),
        ModelConfig(downsample="conv"),
        ModelConfig(global_pool=True),
        ModelConfig(global_pool=True, relu_after_pool=True),
        ModelConfig(channels_last=False),
        ModelConfig(precision="bf16"),
        ModelConfig(precision="tf32"),
    ],
)
def test_actor_critic_shapes(cfg):
    net = ImpalaActorCritic((6, 64, 64), 15, cfg)
    logits, value = net(_obs(c=6))
    assert logits.shape == (4, 15) and value.shape == (4,)
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()


def test_dense_input_size_follows_pooling():
    flat = ImpalaCNN((3, 64, 64), ModelConfig())
    pooled = ImpalaCNN((3, 64, 64), ModelConfig(global_pool=True))
    assert flat.dense.in_features == 32 * 8 * 8  # three stride-2 stages: 64 -> 8
    assert pooled.dense.in_features == 32


def test_uint8_is_scaled_inside_the_model():
    net = ImpalaCNN((3, 64, 64), ModelConfig(channels_last=False))
    x = _obs()
    torch.testing.assert_close(net(x), net(x.float()))  # same input scale either way
    y = net.stages(x.float() / 255.0)
    torch.testing.assert_close(net(x), torch.relu(net.dense(torch.relu(y).flatten(1))))


def test_relu_after_pool_is_lars12llts_order_and_needs_the_pool():
    """global_pool: ReLU, then pool by default (Impoola's); relu_after_pool: pool, then ReLU
    (LARS12llt's Keras head), which computes another function. Without the pool, the flag
    changes nothing: flattening commutes with the ReLU."""
    torch.manual_seed(0)
    cfg = {"channels_last": False, "global_pool": True}
    before = ImpalaCNN((3, 64, 64), ModelConfig(**cfg))
    after = ImpalaCNN((3, 64, 64), ModelConfig(**cfg, relu_after_pool=True))
    after.load_state_dict(before.state_dict())
    x = _obs()
    y = before.stages(x.float() / 255.0)
    torch.testing.assert_close(before(x), torch.relu(before.dense(torch.relu(y).mean((2, 3)))))
    torch.testing.assert_close(after(x), torch.relu(after.dense(torch.relu(y.mean((2, 3))))))
    assert not torch.allclose(before(x), after(x))
    flat = ImpalaCNN((3, 64, 64), ModelConfig(channels_last=False))
    flat_after = ImpalaCNN((3, 64, 64), ModelConfig(channels_last=False, relu_after_pool=True))
    flat_after.load_state_dict(flat.state_dict())
    torch.testing.assert_close(flat(x), flat_after(x), rtol=0, atol=0)


def test_channels_last_gives_the_same_function():
    torch.manual_seed(0)
    a = ImpalaCNN((3, 64, 64), ModelConfig(channels_last=False))
    b = ImpalaCNN((3, 64, 64), ModelConfig(channels_last=True))
    b.load_state_dict(a.state_dict())
    assert b.stages[0].down[0].weight.is_contiguous(memory_format=torch.channels_last)
    x = _obs()
    torch.testing.assert_close(a(x), b(x), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("channels_last", [True, False])
def test_bf16_weights_for_rollouts_compute_what_autocast_computes(channels_last):
    """A rollout module's bf16 trunk with bf16 weights: bit for bit the fp32-weight trunk under
    autocast, before and after fp32 weights are loaded into it (the EnvRunner's weight sync)."""
    torch.manual_seed(0)
    cfg = ModelConfig(precision="bf16", channels_last=channels_last)
    learner = ImpalaActorCritic((3, 64, 64), 15, cfg)
    rollout = ImpalaActorCritic((3, 64, 64), 15, cfg)
    rollout.load_state_dict(learner.state_dict())
    bf16_weights_for_rollouts(rollout)
    assert {p.dtype for p in rollout.trunk.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in [*rollout.pi.parameters(), *rollout.vf.parameters()]} == {
        torch.float32
    }
    x = _obs(8)
    for _ in range(2):
        with torch.no_grad():
            for a, b in zip(learner(x), rollout(x), strict=True):
                assert a.dtype == b.dtype == torch.float32
                torch.testing.assert_close(a, b, atol=0, rtol=0)
        with torch.no_grad():  # an update, then the sync: fp32 weights into the bf16 trunk
            for p in learner.parameters():
                p.add_(0.01 * torch.randn_like(p))
        rollout.load_state_dict(learner.state_dict())
    fp32 = ImpalaActorCritic((3, 64, 64), 15, ModelConfig(precision="fp32"))
    bf16_weights_for_rollouts(fp32)
    assert {p.dtype for p in fp32.parameters()} == {torch.float32}  # only bf16 trunks


def test_downsample_variants_differ_in_structure():
    conv = ImpalaCNN((3, 64, 64), ModelConfig(downsample="conv"))
    assert isinstance(conv.stages[0].down, torch.nn.Conv2d)
    assert conv.stages[0].down.stride == (2, 2)


def _tf_same_max_pool(x: np.ndarray) -> np.ndarray:
    """TensorFlow's 3x3, stride-2 max-pool with padding 'SAME', from its documented rule: out =
    ceil(n / 2) per side, (out - 1) * 2 + 3 - n pixels of padding in all, half of them (rounded
    down) before; padded pixels never win."""
    for axis in (-2, -1):
        n = x.shape[axis]
        out = -(-n // 2)
        total = max((out - 1) * 2 + 3 - n, 0)
        pad = [(0, 0)] * x.ndim
        pad[axis] = (total // 2, total - total // 2)
        x = np.pad(x, pad, constant_values=-np.inf)
        windows = [x.take(range(i, i + 2 * out - 1, 2), axis=axis) for i in range(3)]
        x = np.maximum.reduce(windows)
    return x


@pytest.mark.parametrize("size", [(64, 64), (32, 32), (16, 16), (7, 7), (9, 8)])
def test_tf_same_pooling_is_tensorflows_and_torch_pooling_is_cleanrls(size):
    x = torch.randn(2, 3, *size)
    tf_same = max_pool(size, "tf_same")(x)
    np.testing.assert_array_equal(tf_same.numpy(), _tf_same_max_pool(x.numpy()))
    cleanrl = torch.nn.MaxPool2d(3, stride=2, padding=1)(x)  # ppo_procgen.py's ConvSequence
    torch.testing.assert_close(max_pool(size, "torch")(x), cleanrl, rtol=0, atol=0)
    assert tf_same.shape == cleanrl.shape
    assert torch.equal(tf_same, cleanrl) == (size == (7, 7))  # they differ on an even side only


def test_pool_padding_is_each_stages_and_changes_the_function_not_the_weights():
    torch.manual_seed(0)
    tf_same = ImpalaCNN((3, 64, 64), ModelConfig())
    cleanrl = ImpalaCNN((3, 64, 64), ModelConfig(pool_padding="torch"))
    cleanrl.load_state_dict(tf_same.state_dict())
    pools = [stage.down[1] for stage in tf_same.stages]
    assert [p.padding for p in pools] == [(0, 0)] * 3 and all(p.ceil_mode for p in pools)
    x = _obs()
    assert tf_same(x).shape == cleanrl(x).shape and not torch.allclose(tf_same(x), cleanrl(x))


def _layers(module):
    return [m for m in module.modules() if isinstance(m, torch.nn.Conv2d | torch.nn.Linear)]


def _is_glorot_uniform(layer):
    """Weights inside Glorot's bound with a uniform's spread over it, and a zero bias."""
    w = layer.weight.detach()
    fan_in, fan_out = w[0].numel(), w.shape[0] * w[0, 0].numel()
    bound = (6 / (fan_in + fan_out)) ** 0.5
    spread = w.std().item() / (bound / 3**0.5)
    return w.abs().max() <= bound and 0.9 < spread < 1.1 and not layer.bias.any()


def _is_orthogonal_head(layer, gain):
    w = layer.weight.detach().double()
    eye = torch.eye(w.shape[0], dtype=torch.float64)
    return torch.allclose(w @ w.T, gain**2 * eye, atol=1e-6 * gain**2) and not layer.bias.any()


@pytest.mark.parametrize("init", ["glorot", "torch", "keras"])
def test_weights_start_as_the_reference_of_their_init(init):
    """glorot: train-procgen's (TF1 layers' Glorot-uniform trunk, zero biases; baselines' `fc`
    heads, orthogonal with gains 0.01 and 1); torch: CleanRL's (nn.Conv2d and nn.Linear as built,
    the same heads); keras: LARS12llt's Keras model (Glorot-uniform everywhere, zero biases)."""
    torch.manual_seed(0)
    net = ImpalaActorCritic((6, 64, 64), 15, ModelConfig(widths=(32, 64, 64), init=init))
    trunk = _layers(net.trunk)
    assert len(trunk) == 3 * 5 + 1  # a stage: its conv and two blocks of two; then the dense
    if init == "torch":
        for layer in trunk:  # kaiming_uniform(a=sqrt(5)) and its bias: both within 1/sqrt(fan_in)
            bound = layer.weight[0].numel() ** -0.5
            assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound
            assert layer.bias.any() and not _is_glorot_uniform(layer)
    else:
        assert all(_is_glorot_uniform(layer) for layer in trunk)
    if init == "keras":
        assert _is_glorot_uniform(net.pi) and _is_glorot_uniform(net.vf)
    else:
        assert _is_orthogonal_head(net.pi, 0.01) and _is_orthogonal_head(net.vf, 1.0)


def test_center_inputs_centres_the_pixels_before_the_first_conv():
    """(x - 128) / 255, as LARS12llt's model feeds its convolutions; x / 255 without."""
    torch.manual_seed(0)
    centred = ImpalaCNN((3, 64, 64), ModelConfig(channels_last=False, center_inputs=True))
    plain = ImpalaCNN((3, 64, 64), ModelConfig(channels_last=False))
    plain.load_state_dict(centred.state_dict())
    x = _obs()
    y = centred.stages((x.float() - 128) / 255)
    torch.testing.assert_close(centred(x), torch.relu(centred.dense(torch.relu(y).flatten(1))))
    assert not torch.allclose(centred(x), plain(x))


def test_initial_policy_is_near_uniform():
    net = ImpalaActorCritic((3, 64, 64), 15, ModelConfig())
    probs = torch.softmax(net(_obs())[0], -1)
    assert (probs - 1 / 15).abs().max() < 0.02


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"widths": []}, "widths: got []"),
        ({"widths": [16, -1]}, "widths: got [16, -1]"),
        ({"dense": 0}, "dense: got 0; allowed: an integer >= 1"),
        (
            {"precision": "fp16"},
            "precision: got 'fp16' (did you mean 'bf16'?); allowed: fp32, tf32, bf16",
        ),
    ],
)
def test_model_config_errors(kwargs, message):
    with pytest.raises(ConfigError) as e:
        ModelConfig(**kwargs)
    assert str(e.value).startswith(message)


def test_pinned_frames_copies_the_frames_into_the_given_buffer():
    frames = torch.randint(0, 256, (4, 64, 64, 3), dtype=torch.uint8)
    out = torch.zeros_like(frames)
    assert pinned_frames(frames, out=out) is out
    assert torch.equal(out, frames)
    strided = frames.permute(0, 3, 1, 2)  # a view, not contiguous: numpy copies it as it is
    out = torch.zeros(strided.shape, dtype=torch.uint8)
    assert torch.equal(pinned_frames(strided, out=out), strided)


@pytest.mark.parametrize("device", DEVICES)
def test_sample_categorical_draws_what_torchs_categorical_draws(device):
    """Given the generator where RLlib's TorchCategorical (torch's Categorical) would draw its
    noise, the same actions and log-probabilities, value for value; over many draws, each
    action as often as its probability says."""
    from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical

    g = torch.Generator(device).manual_seed(0)
    logits = torch.randn(64, 15, generator=g, device=device) * 3
    logits[0] = float("-inf")  # an action that can never be drawn
    logits[0, 3] = 0.0
    for seed in range(5):
        torch.manual_seed(seed)
        dist = TorchCategorical.from_logits(logits)
        expected = dist.sample()
        torch.manual_seed(seed)
        actions, logp = sample_categorical(logits)  # the noise drawn as multinomial draws it
        assert torch.equal(actions, expected)
        assert torch.equal(logp, dist.logp(expected))
        torch.manual_seed(seed)  # the noise drawn beforehand (a CUDA graph's input)
        noise = torch.empty_like(logits).exponential_()
        assert torch.equal(sample_categorical(logits, noise)[0], expected)
    assert actions[0] == 3 and logp[0] == 0.0

    rows = torch.zeros(20_000, 3, device=device) + torch.tensor([0.0, 1.0, 2.0], device=device)
    actions, _ = sample_categorical(rows)
    freq = torch.bincount(actions, minlength=3).float() / len(rows)
    torch.testing.assert_close(freq, rows[0].softmax(-1), atol=0.015, rtol=0)

    with pytest.raises(ValueError, match="not shaped and typed as the logits"):
        sample_categorical(logits, torch.ones(64, 15, dtype=torch.float64, device=device))
