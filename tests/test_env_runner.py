"""rlsweep.trial.env_runner: every trial samples with BatchedEnvRunner (a GPU trial without remote
EnvRunners with its CentralInferenceEnvRunner, in its own process), and the batched loop samples
what RLlib's own loop samples: the same episodes, chunk for chunk and value for value, the same
metrics and callbacks (`rllib`: real RLlib on real Procgen, no Ray cluster)."""

from typing import Any

import numpy as np
import pytest
import torch
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.utils.metrics import ENV_STEP_TIMER, RLMODULE_INFERENCE_TIMER

from rlsweep.spec.config import TrialConfig
from rlsweep.testing import EPSILON_GREEDY_DQN, NARROW_PPO
from rlsweep.trial.algos import algorithm_config
from rlsweep.trial.env_runner import BatchedEnvRunner, CentralInferenceEnvRunner
from rlsweep.trial.models import ImpalaCNN

# Leaper and 16 envs: random-policy episodes end and restart within the 8 x 16 x 16 sampled
# steps, some in the same step (their callbacks then come in env order).
SMALL = NARROW_PPO
DQN_SMALL = dict(SMALL, **EPSILON_GREEDY_DQN)


@pytest.mark.rllib
def test_a_gpu_trial_samples_in_its_process_through_rllibs_env_runner():
    gpu = TrialConfig(
        num_gpus=0.5,
        num_cpus=1,
        num_envs_per_env_runner=2,
        rollout_length=8,
        minibatch_size=16,
        env_groups=2,  # double-buffered (opt-in), one env per group
    )
    c = algorithm_config(gpu)
    assert c.env_runner_cls is CentralInferenceEnvRunner and c.num_env_runners == 0
    assert (c.num_gpus_per_learner, c.env_config["envpool_threads"]) == (0.5, 1)
    assert c.env_config["env_groups"] == 2
    remote = algorithm_config(TrialConfig(num_gpus=0.5, num_env_runners=2))
    assert remote.env_runner_cls is BatchedEnvRunner
    assert (remote.num_env_runners, remote.num_gpus_per_learner) == (2, 0.5)
    assert algorithm_config(TrialConfig()).env_runner_cls is BatchedEnvRunner
    # The GPU trial's runner, on the CPU: the batched loop, the module on the learner's device.
    runner = CentralInferenceEnvRunner(config=c.learners(num_gpus_per_learner=0))
    try:
        assert runner.batched_loop_applies()
        episodes = runner.sample(num_timesteps=16)
        assert sum(len(e) for e in episodes) >= 16
        assert next(runner.module.parameters()).device.type == "cpu"
    finally:
        runner.stop()


class _Ends(RLlibCallback):
    """Records the episode callbacks in the order they come, with what each saw."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int, int, int]] = []

    def on_episode_start(self, *, episode, env_index, **kwargs) -> None:
        self.calls.append(("start", env_index, episode.t, len(episode)))

    def on_episode_end(self, *, episode, env_index, **kwargs) -> None:
        self.calls.append(("end", env_index, episode.t, len(episode)))


class _Steps(_Ends):
    def on_episode_step(self, *, episode, env_index, **kwargs) -> None:
        self.calls.append(("step", env_index, episode.t, len(episode)))


def _runner(cls: type, cfg: TrialConfig, callbacks: type = _Ends) -> SingleAgentEnvRunner:
    config = algorithm_config(cfg).copy(copy_frozen=False).callbacks(callbacks)
    torch.manual_seed(0)  # module initialization
    return cls(config=config)


def _state(episode: Any) -> dict[str, Any]:
    """All an episode holds (lookback buffers, flags, times' presence), ids aside."""
    state = episode.get_state()
    state.pop("id_")
    for k in ("_start_time", "_last_step_time"):
        state[k] = state[k] is not None
    return state


def _assert_equal(a: Any, b: Any, where: str, rtol: float = 0.0) -> None:
    """Equal, value for value; with `rtol`, floats within it."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            _assert_equal(a[k], b[k], f"{where}.{k}", rtol)
    elif isinstance(a, list | tuple) and not (a and isinstance(a[0], np.generic)):
        assert isinstance(b, list | tuple) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_equal(x, y, f"{where}[{i}]", rtol)
    else:
        assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
        if rtol and np.issubdtype(np.asarray(a).dtype, np.floating):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-7, err_msg=where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)


def _samples(runner: SingleAgentEnvRunner, explore: bool) -> tuple[list, list, dict]:
    torch.manual_seed(1)  # action sampling
    episodes, ids = [], []
    for _ in range(8):
        for e in runner.sample(explore=explore):
            episodes.append(_state(e))
            ids.append(e.id_)
    # Chunks of one episode share its id: the same pattern of ids in both runs.
    first_seen = {i: n for n, i in reversed(list(enumerate(ids)))}
    metrics = runner.get_metrics()
    return episodes, [first_seen[i] for i in ids], metrics


def _counts(metrics: dict[str, Any]) -> dict[str, Any]:
    """The sampled-steps, episode and return metrics (timers aside)."""
    keep = ("num_", "episode_return", "episode_len", "agent_episode", "module_episode")
    return {k: v for k, v in metrics.items() if k.startswith(keep) and "throughput" not in k}


@pytest.mark.rllib
@pytest.mark.parametrize(
    ("overrides", "explore"),
    [
        (SMALL, True),
        (SMALL, False),
        (DQN_SMALL, True),
        (dict(SMALL, precision="bf16"), True),
        # Envpools stepped in turn, one forward per group: on the CPU torch draws a categorical
        # sample's numbers row by row, so the groups' forwards sample what RLlib's one forward
        # over all envs samples (DQN's epsilon-greedy draws per column: not so). A forward
        # over fewer rows may round differently (CPU kernels block by row count): the module's
        # outputs then agree within 1e-5.
        (dict(SMALL, env_groups=2), True),
        (dict(SMALL, env_groups=3), False),
    ],
    ids=[
        "ppo-explore",
        "ppo-greedy",
        "dqn-epsilon-greedy",
        "ppo-bf16-weights",
        "ppo-two-groups",
        "ppo-three-groups-greedy",
    ],
)
def test_the_batched_loop_samples_what_rllibs_loop_samples(overrides, explore):
    cfg = TrialConfig(**overrides)
    ours, rllibs = _runner(BatchedEnvRunner, cfg), _runner(SingleAgentEnvRunner, cfg)
    try:
        assert ours.batched_loop_applies()
        trunks = [m for m in ours.module.modules() if isinstance(m, ImpalaCNN)]
        bf16 = {p.dtype for m in trunks for p in m.parameters()} == {torch.bfloat16}
        assert bf16 == (cfg.precision == "bf16")  # the same numbers as RLlib's autocast below
        a, b = _samples(ours, explore), _samples(rllibs, explore)
        assert len(a[0]) == len(b[0])
        if explore:  # (the greedy policy may stand still for all 128 steps)
            assert any(s["is_terminated"] for s in a[0])  # chunks that end and restart
        _assert_equal(a[0], b[0], "episodes", rtol=1e-5 if cfg.env_groups > 1 else 0.0)
        assert a[1] == b[1]
        assert _counts(a[2]) == _counts(b[2]) and _counts(a[2])
        (calls,) = [c.calls for c in ours.callback_objects]
        assert calls == rllibs._callbacks[0].calls  # (RLlib keeps them private)
        assert {c[0] for c in calls} == {"start", "end"} if explore else {"start"}
    finally:
        ours.stop()
        rllibs.stop()


@pytest.mark.rllib
def test_rllibs_loop_runs_where_the_batched_one_would_differ():
    cfg = TrialConfig(**SMALL)
    runner = _runner(BatchedEnvRunner, cfg, callbacks=_Steps)  # a per-step callback
    try:
        assert not runner.batched_loop_applies()
        runner.sample(num_timesteps=8)
        assert "step" in {c[0] for c in runner.callback_objects[0].calls}
    finally:
        runner.stop()
    runner = _runner(BatchedEnvRunner, cfg)
    try:
        episodes = runner.sample(num_episodes=1)  # whole episodes: RLlib's loop
        assert episodes[0].is_done
        random = runner.sample(num_timesteps=8, random_actions=True)
        assert "action_logp" not in random[0].extra_model_outputs
        runner.sample(num_timesteps=8)  # the batched loop logs RLlib's timers as RLlib's does
        metrics = runner.get_metrics()
        assert metrics[ENV_STEP_TIMER] > 0 and metrics[RLMODULE_INFERENCE_TIMER] > 0
    finally:
        runner.stop()


@pytest.mark.rllib
def test_remote_runners_of_different_trial_seeds_play_levels_of_their_own():
    """RLlib seeds EnvRunner k with `seed + k`: runner 2 of trial seed 0 played runner 1 of
    seed 1's levels, with its RNGs, so the seeds a sweep's statistics take as independent were
    not. Each remote runner draws from a stream of its own; the local one keeps the trial seed
    (every trial without remote runners samples as before)."""
    from rlsweep.envs.vector_env import ProcgenVectorEnv

    played = {}
    for seed in (0, 1):
        cfg = TrialConfig(**dict(SMALL, num_envs_per_env_runner=4, seed=seed))
        for index in (0, 1, 2):
            runner = BatchedEnvRunner(config=algorithm_config(cfg), worker_index=index)
            try:
                runner.sample(num_timesteps=4)
                played[seed, index] = tuple(runner.env.unwrapped.level_seeds.tolist())
            finally:
                runner.stop()
    assert len(set(played.values())) == 6, played
    env = ProcgenVectorEnv(cfg.env_config(), num_envs=4, seed=1)
    env.reset()
    assert played[1, 0] == tuple(env.level_seeds.tolist())  # the local runner: the trial seed
    env.close()
