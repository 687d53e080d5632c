"""The PE core's store engine (docs/pe.md#second-input): takes wavelets from ``rx2`` (the router's
RAMP2 channel) and runs one step of the active ``STORE`` descriptor listening on their color,
beside the wavelet engine, so partial sums and results arriving on their own channel never take
a cycle of the FMAC lanes.

Stage 0 (the cycle of the ``rx2`` transfer): match the color among the active STORE descriptors,
check (faults ``UNBOUND``: no active STORE on the color, ``DUP_COLOR``: two, or the wavelet engine
steps the same descriptor in this cycle; ``RANGE``; in that order, the wavelet is dropped), step
the descriptor (``step[t]``, or ``stop[t]`` on ``RANGE``, to the table, which computed the step's
flags and word address beforehand: ``unit_end``, ``past``, ``saddr``). Stage 1 (the next cycle):
write the word (``wr_*``) when it is in the index range, and count the unit (``inc``).

A stage-1 write whose bank the wavelet engine writes in the same cycle (``wr_blocked``) waits a
cycle, and so does ``rx2``: ``rx2.ready`` is low exactly in the cycles stage 1 waits (it depends
on registers and the wavelet engine's stage 1 only, never on ``rx2``). The unit is counted when
its last word is written.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from arch.pe_map import FAULT_STATUS, Fault, Op

from ..layouts import as_array, two_or_more
from ..wavelet import Wavelet
from .descriptor_table import state_shapes

__all__ = ["StoreEngine"]


class StoreEngine(wiring.Component):
    def __init__(self, cfg):
        self._cfg = cfg
        T = cfg.num_tasks
        idx = range(max(T, 2))
        state = state_shapes(cfg, "desc", "active", "in_range", "unit_end", "past", "saddr")
        super().__init__({
            "rx2": In(stream.Signature(Wavelet)),
            **{name: In(shape) for name, shape in state.items()},
            "w_step": In(T),
            "step": Out(T), "stop": Out(T),
            "inc": Out(1), "inc_t": Out(idx),
            "wr_addr": Out(16), "wr_data": Out(32), "wr_en": Out(1), "wr_blocked": In(1),
            "fault": Out(1), "fault_code": Out(FAULT_STATUS.field_width("code")),
            "fault_index": Out(FAULT_STATUS.field_width("index")),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        T = cfg.num_tasks

        # ---- stage 1: the word waiting to be written ----------------------------------------
        s1_full, s1_write, s1_unit_end = Signal(), Signal(), Signal()
        s1_t = Signal(range(max(T, 2)))
        s1_addr, s1_data = Signal(16), Signal(32)
        wait = Signal()
        m.d.comb += [
            wait.eq(s1_full & s1_write & self.wr_blocked),
            self.wr_en.eq(s1_full & s1_write),
            self.wr_addr.eq(s1_addr),
            self.wr_data.eq(s1_data),
            self.inc.eq(s1_full & s1_unit_end & ~wait),
            self.inc_t.eq(s1_t),
            self.rx2.ready.eq(~wait),
        ]

        # ---- stage 0 ------------------------------------------------------------------------
        fire = self.rx2.valid & ~wait
        color = self.rx2.payload.color
        match = Signal(T)
        m.d.comb += match.eq(Cat(self.active[t] & (self.desc[t].op == Op.STORE)
                                 & (self.desc[t].color == color) for t in range(T)))
        sel = Signal(range(max(T, 2)))
        for t in reversed(range(T)):
            with m.If(match[t]):
                m.d.comb += sel.eq(t)
        dup = two_or_more(match) | (self.w_step & match).any()
        in_range = (match & self.in_range).any()
        unit_end = (match & self.unit_end).any()
        past = (match & self.past).any()
        word = as_array(self.saddr)[sel]
        taken = fire & match.any() & ~dup
        m.d.comb += [
            self.step.eq(Mux(taken, match & ~self.past, 0)),
            self.stop.eq(Mux(taken, match & self.past, 0)),
        ]
        with m.If(fire):
            m.d.comb += self.fault.eq(~match.any() | dup | past)
            with m.If(~match.any()):
                m.d.comb += [self.fault_code.eq(Fault.UNBOUND), self.fault_index.eq(color)]
            with m.Elif(dup):
                m.d.comb += [self.fault_code.eq(Fault.DUP_COLOR), self.fault_index.eq(sel)]
            with m.Else():
                m.d.comb += [self.fault_code.eq(Fault.RANGE), self.fault_index.eq(sel)]

        with m.If(~wait):
            m.d.sync += [
                s1_full.eq(self.step.any()),
                s1_write.eq(in_range),
                s1_unit_end.eq(unit_end),
                s1_t.eq(sel),
                s1_addr.eq(Mux(in_range, word, 0)),
                s1_data.eq(self.rx2.payload.data),
            ]
        return m
