"""How long an evaluation of an untrained policy lasts, against the bound `rlsweep plan` counts.

An evaluation (`rlsweep.trial.evaluation.evaluate`) plays one episode in each of eval_episodes
envs per split, the splits in lockstep, until the last of them ends; `rlsweep plan` counts
every evaluation at the game's time limit. This runs the trial's own evaluation envs and
evaluator under a uniform random policy (an untrained policy's stand-in: no network) and
prints, per game, the lockstep steps each seed's evaluation took beside that limit.

    python benchmarks/eval_lengths.py                      # every game, easy, seeds 0-2
    python benchmarks/eval_lengths.py --games bigfish --seeds 0 1 2 3 4 --eval-episodes 32
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rlsweep.envs import procgen
from rlsweep.spec.config import TrialConfig
from rlsweep.trial.evaluation import EvalResult, evaluate, evaluation_envs, steps_taken


def random_evaluation(
    game: str, mode: str, seed: int, episodes: int, num_levels: int
) -> dict[str, EvalResult]:
    """One evaluation of a trial (`game`, `seed`) under a uniform random policy."""
    cfg = TrialConfig(
        game=game, distribution_mode=mode, num_levels=num_levels, seed=seed,
        eval_episodes=episodes, num_cpus=2,
    )  # fmt: skip
    envs = evaluation_envs(cfg)
    n = int(envs["train"].single_action_space.n)
    rng = np.random.default_rng(seed)
    played = evaluate(lambda obs, active: rng.integers(0, n, len(obs)), envs)
    for env in envs.values():
        env.close()
    return played


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", nargs="+", default=list(procgen.GAMES))
    p.add_argument("--mode", default="easy")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--eval-episodes", type=int, default=32, help="per split (the default's)")
    p.add_argument("--num-levels", type=int, default=200)
    args = p.parse_args()
    start = time.monotonic()
    print(f"{'game':10} {'limit':>6}  steps per evaluation (seeds {args.seeds})  longest/limit")
    for game in args.games:
        limit = procgen.max_episode_steps(game, args.mode)
        steps = [
            steps_taken(random_evaluation(game, args.mode, s, args.eval_episodes, args.num_levels))
            for s in args.seeds
        ]
        listed = ", ".join(f"{s:,}" for s in steps)
        print(f"{game:10} {limit:6,}  {listed:34}  {max(steps) / limit:.2f}")
    print(
        f"{args.mode} mode, {args.eval_episodes} envs per split x 2 splits, uniform random "
        f"actions; {time.monotonic() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
