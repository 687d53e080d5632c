"""A system of two ``tiny`` wafers of 2 x 2 tiles on the plain-Verilog system testbench
(sim/system/rtl_host.py), driven phase by phase: for tests of what the wafer and system tops
do between their blocks (flags, adapter registers)."""

import numpy as np
import pytest

from arch.ports import Port
from arch.router_map import route_addr, route_mask
from arch.tile_map import mesh_tile_addr_bits, tile_address
from arch.wavelet import pack_wavelet
from hdl.config import preset
from sim.kit.testbench import harness_simulator
from sim.system.rtl_host import PhaseRunner, read_hex
from sim.system.rtl_phases import PhaseRequest


class TinySystem:
    """``cfg`` (``tiny``, 2 x 2 tiles, 2 wafers); :meth:`run` runs phases on one testbench process
    (the wafers keep their state from one phase to the next) in folder ``work``."""

    COLOR = 1
    DEPTHS = {"cfg_depth": 8, "bcast_depth": 4, "root_depth": 4, "edge_depth": 4, "west_in_depth": 4}

    def __init__(self, work):
        self.cfg = preset("tiny", mesh_rows=2, mesh_cols=2, swarmx_leaves=2)
        self.work = work

    def tile(self, row, col, local):
        """Bus address of ``local`` in tile ``(row, col)``."""
        c = self.cfg
        return tile_address(c.mesh_cols, row, col, local, mesh_tile_addr_bits(c.sram_words, c.num_tasks))

    def route(self, row, col, port_in, port_out):
        """The write routing ``COLOR`` from ``port_in`` to ``port_out`` (names) in tile ``(row, col)``."""
        return self.tile(row, col, route_addr(self.COLOR, Port[port_in])), route_mask([port_out])

    def phase(self, writes, *, wavelets=0, roots=(0, 0)):
        """A phase: ``writes[i]`` wafer i's configuration writes (the same count each), then
        ``wavelets`` wavelets of ``COLOR`` into the west edge of every row of every wafer;
        ``roots[q]`` words expected on gradient link q."""
        c = self.cfg
        words = np.array([pack_wavelet(0x3F80_0000 + k, self.COLOR) for k in range(wavelets)], np.uint64)
        return PhaseRequest(what="phase", writes=writes, streams=[np.zeros(0, np.uint64)] * c.mesh_cols,
                            west_in=[[words] * c.mesh_rows for _ in range(c.swarmx_leaves)] if wavelets else [],
                            roots=list(roots))

    def run(self, *phases):
        """The status line of each phase (``sim.harness.system_tb.STATUS_FIELDS``) and the words
        of the last phase's gradient links (``roots[q]`` each, uint64 tagged words)."""
        with PhaseRunner(self.cfg, self.DEPTHS, self.work, simulator=harness_simulator()) as runner:
            states = [runner.status(p) for p in phases]
        roots = [read_hex(self.work / f"root{q}.hex", n) if n else [] for q, n in enumerate(phases[-1].roots)]
        return states, roots


@pytest.fixture
def tiny_system(tmp_path):
    return TinySystem(tmp_path)
