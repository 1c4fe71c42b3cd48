"""The sweep spec: *what* to run — games x seeds x a search space, budget, search, metric.

*Where* it runs (local Ray, a cluster address, ...) is not part of the spec; see `run_sweep`.
A spec is validated completely on the driver, before Ray starts: every grid trial is built as a
`TrialConfig`, every sampled parameter's candidates and bounds are checked the same way, and
every error names the file, the key path, the bad value and what is allowed. Each key's own
rule is declared with its field (rlsweep.spec.validators); the rules across keys are
`rlsweep.spec.spec_checks.SpecChecks`, which SweepSpec inherits.
YAML is read by rlsweep.spec.yamlfile (which also reads `1e-4` as a number).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlsweep.envs.procgen import GAMES, ONE_REWARD_GAMES, SPLITS
from rlsweep.errors import ConfigError, SpecError
from rlsweep.metrics import METRICS
from rlsweep.spec.config import TrialConfig, recorded_config
from rlsweep.spec.overrides import Override
from rlsweep.spec.overrides import apply as apply_overrides
from rlsweep.spec.overrides import named as name_overrides
from rlsweep.spec.overrides import parse as parse_override
from rlsweep.spec.space import DEFAULT_MUTATIONS, apply_conditions, parse_space
from rlsweep.spec.spec_checks import SpecChecks, not_a_parameter
from rlsweep.spec.validators import (
    Rule,
    Validated,
    build,
    checked,
    did_you_mean,
    env_steps,
    failures,
    flag,
    integer,
    is_number,
    key_errors,
    mapping,
    non_negative,
    one_of,
    optional,
    plain_tree,
    refused,
    text,
    unknown,
)
from rlsweep.spec.yamlfile import parse_yaml, read_yaml
from rlsweep.storage import is_uri

METRIC_MODES = ("max", "min")
"""Whether a sweep maximizes or minimizes its metric."""
SEARCH_ALGORITHMS = ("grid", "random", "optuna")
SCHEDULERS = ("none", "asha", "pbt")
OPTUNA_DB = "optuna.db"


_REFERENCE_VARIANT = re.compile(r"reference\[\d+\]\.variant")


def data_dir(name: str) -> Path:
    """`name`/ (baselines, search_spaces/ablations) of the checkout beside the package, else
    where the wheel installed it (pyproject's data-files: <prefix>/share/rlsweep/<last part>)."""
    checkout = Path(__file__).resolve().parents[2] / name
    installed = Path(sys.prefix) / "share" / "rlsweep" / Path(name).name
    return checkout if checkout.is_dir() or not installed.is_dir() else installed


BASELINES_DIR = data_dir("baselines")
DEFAULTED = ("name", "budget", "games", "seeds")
"""Spec keys whose default is rarely what a study wants: a spec that leaves one out is warned."""

SEARCH_READERS = {
    "grace_period": ("scheduler", "asha"),
    "reduction_factor": ("scheduler", "asha"),
    "perturbation_interval": ("scheduler", "pbt"),
    "mutations": ("scheduler", "pbt"),
    "synch": ("scheduler", "pbt"),
    "optuna_storage": ("algorithm", "optuna"),
}
"""Search keys that one scheduler or algorithm alone reads: (the key that picks it, its value).
A spec that sets one for another is warned (`unread_warnings`), not refused: an override
(`search.scheduler=none`) cannot take a key out of the file."""


_NAMES = Rule(
    lambda v: isinstance(v, list | tuple) and all(isinstance(k, str) for k in v),
    "a list of parameter names",
    convert=tuple,
)
_SWEEP_NAME = Rule(
    lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9][\w.-]*", v) is not None,
    "letters, digits, '_', '-', '.'",
)
_BASELINE = Rule(lambda v: isinstance(v, str) and v != "", "a baseline's name or a YAML path")
_DIRECTORY = Rule(lambda v: isinstance(v, str) and v != "", "a directory or s3:// URI")
_STRINGS = Rule(
    lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v), "a list of strings"
)
_VARIANTS = Rule(lambda v: isinstance(v, dict), "a mapping label -> params")
_SMOKE = Rule(lambda v: isinstance(v, dict), "a mapping of spec overrides")
_SQLALCHEMY_URL = Rule(
    lambda v: isinstance(v, str) and re.match(r"[a-z][a-z0-9+]*://", v) is not None,
    "a SQLAlchemy URL (sqlite:///study.db)",
)


def _distinct_list(what: str) -> Rule:
    """A list (a tuple too, from Python) of distinct items, held as a list of plain values."""

    def test(v: Any) -> bool:
        return isinstance(v, list | tuple) and 0 < len(v) == len(set(map(repr, plain_tree(v))))

    return Rule(test, f"a non-empty list of distinct {what}", convert=plain_tree)


@dataclass(frozen=True)
class SearchConfig(Validated):
    """How the space is searched."""

    algorithm: str = checked("grid", rule=one_of(SEARCH_ALGORITHMS))
    """grid (grid params only) | random (Tune's sampler) | optuna (TPE)."""
    num_samples: int = checked(1, rule=integer(1))
    """Configurations of the sampled (non-grid) parameters: each runs in every game x seed
    (x variant) cell, so that it is scored over the seeds and games, as the ranking scores it
    (random search: drawn once, from `seed`; Optuna: proposed one after another)."""
    scheduler: str = checked("none", rule=one_of(SCHEDULERS))
    """none | asha (early stopping) | pbt (population based training)."""
    grace_period: int = checked(5, rule=integer(1))
    """asha: iterations before a trial may be stopped."""
    reduction_factor: int = checked(3, rule=integer(2))
    """asha: keep the best 1/reduction_factor at each rung."""
    perturbation_interval: int = checked(5, rule=integer(1))
    """pbt: iterations between exploit/explore steps (trials checkpoint and evaluate at this
    interval: `SweepSpec.search_params`)."""
    mutations: tuple[str, ...] | None = checked(
        None, rule=optional(_NAMES, "for those of lr, entropy_coeff, clip_param it samples")
    )
    """pbt: space parameters PBT perturbs (default: those of `DEFAULT_MUTATIONS` the space
    samples: `SweepSpec.pbt_mutations`)."""
    synch: bool = checked(False, rule=flag)
    """pbt: wait for the whole population at each perturbation (reproducible: every trial is
    ranked against all others; slower: the population moves at the pace of its slowest trial).
    Asynchronous PBT ranks only the trials that have reported at that moment."""
    seed: int = checked(0, rule=integer(0))
    """Seed of the sampler: random search's configurations and Optuna's TPE (PBT's
    perturbations are Tune's own, unseeded)."""
    optuna_storage: str | None = checked(None, rule=optional(_SQLALCHEMY_URL))
    """optuna: SQLAlchemy URL the study persists in (default: `optuna.db`, SQLite, in the
    sweep's local results directory); the study is named after the sweep. (Not where results
    go: that is the spec's `storage_path`.)"""


ERROR_KINDS = ("std", "sem", "ci95")
"""What a published ± is: a standard deviation over seeds, a standard error of the mean, the
half-width of a 95% confidence interval."""
_ERROR_KIND = one_of(
    ERROR_KINDS,
    ["a standard deviation", "a standard error of the mean", "a 95% CI's half-width"],
    aliases={"stderr": "sem", "se": "sem", "sd": "std", "stdev": "std", "ci": "ci95"},
)
_NUMBER = Rule(is_number, "a number")  # an int or a float as YAML read it: 7 or 7.0, as printed
_SOURCE = Rule(
    lambda v: isinstance(v, str) and v.strip() != "", "text saying where it was published"
)


@dataclass(frozen=True, kw_only=True)
class Reference(Validated):
    """A published number set beside the sweep's own (`ablation.md` shows it in columns of its
    own, beside rlsweep's mean [CI] on the same levels; it is never averaged into rlsweep's
    statistics). A spec's `reference:` is a list of these."""

    game: str = checked(rule=one_of(GAMES))
    """The Procgen game it was measured on."""
    variant: str | None = checked(None, rule=optional(text))
    """The spec's variant it stands beside (one of `variants`' labels); null: context for the
    game, a number from another setup (shown in a row of its own)."""
    value: float = checked(rule=_NUMBER)
    """The published score: a raw episode return, as rlsweep's `train/return`, `test/return`."""
    error: float | None = checked(None, rule=optional(non_negative))
    """Its ± as published (2.71 for "16.46 ± 2.71"); `error_kind` or `note` says what it is."""
    error_kind: str | None = checked(None, rule=optional(_ERROR_KIND, "(not said)"))
    """What `error` is: std (over seeds) | sem (standard error) | ci95 (a 95% CI's half-width)."""
    split: str = checked(rule=one_of(SPLITS))
    """The levels it was measured on, and so the score it is set beside: train (the training
    levels: `train/return`; also a run on the full level distribution's) | test (unseen levels:
    `test/return`)."""
    budget: int = checked(rule=env_steps)
    """Env steps it was measured at (4e6)."""
    seeds: int | None = checked(rule=optional(integer(1), "(unknown)"))
    """Runs it is over: 1 = a single run; null: unknown (write it: null is not a default)."""
    source: str = checked(rule=_SOURCE)
    """Where it was published: repository and file, or paper and table."""
    note: str | None = checked(None, rule=optional(text))
    """What else a reader must know to compare it ("full level distribution")."""

    def _across_fields(self) -> list[ConfigError]:
        kind = self.error_kind is None or self.error is not None
        return failures(self, [("error_kind", kind, "null where there is no error")])

    @classmethod
    def required(cls) -> list[str]:
        """The keys a reference must write."""
        return [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]


@dataclass
class SweepSpec(SpecChecks):
    """A sweep: every game x seed x grid combination (x num_samples) becomes one trial."""

    name: str = checked(rule=_SWEEP_NAME)
    """Sweep name; results go to `<storage_path>/<name>/`."""
    extends: str | None = checked(None, rule=optional(_BASELINE))
    """Baseline whose params this spec starts from: a name in baselines/ or a YAML path."""
    # A spec that sets nothing runs TrialConfig()'s trial: its defaults are the trial's.
    games: list[str] = checked(rule=_distinct_list("games"), factory=lambda: [TrialConfig.game])
    """Procgen games (always a grid axis)."""
    seeds: list[int] = checked(rule=_distinct_list("seeds"), factory=lambda: [TrialConfig.seed])
    """Trial seeds (always a grid axis)."""
    budget: int = checked(TrialConfig.total_env_steps, rule=env_steps)
    """Env steps per trial (TrialConfig.total_env_steps)."""
    params: dict[str, Any] = checked(rule=mapping, factory=dict)
    """Fixed TrialConfig values shared by every trial (over the baseline's)."""
    space: dict[str, Any] = field(default_factory=dict)
    """Searched TrialConfig fields: a list = grid, or {choice|uniform|loguniform|int: ...}."""
    variants: dict[str, dict[str, Any]] = checked(rule=_VARIANTS, factory=dict)
    """Labelled bundles of params (e.g. 'No Augs': {augment: none}): a grid axis whose values
    change several fields at once; the label is recorded as the trial's `variant`."""
    search: SearchConfig = field(default_factory=SearchConfig)
    """Search algorithm and scheduler."""
    metric: str = checked("test/return_norm", rule=one_of(METRICS))
    """Metric Tune ranks trials by."""
    mode: str = checked("max", rule=one_of(METRIC_MODES))
    """max or min."""
    max_concurrent: int | None = checked(None, rule=optional(integer(1)))
    """Cap on trials running at once (None: as many as resources allow)."""
    keep_checkpoints: int = checked(1, rule=integer(1))
    """Checkpoints kept per trial, the newest ones: what a resume needs is 1 (Tune deletes the
    older only once the newer is whole on disk); more keeps a choice of earlier weights, at
    their size each. pbt keeps them all (it restores other trials' checkpoints at any time)."""
    storage_path: str = checked("results", rule=_DIRECTORY)
    """Directory (or s3:// URI) holding `<name>/`."""
    tags: list[str] = checked(rule=_STRINGS, factory=list)
    """Free-form labels (W&B run tags, next to the ones rlsweep derives)."""
    description: str | None = checked(None, rule=optional(text))
    """What the sweep is for, in a line (free text; baselines carry one too)."""
    reference: list[Reference] = field(default_factory=list)
    """Published numbers to set beside the sweep's (`Reference`): `ablation.md` shows each in
    its own columns, never in the statistics."""
    smoke: dict[str, Any] = checked(rule=_SMOKE, factory=dict)
    """Overrides for a quick run of the whole machinery (`--smoke`; see `smoke_spec`): `params`
    merge into the spec's, other keys replace theirs. Validated with the spec."""
    source: str | None = field(default=None, compare=False, repr=False)
    """File the spec was read from (for error messages)."""
    _given: frozenset[str] | None = field(default=None, init=False, compare=False, repr=False)
    """Top-level keys the spec's file (or dict) wrote; None: built in Python, all chosen."""
    _overrides: tuple[str, ...] = field(default=(), init=False, compare=False, repr=False)
    """The command line's overrides of the file's keys, as written (`rlsweep.spec.overrides`)."""

    def __post_init__(self) -> None:
        errors: list[SpecError] = []
        # Written in Python, they may hold numpy scalars and tuples: held as YAML holds them.
        for key in ("params", "space", "variants", "smoke", "reference"):
            object.__setattr__(self, key, plain_tree(getattr(self, key)))
        self.search = self._search(errors)
        self.reference = self._references(errors)
        space_errors: list[ConfigError] = []
        self.space = parse_space(self.space, errors=space_errors)  # the keys that parsed
        errors += [self._placed(e) for e in space_errors]
        self._check(errors)

    def _search(self, errors: list[SpecError]) -> SearchConfig:
        """`search` built (a neutral one, its errors added to `errors`, if it cannot be)."""
        raw = self.search
        if isinstance(raw, dict) and "storage" in raw:
            errors.append(
                SpecError(
                    self.source,
                    "search.storage",
                    "renamed: write search.optuna_storage (the Optuna study's SQLAlchemy URL; "
                    "results go to storage_path)",
                )
            )
            raw = {k: v for k, v in raw.items() if k != "storage"}
        try:
            return build(SearchConfig, raw)
        except ConfigError as e:
            errors += self._placed(e.under("search")).errors
            return SearchConfig()  # the other checks run on a neutral search

    def _references(self, errors: list[SpecError]) -> list[Reference]:
        """`reference` built, each entry's errors (missing keys, bad values, a variant label the
        spec does not have) added to `errors` at its key path (`reference[1].variant`); the
        entries that built."""
        raw = self.reference
        if not isinstance(raw, list | tuple):
            allowed = f"a list of mappings, each of {', '.join(Reference.required())} and more"
            errors.append(self._placed(refused("reference", raw, allowed)))
            return []
        # None: `variants` is refused itself, and there are no labels to hold references to
        labels = [str(k) for k in self.variants] if isinstance(self.variants, dict) else None
        context = "or null (context for the game)" if labels else "null (the spec has no variants)"
        built = []
        for i, entry in enumerate(raw):
            at = f"reference[{i}]"
            # Said beside the entry's other errors, which would hide it until they are mended.
            variant = entry.get("variant") if isinstance(entry, dict) else None
            if isinstance(variant, str) and labels is not None and variant not in labels:
                hint = did_you_mean(variant, labels)
                why = f"got {variant!r}{hint}; allowed: {', '.join([*labels, context])}"
                errors.append(self._error(f"{at}.variant", why))
            missing = [
                k for k in Reference.required() if isinstance(entry, dict) and k not in entry
            ]
            if missing:  # it cannot be built: the keys it has are checked one by one
                errors += [
                    self._error(f"{at}.{k}", "missing; every reference needs it") for k in missing
                ]
                errors += [
                    self._placed(e.under(at)) for e in key_errors(Reference, entry, values=True)
                ]
                continue
            try:
                ref = build(Reference, entry)
            except ConfigError as e:  # one error per problem, each placed (several fields' too)
                errors += list(self._placed(e.under(at)).errors)
                continue
            built.append(ref)
        return built

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def key_names(cls) -> list[str]:
        """The keys a spec may write (its fields but `source`, which is where it was read)."""
        return [f.name for f in dataclasses.fields(cls) if f.init and f.name != "source"]

    @classmethod
    def from_dict(
        cls, d: dict[str, Any], source: str | None = None, default_name: str | None = None
    ) -> SweepSpec:
        """The spec `d` holds (`source`: the file it came from, for errors). Every independent
        problem is reported at once: unknown keys beside the errors of the keys known.
        default_name: the name of a spec that writes none (a file's stem: a baseline runs as a
        spec); without one, a missing name is an error."""
        if not isinstance(d, dict):
            got = "an empty file" if d is None else type(d).__name__
            raise SpecError(
                source, "", f"a spec is a mapping of keys (name, games, ...), got {got}"
            )
        known = cls.key_names()
        errors = [
            SpecError(source, key, unknown("key", key, known)) for key in d if key not in known
        ]
        if "name" not in d and default_name is None:
            errors.append(SpecError(source, "name", "missing; every spec needs a name"))
        given = {k: v for k, v in d.items() if k in known}
        try:
            spec = cls(**{"name": default_name or "spec", **given}, source=source)
        except SpecError as e:
            later = list(e.errors)
            misspelt = {did_you_mean(k, known) for k in d if k not in known}
            if "variants" not in d and did_you_mean("variants", known) in misspelt:
                # `variant:` for `variants:`: its references' labels are not wrong as well
                later = [x for x in later if not _REFERENCE_VARIANT.fullmatch(x.path)]
            raise SpecError.several(errors + later) from None
        if errors:
            raise SpecError.several(errors)
        spec._given = frozenset(given)
        return spec

    @classmethod
    def from_yaml(
        cls,
        path: str | Path,
        *,
        smoke: bool = False,
        budget: int | None = None,
        storage_path: str | None = None,
        overrides: Sequence[str | Override] = (),
    ) -> SweepSpec:
        """The spec in the YAML file `path`: the one loader of every command and launcher.

        smoke: apply the file's `smoke:` overrides; budget, storage_path: override the file's;
        overrides: keys set on the command line (`rlsweep.spec.overrides`: `params.lr=1e-4` texts or
        `Override`s), over the file's and its smoke section's, validated as the file is (an
        error at a key one set names it)."""
        if isinstance(path, str) and "\n" in path:
            raise SpecError(
                None, "", "from_yaml takes a file path; for YAML text use SweepSpec.from_yaml_text"
            )
        given = [o if isinstance(o, Override) else parse_override(o) for o in overrides]
        flags = {("budget", "--budget"): budget, ("storage_path", "--storage"): storage_path}
        set_by = [
            Override((k,), v, f"{flag} {v}") for (k, flag), v in flags.items() if v is not None
        ]
        # The file as the command line sets it is what is validated, so that an override or a
        # flag may set a key the file gets wrong. With `smoke`, the file as its smoke section
        # is set; the rest of the command line sets the smoke's run, once it is made.
        run = [o for o in given if o.path[0] != "smoke"] + set_by
        on_file = [o for o in given if o.path[0] == "smoke"] + ([] if smoke else run)
        try:
            d = read_yaml(path)
            if isinstance(d, dict):  # else from_dict says what a spec is
                d = apply_overrides(d, on_file)
            # A file that names no sweep (a baseline) runs under its own name.
            spec = cls.from_dict(d, source=str(path), default_name=Path(path).stem)
        except SpecError as e:  # an error at a key one set names it
            raise name_overrides(e, on_file) from None
        if smoke:
            spec = spec.smoke_spec()._overridden(run)
        spec._overrides = tuple(o.text for o in given)
        return spec

    def _overridden(self, overrides: Sequence[Override]) -> SweepSpec:
        """This spec with the command line's `overrides` set (`rlsweep.spec.overrides`)."""
        if not overrides:
            return self
        d = apply_overrides(self._written(), overrides)
        try:
            return SweepSpec.from_dict(d, source=self.source, default_name=self.name)
        except SpecError as e:
            raise name_overrides(e, overrides) from None

    @classmethod
    def from_yaml_text(cls, text: str, source: str | None = None) -> SweepSpec:
        """The spec in YAML `text` (what `to_yaml` returns): `from_yaml_text(s.to_yaml()) == s`."""
        return cls.from_dict(parse_yaml(text, source), source=source)

    def with_overrides(self, **changes: Any) -> SweepSpec:
        """This spec with the top-level keys `changes` set, built and validated again: the way
        to change a spec (a SweepSpec is validated once, at construction). The keys the user
        did not write stay unwritten (see `default_warnings`)."""
        if not changes:
            return self
        d = {**self._written(), **changes}
        spec = SweepSpec.from_dict(d, source=self.source, default_name=self.name)
        spec._overrides = self._overrides
        return spec

    def smoke_spec(self) -> SweepSpec:
        """The spec with its `smoke:` overrides applied, named `<name>-smoke`."""
        if not isinstance(self.smoke, dict) or not self.smoke:
            raise SpecError(self.source, "smoke", "this spec has no smoke: section (--smoke)")
        d = {k: v for k, v in self._written().items() if k != "smoke"}
        for key, value in self.smoke.items():
            d[key] = {**d.get(key, {}), **value} if key == "params" else value
        d["name"] = f"{self.name}-smoke"
        try:
            return SweepSpec.from_dict(d, source=self.source)
        except SpecError as e:
            raise e.each(
                lambda x: SpecError(self.source, ".".join(("smoke", x.path)).strip("."), x.message)
            ) from None

    def _written(self) -> dict[str, Any]:
        """The keys the user wrote (all of them for a spec built in Python), as `to_dict`."""
        d = self.to_dict()
        return d if self._given is None else {k: v for k, v in d.items() if k in self._given}

    def unread_warnings(self) -> list[str]:
        """One line per search key set away from its default that the spec's scheduler or
        algorithm does not read (`SEARCH_READERS`: `grace_period` with `scheduler: none` does
        nothing)."""
        where = f"{self.source}: " if self.source else ""
        defaults, lines = SearchConfig(), []
        for key, (by, reader) in SEARCH_READERS.items():
            if getattr(self.search, key) == getattr(defaults, key):
                continue
            if (chosen := getattr(self.search, by)) != reader:
                lines.append(
                    f"{where}search.{key}: ignored: only search.{by} {reader} reads it "
                    f"(this spec's is {chosen})"
                )
        return lines

    def setting_warnings(self) -> list[str]:
        """One line per setting of the spec's trials that does nothing in some of them (one
        that does nothing in all of them is refused: `_ignored_errors`): `reward_shaping` under
        `normalize_reward` in a game whose one reward shaping only rescales
        (`ONE_REWARD_GAMES`), which the normalizer's division by the return's std undoes: those
        trials train as unshaped ones do, up to rounding (~1e-5)."""
        where = f"{self.source}: " if self.source else ""
        cancelled: dict[str, list[str]] = {}
        sampled = "reward_shaping" in self.sampled_keys
        # a sampled value is each trial's own draw: judged where it may draw true
        draws_true = sampled and True in self.space["reward_shaping"].candidates
        for variant, trial in self.labelled_trials():
            shaped = draws_true if sampled else trial.reward_shaping
            if shaped and trial.normalize_reward and trial.game in ONE_REWARD_GAMES:
                values = {k: getattr(trial, k) for k in self.grid_keys}
                values |= {"reward_shaping": True} if sampled else {}
                key = self._locate("reward_shaping", trial.game, trial.seed, values, variant)
                if trial.game not in cancelled.setdefault(key, []):
                    cancelled[key].append(trial.game)
        return [
            f"{where}{key}: true does nothing under normalize_reward: true in "
            f"{', '.join(games)}: shaping only rescales a game's one reward (a level's "
            "completion), and the normalizer undoes any rescale; set normalize_reward: false "
            "to compare shaped rewards"
            for key, games in cancelled.items()
        ]

    def default_warnings(self) -> list[str]:
        """One line per `DEFAULTED` key the spec's file left out (empty for Python specs)."""
        if self._given is None:
            return []
        where = f"{self.source}: " if self.source else ""
        what = {
            "name": f"named after its file: results go to {self.storage_path}/{self.name}",
            "budget": f"each trial runs the default {self.budget:,} env steps",
            "games": f"trials run the default game {', '.join(self.games)}",
            "seeds": f"trials run the default seed {self.seeds} only (no confidence interval)",
        }
        return [
            f"{where}{key}: not set; {what[key]}" for key in DEFAULTED if key not in self._given
        ]

    def to_dict(self) -> dict[str, Any]:
        d = {key: getattr(self, key) for key in self.key_names()}
        d["space"] = {k: p.to_raw() for k, p in self.space.items()}
        d["variants"] = {k: dict(v) for k, v in self.variants.items()}
        d["search"] = dataclasses.asdict(self.search)
        if self.search.mutations is not None:
            d["search"]["mutations"] = list(self.search.mutations)
        d["reference"] = [dataclasses.asdict(r) for r in self.reference]
        return d

    def to_yaml(self) -> str:
        """The spec as YAML; the command line's overrides, if any, in a comment at the top."""
        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        if self._overrides:
            text = f"# overridden on the command line: {' '.join(self._overrides)}\n{text}"
        return text

    # --- what it expands to -------------------------------------------------------------------
    # A spec is validated, and its baseline and defaults fixed, at construction: change one with
    # `with_overrides` (which builds and validates a new spec), not by assignment.
    @functools.cached_property
    def _baseline(self) -> dict[str, Any]:
        """The baseline's params, read once per spec (not once per trial)."""
        return load_baseline(self.extends, self.source)

    @functools.cached_property
    def _defaults(self) -> dict[str, Any]:
        params = {**self.base_params(), **self.search_params(), **self._never_defaults()}
        return TrialConfig(total_env_steps=self.budget, **params).to_dict()

    def _never_defaults(self) -> dict[str, Any]:
        """The fields whose default no trial runs, each at the first value a trial does run: set
        by every variant (the first's), or searched without a condition (the first candidate).
        The rules across fields then judge values that run: a search over `minibatch_size`
        under a train batch smaller than its default's 2,048 stands."""
        out = {}
        if self.variants:
            first, *rest = self.variants.values()
            out.update({k: v for k, v in first.items() if all(k in b for b in rest)})
        out.update({k: p.candidates[0] for k, p in self.space.items() if not p.when})
        return out

    def base_params(self) -> dict[str, Any]:
        """The baseline's params overlaid with this spec's params."""
        return {**self._baseline, **self.params}

    def search_params(self) -> dict[str, Any]:
        """TrialConfig fields the search sets over the params: PBT needs a checkpoint and a
        fresh metric (an evaluation, for test/ metrics) at each perturbation. Part of
        `defaults`, so that what validate, plan, the progress view and Tune count is what the
        trials run; `params` stay what the file wrote."""
        if self.search.scheduler == "pbt":
            every = self.search.perturbation_interval
            return {"checkpoint_interval": every, "eval_interval": every}
        return {}

    @property
    def grid_keys(self) -> list[str]:
        return [k for k, p in self.space.items() if p.is_grid]

    @property
    def sampled_keys(self) -> list[str]:
        return [k for k, p in self.space.items() if not p.is_grid]

    @property
    def configurations_in_every_cell(self) -> bool:
        """Each sampled configuration runs in every game x seed (x variant) cell: random
        search's, drawn once (`rlsweep.run.tune_bridge.drawn_configurations`), and Optuna's
        proposals (its Repeater); not PBT's population, whose members each draw their own
        start."""
        return bool(self.sampled_keys) and self.search.scheduler != "pbt"

    @property
    def pbt_mutations(self) -> tuple[str, ...]:
        """What PBT perturbs: `search.mutations`, else those of `DEFAULT_MUTATIONS` the space
        samples."""
        if self.search.mutations is not None:
            return self.search.mutations
        return tuple(k for k in DEFAULT_MUTATIONS if k in self.sampled_keys)

    @property
    def variant_labels(self) -> list[str | None]:
        return list(self.variants) or [None]

    def defaults(self) -> dict[str, Any]:
        """Every TrialConfig field as this spec fixes it (baseline, params, budget, and what
        the search sets: `search_params`): the one definition of the value a conditional
        parameter falls back to, for the trials validate/plan build (`trials`), the configs
        Tune records (`resolve`) and Tune's param_space alike. A field no trial runs at its
        default stands at a value one does (`_never_defaults`). A copy: callers may change
        it."""
        return dict(self._defaults)

    def cells(self) -> list[tuple[str, int, str | None]]:
        """The grid cells every sampled configuration runs in: game x seed x variant."""
        return [(g, s, v) for g in self.games for s in self.seeds for v in self.variant_labels]

    def resolve(self, config: dict[str, Any], *, keep_label: bool = False) -> dict[str, Any]:
        """What a trial of this spec runs, from the config Tune recorded (see resolve_config)."""
        return resolve_config(
            config,
            space=self.space,
            defaults=self.defaults(),
            cells=self.cells(),
            variants=self.variants,
            keep_label=keep_label,
        )

    def optuna_storage_url(self, experiment: str | Path | None, create: bool = False) -> str:
        """Where an Optuna sweep's study persists: `search.optuna_storage`, else SQLite in the
        local experiment dir (`results/<name>/` for a sweep stored at a URI: SQLite needs a
        file)."""
        if self.search.optuna_storage:
            return self.search.optuna_storage
        local = experiment if experiment and not is_uri(str(experiment)) else None
        path = Path(local or Path("results") / self.name).expanduser().resolve()
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path / OPTUNA_DB}"

    @property
    def num_trials(self) -> int:
        n = len(self.games) * len(self.seeds) * len(self.variant_labels) * self.search.num_samples
        for k in self.grid_keys:
            n *= len(self.space[k].values)
        return n

    @property
    def sweep_env_steps(self) -> int:
        """Env steps of the whole sweep: every trial's budget."""
        return self.num_trials * self.budget

    @property
    def takes_gpus(self) -> bool:
        """Whether any of its trials takes a GPU (`TrialConfig.on_gpu`)."""
        return any(trial.on_gpu for trial in self.trials())

    def counted_steps(self, env_steps: float) -> float:
        """What a trial's env steps count towards `sweep_env_steps`: at most its budget (its
        last batch may overshoot it)."""
        return min(float(env_steps), float(self.budget))

    def trials(self) -> list[TrialConfig]:
        """Every grid trial, in order (games, seeds, variants, then the grid); sampled params at
        defaults. With sampled parameters each of these stands for `num_samples` trials."""
        return [t for _, t in self.labelled_trials()]

    def labelled_trials(self) -> list[tuple[str | None, TrialConfig]]:
        """`trials()`, each with its variant label (None without variants). Every trial is
        built (and so validated); the errors of all of them are raised together."""
        keys = self.grid_keys
        out, errors = [], []
        for game, seed, variant, *values in itertools.product(
            self.games, self.seeds, self.variant_labels, *(self.space[k].values for k in keys)
        ):
            try:
                trial = self._trial(game, seed, dict(zip(keys, values, strict=True)), variant)
            except SpecError as e:
                errors += e.errors
                continue
            out.append((variant, trial))
        if errors:
            raise SpecError.several(errors)
        return out

    def _trial(
        self, game: str, seed: int, overrides: dict[str, Any], variant: str | None = None
    ) -> TrialConfig:
        d = {**self.base_params(), **self.search_params()}  # as Tune's param_space has them
        d.update(game=game, seed=seed, total_env_steps=self.budget)
        if variant is not None:
            d.update(self.variants[variant])
        d.update(overrides)
        try:
            try:
                defaults = self._defaults
            except ConfigError:  # the params refused: each trial's build says so, with its own
                defaults = {**TrialConfig().to_dict(), **self._never_defaults()}
            return TrialConfig.from_dict(apply_conditions({**defaults, **d}, self.space, defaults))
        except ConfigError as e:
            raise e.each(
                lambda x: SpecError(
                    self.source, self._locate(x.path, game, seed, overrides, variant), x.message
                )
            ) from None

    def _locate(
        self,
        key: str,
        game: str,
        seed: int,
        overrides: dict[str, Any],
        variant: str | None = None,
    ) -> str:
        """The spec key path a TrialConfig error came from."""
        if variant is not None and key in self.variants[variant]:
            return f"variants.{variant}.{key}"
        if key == "game":
            return f"games[{self.games.index(game)}]"
        if key == "seed":
            return f"seeds[{self.seeds.index(seed)}]"
        if key == "total_env_steps":
            return "budget"
        if key in self.space and (key in overrides or not self.space[key].when):
            p = self.space[key]  # unconditional: at its first candidate where not overridden
            value = overrides.get(key, p.candidates[0])
            if p.kind in ("grid", "choice") and value in p.values:
                return f"space.{key}[{list(p.values).index(value)}]"
            return f"space.{key}"
        if self.variants and key in self._never_defaults():
            return f"variants.{next(iter(self.variants))}.{key}"
        if key in self.params:
            return f"params.{key}"
        if key and key in self._baseline:
            return f"extends({self.extends}).{key}"
        # A cross-field rule (e.g. minibatch_size <= train batch) can fail for a default value.
        return f"params.{key}" if key else ""

    def trial_error(self, e: ConfigError, trial: TrialConfig) -> SpecError:
        """`e`, raised about one of `trials()` (e.g. it does not fit a machine:
        `rlsweep.run.fits`), as this spec's error(s) at the keys that set the values it names."""
        return e.each(
            lambda x: SpecError(
                self.source, self._locate(x.path, trial.game, trial.seed, {}), x.message
            )
        )


CELL_INDEX = "__trial_index__"
"""Set by Tune's Repeater (Optuna sweeps): which game x seed x variant cell a trial runs."""
SAMPLE = "__sample__"
"""Of a grid or random sweep that samples parameters: which of its `search.num_samples`
configurations, drawn once for the whole sweep, a trial runs (each runs in every cell:
`rlsweep.run.tune_bridge.param_space`)."""
VARIANT = "variant"
"""Config key of a labelled variant (spec.variants)."""
TRIAL_FILE = "trial.json"
"""In each trial dir, beside Tune's params.json: what the trial runs, `resolve_config` of Tune's
config with its variant label (`rlsweep.run.tune_bridge.TrialRecord` writes it as the trial starts).
params.json holds Tune's config, which names an Optuna trial's game x seed x variant cell by
its index alone."""


def resolve_config(
    config: dict[str, Any],
    *,
    space: dict[str, Any],
    defaults: dict[str, Any],
    cells: list[tuple[str, int, str | None]],
    variants: dict[str, dict[str, Any]],
    keep_label: bool = False,
) -> dict[str, Any]:
    """The config a trial runs, from what Tune recorded: the Repeater's cell index becomes
    game / seed / variant params, conditions are applied; the variant label is dropped (it is
    not a TrialConfig field) unless `keep_label`. A field the recording rlsweep predates takes
    the value that rlsweep ran (`recorded_config`)."""
    config = recorded_config(config)
    config.pop(SAMPLE, None)  # its drawn values are in the config already
    if CELL_INDEX in config:
        config["game"], config["seed"], label = cells[config.pop(CELL_INDEX)]
        if label is not None:
            config.update(variants[label])
            config[VARIANT] = label
    label = config.pop(VARIANT, None)
    config = apply_conditions(config, space, defaults)
    if keep_label and label is not None:
        config[VARIANT] = label
    return config


def baseline_names() -> list[str]:
    return sorted(p.stem for p in BASELINES_DIR.glob("*.yaml"))


def load_baseline(ref: str | None, source: str | None = None) -> dict[str, Any]:
    """A baseline's params: `ref` names baselines/<ref>.yaml or is a path to a YAML file.

    A baseline file is a mapping with `params:` (TrialConfig fields) and an optional
    `description:`; its comments cite where the values come from."""
    if ref is None:
        return {}
    path = Path(ref) if ref.endswith((".yaml", ".yml")) else BASELINES_DIR / f"{ref}.yaml"
    if source and not path.is_absolute() and ref.endswith((".yaml", ".yml")):
        path = Path(source).parent / path
    if not path.exists():
        if ref.endswith((".yaml", ".yml")):  # a path: say where it was looked for
            why = f"no file {path}" + (" (a path is read from the spec's folder)" if source else "")
            raise SpecError(source, "extends", f"got {ref!r}: {why}")
        names = baseline_names()
        raise SpecError(
            source,
            "extends",
            f"got {ref!r}{did_you_mean(ref, names)}; allowed: {', '.join(names)} or a path",
        )
    return dict(_baseline_params(str(path), path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=64)
def _baseline_params(path: str, mtime_ns: int) -> dict[str, Any]:
    """A baseline file's validated params, read once per version of the file (a spec and its
    smoke run share one read)."""
    data = read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
        raise SpecError(str(path), "params", "a baseline needs a 'params:' mapping")
    errors = [
        SpecError(str(path), str(key), unknown("key", str(key), ["params", "description"]))
        for key in data
        if key not in ("params", "description")
    ]
    errors += [
        SpecError(str(path), f"params.{key}", not_a_parameter(key))
        for key in data["params"]
        if not_a_parameter(key)
    ]
    if errors:
        raise SpecError.several(errors)
    try:
        TrialConfig.from_dict(data["params"])
    except ConfigError as e:
        raise e.under("params").each(lambda x: SpecError(str(path), x.path, x.message)) from None
    return data["params"]
