"""The rules across a sweep spec's keys: `SpecChecks`, which `rlsweep.spec.spec.SweepSpec` inherits.

Each key's own rule is declared with its field (rlsweep.spec.validators, in spec.py); what is here
needs several keys at once: the parameters that params, space, variants and conditions name;
the search against the space and the games; the smoke overrides; and every trial the spec
makes, built as a `TrialConfig` and so validated. All independent errors are raised together.
The methods read the spec's fields and its trials (`trials`, `_trial`, `smoke_spec`,
`sampled_keys`, `grid_keys`) through `self`.
"""

from __future__ import annotations

import itertools
from typing import Any

from rlsweep.envs import procgen
from rlsweep.errors import ConfigError, SpecError
from rlsweep.metrics import METRICS
from rlsweep.spec.config import RENAMED, UNREAD, TrialConfig
from rlsweep.spec.space import DEFAULT_MUTATIONS
from rlsweep.spec.validators import (
    check_each_field,
    did_you_mean,
    is_number,
    mapping,
    refused,
    rule_of,
    unknown,
)

AXES = {"game": "games", "seed": "seeds", "total_env_steps": "budget"}
"""TrialConfig fields set by top-level spec keys, not by params or space."""
PARAMETERS = [k for k in TrialConfig.field_names() if k not in AXES]
"""What params, space and variants may set."""
TRIALS_FROM = ("extends", "games", "seeds", "budget", "params", "variants")
"""The spec keys the trials are built from."""


def not_a_parameter(key: Any) -> str:
    """Why params, space or variants may not set `key` ('' if they may)."""
    if key in AXES:
        return f"set this with the top-level '{AXES[key]}' key"
    if key in PARAMETERS:
        return ""
    return RENAMED.get(key) or unknown("parameter", str(key), PARAMETERS)


def _unsmoked(path: str) -> str:
    """A `smoke_spec` error's key path as the spec's own (`smoke.games[1]`: `games[1]`)."""
    return path.removeprefix("smoke.")


RESTORED_FROM_CHECKPOINT = {
    "kl_coeff": "a restored trial goes on with the KL coefficient the updates of the trial it "
    "copies adapted (rlsweep.trial.checkpoint.LEARNING_FILE), not a perturbed start",
}
"""Parameters whose value a trial restored from a checkpoint takes from it, not from its config:
a PBT exploit would not perturb them."""


class SpecChecks:
    """The rules across a spec's keys (see the module docstring)."""

    source: str | None

    def _placed(self, e: ConfigError) -> SpecError:
        """`e` (one or several problems at spec key paths) as errors of this spec's file."""
        return e.each(lambda x: SpecError(self.source, x.path, x.message))

    def _error(self, path: str, message: str) -> SpecError:
        return SpecError(self.source, path, message)

    def _check(self, errors: list[SpecError]) -> None:
        """Every check, with all independent errors raised together (`errors`: those found
        already): each key's own rule, then the rules across keys. The trials are built (and
        validated) only when the keys they are built from passed: a bad `games` or an unknown
        parameter would only repeat itself there."""
        refused = check_each_field(self)
        errors += [self._placed(e) for e in refused]
        names = self._parameter_errors()
        # A refused search is judged as a neutral one (grid): its rules against the space would
        # speak of an algorithm nobody wrote.
        search_refused = any(e.path.startswith("search") for e in errors)
        errors += names + ([] if search_refused else self._search_errors()) + self._smoke_errors()
        unbuilt = any(e.path in TRIALS_FROM for e in refused)  # a key they are built from
        if not names and not unbuilt:
            errors += self._trial_errors()
        elif names and not unbuilt and (known := self._without_unknown_keys(names)):
            # the trials, built without the unknown names: the rest of the spec speaks now
            errors += known._trial_errors()
        else:  # no trial is built: each known param's own rule still speaks now
            errors += self._param_value_errors()
        if self.smoke and not errors:
            try:
                self.smoke_spec()  # the smoke run must be valid too, whether or not it is used
            except SpecError as e:
                errors += e.errors
        elif self.smoke:
            errors += self._smoke_errors_beside(errors)
        if errors:
            raise SpecError.several(errors)

    def _smoke_errors_beside(self, errors: list[SpecError]) -> list[SpecError]:
        """The smoke run's own errors, said with the spec's `errors` rather than once they are
        fixed: less those at a key the spec's errors are at already (the smoke inherits them,
        whatever its batch makes of them). None where no smoke can be made of this spec (a key
        refused whole, the smoke section's shape, a variant that is no mapping)."""
        if any(
            e.path.startswith("smoke") or ("." not in e.path and "[" not in e.path) for e in errors
        ):
            return []
        try:
            self.smoke_spec()
        except SpecError as e:
            said = {x.path for x in errors}
            return [x for x in e.errors if _unsmoked(x.path) not in said]
        except (TypeError, ValueError, KeyError, AttributeError):  # made of what is refused
            return []
        return []

    def _without_unknown_keys(self, names: list[SpecError]) -> Any:
        """A copy of this spec without the unknown `params` and `space` keys that `names`
        reports, and without the `space` parameters whose condition it refuses (None where it
        reports more: a variant's), for the rest of the spec to be checked with them out of the
        way; it is used for nothing else."""
        import copy

        params = self.params if isinstance(self.params, dict) else {}
        unknown = {"params": set(), "space": set()}
        for e in names:
            section, _, key = e.path.partition(".")
            key, _, rest = key.partition(".")
            if section == "space" and key in self.space and rest.startswith("when."):
                unknown["space"].add(key)  # its condition is refused: out, condition and all
                continue
            if section not in unknown or rest or not_a_parameter(key) == "":
                return None
            unknown[section].add(key)
        known = copy.copy(self)
        known.__dict__.pop("_defaults", None)  # cached from the spec with its unknown keys
        object.__setattr__(
            known, "params", {k: v for k, v in params.items() if k not in unknown["params"]}
        )
        space = {k: v for k, v in self.space.items() if k not in unknown["space"]}
        object.__setattr__(known, "space", space)
        return known

    def _param_value_errors(self) -> list[SpecError]:
        """Each `params` value its field's own rule refuses (the trials, which check them with
        the rules across fields, are not built while a parameter name is unknown)."""
        params = self.params if isinstance(self.params, dict) else {}
        found = []
        for key, value in params.items():
            rule = None if not_a_parameter(key) else rule_of(TrialConfig, key)
            if rule is not None and not rule(value):
                found.append(refused(f"params.{key}", value, rule.allowed, rule.hint(value)))
        return [self._placed(e) for e in found]

    def _parameter_errors(self) -> list[SpecError]:
        """The parameters params, space, variants and conditions name: TrialConfig fields that
        no top-level key sets, each either fixed or searched."""
        params = self.params if isinstance(self.params, dict) else {}
        found = []
        for section, keys in (("params", params), ("space", self.space)):
            found += [(f"{section}.{key}", why) for key in keys if (why := not_a_parameter(key))]
        for label, bundle in (self.variants if isinstance(self.variants, dict) else {}).items():
            if not isinstance(label, str):  # a label YAML read as a number or a flag
                why = f"got the label {label!r}; allowed: text (quote it: '{label}')"
                found.append((f"variants.{label}", why))
                continue
            if not isinstance(bundle, dict):
                found.append((f"variants.{label}", f"got {bundle!r}; allowed: a mapping of params"))
                continue
            for key in bundle:
                searched = key in self.space and "also searched in space; pick one"
                if why := not_a_parameter(key) or searched:
                    found.append((f"variants.{label}.{key}", why))
        for key, p in self.space.items():
            if key in params:
                found.append(
                    (f"space.{key}", "also set in params; a parameter is either fixed or searched")
                )
            for cond, values in p.when.items():
                if cond not in self.space and (why := not_a_parameter(cond)):
                    found.append((f"space.{key}.when.{cond}", why))
                    continue
                for i, value in enumerate(values):
                    at = f"space.{key}.when.{cond}" + (f"[{i}]" if len(values) > 1 else "")
                    if why := self._never_taken(cond, value):
                        found.append((at, why))
                if why := self._never_holds(cond, values):
                    found.append((f"space.{key}.when.{cond}", why))
        return [self._error(path, message) for path, message in found]

    def _never_holds(self, key: str, values: tuple[Any, ...]) -> str:
        """Why a condition on `key` being one of `values` holds in no trial, where `key` is
        fixed (neither searched nor set by a variant), or ''."""
        bundles = self.variants.values() if isinstance(self.variants, dict) else ()
        if key in self.space or any(isinstance(b, dict) and key in b for b in bundles):
            return ""
        try:
            fixed = self.defaults()[key]
        except (SpecError, ConfigError, KeyError):  # the spec's own errors say why
            return ""
        if fixed in values:
            return ""
        return (
            f"{key} is {fixed!r} in every trial (neither searched nor set by a variant), so "
            f"this condition never holds and the parameter is never searched; search {key}, "
            "or drop the condition"
        )

    def _never_taken(self, key: str, value: Any) -> str:
        """Why parameter `key` never takes `value` (a condition on it would never hold, and
        its parameter would silently keep its default), or '' where it may."""
        p = self.space.get(key)
        if p is not None and p.kind in ("grid", "choice"):
            if value in p.values:
                return ""
            names = [str(v) for v in p.values]
            hint = did_you_mean(value, names) if isinstance(value, str) else ""
            return f"got {value!r}{hint}; allowed: a value space.{key} takes ({', '.join(names)})"
        if p is not None:
            lo, hi = p.bounds
            if is_number(value) and lo <= value <= hi:
                return ""
            return f"got {value!r}; allowed: a value in space.{key}'s range [{p.low}, {p.high}]"
        rule = rule_of(TrialConfig, key)
        if rule is None or rule(value):
            return ""
        return f"got {value!r}{rule.hint(value)}; allowed: {rule.allowed}"

    def _search_errors(self) -> list[SpecError]:
        """The search against the space and the games."""
        s, sampled, found = self.search, self.sampled_keys, []
        if s.algorithm == "grid" and sampled:
            found.append(
                (
                    f"space.{sampled[0]}",
                    "a sampled parameter needs search.algorithm random or optuna "
                    "(grid runs lists only)",
                )
            )
        if s.algorithm == "optuna" and self.grid_keys:
            found.append(
                (
                    f"space.{self.grid_keys[0]}",
                    "optuna samples every parameter; write {choice: [...]} instead of a grid list",
                )
            )
        for key in sampled if s.algorithm == "optuna" else ():
            p = self.space[key]
            if p.kind == "loguniform" and p.q is not None:
                # OptunaSearch drops it, with only a log line (Ray 2.60): the trials would
                # run values that are no multiples of q.
                found.append(
                    (f"space.{key}.q", "optuna cannot quantize a loguniform parameter; leave q out")
                )
        if s.scheduler == "pbt" and isinstance(self.games, list) and len(self.games) > 1:
            found.append(
                (
                    "search.scheduler",
                    "pbt exploits across the population, so one PBT sweep trains one game; "
                    f"got games {self.games}",
                )
            )
        # A member that exploits another takes its whole config (its game and seed aside:
        # rlsweep.run.population): arms the report compares would merge into the best one.
        if s.scheduler == "pbt" and self.variants:
            found.append(
                (
                    "variants",
                    "pbt exploits across the population: a member that exploits another takes "
                    "its variant too, so the variants would merge into the best one's; run one "
                    f"PBT sweep per variant (got {', '.join(map(str, self.variants))})",
                )
            )
        for key in self.grid_keys if s.scheduler == "pbt" else ():
            found.append(
                (
                    f"space.{key}",
                    "a grid under pbt: a member that exploits another takes its value too, so "
                    "the values would merge into the best one's; sample it, or run one PBT "
                    "sweep per value",
                )
            )
        for key in ("eval_interval", "checkpoint_interval") if s.scheduler == "pbt" else ():
            if key in self.params and self.params[key] != s.perturbation_interval:
                found.append(
                    (
                        f"params.{key}",
                        f"got {self.params[key]!r}; pbt evaluates and checkpoints at each "
                        f"perturbation (search.perturbation_interval {s.perturbation_interval}); "
                        f"leave {key} out",
                    )
                )
        if s.scheduler == "pbt" and getattr(self, "keep_checkpoints", 1) != 1:
            found.append(
                (
                    "keep_checkpoints",
                    "pbt keeps every checkpoint (it restores other trials' at any time); "
                    "leave keep_checkpoints out",
                )
            )
        for i, key in enumerate(s.mutations or () if s.scheduler == "pbt" else ()):
            if key not in sampled:
                allowed = f"a sampled parameter of space ({', '.join(sampled) or 'none'})"
                found.append((f"search.mutations[{i}]", f"got {key!r}; allowed: {allowed}"))
            elif key in RESTORED_FROM_CHECKPOINT:
                why = RESTORED_FROM_CHECKPOINT[key]
                found.append((f"search.mutations[{i}]", f"pbt cannot perturb {key}: {why}"))
        if s.scheduler == "pbt" and s.mutations is None and not self.pbt_mutations:
            found.append(
                (
                    "search.mutations",
                    f"not set, and space samples none of {', '.join(DEFAULT_MUTATIONS)}, which "
                    "pbt perturbs by default; list the sampled parameters it should perturb",
                )
            )
        return [self._error(path, message) for path, message in found]

    def _smoke_errors(self) -> list[SpecError]:
        smoke = self.smoke if isinstance(self.smoke, dict) else {}
        found = [
            self._error(f"smoke.{key}", "allowed: spec keys but name and smoke")
            for key in smoke
            if key in ("smoke", "name")
        ]
        if "params" in smoke and not mapping(smoke["params"]):
            found.append(self._placed(refused("smoke.params", smoke["params"], mapping.allowed)))
        return found

    def _trial_errors(self) -> list[SpecError]:
        """Every grid trial and every sampled parameter's candidates, built (and so validated);
        and a normalized metric needs games and modes whose returns normalize."""
        try:
            labelled = self.labelled_trials()
        except SpecError as e:
            # A sampled param's first candidate stands in the grid trials (`_never_defaults`):
            # its bad bound fails them all, and another's bad candidate waited for the next run.
            return list(e.errors) + self._sampled_errors()
        trials = [t for _, t in labelled]
        errors = self._sampled_errors() + self._ignored_errors(labelled)
        if self.metric in METRICS and self.metric.endswith("_norm"):
            for t in trials:
                if note := procgen.normalization_note(t.game, t.distribution_mode):
                    why = f"which is NaN for {t.game} {t.distribution_mode} ({note})"
                    raw = self.metric.removesuffix("_norm")
                    errors.append(
                        self._error("metric", f"got {self.metric!r}, {why}; allowed: {raw}")
                    )
                    break
        return errors

    def _ignored_errors(self, trials: list[tuple[str | None, Any]]) -> list[SpecError]:
        """A trial field the spec sets (in `params`, a variant, or `space` without `when:`)
        where every trial it reaches holds a value of another field under which nothing reads
        it (`config.UNREAD`: `lr` beside an `lr_schedule`): it would do nothing, and a search
        over it would run one trial again and again. Not judged where that other field is
        sampled (each trial's own draw decides). `trials`: `labelled_trials()`."""
        errors = []
        for key, conditions in UNREAD.items():
            reached: list[tuple[str, list[tuple[str | None, Any]]]] = [
                (f"variants.{label}.{key}", [(v, t) for v, t in trials if v == label])
                for label, bundle in self.variants.items()
                if key in bundle
            ]
            if key in self.space and not self.space[key].when:
                reached.append((f"space.{key}", trials))
            elif key in self.params and key not in self.space:
                rest = [(v, t) for v, t in trials if v is None or key not in self.variants[v]]
                reached.append((f"params.{key}", rest))
            for at, mine in reached:
                unread = next(
                    (
                        u
                        for u in conditions
                        if u.by not in self.sampled_keys
                        and mine
                        and all(u.test(getattr(t, u.by)) for _, t in mine)
                    ),
                    None,
                )
                if unread is not None:  # the first condition that holds, said once
                    v, t = mine[0]
                    by = self._locate(unread.by, t.game, t.seed, {}, v)
                    if by == f"params.{unread.by}" and unread.by not in self.params:
                        by = f"the default {unread.by}"  # nothing the spec reads sets it
                    why = f"ignored: {by} {unread.state}; {unread.fix} to use {key}"
                    errors.append(self._error(at, why))
        return errors

    def _sampled_errors(self) -> list[SpecError]:
        """Each sampled parameter's candidates/bounds must make a valid trial on every game
        and in every variant (the rules of modes per game, of augmentations per algorithm),
        at the grid's first values."""
        if not self.sampled_keys:
            return []
        seed = self.seeds[0]
        grid0 = {k: self.space[k].values[0] for k in self.grid_keys}
        errors: list[SpecError] = []
        for game, variant in itertools.product(self.games, self.variant_labels):
            for key in self.sampled_keys:
                for value in self.space[key].candidates:
                    try:
                        self._trial(game, seed, {**grid0, key: value}, variant)
                    except SpecError as e:
                        errors += e.errors
        return errors
