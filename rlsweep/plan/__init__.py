"""What a sweep costs and where it fits: the trial list as planned, the cost model and its
price table, placement (CPUs, GPUs, packing), the layout of trials on a machine. Torch-free
and Ray-free.

`rlsweep.plan` was a module before the layers became folders: its names still import from here
(`rlsweep._moved`), loaded only when asked for.
"""

from rlsweep import _moved

__getattr__ = _moved.forward(__name__, ("plan", "placement", "cost", "layout"))
