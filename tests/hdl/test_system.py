"""The system top's flags (hdl/system.py): ``error`` is the OR of every SwarmX tree's and every
wafer's ``error``, ``fault`` the OR of every wafer's ``fault``. Each case raises one source on a
system of two ``tiny`` wafers of 2 x 2 tiles (the plain-Verilog system testbench,
sim/system/rtl_host.py) and reads the flags in the phase's status line."""

import numpy as np
import pytest

from arch.ports import Port
from arch.router_map import ROUTER_ADDR_SPAN, route_addr, route_mask
from arch.tile_map import mesh_tile_addr_bits, tile_address
from arch.wafer_map import ADAPTER, adapter_base
from arch.wavelet import pack_wavelet
from hdl.config import preset
from sim.system.rtl_host import PhaseRunner
from sim.system.rtl_training import PhaseRequest

pytestmark = pytest.mark.xdist_group("system-flags")     # one testbench build

COLOR = 1
DEPTHS = {"cfg_depth": 8, "bcast_depth": 4, "root_depth": 4, "edge_depth": 4, "west_in_depth": 4}


@pytest.fixture(scope="module")
def cfg():
    return preset("tiny", mesh_rows=2, mesh_cols=2, swarmx_leaves=2)


def tile(cfg, row, col, local):
    return tile_address(cfg.mesh_cols, row, col, local, mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks))


def run(cfg, tmp_path, writes, *, wavelets=1, roots=(0, 0)):
    """Status after two phases: ``writes[i]`` wafer i's configuration writes, then ``wavelets``
    wavelets of ``COLOR`` into the west edge of every row of every wafer; then an empty phase
    (the flags are sticky; a phase can end before what it sent has arrived)."""
    words = np.array([pack_wavelet(0x3F80_0000 + k, COLOR) for k in range(wavelets)], dtype=np.uint64)
    n, P = cfg.swarmx_leaves, cfg.mesh_rows
    req = PhaseRequest(what="flags", writes=writes, streams=[np.zeros(0, np.uint64)] * cfg.mesh_cols,
                       west_in=[[words] * P for _ in range(n)] if wavelets else [], roots=list(roots))
    empty = PhaseRequest(what="empty", writes=[[]] * n, streams=req.streams, roots=[0] * cfg.mesh_cols)
    with PhaseRunner(cfg, DEPTHS, tmp_path) as runner:
        first = runner.status(req)
        assert not first["timeout"], first
        return runner.status(empty)


def west_to(cfg, port):
    """Routes of ``COLOR`` in column 0: every row's west input to output ``port``."""
    return [(tile(cfg, p, 0, route_addr(COLOR, Port.W)), route_mask([port])) for p in range(cfg.mesh_rows)]


def test_a_router_error_of_a_wafer_raises_error(cfg, tmp_path):
    """A write to an unmapped router address (``BAD_ADDR``) in wafer 1 only."""
    route = (tile(cfg, 0, 1, route_addr(COLOR, Port.W)), route_mask(["E"]))
    bad = (tile(cfg, 0, 1, ROUTER_ADDR_SPAN - 1), 1)
    st = run(cfg, tmp_path, [[route, route], [route, bad]], wavelets=0)
    assert (st["error"], st["fault"], st["timeout"]) == (1, 0, 0), st


def test_a_pe_fault_of_a_wafer_raises_fault(cfg, tmp_path):
    """Wavelets routed to a core with no descriptor listening (``UNBOUND``)."""
    routes = west_to(cfg, "RAMP")
    st = run(cfg, tmp_path, [routes, routes])
    assert (st["fault"], st["error"]) == (1, 0), st


def test_a_swarmx_last_mismatch_raises_error(cfg, tmp_path):
    """Both wafers send two words up gradient link 0; wafer 0 ends a block after every word, wafer
    1 after two, so the tree joins ``last`` 1 with ``last`` 0: a SwarmX error, no wafer error."""
    routes = west_to(cfg, "N") + [(tile(cfg, 0, 0, route_addr(COLOR, Port.S)), route_mask(["N"]))]
    g_count = adapter_base() + ADAPTER["G_COUNT"]
    st = run(cfg, tmp_path, [routes + [(g_count, 1)], routes + [(g_count, 2)]], roots=(2, 0))
    assert (st["error"], st["fault"], st["timeout"]) == (1, 0, 0), st
