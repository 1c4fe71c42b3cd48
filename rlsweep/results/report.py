"""`rlsweep report`: experiment dirs in, one report directory out (FILES).

The pieces: `rlsweep.results.results.load_experiment` loads and labels the trials (variants are the
values of the `by` parameter(s), by default the swept ones), `rlsweep.results.tables` computes the
numbers and markdown tables, `rlsweep.results.plots` draws the figures; this module writes the files
and assembles `report.md`, adding the per-sweep sections that read more files (hyperparameter
importance, cost). Only finished trials (status TERMINATED with a finite unseen-level score)
enter any number or plot; errored and incomplete ones are listed instead.

Two kinds of report (`report_kind`, from the sweeps' specs and the number of variants): an
ablation's few named variants (or a small grid) are compared with each other, pairwise tables
among all of them; a search's many configurations are ranked: its top TOP configurations, the
score against each searched hyperparameter, its history and importances, pairwise tables only
among its top PAIRWISE_TOP. Either way the work grows linearly with the trials.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from rlsweep import formatting, storage
from rlsweep import metrics as M
from rlsweep.envs import procgen
from rlsweep.errors import ConfigError
from rlsweep.experiment.experiment_dir import run_info, runs, sweep_spec
from rlsweep.experiment.history import history_section
from rlsweep.plan.placement import trial_cpus
from rlsweep.plan.plan import eval_counted
from rlsweep.results import plots
from rlsweep.results import results as R
from rlsweep.results import stats as S
from rlsweep.results import tables as T
from rlsweep.results.importance import report_study
from rlsweep.results.results import Experiment
from rlsweep.spec.config import unread_everywhere
from rlsweep.spec.spec import SweepSpec
from rlsweep.spec.subconfigs import EnvConfig

FILES = (
    "scores.csv",
    "final.csv",
    "table.md",
    "learning_curves.png",
    "aggregates.png",
    "sample_efficiency.png",
    "report.md",
)
"""Always written (plus scores.parquet when pyarrow is installed)."""
SEARCH_FILES = ("search_params.png", "search_history.png")
"""Also written for a search."""
SEARCH, ABLATION = "search", "ablation"
MAX_COMPARED = 12
"""Variants an ablation's report compares with each other at most (its pairwise tables, its
curves' legend): more is a search."""
TOP = 10
"""A search's configurations in its ranked table, aggregates and coloured curves."""
PAIRWISE_TOP = 5
"""A search's configurations compared pairwise (P(X > Y)): its top few."""
NEAR_RANDOM_STEPS = 1_000_000
"""Env steps below which PPO on Procgen has typically learned little: a report whose trials
all ran fewer says so at its top."""


def default_out(paths: Sequence[str | Path]) -> Path:
    """`<dir>/report` for one dir; `<parent of the first>/<a>+<b>/report` for several. A URI
    (`s3://.../<sweep>`) stands for `results/<sweep>`: reports are written locally, where a
    local sweep's would be."""
    paths = [_local_dir(p) for p in paths]
    if len(paths) == 1:
        return paths[0] / "report"
    return paths[0].parent / "+".join(p.resolve().name for p in paths) / "report"


def _local_dir(path: str | Path) -> Path:
    if storage.is_uri(path):
        return Path("results", PurePosixPath(str(path).rstrip("/")).name)
    return Path(path)


def build_report(
    paths: Sequence[str | Path],
    *,
    by: Sequence[str] | None = None,
    out: str | Path | None = None,
    pool: bool = False,
    n_resamples: int = T.REPORT_RESAMPLES,
    seed: int = 0,
    prices: str | Path | None = None,
    also: Sequence[str] = (),
) -> Path:
    """Write the report files (FILES) into `out` (default: `default_out(paths)`); returns the
    path of report.md. `prices`: a price table for the cost section (default: the shipped
    `rlsweep/plan/prices.yaml`); `also`: files its caller writes beside it, which report.md's
    list of files names too (an ablation's ablation.md).

    Several sweeps are reported one by one, each in `out/<sweep>/`, under an index (report.md
    and table.md in `out`): trials of different sweeps never share a column. `pool`: trials
    whose configs agree except seed share one, whatever their sweep (a config run twice with
    the same seed counts once); configs run on different games are reported apart
    (`rlsweep.results.results.pooled_groups`)."""
    dirs = [d for p in paths for d in R.experiment_dirs(p)]
    names = [d.name for d in dirs]
    if len(set(names)) < len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"several experiment dirs named {', '.join(twice)}: report them apart")
    out = Path(out) if out is not None else default_out(paths)
    kw = {"n_resamples": n_resamples, "seed": seed, "prices": prices}
    if pool:
        groups = R.pooled_groups(R.load_curves(dirs))
        parts = {g: R.experiment(c, dirs, by, pool=True) for g, c in groups.items()}
        notes = []
    else:
        loaded = {d.name: R.load_curves(d) for d in dirs}
        parts = {name: R.experiment(c, dirs, by) for name, c in loaded.items()}
        notes = _repeated_across(loaded)
    if len(parts) == 1:
        return _write_report(next(iter(parts.values())), dirs, out, also=also, **kw)
    for name, exp in parts.items():
        _write_report(exp, dirs, out / name, **kw)
    return _write_index(parts, out, pool, notes)


def report_kind(exp: Experiment, specs: Sequence[SweepSpec]) -> tuple[str, str]:
    """SEARCH or ABLATION, and why, in words for the report: a search where a spec samples
    parameters (a search algorithm over a continuous or sampled space) or where there are more
    variants than MAX_COMPARED; else an ablation (named variants, or a grid over a few
    values)."""
    n = len(exp.variants)
    configs = formatting.plural(n, "configuration")
    sampled = {k: s.space[k].kind for s in specs for k in s.sampled_keys}
    if sampled:
        algos = sorted({s.search.algorithm for s in specs if s.sampled_keys})
        params = ", ".join(f"`{k}` ({kind})" for k, kind in sampled.items())
        return SEARCH, f"the spec samples {params} with {' and '.join(algos)} search: {configs}"
    if n > MAX_COMPARED:
        return SEARCH, f"{configs}, more than the {MAX_COMPARED} a comparison can hold"
    variants = f"{formatting.plural(n, 'variant')}, compared with each other"
    if any(s.variants for s in specs):
        return ABLATION, f"named variants (the spec's `variants`): {variants}"
    grid = sorted({k for s in specs for k in s.grid_keys} & set(exp.by))
    if grid:
        return ABLATION, f"a grid over {', '.join(f'`{k}`' for k in grid)}: {variants}"
    return ABLATION, f"{variants} (by {', '.join(f'`{p}`' for p in exp.by) or 'nothing'})"


def _write_report(
    exp: Experiment,
    dirs: Sequence[Path],
    out: Path,
    *,
    n_resamples: int,
    seed: int,
    prices: str | Path | None,
    also: Sequence[str] = (),
) -> Path:
    """One report (FILES) of `exp` into `out`; `dirs`: the experiment dirs it was loaded from
    (those of its sweeps give its kind, its importance and cost sections); `also`: files its
    caller writes beside it."""
    out.mkdir(parents=True, exist_ok=True)
    kw = {"n_resamples": n_resamples, "seed": seed}

    written = _write_frames(exp, out)
    dirs = [d for d in dirs if d.name in set(exp.final["sweep"])]
    specs = [s for d in dirs if (s := sweep_spec(d)) is not None]
    kind, why = report_kind(exp, specs)
    raw = raw_curves(specs)
    if kind == SEARCH:
        body, figures = _search_body(exp, specs, out, kind_why=why, kw=kw, raw=raw)
    else:
        body, figures = _ablation_body(exp, out, kind_why=why, kw=kw, raw=raw)
    importance, extra = importance_section(dirs, exp, out)
    md = [
        *_header(exp),
        *notes(exp),
        *body,
        *importance,
        *cost_section(dirs, exp, prices),
        *runs_section(dirs, exp),
        *memory_section(exp),
        *history_section(dirs, set(exp.final["sweep"])),  # retried, resumed, failed (issue 40)
        "## Trials not counted",
        "",
        *(
            T.not_counted_table(exp)
            if len(exp.counted) < len(exp.final)
            else ["None: every trial finished."]
        ),
    ]
    files = [*also, *written, *FILES[2:-1], *figures, *extra]
    md += ["", "## Files", "", *(f"- `{f}`" for f in files), ""]
    (out / "report.md").write_text("\n".join(md))
    return out / "report.md"


RAW_METRICS = (M.TRAIN_RETURN, M.TEST_RETURN)


def raw_curves(specs: Sequence[SweepSpec]) -> bool:
    """Learning curves in raw returns where every sweep ranks its trials by one (a study whose
    numbers go beside published raw returns, one game's); else normalized, as the tables."""
    return bool(specs) and all(s.metric in RAW_METRICS for s in specs)


def _ablation_body(
    exp: Experiment, out: Path, *, kind_why: str, kw: dict, raw: bool = False
) -> tuple[list, list]:
    """An ablation's sections (report.md's lines) and its figures beyond FILES: the variants
    compared with each other."""
    table = T.score_table(exp, **kw)
    (out / "table.md").write_text(table)
    scores = exp.all_scores()
    complete = [v for v in exp.variants if R.complete(scores[v])]
    aggs = T.aggregates({v: scores[v] for v in complete}, **kw)
    colors = plots.colors(exp.variants)
    plots.plot_learning_curves(exp, out / "learning_curves.png", raw=raw, **kw)
    plots.plot_aggregates(
        aggs, out / "aggregates.png", colors=colors, n_resamples=kw["n_resamples"]
    )
    _plot_efficiency(exp, complete, out, colors, kw)
    n = len(complete)
    md = [
        f"**An ablation's report**: {kind_why}.",
        "",
        *["## Unseen-level score", "", table],
        *_aggregates_section(exp, aggs),
        *_improvement_section(exp, complete, kw, f"among every variant that ran every game ({n})"),
        *_gap_section(exp, complete, kw),
        *_curves_section(raw=raw),
    ]
    return md, []


def _search_body(
    exp: Experiment,
    specs: Sequence[SweepSpec],
    out: Path,
    *,
    kind_why: str,
    kw: dict,
    raw: bool = False,
) -> tuple[list, list]:
    """A search's sections and its figures beyond FILES: its configurations ranked."""
    ranked = T.ranking(exp)
    top = list(ranked["variant"].head(TOP))
    lines = T.top_table(exp, ranked, TOP, **kw)
    n_ranked = len(ranked)
    note = (
        f"Top {len(top)} of {n_ranked:,} configurations with a finished run, by final "
        f"unseen-level score (`{M.TEST_RETURN_NORM}`): the mean over the games each ran of its "
        f"mean over seeds; its 95% CI where every game it ran has {T.MIN_CI_RUNS}+ runs (seeds "
        "repeat), else — (a bootstrap of fewer runs is no CI). All configurations, ranked: "
        "`ranking.csv`; every trial: `final.csv`."
    )
    if n_ranked > 1 and (ranked["runs"] == ranked["games"]).all():
        note += (
            f" Each configuration ran one seed a game: the best of {n_ranked:,} configurations, "
            "each run once, is chosen by its luck as well as by its settings, so its score "
            "reads high (a winner's curse); run the top few again over seeds before trusting "
            "their order."
        )
    (out / "table.md").write_text("\n".join([*lines, "", note, ""]))
    # Which seeds ran, named so beside the counts `runs` and `games` ("seeds 0" read as none).
    ranked.assign(
        seeds=ranked["seeds"].map(lambda s: " ".join(map(str, s))),
        trials=ranked["trials"].map(" ".join),
    ).rename(columns={"seeds": "seeds_run"}).to_csv(out / "ranking.csv", index=False)

    scores = exp.all_scores(variants=top)
    complete = [v for v in top if R.complete(scores[v])]
    aggs = T.aggregates({v: scores[v] for v in complete}, **kw)
    colors = plots.colors(top)
    plots.plot_learning_curves(exp, out / "learning_curves.png", highlight=top, raw=raw, **kw)
    plots.plot_aggregates(
        aggs, out / "aggregates.png", colors=colors, n_resamples=kw["n_resamples"]
    )
    _plot_efficiency(exp, complete, out, colors, kw)

    params = [p for p in exp.by if p != "sweep"]
    study = report_study(T.configurations(exp.counted, params), params, specs)
    plots.plot_search_params(study, out / "search_params.png")
    plots.plot_search_history(study, out / "search_history.png")

    pairwise = complete[:PAIRWISE_TOP]
    md = [
        f"**A search's report**: {kind_why}. A search is ranked, not compared pairwise: its top "
        "configurations, the score against each searched hyperparameter, its history and "
        f"which hyperparameters matter; pairwise tables only among its top {PAIRWISE_TOP}.",
        "",
        "## Top configurations",
        "",
        *lines,
        "",
        note,
        "",
        "## Score against each hyperparameter",
        "",
        "Every configuration with a finished run a point, its score as ranked above (the mean "
        "over the games it ran of its mean over seeds), coloured by when its first trial ran "
        "(Optuna's `plot_slice`; log axes where the space is log).",
        "",
        "![score against each hyperparameter](search_params.png)",
        "",
        "## Search history",
        "",
        "Each configuration's score as ranked, in the order their first trials ran, and the "
        "best so far (Optuna's "
        "`plot_optimization_history`).",
        "",
        "![search history](search_history.png)",
        "",
        *_aggregates_section(exp, aggs, top=len(top)),
        *_improvement_section(
            exp,
            pairwise,
            kw,
            f"among the top {len(pairwise)} configurations only (of {n_ranked:,}): a pairwise "
            "table grows as the square of what it compares",
        ),
        *_gap_section(exp, complete, kw, top=len(top)),
        *_curves_section(len(top), others=n_ranked - len(top), raw=raw),
    ]
    return md, list(SEARCH_FILES) + ["ranking.csv"]


def _plot_efficiency(
    exp: Experiment, variants: list[str], out: Path, colors: dict, kw: dict
) -> None:
    runs = exp.all_runs(variants)
    eff = {}
    for v in variants:
        got = T.sample_efficiency(exp, v, runs=[r for rs in runs[v].values() for r in rs], **kw)
        if got is not None:
            eff[v] = got
    plots.plot_sample_efficiency(eff, out / "sample_efficiency.png", colors)


def _repeated_across(loaded: dict[str, pd.DataFrame]) -> list[str]:
    """Index lines: sweeps that ran another sweep's configs with its seeds (the same spec run
    under two names), which each sweep's own report counts."""
    final = pd.concat([R.final_scores(c) for c in loaded.values()], ignore_index=True)
    first = R.repeats(final, pooled=True)
    if first.empty:
        return []
    pairs = pd.DataFrame(
        {"sweep": final.loc[first.index, "sweep"], "of": first.str.split("/").str[0]}
    )
    return [
        f"- `{sweep}` repeats {formatting.plural(n, 'trial')} of `{of}` (same config and "
        "seed): each sweep's report counts them; `--pool` counts them once."
        for (sweep, of), n in pairs.value_counts(sort=False).items()
    ]


def _write_index(parts: dict[str, Experiment], out: Path, pool: bool, notes: list[str]) -> Path:
    """report.md and table.md in `out` over the reports in `out/<name>/`."""
    out.mkdir(parents=True, exist_ok=True)
    if pool:
        intro = (
            "Pooled: trials whose configs agree except seed share a column. These configs ran "
            "different games, and aggregates compare variants over the same games, so each "
            "set of games has its own report."
        )
    else:
        intro = (
            "One report per sweep: trials of different sweeps never share a column "
            "(`rlsweep report --pool` pools those whose configs agree except seed)."
        )
    sweeps = sorted({s for exp in parts.values() for s in exp.final["sweep"]})
    md = [f"# Report: {', '.join(sweeps)}", "", intro, "", *notes, *([""] if notes else [])]
    tables = []
    for name, exp in parts.items():
        table = (out / name / "table.md").read_text()
        md += [f"## {name}", "", *_header(exp)[2:], f"[Full report]({name}/report.md)", ""]
        md += [table]
        tables += [f"## {name}", "", table]
    (out / "table.md").write_text("\n".join(tables))
    (out / "report.md").write_text("\n".join(md))
    return out / "report.md"


def _write_frames(exp: Experiment, out: Path) -> list[str]:
    """scores.csv and final.csv (and scores.parquet), less the settings no trial read
    (`config.unread_everywhere`: DQN's replay in a PPO sweep, lr under a schedule)."""
    written = ["scores.csv", "final.csv"]
    unread = unread_everywhere(exp.final.to_dict("records"))
    curves = R.evaluations_only(exp.curves).drop(columns=unread, errors="ignore")
    curves.to_csv(out / "scores.csv", index=False)
    exp.final.drop(columns=unread, errors="ignore").to_csv(out / "final.csv", index=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return written
    df = curves
    for col in [c for c in df.columns if pd.api.types.is_object_dtype(df[c])]:
        # Mixed-type params (None, numbers, strings): Parquet needs one type per column.
        df[col] = df[col].map(lambda v: v if v is None else str(v))
    df.to_parquet(out / "scores.parquet", index=False)
    return [*written, "scores.parquet"]


# --- report.md's sections: each a list of markdown lines ----------------------------------


def _header(exp: Experiment) -> list[str]:
    sweeps = exp.final.groupby("sweep")["status"].value_counts().unstack(fill_value=0)
    md = [f"# Report: {', '.join(sweeps.index)}", ""]
    for sweep, counts in sweeps.iterrows():
        parts = ", ".join(f"{counts[s]:,} {s}" for s in R.STATUSES if s in counts and counts[s])
        spec = exp.specs.get(sweep)
        n, planned = int(counts.sum()), spec.num_trials if spec else None
        if exp.unstarted.get(sweep):
            trials = f"{n:,} of {formatting.plural(planned, 'trial')}"
            unstarted = f"; {exp.unstarted[sweep]} not started"
        else:
            trials, unstarted = formatting.plural(n, "trial"), ""
        line = f"- `{sweep}`: {trials} ({parts}){unstarted}"
        if spec and counts.get(R.TERMINATED, 0) < planned:  # how far an unfinished sweep got
            steps = exp.final.loc[exp.final["sweep"] == sweep, M.ENV_STEPS].fillna(0)
            reached, total = sum(map(spec.counted_steps, steps)), spec.sweep_env_steps
            line += (
                f"; {formatting.steps(reached)} of {formatting.steps(total)} env steps "
                f"({100 * reached / total:.0f}%)"
            )
        md.append(line)
    if exp.pooled and len(sweeps) > 1:
        md += [
            "",
            "Pooled: trials of these sweeps whose configs agree except seed share a column; a "
            "config run again with the same seed counts once (listed under Trials not counted).",
        ]
    return [*md, ""]


def notes(exp: Experiment) -> list[str]:
    """What the top of a report (and of an ablation's table) says before any table: how to read
    its scores."""
    return [*setup_note(exp), *short_trials_note(exp), *no_unseen_levels_note(exp)]


_SETUP_COLUMNS = ("game", "distribution_mode", "num_levels", "start_level")


def _trained_on(row: Any) -> tuple[str, bool] | None:
    """The levels a trial of `row` (its game, mode, num_levels, start_level) trained on, in
    words, and whether it has unseen levels; None where its config does not say (a trial that
    recorded no game)."""
    n = None if pd.isna(row.num_levels) else int(row.num_levels)
    try:
        env = EnvConfig(
            game=row.game,
            distribution_mode=row.distribution_mode,
            num_levels=n,
            start_level=0 if pd.isna(row.start_level) else int(row.start_level),
        )
    except (ConfigError, TypeError, ValueError):
        return None
    mode, levels = env.distribution_mode, env.train_level_range
    if mode == "exploration":
        return f"{mode} mode's one fixed level", False
    if levels is None:
        return f"{mode} mode, every level", False
    lo, hi = levels
    return f"{mode} mode, {hi - lo} levels (level seeds {lo}-{hi - 1})", True


def setup_note(exp: Experiment) -> list[str]:
    """How every counted score was measured (every trial's, where none is counted), from the
    trials' own configs: the levels trained on (`EnvConfig.train_level_range`) and those scored
    as unseen, what an evaluation plays and when, the budget, the normalization constants. A
    setting the trials differ in is given with each of its values."""
    t = exp.counted if len(exp.counted) else exp.final
    needed = (*_SETUP_COLUMNS, "eval_episodes", "eval_interval", "total_env_steps")
    if t.empty or any(c not in t for c in needed):
        return []
    rows = list(t[list(_SETUP_COLUMNS)].drop_duplicates().itertuples(index=False))
    trained = [(r, got) for r in rows if (got := _trained_on(r)) is not None]
    if not trained:
        return []

    def each(texts: Iterable[str]) -> str:
        return " or ".join(dict.fromkeys(texts))

    unseen = {has for _, (_, has) in trained}
    if unseen == {True}:
        test = (
            "on unseen levels (`test/`: procgen's whole level distribution, `num_levels: 0`, "
            "the training levels among them)"
        )
    elif unseen == {False}:
        test = "on those same levels again (`test/`: they have no unseen level)"
    else:
        test = (
            "on unseen levels where a trial has any (`test/`: procgen's whole level "
            "distribution; a trial with no unseen level plays its own again)"
        )
    ranges = []
    for r, _ in trained:
        low, high = procgen.score_range(r.game, r.distribution_mode)
        if np.isfinite(low):
            ranges.append(f"{r.game} {r.distribution_mode} ({low:g}, {high:g})")
    normalized = (
        f"; `_norm` = (R − min) / (max − min), with train-procgen's (min, max) (Cobbe et al. "
        f"2019): {', '.join(dict.fromkeys(ranges))}"
        if ranges
        else ""
    )
    episodes = each(str(int(n)) for n in t["eval_episodes"].dropna())
    every = each(str(int(n)) for n in t["eval_interval"].dropna())
    budget = each(formatting.count(n) for n in t["total_env_steps"].dropna())
    return [
        f"**How scores are measured**: trained on {each(text for _, (text, _) in trained)}, "
        f"scored there (`train/`) and {test}; an evaluation plays one episode in each of "
        f"{episodes} envs per split, actions sampled, every {every} iterations and at the "
        f"end, and a final score is the last one's mean; {budget} env steps per "
        f"trial{normalized}.",
        "",
    ]


def no_unseen_levels_note(exp: Experiment) -> list[str]:
    """Where trials had no levels they never trained on (`procgen.has_unseen_levels`: every
    level, or exploration mode): what their unseen-level scores then measure. Every trial that
    ran counts: raw-return tables show trials the normalized ones cannot (exploration mode)."""
    trials = exp.final
    if not len(trials) or "distribution_mode" not in trials:
        return []
    modes = trials["distribution_mode"].tolist()
    levels = trials["num_levels"].tolist() if "num_levels" in trials else [None] * len(modes)
    levels = [None if pd.isna(n) else int(n) for n in levels]
    without = [not procgen.has_unseen_levels(m, n) for m, n in zip(modes, levels, strict=True)]
    if not any(without):
        return []
    k = sum(without)
    why = []
    if any(w and m != "exploration" for w, m in zip(without, modes, strict=True)):
        why.append("trained on every level (`num_levels: 0`)")
    if "exploration" in modes:
        why.append("played exploration mode (one fixed level per game)")
    who = "Every trial" if k == len(trials) else f"{k:,} of the {len(trials):,} trials"
    return [
        f"> **No unseen levels**: {who} {' or '.join(why)}. Their unseen-level (`test/`) "
        "scores play the levels they trained on: with the training-level scores, two samples "
        "of one level distribution, not a measure of generalization, and their gap is 0 but "
        "for sampling.",
        "",
    ]


def short_trials_note(exp: Experiment) -> list[str]:
    """At the top of a report (and of an ablation's table) whose trials all ran fewer than
    NEAR_RANDOM_STEPS env steps: what such scores typically are."""
    trials = exp.counted if len(exp.counted) else exp.final
    most = trials[M.ENV_STEPS].max()
    if not np.isfinite(most) or most >= NEAR_RANDOM_STEPS:
        return []
    return [
        f"> **Short trials**: none ran more than {formatting.count(most)} env steps. Below "
        f"~{formatting.steps(NEAR_RANDOM_STEPS)} env steps PPO on Procgen has typically learned "
        "little: such scores are typically a near-random policy's, and differences between "
        "variants mostly noise (the published setup trains 25M).",
        "",
    ]


def _top_only(top: int | None) -> list[str]:
    """A search's section of its `top` configurations only says so first."""
    return [] if top is None else [f"The top {top} configurations.", ""]


def _aggregates_section(
    exp: Experiment, aggs: dict[str, dict[str, S.Interval]], top: int | None = None
) -> list[str]:
    """`top`: a search's, the aggregates of its top configurations only."""
    md = ["## Aggregates", "", *_top_only(top)]
    if aggs:
        md += [*T.aggregates_table(aggs), "", "![aggregate metrics](aggregates.png)", ""]
        md += [
            f"[95% CI] where every game has {T.MIN_CI_RUNS}+ runs; fewer runs show the "
            "estimate alone: a bootstrap of 2 runs that agree gives a CI of width 0.",
            "",
        ]
    skipped = [v for v in (exp.variants if top is None else []) if v not in aggs]
    if skipped:
        md += [f"Not aggregated (a game without finished runs): {', '.join(skipped)}.", ""]
    return md


def _improvement_section(exp: Experiment, compared: list[str], kw: dict, among: str) -> list[str]:
    """P(X > Y) among `compared`, a bounded set (`among` says which, for the reader)."""
    if len(compared) < 2:
        return []
    return [
        "## Probability of improvement",
        "",
        "P(row > column): chance that a run of the row variant beats a run of the column "
        f"variant on the same game, averaged over games [95% CI; none where a game has fewer "
        f"than {T.MIN_CI_RUNS} runs of either variant, as the cell says]. Computed {among}.",
        "",
        *T.improvement_table(exp, compared, **kw),
        "",
    ]


def _gap_section(
    exp: Experiment, complete: list[str], kw: dict, top: int | None = None
) -> list[str]:
    """`top`: a search's, the gaps of its top configurations only (as its aggregates)."""
    table = T.gap_table(exp, complete, **kw)
    if not table:
        return []
    return [
        "## Generalization gap",
        "",
        *_top_only(top),
        "Normalized return on training levels minus unseen levels at the end of training: mean "
        "over seeds × games [95% CI, bootstrap stratified by game]. The bootstrap resamples "
        f"runs within each game, so a variant with fewer than {T.MIN_CI_RUNS} runs on some game "
        f"has no CI: its cell shows the mean and says `{T.NO_CI}`. Runs without a "
        "training-level score (trials from rlsweep versions that did not evaluate training "
        "levels) are left out.",
        "",
        *table,
        "",
    ]


def _curves_section(top: int = 0, others: int = 0, raw: bool = False) -> list[str]:
    """`others`: a search's configurations drawn grey beside its `top` ones; `raw`: the
    curves are raw returns (`raw_curves`)."""
    grey = (
        f" The top {top} configurations in colour; the other {others} in grey (unseen levels, "
        "without a legend entry)."
        if others
        else ""
    )
    units = (
        f"Raw returns (`{M.TRAIN_RETURN}`, `{M.TEST_RETURN}`): the sweep ranks by a raw return."
        if raw
        else f"Normalized returns (`{M.TRAIN_RETURN_NORM}`, `{M.TEST_RETURN_NORM}`)."
    )
    return [
        "## Learning curves",
        "",
        f"{units} Dashed: training levels; solid: unseen levels. Both are drawn from the "
        "iterations that evaluated (scores.csv leaves the others' scores empty): where a "
        "variant's runs evaluated at the same iterations, its curve joins those evaluations at "
        "their mean env steps; where they did not, each run is interpolated linearly onto the "
        "env steps all runs cover; runs with one evaluation are a point. A variant without a "
        "finished run on a game is drawn from its unfinished runs as far as they have got (its "
        f"legend entry counts them). Bands: 95% bootstrap CIs, where a variant has "
        f"{T.MIN_CI_RUNS}+ runs.{grey}",
        "",
        "![learning curves](learning_curves.png)",
        "",
        "## Sample efficiency",
        "",
        "![sample efficiency](sample_efficiency.png)",
        "",
    ]


# --- per sweep: hyperparameter importance, cost -------------------------------------------


def importance_section(
    dirs: Sequence[Path], exp: Experiment, out: Path
) -> tuple[list[str], list[str]]:
    """Importances of each sweep's searched parameters (sweeps that sampled any), and the files
    written: importance.csv and importance.png, where any sweep has two or more."""
    from rlsweep.results.importance import importances

    found: dict[str, pd.Series] = {}
    notes = []
    for d in dirs:
        spec = sweep_spec(d)
        if spec is None or not spec.sampled_keys:
            continue
        sweep = exp.counted[exp.counted["sweep"] == d.name]
        configs = T.configurations(sweep, list(spec.space))
        got = importances(spec, configs, d)
        if got is None:
            notes.append(f"`{d.name}`: too few finished configurations for importances.")
            continue
        scores, source = got
        if len(scores) == 1:  # the share of one is 1: nothing to rank
            notes.append(
                f"`{d.name}`: one searched parameter, `{scores.index[0]}`: its share of the "
                "variance is 1 by construction (its effect: search_params.png)."
            )
            continue
        found[d.name] = scores
        notes.append(f"`{d.name}`: from {source}.")
        fixed = [k for k in scores.index if k in configs and configs[k].nunique() < 2]
        if fixed:  # 0 says it never varied among them, not that it does not matter
            names = ", ".join(f"`{k}`" for k in fixed)
            notes.append(
                f"`{d.name}`: {names} took one value in the configurations counted here: "
                "its importance is 0 by construction, not a finding."
            )
    if not found:
        return (["## Hyperparameter importance", "", *notes, ""] if notes else []), []
    table = pd.concat(found, names=["sweep", "param"]).reset_index()
    table.to_csv(out / "importance.csv", index=False)
    plots.plot_importance(found, out / "importance.png")
    rows = [[r.sweep, r.param, T.fmt(r.importance)] for r in table.itertuples()]
    return [
        "## Hyperparameter importance",
        "",
        "fANOVA (Optuna's importance module) over each sweep's configurations, scored as "
        "ranked, and its searched parameters (a grid "
        "list's too): the share of the final unseen-level score's variance each explains.",
        "",
        *T.md_table(["sweep", "parameter", "importance"], rows),
        "",
        *notes,
        "",
        "![hyperparameter importance](importance.png)",
        "",
    ], ["importance.csv", "importance.png"]


def cost_section(
    dirs: Sequence[Path], exp: Experiment, prices: str | Path | None = None
) -> list[str]:
    """$ per trial and per sweep, for sweeps that recorded the instance type they ran on."""
    from rlsweep.plan import cost

    table = cost.load_prices(prices) if prices is not None else None

    lines = []
    for d in dirs:
        info = run_info(d)
        instance = info.get("instance_type")
        if not instance:
            continue
        spot = bool(info.get("spot"))
        trials = exp.final[exp.final["sweep"] == d.name]
        # a trial's resources as Ray held them
        cpus = trial_cpus(trials.get("num_cpus", 1), trials.get("num_env_runners", 0))
        gpus = trials.get("num_gpus", 0) * np.ones(len(trials))
        walls = trials[M.WALL_S].fillna(0.0)  # a trial that never reported ran ~0 s
        try:
            usd = [
                cost.trial_cost(w, c, g, instance, spot, table)
                for w, c, g in zip(walls, cpus * np.ones(len(trials)), gpus, strict=True)
            ]
        except cost.PriceError as e:  # e.g. a type missing from the price table
            lines.append(f"| {d.name} | {instance} | {len(trials)} | ? | ? ({e.message}) |")
            continue
        if not usd:
            continue
        lines.append(
            f"| {d.name} | {instance} ({'spot' if spot else 'on-demand'}) | {len(usd)} | "
            f"{T.usd_text(np.mean(usd))} | {T.usd_text(np.sum(usd))} |"
        )
    if not lines:
        return []
    return [
        "## Cost",
        "",
        "Each trial's wall time × its share of the instance (CPUs and GPUs it held) × the "
        "instance's $/h from the price table (`rlsweep/plan/prices.yaml`: estimates, editable).",
        "",
        "| sweep | instance | trials | $ per trial (mean) | $ for the sweep |",
        "| :--- | :--- | ---: | ---: | ---: |",
        *lines,
        "",
    ]


TRIAL_ROWS = 30
"""Up to this many trials, the runs section lists each; beyond, it sums them up by device."""


def runs_section(dirs: Sequence[Path], exp: Experiment) -> list[str]:
    """Where and how long the sweeps ran: each start of a sweep's driver (`run`, each
    `resume`: `experiment_dir.runs`) with its machine, time limit, wall time and end; the plan's
    estimate at the first start against the real wall time; and each trial's wall time,
    env steps/s, share evaluating and the device it ran on (`perf/device`), or, past
    TRIAL_ROWS trials, those by device."""
    several = len(dirs) > 1
    rows, notes = [], []
    for d in dirs:
        starts = runs(d)
        for i, r in enumerate(starts, 1):
            gpus = f"{r.get('gpus', 0):g}" + (
                f" ({', '.join(r['gpu_types'])})" if r.get("gpu_types") else ""
            )
            limit = r.get("time_limit_s")
            rows.append(
                [d.name] * several
                + [
                    str(i),
                    str(r.get("at", "")).replace("T", " ").removesuffix("+00:00"),
                    str(r.get("command", "")),
                    str(r.get("host", "")),
                    f"{r.get('cpus', 0):g} ({r.get('cpu_model') or '?'})",
                    gpus,
                    formatting.duration(limit) if limit else "none",
                    formatting.duration(r.get("wall_s")),
                    r.get("outcome", "no end recorded (killed?)"),
                ]
            )
        if starts:
            note = _plan_against_real(starts, exp, d.name)
            notes.append(f"{d.name}: {note}" if several else note)
    trials = exp.final.copy()
    if trials.empty:
        return []
    lines = ["## Runs and wall time", ""]
    if rows:
        header = ["sweep"] * several + ["#", "started (UTC)", "command", "host", "CPUs"]
        header += ["GPUs", "time limit", "wall time", "ended"]
        lines += [
            "Each start of the sweep's driver (`rlsweep run`, each `resume`; the experiment "
            "dir's `runs.jsonl`): the machine Ray offered its trials, its time limit, how long "
            "it ran and how it ended.",
            "",
            *T.md_table(header, rows),
            "",
            *notes,
            "",
        ]
    wall = trials[M.WALL_S].to_numpy(dtype=float)
    wall = np.where(wall > 0, wall, np.nan)  # a trial that never reported: no rate
    trials["steps_per_s"] = trials[M.ENV_STEPS].to_numpy(dtype=float) / wall
    trials["evaluating"] = trials[M.EVAL_S].to_numpy(dtype=float) / wall
    trials["ran_on"] = (
        _devices(exp.curves)
        .reindex(pd.MultiIndex.from_frame(trials[["sweep", "trial_id"]]))
        .fillna("?")
        .to_numpy()
    )
    how = (
        "Wall time: what the trial trained and evaluated, summed over its processes (each "
        "one's start-up left out: `time/wall_s`); env steps/s over it; evaluating: its share "
        "of it (`time/eval_s`); ran on: the device of its learner (`perf/device`), each "
        "machine in turn where a resume moved it."
    )
    if len(trials) <= TRIAL_ROWS:
        order = trials.iloc[np.argsort(T.trial_order(trials).to_numpy(), kind="stable")]
        games = trials["game"].nunique() > 1  # a column where the trials differ in it
        lines += T.md_table(
            [
                "trial",
                *(["game"] if games else []),
                "variant",
                "seed",
                "status",
                "ran on",
                "env steps",
                "wall time",
                "env steps/s",
                "evaluating",
            ],
            [
                [
                    str(r.trial_id),
                    *([str(r.game)] if games else []),
                    str(r.variant),
                    str(r.seed),
                    str(r.status),
                    str(r.ran_on),
                    formatting.count(r.env_steps),
                    formatting.duration(w),
                    formatting.rate(v),
                    f"{100 * e:.0f}%" if np.isfinite(e) else "?",
                ]
                for r, w, v, e in zip(
                    order.itertuples(),
                    order[M.WALL_S].to_numpy(dtype=float),
                    order["steps_per_s"].to_numpy(dtype=float),
                    order["evaluating"].to_numpy(dtype=float),
                    strict=True,
                )
            ],
        )
    else:
        by = trials.groupby("ran_on", sort=True)
        lines += T.md_table(
            ["ran on", "trials", "env steps", "wall time, median", "env steps/s, median"],
            [
                [
                    str(device),
                    str(len(g)),
                    formatting.steps(g[M.ENV_STEPS].sum()),
                    formatting.duration(g[M.WALL_S].median()),
                    formatting.rate(g["steps_per_s"].median()),
                ]
                for device, g in by
            ],
        )
    return [*lines, "", how, ""]


def _devices(curves: pd.DataFrame) -> pd.Series:
    """Per (sweep, trial_id): the devices its processes ran on, in turn (`A, then B`)."""
    if M.DEVICE not in curves:
        return pd.Series(dtype=object)
    said = curves.dropna(subset=[M.DEVICE])
    return said.groupby(["sweep", "trial_id"], sort=False)[M.DEVICE].agg(
        lambda x: ", then ".join(dict.fromkeys(x))
    )


def _plan_against_real(starts: list[dict], exp: Experiment, sweep: str) -> str:
    """The plan's estimate at a sweep's first start against what it took: the wall time of its
    runs, and its longest trial's."""
    trials = exp.final[exp.final["sweep"] == sweep]
    done = int((trials["status"] == R.TERMINATED).sum())
    n_planned = exp.specs[sweep].num_trials if sweep in exp.specs else len(trials)
    real = sum(r["wall_s"] for r in starts if "wall_s" in r)
    killed = sum("wall_s" not in r for r in starts)
    longest = "?"
    if trials[M.WALL_S].notna().any():
        row = trials.loc[trials[M.WALL_S].idxmax()]
        longest = formatting.duration(row[M.WALL_S])
        if pd.notna(row.get(M.EVAL_S)):
            longest += f" (evaluating {formatting.duration(row[M.EVAL_S])})"
    text = (
        f"**Real:** {formatting.duration(real)} of wall time over "
        f"{formatting.plural(len(starts), 'run')}"
        + (f" ({killed} without a recorded end, not counted)" if killed else "")
        + f", {done} of {n_planned} trials finished; the longest trial {longest}."
    )
    plan = starts[0].get("plan")
    if not plan:
        return text + " No plan was recorded at its first run."
    planned = ""
    if plan.get("longest_trial_s") is not None:
        planned = f", its longest trial {formatting.duration(plan['longest_trial_s'])}"
        if plan.get("longest_eval_s") is not None:
            # eval_limit: recorded since 2026-11-29
            counted = eval_counted(plan.get("eval_limit"), bool(plan.get("eval_unmeasured")))
            planned += f" (evaluating {formatting.duration(plan['longest_eval_s'])}{counted})"
    return (
        f"**Plan** (`rlsweep plan` at its first run, on {plan['box']}, "
        f"{formatting.plural(plan['concurrent'], 'trial')} at a time): "
        f"{formatting.duration(plan['est_wall_s'])}{planned}. " + text
    )


def memory_section(exp: Experiment) -> list[str]:
    """Per sweep, the peak memory of its trials' processes (rlsweep.metrics.MEMORY_METRICS,
    the largest over each trial's reports and restarts): in the host's memory, and for sweeps
    with GPU trials on their GPU against what each may reserve; nothing where no trial
    reported any (trials of rlsweeps before 2026-11-30)."""
    cols = [c for c in M.MEMORY_METRICS if c in exp.curves]
    if not cols:
        return []
    peaks = exp.curves.groupby(["sweep", "trial_id"])[cols].max().dropna(how="all")
    gpu = M.GPU_RESERVED_PEAK_GIB in peaks

    def figure(x: float, digits: int = 2) -> str:
        return f"{x:.{digits}f}" if np.isfinite(x) else "—"

    rows = []
    for sweep, trials in peaks.groupby(level="sweep"):
        host = trials.get(M.HOST_RSS_PEAK_GIB, pd.Series(dtype=float)).dropna()
        row = [str(sweep), str(len(trials)), figure(host.median()), figure(host.max())]
        if gpu:
            on_gpu = trials.dropna(subset=[M.GPU_RESERVED_PEAK_GIB])
            reserved = on_gpu[M.GPU_RESERVED_PEAK_GIB]
            row += [
                str(len(on_gpu)),
                figure(on_gpu[M.GPU_LIMIT_GIB].max(), 1),
                figure(reserved.median()),
                figure(reserved.max()),
                figure(on_gpu[M.GPU_ALLOCATED_PEAK_GIB].max()),
            ]
        rows.append(row)
    header = ["sweep", "trials", "host, median", "host, max"]
    how = (
        "Peak memory of each trial's process (GiB; the largest over its processes where it "
        "was resumed or retried): resident in the host's memory (`perf/host_rss_peak_gib`: "
        "its learner, its network and, where it samples in its own process, its envs; env "
        "runners of their own not counted)"
    )
    if gpu:
        header += ["GPU trials", "GPU limit", "reserved, median", "reserved, max"]
        header += ["allocated, max"]
        how += (
            "; and for GPU trials on their GPU: reserved by torch's caching allocator and "
            "allocated to tensors, against the limit it may reserve (its share of the GPU less "
            "the CUDA context, `rlsweep.plan.placement.memory_fraction`). The CUDA context "
            "(~0.75 GiB per process) comes on top"
        )
    return ["## Memory", "", how + ".", "", *T.md_table(header, rows), ""]
