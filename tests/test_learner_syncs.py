"""RlsweepPPOLearner's update waits for the GPU a fixed number of times per update, not per
minibatch: each host sync (`.item()`, `bool(tensor)`, a copy to or from the host) drains the
GPU's queue and leaves it idle while Python catches up. Counted on the CPU by wrapping the
tensor methods that sync on a CUDA device. And the two pieces rewritten to drop RLlib's syncs,
`rllib_ppo_loss` and `apply_gradients`, against RLlib's own, number for number."""

import collections
import copy
import dataclasses
import traceback

import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

from rlsweep.spec.config import TrialConfig
from rlsweep.testing import NARROW_PPO

pytestmark = pytest.mark.rllib

# Tensor methods that copy to the host (and so wait for the device) when the tensor is on a GPU.
SYNCING = ("item", "tolist", "cpu", "numpy", "nonzero", "__bool__", "__float__", "__int__")
# Constructors: a tensor made from host data and sent to the GPU is a blocking copy.
CONSTRUCTORS = ("tensor", "as_tensor")


class SyncCounter:
    """Counts calls of `SYNCING` methods and `CONSTRUCTORS` by call site while active, less those
    of torch.optim: Adam keeps its step counts on the host by design (not capturable)."""

    def __init__(self, monkeypatch):
        self.counts: collections.Counter[str] = collections.Counter()
        self.active = False
        for name in SYNCING:
            monkeypatch.setattr(torch.Tensor, name, self._wrap(getattr(torch.Tensor, name), name))
        for name in CONSTRUCTORS:
            monkeypatch.setattr(torch, name, self._wrap(getattr(torch, name), f"torch.{name}"))

    def _wrap(self, original, name):
        def counted(*args, **kwargs):
            if self.active:
                self.active = False  # calls inside a counted call are its own business
                try:
                    stack = traceback.extract_stack()[:-1]
                    if not any("/torch/optim/" in f.filename for f in stack):
                        f = stack[-1]
                        self.counts[f"{name} at {f.filename}:{f.lineno}"] += 1
                finally:
                    self.active = True
            return original(*args, **kwargs)

        return counted

    def during(self, fn):
        self.counts.clear()
        self.active = True
        try:
            fn()
        finally:
            self.active = False
        return dict(self.counts)


@pytest.fixture(scope="module")
def setup():
    """A narrow PPO trial's config, a learner built from it (no Ray cluster) and one sample."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    from rlsweep.trial import algos

    torch.manual_seed(0)
    cfg = TrialConfig(**NARROW_PPO)
    runner = SingleAgentEnvRunner(config=algos.ppo_config(cfg))
    episodes = runner.sample(force_reset=True)
    yield cfg, runner, episodes
    runner.stop()


def build_learner(setup, **overrides):
    from rlsweep.trial import algos

    cfg, runner, _ = setup
    return algos.ppo_config(dataclasses.replace(setup[0], **overrides)).build_learner(
        env=runner.env
    )


def update(learner, episodes, cfg, minibatch_size):
    learner.update(
        episodes=copy.deepcopy(episodes),
        timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: cfg.effective_train_batch_size},
        num_epochs=cfg.num_epochs,
        minibatch_size=minibatch_size,
        shuffle_batch_per_epoch=True,
    )


@pytest.mark.parametrize("vf_clip_mode", ["loss", "ppo2"])
def test_host_syncs_do_not_grow_with_the_minibatches(setup, monkeypatch, vf_clip_mode):
    """The same update in 24 and in 48 minibatches (3 epochs of 256 env steps, minibatches of
    32 and 16) makes the same syncing calls: none is per minibatch. RLlib's own learner makes
    ~74 per minibatch here (two `isfinite(grad).all()` per parameter in apply_gradients, two
    host-made tensors in the PPO loss)."""
    cfg, _, episodes = setup
    learner = build_learner(setup, vf_clip_mode=vf_clip_mode)
    update(learner, episodes, cfg, 32)  # Adam's state and the metrics' first values
    counter = SyncCounter(monkeypatch)
    per_update = {
        n: counter.during(lambda n=n: update(learner, episodes, cfg, cfg.minibatch_size // n))
        for n in (1, 2)
    }
    assert per_update[1] == per_update[2]
    assert sum(per_update[1].values()) < 50, per_update[1]  # per update: GAE and the metrics


def test_the_ppo_loss_is_rllibs(setup):
    """`rllib_ppo_loss` against PPOTorchLearner.compute_loss_for_module on a real batch, with
    and without the loss mask and the KL term: the same loss and metrics, bit for bit."""
    _, _, episodes = setup
    for kl_coeff in (0.0, 0.3):
        learner = build_learner(setup, kl_coeff=kl_coeff)
        batch = learner.make_batch(TrainingData(episodes=copy.deepcopy(episodes)))
        batch = dict(batch.policy_batches[DEFAULT_MODULE_ID])
        config = learner.config.get_config_for_module(DEFAULT_MODULE_ID)
        assert config.use_kl_loss == (kl_coeff > 0)
        unmasked = {k: v for k, v in batch.items() if k != "loss_mask"}
        for b in (batch, unmasked):
            logged = []
            learner.metrics.log_dict = lambda d, logged=logged, **_: logged.append(d)
            losses = []
            for loss in (PPOTorchLearner.compute_loss_for_module, type(learner).rllib_ppo_loss):
                with torch.no_grad():
                    fwd_out = learner.module[DEFAULT_MODULE_ID].forward_train(b)
                    losses.append(
                        loss(
                            learner,
                            module_id=DEFAULT_MODULE_ID,
                            config=config,
                            batch=b,
                            fwd_out=fwd_out,
                        )
                    )
            assert torch.equal(*losses)
            rllib, ours = logged
            assert rllib.keys() == ours.keys()
            for key in rllib:
                assert torch.equal(rllib[key], ours[key]), key


def test_apply_gradients_is_rllibs(setup, caplog):
    """RlsweepPPOLearner.apply_gradients against TorchLearner's from the same weights, Adam
    state and gradients, a NaN and an inf planted in them: the same weights after the step
    (RLlib sets non-finite gradients to nan_to_num's), and the warning once per update."""
    learners = [build_learner(setup), build_learner(setup)]
    learners[1].module.set_state(learners[0].module.get_state())
    grads = []
    for p in learners[0].module[DEFAULT_MODULE_ID].parameters():
        g = torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()))
        grads.append(g)
    grads[0].view(-1)[0] = float("nan")
    grads[1].view(-1)[-1] = float("inf")
    for apply, learner in zip(
        (TorchLearner.apply_gradients, type(learners[1]).apply_gradients), learners, strict=True
    ):
        for _ in range(2):
            params = list(learner.module[DEFAULT_MODULE_ID].parameters())
            apply(learner, {p: g.clone() for p, g in zip(params, grads, strict=True)})
    for a, b in zip(
        learners[0].module[DEFAULT_MODULE_ID].parameters(),
        learners[1].module[DEFAULT_MODULE_ID].parameters(),
        strict=True,
    ):
        assert torch.equal(a, b)
    with caplog.at_level("WARNING", logger="rlsweep.trial.ppo_learner"):
        learners[1].warn_nonfinite_gradients()
        learners[1].warn_nonfinite_gradients()  # once: the flag is reset
    assert [r.message for r in caplog.records if r.name == "rlsweep.trial.ppo_learner"] == [
        "Gradients contained `nan/inf` values in this update: set to zero "
        "(torch_skip_nan_gradients False)."
    ]


def _grads(shapes, seed: int, scale: float = 1.0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g) * scale for shape in shapes]


@pytest.mark.parametrize(
    ("scale", "plant", "finite"),
    [(1.0, None, True), (1e-4, None, True), (1.0, float("nan"), False), (1.0, float("inf"), False)],
    ids=["clipped", "within-the-clip", "a-nan", "an-inf"],
)
def test_clip_by_global_norm_is_rllibs(scale, plant, finite):
    """The gradients and the global norm RLlib's clip_gradients gives (global_norm, clip 0.5),
    bit for bit, whether the norm is above the clip or below it, a NaN or an inf among them;
    and the finite flag."""
    from ray.rllib.utils.torch_utils import clip_gradients

    from rlsweep.trial.ppo_learner import clip_by_global_norm

    shapes = [(16, 3, 3, 3), (16,), (32, 16, 3, 3), (32,), (256, 15), (15,)]
    grads = _grads(shapes, seed=0, scale=scale)
    if plant is not None:
        grads[2].view(-1)[7] = plant
    theirs = {i: g.clone() for i, g in enumerate(grads)}
    rllib_norm = clip_gradients(theirs, grad_clip=0.5, grad_clip_by="global_norm")
    ours = [g.clone() for g in grads]
    norm, ok = clip_by_global_norm(ours, 0.5)
    assert torch.equal(norm, rllib_norm)
    for i, g in enumerate(ours):
        torch.testing.assert_close(g, theirs[i], rtol=0, atol=0, equal_nan=True)
    assert bool(ok) is finite
    if scale < 1:  # within the clip: untouched
        assert all(torch.equal(a, b) for a, b in zip(ours, grads, strict=True))


def test_the_gradient_step_is_rllibs(setup, caplog):
    """Clipping (postprocess_gradients_for_module) and the step (apply_gradients) of
    RlsweepPPOLearner against RLlib's Learner and TorchLearner from the same weights, Adam state
    and gradients, over two steps, a NaN in the second: the same weights, the same logged
    global norms, and the warning for the second step alone."""
    from ray.rllib.core.learner.learner import Learner

    learners = [build_learner(setup), build_learner(setup)]
    learners[1].module.set_state(learners[0].module.get_state())
    params = [list(lr.module[DEFAULT_MODULE_ID].parameters()) for lr in learners]
    shapes = [p.shape for p in params[0]]
    steps = [_grads(shapes, seed=1), _grads(shapes, seed=2)]
    steps[1][3].view(-1)[0] = float("nan")
    config = learners[0].config.get_config_for_module(DEFAULT_MODULE_ID)
    assert config.grad_clip and config.grad_clip_by == "global_norm"
    norms = []
    with caplog.at_level("WARNING", logger="rlsweep.trial.ppo_learner"):
        for step, grads in enumerate(steps):
            for k, (post, apply) in enumerate(
                [
                    (Learner.postprocess_gradients_for_module, TorchLearner.apply_gradients),
                    (type(learners[1]).postprocess_gradients_for_module, None),
                ]
            ):
                learner = learners[k]
                given = {p: g.clone() for p, g in zip(params[k], grads, strict=True)}
                clipped = post(
                    learner,
                    module_id=DEFAULT_MODULE_ID,
                    config=config,
                    module_gradients_dict=given,
                )
                (apply or type(learner).apply_gradients)(learner, clipped)
                logged = learner.metrics.peek(
                    (DEFAULT_MODULE_ID, "gradients_default_optimizer_global_norm")
                )
                norms.append(float(logged))
            learners[1].warn_nonfinite_gradients()
            ours = [r for r in caplog.records if r.name == "rlsweep.trial.ppo_learner"]
            assert len(ours) == step  # the warning after the NaN's step only
    assert norms[0] == norms[1] and norms[2] == norms[3]
    for a, b in zip(*params, strict=True):
        assert torch.equal(a, b)


def test_the_kl_coefficient_adapts_on_the_last_epochs_mean_kl(setup, monkeypatch):
    """As 2020's RLlib (its minibatch SGD's fetches, averaged over the last epoch), not on the
    last minibatch's KL (RLlib's new API stack): x1.5 above twice the target, x0.5 below half.
    The same update each time (same weights and permutations), with targets placed around the
    last epoch's mean KL and the last minibatch's."""
    cfg, _, episodes = setup
    cfg = dataclasses.replace(cfg, num_epochs=2)
    per_epoch = cfg.effective_train_batch_size // cfg.minibatch_size
    initial = build_learner(setup).module.get_state()
    kls = []
    loss = type(build_learner(setup)).rllib_ppo_loss

    def recorded(self, **kw):
        total = loss(self, **kw)
        kls.append(float(self._epoch_kls[kw["module_id"]][-1]))
        return total

    monkeypatch.setattr(type(build_learner(setup)), "rllib_ppo_loss", recorded)

    def coeff_after_update(target: float) -> float:
        learner = build_learner(setup, kl_coeff=0.2, kl_target=target, num_epochs=2)
        learner.module.set_state(initial)
        kls.clear()
        update(learner, episodes, cfg, cfg.minibatch_size)
        assert len(kls) == 2 * per_epoch and per_epoch > 1
        return float(learner.curr_kl_coeffs_per_module[DEFAULT_MODULE_ID])

    assert coeff_after_update(1e-12) == pytest.approx(0.3)  # every KL above twice it
    assert coeff_after_update(1e3) == pytest.approx(0.1)  # every KL below half of it
    epoch_mean, last = sum(kls[per_epoch:]) / per_epoch, kls[-1]
    assert epoch_mean != pytest.approx(last, rel=0.05)
    between = (epoch_mean + last) / 4  # twice it lies between the two KLs

    def rule(kl: float, target: float) -> float:
        return 0.3 if kl > 2 * target else 0.1 if kl < 0.5 * target else 0.2

    assert rule(epoch_mean, between) != rule(last, between)
    assert coeff_after_update(between) == pytest.approx(rule(epoch_mean, between))
    assert kls[-1] == last  # the same update again
