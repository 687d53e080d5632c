"""Per-layer benchmark (``make bench ARGS=layer``): a 256 x 256 layer with batch 16 on one RTL
wafer of 4 x 4 PE tiles behind SwarmX (Verilator), in forward, backward-data and backward-weight;
every phase bit-exact against the kernels and its cycles equal to the schedule model
(``sim/system/layer_bench.py``). Prints the cycles and the FMAC lane utilization of each phase's
runs; results in ``build/bench/layer.json``."""

from pathlib import Path

from hdl.config import preset
from sim.system.layer_bench import run_layer

OUT = Path(__file__).resolve().parents[1] / "build" / "bench" / "layer"
MESH, LAYER, SYSTEMS = (4, 4), (256, 256), 1


def _blocks(sizes):
    """``[13, 13, 14]`` -> ``"2 x 13 + 1 x 14"``."""
    return " + ".join(f"{sizes.count(r)} x {r}" for r in sorted(set(sizes)))


def run():
    cfg = preset("hardware", mesh_rows=MESH[0], mesh_cols=MESH[1], swarmx_leaves=SYSTEMS)
    m, k = LAYER
    result = run_layer(cfg, m, k, work=OUT, log=print)
    rows = [[p["phase"], p["runs"], p["config_cycles"], p["run_cycles"], p["run_formula"],
             round(p["lane_utilization"], 3)] for p in result["phases"]]
    title = (f"{m} x {k} layer, batch {result['batch']}, {MESH[0]} x {MESH[1]} PEs, "
             f"{cfg.sram_words}-word SRAM ({result['simulator']}; RTL == model, bit-exact; "
             f"blocks of output rows: forward {_blocks(result['blocks']['forward'])}, "
             f"backward-weight {_blocks(result['blocks']['backward-weight'])})")
    result["tables"] = [{"title": title,
                         "columns": ["phase", "runs", "config cycles", "run cycles",
                                     "formula (no contention)", "lane utilization"],
                         "rows": rows}]
    return result
