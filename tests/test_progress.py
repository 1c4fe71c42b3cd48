"""The progress view's numbers and lines, from Tune-like trial objects (no Ray)."""

import io
from dataclasses import dataclass, field

import pytest

from rlsweep.plan.plan import Costs, Throughput
from rlsweep.run.progress import ProgressView
from rlsweep.spec.spec import SweepSpec


@dataclass
class Trial:
    trial_id: str
    status: str
    config: dict
    last_result: dict = field(default_factory=dict)
    local_path: str | None = None


TINY = {
    "num_envs_per_env_runner": 16,
    "rollout_length": 16,  # 256 env steps per iteration
    "minibatch_size": 128,
    "eval_interval": 2,
    "eval_episodes": 2,  # coinrun: an evaluation is counted as 2 x 2 x 1000 env steps
}
SPEC = SweepSpec(name="p", games=["coinrun"], seeds=[0, 1, 2, 3], budget=1024, params=TINY)
# The plan's prior: 10 s per 256-step iteration, 40 s per evaluation, 20 s to start a trial.
PRIOR = Throughput(
    Costs(
        vector_step_s=0.0,
        env_step_s=1 / 25.6,
        minibatch_s=0.0,
        sample_s=0.0,
        iteration_s=0.0,
        eval_steps_per_cpu_s=100.0,
        trial_start_s=20.0,
        ray_start_s=0.0,
    )
)


def _trial(
    i: int,
    status: str,
    iteration: int = 0,
    wall_s: float = 0.0,
    eval_s: float = 0.0,
    score: float | None = None,
) -> Trial:
    result = {}
    if iteration:
        result = {
            "training_iteration": iteration,
            "env_steps": 256 * iteration,
            "time/wall_s": wall_s,
            "time/eval_s": eval_s,
        }
    if score is not None:
        result["test/return_norm"] = score
    return Trial(f"t{i}", status, {"game": "coinrun", "seed": i}, result)


def test_eta_is_the_plans_model_fitted_to_what_trials_took():
    view = ProgressView(SPEC, stream=io.StringIO(), throughput=PRIOR)
    assert view.measure([_trial(0, "RUNNING")], now=0.0).eta_s is None  # nothing reported yet
    # Trials train at half the prior's speed (20 s per iteration) and evaluate in 30 s (not 40).
    trials = [
        _trial(0, "TERMINATED", 4, 4 * 20 + 2 * 30, 2 * 30, 0.2),
        _trial(1, "RUNNING", 2, 2 * 20 + 30, 30, 0.5),  # reported just now
        _trial(2, "ERROR", 1, 20),  # no more work: a failed trial's budget is not waited for
    ]  # the 4th trial not created yet
    snap = view.measure(trials, now=100.0)
    assert (snap.done, snap.errors, snap.running, snap.pending) == (2, 1, 1, 1)
    assert snap.steps == 7 * 256 and snap.total_steps == 4 * 1024
    # Left: trial 1's 2 iterations and 1 evaluation (70 s) while the 4th runs whole: its start
    # (20 s at the training pace: 40 s) and 4 iterations, 2 evaluations (140 s).
    assert view._slots == 1 and snap.eta_s == pytest.approx(70 + 40 + 140)
    # Between reports the running trial's remainder counts down with the clock.
    assert view.measure(trials, now=110.0).eta_s == pytest.approx(60 + 180)
    assert snap.best == (0.5, "coinrun s1")
    assert snap.line("test/return_norm").startswith(
        "trials 2/4 done (1 failed), 1 running, 1 pending | env steps 1,792/4,096 (44%) | "
    )
    assert snap.line("test/return_norm").endswith(
        "ETA 4m10s | best test/return_norm 0.5 (coinrun s1)"
    )


def _sweep_timeline(start_s: float, iteration_s: float, evaluation_s: float, slots: int):
    """A sweep of SPEC's 4 trials, `slots` at a time: each starts, then runs 4 iterations,
    evaluating after the 2nd and 4th. Returns (trials at time `now`, the sweep's end)."""
    reports = []  # per trial: (time of the report, iteration, wall_s, eval_s)
    free = [0.0] * slots
    for _ in range(4):
        slot = min(range(slots), key=free.__getitem__)
        t, wall, evals, rows = free[slot] + start_s, 0.0, 0.0, []
        for it in range(1, 5):
            wall += iteration_s
            if it % 2 == 0:
                wall += evaluation_s
                evals += evaluation_s
            rows.append((t + wall, it, wall, evals))
        reports.append((free[slot], rows))
        free[slot] = t + wall
    end = max(free)

    def at(now: float) -> list[Trial]:
        trials = []
        for i, (begin, rows) in enumerate(reports):
            done = [r for r in rows if r[0] <= now]
            status = "PENDING" if now < begin else "RUNNING"
            if len(done) == len(rows):
                status = "TERMINATED"
            _, it, wall, evals = done[-1] if done else (0, 0, 0.0, 0.0)
            trials.append(_trial(i, status, it, wall, evals))
        return trials

    return at, end


def test_eta_does_not_swing_with_evaluations():
    """Evaluations that take 6x an iteration (and 1.5x what the plan's prior says): once the
    first one has been reported, now + ETA stays within 10% of when the sweep really ends (an
    ETA from env steps per second swung by 2x, dropping while trials evaluated and jumping when
    they were back)."""
    at, end = _sweep_timeline(start_s=15.0, iteration_s=10.0, evaluation_s=60.0, slots=2)
    view = ProgressView(SPEC, stream=io.StringIO(), throughput=PRIOR)
    first_evaluation = 15.0 + 2 * 10.0 + 60.0
    predicted = []
    for now in range(0, int(end)):
        eta = view.measure(at(float(now)), now=float(now)).eta_s
        if now >= first_evaluation:
            predicted.append(now + eta)
    assert len(predicted) > 200
    assert max(abs(p - end) for p in predicted) <= 0.1 * end, (min(predicted), max(predicted), end)


def test_best_so_far_never_goes_down():
    view = ProgressView(SPEC, stream=io.StringIO(), throughput=PRIOR)
    assert view.measure([_trial(0, "RUNNING", 2, 50, 30, 0.00203)], now=1).best == (
        0.00203,
        "coinrun s0",
    )
    # The trial's next evaluation is worse: "best" is still the best reported so far.
    later = view.measure([_trial(0, "RUNNING", 4, 100, 60, 0.0), _trial(1, "RUNNING")], now=2)
    assert later.best == (0.00203, "coinrun s0")
    assert "best test/return_norm 0.00203 (coinrun s0)" in later.line("test/return_norm")


def test_a_resumed_sweep_s_best_counts_the_reports_before_the_resume(tmp_path):
    """A restored trial's last report is its checkpoint's (a finished one's, its last
    evaluation): the best fell at a resume, from -0.00321 to -0.00962. Its earlier reports are
    in its result.json, read once, when the trial is first seen."""
    import json
    from dataclasses import replace

    rows = [{"training_iteration": i, "test/return_norm": x} for i, x in ((1, 0.7), (2, 0.2))]
    (tmp_path / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    view = ProgressView(SPEC, stream=io.StringIO(), throughput=PRIOR)
    finished = replace(_trial(0, "TERMINATED", 2, 50, 30, 0.2), local_path=str(tmp_path))
    assert view.measure([finished], now=1).best == (0.7, "coinrun s0")
    (tmp_path / "result.json").write_text(json.dumps({"test/return_norm": 0.9}) + "\n")
    assert view.measure([finished], now=2).best == (0.7, "coinrun s0")  # read once


def test_a_score_that_is_not_a_number_is_never_the_best():
    """A NaN first report (no evaluation yet) would stand as "best nan" for the rest of the
    sweep: no number compares above it."""
    view = ProgressView(SPEC, stream=io.StringIO(), throughput=PRIOR)
    assert view.measure([_trial(0, "RUNNING", 1, 10, 0, float("nan"))], now=1).best is None
    later = view.measure([_trial(0, "RUNNING", 2, 50, 30, 0.5)], now=2)
    assert later.best == (0.5, "coinrun s0")


def test_a_trial_is_named_by_its_searched_values_as_the_report_labels_them():
    """A sampled lr reads as in the report's labels (`formatting.searched`): 2.24e-4, not
    0.000224; a grid's value as written."""
    spec = SPEC.with_overrides(
        space={"lr": {"loguniform": [1e-5, 1e-3]}, "gamma": [0.99, 0.999]},
        search={"algorithm": "random"},
    )
    view = ProgressView(spec, stream=io.StringIO(), throughput=PRIOR)
    trial = _trial(0, "RUNNING", 2, 50, 30, 0.5)
    trial.config |= {"lr": 0.00022434347458680692, "gamma": 0.999}
    assert view.measure([trial], now=1).best == (0.5, "coinrun s0 lr=2.24e-4 gamma=0.999")


def test_plain_lines_without_ansi_when_not_a_terminal():
    out = io.StringIO()  # not a TTY: no live bar, plain lines
    view = ProgressView(SPEC, stream=out, interval_s=3600, throughput=PRIOR)
    view.start()
    view.on_step_end(0, [_trial(0, "RUNNING")])
    view.on_step_end(1, [_trial(0, "RUNNING")])  # nothing changed: no line
    view.say("a note")
    view.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\x1b" not in out.getvalue()
    assert lines[0].endswith(
        "trials 0/4 done, 1 running, 3 pending | env steps 0/4,096 (0%) | - steps/s | ETA -"
    )
    assert lines[1].endswith("] a note")


def test_the_step_counter_never_goes_back_nor_past_the_total():
    """Issue 40: at a resume a restored trial reports again from its checkpoint (6,194 ->
    5,165 was shown), and a trial's last batch may overshoot its budget (33,029/32,768)."""
    view = ProgressView(SPEC, stream=io.StringIO(), throughput=PRIOR)
    assert view.measure([_trial(0, "RUNNING", 3)], now=1).steps == 768
    assert view.measure([_trial(0, "RUNNING", 2)], now=2).steps == 768  # restored at 2
    trials = [_trial(i, "TERMINATED", 5) for i in range(4)]  # 1,280 steps each of 1,024
    snap = view.measure(trials, now=3)
    assert snap.steps == snap.total_steps == 4 * 1024
    assert "env steps 4,096/4,096 (100%)" in snap.line("test/return_norm")


def test_a_trial_no_node_holds_says_so_though_the_cluster_has_enough_free():
    """A 1-CPU head with the GPU beside an 8-CPU worker: 9 CPUs and the GPU are free in all,
    but a trial of 2 CPUs and the GPU goes on one node, and none has both: it never starts.
    Counted over the cluster, nothing looked short, and the progress line said nothing."""
    from rlsweep.run.progress import STARVED_S, Resources

    nodes = ({"CPU": 1.0, "GPU": 1.0}, {"CPU": 8.0})
    state = Resources({"CPU": 9.0, "GPU": 1.0}, {"CPU": 9.0, "GPU": 1.0}, False, nodes)
    gpu = SweepSpec(name="g", seeds=[0, 1], budget=16384, params={"num_gpus": 1, "num_cpus": 2})
    view = ProgressView(gpu, stream=io.StringIO(), throughput=PRIOR, resources=lambda: state)
    pending = [_trial(i, "PENDING") for i in range(2)]
    view.measure(pending, now=0.0)
    assert view.measure(pending, now=STARVED_S).waiting == (
        "no trial can start: 2 pending, each needs 2 CPUs + 1 GPU on one node, and no node has "
        "as much (1 CPU + 1 GPU; 8 CPUs)"
    )


def test_a_sweep_whose_trials_cannot_start_says_why_within_seconds():
    from rlsweep.run.progress import STARVED_S, Resources

    state = Resources(total={"CPU": 2.0}, free={"CPU": 0.0}, starting=False)
    asked = []
    view = ProgressView(
        SPEC, stream=io.StringIO(), throughput=PRIOR, resources=lambda: asked.append(1) or state
    )
    pending = [_trial(i, "PENDING") for i in range(4)]
    assert view.measure(pending, now=100.0).waiting is None  # just started: no word yet
    assert view.measure(pending, now=100.0 + STARVED_S - 1).waiting is None and not asked
    snap = view.measure(pending, now=100.0 + STARVED_S)
    assert snap.waiting == (
        "no trial can start: 4 pending, each needs 1 CPU; free 0 of 2 CPUs (others hold 2)"
    )
    assert snap.line("test/return_norm").endswith(snap.waiting)
    # A trial of the sweep is starting (its placement group is ready): not starved.
    state = Resources(total={"CPU": 2.0}, free={"CPU": 0.0}, starting=True)
    assert view.measure(pending, now=200.0).waiting is None
    # Running trials: the others simply queue.
    assert view.measure([_trial(0, "RUNNING"), *pending[1:]], now=300.0).waiting is None
    # Plain lines: printed as soon as it is known (not at the next 30 s line).
    out = io.StringIO()
    state = Resources(total={"CPU": 2.0, "GPU": 1.0}, free={"CPU": 2.0}, starting=False)
    gpu = SweepSpec(name="g", seeds=[0, 1], budget=16384, params={"num_gpus": 1})
    view = ProgressView(gpu, stream=out, interval_s=3600, throughput=PRIOR, resources=lambda: state)
    view.on_step_end(0, [_trial(0, "PENDING")])
    view._idle_since -= STARVED_S
    view.on_step_end(1, [_trial(0, "PENDING")])
    assert (
        out.getvalue()
        .splitlines()[-1]
        .endswith(
            "no trial can start: 2 pending, each needs 1 CPU + 1 GPU; free 2 of 2 CPUs, 0 of 1 GPU "
            "(others hold 1)"
        )
    )


def test_the_sweeps_own_starting_trials_are_not_taken_for_other_jobs(monkeypatch):
    """The placement groups of other jobs were taken as those there were at the first ask of
    Ray, which came only once no trial had run for STARVED_S: by then the sweep's own were
    made, so its trials starting (actors slow to come up on 2 cores) read as "no trial can
    start ... (others hold 2)". They are taken before Tune's loop (`start`) now."""
    import sys
    import types

    from rlsweep.run.progress import STARVED_S

    groups: dict[str, dict] = {"other-job": {"state": "CREATED"}}
    fake = types.SimpleNamespace(
        is_initialized=lambda: True,
        cluster_resources=lambda: {"CPU": 2.0},
        available_resources=lambda: {"CPU": 0.0},
        nodes=lambda: [{"Alive": True, "Resources": {"CPU": 2.0}}],
    )
    util = types.ModuleType("ray.util")
    util.placement_group_table = lambda: dict(groups)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setitem(sys.modules, "ray.util", util)
    view = ProgressView(SPEC, stream=io.StringIO(), throughput=PRIOR, live=False)
    view.start()  # before Tune's loop: the other job's group only
    groups["sweep-trial-0"] = {"state": "CREATED"}  # Tune made the trial's; its actor comes up
    pending = [_trial(i, "PENDING") for i in range(4)]
    view.measure(pending, now=0.0)
    assert view.measure(pending, now=STARVED_S).waiting is None
