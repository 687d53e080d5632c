"""The cocotb test of the fuzzer, loaded in the simulator by :func:`sim.pe_fuzz.rtl.run_rtl`: :func:`run_batch`
runs every program of a batch file on ``pe_core``, the core reset before each, and writes their results.

Python is on every cycle, so the per-cycle path is lean: one trigger per cycle, the falling edge (every
output of the core is a register or a function of registers, so at the falling edge of cycle ``k`` the
bench reads the outputs of cycle ``k`` and writes its inputs of cycle ``k`` through the simulator
handles at once, no scheduled writes; it so knows the transfers of cycle ``k``, made at the rising edge
that ends it), the clock toggled by cocotb's C++ clock, a signal written only when it changes.
"""

import json
import random
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from sim.kit import params
from sim.kit.clocking import PERIOD_NS
from sim.kit.trace import start_if_requested

NOW = 3                       # GPI action: set immediately


def _word(h):
    """An integer from a simulator handle (binary string: wide values, x/z seen): -1 if not 0/1."""
    s = h.get_signal_val_binstr()
    try:
        return int(s, 2)
    except ValueError:
        return -1


class _Input:
    """``rx`` or ``rx2`` in one step: a wavelet offered stays offered until taken; a gap (probability
    ``gap``) is decided while none is. ``taken`` and ``waited``: the cycles an offered wavelet was taken
    or refused."""
    __slots__ = ("valid", "ready", "payload", "gap", "words", "i", "offered", "driven", "taken", "waited")

    def __init__(self, valid, ready, payload, gap):
        self.valid, self.ready, self.payload, self.gap = valid, ready, payload, gap
        self.words, self.i, self.offered, self.driven = [], 0, False, False
        self.taken, self.waited = [], []

    def start(self, words):
        self.words, self.i = words, 0

    @property
    def idle(self):
        return self.i == len(self.words) and not self.offered

    def cycle(self, cycle, offer, rand):
        """Cycle ``cycle``: offer the next wavelet if ``offer`` and none is, drive ``valid``, note the
        transfer."""
        if offer and not self.offered and self.i < len(self.words) and not (self.gap and rand() < self.gap):
            self.payload.set_signal_val_binstr(NOW, f"{self.words[self.i]:038b}")
            self.offered = True
        if self.offered != self.driven:
            self.valid.set_signal_val_int(NOW, int(self.offered))
            self.driven = self.offered
        if self.offered:
            if self.ready.get_signal_val_long():
                self.taken.append(cycle)
                self.offered = False
                self.i += 1
            else:
                self.waited.append(cycle)


async def _run_program(edge, g, prog, poll_addr, drain):
    """Run one program (:func:`sim.pe_fuzz.rtl.bench_form`) from a reset: per step the writes (one per
    cycle), the wavelets on ``rx`` and ``rx2`` (with ``bg_reads`` on the bus meanwhile), then ``VEC_CYCLES``
    (``poll_addr``) polled until it reaches the step's ``vec_cycles`` and ``expect_tx`` words are out,
    ``drain`` idle cycles, the reads; ``tx`` back-pressured at random all along. Cycle 0 is the first
    after the reset; a write in cycle ``k`` acts from ``k + 1``.

    The result: ``tx`` (the words sent) and ``tx_cycles``; ``rx``, ``rx2`` (the cycles a wavelet was
    taken) and ``rx_wait``, ``rx2_wait`` (refused); ``write_cycles`` (per step, the cycle of each
    write); ``stalls`` (``"1"`` where ``tx`` was back-pressured, per cycle); ``reads``, ``bg_reads``
    (per step); ``faults`` (the ``fault`` output after each step); ``timeout`` (the step that did not
    end within its ``limit`` of cycles, or None); ``cycles``."""
    rx_v, rx_r, rx_p, rx2_v, rx2_r, rx2_p, tx_v, tx_r, tx_p, addr_h, wdata_h, we_h, rdata_h, fault_h, rst_h = g
    rng = random.Random(prog["seed"])
    rand = rng.random
    stall = prog["stall"]
    rx, rx2 = _Input(rx_v, rx_r, rx_p, prog["gap"]), _Input(rx2_v, rx2_r, rx2_p, prog["gap2"])
    rst_h.set_signal_val_int(NOW, 1)
    for h in (rx_v, rx2_v, tx_r, we_h):
        h.set_signal_val_int(NOW, 0)
    await edge
    await edge
    rst_h.set_signal_val_int(NOW, 0)
    cur_ready = cur_we = 0
    cur_addr = -1
    cycle = 0
    stalls = bytearray()
    tx_words, tx_cycles = [], []
    write_cycles, reads_out, bg_out, faults, timeout = [], [], [], [], None
    steps = prog["steps"]
    si = -1
    phase = 5                 # 0 writes, 1 traffic, 2 quiesce, 3 drain, 4 reads, 5 next step
    writes, reads, bg = [], [], []        # the step's, set at its start (phase 5)
    wi = ri = bi = drained = nw = nr = nb = expect_tx = vec_expect = deadline = 0
    vec_seen = -1
    step_reads, step_bg, wc = [], [], []
    pending = 0               # the read addressed last cycle: 1 a program read, 2 the poll, 3 a background read
    while True:
        await edge
        if pending:
            v = _word(rdata_h)
            if pending == 1:
                step_reads.append(v)
            elif pending == 3:
                step_bg.append(v)
            else:
                vec_seen = v
            pending = 0
        while True:           # the phase of this cycle
            if phase == 0 and wi == nw:
                phase = 1
            if phase == 1 and rx.idle and rx2.idle and bi == nb:
                phase = 2
            if phase == 2 and len(tx_words) >= expect_tx and vec_seen >= vec_expect:
                phase = 3
            if phase == 3 and drained >= drain:
                phase = 4
            if phase == 4 and ri == nr:
                reads_out.append(step_reads)
                bg_out.append(step_bg)
                faults.append(fault_h.get_signal_val_long())
                phase = 5
            if phase == 5:
                si += 1
                if si == len(steps):
                    break
                step = steps[si]
                writes, reads, bg = step["writes"], step["reads"], step.get("bg_reads", [])
                rx.start(step["wavelets"])
                rx2.start(step["wavelets2"])
                expect_tx, vec_expect, deadline = step["expect_tx"], step["vec_cycles"], cycle + step["limit"]
                wi = ri = bi = drained = 0
                nw, nr, nb = len(writes), len(reads), len(bg)
                vec_seen = -1
                step_reads, step_bg, wc = [], [], []
                write_cycles.append(wc)
                phase = 0
                continue
            break
        if si == len(steps):
            break
        if cycle >= deadline:
            timeout = si
            break
        # tx: back-pressure decided in every cycle
        r = 0 if stall and rand() < stall else 1
        stalls.append(49 - r)
        if r != cur_ready:
            tx_r.set_signal_val_int(NOW, r)
            cur_ready = r
        if r and tx_v.get_signal_val_long():
            tx_words.append(_word(tx_p))
            tx_cycles.append(cycle)
        # configuration bus: a write, the poll of VEC_CYCLES, a read
        we = 0
        a = -1
        if phase == 0:
            a, w = writes[wi]
            wi += 1
            wc.append(cycle)
            wdata_h.set_signal_val_binstr(NOW, f"{w:032b}")
            we = 1
        elif phase == 1 and bi < nb:
            a = bg[bi]
            bi += 1
            pending = 3
        elif phase == 2:
            a = poll_addr
            pending = 2
        elif phase == 3:
            drained += 1
        elif phase == 4:
            a = reads[ri]
            ri += 1
            pending = 1
        if a >= 0 and a != cur_addr:
            addr_h.set_signal_val_int(NOW, a)
            cur_addr = a
        if we != cur_we:
            we_h.set_signal_val_int(NOW, we)
            cur_we = we
        rx.cycle(cycle, phase == 1, rand)
        rx2.cycle(cycle, phase == 1, rand)
        cycle += 1
    return {"tx": tx_words, "tx_cycles": tx_cycles, "rx": rx.taken, "rx_wait": rx.waited, "rx2": rx2.taken,
            "rx2_wait": rx2.waited, "write_cycles": write_cycles, "stalls": stalls.decode(), "reads": reads_out,
            "bg_reads": bg_out, "faults": faults, "timeout": timeout, "cycles": cycle}


@cocotb.test()
async def run_batch(dut):
    """Run every program of the batch file ``params()["batch"]`` (:func:`sim.pe_fuzz.rtl.run_rtl`), the
    core reset before each; ``{"results": [...]}`` to ``params()["out"]``."""
    p = params()
    batch = json.loads(Path(p["batch"]).read_text())
    names = ("rx__valid", "rx__ready", "rx__payload", "rx2__valid", "rx2__ready", "rx2__payload", "tx__valid",
             "tx__ready", "tx__payload", "cfg__addr", "cfg__wdata", "cfg__we", "cfg__rdata", "fault", "rst")
    g = tuple(getattr(dut, n)._handle for n in names)
    for n in ("rx__payload", "rx2__payload", "cfg__wdata", "cfg__addr", "rx__valid", "rx2__valid", "cfg__we",
              "tx__ready"):
        getattr(dut, n).value = 0
    dut.rst.value = 1
    Clock(dut.clk, PERIOD_NS, unit="ns", impl="gpi").start()
    start_if_requested(dut)
    edge = FallingEdge(dut.clk)
    # the first immediate write only after time 0: Icarus disconnects a top input from the logic
    # it drives when it is written through VPI (vpiNoDelay) before its initial evaluation
    await edge
    results = [await _run_program(edge, g, prog, batch["poll_addr"], batch["drain"]) for prog in batch["programs"]]
    Path(p["out"]).write_text(json.dumps({"results": results}))
