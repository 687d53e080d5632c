"""cocotb bench for ``PeCore`` (top ``pe_core``): runs one *program* and records what happened.

Parameters (``sim.kit.params()``), built by ``tests/hdl/pe/test_pe_core.py`` from the golden model:
``cfg_writes`` ``[[addr, word], ...]`` (written one per cycle before traffic), ``wavelets``
``[[color, data], ...]`` (driven on ``rx`` with random gaps ``gap_prob``), ``wavelets2`` (the same
on ``rx2``, at the same time), ``expect_tx`` (words
the model sends; ``tx`` is drained with random back-pressure ``stall_prob``, after ``tx_hold``
cycles from the start in which it is not ready), ``reads`` (config
addresses read back after the run), ``drain`` (idle cycles allowed after the last word).

Writes ``result.json`` in the run folder: ``tx`` payloads and ``tx_cycles``, ``rx_cycles`` (accept
cycle of each wavelet), ``rx2_cycles``, ``reads`` (values), ``rx_ready_low`` (cycles ``rx.ready``
was low while a wavelet was offered), ``rx2_ready_low`` (the same for ``rx2``), ``fault`` (the
port) and ``busy`` after each step, ``write_cycles`` (per step, the cycle of each configuration
write) and ``tx_stalls`` (the monitor's back-pressure in every cycle), the last two so that a
cycle model can replay the run (cycles count from 0 at the drivers' and the monitor's first edge).
The pytest side compares all of it with the model.
"""

import json
import random
import time
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from arch.config_bus import WORD_MASK
from arch.pe_map import desc_addr, descriptor_writes, encode
from arch.wavelet import pack_wavelet, unpack_wavelet
from sim.kit import params
from sim.kit.clocking import PERIOD_NS, reset
from sim.kit.stream import StreamDriver, StreamMonitor, bernoulli, recorded


async def cfg_write(dut, writes, times=None):
    """One write per cycle; ``times`` (a list) collects the sim time of each write's edge."""
    for addr, word in writes:
        dut.cfg__addr.value = addr
        dut.cfg__wdata.value = word
        dut.cfg__we.value = 1
        await RisingEdge(dut.clk)
        if times is not None:
            times.append(get_sim_time("ns"))
    dut.cfg__we.value = 0


async def cfg_read_all(dut, addrs):
    """Read configuration addresses, one per cycle (rdata is valid the cycle after addr)."""
    values = []
    dut.cfg__we.value = 0
    for addr in addrs:
        await FallingEdge(dut.clk)
        dut.cfg__addr.value = addr
        await RisingEdge(dut.clk)
        await ReadOnly()
        values.append(int(dut.cfg__rdata.value))
    if addrs:
        await FallingEdge(dut.clk)     # leave the read-only phase before anyone drives
    return values


@cocotb.test()
async def run_program(dut):
    """Run every step of the program: configuration writes, wavelets, drain, read-back."""
    p = params()
    rng = random.Random(cocotb.RANDOM_SEED)
    wall0 = time.perf_counter()
    dut.cfg__we.value = 0
    dut.cfg__addr.value = 0
    dut.cfg__wdata.value = 0
    await reset(dut)
    t0 = get_sim_time("ns")            # the edge before cycle 0 of the drivers and the monitor
    drv = StreamDriver(dut.clk, dut, "rx", gaps=bernoulli(p.get("gap_prob", 0.0), rng))
    drv2 = StreamDriver(dut.clk, dut, "rx2", gaps=bernoulli(p.get("gap_prob", 0.0), rng))
    tx_stalls = []                     # the monitor's decision in every cycle (replayable)
    random_stall = recorded(p.get("stall_prob", 0.0), rng, tx_stalls)

    def stall():
        if len(tx_stalls) < p.get("tx_hold", 0):
            tx_stalls.append(True)
            return True
        return random_stall()
    mon = StreamMonitor(dut.clk, dut, "tx", stall=stall)
    ready_low = 0
    ready2_low = 0

    async def watch_ready():
        nonlocal ready_low, ready2_low
        while True:
            await RisingEdge(dut.clk)
            if int(dut.rx__valid.value) and not int(dut.rx__ready.value):
                ready_low += 1
            if int(dut.rx2__valid.value) and not int(dut.rx2__ready.value):
                ready2_low += 1

    cocotb.start_soon(watch_ready())
    reads, faults, busy, write_cycles = [], [], [], []
    for step in p["steps"]:
        times = []
        await cfg_write(dut, step.get("writes", []), times)
        write_cycles.append([(t - t0) // PERIOD_NS - 1 for t in times])
        drv.send(pack_wavelet(d, c) for c, d in step.get("wavelets", []))
        drv2.send(pack_wavelet(d, c) for c, d in step.get("wavelets2", []))
        await drv.wait_idle()
        await drv2.wait_idle()
        expect = step.get("expect_tx", len(mon.words))
        waited = 0
        while len(mon.words) < expect and waited < 100 + 40 * expect:
            await RisingEdge(dut.clk)
            waited += 1
        await ClockCycles(dut.clk, p.get("drain", 20))   # extra words would show up here
        reads.append(await cfg_read_all(dut, step.get("reads", [])))
        faults.append(int(dut.fault.value))
        busy.append(int(dut.busy.value))
    Path("result.json").write_text(json.dumps({
        "tx": mon.words, "tx_cycles": mon.cycles, "rx_cycles": drv.accepted,
        "rx2_cycles": drv2.accepted, "reads": reads, "faults": faults, "busy": busy, "rx_ready_low": ready_low,
        "rx2_ready_low": ready2_low, "write_cycles": write_cycles, "tx_stalls": [int(s) for s in tx_stalls],
        "sim_cycles": get_sim_time("ns") // PERIOD_NS, "sim_seconds": time.perf_counter() - wall0,
    }))


# ---- programs: built and checked on the pytest side, against the golden model --------------

def desc_writes(cfg, t, **fields):
    """Configuration writes of descriptor ``t`` in commit order (word 0, which commits, last)."""
    return [list(w) for w in descriptor_writes(desc_addr(cfg.sram_words, t), encode(**fields))]


def sram_writes(base, words):
    return [[base + i, int(w) & WORD_MASK] for i, w in enumerate(words)]


class Program:
    """Steps (configuration writes, wavelets, read-backs) run on :class:`models.pe.PeModel` as
    they are added; :meth:`check` compares a bench result with the model, value for value."""

    def __init__(self, cfg, model=None):
        """``model``: the model class (default :class:`models.pe.PeModel`; the coverage bins use
        ``sim.benches.pe_coverage.CoveredPeModel``)."""
        from models.pe import PeModel
        self.cfg = cfg
        self.model = (model or PeModel)(lanes=cfg.lanes, sram_words=cfg.sram_words,
                                        num_tasks=cfg.num_tasks, num_colors=cfg.num_colors,
                                        acc_rows=cfg.acc_rows, mul_stages=cfg.mul_stages,
                                        add_stages=cfg.add_stages)
        self.steps = []
        self.expected_reads = []
        self.expected_faults = []
        self.expected_busy = []

    def step(self, writes=(), wavelets=(), reads=(), wavelets2=()):
        """Add a step; the model takes ``wavelets`` (on ``rx``) and then ``wavelets2`` (on
        ``rx2``): the RTL interleaves them, which only a racing program would notice."""
        writes = [[int(a), int(w) & WORD_MASK] for a, w in writes]
        wavelets = [[int(c), int(d) & WORD_MASK] for c, d in wavelets]
        wavelets2 = [[int(c), int(d) & WORD_MASK] for c, d in wavelets2]
        for a, w in writes:
            self.model.cfg_write(a, w)
        for c, d in wavelets:
            self.model.wavelet(c, d)
        for c, d in wavelets2:
            self.model.wavelet(c, d, rx2=True)
        self.expected_reads.append([self.model.cfg_read(int(a)) for a in reads])
        self.expected_faults.append(int(self.model.fault is not None))
        self.expected_busy.append(int(any(self.model.active)))
        self.steps.append({"writes": writes, "wavelets": wavelets, "wavelets2": wavelets2,
                           "reads": [int(a) for a in reads], "expect_tx": len(self.model.out)})
        return self

    def params(self, gap_prob=0.0, stall_prob=0.0, drain=20, tx_hold=0):
        return {"steps": self.steps, "gap_prob": gap_prob, "stall_prob": stall_prob,
                "drain": drain, "tx_hold": tx_hold}

    def tx_by_color(self, words):
        out = {}
        for w in words:
            data, color, _ = unpack_wavelet(w)
            out.setdefault(color, []).append(data)
        return out

    def check(self, result):
        """Assert RTL == model: sent words per color (in order), read-backs, fault flag, ``busy``
        after each step (high exactly while a descriptor is active, once the step is drained), and
        that ``rx`` was never back-pressured unless an FMAC group had fewer than ``acc_rows`` rows
        (the only case the wavelet engine stalls, docs/pe.md#fmac-pipeline)."""
        expected = {}
        for c, d in self.model.out:
            expected.setdefault(c, []).append(d)
        got = self.tx_by_color(result["tx"])
        for c in sorted(set(expected) | set(got)):
            e, g = expected.get(c, []), got.get(c, [])
            assert len(g) == len(e), f"color {c}: RTL sent {len(g)} words, model {len(e)}"
            bad = [i for i in range(len(e)) if e[i] != g[i]]
            assert not bad, (f"color {c}: {len(bad)} words differ, first at {bad[0]}: "
                             f"RTL {g[bad[0]]:#010x}, model {e[bad[0]]:#010x}")
        for s, (step, exp, got_reads) in enumerate(zip(self.steps, self.expected_reads,
                                                       result["reads"])):
            bad = [i for i in range(len(exp)) if exp[i] != got_reads[i]]
            assert not bad, (f"step {s}: {len(bad)} read-backs differ, first at address "
                             f"{step['reads'][bad[0]]:#06x}: RTL {got_reads[bad[0]]:#010x}, "
                             f"model {exp[bad[0]]:#010x}")
        assert result["faults"] == self.expected_faults, \
            f"fault flag per step: RTL {result['faults']}, model {self.expected_faults}"
        assert result["busy"] == self.expected_busy, \
            f"busy after each step's drain: RTL {result['busy']}, model (a descriptor active) {self.expected_busy}"
        if not self.model.short_groups:
            assert result["rx_ready_low"] == 0, "rx.ready fell while a wavelet was offered"
