"""A weight-streaming system top (docs/wafer.md): ``N = cfg.swarmx_leaves`` RTL wafers
(:class:`hdl.wafer.Wafer`) behind ``Q = cfg.mesh_cols`` SwarmX trees (:class:`hdl.swarmx.SwarmxTree`),
one per weight/gradient link (a mesh column of every wafer).

::

    weights[q] --> tree<q>.bcast_in --bcast_out[n]--> wafer<n>.weights[q]
    wafer<n>.grads[q] --> tree<q>.reduce_in[n] --reduce_out--> grads[q]

Ports (``P = cfg.mesh_rows``)
-----------------------------
``weights: In(stream.Signature(TaggedWord)).array(Q)`` (from MemoryX: link ``q`` carries the
weights of column ``q``, bf16 in the low half), ``grads: Out(stream.Signature(TaggedWord)).array(Q)``
(to MemoryX: on link ``q`` the fp32 sums of the N wafers' column-``q`` gradient words in tree
order), ``cfg: In(ConfigBus()).array(N)`` (wafer n's bus, see
:mod:`hdl.wafer`), ``west_in``, ``west_out``, ``east_in``, ``east_out``: ``N x P`` arrays of
wavelet streams (the host edges of wafer n, row p), ``error: Out(1)`` (SwarmX last mismatch or
any router error), ``fault: Out(1)`` (any PE core fault), ``busy: Out(1)`` (any wafer's ``busy``).
"""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config_bus import ConfigBus
from .shared_block import shared
from .swarmx import SwarmxTree
from .wafer import Wafer
from .wavelet import TaggedWord, Wavelet

__all__ = ["System"]


class System(wiring.Component):
    """A SwarmX tree per mesh column + ``cfg.swarmx_leaves`` wafers of ``cfg.mesh_rows x cfg.mesh_cols`` PE tiles."""

    def __init__(self, cfg):
        n, P, Q = cfg.swarmx_leaves, cfg.mesh_rows, cfg.mesh_cols
        self._cfg = cfg
        tree_key = SwarmxTree.config_key(cfg)
        self.trees = [shared(SwarmxTree.from_config(cfg), "swarmx_tree", tree_key) for _ in range(Q)]
        self.wafers = [shared(Wafer(cfg), "wafer", cfg) for _ in range(n)]
        wave, tagged = stream.Signature(Wavelet), stream.Signature(TaggedWord)
        super().__init__({
            "weights": In(tagged).array(Q), "grads": Out(tagged).array(Q),
            "cfg": In(ConfigBus()).array(n),
            "west_in": In(wave).array(n, P), "west_out": Out(wave).array(n, P),
            "east_in": In(wave).array(n, P), "east_out": Out(wave).array(n, P),
            "error": Out(1), "fault": Out(1), "busy": Out(1),
        })

    @property
    def config(self):
        return self._cfg

    def elaborate(self, platform):
        m = Module()
        error, fault, busy = 0, 0, 0
        for q, tree in enumerate(self.trees):
            m.submodules[f"tree{q}"] = tree
            wiring.connect(m, wiring.flipped(self.weights[q]), tree.bcast_in)
            wiring.connect(m, tree.reduce_out, wiring.flipped(self.grads[q]))
            for i, wafer in enumerate(self.wafers):
                wiring.connect(m, tree.bcast_out[i], wafer.weights[q])
                wiring.connect(m, wafer.grads[q], tree.reduce_in[i])
            error = error | tree.error
        for i, wafer in enumerate(self.wafers):
            m.submodules[f"wafer{i}"] = wafer
            wiring.connect(m, wiring.flipped(self.cfg[i]), wafer.cfg)
            for p in range(self._cfg.mesh_rows):
                wiring.connect(m, wiring.flipped(self.west_in[i][p]), wafer.west_in[p])
                wiring.connect(m, wafer.west_out[p], wiring.flipped(self.west_out[i][p]))
                wiring.connect(m, wiring.flipped(self.east_in[i][p]), wafer.east_in[p])
                wiring.connect(m, wafer.east_out[p], wiring.flipped(self.east_out[i][p]))
            error = error | wafer.error
            fault = fault | wafer.fault
            busy = busy | wafer.busy
        m.d.comb += [self.error.eq(error), self.fault.eq(fault), self.busy.eq(busy)]
        return m
