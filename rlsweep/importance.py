"""Hyperparameter importance of a sweep's sampled parameters, with Optuna's importance module.

An Optuna sweep persists its study (`search.optuna_storage`, SQLite by default); that study is
what gets evaluated. Random-search sweeps have no study, so one is built from their finished trials:
each trial's sampled values with their declared distributions, and its final score. Either way
the evaluator is Optuna's default, fANOVA (a random-forest functional ANOVA): the importances
are the share of the score's variance each parameter explains, summing to 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rlsweep import metrics as M
from rlsweep.results import cell
from rlsweep.space import Param
from rlsweep.spec import SweepSpec

MIN_TRIALS = 4
"""Fewer finished trials than this tell nothing about importance; none is computed."""


def distribution(p: Param):
    """The Optuna distribution a space parameter samples from."""
    import optuna.distributions as D

    if p.kind in ("grid", "choice"):
        # as results tables hold them: lists (e.g. widths) as strings
        return D.CategoricalDistribution([cell(v) for v in p.values])
    if p.kind == "int":
        return D.IntDistribution(int(p.low), int(p.high), step=int(p.q or 1))
    if p.kind == "loguniform":
        return D.FloatDistribution(p.low, p.high, log=True)
    return D.FloatDistribution(p.low, p.high, step=p.q)


def study_from_trials(spec: SweepSpec, final: pd.DataFrame, metric: str = M.TEST_RETURN_NORM):
    """An in-memory Optuna study with one completed trial per finished sweep trial."""
    import optuna

    dists = {k: distribution(spec.space[k]) for k in spec.sampled_keys}
    study = optuna.create_study(direction="maximize" if spec.mode == "max" else "minimize")
    for _, row in final.iterrows():
        if not np.isfinite(row[metric]):
            continue
        params = {}
        for k, dist in dists.items():
            v = row.get(k)
            if v is None or (isinstance(v, float) and np.isnan(v)):
                break
            if isinstance(dist, optuna.distributions.IntDistribution):
                v = int(v)
            elif isinstance(dist, optuna.distributions.FloatDistribution):
                # a conditional parameter can keep a default outside its sampled range
                if not dist.low <= float(v) <= dist.high:
                    break
                v = float(v)
            params[k] = v
        else:
            study.add_trial(
                optuna.trial.create_trial(params=params, distributions=dists, value=row[metric])
            )
    return study


def persisted_study(spec: SweepSpec, experiment: str | Path):
    """The Optuna study a sweep persisted, or None (not an Optuna sweep, or not found)."""
    if spec.search.algorithm != "optuna":
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
    sweep sampled nothing or finished fewer than MIN_TRIALS trials."""
    import optuna
    from optuna.importance import FanovaImportanceEvaluator, get_param_importances

    if not spec.sampled_keys:
        return None
    study = persisted_study(spec, experiment) if experiment is not None else None
    source = "the persisted Optuna study"
    if study is None:
        study, source = study_from_trials(spec, final), "finished trials"
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < MIN_TRIALS:
        return None
    scores = get_param_importances(study, evaluator=FanovaImportanceEvaluator(seed=seed))
    return pd.Series(scores, name="importance"), f"{source} ({len(complete)} trials)"
