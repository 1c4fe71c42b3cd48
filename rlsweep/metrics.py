"""Stable metric names every trial reports; tests, tables and reports use only these."""

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
EVAL_S = "time/eval_s"
"""Seconds of time/wall_s spent evaluating (train and test levels)."""
TRAIN_EPISODE_RETURN_MEAN = "train/episode_return_mean"
"""RLlib's rolling mean over the last 100 training episodes that finished: biased towards short
episodes early in training, so not a score; kept to watch training."""
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

TRIAL_ERROR = "trial/error"
"""Set (to the reason) on the last report of a trial that stopped itself as failed, e.g. on a
non-finite loss. Divergence is a result, not a crash: Tune's retry from the last checkpoint
would replay the same updates, so the trial ends instead of raising."""

TRIAL_DONE = "trial/done"
"""True on a trial's last report (budget reached, or diverged). Tune stops the trial on it
before any scheduler sees the result: otherwise a scheduler could pause (synchronous PBT) or
clone into (asynchronous PBT) a trial on its way out, and the resumed trial would report its
last iteration again, forever."""

NODE_ID = "trial/node_id"
"""Ray node the trial's process ran on (a retried trial may move to another node)."""
