"""The proofs of ``make formal`` (docs/verification.md#formal): every block with stream
properties in its ``_formal`` method, in small configurations, proved by
:func:`sim.kit.formal.prove`. ``QUICK`` also runs in ``make test`` (``tests/sim/formal``)."""

from arch.ports import Port
from hdl.config import preset
from hdl.fp.bf16_mul import Bf16Mul
from hdl.fp.fp32_add import Fp32Add
from hdl.skid_buffer import SkidBuffer
from hdl.swarmx import SwarmxNode, SwarmxReduceUnit, SwarmxTree

__all__ = ["PROOFS", "QUICK", "Proof"]


class Proof:
    """``make()`` builds the top; ``steps`` bounds the base case and the induction length;
    ``fair_stall`` (cycles) bounds the consumer's stalls at the top (``None``: any)."""

    def __init__(self, name, make, *, steps=20, fair_stall=None, covers="top", cover_steps=None, what=""):
        self.name, self.make, self.steps, self.fair_stall, self.what = name, make, steps, fair_stall, what
        self.covers, self.cover_steps = covers, cover_steps


def _router(links=()):
    from hdl.router import Router  # (imported late: the router is the largest module)
    return Router(preset("tiny", num_colors=2, vc_depth=2), links=links)


def _descriptor_table():
    from hdl.pe.descriptor_table import DescriptorTable
    return DescriptorTable(preset("tiny", num_tasks=3, sram_words=64, add_stages=1))


def _mesh_link():
    from sim.formal.mesh_link import MeshLink
    return MeshLink(preset("tiny", num_colors=2, vc_depth=2))


PROOFS = [
    Proof("skid_buffer", lambda: SkidBuffer(8), what="SkidBuffer(8)"),
    Proof("fp32_add", Fp32Add, steps=8, what="Fp32Add stream unit"),
    Proof("bf16_mul", Bf16Mul, steps=8, what="Bf16Mul stream unit"),
    Proof("fp32_add_l4", lambda: Fp32Add(4), steps=10, what="Fp32Add stream unit, fp_latency 4"),
    Proof("bf16_mul_l4", lambda: Bf16Mul(4), steps=10, what="Bf16Mul stream unit, fp_latency 4"),
    Proof("swarmx_unit", lambda: SwarmxReduceUnit(2), steps=12, covers="all", what="SwarmxReduceUnit(2)"),
    Proof("swarmx_unit_last", lambda: SwarmxReduceUnit(2), steps=16, fair_stall=1,
          what="SwarmxReduceUnit(2), consumer stalls <= 1 cycle: last accounting"),
    Proof("swarmx_node", lambda: SwarmxNode(4, fifo_depth=2), steps=12, what="SwarmxNode(4), fifo_depth 2"),
    Proof("swarmx_split_node", lambda: SwarmxNode(3, split=True, fifo_depth=2), steps=12,
          what="SwarmxNode(3, split), fifo_depth 2"),
    # a word needs 2 x (2 L + 3) = 14 cycles from the leaves to the root: covers look 16 deep
    Proof("swarmx_tree", lambda: SwarmxTree(5, fifo_depth=2), steps=12, cover_steps=16,
          what="SwarmxTree(5): depth 2"),
    Proof("router", lambda: _router(), steps=12, what="Router, 2 colors, vc_depth 2, boundary ports"),
    Proof("router_links", lambda: _router(links=(Port.N, Port.E)), steps=12,
          what="Router, 2 colors, vc_depth 2, N and E credit links"),
    # a chained start needs 5 cycles from reset, a run's last row group of 3 rows 6
    Proof("descriptor_table", _descriptor_table, steps=8, cover_steps=10,
          what="DescriptorTable, 3 tasks, 2 lanes, acc_rows 2, 64 SRAM words"),
    Proof("mesh_link", _mesh_link, steps=12,
          what="Mesh 1 x 2: two routers, a credit link each way, 2 colors, vc_depth 2"),
]

QUICK = ["skid_buffer", "swarmx_unit", "router", "descriptor_table"]
