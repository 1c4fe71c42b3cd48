"""The reference PPO update on RLlib: `RlsweepPPOLearner`, RLlib's PPO torch Learner made to
update as baselines' PPO2 (train-procgen) and CleanRL's ppo_procgen do, where the trial's options
say so (`learner_options`: its learner_config_dict), plus speed fixes that do not change learning.

`tests/test_ppo_reference.py` holds its update equal to CleanRL's loop, weight for weight, and
checks that each option it sets is load-bearing there.
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from ray.rllib.algorithms.ppo.ppo import (
    LEARNER_RESULTS_KL_KEY,
    LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY,
    LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY,
)
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner import (
    AddColumnsFromEpisodesToTrainBatch,
    AddObservationsFromEpisodesToBatch,
    AddOneTsToEpisodesAndTruncate,
    AddStatesFromEpisodesToBatch,
    AddTimeDimToBatchAndZeroPad,
    BatchIndividualItems,
    GeneralAdvantageEstimation,
    NumpyToTensor,
)
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.numpy import SMALL_NUMBER
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets
from ray.rllib.utils.torch_utils import convert_to_torch_tensor

from rlsweep._ray_compat import LearnerHooks
from rlsweep.spec.config import TrialConfig
from rlsweep.trial.connectors import to_numpy
from rlsweep.trial.learners import ADAM_EPS, ConfigAfterRestore
from rlsweep.trial.rl_module import row_chunks

logger = logging.getLogger(__name__)

# learner_config_dict keys: how RlsweepPPOLearner updates (see TrialConfig for each option).
PPO2_VF_CLIP = "rlsweep_ppo2_vf_clip"
"""The clip of PPO2-style value clipping (absent: RLlib's clamp of the squared error)."""
MINIBATCHING = "rlsweep_minibatching"
ADVANTAGE_NORM = "rlsweep_advantage_norm"
SHUFFLE_SEED = "rlsweep_shuffle_seed"
ROLLOUT_VALUES = "rlsweep_rollout_values"
"""Whether GAE may reuse the rollout's values: only when the batch was sampled with the weights
being updated (synchronous PPO; not with `overlap`)."""

LR_IN_UPDATE = "rlsweep_lr_in_update"
"""The learner metric: the lr each update trained with (`rlsweep.trial.algos.read_result` reads
it)."""


def learner_options(cfg: TrialConfig) -> dict[str, Any]:
    """The trial's learner_config_dict: the options RlsweepPPOLearner reads. With
    `vf_clip_mode: ppo2` the learner clips the value, and the PPOConfig turns RLlib's clamp off
    (`rlsweep.trial.algos.ppo_config`)."""
    return {
        MINIBATCHING: cfg.minibatching,
        ADVANTAGE_NORM: cfg.advantage_norm,
        ADAM_EPS: cfg.adam_eps,
        SHUFFLE_SEED: cfg.seed,
        ROLLOUT_VALUES: not cfg.overlap,
        **({PPO2_VF_CLIP: cfg.vf_clip_param} if cfg.vf_clip_mode == "ppo2" else {}),
    }


RLLIB_EPISODE_PIECES = (
    AddOneTsToEpisodesAndTruncate,
    AddObservationsFromEpisodesToBatch,
    AddColumnsFromEpisodesToTrainBatch,
    AddTimeDimToBatchAndZeroPad,
    AddStatesFromEpisodesToBatch,
    BatchIndividualItems,
    NumpyToTensor,
)
"""The pieces RLlib's PPO learner pipeline opens with (Ray 2.60: PPOLearner.build prepends the
first to AlgorithmConfig.build_learner_connector's defaults), which `EpisodesToTrainBatch`
replaces."""


class EpisodesToTrainBatch(ConnectorV2):
    """The batch `RLLIB_EPISODE_PIECES` build for one single-agent, non-recurrent module, built
    in one piece: every column, value, dtype and row in the same order. Each episode chunk
    gives its rows and one artificial bootstrap row (LOSS_MASK False) that repeats its last
    action and model outputs, with the observation after the chunk and reward 0; the chunk's
    last real row is truncated unless the episode terminated there.

    Why: RLlib appends the bootstrap timestep to each episode, which rewrites the episode's
    arrays (a copy of every observation), then concatenates the episodes' arrays (a second
    copy). Here each column is one concatenation of views of the episodes' arrays, and the
    episodes are left as they are. The tensors go to the learner's device once, as RLlib's
    NumpyToTensor sends them (`convert_to_torch_tensor`)."""

    def __init__(
        self,
        input_observation_space=None,
        input_action_space=None,
        *,
        device: torch.device | str | None = None,
    ):
        super().__init__(input_observation_space, input_action_space)
        self.device = device

    def __call__(self, *, rl_module, episodes, batch, **kwargs):
        columns: dict[str, list[np.ndarray]] = {
            c: []
            for c in (
                Columns.LOSS_MASK,
                Columns.TERMINATEDS,
                Columns.TRUNCATEDS,
                Columns.OBS,
                Columns.ACTIONS,
                Columns.REWARDS,
            )
        }
        for episode in episodes:
            n = len(episode)
            real = slice(0, n)
            columns[Columns.LOSS_MASK].append(np.arange(n + 1) < n)
            terminated, truncated = np.zeros(n + 1, dtype=bool), np.zeros(n + 1, dtype=bool)
            terminated[n - 1] = episode.is_terminated
            truncated[n - 1] = episode.is_truncated or not episode.is_terminated
            columns[Columns.TERMINATEDS].append(terminated)
            columns[Columns.TRUNCATEDS].append(truncated)
            columns[Columns.OBS].append(episode.get_observations(slice(0, n + 1)))
            actions = episode.get_actions(real)
            columns[Columns.ACTIONS] += [actions, actions[-1:]]
            rewards = episode.get_rewards(real)
            columns[Columns.REWARDS] += [rewards, np.zeros(1, dtype=rewards.dtype)]
            for key in episode.extra_model_outputs:
                out = episode.get_extra_model_outputs(key=key, indices=real)
                columns.setdefault(key, []).extend([out, out[-1:]])
        arrays = {k: np.concatenate(v) for k, v in columns.items()}
        return {DEFAULT_MODULE_ID: convert_to_torch_tensor(arrays, device=self.device)}


class ReferenceGAE(ConnectorV2):
    """GAE(lambda) advantages and value targets, left unstandardized (RLlib's own
    GeneralAdvantageEstimation standardizes over the whole batch, bootstrap rows included;
    RlsweepPPOLearner standardizes as `advantage_norm` says). Same convention as RLlib's: each
    episode chunk carries one artificial bootstrap timestep (AddOneTsToEpisodesAndTruncate).

    The values come in chunks of at most `chunk_rows` rows (the minibatch), so that no forward
    pass here sees more rows than a training step: the bootstrap rows alone (one per episode
    chunk) can outnumber a minibatch.

    With `rollout_values` (synchronous PPO: it samples with the weights it is about to update),
    the rollout's values (VF_PREDS) are exact for the real rows, and only the bootstrap rows
    (LOSS_MASK False) need the network: found with one index op, and each chunk's taken in one
    forward of those rows alone. Per chunk, not in one forward of every bootstrap row: a
    convolution's result depends in its last bits on the rows beside it, and these are the
    forwards that give each row the value it has always had."""

    def __init__(
        self,
        input_observation_space=None,
        input_action_space=None,
        *,
        gamma,
        lambda_,
        chunk_rows: int | None = None,
        rollout_values: bool = False,
    ):
        super().__init__(input_observation_space, input_action_space)
        self.gamma, self.lambda_, self.chunk_rows = gamma, lambda_, chunk_rows
        self.rollout_values = rollout_values

    def __call__(self, *, rl_module, episodes, batch, **kwargs):
        for module_id, module_batch in batch.items():
            module = rl_module[module_id]
            if not isinstance(module, ValueFunctionAPI):
                continue
            values = self.values(module, module_batch)
            v = values.detach().cpu().numpy()
            targets = compute_value_targets(
                values=v,
                rewards=to_numpy(module_batch[Columns.REWARDS]),
                terminateds=to_numpy(module_batch[Columns.TERMINATEDS]),
                truncateds=to_numpy(module_batch[Columns.TRUNCATEDS]),
                gamma=self.gamma,
                lambda_=self.lambda_,
            )
            module_batch[Postprocessing.ADVANTAGES] = torch.as_tensor(
                targets - v, device=values.device
            )
            module_batch[Postprocessing.VALUE_TARGETS] = torch.as_tensor(
                targets, device=values.device
            )
        return batch

    def values(self, module: ValueFunctionAPI, batch: dict[str, Any]) -> torch.Tensor:
        """Every row's value estimate."""
        rollout, mask = batch.get(Columns.VF_PREDS), batch.get(Columns.LOSS_MASK)
        if not self.rollout_values or rollout is None or mask is None:
            return torch.cat(
                [self.forward_values(module, rows) for rows in row_chunks(batch, self.chunk_rows)]
            )
        values = rollout.clone()
        fresh = (~mask).nonzero().squeeze(-1)  # the one wait for the device
        step = self.chunk_rows or len(values)
        _, per_chunk = torch.unique_consecutive(fresh.cpu() // step, return_counts=True)
        obs = batch[Columns.OBS]
        for rows in fresh.split(per_chunk.tolist()):
            fresh_values = self.forward_values(module, {Columns.OBS: obs.index_select(0, rows)})
            values.index_copy_(0, rows, fresh_values.to(values.dtype))
        return values

    def forward_values(self, module: ValueFunctionAPI, rows: dict[str, Any]) -> torch.Tensor:
        """The value of `rows`; with cuDNN's benchmark mode off for a row count other than the
        minibatch's. The bootstrap rows' count per chunk changes every iteration, and benchmark
        mode times every convolution algorithm on each new input shape: 0.11 s per new count
        against 0.0016 s for one seen before (IMPALA net, bf16, H200; benchmarks/probes/
        learner_syncs.py), up to seconds per iteration early in a trial. Its choice is the
        fastest of that run's timings, so GPU numbers under benchmark mode are no fixed
        reference anyway; on a CPU this changes nothing. (The flag is global: a sampling thread
        (`overlap`) forwarding meanwhile takes cuDNN's heuristic choice for that moment.)"""
        n = len(rows[Columns.OBS])
        if n == self.chunk_rows or not torch.backends.cudnn.benchmark:
            return module.compute_values(rows)
        torch.backends.cudnn.benchmark = False
        try:
            return module.compute_values(rows)
        finally:
            torch.backends.cudnn.benchmark = True


def standardize(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """(x - mean) / (std + 1e-8) with the unbiased std (CleanRL's advantage normalization; PPO2
    takes numpy's biased std, a 2.4e-4 relative difference at 2048 rows), the statistics over
    the rows in `mask` (the real transitions)."""
    real = x if mask is None else x[mask]
    return (x - real.mean()) / (real.std() + 1e-8)


def shuffled_minibatches(
    batch: MultiAgentBatch,
    *,
    num_epochs: int,
    minibatch_size: int,
    minibatches_per_epoch: int,
    generator: torch.Generator,
    fixed: bool = False,
) -> Iterator[MultiAgentBatch]:
    """PPO2's / CleanRL's minibatch loop: every epoch a fresh permutation of the batch's real
    transitions (bootstrap rows dropped), cut into `minibatches_per_epoch` minibatches of
    exactly `minibatch_size`. The permutation is `torch.randperm(n, generator=generator)`,
    one per epoch: a reference loop given the same generator draws the same minibatches.
    `fixed` (`minibatching: fixed`, 2020's RLlib on TensorFlow): one permutation for the whole
    update, then each epoch `torch.randperm(minibatches_per_epoch, generator=generator)`, the
    order its minibatches come in.

    The minibatches hold real rows alone and so no loss mask: the losses take plain means, where
    a mask's boolean indexing would wait for the GPU in every loss term of every minibatch. Each
    epoch's permutation goes to the batch's device once."""
    real: dict[str, dict[str, Any]] = {}
    sizes: dict[str, int] = {}
    for module_id, b in batch.policy_batches.items():
        rows = b[Columns.LOSS_MASK].nonzero().squeeze(-1) if Columns.LOSS_MASK in b else None
        real[module_id] = {
            k: v if rows is None else v[rows] for k, v in b.items() if k != Columns.LOSS_MASK
        }
        sizes[module_id] = n = len(b) if rows is None else len(rows)
        if n < minibatches_per_epoch * minibatch_size:
            raise ValueError(
                f"{n} transitions cannot fill {minibatches_per_epoch} minibatches of "
                f"{minibatch_size}"
            )
    devices = {m: next(iter(data.values())).device for m, data in real.items()}

    def permutations() -> dict[str, torch.Tensor]:
        return {m: torch.randperm(n, generator=generator).to(devices[m]) for m, n in sizes.items()}

    perms = permutations() if fixed else {}
    for _ in range(num_epochs):
        if fixed:
            order = torch.randperm(minibatches_per_epoch, generator=generator).tolist()
        else:
            perms, order = permutations(), range(minibatches_per_epoch)
        for j in order:
            policy_batches = {}
            for module_id, data in real.items():
                idx = perms[module_id][j * minibatch_size : (j + 1) * minibatch_size]
                policy_batches[module_id] = SampleBatch({k: v[idx] for k, v in data.items()})
            yield MultiAgentBatch(policy_batches, env_steps=minibatch_size)


class RlsweepPPOLearner(ConfigAfterRestore, LearnerHooks, PPOTorchLearner):
    """RLlib's PPO torch Learner, made to do the reference update (baselines' PPO2 as in
    train-procgen, CleanRL's ppo_procgen) where the options say so, plus speed fixes that do
    not change learning. `tests/test_ppo_reference.py` holds it equal to CleanRL's loop.

    The update, option by option (its learner_config_dict: `learner_options`):
    - GAE advantages stay raw (`ReferenceGAE` replaces RLlib's batch-wide standardization);
      `advantage_norm` standardizes them per minibatch (PPO2, CleanRL), per batch over real
      rows (2020's RLlib), or as RLlib's new stack does (whole batch, bootstrap rows in).
    - `minibatching: shuffle`: a fresh permutation of the real transitions every epoch, exactly
      num_epochs x train_batch / minibatch minibatches of exactly minibatch_size real rows
      (`shuffled_minibatches`). RLlib's own iterator shuffles only when it wraps around, so its
      first epoch walks whole trajectories in order, and its bootstrap rows take minibatch
      slots. `rllib` keeps RLlib's iterator, with exactly that many minibatches.
    - `vf_clip_mode: ppo2`: PPO2's value clipping (see `ppo2_value_excess`).
    - The KL penalty's coefficient adapts on the mean KL of the update's last epoch, as 2020's
      RLlib's did (`update_kl_coeff`; RLlib's new stack: the last minibatch's).
    - Adam with `adam_eps` (PPO2 and CleanRL use 1e-5; torch's default is 1e-8).

    Speed and memory, same numbers:
    - GAE runs under `no_grad` and reuses the values the rollout computed (`ReferenceGAE`)
      instead of a second trunk pass over the whole batch; what still needs the network (the
      bootstrap rows) runs in minibatch-sized chunks. Not with `overlap` (a batch sampled
      with older weights): GAE then runs the network over every row, in the same chunks.
    - The batch is built from the episodes in one piece (`EpisodesToTrainBatch`, in place of
      RLlib's default learner connectors): the observations are copied once, not twice.

    And a fix: a restored fixed learning rate is the config's, not the checkpoint's: restoring
    loads the optimizer state, lr included, so a PBT-perturbed lr would silently revert for an
    iteration (ray#62173). Entropy and clip come from the config already.

    RLlib's private Learner methods and state are reached through `LearnerHooks`
    (rlsweep._ray_compat, which names the Ray version each was checked against). The minibatch
    permutation generator is saved and restored with a trial's checkpoints
    (`rlsweep.trial.checkpoint.rng_state`).
    """

    def build(self) -> None:
        super().build()
        opts = self.config.learner_config_dict
        self._shuffle_rng = torch.Generator().manual_seed(int(opts.get(SHUFFLE_SEED, 0)))
        self._episodes_left_whole = False
        self._nonfinite_grads: torch.Tensor | None = None  # on the device: see apply_gradients
        self._finite_checked: list[tuple[torch.Tensor, set]] = []  # this minibatch's clipping
        # Each module's KL of its last epoch's minibatches, on the device: see update_kl_coeff.
        per_epoch = self.minibatches_per_epoch(self.config.minibatch_size)
        self._epoch_kls: dict[str, deque[torch.Tensor]] = defaultdict(
            lambda: deque(maxlen=per_epoch)
        )
        connector = self.learner_connector
        if connector is None or not self.config.add_default_connectors_to_learner_pipeline:
            return
        connector.remove(GeneralAdvantageEstimation)
        connector.append(
            ReferenceGAE(
                gamma=self.config.gamma,
                lambda_=self.config.lambda_,
                chunk_rows=self.config.minibatch_size,
                rollout_values=bool(opts.get(ROLLOUT_VALUES, True)),
            )
        )
        pieces = tuple(type(c) for c in connector.connectors[: len(RLLIB_EPISODE_PIECES)])
        single = set(self.module.keys()) == {DEFAULT_MODULE_ID}
        if (
            pieces == RLLIB_EPISODE_PIECES
            and single
            and not self.module[DEFAULT_MODULE_ID].is_stateful()
        ):
            for piece in RLLIB_EPISODE_PIECES:
                connector.remove(piece)
            connector.prepend(EpisodesToTrainBatch(device=self.device))
            self._episodes_left_whole = True

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        # RLlib's TorchLearner default, with Adam's epsilon from the config.
        params = self.get_parameters(self.module[module_id])
        eps = float(config.learner_config_dict.get(ADAM_EPS, 1e-8))
        self.register_optimizer(
            module_id=module_id,
            optimizer=torch.optim.Adam(params, eps=eps),
            params=params,
            lr_or_lr_schedule=config.lr,
        )

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        if config.learner_config_dict.get(ADVANTAGE_NORM) == "minibatch":
            adv = standardize(batch[Postprocessing.ADVANTAGES], batch.get(Columns.LOSS_MASK))
            batch = {**batch, Postprocessing.ADVANTAGES: adv}
        total = self.rllib_ppo_loss(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )
        clip = config.learner_config_dict.get(PPO2_VF_CLIP)
        if clip is None:
            return total
        # RLlib's term is the plain squared error here (its clamp is off, see ppo_config):
        # adding the excess makes it max(unclipped, clipped), PPO2's value loss. The values are
        # recomputed from the trunk's embeddings: one linear layer, no second trunk pass.
        if Columns.VF_PREDS not in batch:
            raise RuntimeError("vf_clip_mode ppo2 needs the rollout's value estimates (vf_preds)")
        values = (
            self.module[module_id]
            .unwrapped()
            .compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
        )
        targets = batch[Postprocessing.VALUE_TARGETS]
        unclipped = (values - targets) ** 2
        excess = ppo2_value_excess(values, batch[Columns.VF_PREDS], targets, clip)
        if Columns.LOSS_MASK in batch:
            mask = batch[Columns.LOSS_MASK]
            excess, unclipped = excess[mask], unclipped[mask]
        self.metrics.log_value(
            (module_id, VF_LOSS_KEY), (unclipped + excess).mean().detach(), window=1
        )
        return total + config.vf_loss_coeff * excess.mean()

    def rllib_ppo_loss(self, *, module_id, config, batch, fwd_out) -> torch.Tensor:
        """RLlib's PPO loss and its metrics (PPOTorchLearner.compute_loss_for_module, Ray 2.60),
        the same operations in the same order, less its two copies from the host per
        minibatch, each a wait for the GPU (a blocking host-to-device copy syncs the stream):
        the zero KL term (`torch.tensor(0.0, device=...)`, made on the device here) and
        explained_variance's -1 floor (`torch.tensor([-1.0]).to(device)`, a clamp here). It
        keeps the minibatch's mean KL for the coefficient's update (`update_kl_coeff`).
        `tests/test_learner_syncs.py` holds both equal, loss and metrics."""
        module = self.module[module_id].unwrapped()
        if Columns.LOSS_MASK in batch:
            mask = batch[Columns.LOSS_MASK]
            num_valid = torch.sum(mask)

            def possibly_masked_mean(data_):
                return torch.sum(data_[mask]) / num_valid

        else:
            possibly_masked_mean = torch.mean

        curr_action_dist = module.get_train_action_dist_cls().from_logits(
            fwd_out[Columns.ACTION_DIST_INPUTS]
        )
        logp_ratio = torch.exp(
            curr_action_dist.logp(batch[Columns.ACTIONS]) - batch[Columns.ACTION_LOGP]
        )
        if config.use_kl_loss:
            prev_action_dist = module.get_exploration_action_dist_cls().from_logits(
                batch[Columns.ACTION_DIST_INPUTS]
            )
            mean_kl_loss = possibly_masked_mean(prev_action_dist.kl(curr_action_dist))
        else:
            mean_kl_loss = torch.zeros((), device=logp_ratio.device)
        curr_entropy = curr_action_dist.entropy()
        mean_entropy = possibly_masked_mean(curr_entropy)
        advantages = batch[Postprocessing.ADVANTAGES]
        surrogate_loss = torch.min(
            advantages * logp_ratio,
            advantages * torch.clamp(logp_ratio, 1 - config.clip_param, 1 + config.clip_param),
        )
        if config.use_critic:
            value_fn_out = module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
            vf_loss = torch.pow(value_fn_out - batch[Postprocessing.VALUE_TARGETS], 2.0)
            vf_loss_clipped = torch.clamp(vf_loss, 0, config.vf_clip_param)
            mean_vf_loss = possibly_masked_mean(vf_loss_clipped)
            mean_vf_unclipped_loss = possibly_masked_mean(vf_loss)
        else:
            z = torch.zeros((), device=surrogate_loss.device)
            value_fn_out = mean_vf_unclipped_loss = vf_loss_clipped = mean_vf_loss = z
        entropy_coeff = self.entropy_coeff_schedulers_per_module[module_id].get_current_value()
        total_loss = possibly_masked_mean(
            -surrogate_loss
            + config.vf_loss_coeff * vf_loss_clipped
            - (entropy_coeff * curr_entropy)
        )
        if config.use_kl_loss:
            total_loss += self.curr_kl_coeffs_per_module[module_id] * mean_kl_loss
            self._epoch_kls[module_id].append(mean_kl_loss.detach())
        self.metrics.log_dict(
            {
                POLICY_LOSS_KEY: -possibly_masked_mean(surrogate_loss),
                VF_LOSS_KEY: mean_vf_loss,
                LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY: mean_vf_unclipped_loss,
                LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY: explained_variance(
                    batch[Postprocessing.VALUE_TARGETS], value_fn_out
                ),
                ENTROPY_KEY: mean_entropy,
                LEARNER_RESULTS_KL_KEY: mean_kl_loss,
            },
            key=module_id,
            window=1,
        )
        return total_loss

    def update_kl_coeff(self, *, module_id, config, kl_loss: float) -> None:
        """The KL coefficient adapts on the mean KL of the update's last epoch, as 2020's RLlib
        adapted it (its minibatch SGD's fetches, averaged over the last epoch), not on the last
        minibatch's alone (RLlib's new API stack): one host sync per update."""
        if kls := self._epoch_kls.pop(module_id, None):
            kl_loss = float(torch.stack(list(kls)).mean())
        super().update_kl_coeff(module_id=module_id, config=config, kl_loss=kl_loss)

    def postprocess_gradients_for_module(self, *, module_id, config=None, module_gradients_dict):
        """Learner.postprocess_gradients_for_module (Ray 2.60) where `grad_clip_by` is
        global_norm (rlsweep's): the same clipping and the same logged norm, in a few
        multi-tensor ops (`clip_by_global_norm`) where RLlib's `clip_gradients` runs some six per
        parameter (~220 per minibatch for the IMPALA net, each a kernel launch on a GPU). What
        it learns on the way, whether each gradient is finite, spares `apply_gradients` its
        own check per parameter."""
        if not config.grad_clip or config.grad_clip_by != "global_norm":
            return super().postprocess_gradients_for_module(
                module_id=module_id, config=config, module_gradients_dict=module_gradients_dict
            )
        clipped = {}
        for name, optimizer in self.get_optimizers_for_module(module_id):
            grads = self.filter_param_dict_for_optimizer(
                param_dict=module_gradients_dict, optimizer=optimizer
            )
            present = {ref: g for ref, g in grads.items() if g is not None}
            global_norm, finite = clip_by_global_norm(list(present.values()), config.grad_clip)
            self._finite_checked.append((finite, set(present)))
            self.metrics.log_value(
                key=(module_id, f"gradients_{name}_global_norm"), value=global_norm, window=1
            )
            clipped.update(grads)
        return clipped

    def apply_gradients(self, gradients_dict) -> None:
        """TorchLearner.apply_gradients (Ray 2.60) with `torch_skip_nan_gradients` False, its
        default and rlsweep's, without its waits for the GPU: RLlib asks every gradient
        `torch.isfinite(grad).all()` twice per minibatch (before setting it, and again before
        the step), a host sync each (2 x 36 per minibatch for the IMPALA net), and replaces a
        non-finite gradient by `nan_to_num(grad)`. nan_to_num is the identity on finite
        values, so here every gradient goes through it: the same numbers, no waits. Whether
        one was non-finite is kept on the device and warned of once per update
        (`warn_nonfinite_gradients`). With torch grad scalers or lr schedulers (rlsweep sets
        neither) or `torch_skip_nan_gradients`, RLlib's own."""
        checked, self._finite_checked = self._finite_checked, []
        if self.config.torch_skip_nan_gradients or self.torch_step_extras:
            return super().apply_gradients(gradients_dict)
        finite = [flag for flag, _ in checked]  # by `postprocess_gradients_for_module`
        covered = set().union(*(refs for _, refs in checked))
        for param, grad in gradients_dict.items():  # TorchLearner's param refs: the params
            if param not in covered:
                finite.append(torch.isfinite(grad).all())
            param.grad = torch.nan_to_num(grad)
        if finite:
            nonfinite = torch.stack(finite).logical_not().any()
            seen = self._nonfinite_grads
            self._nonfinite_grads = nonfinite if seen is None else seen | nonfinite
        for module_id in self.module.keys():  # noqa: SIM118 (a MultiRLModule has no __iter__)
            for _, optimizer in self.get_optimizers_for_module(module_id):
                optimizer.step()

    def warn_nonfinite_gradients(self) -> None:
        """RLlib's warning for `nan/inf` gradients, once per update: one wait for the GPU."""
        nonfinite, self._nonfinite_grads = self._nonfinite_grads, None
        if nonfinite is not None and bool(nonfinite):
            logger.warning(
                "Gradients contained `nan/inf` values in this update: set to zero "
                "(torch_skip_nan_gradients False)."
            )

    def make_batch(self, training_data):
        with torch.no_grad():
            batch = super().make_batch(training_data)
        if training_data.episodes is not None and self._episodes_left_whole:
            # RLlib counts the batch's env steps after its pipeline lengthened every episode
            # by its bootstrap row; EpisodesToTrainBatch leaves the episodes as they are.
            batch.count += len(training_data.episodes)
        self.standardize_advantages(batch)
        return batch

    def standardize_advantages(self, batch: MultiAgentBatch) -> None:
        """`advantage_norm` batch or rllib: the whole batch's advantages, standardized in
        place (minibatch: in the loss; none: left raw)."""
        norm = self.config.learner_config_dict.get(ADVANTAGE_NORM)
        for b in batch.policy_batches.values():
            if Postprocessing.ADVANTAGES not in b:
                continue
            adv = b[Postprocessing.ADVANTAGES]
            if norm in ("rllib", "batch"):
                # RLlib's `standardized` (numpy's std, at least 1e-4): over the whole batch as
                # its new stack's GeneralAdvantageEstimation does (rllib), or over the real
                # transitions as its 2020 StandardizeFields did (batch).
                mask = b.get(Columns.LOSS_MASK) if norm == "batch" else None
                real = adv if mask is None else adv[mask]
                b[Postprocessing.ADVANTAGES] = (adv - real.mean()) / real.std(
                    unbiased=False
                ).clamp_min(1e-4)

    def minibatch_iterator(
        self, *, training_data, num_epochs: int = 1, minibatch_size: int | None = None, **kwargs
    ):
        minibatching = self.config.learner_config_dict.get(MINIBATCHING)
        if (
            minibatching not in ("shuffle", "fixed")
            or training_data.data_iterators
            or not minibatch_size
        ):
            return super().minibatch_iterator(
                training_data=training_data,
                num_epochs=num_epochs,
                minibatch_size=minibatch_size,
                **kwargs,
            )
        return shuffled_minibatches(
            self.make_batch(training_data),
            num_epochs=num_epochs,
            minibatch_size=minibatch_size,
            minibatches_per_epoch=self.minibatches_per_epoch(minibatch_size),
            generator=self._shuffle_rng,
            fixed=minibatching == "fixed",
        )

    def minibatches_per_epoch(self, minibatch_size: int) -> int:
        """Minibatches of `minibatch_size` in an epoch of the batch (PPO2's and CleanRL's: the
        batch's whole minibatches, a remainder left out)."""
        return max(1, self.config.train_batch_size_per_learner // minibatch_size)

    def update(self, *args, num_total_minibatches: int = 0, **kwargs):
        # The lr this update trains with (RLlib logs the lr after the update's schedule step).
        for module_id in self.module.keys():  # noqa: SIM118 (a MultiRLModule has no __iter__)
            for _, optimizer in self.get_optimizers_for_module(module_id)[:1]:
                lr = self.optimizer_lr(optimizer)
                self.metrics.log_value((module_id, LR_IN_UPDATE), float(lr), window=1)
        minibatch = kwargs.get("minibatch_size")
        if not num_total_minibatches and minibatch:
            # RLlib's iterator (minibatching: rllib) otherwise runs an extra, mostly repeated
            # minibatch per epoch for the artificial bootstrap timesteps.
            per_epoch = self.minibatches_per_epoch(minibatch)
            num_total_minibatches = kwargs.get("num_epochs", 1) * per_epoch
        results = super().update(*args, num_total_minibatches=num_total_minibatches, **kwargs)
        self.warn_nonfinite_gradients()
        return results


def clip_by_global_norm(
    grads: list[torch.Tensor], clip: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLlib's `clip_gradients(grad_clip_by="global_norm")` (ray.rllib.utils.torch_utils, Ray
    2.60), in place, with the global norm it returns, and whether every gradient was finite
    (its norm is; a finite gradient whose norm overflows float32 would count as not). The same
    operations on the same numbers (each gradient's L2 norm, its infinities capped at 1e9, the
    norm of those, the coefficient min(1, clip / max(norm + 1e-6, clip))), but each gradient's
    norm and product come from one multi-tensor op over all of them: on a GPU a handful of
    kernels instead of some six per gradient. Equal to RLlib's on the CPU
    (`tests/test_learner_syncs.py`); on a GPU the multi-tensor norm may round its last bit
    otherwise, as torch's own `clip_grad_norm_` does."""
    if not grads:
        return torch.tensor(0.0), torch.tensor(True)
    norms = torch.stack(torch._foreach_norm(grads, 2.0))
    finite = torch.isfinite(norms).all()
    total = torch.norm(norms.nan_to_num(neginf=-10e8, posinf=10e8), 2.0)
    total = total.nan_to_num(neginf=-10e8, posinf=10e8)
    coeff = torch.clamp(clip / torch.clamp(total + 1e-6, min=clip), max=1.0)
    torch._foreach_mul_(grads, coeff)
    return total, finite


def explained_variance(y: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    """RLlib's explained_variance (ray.rllib.utils.torch_utils), max(-1, 1 - var(y - pred) /
    var(y)), with its floor a clamp instead of a tensor copied from the host."""
    y = y.squeeze()
    diff_var = torch.var(y - pred.squeeze(), dim=0)
    return (1 - (diff_var / (torch.var(y, dim=0) + SMALL_NUMBER))).clamp(min=-1.0)


def ppo2_value_excess(
    values: torch.Tensor, old_values: torch.Tensor, targets: torch.Tensor, clip: float
) -> torch.Tensor:
    """max(unclipped, clipped) - unclipped, per sample, of PPO2's value loss, where unclipped =
    (v - target)^2 and clipped = (v_old + clamp(v - v_old, -clip, clip) - target)^2: what PPO2
    adds to a plain squared error. Positive only where the value moved more than `clip` towards
    (or past) its target: there the clipped error counts, and it has no gradient."""
    clipped_values = old_values + (values - old_values).clamp(-clip, clip)
    return torch.relu((clipped_values - targets) ** 2 - (values - targets) ** 2)
