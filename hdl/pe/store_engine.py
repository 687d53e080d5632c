"""The PE core's store engine (docs/pe.md#second-input): takes wavelets from ``rx2`` (the router's
RAMP2 channel) and runs one step of the active ``STORE`` descriptor listening on their color,
beside the wavelet engine, so partial sums and results arriving on their own channel never take
a cycle of the FMAC lanes.

Stage 0 (the cycle of the ``rx2`` transfer): match the color among the active STORE descriptors,
check (faults ``UNBOUND``: no active STORE on the color, ``DUP_COLOR``: two, or the wavelet engine's
wavelet of this cycle matches the same descriptor; ``RANGE``; in that order, the wavelet is dropped), step
the descriptor (``step[t]``, or ``stop[t]`` on ``RANGE``, to the table, which computed the step's
flags and word address beforehand: ``unit_end``, ``past``, ``saddr``) and put the word into
stage 1.

Stage 1 holds two words in registers, the head ``h`` and the word behind it ``b`` (``b`` full only
with ``h``), written in order (their vector in the index range; else a word just leaves), one
unit counted per cycle (``inc``, in the cycle a unit's last word goes). In each cycle:

* ``h`` is written (``wr_*``) unless the wavelet engine writes its bank in this cycle
  (``wr_blocked``): then it waits;
* ``b`` is written in the same cycle as ``h`` (``wr2_*``: a second word, to another bank, so
  still one write per bank) unless the wavelet engine writes its bank (``wr2_blocked``, which
  also covers ``h``'s bank), or ``h`` and ``b`` both end a unit; else it becomes the head;
* ``rx2.ready`` is low only while ``b`` is full and ``h`` waits (it depends on registers and the
  wavelet engine's write only, never on ``rx2``); a taken word goes to ``h`` if ``h`` leaves
  (and ``b`` too), else to ``b``.

So a word that waits for its bank costs ``rx2`` nothing: the next word comes in behind it and the
two go together once the bank is free (an FMAC row write takes its banks for one cycle), so a
stream of one word per cycle loses a cycle only when the head waits two cycles in a row or the
two words cannot go together. A word taken in cycle ``t`` into an empty stage 1 is written in
``t + 1`` unless its bank is taken then. ``pending``: a word stays in stage 1 after this cycle (the
core's ``busy``). The cycle model is ``models.pe.StoreQueue``.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from arch.pe_map import FAULT_STATUS, Fault, Op

from ..layouts import as_array
from ..logic import two_or_more
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
            "w_match": In(T),
            "step": Out(T), "stop": Out(T),
            "inc": Out(1), "inc_t": Out(idx),
            "wr_addr": Out(16), "wr_data": Out(32), "wr_en": Out(1), "wr_blocked": In(1),
            "wr2_addr": Out(16), "wr2_data": Out(32), "wr2_en": Out(1), "wr2_blocked": In(1),
            "pending": Out(1),
            "fault": Out(1), "fault_code": Out(FAULT_STATUS.field_width("code")),
            "fault_index": Out(FAULT_STATUS.field_width("index")),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        T = cfg.num_tasks

        # ---- stage 1: two words, the head h and the word behind it b ------------------------
        entry = data.StructLayout({"write": 1, "unit_end": 1, "t": range(max(T, 2)), "addr": 16,
                                   "data": 32})
        h, b = Signal(entry, name="h"), Signal(entry, name="b")
        h_full, b_full = Signal(), Signal()
        h_wait, h_go, b_go = Signal(), Signal(), Signal()
        m.d.comb += [
            h_wait.eq(h_full & h.write & self.wr_blocked),
            h_go.eq(h_full & ~h_wait),
            b_go.eq(b_full & h_go & ~(b.write & self.wr2_blocked) & ~(h.unit_end & b.unit_end)),
            self.wr_en.eq(h_full & h.write),
            self.wr_addr.eq(h.addr),
            self.wr_data.eq(h.data),
            self.wr2_en.eq(b_full & b.write & h_go & ~(h.unit_end & b.unit_end)),
            self.wr2_addr.eq(b.addr),
            self.wr2_data.eq(b.data),
            self.inc.eq((h_go & h.unit_end) | (b_go & b.unit_end)),
            self.inc_t.eq(Mux(h.unit_end, h.t, b.t)),
            self.pending.eq((h_full & ~h_go) | (b_full & ~b_go)),
            self.rx2.ready.eq(~(b_full & h_wait)),
        ]

        # ---- stage 0 ------------------------------------------------------------------------
        fire = self.rx2.valid & self.rx2.ready
        color = self.rx2.payload.color
        match = Signal(T)
        m.d.comb += match.eq(Cat(self.active[t] & (self.desc[t].op == Op.STORE)
                                 & (self.desc[t].color == color) for t in range(T)))
        sel = Signal(range(max(T, 2)))
        for t in reversed(range(T)):
            with m.If(match[t]):
                m.d.comb += sel.eq(t)
        dup = two_or_more(match) | (self.w_match & match).any()
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

        new = Signal(entry, name="s0")
        m.d.comb += [
            new.write.eq(in_range),
            new.unit_end.eq(unit_end),
            new.t.eq(sel),
            new.addr.eq(Mux(in_range, word, 0)),
            new.data.eq(self.rx2.payload.data),
        ]
        new_full = self.step.any()
        with m.If(~h_go):               # h waits (or is empty): the new word goes behind it
            with m.If(~b_full):
                m.d.sync += [b.eq(new), b_full.eq(new_full & h_full)]
                with m.If(~h_full):
                    m.d.sync += [h.eq(new), h_full.eq(new_full)]
        with m.Elif(b_full & ~b_go):    # h goes, b moves up, the new word behind it
            m.d.sync += [h.eq(b), b.eq(new), b_full.eq(new_full)]
        with m.Else():                  # h (and b) go: the new word is the head
            m.d.sync += [h.eq(new), h_full.eq(new_full), b_full.eq(0)]
        return m
