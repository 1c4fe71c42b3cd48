"""The environments: Procgen's games over envpool (`procgen`: the game tables), the vector env
a trial samples from (`vector_env`), and the Qt runtime Procgen renders with (`qt`).

`rlsweep.envs` was a module before the layers became folders: its names still import from here
(`rlsweep._moved`), loaded only when asked for.
"""

from rlsweep import _moved

__getattr__ = _moved.forward(__name__, ("procgen", "qt", "vector_env"))
