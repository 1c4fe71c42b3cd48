"""Sampling alone: RLlib's EnvRunner loop against rlsweep's batched loop, on one trial's runner.

    .venv/bin/python benchmarks/probes/sampler.py [--steps 64] [--rounds 5] [--quick]

The arms are the trial's own EnvRunner class (`rlsweep.trial.env_runner`: BatchedEnvRunner, or
CentralInferenceEnvRunner with the module on the GPU when there is one) built from the default
trial's config (coinrun easy, IMPALA-CNN [16, 32, 32], 64 envs, this machine's CPUs): "rllib"
forces RLlib's own loop (`batched_loop_applies` false), "batched" runs rlsweep's, and a third
runs rlsweep's with 2 env groups (`env_groups`, opt-in double-buffering). Each round samples
`--steps` steps of every env with each arm, in turn (reversed every other round), after one
warm-up sample each; the parts are timed from outside (the envs' part: the vector env's send,
recv and finish_step, which is what a double-buffered loop waits for; the module's exploration
forward; and within the rest the actions' sampling with the outputs' copies to the host and the
batched loop's episode writes; waiting for the GPU before and after each), the rest is the
loop's own work: episode bookkeeping, connectors, callbacks, metrics. Medians over the rounds.

Two floors follow, each alone in the process: "the envs alone", the trial's vector env (its
threads and groups) stepped with random actions, what the envs cost where nothing competes with
their threads (and the same, each step's frames first copied by torch, whose OpenMP threads
spin on after a copy, or by numpy, as rlsweep's GPU rollout does); and "the batched loop
alone", the trial's runner with its envs and its forward replaced by instant replays of one
real step (envs ending at random, 1 in 500 per step): the loop's own work per step (episodes,
connectors, metrics; on a GPU the outputs' copy to the host)
where no env thread competes with it. Against the arms' "env step" and "other" they say how
much the envs and the loop slow each other down. Then the actions' sampling alone (with the
outputs' copy to the host), as RLlib's connectors sample and as rlsweep's modules do in their
forward (`actions_alone`). Last, the batched loop with 1 and with 2 env groups (the
placement's threads for each) on real envs, the forward a replay that waits a fixed time
(`--forward-ms`, a launch-bound GPU forward, which leaves the CPU free): what double-buffering
gains where the forward costs that much per call.

Output: one line per arm and part (seconds per sample and microseconds per step of all envs),
the floors, and the JSON record in $OUT or results/benchmarks/sampler.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

PARTS = ("sample", "env step", "inference forward", "actions and outputs to host", "episodes")
"""Timed from outside; "actions and outputs to host" is `rlsweep.trial.connectors.rollout_columns`
(one host copy of the outputs, and the actions' sampling where the forward leaves it: rlsweep's
PPO and APPO modules sample in the forward, `rlsweep.trial.models.sample_categorical`), "episodes"
the batched loop's bulk episode writes (`_extend`, `to_numpy`: RLlib's loop does this per env
and step, inside its other work)."""


def _runner(cls: type, config: Any) -> Any:
    torch.manual_seed(0)
    return cls(config=config)


def _timed(spent: dict[str, float], name: str, fn: Callable[..., Any], cuda: bool) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            if cuda:
                torch.cuda.synchronize()
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0

    return wrapper


def envs_alone(env_config: dict[str, Any], steps: int, rounds: int, copy: str = "") -> float:
    """Median seconds to step the trial's vector env `steps` times with random actions; with
    `copy` ("torch" or "numpy"), each step's frames first copied as a GPU trial's rollout
    stages them (into pinned memory where there is a GPU) by that library: torch's copy runs on
    its OpenMP pool, whose threads spin on after it (`rlsweep.trial.models.pinned_frames`)."""
    import numpy as np

    from rlsweep.trial.algos import make_procgen_env
    from rlsweep.trial.models import pinned_frames

    env = make_procgen_env(env_config)
    try:
        obs, _ = env.reset(seed=0)
        staging = torch.empty(obs.shape, dtype=torch.uint8, pin_memory=torch.cuda.is_available())
        n, rng = env.num_envs, np.random.default_rng(0)
        times = []
        for _ in range(rounds + 1):  # the first: warm-up
            actions = rng.integers(0, env.single_action_space.n, (steps, n))
            t0 = time.perf_counter()
            for a in actions:
                if copy == "torch":
                    staging.copy_(torch.from_numpy(obs))
                elif copy == "numpy":
                    pinned_frames(torch.from_numpy(obs), out=staging)
                obs = env.step(a)[0]
            times.append(time.perf_counter() - t0)
        return statistics.median(times[1:])
    finally:
        env.close()


def _replayed_forward(module: Any, latency_s: float = 0.0) -> None:
    """The module's exploration forward replaced by a replay of its real outputs (per row
    count), after `latency_s` of sleep: a forward that costs the CPU nothing, as a GPU's
    leaves it free while it waits. `del module.forward_exploration` restores it."""
    forward, outputs = module.forward_exploration, {}

    def replay(batch: dict[str, Any], **kwargs: Any) -> dict[str, torch.Tensor]:
        rows = len(batch["obs"])
        if rows not in outputs:
            outputs[rows] = {k: v.clone() for k, v in forward(batch, **kwargs).items()}
        elif latency_s:
            time.sleep(latency_s)
        return {k: v.clone() for k, v in outputs[rows].items()}

    module.forward_exploration = replay


def _one_sample(runner: Any, steps: int, cuda: bool) -> float:
    """Seconds of one `runner.sample` of `steps` steps of all envs."""
    t0 = time.perf_counter()
    runner.sample(num_timesteps=runner.env.unwrapped.num_envs * steps)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    runner.get_metrics()  # as an iteration does: frees the finished episodes
    return seconds


def _sample_seconds(runner: Any, steps: int, rounds: int, cuda: bool) -> float:
    """Median seconds of `rounds` samples, after one warm-up."""
    return statistics.median([_one_sample(runner, steps, cuda) for _ in range(rounds + 1)][1:])


def loop_alone(runner: Any, steps: int, rounds: int, cuda: bool) -> float:
    """Median seconds of `runner.sample` over `steps` steps of all envs, its vector env's send,
    recv and finish_step and its module's forward replaced by instant replays of a real step."""
    import numpy as np

    env = runner.env.unwrapped
    received: dict[int, Any] = {}  # each group's latest recv
    finished: dict[str, Any] = {}  # the latest finish_step
    recv, finish_step = env.recv, env.finish_step

    def recorded_recv(g: int) -> Any:
        received[g] = recv(g)
        return received[g]

    def recorded_finish_step() -> Any:
        finished["step"] = finish_step()
        return finished["step"]

    _replayed_forward(runner.module)
    env.recv, env.finish_step = recorded_recv, recorded_finish_step
    runner.sample(num_timesteps=env.num_envs * steps)  # one real sample, recorded
    rng = np.random.default_rng(0)

    def replayed_step() -> Any:
        obs, reward, _, truncated, info = finished["step"]
        return obs, reward, rng.random(env.num_envs) < 1 / 500, np.zeros_like(truncated), info

    env.send, env.recv, env.finish_step = (lambda g, a: None), received.__getitem__, replayed_step
    try:
        return _sample_seconds(runner, steps, rounds, cuda)
    finally:
        del env.send, env.recv, env.finish_step, runner.module.forward_exploration


def actions_alone(module: Any, envs: int, steps: int, rounds: int, cuda: bool) -> dict[str, float]:
    """Median seconds of `steps` steps' action sampling over `envs` rows of the module's
    logits, with the outputs' copy to the host, each way: as RLlib's connectors sample
    (`rollout_columns` building the module's TorchCategorical: what rlsweep's loop did before
    its modules sampled in their forward) and as rlsweep's modules do (`sample_categorical`,
    noise drawn as the forward draws it, then `rollout_columns`). Eager on both sides (on a GPU
    the module's CUDA graph replays the latter's sampling; its noise is drawn outside)."""
    from ray.rllib.core.columns import Columns

    from rlsweep.trial.connectors import rollout_columns
    from rlsweep.trial.models import sample_categorical

    device = next(module.parameters()).device
    n = module.net.pi.out_features
    logits = torch.randn(envs, n, device=device)
    values = torch.randn(envs, device=device)

    def rllibs() -> None:
        batch = {Columns.ACTION_DIST_INPUTS: logits.clone(), Columns.VF_PREDS: values.clone()}
        rollout_columns(module, batch, explore=True)

    def modules() -> None:
        actions, logp = sample_categorical(logits)
        batch = {
            Columns.ACTION_DIST_INPUTS: logits.clone(),
            Columns.VF_PREDS: values.clone(),
            Columns.ACTIONS: actions,
            Columns.ACTION_LOGP: logp,
        }
        rollout_columns(module, batch, explore=True)

    ways = {"RLlib's connector": rllibs, "the module's forward": modules}
    spent: dict[str, list[float]] = {k: [] for k in ways}
    for r in range(rounds + 1):  # the first: warm-up
        for name in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            t0 = time.perf_counter()
            for _ in range(steps):
                ways[name]()
            if cuda:
                torch.cuda.synchronize()
            if r:
                spent[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in spent.items()}


def groups_at_fixed_latency(
    runners: dict[int, Any], latency_s: float, steps: int, rounds: int, cuda: bool
) -> dict[int, float]:
    """Median seconds per sample of each runner (by its env groups), stepping its real envs,
    its forward a replay after `latency_s`: what double-buffering gains or costs where each
    forward waits that long on the GPU, whatever its rows (a launch-bound forward)."""
    for runner in runners.values():
        _replayed_forward(runner.module, latency_s)
    try:
        for runner in runners.values():
            _one_sample(runner, steps, cuda)  # warm-up: the replays' first forwards
        spent: dict[int, list[float]] = {g: [] for g in runners}
        for r in range(rounds):
            for g in list(runners) if r % 2 == 0 else list(runners)[::-1]:
                spent[g].append(_one_sample(runners[g], steps, cuda))
        return {g: statistics.median(v) for g, v in spent.items()}
    finally:
        for runner in runners.values():
            del runner.module.forward_exploration


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=64, help="steps of every env per sample")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="8 envs x 8 steps, 2 rounds (smoke run)")
    p.add_argument(
        "--forward-ms",
        default="0,1.3",
        help="latencies of the replayed forward for 1 and 2 env groups (default 0,1.3: instant, "
        "and an H200's forward of 64 frames)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.envs, args.steps, args.rounds = 8, 8, 2

    from rlsweep._ray_compat import quiet_trial_logs
    from rlsweep.plan.placement import placement
    from rlsweep.spec.config import TrialConfig
    from rlsweep.trial import connectors, env_runner
    from rlsweep.trial.algos import algorithm_config

    quiet_trial_logs()  # RLlib's own DeprecationWarning, as in a trial
    rollout_columns, _extend = connectors.rollout_columns, env_runner._extend

    cuda = torch.cuda.is_available()
    cpus = os.cpu_count() or 1
    cfg = TrialConfig(
        game="coinrun",
        num_envs_per_env_runner=args.envs,
        rollout_length=args.steps,
        minibatch_size=args.envs * args.steps,
        num_cpus=cpus,
        num_gpus=1 if cuda else 0,
    )
    config = algorithm_config(cfg)
    batched_cls = config.env_runner_cls
    groups = placement(cfg).env_groups
    two_groups = algorithm_config(replace(cfg, env_groups=2))  # opt-in double-buffering

    class RLlibLoop(batched_cls):  # the same runner, RLlib's own loop
        def batched_loop_applies(self) -> bool:
            return False

    arms = {
        "rllib": _runner(RLlibLoop, config),
        "batched": _runner(batched_cls, config),
        "batched, 2 env groups": _runner(batched_cls, two_groups),
    }
    spent: dict[str, dict[str, list[float]]] = {a: {k: [] for k in PARTS} for a in arms}
    try:
        for runner in arms.values():
            runner.sample(num_timesteps=args.envs * args.steps)  # warm-up (and the reset)
        for r in range(args.rounds):
            order = list(arms) if r % 2 == 0 else list(arms)[::-1]
            for arm in order:
                runner, parts = arms[arm], {}
                env, forward = runner.env.unwrapped, runner.module.forward_exploration
                # The envs' part in both loops: RLlib's `env.step` is these three too.
                for name in ("send", "recv", "finish_step"):
                    setattr(env, name, _timed(parts, "env step", getattr(env, name), cuda))
                runner.module.forward_exploration = _timed(
                    parts, "inference forward", forward, cuda
                )
                runner._returned = _timed(parts, "episodes", runner._returned, cuda)
                to_host = _timed(parts, "actions and outputs to host", rollout_columns, cuda)
                extend = _timed(parts, "episodes", env_runner._extend, cuda)
                connectors.rollout_columns = env_runner.rollout_columns = to_host
                env_runner._extend = extend
                try:
                    _timed(parts, "sample", runner.sample, cuda)(
                        num_timesteps=args.envs * args.steps
                    )
                finally:
                    connectors.rollout_columns = env_runner.rollout_columns = rollout_columns
                    env_runner._extend = _extend
                del env.send, env.recv, env.finish_step
                del runner.module.forward_exploration, runner._returned
                for k in PARTS:
                    spent[arm][k].append(parts.get(k, 0.0))
    finally:
        for runner in arms.values():
            runner.stop()

    device = torch.cuda.get_device_name(0) if cuda else "no GPU"
    header = (
        f"coinrun easy, {args.envs} envs x {args.steps} steps per sample, {args.rounds} rounds, "
        f"{cpus} CPUs, {device}, torch {torch.__version__}, runner {batched_cls.__name__}"
    )
    header += f", env groups {groups}"
    print(header, flush=True)
    record: dict[str, Any] = {"setup": vars(args), "device": device, "arms": {}}
    out = Path(os.environ.get("OUT") or Path(__file__).resolve().parents[2] / "results/benchmarks")
    out.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after each part: a run cut short keeps what it measured
        (out / "sampler.json").write_text(json.dumps({"header": header, **record}, indent=1))

    for arm in arms:
        med = {k: statistics.median(v) for k, v in spent[arm].items()}
        med["other (bookkeeping, connectors)"] = (
            med["sample"] - med["env step"] - med["inference forward"]
        )
        med["other: the rest"] = med["other (bookkeeping, connectors)"] - sum(
            med[k] for k in ("actions and outputs to host", "episodes")
        )
        record["arms"][arm] = med
        for k, v in med.items():
            print(f"{arm:<24} {k:<34} {v:8.3f} s  {1e6 * v / args.steps:9.0f} us/step")
    r, b = record["arms"]["rllib"], record["arms"]["batched"]
    record["speedup"] = r["sample"] / b["sample"]
    print(f"sample: batched {record['speedup']:.2f}x RLlib's loop")
    record["groups_speedup"] = record["arms"]["batched, 2 env groups"]["sample"] / b["sample"]
    speedup = record["groups_speedup"]
    print(f"sample: batched, {groups} env group(s), {speedup:.2f}x 2 groups' speed", flush=True)
    save()

    floors = record["floors"] = {}
    env_config = {**config.env_config, "num_envs": args.envs}
    floors["the envs alone"] = envs_alone(env_config, args.steps, args.rounds)
    for copy in ("torch", "numpy"):
        floors[f"the envs alone, {copy} copying the frames"] = envs_alone(
            env_config, args.steps, args.rounds, copy
        )
    alone = _runner(batched_cls, config)
    try:
        floors["the batched loop alone"] = loop_alone(alone, args.steps, args.rounds, cuda)
    finally:
        alone.stop()
    for k, v in floors.items():
        print(f"floor: {k:<42} {v:8.3f} s  {1e6 * v / args.steps:9.0f} us/step", flush=True)
    save()

    actions = record["actions_alone"] = actions_alone(
        arms["batched"].module, args.envs, args.steps, args.rounds, cuda
    )
    for k, v in actions.items():
        line = f"actions sampled and to host, {k}:"
        print(f"{line:<50} {v:8.3f} s  {1e6 * v / args.steps:9.0f} us/step", flush=True)
    save()

    latencies = record["fixed_latency"] = {}
    by_groups = {
        g: _runner(batched_cls, algorithm_config(replace(cfg, env_groups=g))) for g in (1, 2)
    }
    try:
        for ms in map(float, args.forward_ms.split(",")):
            t = groups_at_fixed_latency(by_groups, ms / 1000, args.steps, args.rounds, cuda)
            latencies[str(ms)] = {str(g): v for g, v in t.items()}
            print(
                f"forward replayed at {ms:.1f} ms: 1 group {1e6 * t[1] / args.steps:.0f} us/step, "
                f"2 groups {1e6 * t[2] / args.steps:.0f} ({t[1] / t[2]:.2f}x 1 group's speed)",
                flush=True,
            )
            save()
    finally:
        for runner in by_groups.values():
            runner.stop()
    return record


if __name__ == "__main__":
    main()
