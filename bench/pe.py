"""PE benchmarks: FMAC lane utilization of the forward micro-kernel (docs/architecture.md#layer-mapping) on rows and
columns of PE tiles, the PE core at line rate, simulation speed (cocotb + Icarus), and the PE core's functional
coverage (operation x fault x chaining, sim/benches/pe_coverage.py): directed and random programs run on the RTL,
checked against the golden model, their bins written to build/bench/pe.coverage.json."""

import json
import time

import numpy as np

from arch.pe_map import STATUS, Op, status_base
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits
from hdl.config import preset
from hdl.mesh import Mesh
from hdl.pe.core import PeCore
from sim.benches.pe import Program, desc_writes, sram_writes
from sim.benches.pe_coverage import coverage_table, directed_programs, fill, pe_coverage, random_programs
from sim.benches.tile import forward_kernel_setup
from sim.kit.runner import run_bench

# 4 lanes in 4 banks, small SRAM so the kernels' meshes simulate quickly.
CFG = preset("tiny", lanes=4, sram_banks=4)


def _kernel(rows, cols, m, k, stall, sram_words=256):
    cfg = CFG.replace(mesh_rows=rows, mesh_cols=cols, sram_words=sram_words)
    params, expect = forward_kernel_setup(cfg, rows=rows, cols=cols, m=m, k=k, seed=7)
    params.update(gap_prob=0.0, stall_prob=stall)
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    top = Mesh(cfg, core=lambda r, q: PeCore(cfg), tile_addr_bits=bits)
    test_dir = run_bench(top, f"pe_mesh_{rows}x{cols}", "sim.benches.tile", params=params,
                         run_name=f"bench-{rows}x{cols}-{stall}")
    res = json.loads((test_dir / "result.json").read_text())
    for name, words in expect["outputs"].items():
        assert res["outputs"][name] == words, f"{name}: results differ from the kernels"
    assert res["reads"] == expect["read_values"], "kept results or counters differ"
    L, pes = cfg.lanes, rows * cols
    fmac_addrs = [a for a, v in zip(params["reads"], expect["read_values"])
                  if (a & ((1 << bits) - 1)) == CORE_BASE + status_base(cfg.sram_words, cfg.num_tasks)
                  + STATUS["FMAC_CYCLES"]]
    fmac = sum(res["reads"][params["reads"].index(a)] for a in fmac_addrs)
    first_in = min(c[0] for c in res["in_cycles"].values())
    last_in = max(c[-1] for c in res["in_cycles"].values())
    last_out = max(c[-1] for c in res["out_cycles"].values())
    window = last_out - first_in + 1
    stream = last_in - first_in + 1
    return [f"{rows}x{cols}", m, k, max(len(s) for s in expect["plan"]["k_slices"]), stall, fmac * L, window,
            round(fmac * L / (pes * L * window), 4),
            round(fmac * L / (pes * L * stream), 4),
            round(res["sim_cycles"] / res["sim_seconds"])]


def _core_line_rate(K, R):
    cfg = preset("default")
    L = cfg.lanes
    rng = np.random.default_rng(8)
    prog = Program(cfg)
    x = rng.integers(0, 1 << 32, K * L, dtype=np.uint64).astype(np.uint32) & 0x3FFF0000
    prog.step(writes=sram_writes(0, x) + desc_writes(cfg, 0, op=Op.FMAC, enable=1, color=1,
                                                    a_base=0, a_stride=L, count=K, reps=R,
                                                    dst_base=1024))
    stat = status_base(cfg.sram_words, cfg.num_tasks)
    w = rng.integers(0, 1 << 32, K * R, dtype=np.uint64).astype(np.uint32) & 0x3FFF0000
    prog.step(wavelets=[(1, v) for v in w], reads=[stat + STATUS["FMAC_CYCLES"]])
    test_dir = run_bench(PeCore(cfg), "pe_core", "sim.benches.pe", params=prog.params(),
                         run_name=f"bench-line-rate-{K}x{R}")
    res = json.loads((test_dir / "result.json").read_text())
    prog.check(res)
    rx = res["rx_cycles"]
    span = rx[-1] - rx[0] + 1
    fmac = res["reads"][1][0]
    return [f"pe_core L={L}", K * R, span, fmac, round(fmac / span, 4),
            round(res["sim_cycles"] / res["sim_seconds"])]


RANDOM_PROGRAMS = 4


def _coverage_runs():
    """The coverage programs on the RTL (random input gaps and output back-pressure), each checked
    against the model before its bins count. Returns the table rows and the coverage report."""
    cov = pe_coverage(f"PE core, lanes {CFG.lanes}, {CFG.num_tasks} tasks, {CFG.num_colors} colors")
    rng = np.random.default_rng(3)
    rows = []
    for name, prog in directed_programs(CFG) + random_programs(CFG, RANDOM_PROGRAMS, seed=2):
        gap, stall = (0.2, 0.3) if name.startswith("directed") else [round(float(p), 2) for p in rng.random(2) * 0.6]
        test_dir = run_bench(PeCore(CFG), "pe_core", "sim.benches.pe",
                             params=prog.params(gap_prob=gap, stall_prob=stall),
                             run_name=f"bench-coverage-{name.replace(' ', '-')}")
        res = json.loads((test_dir / "result.json").read_text())
        prog.check(res)                     # RTL == model, before the bins count
        before = sum(1 for n in cov.counts.values() if n)
        fill(cov, [prog])
        rows.append([name, len(prog.steps), sum(len(s["wavelets"]) for s in prog.steps), len(prog.model.out),
                     gap, stall, res["sim_cycles"], len(prog.model.bins),
                     len({tuple(b.values()) for b in prog.model.bins}),
                     sum(1 for n in cov.counts.values() if n) - before])
    return rows, cov.report()


def run():
    start = time.perf_counter()
    cov_rows, cov_report = _coverage_runs()
    kernel_rows = [_kernel(1, 4, 16, 32, 0.0), _kernel(4, 1, 16, 8, 0.0), _kernel(2, 2, 16, 16, 0.0),
                   _kernel(1, 4, 16, 32, 0.5), _kernel(1, 4, 16, 128, 0.0, sram_words=512)]
    core_rows = [_core_line_rate(64, 32)]
    return {
        "tables": [
            {"title": f"forward micro-kernel on PE tiles (lanes={CFG.lanes}, weights at 1/cycle "
                      "per column, results leave one edge)",
             "columns": ["mesh", "M", "K", "K per PE", "out stall p", "FMAC lane-cycles", "cycles",
                         "utilization", "utilization while weights stream", "sim cycles/s"],
             "rows": kernel_rows},
            {"title": "PE core FMAC at line rate (weights 1/cycle)",
             "columns": ["top", "weights", "cycles", "FMAC cycles (all lanes)", "lane utilization",
                         "sim cycles/s"],
             "rows": core_rows},
            {"title": f"PE core coverage programs (lanes={CFG.lanes}, RTL == model checked)",
             "columns": ["program", "steps", "wavelets in", "words out", "gap p", "stall p", "sim cycles",
                         "bin hits", "distinct bins", "new bins"],
             "rows": cov_rows},
            {"title": "PE core coverage: op x fault x chaining (hits; '-' unreachable)",
             "columns": ["op", "fault", "standalone", "chained-into", "chains-out"],
             "rows": coverage_table(cov_report)},
        ],
        "kernel_rows": kernel_rows, "core_rows": core_rows, "coverage_rows": cov_rows,
        "coverage": [cov_report],
        "seconds": round(time.perf_counter() - start, 1),
    }
