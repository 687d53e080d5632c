"""Router coverage run: the coverage-directed scenario of ``sim/benches/router_coverage.py`` on a
standalone router (4 colors, depth 2) in the plain-Verilog fabric harness, cycle-exact against
the model and scoreboarded; its coverage bins (input x output x color class x back-pressure x
fan-out) go to ``build/bench/router.coverage.json``."""

import random
import time

from sim.benches.router_coverage import PHASES, coverage_scenario, router_coverage
from sim.kit.runner import BUILD


def run():
    start = time.perf_counter()
    sc, sent = coverage_scenario(random.Random(1))
    log = sc.run(BUILD / "bench-router-coverage")
    if log.deadlocked:
        raise AssertionError("router coverage run deadlocked:\n" + "\n".join(log.dump[:20]))
    report = router_coverage(sc, sent, log)
    seconds = time.perf_counter() - start
    delivered = sum(len(v) for v in log.delivered.values())
    cycles = sum(log.phase_cycles.values())
    return {
        "tables": [{"title": "router coverage run (standalone router, 4 colors, vc_depth 2, cycle-exact vs model)",
                    "columns": ["phases", "wavelets in", "copies out", "cycles", "bins hit", "bins", "s"],
                    "rows": [[PHASES, sum(len(ws) for inputs in sent.values() for ws in inputs.values()),
                              delivered, cycles, report["hit"], report["bins"], round(seconds, 2)]]}],
        "coverage": [report],
    }
