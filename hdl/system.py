"""A weight-streaming system top (docs/wafer.md): a SwarmX tree (:class:`hdl.swarmx.SwarmxTree`)
feeding ``N = cfg.swarmx_leaves`` RTL wafers (:class:`hdl.wafer.Wafer`).

::

    weights --> SwarmxTree.bcast_in --bcast_out[n]--> wafer<n>.weights
    wafer<n>.grads --> SwarmxTree.reduce_in[n] --reduce_out--> grads

Ports (``P = cfg.mesh_rows``)
-----------------------------
``weights: In(stream.Signature(TaggedWord))`` (from MemoryX: bf16 in the low half, ``last`` on a
layer's final word), ``grads: Out(stream.Signature(TaggedWord))`` (to MemoryX: fp32 sums of the
N wafers' gradient words in tree order), ``cfg: In(ConfigBus()).array(N)`` (wafer n's bus, see
:mod:`hdl.wafer`), ``west_in``, ``west_out``, ``east_in``, ``east_out``: ``N x P`` arrays of
wavelet streams (the host edges of wafer n, row p), ``error: Out(1)`` (SwarmX last mismatch or
any router error), ``fault: Out(1)`` (any PE core fault).
"""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config_bus import ConfigBus
from .swarmx import SwarmxTree
from .wafer import Wafer
from .wavelet import TaggedWord, Wavelet

__all__ = ["System"]


class System(wiring.Component):
    """SwarmX tree + ``cfg.swarmx_leaves`` wafers of ``cfg.mesh_rows x cfg.mesh_cols`` PE tiles."""

    def __init__(self, cfg):
        n, P = cfg.swarmx_leaves, cfg.mesh_rows
        self._cfg = cfg
        self.tree = SwarmxTree.from_config(cfg)
        self.wafers = [Wafer(cfg) for _ in range(n)]
        wave, tagged = stream.Signature(Wavelet), stream.Signature(TaggedWord)
        super().__init__({
            "weights": In(tagged), "grads": Out(tagged),
            "cfg": In(ConfigBus()).array(n),
            "west_in": In(wave).array(n, P), "west_out": Out(wave).array(n, P),
            "east_in": In(wave).array(n, P), "east_out": Out(wave).array(n, P),
            "error": Out(1), "fault": Out(1),
        })

    @property
    def config(self):
        return self._cfg

    def elaborate(self, platform):
        m = Module()
        m.submodules.tree = tree = self.tree
        wiring.connect(m, wiring.flipped(self.weights), tree.bcast_in)
        wiring.connect(m, tree.reduce_out, wiring.flipped(self.grads))
        error, fault = tree.error, 0
        for i, wafer in enumerate(self.wafers):
            m.submodules[f"wafer{i}"] = wafer
            wiring.connect(m, tree.bcast_out[i], wafer.weights)
            wiring.connect(m, wafer.grads, tree.reduce_in[i])
            wiring.connect(m, wiring.flipped(self.cfg[i]), wafer.cfg)
            for p in range(self._cfg.mesh_rows):
                wiring.connect(m, wiring.flipped(self.west_in[i][p]), wafer.west_in[p])
                wiring.connect(m, wafer.west_out[p], wiring.flipped(self.west_out[i][p]))
                wiring.connect(m, wiring.flipped(self.east_in[i][p]), wafer.east_in[p])
                wiring.connect(m, wafer.east_out[p], wiring.flipped(self.east_out[i][p]))
            error = error | wafer.error
            fault = fault | wafer.fault
        m.d.comb += [self.error.eq(error), self.fault.eq(fault)]
        return m
