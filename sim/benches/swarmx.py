"""cocotb bench for the SwarmX tree (top ``swarmx``) and a split node (two 1:2 units).

Every test runs the DUT in lock step with the cycle model (``models.swarmx``): each cycle the
bench decides valid gaps and back-pressure, drives them, and compares every handshake output
(``ready`` of each input, ``valid``/``payload`` of each output, ``error``) with the model, so
latency, throughput and buffering are checked cycle for cycle. Numbers are checked bit for bit
against the golden tree order (``models.swarmx.reduce_bits``), independently of the cycle model.

Parameters (``sim.kit.params()``): ``leaves``, ``split`` (0/1), ``fifo_depth``, ``adder_latency``,
``words`` (random test), ``full_words`` (full-rate test).
"""

import json
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from arch.wavelet import TAGGED_BITS, pack_tagged, unpack_tagged
from models.swarmx import NodeCycleModel, SwarmxTiming, TreeCycleModel, node_reduce_latency, reduce_bits, reduce_last
from sim.kit import params
from sim.kit.clocking import reset

SPECIALS = np.array([
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FA00001, 0xFFC12345,
    0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
    0x3F800000, 0xBF800000, 0x33800000, 0xB3800000,
], dtype=np.uint32)


def _setup():
    p = params()
    split = bool(p.get("split", 0))
    n = p["leaves"]
    depth, lat = p["fifo_depth"], p["adder_latency"]
    if split:
        model = NodeCycleModel(n, fifo_depth=depth, adder_latency=lat, split=True)
    else:
        model = TreeCycleModel(n, fifo_depth=depth, adder_latency=lat)
    return p, split, n, model


def random_fp32(rng, n, words):
    """``(n, words)`` fp32 bit patterns: mostly normal values of mixed magnitude (with exact
    cancellations), some special values (NaNs with payloads, infinities, zeros, subnormals,
    extremes) and some random bit patterns."""
    mag = rng.standard_normal((n, words)) * np.exp2(rng.integers(-8, 9, (n, words)))
    out = mag.astype(np.float32).view(np.uint32).copy()
    if n > 1:                                    # leaf 1 cancels leaf 0 now and then
        cancel = rng.random(words) < 0.05
        out[1, cancel] = out[0, cancel] ^ 0x80000000
    rare = min(0.2, 0.5 / n)
    pick = rng.random((n, words))
    special = pick < rare
    out[special] = SPECIALS[rng.integers(0, len(SPECIALS), special.sum())]
    randbits = (pick >= rare) & (pick < 2 * rare)
    out[randbits] = rng.integers(0, 1 << 32, randbits.sum(), dtype=np.uint64).astype(np.uint32)
    return out


def vector_lasts(rng, words):
    """``last`` flags framing ``words`` words into vectors of random length (last word last)."""
    last = np.zeros(words, dtype=bool)
    k = 0
    while k < words:
        k += int(rng.integers(1, 12))
        last[min(k, words) - 1] = True
    return last


class Lockstep:
    """Drives the DUT's streams and compares it with the cycle model every cycle."""

    def __init__(self, dut, model, split, n):
        self.dut, self.model, self.n = dut, model, n
        self.groups = model.groups
        P = len(self.groups)

        def port(prefix):
            return (getattr(dut, f"{prefix}__valid"), getattr(dut, f"{prefix}__ready"),
                    getattr(dut, f"{prefix}__payload"))
        self.bin = [port(f"bcast_in__{p}" if split else "bcast_in") for p in range(P)]
        self.rout = [port(f"reduce_out__{p}" if split else "reduce_out") for p in range(P)]
        self.bout = [port(f"bcast_out__{c}") for c in range(n)]
        self.rin = [port(f"reduce_in__{c}") for c in range(n)]
        for v, _, _ in self.bin + self.rin:
            v.value = 0
        for _, r, _ in self.bout + self.rout:
            r.value = 0
        self.cycle = 0

    async def run(self, bcast_words, reduce_words, reduce_last_flags, *, bcast_gap, reduce_gap,
                  child_stall, root_stall, rng, max_cycles=200000):
        """``bcast_words[p]``: 33-bit payloads per parent; ``reduce_words[c]`` (uint32) and
        ``reduce_last_flags[c]`` per child. ``*_gap``/``*_stall``: probability per port (lists).
        Returns a record of transfers and their cycles."""
        dut, model, n = self.dut, self.model, self.n
        P = len(self.groups)
        golden = [reduce_bits(np.asarray([reduce_words[c] for c in g])) for g in self.groups]
        rec = {
            "bin": [[] for _ in range(P)], "bout": [[] for _ in range(n)],
            "rin": [[] for _ in range(n)], "rout": [[] for _ in range(P)],
            "bout_words": [[] for _ in range(n)], "rout_words": [[] for _ in range(P)],
            "error": [],
        }
        b_next, r_next = [0] * P, [0] * n
        b_offer, r_offer = [False] * P, [False] * n
        expect_out = [len(bcast_words[p]) for p in range(P)]
        expect_rout = [len(reduce_words[g[0]]) for g in self.groups]
        for cycle in range(max_cycles):
            await FallingEdge(dut.clk)
            # Stimulus for this cycle (valid held until the transfer, per stream rules).
            for p in range(P):
                if not b_offer[p] and b_next[p] < len(bcast_words[p]) and rng.random() >= bcast_gap[p]:
                    b_offer[p] = True
                    self.bin[p][2].value = int(bcast_words[p][b_next[p]])
                self.bin[p][0].value = int(b_offer[p])
            for c in range(n):
                if not r_offer[c] and r_next[c] < len(reduce_words[c]) and rng.random() >= reduce_gap[c]:
                    r_offer[c] = True
                    k = r_next[c]
                    self.rin[c][2].value = pack_tagged(int(reduce_words[c][k]), int(reduce_last_flags[c][k]))
                self.rin[c][0].value = int(r_offer[c])
            bout_ready = [rng.random() >= child_stall[c] for c in range(n)]
            rout_ready = [rng.random() >= root_stall for _ in range(P)]
            for c in range(n):
                self.bout[c][1].value = int(bout_ready[c])
            for p in range(P):
                self.rout[p][1].value = int(rout_ready[p])

            # Outputs (functions of registered state) against the model.
            m_bin_ready, m_bout, m_rin_ready, m_rout = model.outputs()
            where = f"cycle {cycle}"
            for p in range(P):
                got = int(self.bin[p][1].value)
                assert got == int(m_bin_ready[p]), f"{where}: bcast_in[{p}].ready {got}, model {m_bin_ready[p]}"
            for c in range(n):
                got = int(self.rin[c][1].value)
                assert got == int(m_rin_ready[c]), f"{where}: reduce_in[{c}].ready {got}, model {m_rin_ready[c]}"
            b_taken = [False] * n
            for c in range(n):
                valid = int(self.bout[c][0].value)
                assert valid == int(m_bout[c] is not None), f"{where}: bcast_out[{c}].valid {valid}, model {m_bout[c]}"
                if valid:
                    word = int(self.bout[c][2].value)
                    assert word == m_bout[c], f"{where}: bcast_out[{c}] {word:#x}, model {m_bout[c]:#x}"
                    if bout_ready[c]:
                        b_taken[c] = True
                        rec["bout"][c].append(cycle)
                        rec["bout_words"][c].append(word)
            r_taken = [False] * P
            for p in range(P):
                valid = int(self.rout[p][0].value)
                assert valid == int(m_rout[p] is not None), f"{where}: reduce_out[{p}].valid {valid}, model {m_rout[p]}"
                if valid:
                    word = int(self.rout[p][2].value)
                    k, last = m_rout[p]
                    want = pack_tagged(int(golden[p][k]), int(last))
                    assert word == want, (f"{where}: reduce_out[{p}] word {k}: {word:#011x}, "
                                          f"golden {want:#011x}")
                    if rout_ready[p]:
                        r_taken[p] = True
                        rec["rout"][p].append(cycle)
                        rec["rout_words"][p].append(word)
            err = int(dut.error.value)
            assert err == int(model.error), f"{where}: error {err}, model {model.error}"
            rec["error"].append(err)

            # Transfers at the coming edge.
            b_in = [None] * P
            for p in range(P):
                if b_offer[p] and m_bin_ready[p]:
                    b_in[p] = int(bcast_words[p][b_next[p]])
                    rec["bin"][p].append(cycle)
                    b_next[p] += 1
                    b_offer[p] = False
            r_in = [None] * n
            for c in range(n):
                if r_offer[c] and m_rin_ready[c]:
                    k = r_next[c]
                    r_in[c] = (k, bool(reduce_last_flags[c][k]))
                    rec["rin"][c].append(cycle)
                    r_next[c] += 1
                    r_offer[c] = False
            model.update(b_in, b_taken, r_in, r_taken)
            done_b = all(len(rec["bout"][c]) == expect_out[p] for p, g in enumerate(self.groups) for c in g)
            done_r = all(len(rec["rout"][p]) == expect_rout[p] for p in range(P))
            if done_b and done_r:
                break
        else:
            raise AssertionError(f"not finished after {max_cycles} cycles")
        # Everything delivered, in order, bit for bit (independently of the cycle model).
        for p, g in enumerate(self.groups):
            for c in g:
                assert rec["bout_words"][c] == [int(w) for w in bcast_words[p]], f"bcast_out[{c}] content"
            data, lasts = unpack_tagged(np.asarray(rec["rout_words"][p], dtype=np.uint64))
            assert data.astype(np.uint32).tolist() == golden[p].tolist(), \
                f"reduce_out[{p}] numbers differ from the tree order"
            last, _ = reduce_last(np.asarray([reduce_last_flags[c] for c in g]))
            assert lasts.astype(bool).tolist() == last.tolist(), f"reduce_out[{p}] last flags"
        return rec


def _stimulus(rng, groups, n, words):
    bcast = [[int(x) for x in rng.integers(0, 1 << TAGGED_BITS, words, dtype=np.uint64)] for _ in groups]
    data = random_fp32(rng, n, words)
    lasts = []
    for g in groups:
        framing = vector_lasts(rng, words)
        lasts += [framing] * len(g)
    return bcast, data, lasts


@cocotb.test()
async def random_traffic(dut):
    """Random gaps per input, unequal random back-pressure per child, back-pressure at the root:
    cycle-exact against the model, numbers bit-exact, every child gets every word in order."""
    p, split, n, model = _setup()
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    await reset(dut)
    h = Lockstep(dut, model, split, n)
    groups = model.groups
    bcast, data, lasts = _stimulus(rng, groups, n, p.get("words", 300))
    await h.run(bcast, data, lasts, rng=rng,
                bcast_gap=[0.2] * len(groups), reduce_gap=list(rng.uniform(0.0, 0.6, n)),
                child_stall=list(rng.uniform(0.0, 0.7, n)), root_stall=0.3)
    assert not model.error


@cocotb.test()
async def root_backpressure(dut):
    """Fast inputs, a mostly stalled root and mostly stalled children: the reduce units run
    into their credit limit and the broadcast FIFOs fill; still cycle-exact and lossless."""
    p, split, n, model = _setup()
    rng = np.random.default_rng(cocotb.RANDOM_SEED + 3)
    await reset(dut)
    h = Lockstep(dut, model, split, n)
    groups = model.groups
    bcast, data, lasts = _stimulus(rng, groups, n, max(40, p.get("words", 300) // 4))
    await h.run(bcast, data, lasts, rng=rng, bcast_gap=[0.0] * len(groups),
                reduce_gap=[0.05] * n, child_stall=list(rng.uniform(0.6, 0.9, n)), root_stall=0.8)
    assert model.credit_stalls > 0, "the root never stalled the adders: the test missed its point"
    assert not model.error


@cocotb.test()
async def full_rate(dut):
    """No gaps, no back-pressure: one word per cycle in both directions at once, latencies equal
    to the model's formulas (``SwarmxTiming`` / ``node_reduce_latency``)."""
    p, split, n, model = _setup()
    rng = np.random.default_rng(cocotb.RANDOM_SEED + 1)
    words = p.get("full_words", 64)
    lat = p["adder_latency"]
    if split:
        b_lat, r_lat = 1, node_reduce_latency(lat, split=True)
    else:
        timing = SwarmxTiming(n, lat)
        b_lat, r_lat = timing.broadcast_latency, timing.reduce_latency
    await reset(dut)
    h = Lockstep(dut, model, split, n)
    groups = model.groups
    bcast, data, lasts = _stimulus(rng, groups, n, words)
    zeros = [0.0] * n
    rec = await h.run(bcast, data, lasts, rng=rng, bcast_gap=[0.0] * len(groups), reduce_gap=zeros,
                      child_stall=zeros, root_stall=0.0)
    for q, g in enumerate(groups):
        b_in = rec["bin"][q]
        assert b_in == list(range(b_in[0], b_in[0] + words)), "broadcast input was stalled"
        for c in g:
            assert rec["bout"][c] == [t + b_lat for t in b_in], f"bcast_out[{c}] latency/rate"
        start = max(rec["rin"][c][0] for c in g)
        for c in g:
            assert rec["rin"][c] == list(range(rec["rin"][c][0], rec["rin"][c][0] + words)), \
                f"reduce_in[{c}] was stalled"
        assert rec["rout"][q] == [start + r_lat + k for k in range(words)], "reduce latency/rate"
    span_b = rec["bout"][0][-1] - rec["bin"][0][0] + 1
    span_r = rec["rout"][0][-1] - rec["rin"][0][0] + 1
    Path("stats.json").write_text(json.dumps({
        "leaves": n, "words": words,
        "broadcast_latency": rec["bout"][0][0] - rec["bin"][0][0],
        "reduce_latency": rec["rout"][0][0] - rec["rin"][0][0],
        "broadcast_words_per_cycle": words / (rec["bout"][0][-1] - rec["bout"][0][0] + 1),
        "reduce_words_per_cycle": words / (rec["rout"][0][-1] - rec["rout"][0][0] + 1),
        "broadcast_span": span_b, "reduce_span": span_r,
    }))


@cocotb.test()
async def last_mismatch(dut):
    """Children whose ``last`` flags disagree raise the sticky error exactly when the model
    says (the word passing the join), and it stays up; the data still flows."""
    p, split, n, model = _setup()
    if n < 2:
        return
    rng = np.random.default_rng(cocotb.RANDOM_SEED + 2)
    words = 40
    await reset(dut)
    h = Lockstep(dut, model, split, n)
    groups = model.groups
    bcast, data, lasts = _stimulus(rng, groups, n, words)
    bad_leaf = groups[-1][-1]
    at = 17
    lasts = [l.copy() for l in lasts]
    lasts[bad_leaf][at] = not lasts[bad_leaf][at]
    _, first = reduce_last(np.asarray([lasts[c] for c in groups[-1]]))
    assert first == at
    rec = await h.run(bcast, data, lasts, rng=rng, bcast_gap=[0.0] * len(groups),
                      reduce_gap=[0.2] * n, child_stall=[0.0] * n, root_stall=0.2)
    rise = rec["error"].index(1)
    assert all(rec["error"][rise:]), "error flag is not sticky"
    assert rec["rout"][-1][at] >= rise, "error rose after the mismatching word left the tree"
    assert model.error
