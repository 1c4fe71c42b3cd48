"""One trial, top to bottom: build PPO, train to the budget, evaluate, report.

Every `tune.report` carries the stable metric names below; nothing downstream reads RLlib's own
keys. `train/return` and `test/return` are measured alike, by the evaluator (one episode per env,
actions sampled from the policy), on the training levels and on unseen levels, at the same
iterations, so that their difference is a generalization gap and not an artefact of sampling:
RLlib's rolling mean of finished training episodes favours short episodes early in training
(it is still reported, as `train/episode_return_mean`). Scores are refreshed every
`eval_interval` iterations and at the end; in between they carry the last evaluation forward
(`test/fresh` says which rows are new) so that Tune's schedulers always find the metric.

A trial restored from a checkpoint counts on: its iteration, scores, clocks and every RNG come
back with it (`rlsweep.trial.checkpoint`); only its envs start over, and every report of the
restored process says so (`trial/resumed_at_iteration`).
"""

from __future__ import annotations

import logging
import math
import os
import resource
import tempfile
import time
from collections.abc import Callable
from typing import Any

import ray
import torch
from ray import tune
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.core.columns import Columns
from ray.tune.result import SHOULD_CHECKPOINT

from rlsweep._ray_compat import quiet_trial_logs, wait_for_trial_ends
from rlsweep.experiment import interrupt
from rlsweep.metrics import (
    CPU_S,
    DEVICE,
    ENV_STEPS,
    ENV_STEPS_PER_S,
    EVAL_S,
    GAP_NORM,
    GPU_ALLOCATED_PEAK_GIB,
    GPU_LIMIT_GIB,
    GPU_RESERVED_PEAK_GIB,
    HOST_RSS_PEAK_GIB,
    JEMALLOC,
    LOSS_TOTAL,
    LOSS_VALUE,
    MODULE_STEPS_TRAINED,
    NICE,
    NODE_ID,
    PRECISION,
    RESUMED_AT,
    TEST_FRESH,
    TEST_RETURN_NORM,
    TORCH_THREADS,
    TRAIN_RETURN_NORM,
    TRIAL_DONE,
    TRIAL_ERROR,
    TRIAL_INTERRUPTED,
    TRIALS_BEFORE,
    TUNE_STEPS,
    WALL_S,
)
from rlsweep.plan.placement import memory_fraction, out_of_memory_message
from rlsweep.plan.plan import eval_steps
from rlsweep.spec.config import TrialConfig
from rlsweep.trial import algos, checkpoint
from rlsweep.trial.device import device_name, gpu_memory_gib_of, learner_device
from rlsweep.trial.evaluation import (
    env_steps_taken,
    evaluate,
    evaluation_envs,
    no_scores,
    sampling_policy,
    score_metrics,
)
from rlsweep.trial.rl_module import row_chunks

logger = logging.getLogger(__name__)

CLOCKS = (WALL_S, EVAL_S, CPU_S)
"""Counted on across restores: saved with each checkpoint, added to by the restored process."""

CHECKPOINT_ITERATION, CHECKPOINT_SCORES = "iteration", "scores"
"""The trial's iteration and its last evaluation's scores, in the trainable's state saved with
each checkpoint (beside its clocks, saved under their metric names)."""


def jemalloc_loaded() -> bool:
    try:
        with open("/proc/self/maps") as f:
            return "jemalloc" in f.read()
    except OSError:
        return False


def host_memory_peak_gib() -> float:
    """HOST_RSS_PEAK_GIB: this process's peak resident memory (Linux's ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class _Process:
    """This process's earlier trials. Tune hands a finished CPU trial's process to the next
    (`rlsweep.run.tune_bridge.reuses_processes`), whose figures must not count theirs."""

    trials = 0
    """Trials that ended in this process (TRIALS_BEFORE of the next)."""
    cpu_s = 0.0
    """The process's CPU time when the current trial began in it: 0 in a fresh process, whose
    first trial counts the process's start as its own."""

    @classmethod
    def begin(cls) -> int:
        """A trial begins here: its CPU time counts from now, and its peak resident memory
        (Linux's peak, reset through /proc/self/clear_refs) where an earlier trial ran here."""
        if cls.trials:
            cls.cpu_s = time.process_time()
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError:  # not Linux, or not allowed: the process's peak, as before
                pass
        return cls.trials


def gpu_memory_metrics(cfg: TrialConfig, device: torch.device | None) -> dict[str, float]:
    """The trial's GPU memory so far (GPU_METRICS): peaks on the learner's GPU `device` and the
    allocator's limit there; {} for a CPU trial (`device` None)."""
    if device is None:
        return {}
    total = gpu_memory_gib_of(device)
    fraction = memory_fraction(cfg, total)
    return {
        GPU_RESERVED_PEAK_GIB: torch.cuda.max_memory_reserved(device) / 2**30,
        GPU_ALLOCATED_PEAK_GIB: torch.cuda.max_memory_allocated(device) / 2**30,
        GPU_LIMIT_GIB: total if fraction is None else fraction * total,
    }


def out_of_memory_report(
    cfg: TrialConfig, device: torch.device | None, last: dict[str, Any]
) -> dict[str, Any]:
    """The last report of a trial that ran out of GPU memory: its last reported metrics (0 env
    steps if none yet), its memory figures, and the reason, naming its share and its estimated
    need. A result, not a crash, as for a diverged loss: retried on the same share, the trial
    would run out again."""
    gpu = gpu_memory_metrics(cfg, device)
    total = gpu_memory_gib_of(device) if device is not None else None
    return {
        ENV_STEPS: 0.0,
        TUNE_STEPS: 0.0,
        **last,
        TEST_FRESH: False,
        HOST_RSS_PEAK_GIB: host_memory_peak_gib(),
        **gpu,
        TRIAL_ERROR: out_of_memory_message(cfg, total, gpu.get(GPU_RESERVED_PEAK_GIB)),
        TRIAL_DONE: True,
    }


def policy_logits(
    algo: Algorithm, chunk_rows: int | None = None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """obs -> the action-distribution inputs of the algorithm's module in inference mode (the
    evaluation's policy, `rlsweep.trial.evaluation.sampling_policy`): obs moved to the module's
    device (a GPU trial's) in chunks of at most `chunk_rows` rows (a trial's minibatch: no forward
    sees more), logits back on the CPU for sampling."""

    def logits(obs: torch.Tensor) -> torch.Tensor:
        module = algo.get_module()
        device = next(module.parameters()).device
        return torch.cat(
            [
                module.forward_inference({Columns.OBS: rows[Columns.OBS].to(device)})[
                    Columns.ACTION_DIST_INPUTS
                ].cpu()
                for rows in row_chunks({Columns.OBS: obs}, chunk_rows)
            ]
        )

    return logits


def train_trial(config: dict[str, Any]) -> None:
    """Tune function trainable. `config` is a `TrialConfig` as a dict."""
    quiet_trial_logs()
    wait_for_trial_ends()
    trials_before = _Process.begin()
    cfg = TrialConfig.from_dict(config)
    if interrupt.requested():  # started while the sweep stops: nothing to save, do not begin
        interrupt.stop_before_starting(tune.get_context().get_trial_id())
    torch.set_num_threads(cfg.num_cpus)
    torch.manual_seed(cfg.seed)
    algo = algos.build_algorithm(cfg)
    device = learner_device(algo.config)
    on_gpu = next(algo.get_module().parameters()).device.type == "cuda"  # the evaluation's net
    policy = sampling_policy(policy_logits(algo, cfg.minibatch_size), cfg.seed, every_row=on_gpu)
    generators = {"evaluation": policy.generator}
    # A restored trial counts on: its iteration, clocks, RNGs (envs restart: see RESUMED_AT).
    saved: dict[str, Any] = {}
    if (restored := tune.get_checkpoint()) is not None:
        with restored.as_directory() as path:
            found = checkpoint.restore(algo, path, generators)
        if not found.replay_buffer:
            logger.warning(
                "%s: restored without its replay buffer (checkpoint_replay_buffer is off): "
                "replay starts empty",
                cfg.game,
            )
        saved = found.trial
    eval_envs = evaluation_envs(cfg)
    start = time.monotonic()
    steps_at_start: float | None = None  # a restored trial's steps were not taken in this process
    # Scores carry forward between evaluations, and across a restore.
    scores: dict[str, Any] = {**no_scores(), **saved.get(CHECKPOINT_SCORES, {})}
    iteration = int(saved.get(CHECKPOINT_ITERATION, 0))
    resumed_at = iteration
    wall_before, eval_s = saved.get(WALL_S, 0.0), saved.get(EVAL_S, 0.0)
    cpu_before = saved.get(CPU_S, 0.0)
    saved_at = time.monotonic()
    # Under a time limit the trial stops itself at its last iteration that ends in time.
    clock = interrupt.IterationClock(eval_steps(cfg))
    # Facts of this process, fixed for its life: read once, reported with every result.
    process = {
        JEMALLOC: jemalloc_loaded(),
        NICE: os.nice(0),
        TRIALS_BEFORE: trials_before,
        TORCH_THREADS: torch.get_num_threads(),
        PRECISION: cfg.model_config().precision,
        DEVICE: device_name(device),
        NODE_ID: ray.get_runtime_context().get_node_id(),
        RESUMED_AT: resumed_at,
    }
    last: dict[str, Any] = {}  # the last report's metrics
    try:
        while True:
            t0 = time.monotonic()
            result = algo.train()
            clock.trained(time.monotonic() - t0)
            iteration += 1
            m = algos.read_result(result)
            if steps_at_start is None:
                steps_at_start = m[ENV_STEPS] - cfg.effective_train_batch_size
            finished = m[ENV_STEPS] >= cfg.total_env_steps
            fresh = cfg.evaluates(iteration, m[ENV_STEPS])
            if fresh:
                t0 = time.monotonic()
                played = evaluate(policy, eval_envs)
                for split, ev in played.items():
                    scores.update(score_metrics(cfg, split, ev))
                clock.evaluated(time.monotonic() - t0, env_steps_taken(played))
                eval_s += time.monotonic() - t0
            elapsed = time.monotonic() - start
            # Every report has the same keys in the same order (rlsweep.metrics).
            metrics = {
                **m,
                TUNE_STEPS: m[ENV_STEPS],
                **scores,
                TEST_FRESH: fresh,
                TRIAL_DONE: finished,
                GAP_NORM: scores[TRAIN_RETURN_NORM] - scores[TEST_RETURN_NORM],
                WALL_S: wall_before + elapsed,
                EVAL_S: eval_s,
                ENV_STEPS_PER_S: (m[ENV_STEPS] - steps_at_start) / elapsed,
                **process,
                CPU_S: cpu_before + time.process_time() - _Process.cpu_s,
                TRIAL_ERROR: "",
                TRIAL_INTERRUPTED: False,
                SHOULD_CHECKPOINT: False,  # Tune sets it True on a report with a checkpoint
                HOST_RSS_PEAK_GIB: host_memory_peak_gib(),
                **gpu_memory_metrics(cfg, device),
            }
            last = metrics
            updated = m[MODULE_STEPS_TRAINED] > 0  # DQN waits for learning_starts
            bad = [k for k in (LOSS_TOTAL, LOSS_VALUE) if not math.isfinite(m[k])]
            if updated and bad:
                reason = f"training diverged: {bad[0]} is {m[bad[0]]} at iteration {iteration}"
                tune.report({**metrics, TRIAL_ERROR: reason, TRIAL_DONE: True})
                break
            evaluates_next = cfg.evaluates(
                iteration + 1, m[ENV_STEPS] + cfg.effective_train_batch_size
            )
            stop = not finished and interrupt.requested(clock.next_s(evaluates_next))
            metrics[TRIAL_INTERRUPTED] = stop
            # An evaluation that may outlast the time limit goes ahead from a checkpoint.
            insure = interrupt.insure_before(clock, evaluates_next)
            due = insure or interrupt.checkpoint_due(cfg, iteration, saved_at)
            if finished or stop or due:
                trial = {
                    CHECKPOINT_ITERATION: iteration,
                    CHECKPOINT_SCORES: scores,
                    **{k: metrics[k] for k in CLOCKS},
                }
                t0 = time.monotonic()
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "algo")
                    checkpoint.save(
                        algo,
                        cfg,
                        path,
                        trial,
                        generators,
                        iteration=iteration,
                        env_steps=m[ENV_STEPS],
                        result=metrics,
                    )
                    tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(path))
                saved_at = time.monotonic()
                clock.saved(saved_at - t0)
            else:
                tune.report(metrics)
            if finished:
                break
            if stop:
                interrupt.wait_to_be_stopped()
    except torch.OutOfMemoryError:
        # Only this trial's share ran out (rlsweep.trial.device.configure_torch caps it): it stops
        # alone, saying why, and frees its GPU memory below.
        logger.exception("%s: out of GPU memory", cfg.game)
        tune.report(out_of_memory_report(cfg, device, last))
    finally:
        for env in eval_envs.values():
            env.close()
        algo.stop()
        _Process.trials += 1
