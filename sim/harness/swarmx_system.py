"""Simulation top of the system bench: memory-backed players and recorders around the SwarmX
tree (``hdl.swarmx.SwarmxTree``), so whole phases run without Python on the per-cycle path.

::

    bcast_player --> SwarmxTree.bcast_in        SwarmxTree.bcast_out[n] --> leaf_rec<n>
    reduce_player<n> --> SwarmxTree.reduce_in[n]  SwarmxTree.reduce_out --> root_rec

Control ports (driven by the bench between phases): ``start`` (one-cycle pulse: players begin,
recorders clear), ``bcast_count`` / ``reduce_count`` (words each player sends), ``src_stall`` /
``sink_stall`` (LFSR stall thresholds, 0..255), ``done`` (registered: every player finished and
every recorder holds the words it should), ``overflow`` (a recorder overflowed), ``error`` (the
tree's sticky ``last`` mismatch).
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.swarmx import SwarmxTree
from hdl.wavelet import TaggedWord

from .stream_player import StreamPlayer, StreamRecorder

__all__ = ["SwarmxSystemHarness"]


class SwarmxSystemHarness(wiring.Component):
    def __init__(self, leaves, depth, *, fifo_depth=4):
        self._leaves, self._depth, self._fifo_depth = leaves, depth, fifo_depth
        super().__init__({
            "start": In(1), "bcast_count": In(32), "reduce_count": In(32),
            "src_stall": In(8), "sink_stall": In(8),
            "done": Out(1), "overflow": Out(1), "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n, depth = self._leaves, self._depth
        m.submodules.tree = tree = SwarmxTree(n, fifo_depth=self._fifo_depth)
        m.submodules.bcast_player = bp = StreamPlayer(TaggedWord, depth, seed=0x1D)
        m.submodules.root_rec = rr = StreamRecorder(TaggedWord, depth, seed=0x2B)
        players, recorders = [], []
        for i in range(n):
            p = StreamPlayer(TaggedWord, depth, seed=0x101 + 7 * i)
            r = StreamRecorder(TaggedWord, depth, seed=0x203 + 11 * i)
            m.submodules[f"reduce_player{i}"] = p
            m.submodules[f"leaf_rec{i}"] = r
            players.append(p)
            recorders.append(r)
            wiring.connect(m, tree.bcast_out[i], r.i)
            wiring.connect(m, p.o, tree.reduce_in[i])
        wiring.connect(m, bp.o, tree.bcast_in)
        wiring.connect(m, tree.reduce_out, rr.i)

        for p in [bp, *players]:
            m.d.comb += [p.start.eq(self.start), p.stall.eq(self.src_stall)]
        m.d.comb += bp.count.eq(self.bcast_count)
        for p in players:
            m.d.comb += p.count.eq(self.reduce_count)
        for r in [rr, *recorders]:
            m.d.comb += [r.start.eq(self.start), r.stall.eq(self.sink_stall)]

        finished = Signal()
        busy = bp.busy
        for p in players:
            busy = busy | p.busy
        complete = rr.count == self.reduce_count
        overflow = rr.overflow
        for r in recorders:
            complete = complete & (r.count == self.bcast_count)
            overflow = overflow | r.overflow
        m.d.comb += finished.eq(~busy & complete & ~self.start)
        m.d.sync += [self.done.eq(finished), self.overflow.eq(overflow)]
        m.d.comb += self.error.eq(tree.error)
        return m
