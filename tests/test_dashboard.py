"""The Ray dashboard during a real sweep (real RLlib on Procgen; marked `rllib`): bound to
127.0.0.1, its HTTP API shows the trial running, and headless Chromium renders the page.

The screenshot needs Debian's `chromium` (`.ci/run` installs it); without it that part is
skipped, with the reason."""

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from rlsweep.experiment.interrupt import SweepInterrupted
from rlsweep.run.session import Dashboard
from rlsweep.run.sweep import run_sweep
from rlsweep.spec.spec import SweepSpec

pytestmark = pytest.mark.rllib

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
COOKIE = "ray-authentication-token"  # what the dashboard's login form sets


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_token() -> str:
    """Ray >= 2.5x protects a new cluster's dashboard with a token (~/.ray/auth_token)."""
    if token := os.environ.get("RAY_AUTH_TOKEN"):
        return token
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token"
    return Path(path).read_text().strip()


def _get(url: str, token: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
        return json.loads(r.read())


def _poll(fn, timeout: float, what: str):
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            if got := fn():
                return got
        except OSError as e:  # not up yet
            last = e
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def _outside_address() -> str | None:
    """This machine's address on its network (not loopback), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent for UDP connect
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def screenshot(url: str, path: Path, token: str | None, settle_s: float = 8.0) -> None:
    """Headless Chromium, driven over the DevTools protocol: with the dashboard's token set as
    its login cookie (what the login form does), open `url`, let the app render, save a PNG."""
    profile = path.parent / "chromium-profile"
    proc = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # runs as root in CI
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",  # the network is closed: no update checks
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--window-size=1400,900",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        _poll(lambda: port_file.exists() and port_file.read_text().strip(), 60, "DevTools")
        devtools = int(port_file.read_text().split()[0])
        pages = _get(f"http://127.0.0.1:{devtools}/json/list")
        ws_url = next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")
        png = asyncio.run(_capture(ws_url, url, token, settle_s))
        path.write_bytes(png)
    finally:
        proc.kill()
        proc.wait(timeout=30)


async def _capture(ws_url: str, url: str, token: str | None, settle_s: float) -> bytes:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.ws_connect(ws_url, max_msg_size=0) as ws:
        ids = iter(range(1, 1000))

        async def call(method: str, **params) -> dict:
            n = next(ids)
            await ws.send_json({"id": n, "method": method, "params": params})
            async for msg in ws:
                reply = json.loads(msg.data)
                if reply.get("id") == n:
                    assert "error" not in reply, reply
                    return reply["result"]
            raise AssertionError(f"DevTools closed during {method}")

        await call("Network.enable")
        if token:
            await call("Network.setCookie", name=COOKIE, value=token, url=url.split("#")[0])
        await call("Page.navigate", url=url)
        await asyncio.sleep(settle_s)  # the React app fetches and renders
        shot = await call("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])


def _look(base: str, port: int, tmp_path: Path) -> None:
    """What a user sees of the running sweep: the dashboard's API, behind its token; the
    trial's actor; loopback only; the page, rendered by headless Chromium where installed."""
    mode = _poll(lambda: _get(f"{base}/api/authentication_mode"), 180, "the dashboard")
    token = ray_token() if mode["authentication_mode"] == "token" else None
    if token:  # the API refuses requests without the token
        with pytest.raises(urllib.error.HTTPError, match="401"):
            _get(f"{base}/api/version")
    version = _get(f"{base}/api/version", token)
    assert version["ray_version"] == "2.60.0"
    # The trial's actor shows up in the State API while the sweep runs.
    actors = _poll(
        lambda: [
            a
            for a in _get(f"{base}/api/v0/actors?limit=200", token)["data"]["result"]["result"]
            if a["state"] == "ALIVE" and "ImplicitFunc" in a["class_name"]
        ],
        180,
        "the trial's actor",
    )
    assert len(actors) == 1
    nodes = _get(f"{base}/nodes?view=summary", token)
    assert nodes["result"] is True and len(nodes["data"]["summary"]) == 1
    # Loopback only: the machine's own network address refuses the port.
    if (ip := _outside_address()) is not None:
        with pytest.raises(OSError), socket.create_connection((ip, port), timeout=3):
            pass
    if CHROMIUM is not None:
        png = tmp_path / "dashboard.png"
        screenshot(f"{base}/#/overview", png, token)
        import matplotlib.image

        pixels = matplotlib.image.imread(png)
        assert pixels.shape[1] == 1400 and pixels.shape[0] > 500
        assert np.asarray(pixels).std() > 0.05  # a rendered page, not a blank one


def test_dashboard_during_a_real_sweep(tmp_path, capsys):
    """The sweep runs in the main thread, as `rlsweep run` does, while another thread looks at
    its dashboard and then presses Ctrl-C (SIGINT): the sweep stops as soon as it has been
    seen, its trial checkpointed, rather than run out a budget long enough to look at."""
    port = _free_port()
    spec = SweepSpec(
        name="watched",
        games=["leaper"],
        seeds=[0],
        budget=1000 * 256,  # far longer than the look: Ctrl-C ends it
        params={
            "num_envs_per_env_runner": 16,
            "rollout_length": 16,
            "minibatch_size": 128,
            "num_epochs": 1,
            "eval_interval": 10,
            "eval_episodes": 4,
        },
        storage_path=str(tmp_path / "results"),
    )
    base = f"http://127.0.0.1:{port}"
    failed: list[BaseException] = []
    swept = threading.Event()

    def look_then_ctrl_c() -> None:
        try:
            _look(base, port, tmp_path)
        except BaseException as e:  # raised in the test's thread, once the sweep has stopped
            failed.append(e)
        # Only while the sweep's handler is in place (its Tuner.fit): Python's own would raise
        # KeyboardInterrupt into pytest.
        while signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            if swept.wait(0.2):
                return
        os.kill(os.getpid(), signal.SIGINT)

    looker = threading.Thread(target=look_then_ctrl_c)
    looker.start()
    try:
        with pytest.raises(SweepInterrupted) as stopped:
            run_sweep(spec, num_cpus=2, dashboard=Dashboard(port=port))
    finally:
        swept.set()
        looker.join(timeout=600)
    assert not looker.is_alive()
    if failed:
        raise failed[0]
    assert stopped.value.exit_code == 128 + signal.SIGINT
    (row,) = stopped.value.result.trials.itertuples()
    assert row.status == "INCOMPLETE"  # checkpointed, to resume
    assert f"Ray dashboard at {base}" in capsys.readouterr().out
    if CHROMIUM is None:
        pytest.skip("chromium not installed: dashboard API checked, no screenshot taken")
