# Everything a fresh clone needs: `make demo` and `make test` create .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
# Installed first and pinned, so that resolving `torch>=2.4,<3` never pulls the CUDA wheels.
TORCH  ?= torch==2.13.0
STAMP  := $(VENV)/.installed

.PHONY: install test test-fast demo bench lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not rllib"

demo: $(STAMP)
	$(BIN)/rlsweep run search_spaces/demo.yaml
	$(BIN)/rlsweep report results/demo

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py

lint: $(STAMP)
	$(BIN)/ruff check rlsweep tests benchmarks
	$(BIN)/ruff format --check rlsweep tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
