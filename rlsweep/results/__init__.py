"""Results: experiment dirs -> tidy frames (`results`), statistics (pure functions over
arrays), tables, plots (the only matplotlib user), the report, importance and ablation
tables. Torch-free and Ray-free.

`rlsweep.results` was a module before the layers became folders: its names still import from here
(`rlsweep._moved`), loaded only when asked for.
"""

from rlsweep import _moved

__getattr__ = _moved.forward(
    __name__, ("results", "stats", "tables", "plots", "report", "importance", "ablate")
)
