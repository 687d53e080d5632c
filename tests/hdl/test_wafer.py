"""The RTL wafer (hdl/wafer.py) running phases compiled by sim/wafer_compiler.py: weights enter
as a SwarmX TaggedWord stream (bf16 in the low half), the weight demux splits every row over the
mesh columns, the forward micro-kernel runs on P x Q PE tiles, the results leave at the host edge.
Bit-exact against models.pipeline.kernels. Bench: sim/bench_tile.py (generic stream bench)."""

import json

import numpy as np
import pytest

from hdl.config import ConfigError, preset
from hdl.mesh import tile_address
from hdl.pe_core import STATUS, core_map
from hdl.tile import CORE_BASE, mesh_tile_addr_bits
from hdl.wafer import ADAPTER, Wafer, adapter_base
from models.numerics import bf16_bits
from models.pipeline import kernels
from sim.runner import run_bench
from sim.wafer_compiler import WaferCompileError, compile_forward, forward_expected_outputs


def weight_stream(w16):
    """SwarmX leaf words of one layer: bf16 in the low half, rows in order, last on the end."""
    flat = [int(v) for v in np.asarray(w16).ravel()]
    return [v | ((i == len(flat) - 1) << 32) for i, v in enumerate(flat)]


@pytest.mark.parametrize("rows,cols,m,k,gap,stall", [(2, 2, 10, 13, 0.0, 0.0),
                                                     (2, 3, 7, 11, 0.3, 0.4)])
def test_wafer_forward(rows, cols, m, k, gap, stall):
    cfg = preset("system", mesh_rows=rows, mesh_cols=cols)
    rng = np.random.default_rng(rows * 10 + cols)
    batch = rows * cfg.lanes
    w16 = bf16_bits((rng.standard_normal((m, k)) * 0.5).astype(np.float32))
    x16 = bf16_bits((rng.standard_normal((k, batch)) * 2).astype(np.float32))
    # Exact zeros and a tie to exercise ReLU and rounding.
    x16[0, 0] = 0
    a16 = kernels.relu_bf16(kernels.forward(w16, x16, (rows, cols)))
    phase = compile_forward(cfg, m=m, k=k, batch=batch, x16=x16)
    expect = forward_expected_outputs(cfg, a16)
    side = phase.out_edge
    bits = mesh_tile_addr_bits(cfg)
    stat = core_map(cfg)[1]
    reads, want = [], []
    for (p, q), info in sorted(phase.plan["pes"].items()):
        own = info["own"]
        kept = a16[own.start:own.stop, p * cfg.lanes:(p + 1) * cfg.lanes].astype(np.uint32) << 16
        for i, word in enumerate(kept.ravel()):
            reads.append(tile_address(cfg, p, q, CORE_BASE + info["xn_base"] + i, bits))
            want.append(int(word))
        for reg, value in (("FAULT", 0), ("ACTIVE", 0), ("FMAC_CYCLES", m * len(info["k"]))):
            reads.append(tile_address(cfg, p, q, CORE_BASE + stat + STATUS[reg], bits))
            want.append(value)
    reads.append(adapter_base(cfg) + ADAPTER["W_TAKEN"])
    want.append(m * k)
    params = {"writes": [list(w) for w in phase.writes],
              "inputs": {"weights": weight_stream(w16)},
              "outputs": {f"{side}_out__{p}": len(v) for p, v in expect.items()},
              "accept": [], "num_colors": cfg.num_colors, "reads": reads,
              "gap_prob": gap, "stall_prob": stall}
    test_dir = run_bench(Wafer(cfg), f"wafer_{rows}x{cols}", "sim.bench_tile", params=params)
    result = json.loads((test_dir / "result.json").read_text())
    for p, words in expect.items():
        got = result["outputs"][f"{side}_out__{p}"]
        assert len(got) == len(words), f"row {p}: {len(got)} words out, expected {len(words)}"
        bad = [i for i in range(len(words)) if got[i] != words[i]]
        assert not bad, (f"row {p}: {len(bad)} words differ, first at {bad[0]}: "
                         f"RTL {got[bad[0]]:#012x}, kernels {words[bad[0]]:#012x}")
    got = result["reads"]
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    assert not bad, (f"{len(bad)} read-backs differ, first at {reads[bad[0]]:#06x}: "
                     f"RTL {got[bad[0]]:#x}, expected {want[bad[0]]:#x}")
    if gap == 0.0:      # weights offered every cycle are taken every cycle (line rate)
        cycles = result["in_cycles"]["weights"]
        assert cycles == list(range(cycles[0], cycles[0] + len(cycles))), "weights stalled"


@pytest.mark.parametrize("changes,kw,match", [
    ({}, dict(m=8, k=16, batch=6), "batch must be 8"),
    ({"num_colors": 2}, dict(m=8, k=16, batch=8), "needs 3 colors"),
    ({"num_tasks": 3}, dict(m=8, k=16, batch=8), "needs 4 task descriptors"),
    ({}, dict(m=8, k=1, batch=8), "cannot be split over 2 mesh columns"),
    ({"sram_words": 64, "sram_banks": 4}, dict(m=32, k=64, batch=8), "SRAM words"),
])
def test_compiler_refuses(changes, kw, match):
    with pytest.raises(WaferCompileError, match=match):
        compile_forward(preset("system", **changes), **kw)


def test_compiler_rejects_wrong_input_shape():
    with pytest.raises(WaferCompileError, match=r"X has shape \(4, 8\), expected \(16, 8\)"):
        compile_forward(preset("system"), m=8, k=16, batch=8, x16=np.zeros((4, 8), np.uint16))


def test_wafer_too_many_tiles_for_the_bus():
    with pytest.raises(ConfigError, match="more tiles than the 16-bit configuration bus"):
        Wafer(preset("system", mesh_rows=5, mesh_cols=4))
    Wafer(preset("system", mesh_rows=4, mesh_cols=4))   # fills the bus, adapters above tile 15
