"""Plain-Verilog testbench ``system_tb`` around the RTL-wafer system harness
(:class:`sim.harness.rtl_system.RtlSystemHarness`, Verilog module ``system_rtl``): one process runs
a whole training run, phase after phase, under Verilator or Icarus (``sim.kit.testbench``),
without cocotb. The wafers are reset once; their state (routes, descriptors, SRAM) carries from one
phase to the next, as in the cocotb bench.

Synchronous: everything happens in one ``always @(posedge clk)`` with non-blocking drives; the
harness's outputs are read at the edge (their values in the cycle that ends), never after a
delay. A phase runs with ``auto_go`` (the harness raises ``go`` in the first cycle ``cfg_done``
is high), so its cycle counts equal those of the cocotb bench.

Plusarg: ``+data=<dir>`` (the files below). Commands, one line each on standard input, read after
reset and after every phase (the simulation waits for the line):
``1 cfg_count go_count west_in_count west_count east_count stall budget bcast_count<q>... root_count<q>...``
(decimal; ``q`` a mesh column; the counts as the harness ports; ``budget``: cycles after the
command before the phase is given up) runs a phase; ``0`` (or the end of the input) ends the run.

Files in ``<dir>``, read when a phase's command arrives: ``cfg<i>.hex`` (wafer i's configuration
player, ``cfg_count`` words), ``bcast<q>.hex`` (``bcast_count<q>`` tagged weight words of link q)
and ``west_in<i>_<p>.hex`` (``west_in_count`` wavelets into row p of wafer i), ``$readmemh`` into
the players' memories; written when it ends: ``root<q>.hex``, ``west<i>_<p>.hex``,
``east<i>_<p>.hex`` (the first ``count`` words of each recorder's memory, ``$writememh``, only
when the count is non-zero). Then one line on standard output: ``status`` and
``cfg_cycles run_cycles bcast_first bcast_last fault error overflow timeout cycles`` (decimal;
``cycles``: clock cycles simulated since the command). After a timeout the process ends.
"""

__all__ = ["system_tb_text", "phase_command", "TB_TOP", "STATUS_FIELDS", "STATUS_PREFIX", "END_COMMAND"]

TB_TOP = "system_tb"
STATUS_PREFIX = "status"
STATUS_FIELDS = ("cfg_cycles", "run_cycles", "bcast_first", "bcast_last", "fault", "error",
                 "overflow", "timeout", "cycles")
END_COMMAND = "0\n"
RESET_CYCLES = 2
_STDIN = "32'h8000_0000"
_COUNTS = ("cfg_count", "go_count", "west_in_count", "west_count", "east_count", "stall", "budget")


def phase_command(*, cfg_count, go_count, west_in_count, west_count, east_count, stall, budget, bcast_counts,
                  root_counts):
    """The command line of one phase (``bcast_counts`` / ``root_counts``: one per mesh column)."""
    values = [cfg_count, go_count, west_in_count, west_count, east_count, stall, budget, *bcast_counts, *root_counts]
    if any(int(v) < 0 for v in values):
        raise ValueError(f"phase command with a negative count: {values}")
    return "1 " + " ".join(str(int(v)) for v in values) + "\n"


def system_tb_text(dut, systems, rows, cols):
    """Verilog of module ``system_tb`` driving harness module ``dut`` with ``systems`` wafers of
    ``rows x cols`` tiles (one west and one east recorder per row, a weight player and a root
    recorder per column)."""
    recs = [(side, i, p) for i in range(systems) for p in range(rows) for side in ("west", "east")]
    links = [(port, q, f"{port}{q}") for port in ("bcast_count", "root_count") for q in range(cols)]
    regs = [*_COUNTS, *(reg for _, _, reg in links)]
    L = [
        "`timescale 1ns/1ps",
        "module system_tb;",
        "  reg clk = 0; reg rst = 1; reg start = 0; reg go = 0;",
        "  reg [31:0] cfg_count = 0, go_count = 0, west_in_count = 0, west_count = 0, east_count = 0;",
        "  reg [31:0] " + ", ".join(f"{reg} = 0" for _, _, reg in links) + ";",
        "  reg [7:0] stall = 0;",
        "  wire cfg_done, done, overflow, error, fault;",
        "  wire [31:0] cfg_cycles, run_cycles, bcast_first, bcast_last;",
        "  reg [8*1024-1:0] dir, fname;",
        "  integer op, got, state = 0, cycle = 0, since = 0, timeout = 0;",
        "  integer " + ", ".join(f"c_{reg}" for reg in regs) + ";",
        "  always #5 clk = ~clk;",
        f"  {dut} dut (.clk(clk), .rst(rst), .start(start), .go(go), .auto_go(1'b1),",
        "    .cfg_count(cfg_count), .go_count(go_count), .west_in_count(west_in_count),",
        "    " + " ".join(f".{port}__{q}({reg})," for port, q, reg in links),
        "    .west_count(west_count), .east_count(east_count), .stall(stall),",
        "    .cfg_done(cfg_done), .done(done), .overflow(overflow), .error(error), .fault(fault),",
        "    .cfg_cycles(cfg_cycles), .run_cycles(run_cycles), .bcast_first(bcast_first),",
        "    .bcast_last(bcast_last));",
        "  initial if (!$value$plusargs(\"data=%s\", dir)) dir = \".\";",
        "  task load; begin",
    ]
    for q in range(cols):
        L += [f"    if (c_bcast_count{q} != 0) begin",
              f"      $sformat(fname, \"%0s/bcast{q}.hex\", dir);",
              f"      $readmemh(fname, dut.bcast_player{q}.mem, 0, c_bcast_count{q} - 1); end"]
    for i in range(systems):
        L += ["    if (c_cfg_count != 0) begin",
              f"      $sformat(fname, \"%0s/cfg{i}.hex\", dir);",
              f"      $readmemh(fname, dut.cfg_player{i}.mem, 0, c_cfg_count - 1); end"]
        for p in range(rows):
            L += ["    if (c_west_in_count != 0) begin",
                  f"      $sformat(fname, \"%0s/west_in{i}_{p}.hex\", dir);",
                  f"      $readmemh(fname, dut.west_player{i}_{p}.mem, 0, c_west_in_count - 1); end"]
    L += ["  end endtask", "  task report; begin"]
    for q in range(cols):
        L += [f"    if (root_count{q} != 0) begin",
              f"      $sformat(fname, \"%0s/root{q}.hex\", dir);",
              f"      $writememh(fname, dut.root_rec{q}.mem, 0, root_count{q} - 1); end"]
    for side, i, p in recs:
        count = f"{side}_count"
        L += [f"    if ({count} != 0) begin",
              f"      $sformat(fname, \"%0s/{side}{i}_{p}.hex\", dir);",
              f"      $writememh(fname, dut.{side}_rec{i}_{p}.mem, 0, {count} - 1); end"]
    fmt = " ".join(["%0d"] * len(STATUS_FIELDS))
    L += [
        f"    $display(\"{STATUS_PREFIX} {fmt}\", cfg_cycles, run_cycles, bcast_first, bcast_last,",
        "             fault, error, overflow, timeout, since);",
        "    $fflush;",
        "  end endtask",
        "  always @(posedge clk) begin",
        "    cycle <= cycle + 1;",
        "    since <= since + 1;",
        "    case (state)",
        f"      0: if (cycle == {RESET_CYCLES - 1}) begin rst <= 0; state <= 1; end",
        "      1: begin",
        "        op = 0;",
        f"        got = $fscanf({_STDIN}, \"%d\", op);",
        "        if (got != 1 || op != 1) $finish;",
        "        else begin",
        f"          got = $fscanf({_STDIN}, \"{' '.join(['%d'] * len(regs))}\", "
        + ", ".join(f"c_{reg}" for reg in regs) + ");",
        f"          if (got != {len(regs)}) begin $display(\"system_tb: malformed phase command\"); "
        "$finish; end",
        "          else begin",
        "            load;",
    ]
    L += [f"            {reg} <= c_{reg};" for reg in regs if reg != "budget"]
    L += [
        "            since <= 0; start <= 1; state <= 2;",
        "          end",
        "        end",
        "      end",
        "      2: begin start <= 0; state <= 3; end",
        "      3: if (done && !start) begin report; state <= 1; end",
        "    endcase",
        "    if (state >= 2 && since >= c_budget) begin timeout = 1; report; $finish; end",
        "  end",
        "endmodule",
    ]
    return "\n".join(L) + "\n"
