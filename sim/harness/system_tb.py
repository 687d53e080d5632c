"""Plain-Verilog testbench ``system_tb`` around the RTL-wafer system harness
(:class:`sim.harness.rtl_system.RtlSystemHarness`, Verilog module ``system_rtl``): one process runs
one phase from reset, under Verilator or Icarus (``sim.kit.testbench``), without cocotb.

Synchronous: everything happens in one ``always @(posedge clk)`` with non-blocking drives; the
harness's outputs are read at the edge (their values in the cycle that ends), never after a
delay. The phase runs with ``auto_go`` (the harness raises ``go`` in the first cycle ``cfg_done``
is high), so its cycle counts equal those of the cocotb bench.

Plusargs: ``+data=<dir>`` (files below), ``+cfg_count=`` ``+bcast_count<q>=`` ``+west_in_count=``
``+root_count<q>=`` ``+west_count=`` ``+east_count=`` ``+stall=`` (as the harness ports; ``q`` a
mesh column), ``+budget=`` (cycles after reset before the phase is given up: ``timeout 1`` in the
status).

Files in ``<dir>``: inputs ``cfg<i>.hex`` (wafer i's configuration player, ``cfg_count`` words),
``bcast<q>.hex`` (``bcast_count<q>`` tagged weight words of link q) and ``west_in<i>_<p>.hex``
(``west_in_count`` wavelets into row p of wafer i), read with ``$readmemh`` into the players'
memories after reset; outputs ``root<q>.hex``, ``west<i>_<p>.hex``, ``east<i>_<p>.hex`` (the first
``count`` words of each recorder's memory, ``$writememh``, only when the count is non-zero) and
``status.txt``: one line ``cfg_cycles run_cycles bcast_first bcast_last fault error overflow
timeout cycles`` (decimal; ``cycles``: clock cycles the process simulated).
"""

__all__ = ["system_tb_text", "TB_TOP", "STATUS_FIELDS"]

TB_TOP = "system_tb"
STATUS_FIELDS = ("cfg_cycles", "run_cycles", "bcast_first", "bcast_last", "fault", "error",
                 "overflow", "timeout", "cycles")
RESET_CYCLES = 2


def system_tb_text(dut, systems, rows, cols):
    """Verilog of module ``system_tb`` driving harness module ``dut`` with ``systems`` wafers of
    ``rows x cols`` tiles (one west and one east recorder per row, a weight player and a root
    recorder per column)."""
    recs = [(side, i, p) for i in range(systems) for p in range(rows) for side in ("west", "east")]
    links = [(port, q, f"{port}{q}") for port in ("bcast_count", "root_count") for q in range(cols)]
    L = [
        "`timescale 1ns/1ps",
        "module system_tb;",
        "  reg clk = 0; reg rst = 1; reg start = 0; reg go = 0;",
        "  reg [31:0] cfg_count = 0, west_in_count = 0, west_count = 0, east_count = 0;",
        "  reg [31:0] " + ", ".join(f"{reg} = 0" for _, _, reg in links) + ";",
        "  reg [31:0] budget = 0; reg [7:0] stall = 0;",
        "  wire cfg_done, done, overflow, error, fault;",
        "  wire [31:0] cfg_cycles, run_cycles, bcast_first, bcast_last;",
        "  reg [8*1024-1:0] dir, fname;",
        "  integer f, state = 0, cycle = 0, timeout = 0;",
        "  always #5 clk = ~clk;",
        f"  {dut} dut (.clk(clk), .rst(rst), .start(start), .go(go), .auto_go(1'b1),",
        "    .cfg_count(cfg_count), .west_in_count(west_in_count),",
        "    " + " ".join(f".{port}__{q}({reg})," for port, q, reg in links),
        "    .west_count(west_count), .east_count(east_count), .stall(stall),",
        "    .cfg_done(cfg_done), .done(done), .overflow(overflow), .error(error), .fault(fault),",
        "    .cfg_cycles(cfg_cycles), .run_cycles(run_cycles), .bcast_first(bcast_first),",
        "    .bcast_last(bcast_last));",
        "  initial begin",
        "    if (!$value$plusargs(\"data=%s\", dir)) dir = \".\";",
    ]
    for name in ("cfg_count", "west_in_count", "west_count", "east_count", "budget", "stall",
                 *(reg for _, _, reg in links)):
        L.append(f"    if (!$value$plusargs(\"{name}=%d\", {name})) {name} = 0;")
    L += [
        "  end",
        "  task stop; begin",
    ]
    for q in range(cols):
        L += [f"    if (root_count{q} != 0) begin",
              f"      $sformat(fname, \"%0s/root{q}.hex\", dir);",
              f"      $writememh(fname, dut.root_rec{q}.mem, 0, root_count{q} - 1); end"]
    for side, i, p in recs:
        count = f"{side}_count"
        L += [f"    if ({count} != 0) begin",
              f"      $sformat(fname, \"%0s/{side}{i}_{p}.hex\", dir);",
              f"      $writememh(fname, dut.{side}_rec{i}_{p}.mem, 0, {count} - 1); end"]
    L += [
        "    $sformat(fname, \"%0s/status.txt\", dir); f = $fopen(fname, \"w\");",
        "    $fwrite(f, \"%0d %0d %0d %0d %0d %0d %0d %0d %0d\\n\", cfg_cycles, run_cycles, bcast_first,",
        "            bcast_last, fault, error, overflow, timeout, cycle);",
        "    $fclose(f);",
        "    $finish;",
        "  end endtask",
        "  always @(posedge clk) begin",
        "    cycle <= cycle + 1;",
        "    case (state)",
        f"      0: if (cycle == {RESET_CYCLES - 1}) begin",
        "        rst <= 0; state <= 1;",
    ]
    for q in range(cols):
        L += [f"        if (bcast_count{q} != 0) begin",
              f"          $sformat(fname, \"%0s/bcast{q}.hex\", dir);",
              f"          $readmemh(fname, dut.bcast_player{q}.mem, 0, bcast_count{q} - 1); end"]
    for i in range(systems):
        L += [f"        $sformat(fname, \"%0s/cfg{i}.hex\", dir);",
              f"        if (cfg_count != 0) $readmemh(fname, dut.cfg_player{i}.mem, 0, cfg_count - 1);"]
        for p in range(rows):
            L += [f"        $sformat(fname, \"%0s/west_in{i}_{p}.hex\", dir);",
                  f"        if (west_in_count != 0) $readmemh(fname, dut.west_player{i}_{p}.mem, 0, "
                  f"west_in_count - 1);"]
    L += [
        "      end",
        "      1: begin start <= 1; state <= 2; end",
        "      2: begin start <= 0; state <= 3; end",
        "      3: if (done && !start) stop;",
        "    endcase",
        "    if (state != 0 && cycle >= budget) begin timeout = 1; stop; end",
        "  end",
        "endmodule",
    ]
    return "\n".join(L) + "\n"
