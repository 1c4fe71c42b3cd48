"""The progress view's numbers and lines, from Tune-like trial objects (no Ray)."""

import io
from dataclasses import dataclass, field

from rlsweep.progress import ProgressView, duration
from rlsweep.spec import SweepSpec


@dataclass
class Trial:
    trial_id: str
    status: str
    config: dict
    last_result: dict = field(default_factory=dict)


SPEC = SweepSpec(name="p", games=["coinrun"], seeds=[0, 1, 2, 3], budget=1000)


def _trial(i: int, status: str, steps: float, score: float | None = None) -> Trial:
    result = {"env_steps": steps} if steps else {}
    if score is not None:
        result["test/return_norm"] = score
    return Trial(f"t{i}", status, {"game": "coinrun", "seed": i}, result)


def test_eta_is_the_remaining_budget_at_the_measured_throughput():
    view = ProgressView(SPEC, stream=io.StringIO())
    view.measure([_trial(0, "RUNNING", 0)], now=0.0)
    trials = [
        _trial(0, "TERMINATED", 1000, 0.2),
        _trial(1, "RUNNING", 500, 0.5),
        _trial(2, "ERROR", 300),  # no more work: a failed trial's budget is not waited for
    ]  # the 4th trial not created yet
    snap = view.measure(trials, now=10.0)
    assert (snap.done, snap.errors, snap.running, snap.pending) == (2, 1, 1, 1)
    assert snap.steps == 1800 and snap.total_steps == 4000
    assert snap.steps_per_s == 180.0
    assert snap.eta_s == (500 + 1000) / 180.0
    assert snap.best == (0.5, "coinrun s1")
    assert snap.line("test/return_norm") == (
        "trials 2/4 done (1 failed), 1 running, 1 pending | env steps 1,800/4,000 (45%) | "
        "180 steps/s | ETA 8s | best test/return_norm 0.5 (coinrun s1)"
    )


def test_plain_lines_without_ansi_when_not_a_terminal():
    out = io.StringIO()  # not a TTY: no live bar, plain lines
    view = ProgressView(SPEC, stream=out, interval_s=3600)
    view.start()
    view.on_step_end(0, [_trial(0, "RUNNING", 0)])
    view.on_step_end(1, [_trial(0, "RUNNING", 0)])  # nothing changed: no line
    view.say("a note")
    view.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\x1b" not in out.getvalue()
    assert lines[0].endswith(
        "trials 0/4 done, 1 running, 3 pending | env steps 0/4,000 (0%) | - steps/s | ETA -"
    )
    assert lines[1].endswith("] a note")


def test_duration():
    assert [duration(s) for s in (45, 151, 3720)] == ["45s", "2m31s", "1h02m"]
