"""Cached Verilator builds (sim/kit/verilator.py) on a small synchronous testbench."""

import subprocess

import pytest

from sim.kit.toolchain import hier_vlt
from sim.kit.verilator import OPT_ENV, build_binary

COUNTER_TB = """`timescale 1ns/1ps
module counter_tb;
  reg clk = 0; reg [7:0] n = 0; reg [7:0] mem [0:3]; integer limit;
  always #5 clk = ~clk;
  initial if (!$value$plusargs("limit=%d", limit)) limit = 3;
  always @(posedge clk) begin
    n <= n + 1;
    if (n < 4) mem[n] <= n * 3;
    if (n == limit) begin $display("count %0d", n); $writememh("mem.hex", mem, 0, 3); $finish; end
  end
endmodule
"""


def test_build_is_cached_and_runs(tmp_path):
    src = tmp_path / "counter_tb.v"
    src.write_text(COUNTER_TB)
    binary = build_binary([src], "counter_tb", build_root=tmp_path / "build")
    stamp = binary.stat().st_mtime_ns
    assert build_binary([src], "counter_tb", build_root=tmp_path / "build") == binary
    assert binary.stat().st_mtime_ns == stamp            # not rebuilt
    assert not (binary.parent / "obj_dir").exists()      # objects removed, binary kept
    out = subprocess.run([str(binary), "+limit=5"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "count 5" in out.stdout
    words = [int(t, 16) for t in (tmp_path / "mem.hex").read_text().split() if not t.startswith(("/", "@"))]
    assert words == [0, 3, 6, 9]
    src.write_text(COUNTER_TB.replace("n * 3", "n * 5"))  # another text: another build
    assert build_binary([src], "counter_tb", build_root=tmp_path / "build") != binary


def test_optimisation_level_is_part_of_the_key(tmp_path, monkeypatch):
    src = tmp_path / "counter_tb.v"
    src.write_text(COUNTER_TB)
    monkeypatch.setenv(OPT_ENV, "-O0")
    at_o0 = build_binary([src], "counter_tb", build_root=tmp_path / "build")
    compiles = [line for line in (at_o0.parent / "build.log").read_text().splitlines() if " -c " in line]
    assert compiles and all(" -O0 " in line and " -Os " not in line for line in compiles)
    monkeypatch.setenv(OPT_ENV, "-O1")
    assert build_binary([src], "counter_tb", build_root=tmp_path / "build") != at_o0
    monkeypatch.setenv(OPT_ENV, "-O3")
    with pytest.raises(ValueError, match="WS_VERILATOR_OPT must be one of -O0, -O1, -O2, -Os"):
        build_binary([src], "counter_tb", build_root=tmp_path / "build")


def test_threads_are_part_of_the_key(tmp_path):
    """A model of two threads is its own build (``--threads 2`` verilated); the same counts."""
    src = tmp_path / "counter_tb.v"
    src.write_text(COUNTER_TB)
    one = build_binary([src], "counter_tb", build_root=tmp_path / "build")
    two = build_binary([src], "counter_tb", threads=2, build_root=tmp_path / "build")
    assert two != one and "--threads 2" in (two.parent / "build.log").read_text()
    runs = [subprocess.run([str(b)], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
            for b in (one, two)]
    assert "on 2 threads" in runs[1] and "on 2 threads" not in runs[0]     # Verilator's own report
    assert [r.splitlines()[0] for r in runs] == ["count 3", "count 3"]
    with pytest.raises(ValueError, match="threads must be an int >= 1"):
        build_binary([src], "counter_tb", threads=0, build_root=tmp_path / "build")


def test_failed_build_names_its_log(tmp_path):
    src = tmp_path / "bad_tb.v"
    src.write_text("module bad_tb; initial begin $finish end endmodule\n")
    with pytest.raises(RuntimeError, match="build.log"):
        build_binary([src], "bad_tb", build_root=tmp_path / "build")
    assert not list((tmp_path / "build").glob("bad_tb-*/Vbad_tb"))


HIER_TB = """`timescale 1ns/1ps
module pe_core(input clk, input [7:0] a, output reg [7:0] y);
  always @(posedge clk) y <= a + 8'd7;
endmodule
module hier_tb;
  reg clk = 0; reg [7:0] n = 0; wire [7:0] y;
  pe_core core(.clk(clk), .a(n), .y(y));
  always #5 clk = ~clk;
  always @(posedge clk) begin
    n <= n + 1;
    if (n == 4) begin $display("y %0d", y); $finish; end
  end
endmodule
"""


def test_pe_core_is_built_as_a_hierarchical_block(tmp_path):
    """A module of HIER_BLOCKS in the design is its own Verilator library; the top never is."""
    src = tmp_path / "hier_tb.v"
    src.write_text(HIER_TB)
    binary = build_binary([src], "hier_tb", build_root=tmp_path / "build")
    assert (binary.parent / "hier.vlt").read_text().splitlines()[1:] == ['hier_block -module "pe_core"']
    log = (binary.parent / "build.log").read_text()
    assert "--hierarchical" in log.splitlines()[0]
    # Verilated once (with --build, Verilator's parallel make ran the block's rule once per target).
    assert log.count("Vpe_core__hierMkArgs.f\n") == 1
    out = subprocess.run([str(binary)], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "y 10" in out.stdout          # n = 4 at the display: y = a + 7 of the cycle before
    assert hier_vlt([HIER_TB], exclude={"pe_core"}) is None
    assert hier_vlt([COUNTER_TB]) is None
