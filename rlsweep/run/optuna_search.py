"""The Optuna searcher an Optuna sweep runs: Tune's OptunaSearch, whose saved state holds no
storage of its study (`rlsweep._ray_compat.OptunaSearchHooks`), so that a copied or moved
experiment dir resumes with the study in it. Its own module: importing it imports Optuna."""

from ray.tune.search.optuna import OptunaSearch

from rlsweep._ray_compat import OptunaSearchHooks


class RelocatableOptunaSearch(OptunaSearchHooks, OptunaSearch):
    """OptunaSearch, restored at the study of the storage it was built with."""
