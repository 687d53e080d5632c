"""cocotb bench for ``SkidBuffer`` (top ``skid_buffer``, 38-bit wavelet payload).

Parameters (``sim.kit.params()``): ``words``, ``gap_prob``, ``stall_prob``.
"""

import json
import random
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from arch.wavelet import WAVELET_BITS
from models.skid_buffer import SkidBufferModel
from sim.kit import params
from sim.kit.clocking import reset
from sim.kit.scoreboard import InOrderScoreboard
from sim.kit.stream import StreamDriver, StreamMonitor, recorded, replay_closed_loop

WIDTH = WAVELET_BITS


async def _run(dut, n, gap_prob, stall_prob, seed):
    rng = random.Random(seed)
    words = [rng.getrandbits(WIDTH) for _ in range(n)]
    gap_log, stall_log = [], []
    await reset(dut)
    board = InOrderScoreboard("skid_buffer.o")
    board.expect(words)
    drv = StreamDriver(dut.clk, dut, "i", gaps=recorded(gap_prob, rng, gap_log))
    mon = StreamMonitor(dut.clk, dut, "o", stall=recorded(stall_prob, rng, stall_log),
                        callback=lambda w, c: board.got(w))
    drv.send(words)
    await mon.wait_for(n)
    await ClockCycles(dut.clk, 5)
    board.check_done()
    assert len(mon.words) == n, "extra words after the last expected one"
    cycles = len(stall_log)
    accepts, emits, out_words = replay_closed_loop(SkidBufferModel(), words, gap_log, stall_log, cycles)
    assert out_words[:n] == words
    assert drv.accepted == accepts[:len(drv.accepted)], "input accept cycles differ from the model"
    assert mon.cycles == emits[:n], "output transfer cycles differ from the model"
    return drv, mon


@cocotb.test()
async def random_traffic(dut):
    """Random payloads, random valid gaps and back-pressure: order, completeness, cycle-exact."""
    p = params()
    n = p.get("words", 2000)
    drv, mon = await _run(dut, n, p.get("gap_prob", 0.3), p.get("stall_prob", 0.3),
                          seed=cocotb.RANDOM_SEED)
    span = mon.cycles[-1] - drv.accepted[0] + 1
    Path("stats.json").write_text(json.dumps({"words": n, "cycles": span, "words_per_cycle": n / span,
                                              "first_latency": mon.cycles[0] - drv.accepted[0]}))


@cocotb.test()
async def full_throughput(dut):
    """No gaps, no stalls: one word per cycle, latency exactly one cycle."""
    n = 256
    drv, mon = await _run(dut, n, 0.0, 0.0, seed=cocotb.RANDOM_SEED + 1)
    assert drv.accepted == list(range(drv.accepted[0], drv.accepted[0] + n)), "input stalled"
    assert mon.cycles == [c + 1 for c in drv.accepted], "latency is not one cycle"


@cocotb.test()
async def ready_is_registered(dut):
    """``i.ready`` falls only after the output has stalled with a word in the skid slot."""
    await reset(dut)
    dut.o__ready.value = 0
    dut.i__valid.value = 1
    dut.i__payload.value = 1
    await RisingEdge(dut.clk)   # word 1 -> output register
    dut.i__payload.value = 2
    await RisingEdge(dut.clk)   # word 2 -> skid slot
    dut.i__valid.value = 0
    await RisingEdge(dut.clk)
    assert int(dut.i__ready.value) == 0, "ready must be low with both slots full"
    assert int(dut.o__valid.value) == 1 and int(dut.o__payload.value) == 1
    dut.o__ready.value = 1
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    assert int(dut.o__payload.value) == 2
