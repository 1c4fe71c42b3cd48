"""PPO that samples the next train batch while it learns on this one (`overlap: true`).

Synchronous PPO alternates: the EnvRunners sample a batch with the current weights, then the
learner updates on it while the EnvRunners wait. On a GPU node those two use different parts of
the machine (the CPUs' envpool and the inference forwards; the GPU's training step), so each
iteration here runs them at the same time: a thread samples the next batch while the learner
updates on the batch the previous iteration sampled, and the new weights reach the EnvRunners
once both are done. The price is one update of policy lag: update k learns from a batch sampled
with the weights of update k - 2 (the first update samples its own batch first), so the ratio's
denominator and GAE's bootstrap are those of an older policy than the reference's, and the
learner recomputes GAE's values with its current weights instead of reusing the rollout's. It
is a different algorithm from the reference's PPO, hence a named option and never the default.

Between iterations nothing is in flight: a checkpoint, an evaluation or a stop sees the trial
at rest. The batch sampled for the next iteration is not part of a checkpoint (a restored trial
samples its first batch again), and a trial's last sampled batch is never trained on.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from ray.rllib.algorithms.ppo import PPO
from ray.rllib.core import ALL_MODULES
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_MODULE_STEPS_TRAINED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from rlsweep._ray_compat import sample_train_batch

OVERLAP_WAIT = "rlsweep_overlap_wait"
"""Timer: how long the learner, done with its update, waited for the next batch's sampling."""


class OverlappedPPO(PPO):
    """RLlib's PPO with `training_step` sampling in a thread beside the update (Ray 2.60's
    PPO.training_step otherwise: the same sampling call, update and weight sync)."""

    _next_batch: tuple[list[Any], list[Any]] | None = None
    _sampling_thread: ThreadPoolExecutor | None = None
    _stream: torch.cuda.Stream | None = None

    def training_step(self) -> None:
        if self._next_batch is None:  # the first iteration (or the first after a restore)
            with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
                self._next_batch = sample_train_batch(self)
        episodes, runner_results = self._next_batch
        self._next_batch = None
        if not episodes:
            return
        self.metrics.aggregate(runner_results, key=ENV_RUNNER_RESULTS)
        if self._sampling_thread is None:
            self._sampling_thread = ThreadPoolExecutor(1, thread_name_prefix="rlsweep-sampler")
        pending = self._sampling_thread.submit(self._sample_beside_the_learner)
        try:
            with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
                learner_results = self.learner_group.update(
                    episodes=episodes,
                    timesteps={
                        NUM_ENV_STEPS_SAMPLED_LIFETIME: self.metrics.peek(
                            (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME)
                        ),
                        NUM_MODULE_STEPS_TRAINED_LIFETIME: self.metrics.peek(
                            (LEARNER_RESULTS, ALL_MODULES, NUM_MODULE_STEPS_TRAINED_LIFETIME),
                            default=0,
                        ),
                    },
                    num_epochs=self.config.num_epochs,
                    minibatch_size=self.config.minibatch_size,
                    shuffle_batch_per_epoch=self.config.shuffle_batch_per_epoch,
                )
                self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)
        finally:
            with self.metrics.log_time((TIMERS, OVERLAP_WAIT)):
                self._next_batch = pending.result()  # never leave a sample in flight
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            self.env_runner_group.sync_weights(
                from_worker_or_learner_group=self.learner_group,
                policies=set(learner_results[0].keys()) - {ALL_MODULES},
                inference_only=True,
            )

    def _sample_beside_the_learner(self) -> tuple[list[Any], list[Any]]:
        """A train batch, sampled in this thread; on a GPU on a stream of its own (the current
        stream is per thread), so that its forwards need not queue behind the update's, after
        the work already queued (the last weight sync)."""
        module = self.env_runner_group.local_env_runner.module
        device = next(module.parameters()).device if module is not None else None
        if device is None or device.type != "cuda":
            return sample_train_batch(self)
        if self._stream is None:  # one for the trial: the allocator caches blocks per stream
            self._stream = torch.cuda.Stream(device)
        self._stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(self._stream):
            return sample_train_batch(self)

    def stop(self) -> None:
        if self._sampling_thread is not None:
            self._sampling_thread.shutdown(wait=True)
        super().stop()
