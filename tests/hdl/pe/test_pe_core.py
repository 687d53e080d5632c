"""PeCore RTL against the golden PE model (models/pe.py): every operation alone with random data,
random input gaps and random output back-pressure; chaining; cycle costs; FMAC utilization at
line rate; the fault flag. Benches: sim/benches/pe.py."""

import json

import numpy as np
import pytest

from arch.pe_map import (
    DESC_STRIDE,
    DESC_WORDS,
    FAULT_STATUS,
    STATUS,
    Fault,
    Op,
    VecMode,
    desc_addr,
    fmac_order,
    fmac_write_delay,
    status_base,
    vec_fifo_depth,
)
from arch.pe_map import done_addr as pe_done_addr
from hdl.config import PRESETS, ConfigError, preset
from hdl.pe.core import PeCore
from models.numerics import bf16_bits, bf16_mul, bits, fp32_add
from models.pe import (
    DEP_TO_TX_CYCLES,
    dot_word_cycles,
    fmac_cycles,
    unit_cycles,
    vec_done_to_tx_cycles,
    vec_out_cycles,
    vec_pick_delay,
)
from sim.benches.pe import Program, desc_writes, sram_writes
from sim.kit.runner import compare_simulators, config_verilog, run_bench

TINY = preset("tiny")          # lanes 2, 256 words in 2 banks, 4 tasks, 4 colors
DEFAULT = preset("default")    # lanes 4, 2048 words in 8 banks, 8 tasks, 24 colors
HW = PRESETS["hardware"]
# tiny with the hardware preset's pipelined fp units (acc_rows rows per FMAC group)
PIPE = TINY.replace(mul_stages=HW.mul_stages, add_stages=HW.add_stages)


def bf16_words(rng, n, *, specials=0.05, garbage=True):
    """Random words holding bf16 values in the upper half (normal values of mixed sign and
    scale, with some zeros, subnormals, infinities and NaNs); with ``garbage``, low halves that
    the multipliers must ignore and that make the bf16 rounding hit ties."""
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))).astype(np.float32)
    hi = bf16_bits(v).astype(np.uint32)
    pick = rng.random(n) < specials
    special = rng.choice(np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x8005],
                                  dtype=np.uint32), n)
    hi = np.where(pick, special, hi)
    lo = 0
    if garbage:   # random low halves, many of them rounding ties or next to one
        lo = rng.integers(0, 1 << 16, n, dtype=np.uint32)
        near = rng.choice(np.array([0x8000, 0x8000, 0x7FFF, 0x8001], dtype=np.uint32), n)
        lo = np.where(rng.random(n) < 0.4, near, lo)
    return (hi << 16) | lo


def fp32_words(rng, n):
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))).astype(np.float32)
    return v.view(np.uint32)


def status(cfg, name):
    return status_base(cfg.sram_words, cfg.num_tasks) + STATUS[name]


def done_addr(cfg, t):
    return pe_done_addr(cfg.sram_words, cfg.num_tasks, t)


def status_reads(cfg):
    return [status(cfg, n) for n in STATUS] + [done_addr(cfg, t) for t in range(cfg.num_tasks)]


def run(cfg, prog, **kw):
    test_dir = run_bench(config_verilog("pe_core", cfg, PeCore), "pe_core", "sim.benches.pe",
                         params=prog.params(**kw))
    result = json.loads((test_dir / "result.json").read_text())
    prog.check(result)
    return result


def test_fmac():
    """FMAC broadcast: odd base and stride (vectors straddle banks), garbage low halves."""
    rng = np.random.default_rng(1)
    cfg, L = TINY, TINY.lanes
    K, R, stride, base, dst = 7, 5, 3, 1, 40
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, 40))
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=1, a_base=base, a_stride=stride,
                            count=K, reps=R, dst_base=dst))
    prog.step(wavelets=[(1, w) for w in bf16_words(rng, K * R)],
              reads=list(range(dst, dst + R * L)) + status_reads(cfg))
    assert prog.model.done[0] == R and not prog.model.active[0]
    run(cfg, prog, gap_prob=0.3)


def test_packed_sram_writes():
    """PACK = 1: one configuration write puts two bf16 into SRAM words a and a + 1 (odd a: the pair
    straddles banks and lines; at the last word only that one is written); PACK = 0 writes whole
    words again. The model against the words here, the RTL against the model."""
    cfg, S = TINY, TINY.sram_words
    pack = status(cfg, "PACK")
    writes = [(pack, 1), (3, 0x12345678), (S - 1, 0xAAAABBBB), (10, 0x3F80C000), (pack, 0),
              (20, 0xDEADBEEF)]
    addrs = [3, 4, S - 1, 0, 10, 11, 20]
    prog = Program(cfg).step(writes=writes, reads=addrs + [pack])
    assert [prog.model.cfg_read(a) for a in addrs + [pack]] == [
        0x12340000, 0x56780000, 0xAAAA0000, 0, 0x3F800000, 0xC0000000, 0xDEADBEEF, 0]
    run(cfg, prog)


def test_descriptor_map_at_the_smallest_sram_and_most_tasks():
    """64 SRAM words and 32 descriptors: the descriptor window (256 addresses) is wider than twice
    the SRAM, so no address arithmetic modulo the window can hide a wrong base. Every descriptor
    word but the committing word 0 is written with its own value and read back, with the status
    registers after the window; then descriptors 20 and 21 run: a STORE's done counter and an
    illegal commit's fault name their own index."""
    cfg = TINY.replace(sram_words=64, num_tasks=32)
    rng = np.random.default_rng(5)
    addrs = [desc_addr(cfg.sram_words, t, w) for t in range(cfg.num_tasks) for w in range(1, DESC_WORDS)]
    writes = list(zip(addrs, rng.integers(0, 1 << 32, len(addrs), dtype=np.uint64)))
    prog = Program(cfg).step(writes=writes, reads=addrs + status_reads(cfg))
    stored = [prog.model.cfg_read(a) for a in addrs]
    assert len(set(stored)) > len(addrs) * 0.9, "the model must keep distinct words apart"
    store = desc_writes(cfg, 20, op=Op.STORE, enable=1, color=0, reps=1, lo=0, hi=cfg.lanes, dst_base=10)
    prog.step(writes=store, wavelets=[(0, 0x3F800000 + i) for i in range(cfg.lanes)],
              reads=[10, 11] + status_reads(cfg))
    prog.step(writes=desc_writes(cfg, 21, op=Op.FMAC, enable=1, color=1, count=0, reps=1), reads=status_reads(cfg))
    assert prog.model.cfg_read(done_addr(cfg, 20)) == 1
    assert FAULT_STATUS.unpack(prog.model.cfg_read(status(cfg, "FAULT")))["index"] == 21
    run(cfg, prog)


def test_stop_register_stops_every_descriptor():
    """A write to STOP stops every descriptor at once (a half-accumulated FMAC row is dropped, a
    VEC waiting on it never fires, words and done counters are kept); a wavelet afterwards finds
    no descriptor (UNBOUND); committing again starts afresh. RTL against the model."""
    rng = np.random.default_rng(8)
    cfg = TINY
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, 32))
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=1, a_base=0, a_stride=2, count=4,
                            reps=3, dst_base=64)
              + desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=2,
                            dep_a_en=1, dep_a=0, a_base=64, a_stride=2, count=1, reps=3))
    prog.step(wavelets=[(1, w) for w in bf16_words(rng, 6)])       # row 0 done, row 1 half
    prog.step(writes=[(status(cfg, "STOP"), 0)], reads=status_reads(cfg))
    assert not any(prog.model.active) and prog.model.done[0] == 1
    prog.step(wavelets=[(1, 0x3F800000)], reads=[status(cfg, "FAULT")])
    assert prog.model.fault == (Fault.UNBOUND, 1)
    prog.step(writes=[(status(cfg, "FAULT"), 0)]
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=1, a_base=0, a_stride=2, count=4,
                            reps=1, dst_base=80),
              wavelets=[(1, w) for w in bf16_words(rng, 4)],
              reads=list(range(80, 80 + cfg.lanes)) + status_reads(cfg))
    run(cfg, prog, gap_prob=0.2, stall_prob=0.2)


@pytest.mark.parametrize("cfg", [TINY, PIPE], ids=["comb", "pipe"])
def test_busy_low_only_once_a_stopped_store_word_is_written(cfg):
    """``busy`` low means every word the engines took is in SRAM, also when the descriptor that
    took it stopped before its unit ended: a STORE takes word 0 of a vector, STOP comes in the
    next cycle, and ``busy`` stays high until the word is written ``fmac_write_delay`` cycles after
    its transfer; the first cycle it is low, a configuration read of the word returns it.
    Amaranth's simulator (the cocotb benches look at ``busy`` once a step has drained)."""
    from amaranth.sim import Simulator

    from sim.kit.config_bus import bus_read, bus_write

    dut = PeCore(cfg)
    dst, word = 40, 0x3F80_1234
    delay = fmac_write_delay(cfg.mul_stages, cfg.add_stages)
    trace = []

    async def bench(ctx):
        await bus_write(ctx, dut.cfg, desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=2, lo=0, hi=2,
                                                  dst_base=dst))
        ctx.set(dut.rx.payload, {"data": word, "color": 1, "ctrl": 0})
        ctx.set(dut.rx.valid, 1)
        await ctx.tick().until(dut.rx.ready)            # word 0 of unit 0 taken at this edge
        ctx.set(dut.rx.valid, 0)
        await bus_write(ctx, dut.cfg, [(status(cfg, "STOP"), 0)])      # stopped in the next cycle, mid-unit
        while ctx.get(dut.busy):
            trace.append(1)
            assert len(trace) <= delay + 4, f"busy still high {len(trace)} cycles after the STOP"
            await ctx.tick()
        assert await bus_read(ctx, dut.cfg, dst) == word, \
            f"busy fell {len(trace)} cycles after the STOP, before the word taken was written"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # Taken at edge 0, stopped at edge 1, written at edge `delay`; busy after edge e is what held
    # before it (a descriptor active, or the word in stages 1..delay - 1): high after edges
    # 1 .. max(1, delay - 1), low from the cycle after the write.
    expected = max(1, delay - 1)
    assert len(trace) == expected, f"busy high {len(trace)} cycles after the STOP, expected {expected}"


def test_groups():
    """``group``: FMAC row n reads its operands from ``a_base + (n mod group)*L`` on (L-word
    chunks), a VEC unit n reads A at ``a_base + (n div group)*a_stride``; checked against sums
    computed here from those addresses, and the RTL against the model."""
    rng = np.random.default_rng(5)
    cfg, L = TINY, TINY.lanes
    K, R, g, base, stride, dst = 3, 7, 3, 1, 7, 100
    mem = bf16_words(rng, 40)
    w = bf16_words(rng, K * R)
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, mem)
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=1, a_base=base, a_stride=stride,
                            count=K, reps=R, dst_base=dst, group=g)
              + desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=2,
                            a_base=2, a_stride=L + 1, count=1, reps=5, group=2))
    prog.step(wavelets=[(1, x) for x in w], reads=list(range(dst, dst + R * L)) + status_reads(cfg))
    mem = np.asarray(mem, dtype=np.uint32)
    for n in range(R):
        acc = np.zeros(L, dtype=np.float32)
        for i in range(K):
            a = base + (n % g) * L + i * stride
            x16 = (mem[a:a + L] >> 16).astype(np.uint16)
            acc = fp32_add(acc, bf16_mul(np.uint16(w[n * K + i] >> 16), x16))
        assert list(prog.model.mem[dst + n * L:dst + n * L + L]) == list(bits(acc)), f"row {n}"
    assert [d for c, d in prog.model.out if c == 2] == [
        int(mem[2 + (n // 2) * (L + 1) + j]) for n in range(5) for j in range(L)]
    run(cfg, prog, gap_prob=0.3, stall_prob=0.3)


def test_store_filter():
    rng = np.random.default_rng(2)
    cfg, L = TINY, TINY.lanes
    prog = Program(cfg)
    prog.step(writes=sram_writes(96, fp32_words(rng, 16))
              + desc_writes(cfg, 1, op=Op.STORE, enable=1, color=2, reps=6, lo=2, hi=5,
                            dst_base=99))
    prog.step(wavelets=[(2, w) for w in fp32_words(rng, 6 * L)],
              reads=list(range(96, 112)) + status_reads(cfg))
    run(cfg, prog, gap_prob=0.5)


@pytest.mark.parametrize("mode,relu,rnd", [
    (VecMode.PASS, 1, 1), (VecMode.ADD, 0, 0), (VecMode.ADD, 1, 1), (VecMode.MASK, 0, 1),
    (VecMode.DOT, 0, 0)])
def test_vec(mode, relu, rnd):
    """A STORE receives B vectors from the fabric; the VEC fires on each (dep_b), computes with
    the resident A, sends on color 3 under back-pressure and stores the filtered ones."""
    rng = np.random.default_rng(10 + int(mode) * 3 + relu)
    cfg, L = TINY, TINY.lanes
    R, rows = 6, 3
    dot = mode == VecMode.DOT
    a_words = bf16_words(rng, 32) if mode != VecMode.ADD else fp32_words(rng, 32)
    if mode == VecMode.MASK:   # stored bf16 activations: clean upper halves, some zeros
        a_words = np.where(rng.random(32) < 0.2, 0, a_words & 0xFFFF0000).astype(np.uint32)
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, a_words)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=R, lo=0, hi=R,
                            dst_base=64)
              + desc_writes(cfg, 2, op=Op.VEC, vmode=mode, enable=1, relu=relu, round=rnd,
                            send=1, store=1, color=3, dep_b_en=1, dep_b=0,
                            a_base=0, a_stride=L if not dot else 5, b_base=64, b_stride=L,
                            count=rows if dot else 1, reps=R, dst_base=128, lo=1, hi=R - 1))
    b_words = fp32_words(rng, R * L) if mode == VecMode.ADD else bf16_words(rng, R * L)
    prog.step(wavelets=[(1, w) for w in b_words],
              reads=list(range(64, 64 + R * L)) + list(range(128, 128 + R * rows * L))
              + status_reads(cfg))
    assert len(prog.model.out) == R * (rows if dot else L)
    run(cfg, prog, gap_prob=0.3, stall_prob=0.5)


def test_vec_cycle_cost():
    """Without back-pressure a VEC whose vectors are all ready sends vector n's word j at ``t0 +
    n*L + j`` (each next vector fetched while one runs) and counts exactly the model's VEC cycles
    (``L`` per vector)."""
    rng = np.random.default_rng(4)
    cfg, L = DEFAULT, DEFAULT.lanes
    R = 6
    prog = Program(cfg)
    prog.step(writes=sram_writes(3, fp32_words(rng, R * 5))
              + desc_writes(cfg, 5, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=7,
                            a_base=3, a_stride=5, count=1, reps=R),
              reads=status_reads(cfg))
    result = run(cfg, prog)
    t0 = result["tx_cycles"][0]
    assert result["tx_cycles"] == [t0 + n * L + j for n in range(R) for j in range(L)]
    assert prog.model.vec_cycles == R * L
    assert prog.model.cycles(5) == R * L + 3 == result["tx_cycles"][-1] - t0 + 1 + 3


def test_dependency_to_tx_latency():
    """A VEC waiting on an FMAC sends row n's first word DEP_TO_TX_CYCLES after the last weight
    of row n was taken (weights every cycle, rows longer than the VEC's L + 3 cycles)."""
    rng = np.random.default_rng(7)
    cfg, L = DEFAULT, DEFAULT.lanes
    K, R = 8, 5
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, K * L))
              + desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=9,
                            dep_a_en=1, dep_a=0, a_base=512, a_stride=L, count=1, reps=R)
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=2, a_base=0, a_stride=L,
                            count=K, reps=R, dst_base=512))
    prog.step(wavelets=[(2, w) for w in bf16_words(rng, K * R)], reads=status_reads(cfg))
    result = run(cfg, prog)
    rx, tx = result["rx_cycles"], result["tx_cycles"]
    assert rx == list(range(rx[0], rx[0] + K * R))
    assert [tx[n * L] for n in range(R)] == [rx[n * K + K - 1] + DEP_TO_TX_CYCLES for n in range(R)]
    assert all(tx[n * L + j] == tx[n * L] + j for n in range(R) for j in range(L))


# ---- the pipelined vector unit (Config.mul_stages / add_stages > 0, docs/pe.md#vector-unit-pipeline)

# (mul_stages, add_stages): the hardware preset's; a deep multiplier (a PASS/ADD/MASK element
# waits for the DOT element ahead of the adder); a combinational multiplier; a combinational adder
# (a DOT element every cycle).
VEC_DEPTHS = [(HW.mul_stages, HW.add_stages), (4, 1), (0, 2), (1, 0)]


def vec_cfg(depth=(HW.mul_stages, HW.add_stages), **changes):
    return TINY.replace(mul_stages=depth[0], add_stages=depth[1], **changes)


def replay_tx_cycles(cfg, prog, result, *, waits=False, store_waits=False, offer2=None):
    """The bench's run replayed on the closed-loop model's PE timing
    (``models.pipeline.wafer_cycles._PeTiming``) with the RTL's input accept cycles, the
    configuration write cycles (each descriptor acts from the cycle after its commit) and the
    monitor's back-pressure: the model's tx transfer cycles (and, with ``waits``, also the
    cycles a store waited for its bank; with ``store_waits`` the cycles the store engine's head
    waited for its bank, ``models.pe.StoreQueue``). The model raises if a word came on ``rx2``
    in a cycle it says ``rx2`` was not ready. With ``offer2`` (a cycle) the ``rx2`` words are
    offered one per cycle from that cycle instead and taken when the model says ``rx2`` is ready:
    the model's ``rx2`` transfer cycles come first in the result. For programs that write each
    descriptor once and no SRAM by configuration while a VEC stores."""
    from models.pipeline.wafer_cycles import _PeTiming
    S, base = cfg.sram_words, status_base(cfg.sram_words, cfg.num_tasks)
    commits = {}
    for step, cycles in zip(prog.steps, result["write_cycles"]):
        for (addr, _), c in zip(step["writes"], cycles):
            if S <= addr < base and (addr - S) % DESC_STRIDE == 0:
                commits[(addr - S) // DESC_STRIDE] = c + 1
    descs = {t: dict(prog.model.desc[t]) for t in commits}
    pe = _PeTiming(descs, cfg.lanes, cfg.sram_banks, commits, mul_stages=cfg.mul_stages,
                   add_stages=cfg.add_stages)
    rx = dict(zip(result["rx_cycles"], [c for s in prog.steps for c, _ in s["wavelets"]]))
    rx2 = dict(zip(result["rx2_cycles"], [c for s in prog.steps for c, _ in s["wavelets2"]]))
    words2 = [c for s in prog.steps for c, _ in s["wavelets2"]]
    out, taken2 = [], []
    for cycle, stall in enumerate(result["tx_stalls"]):
        pe.commit(cycle)
        taken = pe.txb.out_valid and not stall
        if taken:
            out.append(cycle)
        color2 = rx2.get(cycle)
        if offer2 is not None:
            color2 = None
            if cycle >= offer2 and len(taken2) < len(words2) and pe.rx2_ready():
                color2 = words2[len(taken2)]
                taken2.append(cycle)
        pe.cycle(rx.get(cycle), taken, color2)
    if offer2 is not None:
        out = (taken2, out)
    if store_waits:
        return out, pe.sq.waits
    return (out, pe.vbank_waits) if waits else out


@pytest.mark.parametrize("mode,relu,rnd", [
    (VecMode.PASS, 1, 1), (VecMode.ADD, 1, 1), (VecMode.MASK, 0, 1), (VecMode.DOT, 0, 0)])
def test_vec_pipelined(mode, relu, rnd):
    """Pipelined vector unit (the hardware preset's stages): B vectors come on ``rx2`` (the store
    engine, whose writes take the vector unit's store banks at random), the VEC fires on each,
    sends under 50 % back-pressure and stores the filtered ones: RTL == model bit for bit
    (specials, rounding ties, garbage low halves), and every tx transfer in the cycle the
    closed-loop PE timing model says."""
    rng = np.random.default_rng(40 + int(mode) * 3 + relu)
    cfg, L = vec_cfg(), TINY.lanes
    R, rows = 6, 3
    dot = mode == VecMode.DOT
    a_words = bf16_words(rng, 32, specials=0.1) if mode != VecMode.ADD else fp32_words(rng, 32)
    if mode == VecMode.MASK:   # stored bf16 activations: clean upper halves, some zeros
        a_words = np.where(rng.random(32) < 0.2, 0, a_words & 0xFFFF0000).astype(np.uint32)
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, a_words)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=R, lo=0, hi=R,
                            dst_base=64)
              + desc_writes(cfg, 2, op=Op.VEC, vmode=mode, enable=1, relu=relu, round=rnd,
                            send=1, store=1, color=3, dep_b_en=1, dep_b=0,
                            a_base=0, a_stride=L if not dot else 5, b_base=64, b_stride=L,
                            count=rows if dot else 1, reps=R, dst_base=128, lo=1, hi=R - 1))
    b_words = bf16_words(rng, R * L, specials=0.1)
    if mode == VecMode.ADD:
        b_words = np.where(rng.random(R * L) < 0.5, fp32_words(rng, R * L), b_words).astype(np.uint32)
    prog.step(wavelets2=[(1, w) for w in b_words],
              reads=list(range(64, 64 + R * L)) + list(range(128, 128 + R * rows * L))
              + status_reads(cfg))
    assert len(prog.model.out) == R * (rows if dot else L)
    result = run(cfg, prog, gap_prob=0.3, stall_prob=0.5)
    assert result["tx_cycles"] == replay_tx_cycles(cfg, prog, result)


@pytest.mark.parametrize("depth", VEC_DEPTHS)
def test_vec_pipelined_mixed(depth):
    """ADD, DOT, MASK and PASS VECs share the pipelined vector unit, each firing on the vectors
    a STORE receives on ``rx2`` (and PASS sending them back), under back-pressure and random
    input gaps: DOT follows ADD and PASS/MASK follow DOT (a deep multiplier makes them wait for
    the DOT's last product), the stores meet the store engine's writes. RTL == model, and the
    tx cycles as the closed-loop PE timing model's."""
    rng = np.random.default_rng(50 + 5 * depth[0] + depth[1])
    cfg = vec_cfg(depth, num_tasks=8, num_colors=8)
    L, R, rows = cfg.lanes, 5, 2
    prog = Program(cfg)
    act = np.where(rng.random(8) < 0.3, 0, bf16_words(rng, 8) & 0xFFFF0000).astype(np.uint32)
    prog.step(writes=sram_writes(0, fp32_words(rng, 16)) + sram_writes(32, bf16_words(rng, 16))
              + sram_writes(48, act)
              + desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.ADD, enable=1, relu=1, round=1,
                            send=1, store=1, color=1, dep_b_en=1, dep_b=0, a_base=0, a_stride=L,
                            b_base=128, b_stride=L, count=1, reps=R, lo=1, hi=4, dst_base=192)
              + desc_writes(cfg, 2, op=Op.VEC, vmode=VecMode.DOT, enable=1, send=1, store=1,
                            color=2, dep_b_en=1, dep_b=0, a_base=33, a_stride=3, b_base=128,
                            b_stride=L, count=rows, reps=R, lo=0, hi=R, dst_base=224)
              + desc_writes(cfg, 3, op=Op.VEC, vmode=VecMode.MASK, enable=1, round=1, send=1,
                            color=3, dep_b_en=1, dep_b=0, a_base=48, a_stride=L, b_base=128,
                            b_stride=L, count=1, reps=R)
              + desc_writes(cfg, 4, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, store=1,
                            color=4, dep_a_en=1, dep_a=0, a_base=128, a_stride=L, count=1,
                            reps=R, lo=0, hi=R, dst_base=240)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=5, reps=R, lo=0, hi=R,
                            dst_base=128))
    prog.step(wavelets2=[(5, w) for w in bf16_words(rng, R * L, specials=0.1)],
              reads=list(range(128, 256)) + status_reads(cfg))
    assert len(prog.model.out) == R * (3 * L + rows)
    result = run(cfg, prog, gap_prob=0.3, stall_prob=0.4)
    assert result["tx_cycles"] == replay_tx_cycles(cfg, prog, result)


def test_vec_pipelined_back_to_back():
    """Pipelined, no back-pressure: a PASS whose vectors are all ready sends (and stores) vector
    n's word j at ``t0 + n*L + j``, and so does a chain ADD whose inputs are all in: one element
    per cycle. The cost is the model's (``L`` per vector, plus the fetch and the element
    pipeline: ``models.pe.unit_cycles`` for one), VEC_CYCLES ``L`` per vector."""
    rng = np.random.default_rng(41)
    cfg = vec_cfg(lanes=4, sram_banks=4)
    L, R = 4, 6
    out = vec_out_cycles(cfg.mul_stages, cfg.add_stages)
    prog = Program(cfg)
    prog.step(writes=sram_writes(3, fp32_words(rng, R * 5))
              + desc_writes(cfg, 3, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, store=1,
                            color=3, a_base=3, a_stride=5, count=1, reps=R, lo=0, hi=R, dst_base=100))
    prog.step(wavelets2=[(1, w) for w in fp32_words(rng, R * L)],
              writes=desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=R, lo=0, hi=R,
                                 dst_base=160))
    prog.step(writes=desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.ADD, enable=1, send=1, color=2,
                                 dep_b_en=1, dep_b=0, a_base=3, a_stride=5, b_base=160,
                                 b_stride=L, count=1, reps=R),
              reads=list(range(100, 100 + R * L)) + status_reads(cfg))
    result = run(cfg, prog)
    tx = result["tx_cycles"]
    for first in (0, R * L):
        t0 = tx[first]
        assert tx[first:first + R * L] == [t0 + n * L + j for n in range(R) for j in range(L)]
    assert prog.model.vec_cycles == 2 * R * L
    assert prog.model.cycles(3) == R * L + 3 + out == unit_cycles(L, cfg.mul_stages, cfg.add_stages) + (R - 1) * L
    assert prog.model.cycles(3) == tx[R * L - 1] - tx[0] + 1 + 3 + out
    assert tx == replay_tx_cycles(cfg, prog, result)


@pytest.mark.parametrize("depth", [(HW.mul_stages, HW.add_stages), (1, 4)])
def test_vec_pipelined_dependency_to_tx_latency(depth):
    """Pipelined: a VEC waiting on a STORE of the store engine sends vector n's first word
    ``1 + models.pe.vec_done_to_tx_cycles(...)`` after the ``rx2`` transfer of the vector's last
    word (the store engine writes it in the next cycle), the others right after it."""
    rng = np.random.default_rng(42)
    cfg = vec_cfg(depth, lanes=4, sram_banks=4)
    L, R = 4, 4
    prog = Program(cfg)
    prog.step(writes=desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=2,
                                 dep_a_en=1, dep_a=0, a_base=64, a_stride=L, count=1, reps=R)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=R, lo=0, hi=R, dst_base=64))
    for _ in range(R):          # one vector per step: each VEC finds the unit idle
        prog.step(wavelets2=[(1, w) for w in fp32_words(rng, L)])
    result = run(cfg, prog)
    rx2, tx = result["rx2_cycles"], result["tx_cycles"]
    lat = 1 + vec_done_to_tx_cycles(*depth)
    assert lat == (depth[1] + 9 if any(depth) else DEP_TO_TX_CYCLES)
    assert [tx[n * L] for n in range(R)] == [rx2[n * L + L - 1] + lat for n in range(R)]
    assert all(tx[n * L + j] == tx[n * L] + j for n in range(R) for j in range(L))
    assert tx == replay_tx_cycles(cfg, prog, result)


@pytest.mark.parametrize("depth", [(HW.mul_stages, HW.add_stages), (4, 1)])
def test_vec_pipelined_dot_cost(depth):
    """Pipelined DOT: each element waits for the previous sum (``add_stages + 1`` cycles apart, the
    summation order of the spec), words follow each other every ``models.pe.dot_word_cycles``;
    the DOT's cost (``PeModel.cycles``) runs from its pick (the cycle after its B vector is
    counted, and the pick's registered readiness) to the cycle its last word goes out; VEC_CYCLES
    counts ``L`` per word."""
    rng = np.random.default_rng(43)
    cfg = vec_cfg(depth, lanes=4, sram_banks=4)
    L, R, rows = 4, 2, 3
    M, A = depth
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, 24, specials=0.1))
              + desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.DOT, enable=1, send=1, store=1,
                            color=2, dep_b_en=1, dep_b=0, a_base=1, a_stride=5, b_base=64,
                            b_stride=L, count=rows, reps=R, lo=0, hi=R, dst_base=100)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=R, lo=0, hi=R, dst_base=64))
    prog.step(wavelets2=[(1, w) for w in bf16_words(rng, R * L, specials=0.1)],
              reads=list(range(100, 100 + R * rows)) + status_reads(cfg))
    result = run(cfg, prog)
    rx2, tx = result["rx2_cycles"], result["tx_cycles"]
    word = dot_word_cycles(L, M, A)
    assert word == (L - 1) * (A + 1) + 4
    # unit 0 waits for B vector 0, unit 1 is ready by the time unit 0 ends
    assert tx == [tx[0] + k * word for k in range(R * rows)]
    pick = rx2[L - 1] + 2 + vec_pick_delay(M, A)     # its B vector counted at the end of rx2 + 1
    assert tx[0] == pick + 3 + (L - 1) * (A + 1) + vec_out_cycles(M, A, dot=True) + 1
    assert prog.model.cycles(1) == R * rows * word + vec_out_cycles(M, A, dot=True) == tx[-1] - pick
    assert prog.model.vec_cycles == R * rows * L
    assert tx == replay_tx_cycles(cfg, prog, result)


@pytest.mark.parametrize("depth", [(HW.mul_stages, HW.add_stages), (1, 1)])
def test_vec_pipelined_dot_behind_a_full_fifo(depth):
    """Pipelined DOT whose ``tx`` is held not ready until its output FIFO is full (``A + 3``
    words), then taken with random stalls: a word's elements before the last go on without a
    free entry (they emit no word), the last waits for one, so once ``tx`` moves, each next word
    leaves as soon as its entry is free. No word lost or reordered, every cycle as the
    closed-loop model replays it."""
    rng = np.random.default_rng(47)
    cfg = vec_cfg(depth, lanes=2)
    L, R, rows = 2, 2, 12
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, 40, specials=0.1))
              + desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.DOT, enable=1, send=1, color=2,
                            dep_b_en=1, dep_b=0, a_base=1, a_stride=3, b_base=64, b_stride=L,
                            count=rows, reps=R, lo=0, hi=R)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=R, lo=0, hi=R, dst_base=64))
    prog.step(wavelets2=[(1, w) for w in bf16_words(rng, R * L, specials=0.1)],
              reads=status_reads(cfg))
    assert len(prog.model.out) == R * rows > vec_fifo_depth(depth[1])
    result = run(cfg, prog, stall_prob=0.2, tx_hold=150)
    # A word waited for the hold to end: the first goes in the first cycle without a stall from
    # then on (the random stalls after the hold come from cocotb's seed, which changes per run).
    stalls = result["tx_stalls"]
    assert stalls[:150] == [1] * 150
    assert result["tx_cycles"][0] == stalls.index(0, 150)
    assert result["tx_cycles"] == replay_tx_cycles(cfg, prog, result)


def test_vec_pipelined_chain():
    """Pipelined: STORE -> STORE and PASS -> PASS chains (each VEC on the vectors of one STORE
    run): a chained VEC starts when the last word of its predecessor has gone out, and the
    pick's registered readiness sees the start (and the restarted counters) a cycle later, as
    the closed-loop model says; RTL == model."""
    rng = np.random.default_rng(46)
    cfg = vec_cfg((1, 2))
    L, R = cfg.lanes, 4
    prog = Program(cfg)
    prog.step(writes=desc_writes(cfg, 3, op=Op.VEC, vmode=VecMode.PASS, send=1, store=1, color=3,
                                 dep_a_en=1, dep_a=1, a_base=96, a_stride=L, count=1, reps=R,
                                 lo=0, hi=R, dst_base=160)
              + desc_writes(cfg, 2, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=2,
                            dep_a_en=1, dep_a=0, a_base=64, a_stride=L, count=1, reps=R, chain=1,
                            next=3)
              + desc_writes(cfg, 1, op=Op.STORE, color=1, reps=R, lo=0, hi=R, dst_base=96)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=R, lo=0, hi=R, dst_base=64,
                            chain=1, next=1))
    prog.step(wavelets2=[(1, w) for w in fp32_words(rng, 2 * R * L)],
              reads=list(range(64, 64 + 2 * R * L)) + list(range(160, 160 + R * L)) + status_reads(cfg))
    assert len(prog.model.out) == 2 * R * L and prog.model.done[3] == R
    result = run(cfg, prog, gap_prob=0.2, stall_prob=0.3)
    assert result["tx_cycles"] == replay_tx_cycles(cfg, prog, result)


def test_vec_pipelined_store_bank_conflicts():
    """Pipelined, 2 banks: a storing PASS runs on each vector the store engine writes while the
    next vectors stream in on ``rx2`` at one word per cycle, so its stores meet the store
    engine's writes to the same bank and wait; nothing is lost (RTL == model) and the waits are
    the closed-loop model's, cycle for cycle."""
    rng = np.random.default_rng(45)
    cfg = vec_cfg()
    L, R = cfg.lanes, 16
    prog = Program(cfg)
    prog.step(writes=desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, store=1,
                                 round=1, color=2, dep_a_en=1, dep_a=0, a_base=64, a_stride=L,
                                 count=1, reps=R, lo=0, hi=R, dst_base=129)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=R, lo=0, hi=R, dst_base=64))
    prog.step(wavelets2=[(1, w) for w in fp32_words(rng, R * L)],
              reads=list(range(64, 64 + R * L)) + list(range(129, 129 + R * L)) + status_reads(cfg))
    result = run(cfg, prog, stall_prob=0.1)
    tx, waits = replay_tx_cycles(cfg, prog, result, waits=True)
    assert result["tx_cycles"] == tx and waits > 0


def test_vec_pipelined_store_waits_for_configuration_writes():
    """Pipelined: a PASS storing its vectors while configuration writes to other SRAM words
    come every cycle, and tx back-pressured: every store waits for a cycle without a
    configuration write, nothing is lost or reordered (RTL == model)."""
    rng = np.random.default_rng(44)
    cfg = vec_cfg()
    L, R = cfg.lanes, 8
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, fp32_words(rng, R * L))
              + desc_writes(cfg, 1, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, store=1,
                            relu=1, color=2, a_base=0, a_stride=L, count=1, reps=R, lo=0, hi=R,
                            dst_base=100)
              + sram_writes(200, fp32_words(rng, 24)),
              reads=list(range(100, 100 + R * L)) + list(range(200, 224)) + status_reads(cfg))
    run(cfg, prog, stall_prob=0.3)


def test_chain():
    """FMAC -> FMAC on one color (new X, new destination), and VEC -> VEC sending the rows of
    each; every start comes from a chain."""
    rng = np.random.default_rng(5)
    cfg, L = TINY, TINY.lanes
    K, R = 4, 3
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, 2 * K * L))
              + desc_writes(cfg, 1, op=Op.FMAC, color=0, a_base=K * L, a_stride=L, count=K,
                            reps=R, dst_base=128)
              + desc_writes(cfg, 3, op=Op.VEC, vmode=VecMode.PASS, send=1, color=2, dep_a_en=1,
                            dep_a=1, a_base=128, a_stride=L, count=1, reps=R)
              + desc_writes(cfg, 2, op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=2,
                            dep_a_en=1, dep_a=0, a_base=96, a_stride=L, count=1, reps=R,
                            chain=1, next=3)
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=0, a_base=0, a_stride=L,
                            count=K, reps=R, dst_base=96, chain=1, next=1))
    prog.step(wavelets=[(0, w) for w in bf16_words(rng, 2 * K * R)],
              reads=list(range(96, 96 + 2 * R * L)) + status_reads(cfg))
    assert len(prog.model.out) == 2 * R * L and prog.model.done[1] == R
    run(cfg, prog, gap_prob=0.2, stall_prob=0.3)


def rows_beside_stores(cfg, rng, K, R):
    """``R`` FMAC rows of ``K`` weights on ``rx`` (color 0, rows at 64) beside ``R`` vectors of
    partial sums on ``rx2`` (STORE, color 1, at 128), each row joined with its stored vector by a
    VEC ADD sent on color 2; then the rows, the stored vectors and the status read back."""
    L = cfg.lanes
    prog = Program(cfg)
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, K * L))
              + desc_writes(cfg, 2, op=Op.VEC, vmode=VecMode.ADD, enable=1, send=1, color=2,
                            dep_a_en=1, dep_a=0, dep_b_en=1, dep_b=1, a_base=64, a_stride=L,
                            b_base=128, b_stride=L, count=1, reps=R)
              + desc_writes(cfg, 1, op=Op.STORE, enable=1, color=1, dst_base=128, reps=R, lo=0, hi=R)
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=0, a_base=0, a_stride=L,
                            count=K, reps=R, dst_base=64))
    prog.step(wavelets=[(0, w) for w in bf16_words(rng, K * R)],
              wavelets2=[(1, w) for w in fp32_words(rng, L * R)],
              reads=list(range(64, 64 + R * L)) + list(range(128, 128 + R * L)) + status_reads(cfg))
    return prog


def test_store_engine_beside_fmac():
    """Partial sums on ``rx2`` (the store engine) while weights stream on ``rx`` at line rate: the
    lanes never wait, a store whose bank the FMAC row write takes waits a cycle with
    ``rx2.ready`` low, and VEC ADD joins each row with its stored vector as the model does."""
    rng = np.random.default_rng(11)
    cfg, L = TINY, TINY.lanes
    K, R = 4, 6
    prog = rows_beside_stores(cfg, rng, K, R)
    result = run(cfg, prog, stall_prob=0.2)
    rx = result["rx_cycles"]
    assert rx == list(range(rx[0], rx[0] + K * R)), "weights were not accepted one per cycle"
    (rx2, tx), waits = replay_tx_cycles(cfg, prog, result, store_waits=True,
                                        offer2=result["rx2_cycles"][0])
    assert waits > 0, "no store met an FMAC row write (the wait is untested)"
    assert (result["rx2_cycles"], result["tx_cycles"]) == (rx2, tx)
    rx_count = result["reads"][1][2 * R * L + list(STATUS).index("RX_COUNT")]
    assert rx_count == K * R + L * R


@pytest.mark.parametrize("cfg,K,stalls", [
    (DEFAULT.replace(sram_words=256, num_colors=4, num_tasks=4), 4, False),
    (PIPE.replace(lanes=4, sram_banks=8), 4, False),
    (TINY, 1, True)], ids=["default", "pipelined", "row-every-cycle"])
def test_store_engine_keeps_rx2_flowing(cfg, K, stalls):
    """Partial sums on ``rx2`` at one word per cycle beside FMAC rows at line rate. With 4 lanes
    and 8 banks (every row write takes half the banks; pipelined: groups of 5 rows written in 5
    consecutive cycles) a word whose bank the row write takes waits in the store engine's stage 1
    while the next comes in behind it, and the two are written together once the bank is free:
    ``rx2`` never stalls although the head waited. With a row written every cycle into every bank
    (tiny, rows of one wavelet) the head waits while the rows stream and ``rx2.ready`` falls once
    two words are held. In each, every ``rx2`` transfer is in the cycle the store engine's model
    (``models.pe.StoreQueue`` in the closed-loop PE timing, the words offered one per cycle) says,
    every ``tx`` transfer (the VEC ADD after each stored vector) too, and the run is bit-exact."""
    rng = np.random.default_rng(14)
    L, R = cfg.lanes, 12
    prog = rows_beside_stores(cfg, rng, K, R)
    result = run(cfg, prog)
    rx, rx2 = result["rx_cycles"], result["rx2_cycles"]
    assert rx == list(range(rx[0], rx[0] + K * R)), "weights were not accepted one per cycle"
    (model_rx2, model_tx), waits = replay_tx_cycles(cfg, prog, result, store_waits=True,
                                                    offer2=rx2[0])
    assert waits > 0, "no store met an FMAC row write (the buffered wait is untested)"
    assert (rx2, result["tx_cycles"]) == (model_rx2, model_tx)
    if stalls:
        assert result["rx2_ready_low"] > 0
    else:
        assert rx2 == list(range(rx2[0], rx2[0] + L * R)), "partial sums were not taken one per cycle"
        assert result["rx2_ready_low"] == 0


def test_store_engine_takes_store_only():
    """A wavelet on ``rx2`` whose color only an FMAC listens on is UNBOUND (the store engine runs
    STORE descriptors only); the FMAC does not step."""
    cfg = TINY
    fault = status(cfg, "FAULT")
    prog = Program(cfg)
    prog.step(writes=desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=3, a_base=0, a_stride=2,
                                 count=2, reps=1, dst_base=64),
              wavelets2=[(3, 0x3F800000)], reads=[fault])
    assert FAULT_STATUS.unpack(prog.expected_reads[-1][0]) == {"flag": 1, "code": Fault.UNBOUND,
                                                               "index": 3}
    run(cfg, prog)


def test_store_engine_chains_and_range():
    """On ``rx2``: a STORE's last unit chains into the next STORE on the same color (its words go to
    the new destination), ``done`` counts the units; a STORE running past SRAM faults ``RANGE``
    naming it, the word is dropped and it stops. As the model."""
    rng = np.random.default_rng(12)
    cfg, S = TINY, TINY.sram_words
    fault = status(cfg, "FAULT")
    prog = Program(cfg)
    prog.step(writes=desc_writes(cfg, 1, op=Op.STORE, color=1, dst_base=200, reps=2, lo=0, hi=2)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, dst_base=100, reps=2, lo=0, hi=2,
                            chain=1, next=1),
              wavelets2=[(1, w) for w in fp32_words(rng, 8)],
              reads=list(range(100, 104)) + list(range(200, 204)) + [done_addr(cfg, 1), fault])
    assert prog.expected_reads[-1][-2:] == [2, 0]
    prog.step(writes=desc_writes(cfg, 2, op=Op.STORE, enable=1, color=2, dst_base=S - 3, reps=2,
                                 lo=0, hi=2),
              wavelets2=[(2, w) for w in fp32_words(rng, 4)],
              reads=list(range(S - 3, S)) + [done_addr(cfg, 2), fault])
    assert FAULT_STATUS.unpack(prog.expected_reads[-1][-1]) == {"flag": 1, "code": Fault.RANGE,
                                                                "index": 2}
    run(cfg, prog, gap_prob=0.3)


def test_transposed_store():
    """A STORE with ``b_stride`` set writes word ``j`` of vector ``n`` (``lo <= n < hi``) at
    ``dst_base + (n - lo) + j*b_stride``, on ``rx`` (wavelet engine) and ``rx2`` (store engine) at
    once; a word past SRAM faults ``RANGE`` though the vector's first word fits. As the model, and
    the layout checked here from the inputs."""
    rng = np.random.default_rng(13)
    cfg, L, S = preset("tiny", lanes=4, sram_banks=4), 4, TINY.sram_words
    fault = status(cfg, "FAULT")
    a, b = fp32_words(rng, 7 * L), fp32_words(rng, 3 * L)
    prog = Program(cfg)
    prog.step(writes=desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, dst_base=100, reps=7, lo=1,
                                 hi=6, b_stride=5)
              + desc_writes(cfg, 1, op=Op.STORE, enable=1, color=2, dst_base=200, reps=3, lo=0, hi=3,
                            b_stride=6),
              wavelets=[(1, w) for w in a], wavelets2=[(2, w) for w in b],
              reads=list(range(100, 120)) + list(range(200, 224)) + [done_addr(cfg, 0), done_addr(cfg, 1)])
    got = np.array(prog.expected_reads[-1][:44], dtype=np.uint32)
    want_a = np.array([a[(1 + k) * L + j] for j in range(L) for k in range(5)], dtype=np.uint32)
    assert np.array_equal(got[:20], want_a)
    t_b = got[20:44].reshape(L, 6)
    assert np.array_equal(t_b[:, :3], b.reshape(3, L).T) and not t_b[:, 3:].any()
    assert prog.expected_reads[-1][44:] == [7, 3]
    prog.step(writes=desc_writes(cfg, 2, op=Op.STORE, enable=1, color=3, dst_base=S - 3, reps=1, lo=0,
                                 hi=1, b_stride=2),
              wavelets2=[(3, w) for w in fp32_words(rng, L)], reads=list(range(S - 3, S)) + [fault])
    assert FAULT_STATUS.unpack(prog.expected_reads[-1][-1]) == {"flag": 1, "code": Fault.RANGE,
                                                                "index": 2}
    run(cfg, prog, gap_prob=0.3, stall_prob=0.2)


def test_fmac_utilization_at_line_rate():
    """Weights at one wavelet per cycle: rx never stalls, every lane does one FMAC per cycle
    (measured FMAC_CYCLES = the model's count = weights), rows back to back."""
    rng = np.random.default_rng(6)
    cfg, L = DEFAULT, DEFAULT.lanes
    K, R = 16, 8
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, K * L))
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=4, a_base=0, a_stride=L,
                            count=K, reps=R, dst_base=1024))
    prog.step(wavelets=[(4, w) for w in bf16_words(rng, K * R)],
              reads=list(range(1024, 1024 + R * L)) + status_reads(cfg))
    result = run(cfg, prog)
    rx = result["rx_cycles"]
    assert rx == list(range(rx[0], rx[0] + K * R)), "weights were not accepted one per cycle"
    fmac = result["reads"][1][R * L + list(STATUS).index("FMAC_CYCLES")]
    assert fmac == prog.model.fmac_cycles == prog.model.cycles(0) == K * R
    assert fmac * L / (L * (rx[-1] - rx[0] + 1)) == 1.0


def fmac_rows(mem, w, *, rows, count, a_base, a_stride, lanes, group=1):
    """Rows an FMAC must produce, computed here from the documented semantics: row ``n`` =
    sum over ``i`` ascending, from +0.0, of ``bf16(w[n][i]) * bf16(mem[a_base + (n mod group)*L +
    i*a_stride + 0:L])``."""
    mem = np.asarray(mem, dtype=np.uint32)
    out = []
    for n in range(rows):
        acc = np.zeros(lanes, dtype=np.float32)
        for i in range(count):
            a = a_base + (n % group) * lanes + i * a_stride
            acc = fp32_add(acc, bf16_mul(np.uint16(int(w[n][i]) >> 16),
                                         (mem[a:a + lanes] >> 16).astype(np.uint16)))
        out += list(bits(acc))
    return out


@pytest.mark.parametrize("rows,group,short", [(2 * PIPE.acc_rows + 1, 1, 0), (PIPE.acc_rows + 2, 3, 0),
                                              (PIPE.acc_rows - 2, 2, 1)])
def test_fmac_pipelined(rows, group, short):
    """Pipelined lanes (the hardware preset's stages at tiny): rows in groups of ``R = acc_rows``
    (the last takes the rest when fewer than ``2R`` are left: ``2R + 1 = R + (R + 1)``, ``R + 2``
    one group; a run of ``R - 2`` rows is one short group), the weights streamed in ``fmac_order``,
    odd base and stride, ``group`` chunks; every row equals the documented sum (ascending i from
    +0.0), RTL == model under random input gaps."""
    rng = np.random.default_rng(30 + rows)
    cfg, L, R = PIPE, PIPE.lanes, PIPE.acc_rows
    K, stride, base, dst = 5, 3, 1, 100
    mem = bf16_words(rng, 64)
    w = bf16_words(rng, rows * K).reshape(rows, K)
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, mem)
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=1, a_base=base, a_stride=stride,
                            count=K, reps=rows, dst_base=dst, group=group))
    prog.step(wavelets=[(1, w[n][i]) for n, i in fmac_order(rows, K, R)],
              reads=list(range(dst, dst + rows * L)) + status_reads(cfg))
    assert list(prog.model.mem[dst:dst + rows * L]) == fmac_rows(
        mem, w, rows=rows, count=K, a_base=base, a_stride=stride, lanes=L, group=group)
    assert prog.model.done[0] == rows and prog.model.short_groups == short
    run(cfg, prog, gap_prob=0.3)


@pytest.mark.parametrize("rows", [2 * PIPE.acc_rows + 1, 2])
def test_fmac_pipelined_line_rate_and_stalls(rows):
    """Pipelined lanes at line rate: groups of at least ``acc_rows`` rows take one wavelet per
    cycle (no stall); a run of ``g < acc_rows`` rows stalls rx ``acc_rows - g`` cycles per wavelet
    index after the first; the accept cycles span exactly ``models.pe.fmac_cycles`` and
    FMAC_CYCLES counts every wavelet."""
    rng = np.random.default_rng(7)
    cfg, L, R = PIPE, PIPE.lanes, PIPE.acc_rows
    K = 6
    prog = Program(cfg)
    w = bf16_words(rng, rows * K).reshape(rows, K)
    prog.step(writes=sram_writes(0, bf16_words(rng, K * L))
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=2, a_base=0, a_stride=L,
                            count=K, reps=rows, dst_base=64))
    prog.step(wavelets=[(2, w[n][i]) for n, i in fmac_order(rows, K, R)],
              reads=list(range(64, 64 + rows * L)) + status_reads(cfg))
    result = run(cfg, prog)
    rx = result["rx_cycles"]
    stalls = (K - 1) * max(R - rows, 0)
    assert rx[-1] - rx[0] + 1 == fmac_cycles(K, rows, R) == prog.model.cycles(0) == rows * K + stalls
    assert result["rx_ready_low"] == stalls
    fmac = result["reads"][1][rows * L + list(STATUS).index("FMAC_CYCLES")]
    assert fmac == prog.model.fmac_cycles == rows * K


def test_fmac_pipelined_drop_and_conflict():
    """Pipelined lanes: STOP in the middle of a group drops it (the rows finished before are
    kept); an FMAC of another descriptor while a group is half accumulated is ACC_CONFLICT; a
    fresh run afterwards starts from +0.0. RTL == model."""
    rng = np.random.default_rng(9)
    cfg, R = PIPE, PIPE.acc_rows
    K = 3
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, 32))
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=1, a_base=0, a_stride=2, count=K,
                            reps=2 * R + 2, dst_base=64)
              + desc_writes(cfg, 1, op=Op.FMAC, enable=1, color=2, a_base=4, a_stride=2, count=2,
                            reps=2, dst_base=160))
    prog.step(wavelets=[(1, x) for x in bf16_words(rng, R * K + 3)] + [(2, 0x3F800000)],
              reads=[status(cfg, "FAULT")])
    assert prog.model.fault == (Fault.ACC_CONFLICT, 1)
    prog.step(writes=[(status(cfg, "STOP"), 0), (status(cfg, "FAULT"), 0)]
              + desc_writes(cfg, 1, op=Op.FMAC, enable=1, color=2, a_base=4, a_stride=2, count=2,
                            reps=2, dst_base=160),
              wavelets=[(2, x) for x in bf16_words(rng, 4)],
              reads=list(range(64, 64 + (2 * R + 2) * cfg.lanes)) + list(range(160, 164)) + status_reads(cfg))
    assert prog.model.done[0] == R and prog.model.done[1] == 2
    run(cfg, prog, gap_prob=0.2)


def test_faults():
    """Each illegal descriptor raises the sticky fault naming it and stays stopped; run-time
    faults name the color / descriptor (RANGE also stops it); the first fault sticks until cleared."""
    cfg, S = TINY, TINY.sram_words
    fault, active = status(cfg, "FAULT"), status(cfg, "ACTIVE")
    clear = [[fault, 0]]
    good = dict(op=Op.FMAC, enable=1, color=1, a_base=0, a_stride=2, count=4, reps=2, dst_base=64)
    cases = [
        (Fault.COUNT, 2, dict(good, count=0)),
        (Fault.COUNT, 1, dict(op=Op.STORE, enable=1, color=0, reps=2, lo=3, hi=1)),
        (Fault.COLOR, 3, dict(good, color=cfg.num_colors)),
        (Fault.INDEX, 0, dict(good, chain=1, next=0)),
        (Fault.INDEX, 1, dict(op=Op.VEC, enable=1, send=1, count=1, reps=1, dep_a_en=1, dep_a=7)),
        (Fault.NO_ACTION, 2, dict(op=Op.VEC, enable=1, count=1, reps=1)),
    ]
    prog = Program(cfg)
    expected = []
    for code, t, fields in cases:
        prog.step(writes=clear + desc_writes(cfg, t, **fields), reads=[fault, active])
        expected.append((code, t))
    # Run time: a wavelet on an unbound color; two STOREs on one color; interleaved FMAC rows.
    prog.step(writes=clear, wavelets=[(3, 5)], reads=[fault])
    expected.append((Fault.UNBOUND, 3))
    both = dict(op=Op.STORE, enable=1, color=2, reps=1, lo=0, hi=1, dst_base=100)
    prog.step(writes=clear + desc_writes(cfg, 1, **both) + desc_writes(cfg, 2, **both),
              wavelets=[(2, 7)], reads=[fault])
    expected.append((Fault.DUP_COLOR, 1))
    prog.step(writes=clear + desc_writes(cfg, 1, op=Op.NOP) + desc_writes(cfg, 2, op=Op.NOP)
              + desc_writes(cfg, 0, **good) + desc_writes(cfg, 3, **dict(good, color=0)),
              wavelets=[(1, 0x3F800000), (0, 0x3F800000)], reads=[fault])
    expected.append((Fault.ACC_CONFLICT, 3))
    # RANGE at run time: FMAC t3's operand vector at wavelet 3 (S - 7 + 3*2 + L > S), DOT t0's
    # stored unit 3 (S - 11 + 3*3 + 3 > S; units 0..2 go out); each stops its descriptor.
    prog.step(writes=clear + desc_writes(cfg, 0, op=Op.NOP) + desc_writes(cfg, 3, **dict(good, a_base=S - 7)),
              wavelets=[(1, 0x3F800000)] * 4, reads=[fault, active])
    expected.append((Fault.RANGE, 3))
    prog.step(writes=clear + desc_writes(cfg, 3, op=Op.NOP)
              + desc_writes(cfg, 0, op=Op.VEC, vmode=VecMode.DOT, enable=1, send=1, store=1, count=3,
                            reps=4, lo=0, hi=4, dst_base=S - 11), reads=[fault, active])
    expected.append((Fault.RANGE, 0))
    assert len(prog.model.out) == 3 * 3
    # Sticky: a second fault does not replace the first.
    prog.step(writes=clear + desc_writes(cfg, 2, **dict(good, count=0))
              + desc_writes(cfg, 1, **dict(good, color=9)), reads=[fault])
    expected.append((Fault.COUNT, 2))
    for (code, t), reads in zip(expected, prog.expected_reads):
        assert reads[0] == FAULT_STATUS.pack(flag=1, code=code, index=t), f"model fault for {code.name}"
        if len(reads) > 1:
            assert not (reads[1] >> t) & 1, f"{code.name}: the illegal descriptor was started"
    # A chain into an illegal descriptor does not start it (its commit already faulted).
    prog.step(writes=clear + desc_writes(cfg, 1, **dict(good, count=0)) + clear
              + desc_writes(cfg, 3, op=Op.NOP)
              + desc_writes(cfg, 0, **dict(good, reps=1, chain=1, next=1)),
              wavelets=[(1, 0x3F800000)] * 4, reads=[fault, active, done_addr(cfg, 0)])
    assert prog.expected_reads[-1] == [0, 0, 1]
    run(cfg, prog)


def test_core_needs_two_banks():
    with pytest.raises(ConfigError, match="sram_banks >= 2"):
        PeCore(preset("tiny", lanes=1, sram_banks=1))


def test_lanes_must_fit_banks():
    with pytest.raises(ConfigError, match="lanes <= sram_banks"):
        PeCore(TINY.replace(lanes=4))


@pytest.mark.parametrize("lanes,banks", [(1, 2), (3, 4)])
def test_mixed_program(lanes, banks):
    """Weights and psums interleaved at random on one rx stream: FMAC rows and received vectors
    meet in the ADD join in either order, while a DOT shares the vector unit; odd lane counts, a
    single lane (the smallest SRAM: 2 banks)."""
    cfg = preset("tiny", lanes=lanes, sram_banks=banks)
    L = lanes
    rng = np.random.default_rng(20 + lanes)
    K, R = 5, 4
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, bf16_words(rng, 64))
              + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=1, a_base=3, a_stride=L + 1,
                            count=K, reps=R, dst_base=100)
              + desc_writes(cfg, 1, op=Op.STORE, enable=1, color=2, reps=R, lo=0, hi=R,
                            dst_base=140)
              + desc_writes(cfg, 2, op=Op.VEC, vmode=VecMode.ADD, enable=1, relu=1, round=1,
                            send=1, store=1, color=3, dep_a_en=1, dep_a=0, dep_b_en=1, dep_b=1,
                            a_base=100, a_stride=L, b_base=140, b_stride=L, count=1, reps=R,
                            lo=1, hi=R, dst_base=180)
              + desc_writes(cfg, 3, op=Op.VEC, vmode=VecMode.DOT, enable=1, send=1, color=0,
                            dep_b_en=1, dep_b=1, a_base=1, a_stride=L, b_base=140, b_stride=L,
                            count=3, reps=R))
    weights = [(1, w) for w in bf16_words(rng, K * R)]
    psums = [(2, w) for w in fp32_words(rng, R * L)]
    mixed = []
    while weights or psums:
        src = weights if weights and (not psums or rng.random() < 0.6) else psums
        mixed.append(src.pop(0))
    prog.step(wavelets=mixed, reads=list(range(100, 210)) + status_reads(cfg))
    assert len(prog.model.out) == R * L + 3 * R
    run(cfg, prog, gap_prob=0.3, stall_prob=0.5)


def test_backward_data_kernel():
    """Backward-data on one PE with the existing ops: dZ stored from the fabric, W streamed
    transposed into FMAC (dX[k] from +0.0, m ascending), ReLU mask of the stored X and bf16 on
    the vector unit: equal to models.pipeline.kernels.backward_data."""
    from models.pipeline import kernels
    rng = np.random.default_rng(9)
    cfg, L = TINY, TINY.lanes
    M, K = 6, 5
    w16 = bf16_bits(rng.standard_normal((M, K)).astype(np.float32))
    dz16 = bf16_bits(rng.standard_normal((M, L)).astype(np.float32))
    x16 = bf16_bits(rng.standard_normal((K, L)).astype(np.float32))
    x16[rng.random((K, L)) < 0.3] = 0
    prog = Program(cfg)
    prog.step(writes=sram_writes(0, x16.astype(np.uint32).ravel() << 16)
              + desc_writes(cfg, 2, op=Op.VEC, vmode=VecMode.MASK, enable=1, round=1, store=1,
                            dep_b_en=1, dep_b=1, a_base=0, a_stride=L, b_base=128, b_stride=L,
                            count=1, reps=K, lo=0, hi=K, dst_base=192)
              + desc_writes(cfg, 1, op=Op.FMAC, enable=1, color=0, a_base=64, a_stride=L,
                            count=M, reps=K, dst_base=128)
              + desc_writes(cfg, 0, op=Op.STORE, enable=1, color=1, reps=M, lo=0, hi=M,
                            dst_base=64))
    prog.step(wavelets=[(1, int(v) << 16) for v in dz16.ravel()]
              + [(0, int(v) << 16) for v in w16.T.ravel()],
              reads=list(range(192, 192 + K * L)) + status_reads(cfg))
    want = list((kernels.backward_data(w16, dz16, x16).astype(np.uint32) << 16).ravel())
    assert prog.expected_reads[1][:K * L] == want
    run(cfg, prog, gap_prob=0.3)


# ---- functional coverage: operation x fault x chaining (sim/benches/pe_coverage.py) ----------

def test_pe_coverage_bins():
    """The bins a program notes: each finished run once (standalone, chain head, chained run),
    the sticky fault only, on the descriptor it names; UNBOUND on a never-bound color apart."""
    from sim.benches.pe_coverage import CoveredPeModel, pe_coverage, unreachable_reason
    cfg, L = TINY, TINY.lanes
    fault = status(cfg, "FAULT")
    prog = Program(cfg, model=CoveredPeModel)
    fmac = dict(op=Op.FMAC, enable=1, a_base=0, a_stride=L, count=2, reps=1, dst_base=64)
    prog.step(writes=desc_writes(cfg, 2, **dict(fmac, color=2, enable=0, dst_base=80))
              + desc_writes(cfg, 1, **dict(fmac, color=1, chain=1, next=2))
              + desc_writes(cfg, 0, **dict(fmac, color=0)),
              wavelets=[(0, 0x3F800000)] * 2 + [(1, 0x3F800000)] * 2 + [(2, 0x3F800000)] * 2)
    prog.step(wavelets=[(3, 1)])                                    # nothing bound to color 3
    prog.step(writes=[[fault, 0]], wavelets=[(2, 1)])               # after the chained run of 2
    prog.step(writes=[[fault, 0]] + desc_writes(cfg, 3, op=Op.VEC, vmode=VecMode.DOT, send=1, count=0, reps=1)
              + desc_writes(cfg, 3, op=Op.STORE, reps=0, chain=1, next=0))   # sticky: the DOT's COUNT only
    assert prog.model.bins == [
        {"op": "FMAC", "fault": "none", "chaining": "standalone"},
        {"op": "FMAC", "fault": "none", "chaining": "chains-out"},
        {"op": "FMAC", "fault": "none", "chaining": "chained-into"},
        {"op": "FMAC", "fault": "UNBOUND", "chaining": "chained-into"},
        {"op": "VEC DOT", "fault": "COUNT", "chaining": "standalone"},
    ]
    assert prog.model.unattributed == 1
    cov = pe_coverage()
    cov.hit_many(prog.model.bins)
    r = cov.report()
    assert (r["bins"], r["reachable"], r["hit"]) == (7 * 9 * 3, 105, 5)
    assert unreachable_reason({"op": "STORE", "fault": "ACC_CONFLICT", "chaining": "standalone"})
    cov.hit(op="VEC ADD", fault="UNBOUND", chaining="standalone")
    with pytest.raises(AssertionError, match="unreachable were hit"):
        cov.report()
    run(cfg, prog)


def test_pe_coverage_directed_programs_fill_every_reachable_bin():
    from sim.benches.pe_coverage import directed_programs, fill, pe_coverage
    r = fill(pe_coverage(), [p for _, p in directed_programs(TINY)]).report()
    assert r["empty_reachable"] == [] and r["hit"] == r["reachable"] == 105


@pytest.mark.parametrize("part", range(3))
def test_pe_coverage_directed_programs_on_rtl(part):
    """The directed coverage programs (runs, commit faults, run-time faults) on the RTL == model."""
    from sim.benches.pe_coverage import directed_programs
    _, prog = directed_programs(TINY)[part]
    run(TINY, prog, gap_prob=0.2, stall_prob=0.3)


@pytest.mark.parametrize("part", range(3))
def test_pe_coverage_directed_programs_on_pipelined_rtl(part):
    """The same programs at the hardware preset's stages (every operation, commit and run-time
    fault, RANGE of each VEC access, chaining): RTL == model."""
    from sim.benches.pe_coverage import directed_programs
    cfg = vec_cfg()
    _, prog = directed_programs(cfg)[part]
    run(cfg, prog, gap_prob=0.2, stall_prob=0.3)


@pytest.mark.slow
def test_pe_core_bench_same_under_icarus_and_verilator(icarus):
    """FMAC, groups and the pipelined vector unit under both simulators: the same outputs at
    every cycle (sim.kit.trace)."""
    with compare_simulators():
        test_fmac()
        test_groups()
        test_vec_pipelined_chain()
