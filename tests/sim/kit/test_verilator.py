"""Cached Verilator builds (sim/kit/verilator.py) on a small synchronous testbench."""

import subprocess

import pytest

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


def test_failed_build_names_its_log(tmp_path):
    src = tmp_path / "bad_tb.v"
    src.write_text("module bad_tb; initial begin $finish end endmodule\n")
    with pytest.raises(RuntimeError, match="build.log"):
        build_binary([src], "bad_tb", build_root=tmp_path / "build")
    assert not list((tmp_path / "build").glob("bad_tb-*/Vbad_tb"))
