"""Running a sweep: `run_sweep()` and resume (`sweep`), the Ray session, the Tune bridge (the
only code that turns a spec into Tune objects), whether the trials fit where it runs
(`fits`), the checks before Ray starts (`preflight`), the live progress view, tracking.
"""
