"""RTL simulation speed, side by side per simulator: the ``make sim`` system (2 wafers of 2 x 2 PE
tiles under the SwarmX tree, 64-32-10) and the ``mesh4x4`` fabric under random traffic, on the
same plain-Verilog testbenches under Verilator and Icarus, and the system under cocotb (on the
simulator ``sim.kit.runner.bench_simulator`` picks for it: Verilator).

*cycles/CPU-s* = clock cycles simulated / CPU seconds (user + system) of the simulator processes
(Verilog elaboration and the Verilator build excluded: both are cached); *PE-cycles/CPU-s* the same
times the PE tiles simulated (8 in the system), the figure that compares wafers of other sizes. The system figure covers
the testbench's one process for the run (start-up included), the mesh figure one process over
two traffic phases; under cocotb the system is one process whose CPU time includes cocotb's Python
(the host's work between phases, loading and reading memories through VPI). Every run is checked
as in the regression (the system bit-exact against the golden model with the schedule's cycles,
the mesh cycle-exact against the fabric model), and the mesh logs of the two simulators must be
equal byte for byte on the same stimulus (Verilator also runs five times as much traffic, for a
measurable CPU time).
"""

import random
import time
from pathlib import Path

from hdl.config import Config
from sim.benches.mesh import Scenario, Traffic, random_flows, random_timing, random_traffic
from sim.kit.runner import bench_simulator
from sim.kit.testbench import available_simulators
from sim.system.config import SystemRunConfig
from sim.system.run import run_system

OUT = Path(__file__).resolve().parents[1] / "build" / "bench" / "sim_speed"
SYSTEM_STEPS = {"verilator": 10, "icarus": 1, "cocotb": 1}
MESH_WAVELETS = {"icarus": 24000, "verilator": 120000}     # per run; Verilator also runs Icarus' size


def _system(sim):
    run = SystemRunConfig(steps=SYSTEM_STEPS[sim], eval_every=SYSTEM_STEPS[sim],
                          out_dir=str(OUT / f"system-{sim}"), simulator=sim)
    start = time.perf_counter()
    results = run_system(run, run_name="bench-sim-speed")
    # cocotb: one simulator process for the run, its CPU time includes cocotb's Python (the host).
    return (results["simulator_cycles"], results["simulator_cpu_seconds"], time.perf_counter() - start,
            results["simulated_pe_tiles"])


def _mesh(sim, wavelets, seed=11):
    cfg = Config(num_colors=4, vc_depth=4)
    rng = random.Random(seed)
    sc = Scenario("mesh4x4", cfg, 4, 4, 60000)     # cycles of random gaps and stalls
    for phase in range(2):
        flows, routes = random_flows(rng, 4, 4, 4, max_sources=8, max_dests=3)
        sc.set_routes(routes)
        n_src = len({src for _, src, _ in flows})
        sent = random_traffic(rng, sc.ports, flows, 0, -(-wavelets // 2 // n_src),
                              Traffic(sc.ports, 0), sid_base=phase * 64)
        sc.phase(sent)
    random_timing(rng, sc.ports, sc.traffic, max_gap=0.3, max_stall=0.2)
    start = time.perf_counter()
    out = OUT / f"mesh-{sim}-{wavelets}"
    log = sc.run(out, simulator=sim)        # raises if RTL and model differ
    wall = time.perf_counter() - start
    if log.deadlocked:
        raise AssertionError("\n".join(log.dump))
    return log.cycles, log.cpu_seconds, wall, (out / "fabric.log").read_bytes()


def run():
    sims = available_simulators()
    rows, logs, raw = [], {}, {}
    for sim in sims:
        for wavelets in sorted({MESH_WAVELETS["icarus"], MESH_WAVELETS[sim]}):
            cycles, cpu, wall, log = _mesh(sim, wavelets)
            if wavelets == MESH_WAVELETS["icarus"]:
                logs[sim] = log
            if wavelets == MESH_WAVELETS[sim]:
                raw[f"mesh4x4/{sim}"] = {"cycles": cycles, "wavelets": wavelets, "cpu_seconds": cpu,
                                         "wall_seconds": wall}
    for sim in sims + ["cocotb"]:
        cycles, cpu, wall, tiles = _system(sim)
        raw[f"system/{sim}"] = {"cycles": cycles, "cpu_seconds": cpu, "wall_seconds": wall, "pe_tiles": tiles}
    if len(set(logs.values())) > 1:
        raise AssertionError("mesh4x4: the simulators' logs differ")

    def rate(key, per_tile=False):
        r = raw.get(key)
        if not r or not r["cpu_seconds"]:
            return None
        return r["cycles"] * (r["pe_tiles"] if per_tile else 1) / r["cpu_seconds"]

    tiles = next(r["pe_tiles"] for key, r in raw.items() if key.startswith("system/"))
    for design, label, per_tile in (("system", "system (make sim), cycles", False),
                                    ("system", f"system (make sim), PE-cycles ({tiles} PE tiles)", True),
                                    ("mesh4x4", "mesh4x4 random (routers only), cycles", False)):
        v, i, c = (rate(f"{design}/{sim}", per_tile) for sim in ("verilator", "icarus", "cocotb"))
        speedup = f"{v / i:.0f}x" if v and i else "-"
        rows.append([label, *(round(x) if x else "-" for x in (v, i, c)), speedup])
    return {"raw": raw, "simulators": sims, "tables": [{
        "title": "RTL cycles per CPU-second of the simulator (PE-cycles: PE tiles x cycles): system = "
                 "2 wafers of 2x2 PEs + SwarmX, one process per run; mesh4x4 = 16 routers, random "
                 "traffic, back-pressure "
                 "(cycles and CPU seconds in build/bench/sim_speed.json)",
        "columns": ["design", "Verilator", "Icarus", f"cocotb+{bench_simulator('system_rtl')}", "Verilator/Icarus"],
        "rows": rows}]}
