"""Fabric benchmarks: accepted throughput and latency against offered load for the traffic
patterns weight streaming uses, on 4x4 and 8x8 meshes, and simulation speed.

Throughput and latency come from the cycle-level model (models/fabric.py), which the regression
proves cycle-exact against the RTL (tests/hdl/test_mesh.py, test_router.py); each pattern's
heaviest load point is also run on the 4x4 RTL (two of them on 8x8) here and must agree cycle
for cycle.

Columns of the first table: offered and accepted wavelets per source per cycle, delivered copies
per receiver per cycle, mean latency in cycles. A source offers a wavelet in a cycle with
probability ``load`` (Bernoulli gaps; it holds its wavelet until accepted); *accepted* counts
over the run, to the last acceptance; *latency* = mean cycles from a wavelet's input transfer to
each copy's output transfer
(zero load: hops + 2). Outputs are always ready.
"""

import random
import time
from pathlib import Path

from arch.ports import Port
from hdl.config import Config
from models.fabric import FabricModel, xy_routes
from sim.benches.mesh import Scenario

LOADS = (0.1, 0.25, 0.5, 0.75, 1.0)
WORDS = 400          # per source per load point


def pattern_flows(name, P, Q):
    """Flows ``[(color, source, [destinations])]`` of a named pattern on a P x Q mesh."""
    if name == "column multicast":      # weights down every column from the north edge
        return [(0, (0, q, Port.N), [(r, q, Port.RAMP) for r in range(P)]) for q in range(Q)]
    if name == "row chain":             # partial sums west -> east, last PE to the east edge
        return [(1, (p, q, Port.RAMP), [(p, q + 1, Port.RAMP) if q + 1 < Q else (p, q, Port.E)])
                for p in range(P) for q in range(Q)]
    if name == "row broadcast back":    # the east PE of a row back to every PE of the row
        return [(2, (p, Q - 1, Port.RAMP), [(p, q, Port.RAMP) for q in range(Q - 1)]
                 + [(p, 0, Port.W)]) for p in range(P)]
    if name == "all-to-one edge":       # every PE to the north-east corner's east edge
        return [(3, (p, q, Port.RAMP), [(0, Q - 1, Port.E)]) for p in range(P) for q in range(Q)]
    raise KeyError(name)


PATTERNS = ("column multicast", "row chain", "row broadcast back", "all-to-one edge")


def _stimulus(flows, load, seed):
    rng = random.Random(seed)
    inputs, gaps = {}, {}
    for sid, (color, src, _) in enumerate(flows):
        inputs[src] = [((sid << 24) | i, color, 0) for i in range(WORDS)]
        gaps[src] = [rng.random() >= load for _ in range(WORDS * 40)]
    return inputs, gaps


def _measure(P, Q, name, load, colors=4, depth=4, seed=1):
    flows = pattern_flows(name, P, Q)
    routes = xy_routes(P, Q, colors, flows)
    inputs, gaps = _stimulus(flows, load, seed)
    model = FabricModel(P, Q, colors, depth, routes)
    start = time.perf_counter()
    acc, dl = model.run(inputs, gaps={p: (lambda t, g=g: t < len(g) and g[t])
                                      for p, g in gaps.items()})
    seconds = time.perf_counter() - start
    srcs = list(inputs)
    span = max(ts[-1] for ts in acc.values()) + 1
    by_sid = {p: acc[p] for p in srcs}
    sid_src = {sid: src for sid, (_, src, _) in enumerate(flows)}
    lat = [t - by_sid[sid_src[w[0] >> 24]][w[0] & 0xFFFFFF] for t, _, w in dl]
    receivers = {port for _, port, _ in dl}
    return {
        "accepted": sum(len(v) for v in acc.values()) / len(srcs) / span,
        "delivered": len(dl) / len(receivers) / (dl[-1][0] + 1),
        "latency": sum(lat) / len(lat),
        "cycles": model.cycle, "model_s": seconds, "routes": routes, "inputs": inputs,
        "gaps": gaps,
    }


def _rtl_check(name, load, out_dir, size=4):
    """Run a pattern point on the RTL (``mesh4x4``, or ``Mesh`` of ``size x size``; 4 colors,
    depth 4): cycle-exact vs model."""
    cfg = Config(num_colors=4, vc_depth=4, mesh_rows=size, mesh_cols=size)
    flows = pattern_flows(name, size, size)
    inputs, gaps = _stimulus(flows, load, 1)
    sc = Scenario("mesh4x4" if size == 4 else "mesh", cfg, size, size, WORDS * 40)
    sc.set_routes(xy_routes(size, size, 4, flows))
    for p, g in gaps.items():
        sc.traffic.gap[p] = g
    sc.phase(inputs)
    log = sc.run(out_dir)        # raises if RTL and model differ
    if log.deadlocked:
        raise AssertionError("\n".join(log.dump))
    return log.phase_cycles[0], sc.harness_seconds


def _rtl_random(out_dir, wavelets=20000, seed=11):
    """Sustained RTL speed on random multi-color traffic (as the regression's), 4x4."""
    from sim.benches.mesh import Traffic, random_flows, random_timing, random_traffic
    cfg = Config(num_colors=4, vc_depth=4)
    rng = random.Random(seed)
    sc = Scenario("mesh4x4", cfg, 4, 4, 20000)
    flows, routes = random_flows(rng, 4, 4, 4, max_sources=8, max_dests=3)
    sc.set_routes(routes)
    n_src = len({src for _, src, _ in flows})
    sent = random_traffic(rng, sc.ports, flows, 0, -(-wavelets // n_src), Traffic(sc.ports, 0))
    sc.phase(sent)
    random_timing(rng, sc.ports, sc.traffic, max_gap=0.3, max_stall=0.2)
    log = sc.run(out_dir)
    if log.deadlocked:
        raise AssertionError("\n".join(log.dump))
    return log.phase_cycles[0], sc.harness_seconds, sum(len(w) for w in sent.values())


def run():
    rows = []
    for P, Q in ((4, 4), (8, 8)):
        for name in PATTERNS:
            for load in LOADS:
                r = _measure(P, Q, name, load)
                rows.append([f"{P}x{Q}", name, load, round(r["accepted"], 3),
                             round(r["delivered"], 3), round(r["latency"], 2), r["cycles"],
                             round(r["cycles"] / r["model_s"])])
    speed = []
    out = Path(__file__).resolve().parents[1] / "build" / "bench" / "fabric"
    for name in PATTERNS:
        cycles, seconds = _rtl_check(name, 1.0, out / name.replace(" ", "_"))
        speed.append(["4x4", name + " (load 1.0)", len(pattern_flows(name, 4, 4)) * WORDS,
                      cycles, round(seconds, 2), round(cycles / seconds), "yes"])
    for name in ("column multicast", "row chain"):
        cycles, seconds = _rtl_check(name, 1.0, out / ("8x8_" + name.replace(" ", "_")), size=8)
        speed.append(["8x8", name + " (load 1.0)", len(pattern_flows(name, 8, 8)) * WORDS,
                      cycles, round(seconds, 2), round(cycles / seconds), "yes"])
    cycles, seconds, n = _rtl_random(out / "random")
    speed.append(["4x4", "random multi-color, back-pressure", n, cycles, round(seconds, 2),
                  round(cycles / seconds), "yes"])
    return {"tables": [
        {"title": "Fabric: accepted throughput and latency vs offered load (cycle-level model, "
                  "4 colors, vc_depth 4)",
         "columns": ["mesh", "pattern", "offered", "accepted", "delivered/rx", "latency",
                     "cycles", "model cyc/s"],
         "rows": rows},
        {"title": "Fabric: RTL simulation speed (Icarus, plain-Verilog harness, 4 colors, "
                  "vc_depth 4; seconds include writing the stimulus files and parsing the log, and "
                  "Icarus compilation in the first row of each mesh size)",
         "columns": ["mesh", "traffic", "wavelets", "cycles", "seconds", "cycles/s", "= model"],
         "rows": speed},
    ]}
