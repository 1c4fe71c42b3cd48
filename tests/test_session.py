"""rlsweep.run.session: the trials' env, Ray asked about without importing it, and the driver's
console: Ray's noise goes to the experiment's driver.log."""

import logging
import os
import subprocess
import sys
from pathlib import Path

from rlsweep._ray_compat import DRIVER_LOGS
from rlsweep.experiment.experiment_dir import DRIVER_LOG
from rlsweep.run.session import JEMALLOC_CONF, quiet_console, runtime_env


def test_trials_run_at_normal_priority_with_rays_jemalloc():
    assert runtime_env(jemalloc=False) == {"env_vars": {"RAY_worker_niceness": "0"}}
    env = runtime_env()["env_vars"]
    assert env["RAY_worker_niceness"] == "0" and env["MALLOC_CONF"] == JEMALLOC_CONF
    assert Path(env["LD_PRELOAD"]).name == "libjemalloc.so" and Path(env["LD_PRELOAD"]).is_file()


def test_whether_ray_runs_is_asked_without_importing_it():
    """`rlsweep validate` asks (through `fits.check_fits`) before anything imports Ray; the
    answer must not cost Ray's import."""
    code = (
        "import sys; from rlsweep.run.session import ray_running; "
        "print(ray_running(), 'ray' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "False"]


def test_rays_noise_goes_to_the_driver_log_unless_verbose(tmp_path):
    """Ray's log records a user cannot act on (`_ray_compat.DRIVER_LOGS`) reach the experiment's
    driver.log instead of the console; --verbose shows the noisy ones, never those rlsweep says
    itself; other records pass."""
    shown: list[str] = []

    class Console(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            shown.append(record.getMessage())

    console = Console()
    logging.getLogger("ray").addHandler(console)  # where Ray's own console handler sits
    try:
        for verbose in (False, True):
            experiment = tmp_path / f"verbose={verbose}"
            with quiet_console(str(experiment), verbose):
                for line in DRIVER_LOGS:
                    logging.getLogger(line.owner).warning(f"[{line.attribute}] ...")
                logging.getLogger("ray.tune.tune").warning("something else")
            logged = (experiment / DRIVER_LOG).read_text()
            for line in DRIVER_LOGS:
                on_console = any(line.attribute in m for m in shown)
                assert on_console is (verbose and line.verbose), (verbose, line)
                assert (line.attribute in logged) is not on_console, (verbose, line)
            assert shown.count("something else") == 1 and "something" not in logged
            shown.clear()
        logging.getLogger("ray.tune.utils.util").warning("which may be a performance bottleneck")
        assert shown == ["which may be a performance bottleneck"]  # filters removed on exit
    finally:
        logging.getLogger("ray").removeHandler(console)


def test_a_sweep_that_starts_ray_keeps_its_token_warning_off_the_console(tmp_path):
    """End to end, in a fresh process (Ray warns of token auth once per process, when it
    starts a cluster): a sweep that starts Ray prints no Ray warning; driver.log holds it."""
    code = (
        "import sys\n"
        "from rlsweep.spec.spec import SweepSpec\n"
        "from rlsweep.run.sweep import run_sweep\n"
        "from rlsweep.testing import fake_trial\n"
        "spec = SweepSpec(name='quiet', budget=16384, storage_path=sys.argv[1])\n"
        "run_sweep(spec, trainable=fake_trial, num_cpus=1)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    p = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert "WARNING" not in p.stderr and "Token authentication" not in p.stderr, p.stderr
    assert "Token authentication is enabled" in (tmp_path / "quiet" / "driver.log").read_text()


def test_joining_a_cluster_says_what_it_has_and_what_others_hold(ray_local, monkeypatch, capsys):
    """Issue 40: `--address auto` joined another job's Ray and sat at `0 started` without a
    word; joining now prints the cluster's address, CPUs and GPUs, and what other jobs hold."""
    import types

    import ray
    from ray.util import placement_group, remove_placement_group

    from rlsweep.run import session

    other_job = placement_group([{"CPU": 1}])
    ray.get(other_job.ready(), timeout=60)
    try:
        assert session.cluster_line("10.0.0.1:6379") == (
            "rlsweep: joined the Ray cluster at 10.0.0.1:6379: 1 node, 2 CPUs, 0 GPUs; other "
            "jobs hold 1 CPU, 0 GPUs (free: 1 CPU, 0 GPUs)"
        )
    finally:
        remove_placement_group(other_job)
    # Said once per cluster and process: validate's join, then run's, print it once.
    ctx = types.SimpleNamespace(address_info={"address": "10.0.0.2:6379"}, dashboard_url=None)
    monkeypatch.setattr(ray, "init", lambda **kw: ctx)
    monkeypatch.setattr(session, "cluster_line", lambda address: f"joined {address}")
    for _ in range(2):
        session._init("auto", None, jemalloc=False, dashboard=None, verbose=False)
    assert capsys.readouterr().out == "joined 10.0.0.2:6379\n"


def test_joining_this_processs_own_plain_ray_warns_that_its_trials_run_at_nice_15(
    ray_local, monkeypatch, capsys
):
    """A Ray this process started with a plain `ray.init()` is joined as it is: its workers
    start at Ray's nice 15 and without jemalloc, and the sweep says so, once. A Ray started as a
    sweep starts its own (ray_local) gives no warning."""
    from rlsweep.run import session

    warning = session.niceness_warning({}, {})
    assert warning.startswith("rlsweep: warning: joined the Ray this process already runs;")
    assert "ray.init(runtime_env=rlsweep.run.session.runtime_env())" in warning
    for jemalloc in (True, False):
        assert session.niceness_warning(session.runtime_env(jemalloc), {}) is None
    assert session.niceness_warning({}, {session.NICENESS: "0"}) is None  # a Ray started here
    assert session.niceness_warning({"env_vars": {session.NICENESS: "5"}}, {}) is not None

    monkeypatch.delenv(session.NICENESS, raising=False)
    with session.ray_session(address=None, num_cpus=None, jemalloc=True, dashboard=None):
        pass
    assert capsys.readouterr().out == ""  # ray_local: started as a sweep starts its own

    # A real plain ray.init() in a process of its own (a new local Ray, whatever else runs on
    # the machine): its workers run at nice 15, and the sweep that joins it says so, once.
    script = (
        "import os, ray\n"
        "from rlsweep.run import session\n"
        "ray.init(address='local', num_cpus=1, include_dashboard=False, log_to_driver=False)\n"
        "print('niceness', ray.get(ray.remote(lambda: os.nice(0)).remote()))\n"
        "for _ in range(2):\n"
        "    with session.ray_session(address=None, num_cpus=None, jemalloc=True, dashboard=None):"
        "\n        pass\n"
        "ray.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (session.NICENESS, "RAY_ADDRESS")}
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == ["niceness 15", warning], run.stdout
