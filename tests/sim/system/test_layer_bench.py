"""The per-layer benchmark (sim/system/layer_bench.py) in small: a 24 x 32 layer on one 2 x 2 wafer
under Icarus, with an SRAM small enough that forward and backward-weight run in blocks of rows. The
benchmark itself raises when a word differs from the kernels or a cycle count from the model."""

import pytest

from compiler.wafer import WaferCompileError
from hdl.config import preset
from sim.kit.testbench import harness_simulator
from sim.system.layer_bench import row_block, row_blocks, run_layer

CFG = preset("system", mesh_rows=2, mesh_cols=2, swarmx_leaves=1, sram_words=512)


def test_row_blocks():
    # Backward-weight per PE: X^T 4 x 16 words + 2 x rows x 16 (partials, incoming sums) <= 512:
    # at most 14 of 24 rows, so two blocks, of 12; with 1024 words all 24. Uneven: 25 rows in 12
    # and 13, smaller blocks first.
    assert row_block(CFG, "backward-weight", 24, 32, 8) == 14
    assert row_blocks(CFG, "backward-weight", 24, 32, 8) == [12, 12]
    assert row_blocks(CFG, "backward-weight", 25, 32, 8) == [12, 13]
    assert row_blocks(CFG, "backward-weight", 29, 32, 8) == [9, 10, 10]   # 3 blocks of <= 14
    assert row_block(CFG.replace(sram_words=1024), "backward-weight", 24, 32, 8) == 24
    assert row_blocks(CFG, "forward", 24, 32, 8) == [24]
    with pytest.raises(WaferCompileError, match="fits the wafer in no block"):
        row_block(CFG.replace(sram_words=64), "backward-weight", 24, 32, 8)


@pytest.mark.slow
def test_layer_bench_small(tmp_path):
    result = run_layer(CFG, 24, 32, work=tmp_path, simulator=harness_simulator())
    phases = {p["phase"]: p for p in result["phases"]}
    assert list(phases) == ["forward", "backward-data", "backward-weight"]
    assert result["blocks"] == {"forward": [24], "backward-weight": [12, 12]}
    assert [p["runs"] for p in phases.values()] == [1, 1, 2]
    for p in phases.values():
        assert p["fmacs"] == 24 * 32 * 8                     # every FMAC of the layer, once
        assert p["run_cycles"] >= p["run_formula"] > 0
        assert p["lane_utilization"] == p["fmacs"] / (16 * p["run_cycles"])
        assert 0 < p["lane_utilization"] <= 1
