"""`rlsweep doctor`: the real checks on this machine (a CPU machine: it passes, the missing GPU
is reported), and the failure paths: a system library unavailable (a loader that refuses it),
`import envpool` failing as on a node whose wheelhouse lacked MyoSuite's metadata, no GPU with
`--gpu`, a check that raises, a subprocess that segfaults or hangs. Each failure leaves the
other checks' lines in place."""

import json
import textwrap

import pytest

from rlsweep.cli import main
from rlsweep.node import doctor

NAMES = ["python", "torch", "cuda", "gpu-mem", "ray", "qt", "envpool", "procgen"]


@pytest.fixture
def broken_envpool(tmp_path, monkeypatch):
    """An `envpool` ahead of the real one on the subprocesses' path that fails as the issue's
    node did (envpool/entry.py reading metadata of a skipped wheel)."""
    package = tmp_path / "shadow" / "envpool"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        'raise FileNotFoundError("could not find MyoSuite generated metadata '
        'myosuite_tasks.json")\n'
    )
    monkeypatch.setenv("PYTHONPATH", str(package.parent))


def test_this_machine_passes_and_reports_the_missing_gpu(tmp_path, capsys):
    report = tmp_path / "doctor.json"
    assert main(["doctor", "--json", str(report)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == NAMES  # one line per check, in order
    result = json.loads(report.read_text())
    status = {c["name"]: c["status"] for c in result["checks"]}
    assert result["passed"] and not result["gpu_required"]
    assert status == {
        "python": "ok",
        "torch": "ok",
        "cuda": "info",  # this machine has no GPU: reported, not a failure
        "gpu-mem": "info",
        "ray": "ok",
        "qt": "ok",
        "envpool": "ok",
        "procgen": "ok",
    }
    procgen = next(c for c in result["checks"] if c["name"] == "procgen")
    assert "frames (4, 3, 64, 64) uint8" in procgen["detail"]


def test_no_gpu_with_gpu_and_a_broken_envpool_fail_without_hiding_the_rest(
    broken_envpool, tmp_path, capsys
):
    report = tmp_path / "doctor.json"
    assert main(["doctor", "--gpu", "--json", str(report)]) == 1
    out = capsys.readouterr().out
    checks = {c["name"]: c for c in json.loads(report.read_text())["checks"]}
    assert {n: c["status"] for n, c in checks.items()} == {
        "python": "ok",
        "torch": "ok",
        "cuda": "FAIL",
        "gpu-mem": "info",
        "ray": "ok",
        "qt": "ok",
        "envpool": "FAIL",
        "procgen": "FAIL",
    }
    assert "myosuite_tasks.json" in checks["envpool"]["detail"]
    assert checks["procgen"]["detail"].startswith("FileNotFoundError: could not find MyoSuite")
    assert "FAIL  cuda      no CUDA: torch" in out and "-> install torch's CUDA build" in out


def test_cuda_without_a_gpu_is_information_unless_required():
    assert doctor.check_cuda(gpu=False).status == doctor.INFO
    required = doctor.check_cuda(gpu=True)
    assert required.status == doctor.FAIL and required.fix


def test_a_missing_system_library_fails_the_qt_check_naming_it_and_its_package(
    libraries_unavailable,
):
    libraries_unavailable("libGLdispatch.so.0")
    check = doctor.check_qt()
    assert check.status == doctor.FAIL
    assert check.detail.startswith("cannot load libGLdispatch.so.0 (libglvnd0)")
    assert check.fix.startswith("apt-get install -y libglvnd0")
    assert "libGLdispatch.so.0 (libglvnd0)" in check.line() and "-> apt-get" in check.line()


def test_a_check_that_raises_fails_alone(monkeypatch):
    def broken():
        raise RuntimeError("boom")

    monkeypatch.setattr(
        doctor, "checks", lambda gpu: [("python", doctor.check_python), ("ray", broken)]
    )
    results = list(doctor.run())
    assert [(c.name, c.status) for c in results] == [("python", "ok"), ("ray", "FAIL")]
    assert results[1].detail == "the check raised RuntimeError: boom"
    assert not doctor.passed(results)


def test_a_subprocess_check_reports_the_signal_that_killed_it():
    ok, text = doctor.run_python("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", 60)
    assert not ok and text.startswith("the process died of SIGSEGV")


def test_a_subprocess_check_reports_its_exception_not_a_destructors_noise():
    code = textwrap.dedent(
        """
        class Half:
            def __del__(self):
                raise AttributeError("'Half' object has no attribute '_pool'")
        half = Half()
        raise FileNotFoundError("the real cause")
        """
    )
    assert doctor.run_python(code, 60) == (False, "FileNotFoundError: the real cause")


def test_a_subprocess_check_that_hangs_fails_at_its_timeout():
    assert doctor.run_python("import time; time.sleep(30)", 1) == (False, "no answer in 1 s")
