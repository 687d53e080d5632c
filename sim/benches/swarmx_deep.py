"""Reduced cocotb bench for deep SwarmX trees (depth 3: N = 17..64, depth 4: N = 65..256).

The per-cycle lock-step bench (``sim/benches/swarmx.py``) costs Python work per stream per cycle,
which is too slow for 20 or 192 leaves. Here the tree sits in the memory-backed harness of
``sim.harness.swarmx_system`` (players and recorders with cycle stamps): Python loads a burst,
pulses ``start``, waits for ``done`` and reads the recorders back, so the simulator runs each
phase alone. Checked, per phase:

* broadcast: every leaf receives exactly the broadcast stream, in order; at full rate the first
  word reaches each leaf ``depth`` cycles after it left the player (``SwarmxTiming``) and words
  arrive on consecutive cycles;
* reduce: the root receives ``models.swarmx.reduce_bits`` (the tree order, bit for bit) and the
  ``last`` flags of ``reduce_last``; at full rate the first sum leaves ``depth * (2 L + 3)`` cycles
  after the last leaf's first word entered, and one sum per cycle;
* with random stalls at every player and recorder (LFSR thresholds) the same contents, no word
  lost or duplicated, no ``error``.

Parameters (``sim.kit.params()``): ``leaves``, ``words`` (per phase), ``adder_latency``,
``stall`` (LFSR threshold 0..255 of the stalled run). Writes ``stats.json`` (latencies and rates)
and ``coverage.json`` (hits of the SwarmX bins leaf x direction x last x back-pressure).
"""

import json
from pathlib import Path

import cocotb
import numpy as np

from arch.wavelet import TAGGED_BITS, pack_tagged, unpack_tagged
from models.swarmx import SwarmxTiming, reduce_bits, reduce_last
from sim.benches.swarmx import random_fp32, vector_lasts
from sim.kit import params
from sim.kit.clocking import reset
from sim.kit.player_memory import load_words, read_words
from sim.kit.swarmx_phase import run_swarmx_phase


async def _broadcast(dut, n, words, stall, rng):
    stream = rng.integers(0, 1 << TAGGED_BITS, words, dtype=np.uint64)
    load_words(dut.bcast_player.mem, stream)
    await run_swarmx_phase(dut, words, 0, 40 * words + 1000, stall=stall)
    first_in = int(dut.bcast_player.first_stamp.value)
    stamps = []
    for i in range(n):
        rec = getattr(dut, f"leaf_rec{i}")
        got = read_words(rec.mem, words)
        assert got.tolist() == stream.tolist(), f"leaf {i}: broadcast words differ or out of order"
        stamps.append(read_words(rec.stamps, words).astype(np.int64))
    return first_in, np.array(stamps), stream


async def _reduce(dut, n, words, stall, rng):
    data = random_fp32(rng, n, words)
    lasts = vector_lasts(rng, words)
    for i in range(n):
        load_words(getattr(dut, f"reduce_player{i}").mem, pack_tagged(data[i].astype(np.uint64), lasts))
    await run_swarmx_phase(dut, 0, words, 60 * words + 2000, stall=stall)
    got = read_words(dut.root_rec.mem, words)
    got_data, got_last = unpack_tagged(got)
    want = reduce_bits(data)
    want_last, _ = reduce_last(np.array([lasts] * n))
    assert got_data.astype(np.uint32).tolist() == want.tolist(), "root sum differs from the tree order"
    assert got_last.astype(bool).tolist() == want_last.tolist(), "root last flags differ"
    first_in = max(int(getattr(dut, f"reduce_player{i}").first_stamp.value) for i in range(n))
    return first_in, read_words(dut.root_rec.stamps, words).astype(np.int64), lasts


@cocotb.test()
async def deep_tree(dut):
    """Full rate (latency and rate against ``SwarmxTiming``), then random stalls everywhere."""
    p = params()
    n, words, lat = p["leaves"], p["words"], p["adder_latency"]
    timing = SwarmxTiming(n, lat)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    await reset(dut)

    b_first, b_stamps, b_words = await _broadcast(dut, n, words, 0, rng)
    b_lat = sorted({int(s[0]) - b_first for s in b_stamps})
    assert b_lat == [timing.broadcast_latency], f"broadcast latency {b_lat}, model {timing.broadcast_latency}"
    assert all(np.all(np.diff(s) == 1) for s in b_stamps), "broadcast not one word per cycle"

    r_first, r_stamps, r_lasts = await _reduce(dut, n, words, 0, rng)
    r_lat = int(r_stamps[0]) - r_first
    assert r_lat == timing.reduce_latency, f"reduce latency {r_lat}, model {timing.reduce_latency}"
    assert np.all(np.diff(r_stamps) == 1), "reduce not one word per cycle"

    stall = p.get("stall", 96)
    _, sb_stamps, sb_words = await _broadcast(dut, n, words, stall, rng)
    _, sr_stamps, s_lasts = await _reduce(dut, n, words, stall, rng)

    Path("stats.json").write_text(json.dumps({
        "leaves": n, "depth": timing.depth, "words": words,
        "broadcast_latency": b_lat[0], "broadcast_latency_model": timing.broadcast_latency,
        "reduce_latency": r_lat, "reduce_latency_model": timing.reduce_latency,
        "broadcast_words_per_cycle": words / int(b_stamps[0][-1] - b_stamps[0][0] + 1),
        "reduce_words_per_cycle": words / int(r_stamps[-1] - r_stamps[0] + 1),
        "stalled_broadcast_cycles": int(sb_stamps.max()), "stalled_reduce_cycles": int(sr_stamps[-1]),
    }))
    # Coverage (sim.kit.coverage bins of bench/swarmx.py): per leaf and direction, words with and
    # without ``last``, in the full-rate phase ("free") and the phase with random stalls at every
    # player and recorder ("stalled"). Broadcast ``last`` is bit 32 of the word each leaf received.
    hits = []
    for bp, stream, lasts in (("free", b_words, r_lasts), ("stalled", sb_words, s_lasts)):
        b_last = (np.asarray(stream, dtype=np.uint64) >> 32).astype(bool)
        for i in range(n):
            for d, flags in (("bcast", b_last), ("reduce", lasts)):
                for last in (False, True):
                    k = int(np.sum(flags == last))
                    if k:
                        hits.append({"leaf": i, "dir": d, "last": last, "backpressure": bp, "count": k})
    Path("coverage.json").write_text(json.dumps({"leaves": n, "hits": hits}))
