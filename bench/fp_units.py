"""Simulation speed of the fp units (fp32_add, bf16_mul): vectors per second, bit-exact checked.

Paths: cocotb + Icarus (the stream top, Python on every clock edge), Icarus alone (the plain
Verilog harnesses: stream top at full rate, and the combinational core), and ``verilator
--binary`` on the same harnesses when Verilator is installed. Every run checks every result
against the golden model; a mismatch fails the benchmark. Times exclude compilation (reported
separately) and Python vector generation.
"""

import json
import shutil
import subprocess
import time

import numpy as np

from hdl.config import Config
from hdl.fp.bf16_mul import Bf16Mul
from hdl.fp.fp32_add import Fp32Add
from hdl.tops import build_top
from sim.benches.fp import (
    UNITS,
    _parse,
    fp_coverage,
    prepare_harness,
    random_pairs,
    run_harness,
    special_pairs,
)
from sim.kit.runner import bench_simulator, run_bench, run_vvp
from sim.kit.toolchain import icarus_available
from sim.kit.verilator import build_binary

TOPS = {"fp32_add": Fp32Add, "bf16_mul": Bf16Mul}
COCOTB_VECTORS = 5_000
ICARUS_VECTORS = 100_000
VERILATOR_VECTORS = 1_000_000


def _checked(result, n, what):
    if result["errors"] or result["n"] != n:
        raise AssertionError(f"{what}: {result['errors']} mismatches, {result['n']} of {n} checked: "
                             f"{result['mismatches'][:3]}")


def _icarus(job, n, what):
    start = time.perf_counter()     # the compilation alone, as run_vvp does it
    subprocess.run(["iverilog", "-g2005", "-o", str(job.run_dir / "compile-timing.vvp"), "-s",
                    job.toplevel, *(f"-D{k}={v}" for k, v in job.defines.items()),
                    *(str(s) for s in job.sources)], check=True, capture_output=True)
    compile_s = time.perf_counter() - start
    run_vvp(job.sources, job.toplevel, job.run_dir, plusargs=job.plusargs, defines=job.defines)
    start = time.perf_counter()     # compiled and cached now: time the simulation alone
    out = run_vvp(job.sources, job.toplevel, job.run_dir, plusargs=job.plusargs, defines=job.defines)
    seconds = time.perf_counter() - start
    _checked(_parse(out), n, what)
    return compile_s, seconds


def _verilator(job, n, what):
    start = time.perf_counter()     # a build of its own, to time the compilation
    shutil.rmtree(job.run_dir / "verilator", ignore_errors=True)
    exe = build_binary(job.sources, job.toplevel, defines=job.defines, build_root=job.run_dir / "verilator")
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out = subprocess.run([str(exe), *job.plusargs], cwd=job.run_dir, check=True, capture_output=True,
                         text=True).stdout
    seconds = time.perf_counter() - start
    _checked(_parse(out), n, what)
    return compile_s, seconds


def run():
    rows, records = [], []

    def add(unit, sim, target, n, compile_s, seconds):
        rate = n / seconds
        rows.append([unit, sim, target, n, round(compile_s, 2), round(seconds, 3), round(rate)])
        records.append({"unit": unit, "simulator": sim, "target": target, "vectors": n,
                        "compile_seconds": compile_s, "seconds": seconds, "vectors_per_second": rate})

    coverage = []
    for unit in UNITS:
        # Coverage of what went through the RTL: the special pairs (through the stream top, with
        # gaps and back-pressure) and the random pairs of the harness runs below.
        sa, sb = special_pairs(unit)
        _checked(run_harness(unit, sa, sb, target="stream", gap=30, stall=50, tag="bench-specials"),
                 len(sa), f"{unit} special pairs")
        ra, rb = random_pairs(unit, ICARUS_VECTORS, seed=1)
        coverage += fp_coverage(unit, np.concatenate([sa, ra]), np.concatenate([sb, rb]))
        test_dir = run_bench(build_top(unit, Config()), unit, "sim.benches.fp", testcase="stream_traffic",
                             run_name=f"bench-{unit}",
                             params={"unit": unit, "vectors": "random", "n": COCOTB_VECTORS,
                                     "gap_prob": 0.0, "stall_prob": 0.0, "latency": TOPS[unit].LATENCY})
        stats = json.loads((test_dir / "stats.json").read_text())
        add(unit, f"cocotb + {bench_simulator(unit)}", "stream top", stats["results"], 0.0,
            stats["seconds"])

        runs = [("Icarus", _icarus, ICARUS_VECTORS, 1)] if icarus_available() else []
        runs.append(("verilator --binary", _verilator, VERILATOR_VECTORS, 2))
        for label, run_one, n, seed in runs:
            a, b = random_pairs(unit, n, seed=seed)
            for target in ("stream", "core"):
                job = prepare_harness(unit, a, b, target=target, tag=f"bench{run_one.__name__}")
                try:
                    compile_s, seconds = run_one(job, n, f"{unit} {target} under {label}")
                finally:
                    job.cleanup()
                add(unit, label, f"{target} harness", n, compile_s, seconds)

    return {"tables": [{"title": "fp units: bit-exact checked vectors per second (full rate, random pairs)",
                        "columns": ["unit", "simulator", "target", "vectors", "compile s", "run s",
                                    "vectors/s"],
                        "rows": rows}],
            "results": records, "coverage": coverage, "icarus": icarus_available()}
