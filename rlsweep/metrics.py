"""Stable metric names every trial reports; tests, tables and reports use only these.

Every report of a trial carries the same keys, in the same order (NaN, '' or False where a value
does not exist yet, e.g. scores before the first evaluation): Tune's progress.csv takes its
columns from a process's first report, also when a restored trial appends to it."""

ENV_STEPS = "env_steps"
TRAIN_RETURN = "train/return"
"""Mean raw return of one episode per evaluation env on the training levels (the evaluator of
test/return, at the same iterations)."""
TRAIN_RETURN_NORM = "train/return_norm"
TEST_RETURN = "test/return"
TEST_RETURN_NORM = "test/return_norm"
GAP_NORM = "gap/return_norm"
"""train/return_norm - test/return_norm: the generalization gap."""
WALL_S = "time/wall_s"
"""Seconds the trial has trained and evaluated, summed over its processes: a trial restored from
a checkpoint (`rlsweep resume`, a retry) counts on from the checkpoint's value (each process's
start-up before its first iteration is not counted)."""
EVAL_S = "time/eval_s"
"""Seconds of time/wall_s spent evaluating (train and test levels), summed as time/wall_s."""
TRAIN_EPISODE_RETURN_MEAN = "train/episode_return_mean"
"""RLlib's rolling mean over the last 100 training episodes that finished: biased towards short
episodes early in training, so not a score; kept to watch training."""
TRAIN_EPISODE_LENGTH_MEAN = "train/episode_length_mean"
"""Its episode length, over the same window."""
TRAIN_EPISODES_LIFETIME = "train/episodes_lifetime"
"""Training episodes finished so far (RLlib's count). `train/episodes` is the evaluator's."""
MODULE_STEPS_TRAINED = "train/module_steps_trained"
"""Samples trained on this iteration: 0 when no update ran (DQN before learning_starts, an
asynchronous IMPALA/APPO iteration without a full batch), and then the losses are NaN."""
LOSS_TOTAL = "loss/total"
LOSS_POLICY = "loss/policy"
LOSS_VALUE = "loss/value"
LOSS_ENTROPY = "loss/entropy"
LOSS_KL = "loss/kl"
HP_LR = "hp/lr"
"""The learning rate the iteration's update trained with (after PBT and schedules)."""
HP_ENTROPY_COEFF = "hp/entropy_coeff"
ENV_STEPS_PER_S = "time/env_steps_per_s"
"""Env steps taken in this process per wall-clock second of this process (a restored trial counts
from its restore, unlike the cumulative time/wall_s): the trial's current speed."""
JEMALLOC = "perf/jemalloc"
"""Whether jemalloc is loaded in the trial's process."""
NICE = "perf/nice"
"""The trial process's niceness (0 = the default priority; Ray's own default for workers is 15)."""
TORCH_THREADS = "perf/torch_threads"
"""torch's intra-op threads in the trial's process."""
PRECISION = "perf/precision"
"""The arithmetic the trial's network ran: fp32, tf32 or bf16 (its `precision`, `auto` resolved by
device: rlsweep.spec.subconfigs.resolved_precision)."""
DEVICE = "perf/device"
"""What the trial's learner ran on in this process, by name: its GPU's (`NVIDIA H100 80GB
HBM3`), or `CPU: <model>`. A trial resumed on another machine says so from its restore on."""
CPU_S = "perf/cpu_s"
"""CPU seconds the trial's process has used, all threads, plus those of the processes it was
restored from (summed as time/wall_s; benchmarks/throughput.py reads it). A process handed on
from an earlier trial (`perf/trials_before`) counts from this trial's start in it."""
TRIALS_BEFORE = "perf/trials_before"
"""Trials the trial's process ran before this one: 0 in a fresh process. Tune hands a finished
CPU trial's process to the next trial that needs the same resources, which so skips the
process's start (rlsweep.run.tune_bridge.reuses_processes)."""
TEST_FRESH = "test/fresh"
"""True on iterations that evaluated; others carry the last evaluation forward."""

METRICS = (
    ENV_STEPS,
    TRAIN_RETURN,
    TRAIN_RETURN_NORM,
    TEST_RETURN,
    TEST_RETURN_NORM,
    GAP_NORM,
    WALL_S,
    EVAL_S,
)

TUNE_STEPS = "timesteps_total"
"""Tune's own name for env steps (= env_steps): TensorBoard and Tune's progress table use it as
their x axis."""
TUNE_ITERATION = "training_iteration"
"""Tune's count of a trial's reports, each an iteration: the key of result.json's rows, of a
checkpoint's metrics and of the schedulers' time."""

TRIAL_ERROR = "trial/error"
"""The reason, on the last report of a trial that stopped itself as failed, e.g. on a
non-finite loss ('' on every other report). Divergence is a result, not a crash: Tune's retry
from the last checkpoint would replay the same updates, so the trial ends instead of raising."""

TRIAL_DONE = "trial/done"
"""True on a trial's last report (budget reached, or diverged). Tune stops the trial on it
before any scheduler sees the result: otherwise a scheduler could pause (synchronous PBT) or
clone into (asynchronous PBT) a trial on its way out, and the resumed trial would report its
last iteration again, forever."""

NODE_ID = "trial/node_id"
"""Ray node the trial's process ran on (a retried trial may move to another node)."""

TRIAL_INTERRUPTED = "trial/interrupted"
"""True on the report a trial makes when the sweep is interrupted (Ctrl-C, SIGTERM): it carries
the trial's last checkpoint, and the trial then waits to be stopped
(`rlsweep.experiment.interrupt`)."""

RESUMED_AT = "trial/resumed_at_iteration"
"""0 in a trial's first process; in a process restored from a checkpoint (`rlsweep resume`, a
retry after a crash, PBT), the iteration of that checkpoint. Its envs start new episodes there
(envpool cannot save an episode in progress), so its rows differ from an uninterrupted run's
from then on (README, "Resuming is not an exact continuation")."""
GPU_RESERVED_PEAK_GIB = "perf/gpu_reserved_peak_gib"
"""Peak GPU memory torch's caching allocator reserved in the trial's process on its GPU (GiB),
since the process started: what the trial holds there besides its CUDA context."""
GPU_ALLOCATED_PEAK_GIB = "perf/gpu_allocated_peak_gib"
"""Peak GPU memory the trial's tensors took at once (GiB), since the process started."""
GPU_LIMIT_GIB = "perf/gpu_limit_gib"
"""What the allocator may reserve (GiB): the trial's share of its GPU less the CUDA context
(rlsweep.plan.placement.memory_fraction), or the whole GPU's memory for a whole-GPU trial."""
GPU_METRICS = (GPU_RESERVED_PEAK_GIB, GPU_ALLOCATED_PEAK_GIB, GPU_LIMIT_GIB)
"""Reported by GPU trials only: absent from a CPU trial's results (no NaN columns for the
common case); results keep them as columns where any trial reported them."""
HOST_RSS_PEAK_GIB = "perf/host_rss_peak_gib"
"""Peak resident memory of the trial's process in the host's memory (GiB), since the process
started (`ru_maxrss`), or, in a process handed on from an earlier trial, since this trial began
there: its learner and network and, where it samples in its own process (`num_env_runners:
0`), its envs; env runners in processes of their own are not counted."""
MEMORY_METRICS = (HOST_RSS_PEAK_GIB, *GPU_METRICS)
"""A trial's memory figures: results keep each as a column where any trial reported it (trials
of rlsweeps before 2026-11-30 reported no host figure; CPU trials report no GPU one)."""
