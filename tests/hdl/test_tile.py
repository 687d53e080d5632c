"""PE tiles on the fabric: the forward micro-kernel of docs/architecture.md#layer-mapping (weights multicast, partial
sums chained west to east, ReLU + bf16 at the east PE, results filtered back to their owners) on
one tile, a 1 x Q row and a P x 1 column, with random edge gaps and back-pressure, bit-exact
against models.pipeline.kernels. Bench: sim/benches/tile.py."""

import json

import pytest

from arch.tile_map import mesh_tile_addr_bits
from hdl.config import ConfigError, preset
from hdl.mesh import Mesh
from hdl.pe.core import PeCore
from hdl.tile import Tile
from sim.benches.tile import forward_kernel_setup
from sim.kit.runner import compare_simulators, config_verilog, run_bench


def check(result, params, expect):
    for name, words in expect["outputs"].items():
        got = result["outputs"][name]
        assert len(got) == len(words), f"{name}: {len(got)} words out, expected {len(words)}"
        bad = [i for i in range(len(words)) if got[i] != words[i]]
        assert not bad, (f"{name}: {len(bad)} words differ, first at {bad[0]}: "
                         f"RTL {got[bad[0]]:#012x}, kernels {words[bad[0]]:#012x}")
    got, want = result["reads"], expect["read_values"]
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    assert not bad, (f"{len(bad)} read-backs differ, first at {params['reads'][bad[0]]:#06x}: "
                     f"RTL {got[bad[0]]:#x}, expected {want[bad[0]]:#x}")


def pe_mesh(cfg):
    """A mesh of PE tiles (the wafer without its adapters)."""
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    return Mesh(cfg, core=lambda r, q: PeCore(cfg), tile_addr_bits=bits)


def run_mesh(rows, cols, m, k, seed, gap, stall):
    cfg = preset("tiny", mesh_rows=rows, mesh_cols=cols)
    params, expect = forward_kernel_setup(cfg, rows=rows, cols=cols, m=m, k=k, seed=seed)
    params.update(gap_prob=gap, stall_prob=stall)
    test_dir = run_bench(config_verilog("pe_mesh", cfg, pe_mesh), "pe_mesh", "sim.benches.tile", params=params)
    result = json.loads((test_dir / "result.json").read_text())
    check(result, params, expect)
    return result, expect


def test_tile_alone():
    """One tile: weights in at N, FMAC, ReLU + bf16, results kept in SRAM and sent out at E."""
    cfg = preset("tiny")
    params, expect = forward_kernel_setup(cfg, rows=1, cols=1, m=9, k=7, seed=1, mesh=False)
    params.update(gap_prob=0.3, stall_prob=0.4)
    test_dir = run_bench(config_verilog("tile", cfg, Tile), "tile", "sim.benches.tile", params=params)
    check(json.loads((test_dir / "result.json").read_text()), params, expect)


@pytest.mark.parametrize("gap,stall", [(0.0, 0.0), (0.3, 0.5)])
def test_row_of_tiles(gap, stall):
    """1 x 4 row: each column gets its own K slice; the psum chain runs west to east; results
    come back west and each PE keeps the outputs it owns in the next layer."""
    run_mesh(1, 4, 8, 13, seed=2 + int(gap * 10), gap=gap, stall=stall)


def test_column_of_tiles():
    """3 x 1 column: weights multicast down the column, one batch slice per PE. Weights offered
    every cycle are taken every cycle (line rate) although the results' edge back-pressures."""
    result, _ = run_mesh(3, 1, 8, 9, seed=3, gap=0.0, stall=0.4)
    cycles = result["in_cycles"]["n_in__0"]
    assert cycles == list(range(cycles[0], cycles[0] + len(cycles))), "weights were stalled"


def test_tile_address_map_must_fit():
    with pytest.raises(ConfigError, match="tile address map"):
        Tile(preset("tiny", sram_words=1 << 16, sram_banks=2))


@pytest.mark.slow
def test_tile_bench_same_under_icarus_and_verilator(icarus):
    """A tile under both simulators: the same outputs at every cycle (sim.kit.trace). Tiles
    side by side: the 2 x 3 wafer's cross-simulator test (tests/hdl/test_wafer.py)."""
    with compare_simulators():
        test_tile_alone()


def test_tile_bus_and_ramp():
    """The tile's glue: a write reaches the router or the core by address and only with ``we``
    high; the core's RAMP takes every color (a wavelet of the last color, routed N -> RAMP, is
    counted by the core's RX_COUNT). Amaranth's simulator."""
    from amaranth.sim import Simulator

    from arch.pe_map import STATUS, status_base
    from arch.ports import Port
    from arch.router_map import route_addr
    from arch.tile_map import CORE_BASE
    from sim.kit.config_bus import bus_read, bus_write

    cfg = preset("tiny")
    tile = Tile(cfg)
    C = cfg.num_colors
    route = route_addr(C - 1, Port.N)
    rx_count = CORE_BASE + status_base(cfg.sram_words, cfg.num_tasks) + STATUS["RX_COUNT"]

    async def bench(ctx):
        async def read(addr):
            ctx.set(tile.cfg.wdata, 1 << Port.E)        # on the bus, never written: we is low
            return await bus_read(ctx, tile.cfg, addr)

        await bus_write(ctx, tile.cfg, [(route, 1 << Port.RAMP), (CORE_BASE, 0x1234)])   # + SRAM word 0
        assert await read(route) == 1 << Port.RAMP
        assert await read(CORE_BASE) == 0x1234
        ctx.set(tile.n_in.valid, 1)
        ctx.set(tile.n_in.payload, {"data": 1, "color": C - 1, "ctrl": 0})
        await ctx.tick().until(tile.n_in.ready)
        ctx.set(tile.n_in.valid, 0)
        await ctx.tick().repeat(8)
        assert await read(rx_count) == 1, "the core's RAMP did not take the last color"
        assert await read(route) == 1 << Port.RAMP and await read(CORE_BASE) == 0x1234, "written with we low"

    sim = Simulator(tile)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
