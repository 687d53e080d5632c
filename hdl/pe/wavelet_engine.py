"""The PE core's wavelet engine (docs/pe.md): takes one wavelet per cycle from ``rx`` (``rx.ready``
is always high) and runs one step of the active ``FMAC`` or ``STORE`` descriptor listening on its
color, with ``lanes`` FMAC lanes.

Stage 0 (the cycle of the ``rx`` transfer): match the color, check (faults ``UNBOUND``,
``DUP_COLOR``, ``ACC_CONFLICT``, ``RANGE``, in that order; the wavelet is dropped), step the
descriptor (``step``, ``unit_end``, ``run_end`` to the table; ``stop`` on ``RANGE``) and, for an
FMAC, read the operand vector (``rd_en``, ``rd_addr``). Stage 1 (the next cycle): the lanes
accumulate ``acc[l] += bf16(w) * bf16(x[l])``; the row's last wavelet writes the row to SRAM
(``wr_*``) and restarts the accumulators at +0.0; a STORE writes its word; the unit is counted
(``inc``). ``fmac`` is high in the cycles the lanes work.

Ports from the descriptor table: ``desc``, ``active``, ``pos``, ``cnt``, ``aptr``, ``dptr``,
``in_range``, ``restart`` (a (re)started or rewritten descriptor drops its half-accumulated row).
``fault``/``fault_code``/``fault_index``: a fault in this cycle.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from arch.pe_map import FAULT_STATUS, Fault, Op

from ..fp.bf16_mul import Bf16MulCore
from ..fp.fp32_add import Fp32AddCore
from .descriptor_table import state_shapes, store_offset
from ..wavelet import Wavelet

__all__ = ["WaveletEngine"]


class WaveletEngine(wiring.Component):
    def __init__(self, cfg):
        self._cfg = cfg
        T, L = cfg.num_tasks, cfg.lanes
        idx = range(max(T, 2))
        vec = data.ArrayLayout(32, L)
        state = state_shapes(cfg, "desc", "active", "in_range", "restart", "pos", "cnt", "aptr", "dptr")
        super().__init__({
            "rx": In(stream.Signature(Wavelet)),
            **{name: In(shape) for name, shape in state.items()},
            "step": Out(1), "t": Out(idx), "unit_end": Out(1), "run_end": Out(1), "stop": Out(1),
            "inc": Out(1), "inc_t": Out(idx),
            "rd_en": Out(1), "rd_addr": Out(16), "rd_data": In(vec),
            "wr_addr": Out(16), "wr_data": Out(vec), "wr_mask": Out(L),
            "fault": Out(1), "fault_code": Out(FAULT_STATUS.field_width("code")),
            "fault_index": Out(FAULT_STATUS.field_width("index")),
            "fmac": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        L, S, T = cfg.lanes, cfg.sram_words, cfg.num_tasks

        # ---- stage 0 ------------------------------------------------------------------------
        m.d.comb += self.rx.ready.eq(1)
        fire = self.rx.valid
        color = self.rx.payload.color
        match = Signal(T)
        m.d.comb += match.eq(Cat(
            self.active[t] & ((self.desc[t].op == Op.FMAC) | (self.desc[t].op == Op.STORE))
            & (self.desc[t].color == color) for t in range(T)))
        wsel = self.t
        for t in reversed(range(T)):
            with m.If(match[t]):
                m.d.comb += wsel.eq(t)
        dup = (match & (match - 1)).any()
        wd = self.desc[wsel]
        wpos, wn = self.pos[wsel], self.cnt[wsel]
        aptr, dptr = self.aptr[wsel], self.dptr[wsel]
        in_range = self.in_range.bit_select(wsel, 1)
        is_fmac = wd.op == Op.FMAC

        acc_busy = Signal()
        acc_owner = Signal(range(max(T, 2)))
        conflict = is_fmac & acc_busy & (acc_owner != wsel)
        m.d.comb += self.unit_end.eq(Mux(is_fmac, wpos + 1 == wd.count, wpos == L - 1))
        # RANGE: the operand vector or the row's destination (FMAC), the word (STORE in range).
        past = Signal()
        m.d.comb += past.eq(Mux(is_fmac,
                                (aptr + L > S) | (self.unit_end & (dptr + L > S)),
                                in_range & (dptr + store_offset(wd, wpos, L) >= S)))
        taken = Signal()
        m.d.comb += taken.eq(fire & match.any() & ~dup & ~conflict)
        m.d.comb += [
            self.step.eq(taken & ~past),
            self.stop.eq(taken & past),
            self.run_end.eq(self.step & self.unit_end & (wn + 1 == wd.reps)),
            self.rd_en.eq(fire & match.any() & is_fmac),
            self.rd_addr.eq(aptr),
        ]
        with m.If(fire):
            m.d.comb += self.fault.eq(~match.any() | dup | conflict | past)
            with m.If(~match.any()):
                m.d.comb += [self.fault_code.eq(Fault.UNBOUND), self.fault_index.eq(color)]
            with m.Elif(dup):
                m.d.comb += [self.fault_code.eq(Fault.DUP_COLOR), self.fault_index.eq(wsel)]
            with m.Elif(conflict):
                m.d.comb += [self.fault_code.eq(Fault.ACC_CONFLICT), self.fault_index.eq(wsel)]
            with m.Else():
                m.d.comb += [self.fault_code.eq(Fault.RANGE), self.fault_index.eq(wsel)]

        s1_fmac, s1_last, s1_store = Signal(), Signal(), Signal()
        s1_w, s1_data, s1_addr = Signal(16), Signal(32), Signal(16)
        m.d.sync += [
            s1_fmac.eq(self.step & is_fmac),
            s1_last.eq(self.unit_end),
            s1_store.eq(self.step & ~is_fmac & in_range),
            self.inc.eq(self.step & self.unit_end),
            self.inc_t.eq(wsel),
            s1_w.eq(self.rx.payload.data[16:32]),
            s1_data.eq(self.rx.payload.data),
            s1_addr.eq(Mux(is_fmac, dptr, dptr + store_offset(wd, wpos, L))),
        ]

        # ---- stage 1: the lanes --------------------------------------------------------------
        acc = [Signal(32, name=f"acc{l}") for l in range(L)]
        snap = s1_fmac & s1_last
        for l in range(L):
            mul = m.submodules[f"lane{l}_mul"] = Bf16MulCore()
            add = m.submodules[f"lane{l}_add"] = Fp32AddCore()
            m.d.comb += [mul.a.eq(s1_w), mul.b.eq(self.rd_data[l][16:32]),
                         add.a.eq(acc[l]), add.b.eq(mul.y),
                         self.wr_data[l].eq(Mux(snap, add.y, s1_data))]
            with m.If(s1_fmac):
                m.d.sync += acc[l].eq(Mux(s1_last, 0, add.y))
        m.d.comb += [
            self.wr_addr.eq(s1_addr),
            self.wr_mask.eq(Mux(snap, (1 << L) - 1, s1_store)),
            self.fmac.eq(s1_fmac),
        ]

        # ---- accumulator ownership: one descriptor's row at a time -------------------------
        with m.If(self.step & is_fmac):
            m.d.sync += [acc_owner.eq(wsel), acc_busy.eq(~self.unit_end)]
        dropped = ((self.restart.bit_select(acc_owner, 1) | (self.stop & (wsel == acc_owner)))
                   & acc_busy)
        with m.If(dropped):
            m.d.sync += acc_busy.eq(0)
            m.d.sync += [a.eq(0) for a in acc]
        return m
