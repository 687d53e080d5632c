"""Simulation top of the RTL-wafer system bench: memory-backed players and recorders around
:class:`hdl.system.System` (a SwarmX tree per mesh column + N RTL wafers), so whole phases run without Python on the
per-cycle path.

::

    bcast_player<q> --> System.weights[q]      System.grads[q] --> root_rec<q>   (per mesh column q)
    cfg_player<n> --> System.cfg[n]            (one (addr, data) write per cycle)
    west_player<n>_<p> --> System.west_in[n][p]
    System.west_out[n][p] --> west_rec<n>_<p>  System.east_out[n][p] --> east_rec<n>_<p>

A phase is two pulses: ``start`` clears the recorders and starts the configuration players
(``cfg_count`` writes each, all wafers the same count); ``cfg_done`` rises (registered) when the
first ``go_count`` of them are written (0 or ``go_count >= cfg_count``: all; the others are
written while the phase runs); when it is high, ``go`` starts the broadcast players
(``bcast_count[q]`` words on weight link ``q``) and the west players (``west_in_count``
wavelets each, the host's input at the west edge of every mesh row); ``done`` (registered)
rises after ``go``, when every player has finished, ``root_rec<q>`` holds ``root_count[q]``
words, every west / east recorder holds ``west_count`` / ``east_count`` and no PE is ``busy``
(every run has ended: what the phase keeps in SRAM is written) and every configuration write is
written. ``cfg_cycles``: cycles from ``start`` until the configuration players wrote their first
``go_count`` words (or finished); ``run_cycles``: cycles from ``go`` until ``done``'s condition
first held.
``overflow`` (a recorder overflowed), ``error`` (SwarmX last mismatch or a router error),
``fault`` (a PE core fault). ``stall`` (0..255): LFSR stalls at the weight and west players and
the recorders.
``bcast_first`` / ``bcast_last``: cycle stamps of the first and the last transfer of any weight
player that has words (0 when none has).

``auto_go`` (for testbenches that react only at clock edges, ``sim/harness/system_tb.py``): when
high, the harness raises ``go`` itself in the first cycle ``cfg_done`` is high after ``start``,
the cycle a bench pulsing ``go`` as soon as it sees ``cfg_done`` rise would raise it (so the
cycle counts are the same either way).
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from arch.config_bus import ADDR_BITS, WORD_BITS, WORD_MASK
from arch.layout import BitLayout
from hdl.layouts import struct_layout
from hdl.system import System
from hdl.wavelet import TaggedWord, Wavelet

from .stream_player import StreamPlayer, StreamRecorder

__all__ = ["RtlSystemHarness", "CFG_WRITE", "CfgWrite", "cfg_word"]

# A configuration player's memory word: one bus write.
CFG_WRITE = BitLayout("configuration write", ("addr", ADDR_BITS), ("data", WORD_BITS))
CfgWrite = struct_layout(CFG_WRITE)


def cfg_word(addr, value):
    """A configuration player's memory word for ``(addr, value)`` (both wrapped to their widths)."""
    return CFG_WRITE.pack(addr=int(addr) & ((1 << ADDR_BITS) - 1), data=int(value) & WORD_MASK)


class RtlSystemHarness(wiring.Component):
    def __init__(self, cfg, *, cfg_depth, bcast_depth, root_depth, edge_depth, west_in_depth):
        self._cfg = cfg
        self._depths = cfg_depth, bcast_depth, root_depth, edge_depth, west_in_depth
        super().__init__({
            "start": In(1), "go": In(1), "auto_go": In(1), "cfg_count": In(32), "go_count": In(32),
            "bcast_count": In(32).array(cfg.mesh_cols), "west_in_count": In(32),
            "root_count": In(32).array(cfg.mesh_cols), "west_count": In(32), "east_count": In(32),
            "stall": In(8),
            "cfg_done": Out(1), "done": Out(1), "overflow": Out(1), "error": Out(1),
            "fault": Out(1), "cfg_cycles": Out(32), "run_cycles": Out(32),
            "bcast_first": Out(32), "bcast_last": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        n, P, Q = cfg.swarmx_leaves, cfg.mesh_rows, cfg.mesh_cols
        cfg_depth, bcast_depth, root_depth, edge_depth, west_in_depth = self._depths
        m.submodules.system = system = System(cfg)
        # go: the input, or (auto_go) the first cycle cfg_done is high after start.
        armed, go = Signal(), Signal()
        m.d.comb += go.eq(self.go | (self.auto_go & armed & self.cfg_done))
        with m.If(self.start):
            m.d.sync += armed.eq(1)
        with m.Elif(go):
            m.d.sync += armed.eq(0)
        cfg_busy, play_busy, complete, overflow = 0, 0, 1, 0
        written = Signal(32)            # configuration words written since start (every player's)
        recorders = []
        first, last = None, None
        for q in range(Q):
            bp = m.submodules[f"bcast_player{q}"] = StreamPlayer(TaggedWord, bcast_depth, seed=0x1D + q)
            rr = m.submodules[f"root_rec{q}"] = StreamRecorder(TaggedWord, root_depth, seed=0x2B + q)
            wiring.connect(m, bp.o, system.weights[q])
            wiring.connect(m, system.grads[q], rr.i)
            m.d.comb += [bp.start.eq(go), bp.count.eq(self.bcast_count[q]), bp.stall.eq(self.stall)]
            play_busy = play_busy | bp.busy
            complete = complete & (rr.count == self.root_count[q])
            overflow = overflow | rr.overflow
            recorders.append(rr)
            has = self.bcast_count[q] != 0
            first = Mux(has, bp.first_stamp, 0) if first is None else \
                Mux(has & ((first == 0) | (bp.first_stamp < first)), bp.first_stamp, first)
            last = Mux(has, bp.last_stamp, 0) if last is None else \
                Mux(has & (bp.last_stamp > last), bp.last_stamp, last)
        m.d.comb += [self.bcast_first.eq(first), self.bcast_last.eq(last)]
        for i in range(n):
            cp = StreamPlayer(CfgWrite, cfg_depth, seed=0x33 + i)
            m.submodules[f"cfg_player{i}"] = cp
            bus = system.cfg[i]
            m.d.comb += [cp.start.eq(self.start), cp.count.eq(self.cfg_count), cp.stall.eq(0),
                         cp.o.ready.eq(1), bus.addr.eq(cp.o.payload.addr),
                         bus.wdata.eq(cp.o.payload.data), bus.we.eq(cp.o.valid)]
            cfg_busy = cfg_busy | cp.busy
            if i == 0:
                with m.If(self.start):
                    m.d.sync += written.eq(0)
                with m.Elif(cp.o.valid):
                    m.d.sync += written.eq(written + 1)
            for p in range(P):
                wp = StreamPlayer(Wavelet, west_in_depth, seed=0x201 + 17 * i + 5 * p)
                m.submodules[f"west_player{i}_{p}"] = wp
                wiring.connect(m, wp.o, system.west_in[i][p])
                m.d.comb += [wp.start.eq(go), wp.count.eq(self.west_in_count), wp.stall.eq(self.stall)]
                play_busy = play_busy | wp.busy
                for side, count in (("west", self.west_count), ("east", self.east_count)):
                    rec = StreamRecorder(Wavelet, edge_depth, seed=0x101 + 17 * i + 5 * p)
                    m.submodules[f"{side}_rec{i}_{p}"] = rec
                    wiring.connect(m, getattr(system, f"{side}_out")[i][p], rec.i)
                    complete = complete & (rec.count == count)
                    overflow = overflow | rec.overflow
                    recorders.append(rec)
        for rec in recorders:
            m.d.comb += [rec.start.eq(self.start), rec.stall.eq(self.stall)]

        cfg_finished, cfg_go = Signal(), Signal()
        m.d.comb += [cfg_finished.eq(~cfg_busy & ~self.start),
                     cfg_go.eq(cfg_finished | (~self.start & (self.go_count != 0) & (written >= self.go_count)))]
        finished = Signal()
        m.d.comb += finished.eq(cfg_finished & ~armed & ~play_busy & ~go & complete & ~system.busy)
        m.d.sync += [self.cfg_done.eq(cfg_go), self.done.eq(finished),
                     self.overflow.eq(overflow)]
        with m.If(self.start):
            m.d.sync += self.cfg_cycles.eq(0)
        with m.Elif(~cfg_go):
            m.d.sync += self.cfg_cycles.eq(self.cfg_cycles + 1)
        with m.If(go):
            m.d.sync += self.run_cycles.eq(1)
        with m.Elif(~finished):
            m.d.sync += self.run_cycles.eq(self.run_cycles + 1)
        m.d.comb += [self.error.eq(system.error), self.fault.eq(system.fault)]
        return m
