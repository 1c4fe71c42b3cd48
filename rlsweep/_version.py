"""rlsweep's version, in a module of its own: the package exports it, and the modules below
the package's top (what a sweep records: `experiment_dir.record_run`) read it from here."""

__version__ = "0.1.0"
