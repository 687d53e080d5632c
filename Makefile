# weightstream: every target bootstraps what it needs (.venv from pyproject.toml, Icarus Verilog).
#   make sim       the main job: the richest system simulation (ARGS="..." passes options)
#   make test      the whole regression, in parallel (pytest-xdist)
#   make verilog   Verilog for every top into build/verilog/ (SWARMX_LEAVES=16, PRESET=..., SET="k=v ...")
#   make lint      verilator --lint-only over build/verilog/*.v
#   make bench     benchmarks: tables printed, JSON in build/bench/
#   make clean     remove build outputs (keeps .venv)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

PRESET ?= default
SET ?=
CONFIG_SETS := $(foreach kv,$(SET),--set $(kv)) \
	$(if $(SWARMX_LEAVES),--set swarmx_leaves=$(SWARMX_LEAVES)) \
	$(if $(NUM_COLORS),--set num_colors=$(NUM_COLORS)) \
	$(if $(MESH_ROWS),--set mesh_rows=$(MESH_ROWS)) \
	$(if $(MESH_COLS),--set mesh_cols=$(MESH_COLS)) \
	$(if $(LANES),--set lanes=$(LANES))
PYTEST_ARGS ?=
ARGS ?=

.PHONY: sim test verilog lint bench clean venv iverilog

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { echo "error: '$(PYTHON) -m venv' failed: install Python 3.11+ with venv (Debian: python3-venv)"; exit 1; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@touch $@

venv: $(STAMP)

iverilog:
	@command -v iverilog >/dev/null && command -v vvp >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Icarus Verilog (Debian package iverilog)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog >/dev/null; \
	  else \
	    echo "error: Icarus Verilog not found: install it (Debian/Ubuntu: sudo apt-get install iverilog; version 11+)"; exit 1; \
	  fi; }

sim: $(STAMP) iverilog
	$(PY) -m sim.system $(ARGS)

test: $(STAMP) iverilog
	$(PY) -m pytest -n auto $(PYTEST_ARGS)

verilog: $(STAMP)
	$(PY) -m hdl.generate --preset $(PRESET) $(CONFIG_SETS)

lint: verilog
	@command -v verilator >/dev/null || { echo "error: verilator not found (Debian: apt-get install verilator)"; exit 1; }
	@for f in build/verilog/*.v; do \
	  verilator --lint-only -Wall hdl/lint.vlt $$f --top-module $$(basename $$f .v) || exit 1; \
	done; echo "lint clean: $$(ls build/verilog/*.v | wc -l) file(s)"

bench: $(STAMP) iverilog
	$(PY) -m bench $(ARGS)

clean:
	rm -rf build .pytest_cache .hypothesis
	find . -name __pycache__ -not -path "./$(VENV)/*" -prune -exec rm -rf {} +
