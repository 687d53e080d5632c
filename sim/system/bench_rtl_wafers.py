"""System co-simulation with RTL wafers under cocotb (``make sim ARGS="--sim cocotb"``; Verilator):
one simulation for the whole run, Python setting the harness's ports at phase boundaries and
reading and writing the players' and recorders' memories through VPI. Top:
:class:`sim.harness.rtl_system.RtlSystemHarness`; the training loop and its checks:
:func:`sim.system.rtl_training.training` (docs/system_simulation.md). The default path runs the
same loop with one plain-Verilog testbench process per phase instead (``sim/system/rtl_host.py``).

Parameters: :class:`sim.system.config.SystemRunConfig` (``wafer = "rtl"``). Writes
``results.json`` and ``weights.safetensors`` into ``out_dir``.
"""

import json
import time
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout

from sim.harness.rtl_system import cfg_word
from sim.kit import params
from sim.kit.clocking import reset
from sim.kit.player_memory import load_words, read_words
from sim.system.config import DATA_FILE, SystemRunConfig
from sim.system.rtl import rtl_config
from sim.system.rtl_phases import PhaseResult
from sim.system.rtl_training import simulator_speed, training


async def _pulse(dut, name):
    getattr(dut, name).value = 1
    await RisingEdge(dut.clk)
    getattr(dut, name).value = 0
    await RisingEdge(dut.clk)


async def _wait(dut, cfg, name, cycles, what):
    if int(getattr(dut, name).value):
        return
    try:
        await with_timeout(RisingEdge(getattr(dut, name)), cycles * 10, "ns")
    except cocotb.triggers.SimTimeoutError:
        raise AssertionError(f"{what} did not finish within {cycles} cycles (fault="
                             f"{int(dut.fault.value)}, error={int(dut.error.value)}, overflow="
                             f"{int(dut.overflow.value)}){_faults(dut, cfg)}") from None


def _faults(dut, cfg):
    """PE faults (wafer, row, col, code, index) for an error message (empty when the build does
    not expose them: Verilator's builds reach the top and its children, sim.kit.runner.public_vlt)."""
    try:
        return _pe_faults(dut, cfg)
    except AttributeError:
        return " (the PE fault registers are not visible in this build; rerun with WS_SIM=icarus)"


def _pe_faults(dut, cfg):
    out = []
    for i in range(cfg.swarmx_leaves):
        mesh = getattr(dut.system, f"wafer{i}").mesh
        for r in range(cfg.mesh_rows):
            for q in range(cfg.mesh_cols):
                core = getattr(mesh, f"core_{r}_{q}", None)
                if core is not None and int(core.fault.value):
                    out.append(f"wafer{i}.core_{r}_{q}: code {int(core.fault_code.value)} index "
                               f"{int(core.fault_index.value)}")
    return (": " + "; ".join(out)) if out else ""


async def _phase(dut, req, cfg):
    """Configure every wafer, stream the weights, wait; the :class:`PhaseResult`."""
    systems, rows = cfg.swarmx_leaves, cfg.mesh_rows
    for i, writes in enumerate(req.writes):
        load_words(getattr(dut, f"cfg_player{i}").mem, [cfg_word(a, v) for a, v in writes])
    for q, (words, count) in enumerate(zip(req.streams, req.roots, strict=True)):
        load_words(getattr(dut, f"bcast_player{q}").mem, words)
        getattr(dut, f"bcast_count__{q}").value = len(words)
        getattr(dut, f"root_count__{q}").value = count
    for i, rows_in in enumerate(req.west_in):
        for p, words in enumerate(rows_in):
            load_words(getattr(dut, f"west_player{i}_{p}").mem, words)
    dut.cfg_count.value = len(req.writes[0])
    dut.go_count.value = req.go_count
    dut.west_in_count.value = req.west_in_count
    dut.west_count.value = req.west
    dut.east_count.value = req.east
    await _pulse(dut, "start")
    await _wait(dut, cfg, "cfg_done", 10 * len(req.writes[0]) + 100, f"{req.what} configuration")
    cfg_cycles = int(dut.cfg_cycles.value)
    await _pulse(dut, "go")
    budget = 200 * (max(map(len, req.streams)) + req.west_in_count + max(req.roots) + req.west
                    + req.east) + 20000
    await _wait(dut, cfg, "done", budget, req.what)
    assert not int(dut.fault.value), f"{req.what}: a PE core raised a fault{_faults(dut, cfg)}"
    assert not int(dut.error.value), f"{req.what}: a router or SwarmX raised an error"
    assert not int(dut.overflow.value), f"{req.what}: a recorder overflowed (extra words)"
    stream = 0
    if req.has_weights:
        stream = int(dut.bcast_last.value) - int(dut.bcast_first.value) + 1

    def edge(side, count):
        if not count:
            return [[] for _ in range(systems)]
        return [[read_words(getattr(dut, f"{side}_rec{i}_{p}").mem, count) for p in range(rows)]
                for i in range(systems)]

    return PhaseResult(cfg_cycles, int(dut.run_cycles.value), stream,
                       [read_words(getattr(dut, f"root_rec{q}").mem, n) for q, n in enumerate(req.roots)],
                       edge("west", req.west), edge("east", req.east))


@cocotb.test()
async def train(dut):
    run = SystemRunConfig.from_dict(params())
    cfg = rtl_config(run)
    out_dir = Path(run.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = np.load(out_dir / DATA_FILE)
    dut.stall.value = run.stall
    for name in ("start", "go", "auto_go", "cfg_count", "go_count", "west_in_count", "west_count", "east_count"):
        getattr(dut, name).value = 0
    for q in range(cfg.mesh_cols):
        getattr(dut, f"bcast_count__{q}").value = 0
        getattr(dut, f"root_count__{q}").value = 0
    await reset(dut)
    loop = training(run, cfg, data, log=lambda text: print(text, flush=True))
    cpu = time.process_time()       # the simulator's process: the simulator and cocotb's Python
    try:
        request = next(loop)
        while True:
            result = await _phase(dut, request, cfg)
            request = loop.send(result)
    except StopIteration as stop:
        results = stop.value
    results["simulator"] = "cocotb+" + ("verilator" if "verilator" in cocotb.SIM_NAME.lower() else "icarus")
    results.update(simulator_speed(cfg, results["simulated_cycles"], time.process_time() - cpu))
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
