"""SwarmX: words per cycle and latency against N (RTL: up to 16 under the cocotb lock-step bench,
20 and 192, depth 3 and 4, in the memory-backed harness; model up to 192), the time to reduce a
gradient through the tree against a ring all-reduce, and the coverage of the deep-tree runs."""

import json

from hdl.fp.fp32_add import Fp32Add
from hdl.swarmx import SwarmxTree
from models.swarmx import SwarmxTiming, tree_vs_ring
from sim.harness.swarmx_system import SwarmxSystemHarness
from sim.kit.coverage import Coverage
from sim.kit.runner import run_bench

RTL_LEAVES = (1, 2, 4, 7, 16)
DEEP_LEAVES = ((20, 48), (192, 24))     # depth 3 and 4 (leaves, words) in the memory-backed harness
MODEL_LEAVES = (1, 2, 4, 7, 16, 17, 32, 64, 65, 128, 192)
RING_SHOWN = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192)
SMALL, LARGE = 4096, 1 << 20          # words: a small layer, a 4 MB gradient


def _rtl_row(n, words):
    test_dir = run_bench(SwarmxTree(n), "swarmx", "sim.benches.swarmx",
                         params={"leaves": n, "fifo_depth": 4, "adder_latency": Fp32Add.LATENCY,
                                 "full_words": words},
                         testcase="full_rate", run_name=f"bench-full-{n}")
    s = json.loads((test_dir / "stats.json").read_text())
    t = SwarmxTiming(n, Fp32Add.LATENCY)
    return [n, t.depth, words, s["broadcast_latency"], t.broadcast_latency, s["reduce_latency"],
            t.reduce_latency, round(s["broadcast_words_per_cycle"], 4),
            round(s["reduce_words_per_cycle"], 4)]


def _deep(n, words):
    """The reduced deep-tree bench (sim/benches/swarmx_deep.py): a table row and its coverage."""
    test_dir = run_bench(SwarmxSystemHarness(n, words), "swarmx_deep", "sim.benches.swarmx_deep",
                         params={"leaves": n, "words": words, "adder_latency": Fp32Add.LATENCY, "stall": 96},
                         run_name=f"bench-deep-{n}")
    s = json.loads((test_dir / "stats.json").read_text())
    row = [n, s["depth"], words, s["broadcast_latency"], s["broadcast_latency_model"], s["reduce_latency"],
           s["reduce_latency_model"], round(s["broadcast_words_per_cycle"], 4), round(s["reduce_words_per_cycle"], 4)]
    hits = json.loads((test_dir / "coverage.json").read_text())["hits"]
    cov = Coverage(f"SwarmX tree N = {n}",
                   {"leaf": list(range(n)), "dir": ["bcast", "reduce"], "last": [False, True],
                    "backpressure": ["free", "stalled"]},
                   note="stalled = the phase with random stalls at every player and recorder")
    for h in hits:
        cov.hit(h["count"], leaf=h["leaf"], dir=h["dir"], last=h["last"], backpressure=h["backpressure"])
    return row, cov.report()


def run():
    L = Fp32Add.LATENCY
    rtl = [_rtl_row(n, 1000 if n < 16 else 500) for n in RTL_LEAVES]
    deep = [_deep(n, words) for n, words in DEEP_LEAVES]
    rtl += [row for row, _ in deep]
    model = []
    for n in MODEL_LEAVES:
        t = SwarmxTiming(n, L)
        model.append([n, t.depth, t.broadcast_latency, t.reduce_latency, t.WORDS_PER_CYCLE,
                      t.reduce_cycles(SMALL), t.reduce_cycles(LARGE)])
    small = {r[0]: r for r in tree_vs_ring(range(1, 193), SMALL, L)}
    large = {r[0]: r for r in tree_vs_ring(range(1, 193), LARGE, L)}
    ring_rows = [[n, small[n][1], small[n][2], small[n][3], round(small[n][4], 3),
                  large[n][2], large[n][3], round(large[n][4], 3), round(large[n][6] / LARGE, 3)]
                 for n in RING_SHOWN]
    return {
        "adder_latency": L,
        "tables": [
            {"title": f"SwarmX RTL, no gaps or back-pressure (Fp32Add.LATENCY = {L}); N = 20, 192: "
                      "memory-backed harness",
             "columns": ["N", "depth", "words", "bc lat", "model", "red lat", "model",
                         "bc w/c", "red w/c"],
             "rows": rtl},
            {"title": "SwarmX model: latency and rate against N",
             "columns": ["N", "depth", "bcast lat", "reduce lat", "w/cycle",
                         "cycles S=4K", "cycles S=1M"],
             "rows": model},
            {"title": "cycles to reduce S words: tree (to MemoryX) vs ring all-reduce "
                      f"(1 word/cycle/link, ring hop {L + 2} cycles)",
             "columns": ["N", "depth", "tree 4K", "ring 4K", "ratio", "tree 1M", "ring 1M",
                         "ratio", "ring link/S"],
             "rows": ring_rows},
        ],
        "coverage": [report for _, report in deep],
        "tree_vs_ring_all": {"columns": ["N", "depth", "tree cycles", "ring cycles", "ring/tree",
                                         "tree link words", "ring link words"],
                             "small_words": SMALL, "small": [list(small[n]) for n in range(1, 193)],
                             "large_words": LARGE, "large": [list(large[n]) for n in range(1, 193)]},
    }
