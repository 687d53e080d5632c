"""Structural rules for real hardware (docs/synthesis.md), checked on the netlist yosys builds
from the generated Verilog at the ``tiny`` preset (``read_verilog; proc; opt; memory -nomap``):

* every memory has at most one read port and one write port, so a block RAM (or an SRAM macro)
  can hold it;
* no variable multiplier (both operands non-constant) outside the bf16 multiplier core
  (``hdl/fp/bf16_mul.py``, the FMAC lanes' and the vector unit's; recognised by the name of its
  product net): address generation and range checks use running addresses and additions.

Needs Debian's yosys on PATH (``make test`` installs it as root, like Icarus Verilog).
"""

import json
import shutil
import subprocess

import pytest

from hdl.config import preset
from hdl.tops import build_top
from hdl.verilog import verilog_text

YOSYS = shutil.which("yosys")


@pytest.fixture(autouse=True)
def _yosys():
    assert YOSYS, "yosys not found: make test installs it (Debian package yosys)"

# The net the bf16 multiplier core (hdl/fp/bf16_mul.py) names its significand product: the one
# place a variable multiplier belongs (the generated Verilog carries no Python source locations).
MUL_CORE = "bf16_significand_product"


def netlist(top, tmp_path):
    """The yosys JSON netlist of ``top`` (tiny preset) after ``proc; opt; memory -nomap``,
    hierarchy kept."""
    src = tmp_path / f"{top}.v"
    src.write_text(verilog_text(build_top(top, preset("tiny")), top))
    out = tmp_path / f"{top}.json"
    subprocess.run([YOSYS, "-q", "-p", f"read_verilog -sv {src}; hierarchy -top {top}; proc; opt; "
                    f"memory -nomap; write_json {out}"], check=True, timeout=600)
    return json.loads(out.read_text())


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
    subprocess.run([YOSYS, "-q", "-p", f"read_verilog {src}; proc; opt; memory -nomap; write_json {out}"],
                   check=True, timeout=120)
    found = violations(json.loads(out.read_text()))
    assert any("2 read and 1 write ports" in f for f in found), found
    assert any("variable multiplier 4 x 4" in f for f in found), found
