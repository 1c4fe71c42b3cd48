"""rlsweep's EnvRunners: RLlib's SingleAgentEnvRunner with a batched sampling loop
(`BatchedEnvRunner`, every layout), and its GPU variant that samples in the trial's own
process (`CentralInferenceEnvRunner`, `rlsweep.plan.placement`'s central inference)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.metrics import ENV_STEP_TIMER, RLMODULE_INFERENCE_TIMER, WEIGHTS_SEQ_NO

from rlsweep._ray_compat import EnvRunnerHooks
from rlsweep.envs.vector_env import ProcgenVectorEnv, env_seed
from rlsweep.trial.connectors import BatchObservations, SampleActions, rollout_columns
from rlsweep.trial.device import learner_device
from rlsweep.trial.models import bf16_weights_for_rollouts
from rlsweep.trial.rl_module import ImpalaPPOModule


@dataclass(frozen=True)
class _Step:
    """One vector-env step, over all envs (row i: env i's)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminateds: np.ndarray
    truncateds: np.ndarray
    infos: Sequence[dict]
    extras: dict[str, Any]
    """The module's other outputs (log-probs, values, ...) and the weights' version."""

    def row(self, i: int) -> dict[str, Any]:
        """Env i's transition, as `SingleAgentEpisode.add_env_step` takes it."""
        return dict(
            observation=self.obs[i],
            action=self.actions[i],
            reward=self.rewards[i],
            infos=self.infos[i],
            terminated=self.terminateds[i],
            truncated=self.truncateds[i],
            extra_model_outputs={k: v[i] for k, v in self.extras.items()},
        )


RUNNER_STREAM = 1_000
"""`env_seed`'s stream id of remote EnvRunners' seeds (`runner_seed`)."""


def runner_seed(trial_seed: int, worker_index: int) -> int:
    """The seed of a trial's EnvRunner `worker_index`: the trial seed for the local one (0), a
    stream of its own for each remote one. RLlib's `trial_seed + worker_index` gave the runners
    of different trials the same seeds (runner 2 of seed 0 played runner 1 of seed 1's levels),
    so the seeds a sweep's statistics take as independent were not."""
    return trial_seed if worker_index == 0 else env_seed(trial_seed, RUNNER_STREAM, worker_index)


class BatchedEnvRunner(EnvRunnerHooks, SingleAgentEnvRunner):
    """RLlib's SingleAgentEnvRunner, sampling timesteps with one batched operation per step.

    RLlib's loop (Ray 2.60) spends a fixed ~2.5 ms per step of 64 envs on bookkeeping, one env
    at a time: each env's step appended to its episode, its `on_episode_step` callback, its
    observations and the module's outputs unbatched and re-stacked by the connector pipelines
    (measured on the CPU and on an H200: a fifth of a GPU trial's sampling). Here a step is the
    module's forward (rlsweep's modules sample their actions there), `rollout_columns`, the
    vector env's step and one record of the batched arrays; an env's steps go into its episode
    when that episode ends or the sample does, in a few bulk operations. Episode starts and
    ends, their callbacks, the chunks returned and cut and the metrics are RLlib's own, in
    RLlib's order, so the episodes equal RLlib's value for value (`tests/test_env_runner.py`;
    with several env groups, the module's outputs within rounding: a forward over fewer rows
    may round differently).

    The envs step asynchronously (`ProcgenVectorEnv`'s send and recv): a step's next actions
    leave before the loop records the step, and with `env_groups` > 1 (opt-in) the forward
    runs per group, so one group's envs step while the module infers on the next group's
    frames. Each forward sees the weights and frames one forward over all envs would.

    It runs when RLlib's loop would do nothing more: sampling timesteps of rlsweep's Procgen
    envs, with rlsweep's two connectors (`rlsweep.trial.connectors`) as the whole pipelines, no
    `on_episode_step` callback, and env failures raised (`restart_failed_sub_environments`
    off); otherwise (random actions, whole episodes, other connectors) RLlib's loop runs.

    With `precision: bf16` its module's trunk stores bf16 weights
    (`rlsweep.trial.models.bf16_weights_for_rollouts`): the same numbers, without autocast's casts.
    """

    def __init__(self, *, config: Any, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        if self.worker_index and config.seed is not None:  # a remote runner
            self.reseed(runner_seed(config.seed, self.worker_index))

    def sample_steps(
        self,
        *,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        explore: bool,
        random_actions: bool = False,
        force_reset: bool = False,
    ) -> list[SingleAgentEpisode]:
        if num_timesteps is None or random_actions or not self.batched_loop_applies():
            return super().sample_steps(
                num_timesteps=num_timesteps,
                num_episodes=num_episodes,
                explore=explore,
                random_actions=random_actions,
                force_reset=force_reset,
            )
        return self._sample_batched(num_timesteps, explore=explore, force_reset=force_reset)

    def make_module(self) -> None:
        super().make_module()
        if self.module is not None:
            bf16_weights_for_rollouts(self.module)

    def batched_loop_applies(self) -> bool:
        """Whether the batched loop samples what RLlib's would (see the class docstring)."""
        return (
            self.module is not None
            and [type(c) for c in self.env_to_module.connectors] == [BatchObservations]
            and [type(c) for c in self.module_to_env.connectors] == [SampleActions]
            and isinstance(self.env.unwrapped, ProcgenVectorEnv)
            # Env failures: RLlib's loop restarts the envs; this one raises.
            and not self.config.restart_failed_sub_environments
            and not self.config.callbacks_on_episode_step
            and all(
                type(c).on_episode_step is RLlibCallback.on_episode_step
                for c in self.callback_objects
            )
        )

    def module_input(self, obs: np.ndarray) -> dict[str, Any]:
        """The forward pass's input for a step's batched observations (BatchObservations')."""
        device = self.env_to_module.connectors[0].device
        tensor = torch.from_numpy(obs)
        return {Columns.OBS: tensor if device is None else tensor.to(device)}

    def _sample_batched(
        self, num_timesteps: int, *, explore: bool, force_reset: bool
    ) -> list[SingleAgentEpisode]:
        if force_reset or self.needs_reset:
            self.reset_envs_and_episodes(explore)
        env: ProcgenVectorEnv = self.env.unwrapped
        n = self.num_envs
        runners = self.config.num_env_runners or 1
        lifetime = self.num_env_steps_sampled_lifetime // runners
        # Envs whose next row is a reset (their episode ended, and envs autoreset a step later).
        resetting = np.array([not e.is_reset for e in self.ongoing_episodes])
        steps: list[_Step] = []
        first = np.zeros(n, np.int64)  # each env's first step not yet in its episode
        done_episodes: list[SingleAgentEpisode] = []
        to_module, self.cached_to_module = self.cached_to_module, None
        ts = 0
        # Double-buffered: a group's next actions leave as soon as its step is in, so its envs
        # step in envpool's threads while the module infers on the next group and while this
        # loop records the step (with one group, only the latter). Each group's forward sees
        # the same weights and observations as one forward over all envs would.
        sent = [
            self._act(env, g, to_module[Columns.OBS][rows], explore=explore, t=lifetime * runners)
            for g, rows in enumerate(env.groups)
        ]
        while ts < num_timesteps:
            ts_next = ts + n - int(resetting.sum())
            upcoming = []
            waited = 0.0  # for the envs: the env step timer (the forwards between are not)
            for g in range(len(env.groups)):
                t0 = time.perf_counter()
                obs_g = env.recv(g)
                waited += time.perf_counter() - t0
                if ts_next < num_timesteps:  # another step follows
                    t = (lifetime + ts_next) * runners
                    upcoming.append(self._act(env, g, obs_g, explore=explore, t=t))
            t0 = time.perf_counter()
            obs, rewards, terminateds, truncateds, info = env.finish_step()
            waited += time.perf_counter() - t0
            self.metrics.log_value(ENV_STEP_TIMER, waited, reduce="ema")
            self.count_env_step()
            # What RLlib's DictInfoToList wrapper makes of the env's (always empty) infos.
            assert not info, "ProcgenVectorEnv's infos are empty"
            infos = [{} for _ in range(n)]
            to_env = _joined(sent)
            actions = to_env.pop(Columns.ACTIONS)
            to_env.pop(Columns.ACTIONS_FOR_ENV, None)
            k = len(steps)
            steps.append(
                _Step(
                    obs,
                    actions,
                    rewards,
                    terminateds,
                    truncateds,
                    infos,
                    {**to_env, WEIGHTS_SEQ_NO: [self.weights_seq_no] * n},
                )
            )
            ts, sent = ts_next, upcoming
            done = (np.asarray(terminateds) | np.asarray(truncateds)) & ~resetting
            episodes = self.ongoing_episodes
            for i in np.flatnonzero(resetting | done):  # env order, as RLlib's callbacks
                if resetting[i]:
                    episodes[i].add_env_reset(observation=obs[i], infos=infos[i])
                    self.episode_callback("on_episode_start", i)
                else:
                    _extend(episodes[i], steps[first[i] : k + 1], i)
                    self.episode_callback("on_episode_end", i)
                    done_episodes.append(self._returned(episodes[i]))
                    self.new_episode(i)
                first[i] = k + 1  # the rows up to this one are in the episode, or before it
            resetting = done
        self.cached_to_module = self.module_input(obs)
        episodes = self.ongoing_episodes
        for i in range(n):
            _extend(episodes[i], steps[first[i] :], i)
        # RLlib's ending: the ongoing episodes cut, their chunks returned after the done ones.
        continuations = [
            e.cut(len_lookback_buffer=self.config.episode_lookback_horizon) for e in episodes
        ]
        chunks = []
        for e in episodes:
            if e.t == 0:  # reset on the last step: no data yet
                continue
            e.validate()
            self.ongoing_chunks_for_metrics[e.id_].append(e)
            chunks.append(self._returned(e))
        self.ongoing_episodes = continuations
        self.done_episodes_for_metrics.extend(done_episodes)
        self.count_sampled(ts, len(done_episodes))
        return done_episodes + chunks

    def _act(
        self, env: ProcgenVectorEnv, group: int, obs: Any, *, explore: bool, t: int
    ) -> dict[str, np.ndarray]:
        """The module's rollout columns for one group's observations (numpy, or tensors
        `module_input` made); its actions sent to its envs."""
        to_module = obs if isinstance(obs, torch.Tensor) else self.module_input(obs)[Columns.OBS]
        with self.metrics.log_time(RLMODULE_INFERENCE_TIMER):
            if explore:
                out = self.module.forward_exploration({Columns.OBS: to_module}, t=t)
            else:
                out = self.module.forward_inference({Columns.OBS: to_module})
        columns = rollout_columns(self.module, out, explore=explore)
        env.send(group, columns.get(Columns.ACTIONS_FOR_ENV, columns[Columns.ACTIONS]))
        return columns

    def _returned(self, episode: SingleAgentEpisode) -> SingleAgentEpisode:
        return episode.to_numpy() if self.episodes_to_numpy else episode


def _joined(columns: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The groups' rollout columns as one step's, rows in env order."""
    if len(columns) == 1:
        return dict(columns[0])
    return {k: np.concatenate([c[k] for c in columns]) for k in columns[0]}


def _extend(episode: SingleAgentEpisode, steps: Sequence[_Step], i: int) -> None:
    """Env i's rows of `steps` appended to its episode: the same data, flags and step times as
    one `add_env_step` per row. The first row goes through `add_env_step` when the episode has
    no model outputs yet (it creates them), and the last row always does (the episode's
    last-step time and flags are then RLlib's); the rows between are appended in bulk to each
    of the episode's buffers: what `add_env_step` appends per row (an unfinished episode's
    `InfiniteLookbackBuffer`s hold lists, Ray 2.60), with `t` advanced by as many steps.
    (RLlib's `concat_episode` would do the same through a temporary episode, validations and
    one `append` per item and buffer: 0.03 s of a 64 x 256-step sample.)"""
    if not steps:
        return
    head = 0
    if any(k not in episode.extra_model_outputs for k in steps[0].extras):
        episode.add_env_step(**steps[0].row(i))
        head = 1
    middle = steps[head:-1]
    if middle:
        if episode.is_numpy:  # never for the ongoing episodes this loop fills
            raise ValueError(f"episode {episode.id_} is finalized (to_numpy): it takes no steps")
        episode.observations.data.extend([s.obs[i] for s in middle])
        episode.infos.data.extend([s.infos[i] for s in middle])
        episode.actions.data.extend([s.actions[i] for s in middle])
        episode.rewards.data.extend([s.rewards[i] for s in middle])
        for k in steps[0].extras:
            episode.extra_model_outputs[k].data.extend([s.extras[k][i] for s in middle])
        episode.t += len(middle)
    if len(steps) > head:
        episode.add_env_step(**steps[-1].row(i))


class CentralInferenceEnvRunner(BatchedEnvRunner):
    """A GPU trial's sampler, SEED-style inside the node: the batched EnvRunner, local to the
    trial's process (num_env_runners=0), stepping all of the trial's envs in one envpool and
    running one batched forward per step on the GPU the local learner trains on.

    RLlib cannot place it there by itself: a local EnvRunner asks `get_device` for 0 GPUs
    whatever the config (SingleAgentEnvRunner.__init__, Ray 2.60), and a remote GPU EnvRunner
    would ship every rollout's frames through the object store to the learner's process. So
    `make_module` (public EnvRunner API) moves the module to RLlib's own choice of the learner's
    device (`rlsweep.trial.device.learner_device`), and each step's uint8 frames move there through
    pinned memory. A PPO or APPO module's exploration forward is replayed from a CUDA graph
    (`ImpalaPPOModule.graph_rollouts`, `rlsweep.trial.cuda_graphs`): one launch per step instead of
    one per kernel, the same numbers. Each frame crosses to the GPU
    twice: once in its step's forward, and once in the learner's batch (RLlib's episodes hold
    numpy frames; one copy per iteration, 200 MB for 16,384 64x64 RGB frames)."""

    def make_module(self) -> None:
        super().make_module()
        device = learner_device(self.config)
        if self.module is not None and device is not None:
            self.module.to(device)
            if device.type == "cuda" and isinstance(self.module, ImpalaPPOModule):
                self.module.graph_rollouts()
