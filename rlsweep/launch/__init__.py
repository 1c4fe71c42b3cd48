"""Where a sweep runs — never part of the spec (Hydra's Sweeper/Launcher split).

- local Ray or an existing cluster: `rlsweep.run.sweep.run_sweep(address=...)`;
- an autoscaled EC2 cluster: `ec2` writes a Ray cluster-launcher YAML (`ray up`) and prints
  the commands that start the sweep on its head (`ray exec --tmux`: `ray submit` runs Python
  scripts, not the `rlsweep` console script);
- SageMaker: `sagemaker` builds the training-job request, `sagemaker_entry` is the job's script
  that bootstraps one Ray cluster across the job's hosts and runs the sweep.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
"""An AWS region's name (us-east-1, ap-southeast-2, us-gov-west-1): what every launcher
checks a region against before AWS does."""


def field_default(cls: type, name: str) -> Any:
    """A launcher dataclass's default for field `name`, so that its CLI flags restate none."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
