"""The PBT scheduler a PBT sweep runs: Tune's PopulationBasedTraining, whose members keep their
own game and seed when they exploit another (`rlsweep._ray_compat.PopulationHooks`)."""

from typing import Any

from ray.tune.schedulers import PopulationBasedTraining

from rlsweep._ray_compat import PopulationHooks


class MemberPBT(PopulationHooks, PopulationBasedTraining):
    """PopulationBasedTraining whose exploit keeps the member's `member_keys`."""

    def __init__(self, *, member_keys: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._member_keys = member_keys
