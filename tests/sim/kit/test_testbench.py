"""The plain-Verilog testbench backends (sim/kit/testbench.py, sim/kit/verilator.py): one mesh
bench run under Icarus and under Verilator must write the same log byte for byte, and both must
agree with the fabric model cycle for cycle."""

import random

import pytest

import sim.kit.testbench as testbench
from arch.ports import Port
from arch.router_map import ADDR_ERROR, ADDR_VC_BUSY
from hdl.config import Config
from models.fabric import xy_routes
from sim.benches.mesh import Scenario, Traffic, random_flows, random_timing, random_traffic
from sim.kit.testbench import (
    BULK_VECTORS,
    SIMULATORS,
    Testbench,
    available_simulators,
    default_simulator,
    harness_simulator,
)

CFG = Config(num_colors=4, vc_depth=4)     # the mesh4x4 of tests/hdl/test_mesh.py (one build)



def _scenario(stuck):
    """Random multi-color traffic with back-pressure in two phases (routes rewritten between),
    register reads, then (``stuck``) a phase that deadlocks, so the watchdog's dump runs too."""
    rng = random.Random(13)
    sc = Scenario("mesh4x4", CFG, 4, 4, 3000)
    for phase in range(2):
        flows, routes = random_flows(rng, 4, 4, CFG.num_colors, max_sources=6, max_dests=3)
        sc.set_routes(routes)
        scratch = Traffic(sc.ports, 0)
        sent = random_traffic(rng, sc.ports, flows, 0, 40, scratch, sid_base=phase * 64)
        sc.phase(sent)
        for r, q in ((0, 0), (3, 2)):
            sc.program.read(sc.ports.addr(r, q, ADDR_ERROR))
            sc.program.read(sc.ports.addr(r, q, ADDR_VC_BUSY + Port.E))
    random_timing(rng, sc.ports, sc.traffic, max_gap=0.5, max_stall=0.3)
    if not stuck:
        return sc
    src, dst = (2, 0, Port.RAMP), (2, 2, Port.RAMP)
    sc.set_routes(xy_routes(4, 4, CFG.num_colors, [(3, src, [dst])]))
    sc.traffic.accept[dst] = 0b0111
    sc.phase({src: [(i, 3, 0) for i in range(20)]}, stuck_ok=True)
    return sc


@pytest.mark.parametrize("stuck", [False, True])
def test_mesh_bench_logs_equal_under_icarus_and_verilator(tmp_path, stuck, icarus):
    """Without ``stuck`` both runs are also checked against the model (Scenario.run raises on
    any cycle difference); with it, the deadlock dump must name stuck channels."""
    logs = {}
    for sim in ("icarus", "verilator"):
        log = _scenario(stuck).run(tmp_path / sim, simulator=sim)
        assert log.simulator == sim
        assert len(log.reads) == 8 and sum(len(v) for v in log.delivered.values()) > 1000
        assert log.deadlocked == stuck
        if stuck:
            assert any("vc_busy" in line for line in log.dump), log.dump
        logs[sim] = (tmp_path / sim / "fabric.log").read_bytes()
    assert logs["icarus"] == logs["verilator"]


def test_simulator_choice():
    assert default_simulator() == available_simulators()[0]
    assert set(available_simulators()) <= set(SIMULATORS)
    with pytest.raises(ValueError, match="simulator must be one of"):
        Testbench([], "x", simulator="xcelium")


@pytest.mark.parametrize("installed", [True, False])
def test_harness_simulator(monkeypatch, installed):
    """Short harness runs take Icarus where installed; bulk runs (and every run without Icarus)
    Verilator; an explicit choice wins."""
    monkeypatch.setattr(testbench, "icarus_available", lambda: installed)
    assert harness_simulator() == ("icarus" if installed else "verilator")
    assert harness_simulator(vectors=BULK_VECTORS - 1) == ("icarus" if installed else "verilator")
    assert harness_simulator(vectors=BULK_VECTORS) == "verilator"
    assert harness_simulator("icarus", vectors=BULK_VECTORS) == "icarus"


_ACCUMULATOR_TB = """
module acc_tb;
  reg clk = 0; always #5 clk = ~clk;
  integer got, v, total = 0, cycle = 0;
  always @(posedge clk) begin
    cycle <= cycle + 1;
    got = $fscanf(32'h8000_0000, "%d", v);
    if (got != 1 || v < 0) $finish;
    else begin total = total + v; $display("noise"); $display("sum %0d %0d", total, cycle); $fflush; end
  end
endmodule
"""


@pytest.mark.parametrize("sim", SIMULATORS)
def test_session_keeps_state_between_requests(tmp_path, sim, request):
    """A testbench process answers command after command and keeps its state (a running sum and
    the cycle count) between them; the end line stops it."""
    if sim == "icarus":
        request.getfixturevalue("icarus")
    (tmp_path / "acc_tb.v").write_text(_ACCUMULATOR_TB)
    tb = Testbench([tmp_path / "acc_tb.v"], "acc_tb", simulator=sim)
    with tb.session(cwd=tmp_path) as s:
        answers = []
        for v in (3, 4, 10):
            s.send(f"{v}\n")
            answers.append(s.read_until("sum"))
        run = s.close("-1\n")
    assert answers == ["sum 3 0", "sum 7 1", "sum 17 2"]
    assert "noise" in run.stdout and run.cpu_seconds >= 0


def test_session_that_ends_early_names_it(tmp_path):
    (tmp_path / "acc_tb.v").write_text(_ACCUMULATOR_TB)
    tb = Testbench([tmp_path / "acc_tb.v"], "acc_tb", simulator=harness_simulator())
    with tb.session(cwd=tmp_path) as s:
        s.send("-1\n")
        with pytest.raises(RuntimeError, match="ended without a line starting with 'sum'"):
            s.read_until("sum")
