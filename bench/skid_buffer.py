"""Simulation speed of the cocotb + Icarus flow on the skid buffer (Python on every edge)."""

import json
import time

from hdl.config import Config
from hdl.tops import build_top
from sim.kit.runner import run_bench


def run():
    rows = []
    for stall in (0.0, 0.5):
        words = 20000
        start = time.perf_counter()
        test_dir = run_bench(build_top("skid_buffer", Config()), "skid_buffer", "sim.benches.skid_buffer",
                             params={"words": words, "gap_prob": 0.0, "stall_prob": stall},
                             testcase="random_traffic", run_name=f"bench-stall{stall}")
        seconds = time.perf_counter() - start
        stats = json.loads((test_dir / "stats.json").read_text())
        rows.append([stall, words, stats["cycles"], round(stats["words_per_cycle"], 4),
                     round(stats["cycles"] / seconds)])
    return {"tables": [{"title": "skid_buffer under cocotb + Icarus",
                        "columns": ["stall prob", "words", "cycles", "words/cycle", "sim cycles/s"],
                        "rows": rows}]}
