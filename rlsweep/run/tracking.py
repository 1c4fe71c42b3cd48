"""Weights & Biases: one W&B run per trial (Tune's `WandbLoggerCallback`) plus one report run
holding the final table and the plots, all grouped under the sweep's name.

Offline unless the user has W&B credentials (mode "auto"): offline runs are plain files under
`<experiment>/wandb/` that `wandb sync` uploads later, so no network is ever needed. rlsweep
never handles an API key: wandb reads `WANDB_API_KEY` or `~/.netrc` itself, and nothing rlsweep
writes (configs, results, tags, reports) contains one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import netrc
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsweep._ray_compat import keyless_wandb_callback_class
from rlsweep.environ import set_env
from rlsweep.experiment.experiment_dir import git_commit
from rlsweep.spec.spec import SweepSpec
from rlsweep.storage import is_uri

WANDB_MODES = ("auto", "offline", "online", "disabled")
WANDB_HOST = "api.wandb.ai"
REPORT_JOB = "report"


@dataclass(frozen=True)
class WandbSettings:
    """Where and how trials are logged to W&B."""

    project: str = "rlsweep"
    """W&B project; the sweep name becomes the run group."""
    entity: str | None = None
    """W&B team or user (None: the account's default)."""
    mode: str = "auto"
    """auto (online with credentials, else offline) | offline | online | disabled."""
    dir: str | None = None
    """Parent of the `wandb/` run folders (default: the sweep's local results directory)."""

    def __post_init__(self) -> None:
        if self.mode not in WANDB_MODES:
            raise ValueError(f"wandb mode: got {self.mode!r}; allowed: {', '.join(WANDB_MODES)}")

    def to_dict(self) -> dict[str, Any]:
        """The settings as a run records them (`experiment_dir.record_run`): no credentials."""
        return dataclasses.asdict(self)

    def resolved_mode(self) -> str:
        if self.mode != "auto":
            return self.mode
        return "online" if has_credentials() else "offline"


def check_credentials(settings: WandbSettings | None) -> None:
    """Raise SpecError where `settings` ask for online logging with no credentials here: wandb
    would raise in the driver once Ray and the sweep had started, leaving a sweep dir behind."""
    from rlsweep.errors import SpecError

    if settings is not None and settings.mode == "online" and not has_credentials():
        raise SpecError(
            None,
            "",
            "--wandb online: no W&B credentials here (WANDB_API_KEY, or ~/.netrc's "
            f"{WANDB_HOST}); log in with `wandb login`, or use --wandb offline (files to sync "
            "later) or auto (online only with credentials)",
        )


def has_credentials() -> bool:
    """W&B credentials exist (checked, never read out): the env var or a netrc entry."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators(WANDB_HOST) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def tags(spec: SweepSpec) -> list[str]:
    """The spec's own tags plus what identifies the run: algorithm, search, games, commit."""
    algo = spec.base_params().get("algorithm", "ppo")
    derived = [f"algo:{algo}", f"search:{spec.search.algorithm}"]
    if spec.search.scheduler != "none":
        derived.append(f"scheduler:{spec.search.scheduler}")
    derived += [f"game:{g}" for g in spec.games]
    if commit := git_commit():
        derived.append(f"git:{commit}")
    # W&B caps a tag at 64 characters.
    return list(dict.fromkeys(t[:64] for t in [*spec.tags, *derived]))


def run_dir(settings: WandbSettings, experiment: str | Path) -> Path:
    """Parent of the `wandb/` folder: settings.dir, else the local experiment dir."""
    base = settings.dir or (experiment if not is_uri(str(experiment)) else "wandb-runs")
    path = Path(base).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def mode_env(mode: str) -> contextlib.AbstractContextManager[None]:
    """Set WANDB_MODE for the duration of a sweep: Ray's callback skips its API-key lookup only
    when the env says offline, and wandb in the logging actors reads it too."""
    return set_env({"WANDB_MODE": mode})


def callback(spec: SweepSpec, settings: WandbSettings, experiment: str | Path):
    """Tune's W&B logger: one run per trial, grouped by sweep, tagged, config = the trial's."""
    # Ray's callback, minus the API key it would put into its actors' logged runtime_env.
    return keyless_wandb_callback_class()(
        project=settings.project,
        group=spec.name,
        # Tune's bookkeeping keys; everything rlsweep reports is kept.
        excludes=["date", "hostname", "node_ip", "pid", "time_this_iter_s", "timestamp"],
        entity=settings.entity,
        mode=settings.resolved_mode(),
        dir=str(run_dir(settings, experiment)),
        tags=tags(spec),
        job_type="trial",
    )


def log_report(spec: SweepSpec, settings: WandbSettings, experiment: str | Path) -> str:
    """One more run in the sweep's group, logged when the sweep ends: its report
    (`rlsweep.results.report`, built into the W&B run dir), the per-trial scores as a `wandb.Table`
    and every report plot as an image. Returns the run's local directory."""
    from rlsweep.results.report import build_report

    report = build_report([experiment], out=run_dir(settings, experiment) / "report")
    with mode_env(settings.resolved_mode()):
        return _log_report_run(spec, settings, experiment, report.parent)


def _log_report_run(
    spec: SweepSpec, settings: WandbSettings, experiment: str | Path, out: Path
) -> str:
    import pandas as pd
    import wandb

    run = wandb.init(
        project=settings.project,
        entity=settings.entity,
        group=spec.name,
        job_type=REPORT_JOB,
        name=f"{spec.name}-report",
        mode=settings.resolved_mode(),
        dir=str(run_dir(settings, experiment)),
        tags=tags(spec),
        config={"spec": spec.to_dict()},
        reinit="create_new",
    )
    try:
        final = pd.read_csv(out / "final.csv")
        run.log(
            {
                "scores": wandb.Table(dataframe=final),
                **{f"plots/{p.stem}": wandb.Image(str(p)) for p in sorted(out.glob("*.png"))},
            }
        )
        run.summary["table_md"] = (out / "table.md").read_text()
        return str(Path(run.dir).parent)
    finally:
        run.finish()
        # finish() only tells wandb-core (a child process) that the run is over; the core
        # writes the run file as it closes the stream, after finish() has returned (a test
        # reading it at once found no run record). Teardown waits for that, but finishes every
        # run of the process: only when the caller has none open.
        if wandb.setup().most_recent_active_run is None:
            wandb.teardown()


def settings_from(
    value: bool | str | WandbSettings | dict[str, Any] | None,
) -> WandbSettings | None:
    """`run_sweep(wandb=...)`: None/False off; True defaults; a mode string; a mapping; settings."""
    if value is None or value is False:
        return None
    if value is True:
        return WandbSettings()
    if isinstance(value, str):
        return WandbSettings(mode=value)
    if isinstance(value, dict):
        return WandbSettings(**value)
    return value
