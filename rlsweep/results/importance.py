"""Hyperparameter importance of a sweep's sampled parameters, with Optuna's importance module.

The score is the report's: the final unseen-level score (`test/return_norm`), higher better,
whatever a sweep's own `metric` and `mode` (a report ranks several sweeps by one score). An
Optuna sweep persists its study (`search.optuna_storage`, SQLite by default); that study is what
gets evaluated where it optimized the same score. Otherwise, and for random-search sweeps, which
have no study, one is built from their finished trials: one trial of it per configuration (its
sampled values with their declared distributions, its grid values too, as choices), scored as a
report ranks it (`tables.configurations`: the mean over the games it ran of its mean over
seeds). Either way the
evaluator is Optuna's default, fANOVA (a random-forest functional ANOVA): the importances are
the share of the score's variance each parameter explains, summing to 1 (for a single parameter,
1 by construction: the report says so instead of a table).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlsweep import metrics as M
from rlsweep.results.results import cell
from rlsweep.spec.space import Param
from rlsweep.spec.spec import SweepSpec

MIN_TRIALS = 4
"""Fewer finished configurations than this tell nothing about importance; none is computed."""


def distribution(p: Param):
    """The Optuna distribution a space parameter samples from (a quantized range: the
    multiples of q between `Param.bounds`)."""
    import optuna.distributions as D

    if p.kind in ("grid", "choice"):
        # as results tables hold them: lists (e.g. widths) as strings
        return D.CategoricalDistribution([cell(v) for v in p.values])
    lo, hi = p.bounds
    if p.kind == "int":
        return D.IntDistribution(int(lo), int(hi), step=int(p.q or 1))
    if p.kind == "loguniform":
        return D.FloatDistribution(lo, hi, log=True)
    return D.FloatDistribution(lo, hi, step=p.q)


def _inside(dist, value: Any) -> bool:
    """Whether `value` is one `dist` can take (Optuna refuses a trial with any other)."""
    import optuna.distributions as D

    if isinstance(dist, D.CategoricalDistribution):
        return value in dist.choices
    if not dist.low <= float(value) <= dist.high:
        return False
    if isinstance(dist, D.IntDistribution):
        return float(value).is_integer() and (int(value) - dist.low) % dist.step == 0
    if dist.step is None:
        return True
    k = (float(value) - dist.low) / dist.step
    return math.isclose(k, round(k), abs_tol=1e-8)


def study_from_trials(spec: SweepSpec, final: pd.DataFrame):
    """An in-memory Optuna study with one completed trial per row of `final` (a configuration,
    `tables.configurations`, or a finished sweep trial), over every
    parameter the space searches: a grid list's as a choice too (left out, its share of the
    score's variance would go to the sampled ones)."""
    dists = {k: distribution(spec.space[k]) for k in spec.space}
    return _study(dists, final)


def inferred_distribution(values: pd.Series):
    """The Optuna distribution a column's values look sampled from, for trials without a spec:
    numbers a range (log where positive values span a decade or more and crowd at its low end,
    as log-uniform samples do), anything else a choice among the values seen."""
    import optuna.distributions as D

    v = values.dropna()
    numeric = pd.api.types.is_numeric_dtype(v) and not pd.api.types.is_bool_dtype(v)
    if not numeric or v.nunique() < 2:
        return D.CategoricalDistribution(sorted(set(v), key=str) or [None])
    low, high = v.min(), v.max()
    if pd.api.types.is_integer_dtype(v):
        return D.IntDistribution(int(low), int(high))
    log = low > 0 and high >= 10 * low and v.median() < 0.6 * (low + high) / 2
    return D.FloatDistribution(float(low), float(high), log=bool(log))


def report_study(final: pd.DataFrame, params: Sequence[str], specs: Sequence[SweepSpec] = ()):
    """An in-memory study of a search's configurations (`final`: `tables.configurations`, in
    the order they ran), for its figures: each of `params` with the distribution the first
    spec that searches it declares (log where the space is), else one inferred from its
    values."""
    dists = {}
    for k in params:
        declared = next((s.space[k] for s in specs if k in s.space), None)
        dists[k] = distribution(declared) if declared else inferred_distribution(final[k])
    return _study(dists, final)


@contextmanager
def _optuna_quiet() -> Iterator[None]:
    """Optuna's INFO lines off for the block, its verbosity restored after: a report's
    in-memory studies are its own scaffolding, and "A new study created in memory ..." on
    the console of `rlsweep report` tells a user nothing (a sweep's own study keeps them)."""
    import optuna

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def _study(dists: dict[str, Any], final: pd.DataFrame):
    """A study maximizing the final unseen-level score, with one completed trial per row of
    `final` with a finite score and a value of every parameter of `dists` inside its
    distribution (a conditional parameter can keep a default outside its sampled range: such a
    row is left out)."""
    import optuna

    with _optuna_quiet():
        study = optuna.create_study(direction="maximize")
    trials = []
    for row in final.to_dict("records"):
        value = row[M.TEST_RETURN_NORM]
        if not np.isfinite(value):
            continue
        params = {}
        for k, dist in dists.items():
            v = row.get(k)
            if v is None or (isinstance(v, float) and np.isnan(v)):
                # A choice of null (`num_levels: [null, 200]`) reads back as a missing value.
                v = None
                if None not in getattr(dist, "choices", ()):
                    break
            elif not _inside(dist, v):
                break
            if isinstance(dist, optuna.distributions.IntDistribution):
                v = int(v)
            elif isinstance(dist, optuna.distributions.FloatDistribution):
                v = float(v)
            params[k] = v
        else:
            trials.append(
                optuna.trial.create_trial(params=params, distributions=dists, value=float(value))
            )
    study.add_trials(trials)
    return study


def persisted_study(spec: SweepSpec, experiment: str | Path):
    """The Optuna study a sweep persisted, or None (not an Optuna sweep, one that optimized
    another score than the report's, or not found)."""
    if spec.search.algorithm != "optuna" or (spec.metric, spec.mode) != (M.TEST_RETURN_NORM, "max"):
        return None
    import optuna

    url = spec.optuna_storage_url(experiment)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return None
    try:
        return optuna.load_study(study_name=spec.name, storage=url)
    except KeyError:  # no study of that name there
        return None


def importances(
    spec: SweepSpec,
    final: pd.DataFrame,
    experiment: str | Path | None = None,
    *,
    seed: int = 0,
) -> tuple[pd.Series, str] | None:
    """(importance per sampled parameter, highest first; where it came from), or None when the
    sweep sampled nothing or finished fewer than MIN_TRIALS configurations. `final`: one row
    per configuration (`tables.configurations`)."""
    import optuna
    from optuna.importance import FanovaImportanceEvaluator, get_param_importances

    if not spec.sampled_keys:
        return None
    study = persisted_study(spec, experiment) if experiment is not None else None
    source, unit = "the persisted Optuna study", "trials"
    if study is None:
        study, source, unit = study_from_trials(spec, final), "finished trials", "configurations"
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < MIN_TRIALS:
        return None
    scores = get_param_importances(study, evaluator=FanovaImportanceEvaluator(seed=seed))
    return pd.Series(scores, name="importance"), f"{source} ({len(complete)} {unit})"
