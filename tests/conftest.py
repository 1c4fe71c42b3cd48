"""Shared fixtures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers on two cores, each with torch's two OpenMP threads and trial processes
    # beside them: threads waiting for a descheduled peer spin by default, which doubled the
    # CPU time of the in-process torch tests (test_ppo_reference.py over two workers: 185 ->
    # 87 s wall, 339 -> 137 s user). Set before anything loads torch; subprocesses (Ray's
    # trials, the CLI) inherit it. It changes how threads wait, no number.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class S3Server(NamedTuple):
    endpoint: str
    bucket: str
    secret: str
    """The fake secret key in the environment: tests check that it is stored nowhere."""


_S3_ENV = {
    "AWS_ACCESS_KEY_ID": "rlsweepFAKEkeyid",
    "AWS_SECRET_ACCESS_KEY": "rlsweepFAKEsecret123",  # distinctive, to grep for; moto takes any
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # never ask an instance-metadata service
    "AWS_CONFIG_FILE": os.devnull,  # no profile of whoever runs the tests
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
_S3_ENV_UNSET = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL")


def pytest_configure(config):
    """Under pytest-xdist (`make test`), before the workers start: the Ray login token that a
    new local Ray generates into ~/.ray/auth_token when there is none. Two workers starting
    their first Ray at once could each write one, a Ray already started then holding the
    token the file no longer has."""
    token_set = {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"} & set(os.environ)
    if (
        config.getoption("numprocesses", None)  # this is xdist's controller, workers to come
        and not hasattr(config, "workerinput")
        and not token_set
        and not (Path.home() / ".ray" / "auth_token").exists()
    ):
        subprocess.run(
            [sys.executable, "-m", "ray.scripts.scripts", "get-auth-token", "--generate"],
            check=True,
            capture_output=True,
        )


def pytest_collection_modifyitems(config, items):
    """Under xdist (`make test`: --dist loadscope), each module goes whole to a worker, in the
    order collected. The modules of tests taking tens of seconds each (marked rllib or slow; most
    of them first) go first, so that the quick modules fill in at the end rather than a long one
    running alone on one worker while the other has nothing left."""
    if not hasattr(config, "workerinput"):  # not an xdist worker: collection order
        return
    module = [item.nodeid.split("::")[0] for item in items]
    slow: dict[str, int] = {}
    for name, item in zip(module, items, strict=True):
        marked = item.get_closest_marker("rllib") or item.get_closest_marker("slow")
        slow[name] = slow.get(name, 0) + bool(marked)
    order = {name: (-slow[name], i) for i, name in enumerate(dict.fromkeys(module))}
    items[:] = [
        item for _, item in sorted(zip(module, items, strict=True), key=lambda x: order[x[0]])
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    """A real S3 endpoint on 127.0.0.1 (moto's server, in a subprocess) with one empty bucket.
    For the session the AWS SDK variables point at it with fake credentials, so boto3, pyarrow
    and Ray processes started meanwhile (they inherit the environment) use it and nothing can
    reach AWS."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    saved = dict(os.environ)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break  # answering
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start: {log.read_text()}") from None
                time.sleep(0.2)
        for key in _S3_ENV_UNSET:
            os.environ.pop(key, None)
        os.environ.update(_S3_ENV, AWS_ENDPOINT_URL_S3=endpoint)
        import boto3

        bucket = "rlsweep-test"
        boto3.client("s3").create_bucket(Bucket=bucket)
        yield S3Server(endpoint, bucket, _S3_ENV["AWS_SECRET_ACCESS_KEY"])
    finally:
        os.environ.clear()
        os.environ.update(saved)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_cli(*args: str, cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    """`rlsweep ARGS` in a fresh interpreter (as a user runs it), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "rlsweep.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _start_ray(num_cpus: int = 2):
    """A Ray started here as a sweep starts its own (`rlsweep.run.session.ray_session`; a
    sweep run in it joins it): its workers run as a user's trials do, at nice 0 with jemalloc,
    beside a quiet Ray. A plain `ray.init` leaves them at Ray's nice 15, where the other xdist
    worker's load starves them: beside two busy loops of 150 s, test_checkpoint's RNG test
    (a remote EnvRunner) ended only when they did, 150 s; started this way it took 37 s beside
    loops of 120 s (17 s alone)."""
    from rlsweep.run.session import ray_session

    return ray_session(address=None, num_cpus=num_cpus, jemalloc=True, dashboard=None)


@pytest.fixture(scope="session")
def start_ray():
    """`with start_ray(num_cpus):` a Ray for the block (`_start_ray`), for test modules that
    start their own."""
    return _start_ray


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray of 2 CPUs for the module's tests that build real RLlib algorithms or run
    sweeps in it (`_start_ray`)."""
    with _start_ray(2):
        yield


@pytest.fixture
def no_ray_running():
    """No Ray in this test's process when it starts (another test's is shut down): a sweep the
    test runs starts its own, with the test's environment (an env var another module's Ray
    would not carry), and whether the test started one can be told after."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def ray_sessions(monkeypatch) -> list[dict]:
    """The Ray sessions `run_sweep`/`resume_sweep` open (`rlsweep.run.session.ray_session`,
    where they start Ray; `fits.target_machine` also joins one that runs), each as its keyword
    arguments; each is opened as ever. Whether Ray runs after cannot tell: a module's own Ray
    may run, and a session that started one shuts it down as it ends."""
    from rlsweep.run import sweep

    opened, real = [], sweep.ray_session
    monkeypatch.setattr(sweep, "ray_session", lambda **kw: opened.append(kw) or real(**kw))
    return opened


@pytest.fixture(scope="session")
def rlsweep_cli():
    """`run_cli` for test modules (conftest is not importable from them)."""
    return run_cli


@pytest.fixture(scope="session")
def run_fake_sweep(tmp_path_factory):
    """Runs a real Tune sweep of `rlsweep.testing.fake_trial` (no RLlib) over both framestacks
    and seeds 0, 1 of the given games; returns (spec, SweepResult)."""

    def run(games: list[str], budget: int):
        from rlsweep.run.sweep import run_sweep
        from rlsweep.spec.spec import SweepSpec
        from rlsweep.testing import fake_trial

        spec = SweepSpec(
            name="fake",
            games=games,
            seeds=[0, 1],
            budget=budget,
            space={"framestack": ["none", "gap"]},
            storage_path=str(tmp_path_factory.mktemp("results")),
        )
        return spec, run_sweep(spec, trainable=fake_trial, num_cpus=2)

    return run


@pytest.fixture
def libraries_unavailable(monkeypatch):
    """`make(*sonames, qt=rlsweep.envs.qt)`: that qt module's loader refuses `sonames` as a system
    without them would (a missing file; libQt5Gui, which needs libGL and libGLX, fails with
    them) and loads everything else for real."""
    import ctypes

    import rlsweep.envs.qt

    def make(*sonames: str, qt=rlsweep.envs.qt) -> None:
        def dlopen(name: str, mode: int = ctypes.RTLD_LOCAL):
            base = name.rsplit("/", 1)[-1]
            if base == "libQt5Gui.so.5" and {"libGL.so.1", "libGLX.so.0"} & set(sonames):
                base = next(s for s in ("libGLX.so.0", "libGL.so.1") if s in sonames)
            if base in sonames:
                raise OSError(f"{base}: cannot open shared object file: No such file or directory")
            return ctypes.CDLL(name, mode=mode)

        monkeypatch.setattr(qt, "_dlopen", dlopen)

    return make
