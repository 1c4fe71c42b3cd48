"""The Tune bridge: a trial's resources, and PBT with the fake trainable and a Ray instance of
its own.

Asynchronous PBT exploits only among the trials that have reported at that moment, so whether
it exploits at all depends on timing: instant fake trials often finished before their partners
started (1 run in 5 here), and even pausing per iteration on 4 logical CPUs failed once on a
loaded CI machine. This test uses synchronous PBT (`search.synch`): at each perturbation the
whole population is ranked, so the worst trial always clones the best.
"""

import json
import re
from pathlib import Path

import pytest

from rlsweep.run.sweep import run_sweep
from rlsweep.run.tune_bridge import param_space, trial_resources
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import TRIAL_FILE, SweepSpec
from rlsweep.testing import ITER_S_ENV, fake_trial


@pytest.mark.parametrize(
    "params",
    [
        {"num_cpus": 1},
        {"num_cpus": 2, "num_env_runners": 3},
        {"num_gpus": 0.25, "num_cpus": 4},
        {"num_gpus": 0.5, "num_env_runners": 2},
        {"num_gpus": 1, "num_cpus": 8, "algorithm": "impala", "minibatch_size": 256},
        {"algorithm": "dqn", "num_env_runners": 1},
        {
            "num_env_runners": 2,
            "learner_resources": {"group_learner": 0.01},
            "env_runner_resources": {"group_rollout": 0.01},
        },
    ],
    ids=["cpu", "runners", "gpu-fraction", "gpu-and-runners", "impala-gpu", "dqn", "custom"],
)
def test_tune_reserves_what_rllib_would_request_for_the_trial(params):
    """Tune's placement group comes from rlsweep.plan.placement, without building an RLlib config;
    RLlib's own request for the trial's config (Algorithm.default_resource_request) is the
    same, bundle for bundle and in its packing."""
    from rlsweep.trial.algos import algorithm_config

    cfg = TrialConfig(**params)
    c = algorithm_config(cfg)
    assert trial_resources(cfg) == c.algo_class.default_resource_request(c)


def test_pbt_perturbs_and_keeps_the_perturbed_values(tmp_path, monkeypatch, no_ray_running):
    monkeypatch.setenv(ITER_S_ENV, "0.3")
    spec = SweepSpec(
        name="pbt",
        games=["coinrun"],
        seeds=[0, 1],
        budget=4 * 16384,
        space={"lr": {"loguniform": [1e-6, 1e-3]}},
        search={
            "algorithm": "random",
            "scheduler": "pbt",
            "perturbation_interval": 2,
            "mutations": ["lr"],
            "seed": 0,
            "synch": True,
        },
        storage_path=str(tmp_path),
    )
    df = run_sweep(spec, trainable=fake_trial, num_cpus=2).to_dataframe()
    assert (df["status"] == "TERMINATED").all()
    exploited = 0
    for trial_dir in df["trial_dir"]:
        rows = [json.loads(x) for x in (Path(trial_dir) / "result.json").read_text().splitlines()]
        lrs = [r["hp/lr"] for r in rows]
        for row in rows:  # what the trial reports is what its config says, before and after
            assert row["hp/lr"] == row["config"]["lr"]
        exploited += len(set(lrs)) > 1
        # Its record follows the perturbations, as params.json does: the lr it ended on.
        ran = json.loads((Path(trial_dir) / TRIAL_FILE).read_text())
        assert (
            ran["lr"] == lrs[-1] == json.loads((Path(trial_dir) / "params.json").read_text())["lr"]
        )
        # A member that cloned another keeps its own seed (PBT's exploit copied the clone's:
        # two members became seed 0 in the report, and none seed 1).
        seed = int(re.search(r"_s(\d+)_", Path(trial_dir).name)[1])
        assert {r["config"]["seed"] for r in rows} == {seed} and ran["seed"] == seed, trial_dir
        assert [r["training_iteration"] for r in rows] == [1, 2, 3, 4], trial_dir
    assert exploited >= 1
    assert sorted(df["seed"]) == [0, 1]


def test_the_spec_a_pbt_sweep_runs_keeps_what_its_file_wrote(tmp_path):
    """PBT's trial settings (a checkpoint and an evaluation at each perturbation) are the
    spec's defaults, so that what validate, plan and the progress view count is what Tune runs;
    the spec's params stay what its file wrote."""
    f = tmp_path / "pbt.yaml"
    f.write_text(
        "name: p\nspace: {lr: {loguniform: [1.0e-5, 1.0e-3]}}\n"
        "search: {algorithm: random, scheduler: pbt, mutations: [lr]}\n"
    )
    spec = SweepSpec.from_yaml(f)
    assert spec.params == {} and spec.default_warnings() != []
    assert spec.search_params() == {"checkpoint_interval": 5, "eval_interval": 5}
    (trial,) = spec.trials()
    assert (trial.eval_interval, trial.checkpoint_interval) == (5, 5)
    assert param_space(spec)["eval_interval"] == param_space(spec)["checkpoint_interval"] == 5
    plain = spec.with_overrides(search={"algorithm": "random"})
    assert plain.trials()[0].eval_interval == TrialConfig().eval_interval != 5


def test_param_space_runs_what_validate_shows(tmp_path):
    """A conditional parameter whose condition fails: the config Tune generates from
    param_space, resolved as the trial resolves it, holds the value `spec.trials()` shows
    (the spec's defaults: baseline + params, not TrialConfig()'s)."""
    from ray.tune.search.variant_generator import generate_variants

    from rlsweep.run.tune_bridge import param_space
    from rlsweep.spec.config import TrialConfig

    (tmp_path / "base.yaml").write_text("params: {augment_p: 0.5}\n")
    spec = SweepSpec(
        name="cond",
        extends=str(tmp_path / "base.yaml"),
        space={
            "augment": ["none", "crop_resize"],
            "augment_p": {"uniform": [0.1, 0.9], "when": {"augment": ["crop_resize"]}},
        },
        search={"algorithm": "random"},
    )
    shown = {t.augment: t for t in spec.trials()}
    for _, config in generate_variants(param_space(spec)):
        ran = TrialConfig.from_dict(spec.resolve(config))
        if ran.augment == "none":
            assert ran == shown["none"] and ran.augment_p == 0.5
        else:
            assert 0.1 <= ran.augment_p <= 0.9


def test_a_random_search_runs_each_drawn_configuration_in_every_cell():
    """`search.num_samples` configurations, drawn once from `search.seed`, each run on every
    game x seed and with every grid value, so that the report scores each over its seeds and
    games. Tune's own random search drew anew for every trial: 24 configurations of one run."""
    from ray.tune.search.variant_generator import generate_variants

    from rlsweep.run.tune_bridge import drawn_configurations, num_samples, param_space

    space = {
        "lr": {"loguniform": [1e-4, 1e-3]},
        "framestack": ["none", "gap"],
        "framestack_k": {"int": [2, 4], "when": {"framestack": ["gap"]}},
    }
    spec = SweepSpec(
        name="r",
        games=["starpilot", "bigfish"],
        seeds=[0, 1],
        space=space,
        search={"algorithm": "random", "num_samples": 3, "seed": 5},
    )
    runs: dict[tuple, set] = {}
    for _, config in generate_variants(param_space(spec)):
        t = TrialConfig.from_dict(spec.resolve(config))
        k = t.framestack_k if t.framestack == "gap" else None
        runs.setdefault((t.lr, k), set()).add((t.game, t.seed, t.framestack))
        if t.framestack == "none":
            assert t.framestack_k == TrialConfig().framestack_k  # its condition fails: default
    assert len(runs) == 6  # 3 drawn lr, each under none (k unread) and gap (its drawn k)
    cells = {(g, s) for g in spec.games for s in spec.seeds}
    for (lr, k), ran in runs.items():
        assert {(g, s) for g, s, _ in ran} == cells, (lr, k)  # every game x seed
    assert sum(len(ran) for ran in runs.values()) == 3 * 2 * 2 * 2
    assert num_samples(spec) == 1  # the grid once: the drawn configurations are one of its axes
    # Drawn from search.seed: the same configurations again, others from another seed.
    assert drawn_configurations(spec) == drawn_configurations(spec)
    other = spec.with_overrides(search={"algorithm": "random", "num_samples": 3, "seed": 6})
    assert drawn_configurations(other) != drawn_configurations(spec)
    assert [set(d) for d in drawn_configurations(spec)] == [{"lr", "framestack_k"}] * 3
    # PBT's population: each member draws its own start (one game, as PBT runs).
    pbt = SweepSpec(
        name="p",
        games=["starpilot"],
        seeds=[0, 1],
        space={"lr": {"loguniform": [1e-4, 1e-3]}},
        search={"algorithm": "random", "num_samples": 3, "scheduler": "pbt"},
    )
    assert drawn_configurations(pbt) == [] and num_samples(pbt) == 3


def test_a_drawn_condition_on_another_sampled_param_reads_the_same_draw():
    """`augment_p` sampled where the sampled `augment` augments: its condition reads augment's
    value in the same drawn configuration, whatever order Tune resolves them in (here
    augment_p is written first)."""
    from ray.tune.search.variant_generator import generate_variants

    from rlsweep.run.tune_bridge import drawn_configurations, param_space
    from rlsweep.spec.spec import SAMPLE

    space = {
        "augment_p": {"uniform": [0.2, 0.9], "when": {"augment": ["flip", "crop_resize"]}},
        "augment": {"choice": ["none", "flip", "crop_resize"]},
    }
    spec = SweepSpec(
        name="c",
        games=["starpilot"],
        seeds=[0, 1],
        space=space,
        search={"algorithm": "random", "num_samples": 8},
    )
    drawn = drawn_configurations(spec)
    ran = [
        (c[SAMPLE], TrialConfig.from_dict(spec.resolve(c)))
        for _, c in generate_variants(param_space(spec))
    ]
    assert len(ran) == 16
    for i, t in ran:
        assert t.augment == drawn[i]["augment"]
        expected = TrialConfig().augment_p if t.augment == "none" else drawn[i]["augment_p"]
        assert t.augment_p == expected, (i, t.augment)
    assert {t.augment for _, t in ran} >= {"none", "flip"}  # both sides of the condition


@pytest.mark.parametrize("algorithm", ["random", "optuna"])
def test_a_resume_creates_the_trials_not_created_yet_with_their_values(
    tmp_path, monkeypatch, no_ray_running, algorithm
):
    """Under `max_concurrent`, and under Optuna, Tune creates a trial only when it may start.
    Trials created after a resume ran with Tune's placeholders for their variants' and drawn
    values (`framestack: got ('__fn_ph', '763ba7cc')`): the resume failed as a bad input,
    exit 2, at its first such trial, and no such sweep with variants or drawn configurations
    could be finished."""
    import functools
    import os

    from rlsweep.experiment.interrupt import SweepInterrupted
    from rlsweep.run.sweep import resume_sweep
    from rlsweep.run.tune_bridge import drawn_configurations

    spec = SweepSpec(
        name="later",
        games=["coinrun"],
        seeds=[0],
        budget=4 * 16384,
        variants={"Gap": {"framestack": "gap"}, "Plain": {}},
        space={"lr": {"loguniform": [1e-4, 1e-3]}},
        search={"algorithm": algorithm, "num_samples": 2, "seed": 3},
        max_concurrent=1,
        storage_path=str(tmp_path),
    )
    monkeypatch.setenv(ITER_S_ENV, "0.5")  # the first trial stops before its budget
    ctrl_c = functools.partial(fake_trial, ctrl_c=os.getpid())
    with pytest.raises(SweepInterrupted) as stopped:
        run_sweep(spec, trainable=ctrl_c, num_cpus=2)
    assert len(stopped.value.result.trials) < 4  # some not created yet
    monkeypatch.setenv(ITER_S_ENV, "0")
    resumed = functools.partial(fake_trial)  # a partial, as the run's: Tune checks the name
    df = resume_sweep(tmp_path / "later", trainable=resumed, num_cpus=2).trials
    assert len(df) == 4 and (df["status"] == "TERMINATED").all(), df
    ran = [json.loads((Path(d) / TRIAL_FILE).read_text()) for d in df["trial_dir"]]
    # Each configuration (drawn here, proposed by Optuna) under both variants.
    lrs = sorted({r["lr"] for r in ran})
    if algorithm == "random":
        assert lrs == sorted(d["lr"] for d in drawn_configurations(spec))
    assert sorted((r["framestack"], r["lr"]) for r in ran) == sorted(
        (framestack, lr) for framestack in ("gap", TrialConfig().framestack) for lr in lrs
    )
    assert len(lrs) == 2


def test_a_space_s_ranges_go_to_tune_as_written():
    """`int: [1, 4]` draws 1 to 4, 4 too (Tune's randint excludes its upper bound); a q draws
    multiples of q up to the bound; a float range with q, multiples of q."""
    import numpy as np

    from rlsweep.run.tune_bridge import to_tune
    from rlsweep.spec.space import parse_space

    def drawn(raw: dict) -> set:
        (param,) = parse_space({"x": raw}).values()
        domain, rng = to_tune(param), np.random.RandomState(0)
        return {domain.sample(random_state=rng) for _ in range(2000)}

    assert drawn({"int": [1, 4]}) == {1, 2, 3, 4}
    assert drawn({"int": [2, 8], "q": 2}) == {2, 4, 6, 8}
    halves = drawn({"uniform": [0.0, 1.0], "q": 0.25})
    assert {round(v, 9) for v in halves} == {0.0, 0.25, 0.5, 0.75, 1.0}
    assert all(1e-4 <= v <= 1e-2 for v in drawn({"loguniform": [1e-4, 1e-2]}))


def test_the_tune_pieces_a_spec_chooses(monkeypatch):
    """What no fast test held: the schedulers' settings, the checkpoints PBT keeps, which trials
    reuse processes, when a trial's report ends it, and a variant's own values."""
    from types import SimpleNamespace

    from rlsweep import metrics as M
    from rlsweep.run.tune_bridge import (
        _conditional,
        _from_variant,
        checkpoint_config,
        reuses_processes,
        scheduler,
        trial_done,
    )

    asha = SweepSpec(
        name="a",
        games=["coinrun"],
        seeds=[0],
        space={"lr": {"loguniform": [1e-4, 1e-3]}},
        search={
            "algorithm": "random",
            "scheduler": "asha",
            "grace_period": 3,
            "reduction_factor": 4,
        },
    )
    kwargs = lambda **kw: kw  # noqa: E731  what rlsweep asks of Tune's schedulers
    monkeypatch.setattr("ray.tune.schedulers.ASHAScheduler", kwargs)
    monkeypatch.setattr("rlsweep.run.population.MemberPBT", kwargs)
    s = scheduler(asha)
    assert (s["grace_period"], s["reduction_factor"], s["time_attr"]) == (3, 4, M.TUNE_ITERATION)
    pbt = asha.with_overrides(
        search={"algorithm": "random", "scheduler": "pbt", "mutations": ["lr"]}
    )
    s = scheduler(pbt)
    assert s["quantile_fraction"] == 0.25 and s["member_keys"] == ("game", "seed")
    assert list(s["hyperparam_mutations"]) == ["lr"]
    assert checkpoint_config(pbt).num_to_keep is None  # PBT restores any of them, any time
    assert checkpoint_config(asha).num_to_keep == asha.keep_checkpoints
    assert reuses_processes(asha)
    assert not reuses_processes(asha.with_overrides(params={"num_gpus": 1}))
    assert trial_done("t", {M.TRIAL_DONE: True}) and not trial_done("t", {M.TRIAL_DONE: False})
    assert not trial_done("t", {})
    # A PBT member's conditional value: drawn where every condition holds, else the default.
    when = {"augment": ("pad_crop",), "framestack": ("gap",)}
    domain = SimpleNamespace(sample=lambda: "drawn")
    assert _conditional(domain, when, "default", {"augment": "pad_crop", "framestack": "gap"}) == (
        "drawn"
    )
    assert _conditional(domain, when, "default", {"augment": "pad_crop"}) == "default"
    variants = {"Gap": {"framestack": "gap"}, "Plain": {}}
    assert _from_variant("framestack", variants, "none", {"variant": "Gap"}) == "gap"
    assert _from_variant("framestack", variants, "none", {"variant": "Plain"}) == "none"
    assert _from_variant("framestack", variants, "none", {"config": {"variant": "Gap"}}) == "gap"
