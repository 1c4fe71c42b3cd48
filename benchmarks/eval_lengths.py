"""How long an evaluation of an untrained policy lasts, against the bound `rlsweep plan` counts.

An evaluation (`rlsweep.trial.evaluation.evaluate`) plays one episode in each of eval_episodes
envs per split, the splits in lockstep, until the last of them ends; `rlsweep plan` counts
every evaluation at the game's time limit. This runs the trial's own evaluation envs and
evaluator under a uniform random policy (an untrained policy's stand-in: no network), or
with `--network` under an untrained trial's own policy (its default network on this CPU, built
by RLlib as a trial's is), and prints, per game: the lockstep steps each seed's evaluation
took beside that limit; the env steps its envs played (each until its episode ended) as a
share of those of every env stepped until its split's longest episode ended (the evaluator
before it stopped finished envs: `ProcgenVectorEnv.step_rows`); with `--network`, each
evaluation's wall and CPU seconds.

    python benchmarks/eval_lengths.py                      # every game, easy, seeds 0-2
    python benchmarks/eval_lengths.py --games bigfish --seeds 0 1 2 3 4 --eval-episodes 32
    python benchmarks/eval_lengths.py --games bigfish coinrun --seeds 0 1 --network
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator

import numpy as np

from rlsweep.envs import procgen
from rlsweep.spec.config import TrialConfig
from rlsweep.trial.evaluation import (
    EvalResult,
    Policy,
    evaluate,
    evaluation_envs,
    sampling_policy,
    steps_taken,
)


def random_evaluation(
    game: str, mode: str, seed: int, episodes: int, num_levels: int, policy: Policy | None = None
) -> dict[str, EvalResult]:
    """One evaluation of a trial (`game`, `seed`) under `policy`, or a uniform random one."""
    cfg = TrialConfig(
        game=game, distribution_mode=mode, num_levels=num_levels, seed=seed,
        eval_episodes=episodes, num_cpus=2,
    )  # fmt: skip
    envs = evaluation_envs(cfg)
    n = int(envs["train"].single_action_space.n)
    rng = np.random.default_rng(seed)
    played = evaluate(policy or (lambda obs, active: rng.integers(0, n, len(obs))), envs)
    for env in envs.values():
        env.close()
    return played


@contextlib.contextmanager
def untrained_policies(game: str, mode: str) -> Iterator[Callable[[int], Policy]]:
    """seed -> an untrained trial's sampling policy: its default network, built by RLlib on
    this CPU as a trial's is (in a local Ray), drawing as the trial's evaluation draws."""
    from rlsweep.run.session import ray_session
    from rlsweep.trial import algos
    from rlsweep.trial.trainable import policy_logits

    cfg = TrialConfig(
        game=game,
        distribution_mode=mode,
        num_envs_per_env_runner=8,
        rollout_length=16,
        minibatch_size=128,
        num_cpus=2,
    )  # fmt: skip: only the network matters; a small rollout builds fast
    with ray_session(address=None, num_cpus=2, jemalloc=False, dashboard=None):
        algo = algos.build_algorithm(cfg)
        logits = policy_logits(algo, cfg.minibatch_size)
        try:
            yield lambda seed: sampling_policy(logits, seed)
        finally:
            algo.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", nargs="+", default=list(procgen.GAMES))
    p.add_argument("--mode", default="easy")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--eval-episodes", type=int, default=32, help="per split (the default's)")
    p.add_argument("--num-levels", type=int, default=200)
    p.add_argument("--network", action="store_true", help="an untrained trial's own policy")
    args = p.parse_args()
    start = time.monotonic()
    print(
        f"{'game':10} {'limit':>6}  steps per evaluation (seeds {args.seeds})  longest/limit"
        "  env steps played" + ("  s per evaluation (wall, CPU)" if args.network else "")
    )
    for game in args.games:
        limit = procgen.max_episode_steps(game, args.mode)
        policies = (
            untrained_policies(game, args.mode)
            if args.network
            else contextlib.nullcontext(lambda seed: None)
        )
        evaluations, timed = [], []
        with policies as policy_for:
            for s in args.seeds:
                wall, cpu = time.monotonic(), time.process_time()
                evaluations.append(
                    random_evaluation(
                        game, args.mode, s, args.eval_episodes, args.num_levels, policy_for(s)
                    )
                )
                timed.append(f"{time.monotonic() - wall:.1f}, {time.process_time() - cpu:.1f}")
        steps = [steps_taken(played) for played in evaluations]
        splits = [ev for played in evaluations for ev in played.values()]
        lockstep = sum(len(ev.lengths) * ev.steps for ev in splits)
        share = sum(ev.env_steps for ev in splits) / lockstep
        listed = ", ".join(f"{s:,}" for s in steps)
        line = f"{game:10} {limit:6,}  {listed:34}  {max(steps) / limit:13.2f}  {share:16.2f}"
        print(line + (f"  {'; '.join(timed)}" if args.network else ""), flush=True)
    print(
        f"{args.mode} mode, {args.eval_episodes} envs per split x 2 splits, "
        f"{'an untrained network' if args.network else 'uniform random actions'}; "
        f"{time.monotonic() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
