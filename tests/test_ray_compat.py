"""The private Ray/RLlib names rlsweep relies on still exist, and only rlsweep._ray_compat names
them. Fast: builds a Learner and a W&B callback object; one test starts a local Ray (~10 s) to
see that `quiet_local_ray` reaches it."""

import inspect
import logging
import logging.handlers
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import ray

from rlsweep._ray_compat import (
    CHECKED,
    HOOKS,
    QUIET_REPORTER_INTERVAL_MS,
    QUIET_SYSTEM_CONFIG,
    SYSTEM_CONFIG,
    EnvRunnerHooks,
    LearnerHooks,
    OptimizerHooks,
    TextFilter,
    quiet_local_ray,
    ray_session_dir,
    resolve,
)

PACKAGE = Path(__file__).resolve().parents[1] / "rlsweep"


def _instances() -> dict[str, object]:
    """One object per owner whose hooked attributes are set by its __init__."""
    from ray import tune
    from ray._private.parameter import RayParams
    from ray.air.integrations.wandb import WandbLoggerCallback
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.train._internal.checkpoint_manager import _CheckpointManager
    from ray.train._internal.storage import StorageContext
    from ray.tune.search.optuna import OptunaSearch
    from ray.tune.utils.util import Tee

    runner = SingleAgentEnvRunner(config=PPOConfig().environment("CartPole-v1"))
    runner.stop()
    storage = tempfile.mkdtemp(prefix="rlsweep-hooks-")
    tuner = tune.Tuner(lambda config: None, run_config=tune.RunConfig(storage_path=storage))
    return {
        "ray.tune.tuner.Tuner": tuner,
        "ray.tune.impl.tuner_internal.TunerInternal": tuner._local_tuner,
        "ray.tune.search.optuna.optuna_search.OptunaSearch": OptunaSearch(metric="m", mode="max"),
        "ray.rllib.core.learner.learner.Learner": PPOTorchLearner(config=PPOConfig()),
        "ray.rllib.algorithms.algorithm_config.AlgorithmConfig": PPOConfig(),
        "ray.rllib.env.single_agent_env_runner.SingleAgentEnvRunner": runner,
        "ray.rllib.env.env_runner.EnvRunner": runner,
        "ray.air.integrations.wandb.WandbLoggerCallback": WandbLoggerCallback(
            project="p", mode="offline"
        ),
        "ray._private.parameter.RayParams": RayParams(),
        "ray.tune.utils.util.Tee": Tee(sys.stdout, sys.stderr),
        "ray.train._internal.checkpoint_manager._CheckpointManager": _CheckpointManager(None),
        "ray.train._internal.storage.StorageContext": StorageContext(
            storage_path="/tmp", experiment_dir_name="e"
        ),
    }


def test_every_hooked_name_exists_on_the_installed_ray():
    instances = _instances()
    missing = []
    for hook in HOOKS:
        if hook.kind == "file":
            ok = os.path.exists(os.path.join(os.path.dirname(ray.__file__), hook.attribute))
        elif hook.kind in ("log", "env"):  # the owner still says it, or reads it, so named
            ok = hook.attribute in inspect.getsource(resolve(hook.owner))
        elif hook.kind == "built":
            ok = hook.attribute in inspect.getsource(vars(resolve(hook.owner))["build"])
        elif hook.kind == "parameter":
            ok = hook.attribute in inspect.signature(resolve(hook.owner)).parameters
        elif hook.kind == "instance":
            ok = hasattr(instances[hook.owner], hook.attribute)
        else:
            ok = hasattr(resolve(hook.owner), hook.attribute)
        if not ok:
            missing.append(f"{hook.owner}.{hook.attribute} (checked {hook.checked}): {hook.use}")
    assert not missing, "gone from this Ray:\n" + "\n".join(missing)


def test_hooks_were_checked_against_the_installed_ray():
    # An upgrade is deliberate: re-read each hook's Ray source, then bump CHECKED.
    assert ray.__version__ == CHECKED
    assert {h.checked for h in HOOKS} == {CHECKED}
    kinds = ("class", "instance", "built", "parameter", "file", "log", "env")
    assert all(h.kind in kinds for h in HOOKS)


def test_the_mixins_public_names_do_not_shadow_rllibs():
    """LearnerHooks', OptimizerHooks' and EnvRunnerHooks' public names must stay free in RLlib
    (on the class and on its instances), or a Ray upgrade would silently route RLlib's own calls
    to them."""
    from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    instances = _instances()
    for mixin, rllib_class, owner in (
        (LearnerHooks, PPOTorchLearner, "ray.rllib.core.learner.learner.Learner"),
        (OptimizerHooks, PPOTorchLearner, "ray.rllib.core.learner.learner.Learner"),
        (
            EnvRunnerHooks,
            SingleAgentEnvRunner,
            "ray.rllib.env.single_agent_env_runner.SingleAgentEnvRunner",
        ),
    ):
        instance = instances[owner]
        public = [n for n in vars(mixin) if not n.startswith("_")]
        assert public
        assert [n for n in public if hasattr(rllib_class, n) or n in vars(instance)] == []
        private = [n for n in vars(mixin) if n.startswith("_") and not n.startswith("__")]
        hooked = {h.attribute for h in HOOKS}
        assert set(private) <= hooked


def _sources() -> dict[str, str]:
    return {
        str(p.relative_to(PACKAGE.parent)): p.read_text()
        for p in PACKAGE.rglob("*.py")
        if p.name != "_ray_compat.py"
    }


# RLlib documents RLModule's _forward* methods as what a custom module overrides: they are
# overridden in rlsweep/trial/rl_module.py (and `_forward` is a common name elsewhere).
_OVERRIDDEN_IN_PLACE = "ray.rllib.core.rl_module.rl_module.RLModule"


def test_no_other_module_names_a_private_ray_name():
    offenders = []
    for path, text in _sources().items():
        for hook in HOOKS:
            name = hook.attribute.split("/")[-1]
            if hook.owner != _OVERRIDDEN_IN_PLACE and re.search(rf"\b{re.escape(name)}\b", text):
                offenders.append(f"{path}: {name}")
        for pattern in (r"ray\._private", r"_internal\b", r"from ray[\w.]* import [^\n]*\b_[a-z]"):
            if re.search(pattern, text):
                offenders.append(f"{path}: {pattern}")
    assert offenders == []


def test_a_text_filter_holds_back_the_records_it_names_and_hands_them_on():
    """A trial's filter drops them; the driver's hands them to its driver log instead."""
    logger = logging.getLogger("rlsweep.tests.text_filter")
    logger.propagate = False
    shown, diverted = logging.handlers.BufferingHandler(10), logging.handlers.BufferingHandler(10)
    logger.addHandler(shown)
    for f in (TextFilter(["noise"]), TextFilter(["timing"], to=diverted)):
        logger.addFilter(f)
    logger.warning("a real problem")
    logger.warning("some %s the user cannot act on", "noise")
    logger.warning("Tune's %s of its own loop", "timing")
    assert [r.getMessage() for r in shown.buffer] == ["a real problem"]
    assert [r.getMessage() for r in diverted.buffer] == ["Tune's timing of its own loop"]


def test_quiet_local_ray_is_undone_on_exit(monkeypatch):
    from ray._private.parameter import RayParams

    monkeypatch.delenv("REPORTER_UPDATE_INTERVAL_MS", raising=False)
    init = RayParams.__init__
    with quiet_local_ray(log_monitor=False, dashboard=False) as kwargs:
        assert kwargs == {"_system_config": {**SYSTEM_CONFIG, **QUIET_SYSTEM_CONFIG}}
        assert os.environ["REPORTER_UPDATE_INTERVAL_MS"] == str(QUIET_REPORTER_INTERVAL_MS)
        assert RayParams().include_log_monitor is False
        assert RayParams(include_log_monitor=True).include_log_monitor is True
    assert RayParams.__init__ is init and RayParams().include_log_monitor is None
    assert "REPORTER_UPDATE_INTERVAL_MS" not in os.environ

    # A dashboard or a verbose console gets Ray as it comes; a user's own setting survives.
    monkeypatch.setenv("REPORTER_UPDATE_INTERVAL_MS", "1234")
    with quiet_local_ray(log_monitor=True, dashboard=True) as kwargs:
        assert kwargs == {"_system_config": SYSTEM_CONFIG}  # no Ray prestarts unused workers
        assert RayParams().include_log_monitor is None
        assert os.environ["REPORTER_UPDATE_INTERVAL_MS"] == "1234"
    with quiet_local_ray(log_monitor=True, dashboard=False):
        assert os.environ["REPORTER_UPDATE_INTERVAL_MS"] == str(QUIET_REPORTER_INTERVAL_MS)
    assert os.environ["REPORTER_UPDATE_INTERVAL_MS"] == "1234"


def test_a_sweeps_local_ray_runs_quiet():
    """Through `session.ray_session`, as `run_sweep` starts Ray: the RayConfig overrides reach
    the GCS (which hands them to every raylet and worker), no log monitor runs, and the only
    worker started is the trial's (with Ray's defaults, one per CPU is prestarted first, without
    the sweep's runtime env, and reaped unused)."""
    from ray._private import ray_constants, state, worker

    from rlsweep.run.session import ray_session

    @ray.remote(num_cpus=1)
    class Trial:
        def pid(self) -> int:
            return os.getpid()

    assert not ray.is_initialized()
    with ray_session(address=None, num_cpus=1, jemalloc=False, dashboard=None):
        processes = dict(worker._global_node.all_processes)
        config = state.state.get_system_config()
        trial = ray.get(Trial.remote().pid.remote())
        raylet_log = Path(ray_session_dir(), "logs", "raylet.out")
        pattern = r"Started worker process with pid (\d+)"
        deadline = time.monotonic() + 10  # in case the raylet has not flushed the line yet
        while str(trial) not in (started := re.findall(pattern, raylet_log.read_text())):
            assert time.monotonic() < deadline, started
            time.sleep(0.2)
    assert started == [str(trial)]
    assert config.items() >= {**SYSTEM_CONFIG, **QUIET_SYSTEM_CONFIG}.items()
    assert ray_constants.PROCESS_TYPE_LOG_MONITOR not in processes
    assert ray_constants.PROCESS_TYPE_RAYLET in processes
