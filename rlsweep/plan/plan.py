"""`rlsweep plan`: what a spec will run and roughly how long it takes, before anything starts.

The wall-time estimate is a sweep as it runs: Ray starts, then the trials run as many at once as
fit (CPUs, GPUs, fractional GPU packing: `rlsweep.plan.placement`), each starting a new one when it
ends, and each trial costs

    its start (process, RLlib's build, envpools) + training (iterations x a fixed cost per
    iteration + env steps at the training rate, the update's share of it scaled by num_epochs)
    + evaluating (evaluations x 2 splits x eval_episodes envs x the game's time limit, at the
    evaluation rate)

with every rate per trial CPU. An evaluation plays each env until its first episode ends, so it
lasts as long as the slowest env's episode: the plan counts it at the game's time limit, its
bound, and says so. An untrained policy's evaluation reaches that bound in ten games and ends
well short of it in six, where a policy that learns to survive plays longer (the slowest of 64
envs under uniform random actions, easy, seeds 0-2: bigfish 0.11 of its 6,000 steps, bossfight
0.04, chaser 0.45, fruitbot 0.24, plunder 0.17, starpilot 0.17; `python
benchmarks/eval_lengths.py`, 2026-11-29). The figures come from
`benchmarks/plan_costs.py` run in this directory (`results/benchmarks/plan_costs.json`) or else
`DEFAULT_COSTS` (measured the same way on a 2-core machine); GPU trials' training rates from
`results/benchmarks/gpu.json`, or else `DEFAULT_GPU_PACKED` (measured on an H100), and their
evaluation rates from gpu.json where it has them, or else the CPU's (the plan says so). The plan
says which source it used.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import math
from dataclasses import dataclass
from pathlib import Path

from rlsweep.envs import procgen
from rlsweep.formatting import duration, plural
from rlsweep.plan import cost
from rlsweep.plan.layout import Layout, packed_rate
from rlsweep.plan.layout import choose as choose_layout
from rlsweep.plan.placement import (
    Machine,
    check_sweep_fits,
    gpu_memory_gib,
    placement,
    trials_at_once,
    trials_per_gpu,
)
from rlsweep.spec.config import TrialConfig
from rlsweep.spec.spec import VARIANT, SweepSpec

COSTS_BENCHMARK = Path("results/benchmarks/plan_costs.json")
"""benchmarks/plan_costs.py's last result: the `Costs` fields below, by name."""
GPU_BENCHMARK = Path("results/benchmarks/gpu.json")
"""benchmarks/gpu.py's last result: `packed`, {K: aggregate env steps/s of K trials on one GPU}."""
DEFAULT_SOURCE = "defaults: no benchmark here, make bench-plan measures one"


@dataclass(frozen=True)
class Costs:
    """What a trial's parts cost, in seconds on one CPU (`benchmarks/plan_costs.py` measures
    each). An iteration samples its batch in vector steps (every env one step) and updates on
    it, `num_epochs` passes of its minibatches: small rollouts, few envs and small minibatches
    cost more per env step than the demo's, as they do in a trial."""

    vector_step_s: float
    """Sampling, per vector step whatever the envs: the policy's call, envpool's."""
    env_step_s: float
    """Sampling, per env and step: a frame through the policy, a step of the game."""
    minibatch_s: float
    """The update, per minibatch whatever its size: the optimizer's step, RLlib's bookkeeping."""
    sample_s: float
    """The update, per sample and epoch: forward and backward."""
    iteration_s: float
    """Per iteration (RLlib's and Tune's bookkeeping)."""
    eval_steps_per_cpu_s: float
    """Evaluation env steps per second per trial CPU, an evaluation counted as eval_episodes
    envs x 2 splits x the game's time limit."""
    trial_start_s: float
    """A trial's own start and end: its process, RLlib's build, the envpools, the last
    checkpoint, Tune's bookkeeping."""
    ray_start_s: float
    """Starting and stopping Ray on this machine."""

    @classmethod
    def fields(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def iteration(self, cfg: TrialConfig) -> float:
        """Seconds of one training iteration of `cfg` on its CPUs: the trial's process updates
        on num_cpus threads and samples on them too, or else each remote EnvRunner samples its
        share of the batch on its own CPU, all at once."""
        batch, envs = cfg.effective_train_batch_size, cfg.num_envs_per_env_runner
        runners = max(1, cfg.num_env_runners)
        vector_steps = batch / (envs * runners)  # per runner, the runners side by side
        sampling = vector_steps * (self.vector_step_s + envs * self.env_step_s)
        minibatches = math.ceil(batch / cfg.minibatch_size)
        update = cfg.num_epochs * (minibatches * self.minibatch_s + batch * self.sample_s)
        if not cfg.num_env_runners:
            sampling /= cfg.num_cpus
        return self.iteration_s + sampling + update / cfg.num_cpus

    def scaled(self, factor: float) -> Costs:
        """These costs with training `factor` times as slow (evaluation and starts as they
        are)."""
        return dataclasses.replace(
            self,
            **{
                k: getattr(self, k) * factor
                for k in ("vector_step_s", "env_step_s", "minibatch_s", "sample_s", "iteration_s")
            },
        )


REFERENCE = TrialConfig(
    num_envs_per_env_runner=16, rollout_length=64, minibatch_size=512, num_epochs=3, num_cpus=1
)
"""The trial `--steps-per-s` speaks of, and benchmarks/plan_costs.py's sweep runs: the demo's."""
DEFAULT_COSTS = Costs(
    vector_step_s=0.009,
    env_step_s=0.0019,
    minibatch_s=0.0013,
    sample_s=0.0038,
    iteration_s=0.04,
    eval_steps_per_cpu_s=2000.0,
    trial_start_s=35.0,
    ray_start_s=10.0,
)
"""Used where plan_costs.py has not run here: what a demo run on a 2-core machine shared with
other jobs spent, read as plan_costs.py reads its sweep, its training in the proportions
plan_costs.py measured on that machine in a quiet hour (README, Speed), rounded. Its evaluation
rate (1,140 then) times 1.75: what plan_costs.py measured when the evaluation stopped running the
network on the envs already done (docs/speed.md)."""
DEFAULT_GPU_PACKED = {1: 13_700.0, 8: 30_300.0}
"""Used where benchmarks/gpu.py has not run on a GPU here: aggregate training env steps/s of K
trials sharing one GPU, from `make gpu-check` on one NVIDIA H100 80GB with 16 cores, 2026-11-26
(docs/gpu.md, the sixth run: coinrun easy, the default batch, bf16; K = 8 with 2 CPUs each),
rounded."""
DEFAULT_GPU_SOURCE = "an H100's, 16 cores (no GPU benchmark here: make gpu-check)"


@dataclass(frozen=True)
class TrialTime:
    """One trial's estimated wall time, part by part."""

    iterations: int
    evaluations: int
    start_s: float
    train_s: float
    eval_s: float
    eval_limit: int = 0
    """Steps each evaluation is counted to: the game's episode time limit."""

    @property
    def total_s(self) -> float:
        return self.start_s + self.train_s + self.eval_s


def evaluations(cfg: TrialConfig, iterations: int) -> int:
    """Evaluations a trial of `iterations` makes: every `eval_interval` iterations and at the
    end (`TrialConfig.evaluates`, each iteration a whole batch)."""
    return iterations // cfg.eval_interval + (iterations % cfg.eval_interval != 0)


def iterations(cfg: TrialConfig, env_steps: float | None = None) -> int:
    """Iterations to `env_steps` (default: the trial's budget): each samples a whole batch."""
    steps = cfg.total_env_steps if env_steps is None else env_steps
    return max(1, math.ceil(steps / cfg.effective_train_batch_size))


def eval_steps(cfg: TrialConfig) -> int:
    """Env steps one evaluation is counted as: every env of both splits to the time limit."""
    return (
        len(procgen.SPLITS)
        * cfg.eval_episodes
        * procgen.max_episode_steps(cfg.game, cfg.distribution_mode)
    )


@dataclass(frozen=True)
class Throughput:
    """The speeds and fixed costs the plan assumes, and where the figures came from."""

    costs: Costs = DEFAULT_COSTS
    """CPU trials' training (and every trial's evaluation and fixed costs)."""
    source: str = DEFAULT_SOURCE
    gpu_packed: dict[int, float] | None = dataclasses.field(
        default_factory=lambda: dict(DEFAULT_GPU_PACKED)
    )
    """GPU trials: aggregate training env steps/s of K trials sharing one GPU (None: none, and
    GPU trials are counted at the CPU's rate)."""
    gpu_source: str | None = DEFAULT_GPU_SOURCE
    gpu_eval: dict[int, float] | None = None
    """GPU trials: aggregate evaluation env steps/s of K trials sharing one GPU, an evaluation
    counted as `eval_steps` (None: not measured, and GPU trials evaluate at the CPU's rate)."""

    def at(self, steps_per_cpu_s: float) -> Throughput:
        """Training as fast as `steps_per_cpu_s` env steps per second (per CPU) in the
        `REFERENCE` trial (`--steps-per-s`), other trials in proportion."""
        factor = REFERENCE.effective_train_batch_size / steps_per_cpu_s
        costs = self.costs.scaled(factor / self.costs.iteration(REFERENCE))
        return dataclasses.replace(self, costs=costs, source=f"--steps-per-s, {self.source}")

    def trial_steps_per_s(self, cfg: TrialConfig, per_gpu: int) -> tuple[float, str]:
        """`cfg`'s training env steps/s when `per_gpu` trials share each GPU, and the
        source."""
        if cfg.on_gpu and self.gpu_packed:
            rate, how = packed_rate(self.gpu_packed, per_gpu)
            return rate, f"{self.gpu_source}, {how}"
        note = " (GPU trials unmeasured: the CPU's)" if cfg.on_gpu else ""
        rate = cfg.effective_train_batch_size / self.costs.iteration(cfg)
        return rate, f"{self.source}{note}"

    def eval_steps_per_s(self, cfg: TrialConfig, per_gpu: int) -> float:
        """`cfg`'s evaluation env steps/s (an evaluation counted as `eval_steps`): a GPU
        trial's where a GPU benchmark measured them, else its num_cpus at the CPU's rate."""
        if cfg.on_gpu and self.gpu_eval:
            return packed_rate(self.gpu_eval, per_gpu)[0]
        return self.costs.eval_steps_per_cpu_s * cfg.num_cpus

    def trial(self, cfg: TrialConfig, per_gpu: int = 1) -> TrialTime:
        """`cfg`'s estimated wall time (`per_gpu` trials sharing each GPU); evaluation runs in
        the trial's process."""
        c, n = self.costs, iterations(cfg)
        evals = evaluations(cfg, n)
        rate, _ = self.trial_steps_per_s(cfg, per_gpu)
        return TrialTime(
            iterations=n,
            evaluations=evals,
            start_s=c.trial_start_s,
            train_s=n * cfg.effective_train_batch_size / rate,
            eval_s=evals * eval_steps(cfg) / self.eval_steps_per_s(cfg, per_gpu),
            eval_limit=procgen.max_episode_steps(cfg.game, cfg.distribution_mode),
        )


def measured_throughput(
    costs_file: Path = COSTS_BENCHMARK, gpu_file: Path = GPU_BENCHMARK
) -> Throughput:
    """The costs benchmark's figures where it was run here, else `DEFAULT_COSTS` (the plan
    says which); the GPU benchmark's packed figures where it ran on a GPU here, else
    `DEFAULT_GPU_PACKED`."""
    data = _read(costs_file) or {}
    figures = {k: data.get(k) for k in Costs.fields()}
    if all(_number(v) for v in figures.values()) and figures["eval_steps_per_cpu_s"] > 0:
        costs, source = Costs(**figures), f"{costs_file}, measured {data.get('measured_at', '?')}"
        if costs.iteration(REFERENCE) <= 0:
            costs, source = DEFAULT_COSTS, DEFAULT_SOURCE
    else:
        costs, source = DEFAULT_COSTS, DEFAULT_SOURCE
    packed = evals = None
    if (data := _read(gpu_file)) and data.get("device") == "cuda" and data.get("packed"):
        packed = _rates(data["packed"])
        evals = _rates(data.get("packed_eval") or {})
    if packed is None:
        return Throughput(costs, source)
    return Throughput(costs, source, packed, str(gpu_file), evals)


def _rates(by_k: dict[str, object]) -> dict[int, float] | None:
    """A GPU benchmark's {K: aggregate env steps/s}, the positive figures; None if none."""
    return {int(k): float(v) for k, v in by_k.items() if _number(v) and v > 0} or None


def _number(x: object) -> bool:
    """A figure of the benchmark: a finite number >= 0."""
    return isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x < math.inf


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def makespan(durations: list[float], slots: int) -> float:
    """Wall time of jobs run in order on `slots` workers, each job starting when a worker
    frees (as Tune starts a pending trial when a running one ends)."""
    ends = [0.0] * max(1, slots)
    for d in durations:
        heapq.heappush(ends, heapq.heappop(ends) + d)
    return max(ends)


def eval_counted(limit: int | None, unmeasured: bool) -> str:
    """How the plan counted a trial's evaluations, after their time (`Plan.summary`, and a
    report's plan against the real, from `Plan.record`): to the game's time limit (its bound),
    at the CPU rate where no GPU measured them."""
    to_limit = f", each to the {limit:,}-step time limit" if limit else ""
    return to_limit + (", at the CPU rate: unmeasured on a GPU" if unmeasured else "")


@dataclass(frozen=True)
class Plan:
    """A spec's trials, totals, wall-time estimate and (with an instance type) cost estimate."""

    num_trials: int
    """Trials the spec runs (num_samples included)."""
    sweep_env_steps: int
    """Env steps of the whole sweep: num_trials x budget (each trial's budget is its
    TrialConfig.total_env_steps)."""
    cpus_per_trial: int
    """CPUs the largest trial reserves."""
    gpus_per_trial: float
    """GPUs the largest trial reserves (a fraction: several trials share a GPU)."""
    concurrent: int
    """Trials running at once."""
    bound: str
    """What limits `concurrent`: 'CPU', 'GPU', or 'spec' (max_concurrent, or fewer trials)."""
    cpus: float
    """CPUs planned for."""
    gpus: float
    """GPUs planned for."""
    trial_steps_per_s: float
    """Training env steps per second of the slowest trial."""
    steps_per_s_source: str
    """Where the figures came from (a benchmark file, --steps-per-s, or the defaults)."""
    est_wall_s: float
    """Estimated wall time of the whole sweep: `ray_start_s` + its trials run `concurrent` at
    a time."""
    rows: list[dict]
    """One row per grid trial: game, seed, variant, grid values, sampled parameters' ranges."""
    ray_start_s: float = 0.0
    """Of `est_wall_s`: starting and stopping Ray."""
    longest: TrialTime | None = None
    """The longest trial's estimate, part by part."""
    eval_unmeasured: bool = False
    """GPU trials' evaluations counted at the CPU's rate: no GPU benchmark measured them."""
    gpu_memory_gib: float | None = None
    """Estimated GPU memory of the largest GPU trial (None: CPU trials)."""
    instance: str | None = None
    """EC2 instance type the cost is estimated for (None: no cost estimate)."""
    instances: int | None = None
    """Instances billed: the number asked for, or enough for `concurrent` trials at once."""
    spot: bool = False
    """Spot (True) or on-demand prices."""
    hourly_usd: float | None = None
    """USD per hour of one instance."""
    head: str | None = None
    """Head node's instance type, billed on-demand for the whole wall time (None: no head)."""
    head_usd: float | None = None
    """The head's share of `est_cost_usd`."""
    est_cost_usd: float | None = None
    """instances x estimated hours x hourly_usd (+ head_usd)."""
    layout: Layout | None = None
    """The trials' layout on the machine planned for (`rlsweep.plan.layout`), and why."""
    factors: tuple[tuple[str, int], ...] = ()
    """What the trials multiply out of (`size_factors`), largest first."""

    def box(self) -> str:
        """The machine planned for, in words: `16 CPUs, 1 GPU`."""
        box = plural(self.cpus, "CPU")
        if self.gpus:
            box += f", {plural(self.gpus, 'GPU')}"
        return box

    def record(self) -> dict[str, object]:
        """What a sweep's run record keeps of its plan (`experiment_dir.record_start`), to set
        beside the real wall time in its report."""
        t = self.longest
        return {
            "box": self.box(),
            "concurrent": self.concurrent,
            "est_wall_s": round(self.est_wall_s, 1),
            "longest_trial_s": round(t.total_s, 1) if t else None,
            "longest_eval_s": round(t.eval_s, 1) if t else None,
            "eval_limit": t.eval_limit if t else None,
            "eval_unmeasured": self.eval_unmeasured,
            "source": self.steps_per_s_source,
        }

    @property
    def too_long(self) -> bool:
        """The estimate passes `LONG_SWEEP_S`: run and ablate start it only with --allow-long."""
        return self.est_wall_s > LONG_SWEEP_S

    def size_note(self) -> str:
        """Why the sweep is long: its estimate and what makes it so, the biggest factor first
        (`4,800 trials (16 games x 20 search.num_samples x 5 seeds x 3 space.framestack) x
        25,000,000 env steps`)."""
        factors = " x ".join(f"{n:,} {what}" for what, n in self.factors if n > 1)
        budget = self.sweep_env_steps // max(self.num_trials, 1)
        return (
            f"estimated wall time {duration(self.est_wall_s)} on {self.box()}, over "
            f"{LONG_SWEEP_TEXT}: {self.num_trials:,} trials ({factors or 'one cell'}) x "
            f"{budget:,} env steps each, {self.concurrent} at a time"
        )

    def summary(self) -> str:
        cpus = plural(self.cpus_per_trial, "CPU")
        each = f"{cpus}, {self.gpus_per_trial:g} GPU" if self.gpus_per_trial else cpus
        if self.gpu_memory_gib is not None:
            each += f", ~{self.gpu_memory_gib:.1f} GiB GPU memory"
        box = self.box()
        text = (
            f"{self.num_trials:,} trials x budget = {self.sweep_env_steps:,} env steps; "
            f"{self.concurrent} at a time on {box} ({self.bound}-bound; {each} per trial); "
            f"{self.trial_steps_per_s:,.0f} env steps/s per trial ({self.steps_per_s_source}); "
            f"estimated wall time {duration(self.est_wall_s)}"
        )
        if (t := self.longest) is not None:
            text += (
                f" (Ray's start {duration(self.ray_start_s)}; the longest trial "
                f"{duration(t.total_s)}: start {duration(t.start_s)}, training "
                f"{duration(t.train_s)} over {plural(t.iterations, 'iteration')}, evaluating "
                f"{duration(t.eval_s)} over {plural(t.evaluations, 'evaluation')}"
                f"{eval_counted(t.eval_limit if t.evaluations else None, self.eval_unmeasured)})"
            )
        if self.est_cost_usd is not None:
            market = "spot" if self.spot else "on-demand"
            text += (
                f"; {self.instances} x {self.instance} ({market}, ${self.hourly_usd:.3f}/h each)"
            )
            if self.head is not None:
                text += f" + head {self.head} (on-demand, ${self.head_usd:,.2f})"
            text += f": estimated cost ${self.est_cost_usd:,.2f}"
        return text


def make_plan(
    spec: SweepSpec,
    cpus: float,
    steps_per_cpu_s: float | None = None,
    instance: str | None = None,
    spot: bool = False,
    prices: cost.Prices | None = None,
    instances: int | None = None,
    head: str | None = None,
    gpus: float = 0,
    gpu_memory: float | None = None,
    throughput: Throughput | None = None,
    machine_name: str | None = None,
    layout: Layout | None = None,
) -> Plan:
    """Trial list, totals and a wall-time estimate: Ray's start, then the trials (each grid
    trial `num_samples` times, in the spec's order) run `concurrent` at a time (what fits on
    `cpus` CPUs and `gpus` GPUs at once, fractional GPU trials packed per GPU), each costing
    `Throughput.trial` (`throughput`, default `measured_throughput()`; `steps_per_cpu_s` sets
    its CPU training rate: `Throughput.at`). A trial that cannot fit (CPUs, GPUs, or with
    `gpu_memory` GiB per GPU the estimated memory of the trials packed on one) is refused with
    a SpecError naming the key. A spec that sets no resources is planned in the machine's best
    layout (`rlsweep.plan.layout`: packed GPU trials where it has GPUs); `Plan.layout` says which.
    `machine_name`: how errors name the machine (default: "the planned machine"); `layout`:
    the layout to plan (default: the one `rlsweep.plan.layout.choose` chooses for the machine).

    With `instance` (an EC2 type in `prices`, default rlsweep/plan/prices.yaml) the plan also
    estimates the bill: `instances` of that type (then they, not `cpus`/`gpus`, set the machine
    planned for), or as many as `concurrent` trials need, x the estimated hours x its spot or
    on-demand $/h. `head` adds a head node's on-demand bill for the whole wall time; the estimate
    places no trials on it (a head with spare CPUs or a GPU runs trials in practice, so the
    estimate errs high). The measured rates come from another machine: pass `steps_per_cpu_s`
    for the instance's."""
    if head is not None and instance is None:
        raise ValueError("head: a head instance type needs an instance type for the workers")
    p = cost.price(instance, prices) if instance is not None else None
    if instances is not None:
        if p is None or isinstance(instances, bool) or not isinstance(instances, int):
            raise ValueError("instances: an integer >= 1, together with instance")
        if instances < 1:
            raise ValueError(f"instances: got {instances}; allowed: an integer >= 1")
        cpus, gpus = instances * p.vcpus, instances * p.gpus
    if p is not None and gpu_memory is None:
        gpu_memory = p.gpu_memory_gib
    where = f"{instance}" if instances is not None else (machine_name or "the planned machine")
    machine = Machine(cpus, gpus, gpu_memory, where)
    rate = throughput or measured_throughput()
    chosen = layout or choose_layout(spec, machine, rate.gpu_packed, rate.gpu_source)
    spec = chosen.apply(spec)
    labelled = spec.labelled_trials()
    trials = [t for _, t in labelled]
    places = [placement(t) for t in trials]
    per_trial = max(p.cpus for p in places)
    gpus_per_trial = max(p.gpus for p in places)
    if p is not None:
        cost.check_gpus(gpus_per_trial, p, instance)
    check_sweep_fits(spec, machine)
    concurrent, bound = trials_at_once(per_trial, gpus_per_trial, cpus, gpus)
    if p is not None and instances is not None:
        # Trials do not split across instances: fragmentation caps what runs at once.
        per_instance = cost.trials_per_instance(per_trial, gpus_per_trial, p)
        if instances * per_instance < concurrent:
            concurrent = max(1, instances * per_instance)
    if spec.max_concurrent and spec.max_concurrent < concurrent:
        concurrent, bound = spec.max_concurrent, "spec"
    if spec.num_trials < concurrent:
        concurrent, bound = spec.num_trials, "spec"
    if steps_per_cpu_s is not None:
        rate = rate.at(steps_per_cpu_s)
    sharing = min(concurrent, trials_per_gpu(gpus_per_trial)) if gpus_per_trial else 0
    times, source, slowest = [], "", math.inf
    for t in trials:
        trial_rate, source = rate.trial_steps_per_s(t, sharing)
        times.append(rate.trial(t, sharing))
        slowest = min(slowest, trial_rate)
    runs = [x.total_s for x in times for _ in range(spec.search.num_samples)]
    est = rate.costs.ray_start_s + makespan(runs, concurrent)
    rows = []
    for variant, t in labelled:
        row = {"game": t.game, "seed": t.seed}
        if spec.variants:
            row[VARIANT] = variant
        row.update({k: getattr(t, k) for k in spec.grid_keys})
        for k in spec.sampled_keys:
            row[k] = spec.space[k].describe()
        if spec.sampled_keys:
            row["configurations"] = spec.search.num_samples  # the same ones in every row
        rows.append(row)
    billed = usd = head_usd = None
    if instance is not None:
        billed, usd = cost.plan_cost(
            est, concurrent, per_trial, gpus_per_trial, instance, instances, spot, prices
        )
        if head is not None:
            head_usd = cost.cluster_cost(est, head, prices=prices)
            usd += head_usd
    gpu_trials = [t for t in trials if t.on_gpu]
    return Plan(
        num_trials=spec.num_trials,
        sweep_env_steps=spec.sweep_env_steps,
        cpus_per_trial=per_trial,
        gpus_per_trial=gpus_per_trial,
        concurrent=concurrent,
        bound=bound,
        cpus=cpus,
        gpus=gpus,
        trial_steps_per_s=slowest,
        steps_per_s_source=source,
        est_wall_s=est,
        rows=rows,
        ray_start_s=rate.costs.ray_start_s,
        longest=max(times, key=lambda x: x.total_s),
        eval_unmeasured=bool(gpu_trials) and not rate.gpu_eval,
        gpu_memory_gib=max(map(gpu_memory_gib, gpu_trials)) if gpu_trials else None,
        instance=instance,
        instances=billed,
        spot=spot,
        hourly_usd=p.hourly(spot) if p is not None else None,
        head=head,
        head_usd=head_usd,
        est_cost_usd=usd,
        layout=chosen,
        factors=size_factors(spec),
    )


LONG_SWEEP_S = 7 * 86_400
"""A sweep whose estimated wall time passes this is long: `validate` and `plan` say so, `run`
and `ablate` refuse to start it unless told to (`ALLOW_LONG`)."""
LONG_SWEEP_TEXT = "a week"
ALLOW_LONG = "--allow-long"
"""The flag of run and ablate that starts a long sweep anyway."""


def size_factors(spec: SweepSpec) -> tuple[tuple[str, int], ...]:
    """The axes a spec's trials multiply out of, each (what, how many), the largest first:
    games, seeds, variants, each grid parameter, samples."""
    factors = [("games", len(spec.games)), ("seeds", len(spec.seeds))]
    if spec.variants:
        factors.append(("variants", len(spec.variants)))
    factors += [(f"space.{k}", len(spec.space[k].values)) for k in spec.grid_keys]
    factors.append(("search.num_samples", spec.search.num_samples))
    return tuple(sorted(factors, key=lambda f: -f[1]))


SCALING_FACTOR = 10
"""A --budget this many times the spec's or more scales a spec up (a demo to a study): what it
keeps as the spec set it is warned of."""
SCALING_SHARE = 0.05
"""Evaluations are warned of when they cost this share of a trial or more."""
PUBLISHED = TrialConfig()
"""The published setup's iteration (train-procgen: 64 envs x 256 steps, minibatch 2,048)."""
ITERATION_KEYS = ("num_envs_per_env_runner", "rollout_length", "minibatch_size", "train_batch_size")
"""The settings that size an iteration and its minibatches."""


def scaling_warnings(
    spec: SweepSpec, scaled: SweepSpec, throughput: Throughput | None = None
) -> list[str]:
    """What `scaled` (`spec` under a --budget `SCALING_FACTOR` times its own or more) keeps as
    `spec` set it although it was chosen for the smaller budget, with the time it adds per
    trial: evaluations (every eval_interval iterations: their number grows with the budget)
    and an iteration smaller than the published one (what its trial takes longer than with the
    published iteration's size, for the same env steps). Empty for a budget scaled less."""
    if scaled.budget < SCALING_FACTOR * spec.budget:
        return []
    rate = throughput or measured_throughput()
    factor = scaled.budget / spec.budget
    times = [(t, rate.trial(t)) for t in scaled.trials()]
    lines = []
    t, est = max(times, key=lambda x: x[1].eval_s)
    if est.eval_s >= SCALING_SHARE * est.total_s:
        before = evaluations(t, iterations(t, spec.budget))
        lines.append(
            f"--budget {scaled.budget:,} is {factor:,.0f}x the spec's {spec.budget:,}, but "
            f"eval_interval {t.eval_interval} still evaluates every "
            f"{t.eval_interval * t.effective_train_batch_size:,} env steps: "
            f"{est.evaluations:,} evaluations per trial, ~{duration(est.eval_s)} of its "
            f"{duration(est.total_s)}; eval_interval {math.ceil(t.eval_interval * factor):,} keeps "
            f"the spec's {before:,}"
        )
    t, est = min(times, key=lambda x: x[0].effective_train_batch_size)
    batch, published = t.effective_train_batch_size, PUBLISHED.effective_train_batch_size
    if batch < published:
        resized = {**t.to_dict(), **{k: getattr(PUBLISHED, k) for k in ITERATION_KEYS}}
        more = est.train_s - rate.trial(TrialConfig.from_dict(resized)).train_s
    if batch < published and more > 0:  # the costs may price small iterations no slower
        lines.append(
            f"--budget {scaled.budget:,} keeps the spec's iterations of {batch:,} env steps "
            f"(rollout_length {t.rollout_length} x num_envs_per_env_runner "
            f"{t.num_envs_per_env_runner}, minibatch_size {t.minibatch_size}): "
            f"{est.iterations:,} per trial, ~{duration(more)} longer than the published setup's "
            f"{published:,} ({PUBLISHED.num_envs_per_env_runner} x {PUBLISHED.rollout_length}, "
            f"minibatch_size {PUBLISHED.minibatch_size:,}: extends: cobbe2019) for the same env "
            f"steps, and eval_interval counts them"
        )
    return lines
