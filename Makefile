# Everything a fresh clone needs: `make demo` and `make test` create .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
# Installed first and pinned, so that resolving `torch>=2.4,<3` never pulls the CUDA wheels.
# The pin is written once, in rlsweep/torch-pin.txt (also what cluster nodes install:
# rlsweep.launch.ec2.DEFAULT_TORCH).
TORCH  ?= $(file < rlsweep/torch-pin.txt)
STAMP  := $(VENV)/.installed

.PHONY: install test test-fast demo bench bench-plan bench-gpu gpu-check study-sitting syslibs wheelhouse lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=10 -n 2 --dist loadscope --no-loadscope-reorder

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not rllib and not slow"

demo: $(STAMP)
	$(BIN)/rlsweep run search_spaces/demo.yaml --overwrite  # the demo reruns from scratch
	$(BIN)/rlsweep report results/demo

# benchmarks/throughput.py: an rlsweep trial vs an independent plain PPO loop, ROUNDS pairs
# (default 4) of ITERATIONS timed iterations (default 3), the ratio with its 95% interval;
# SIDE_BY_SIDE=1 runs each pair at once, one core each.
bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py $(if $(ROUNDS),--rounds $(ROUNDS)) \
		$(if $(ITERATIONS),--iterations $(ITERATIONS)) $(if $(SIDE_BY_SIDE),--side-by-side)

# benchmarks/plan_costs.py: what `rlsweep plan` counts each part of a sweep at (Ray's start, a
# trial's start, training, evaluating), measured in a real sweep here (~5 min; QUICK=1: a smoke
# run). `rlsweep plan` reads results/benchmarks/plan_costs.json from the directory it runs in.
bench-plan: $(STAMP)
	$(BIN)/python benchmarks/plan_costs.py $(if $(QUICK),--quick)

# benchmarks/gpu.py: model bound, plain PPO loop, one trial, K packed trials (a GPU machine;
# QUICK=1 runs its tiny CPU path). Results under $$OUT if set, else results/benchmarks/.
bench-gpu: $(STAMP)
	$(BIN)/python benchmarks/gpu.py $(if $(QUICK),--quick)

# A bare GPU node, in one command (benchmarks/gpu_check.py): install $(WHEELHOUSE) with the
# node's Python (GPU_PYTHON, whose torch it keeps; NO_INSTALL=1: use GPU_PYTHON's environment
# as it is), unpack the .debs in syslibs/ of the system libraries that do not load, then
# `rlsweep doctor --gpu` and benchmarks/gpu.py (QUICK=1: the CPU path, gpu.py --quick;
# GPU_ARGS: more gpu.py arguments). Logs and JSON under $$OUT if set, else results/benchmarks/.
GPU_PYTHON ?= python3
gpu-check:
	$(GPU_PYTHON) benchmarks/gpu_check.py run --wheelhouse $(WHEELHOUSE) $(if $(NO_INSTALL),--no-install) \
		$(if $(QUICK),--quick) -- $(GPU_ARGS)

# One sitting of a study on a GPU node held for minutes (benchmarks/study_sitting.py): install
# $(WHEELHOUSE), take up the experiment dir from the parts in CARRIED (the last sitting's
# $$OUT/carry), run it on (`rlsweep ablate STUDY ABLATE_ARGS`, then `resume`) under a time limit
# that ends inside MINUTES, report it and pack it into $$OUT/carry for the next sitting.
# NO_INSTALL=1 SMOKE=1: the study's smoke on this Python's environment (a CPU rehearsal).
STUDY   ?= pooling-bigfish
MINUTES ?= 9.5
CARRIED ?= carried
study-sitting:
	$(GPU_PYTHON) benchmarks/study_sitting.py $(STUDY) --minutes $(MINUTES) --carried $(CARRIED) \
		--wheelhouse $(WHEELHOUSE) $(if $(NO_INSTALL),--no-install) $(if $(SMOKE),--smoke) \
		-- $(ABLATE_ARGS)

# The .debs of the system libraries Procgen's Qt runtime needs (rlsweep.envs.qt.SYSTEM_LIBRARIES),
# from this machine's apt, into syslibs/: carry it beside the wheelhouse to a node without an index.
syslibs:
	$(PYTHON) benchmarks/gpu_check.py fetch-syslibs --dest syslibs

# An offline install for a node without a package index (rlsweep/node/wheelhouse.py): wheels for
# Python $(PY) on $(PLATFORM), less the projects in EXCLUDE (and those in HAVE, the node's
# `pip freeze`), with the projects in THIN shipped as thinned wheels (default: all of
# rlsweep.node.wheelhouse.THIN: envpool cut to Procgen, its assets and Qt's runtime to what
# Procgen reads, Ray without its Java jar; THIN=none ships them whole), pinned by CONSTRAINTS
# (e.g. `.venv/bin/pip freeze --exclude-editable > pins.txt`), in one tar.xz (XZ_PRESET, by
# default the module's 9: minutes; 0: 14x as fast, 1.6x the size) cut into parts of at most
# PART_MB MiB (by default the module's 54: a GPU sitting's call carries 64 MiB, the checkout with
# it) with a sha256 manifest, under $(WHEELHOUSE)/.
# On the node: python3 wheelhouse.py install $(WHEELHOUSE)
PY       ?= 3.12
PLATFORM ?= manylinux_2_28_x86_64
PART_MB  ?=
EXCLUDE  ?= torch
HAVE     ?=
THIN     ?=
XZ_PRESET ?=
CONSTRAINTS ?=
WHEELHOUSE ?= wheelhouse
wheelhouse: $(STAMP)
	$(BIN)/python -m rlsweep.node.wheelhouse build --python $(PY) --platform $(PLATFORM) \
		$(if $(PART_MB),--part-mb $(PART_MB)) $(if $(XZ_PRESET),--xz-preset $(XZ_PRESET)) \
		--exclude $(EXCLUDE) $(if $(HAVE),--have $(HAVE)) \
		$(if $(THIN),--thin $(filter-out none,$(THIN))) \
		$(if $(CONSTRAINTS),--constraints $(CONSTRAINTS)) --out $(WHEELHOUSE)

# ruff, then the layers' import contracts (pyproject.toml's [tool.importlinter]).
lint: $(STAMP)
	$(BIN)/ruff check rlsweep tests benchmarks
	$(BIN)/ruff format --check rlsweep tests benchmarks
	$(BIN)/lint-imports --no-logo

clean:
	rm -rf $(VENV) .pytest_cache .import_linter_cache
