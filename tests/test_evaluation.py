import numpy as np
import torch

from rlsweep.envs import EnvConfig, ProcgenVectorEnv
from rlsweep.evaluation import evaluate, sampling_policy


def test_one_episode_per_env_on_unseen_levels():
    env = ProcgenVectorEnv(EnvConfig(game="maze", num_levels=50), 6, seed=4, split="test")
    policy = sampling_policy(lambda obs: torch.zeros(obs.shape[0], 15), seed=0)
    ev = evaluate(policy, env)
    assert ev.returns.shape == (6,) and ev.lengths.min() >= 1
    assert set(ev.returns.tolist()) <= {0.0, 10.0}
    assert ((ev.level_seeds < 0) | (ev.level_seeds >= 50)).all()
    assert ev.env_steps >= ev.lengths.max() * 6
    env.close()


def test_sampling_policy_is_seeded_and_follows_the_logits():
    logits = torch.tensor([[0.0, 20.0, 0.0]]).repeat(64, 1)
    act = sampling_policy(lambda obs: logits[: obs.shape[0]], seed=3)
    actions = act(np.zeros((64, 3, 64, 64), np.uint8))
    assert (actions == 1).mean() > 0.95
    uniform = lambda obs: torch.zeros(obs.shape[0], 15)  # noqa: E731
    a = sampling_policy(uniform, seed=5)(np.zeros((32, 3, 2, 2), np.uint8))
    b = sampling_policy(uniform, seed=5)(np.zeros((32, 3, 2, 2), np.uint8))
    assert (a == b).all() and len(set(a.tolist())) > 3
