"""The PE core's wavelet engine (docs/pe.md): takes one wavelet per cycle from ``rx`` and runs one
step of the active ``FMAC`` or ``STORE`` descriptor listening on its color, with ``lanes`` FMAC
lanes.

Stage 0 (the cycle of the ``rx`` transfer): match the color, check (faults ``UNBOUND``,
``DUP_COLOR``, ``ACC_CONFLICT``, ``RANGE``, in that order; the wavelet is dropped), step the
descriptor (``step[t]``, or ``stop[t]`` on ``RANGE``, to the table, which computed the step's
flags and addresses beforehand: ``unit_end`` (a row's or vector's last wavelet), ``sweep_end``
(an FMAC wavelet for the last row of its group), ``past``, ``saddr``) and, for an FMAC, read the
operand vector (``rd_en``, ``rd_addr``).

The lanes (docs/pe.md#fmac-pipeline; ``M = mul_stages``, ``A = add_stages``, ``R = A + 1`` rows):
stage 1 multiplies ``bf16(w) * bf16(x[l])`` (``M`` register stages), stage ``1 + M`` adds the
product to the row's partial sum (+0.0 for the row's first wavelet) in ``A`` stages, and stage
``D = 1 + M + A`` (``arch.pe_map.fmac_write_delay``) writes the sum back to the row's accumulator
(one of ``2R - 1``, the row's index in its group of ``R .. 2R - 1`` rows,
``arch.pe_map.fmac_group_rows``) and, at the row's last wavelet, the row to SRAM
(``wr_*``); a STORE's word is written in stage ``D`` too, so the engine writes at most one
unit per cycle. The unit is counted (``inc``) in stage ``D``. ``fmac`` is high in stage 1 of an
FMAC wavelet.

``rx.ready`` is low (a stall) while the next wavelet of the accumulator's owner would read a
partial sum still in the adder: the owner is in the middle of a group, its next wavelet is not its
row's first, and a wavelet for the same accumulator row entered stages 1..A in the last ``A``
cycles. A group of ``R`` or more rows interleaved (``arch.pe_map.fmac_order``) never stalls; a
run of ``g < R`` rows waits ``R - g`` cycles per wavelet index. At ``A = 0`` ``rx.ready`` is always high;
otherwise it is a register (the stall is computed a cycle ahead, from the next state).
``pending`` is high while a wavelet is in stages 1..D-1 (the core is not yet done).

Ports from the descriptor table: ``desc``, ``active``, ``pos``, ``sub`` (an FMAC's row within
its group), ``aptr``, ``dptr``, ``in_range``, the step flags, ``restart`` (a (re)started or
rewritten descriptor drops its half-accumulated group).
``fault``/``fault_code``/``fault_index``: a fault in this cycle. ``match[t]``: this cycle's
wavelet (transferred) is on ``t``'s color (``t`` an active FMAC or STORE), taken or not (the
store engine's ``DUP_COLOR`` check).
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from arch.pe_map import FAULT_STATUS, Fault, Op, acc_slots, fmac_write_delay

from ..fp.bf16_mul import Bf16MulCore
from ..fp.fp32_add import Fp32AddCore
from ..layouts import as_array
from ..logic import two_or_more
from ..wavelet import Wavelet
from .descriptor_table import state_shapes

__all__ = ["WaveletEngine"]


class WaveletEngine(wiring.Component):
    def __init__(self, cfg):
        self._cfg = cfg
        T, L = cfg.num_tasks, cfg.lanes
        idx = range(max(T, 2))
        vec = data.ArrayLayout(32, L)
        state = state_shapes(cfg, "desc", "active", "in_range", "restart", "pos", "sub", "aptr", "dptr",
                             "unit_end", "sweep_end", "past", "saddr")
        super().__init__({
            "rx": In(stream.Signature(Wavelet)),
            **{name: In(shape) for name, shape in state.items()},
            "match": Out(T), "step": Out(T), "stop": Out(T),
            "inc": Out(1), "inc_t": Out(idx),
            "rd_en": Out(1), "rd_addr": Out(16), "rd_data": In(vec),
            "wr_addr": Out(16), "wr_data": Out(vec), "wr_mask": Out(L),
            "fault": Out(1), "fault_code": Out(FAULT_STATUS.field_width("code")),
            "fault_index": Out(FAULT_STATUS.field_width("index")),
            "fmac": Out(1), "pending": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        L, T = cfg.lanes, cfg.num_tasks
        M, A = cfg.mul_stages, cfg.add_stages
        slots = acc_slots(A)
        D = fmac_write_delay(M, A)

        # ---- stage 0 ------------------------------------------------------------------------
        fire = self.rx.valid & self.rx.ready
        color = self.rx.payload.color
        match = Signal(T)
        m.d.comb += self.match.eq(Mux(fire, match, 0))
        m.d.comb += match.eq(Cat(
            self.active[t] & ((self.desc[t].op == Op.FMAC) | (self.desc[t].op == Op.STORE))
            & (self.desc[t].color == color) for t in range(T)))
        wsel = Signal(range(max(T, 2)))
        for t in reversed(range(T)):
            with m.If(match[t]):
                m.d.comb += wsel.eq(t)
        dup = two_or_more(match)
        is_fmac_t = Cat(self.desc[t].op == Op.FMAC for t in range(T))
        is_fmac = (match & is_fmac_t).any()
        in_range = (match & self.in_range).any()
        unit_end = (match & self.unit_end).any()
        sweep_end = (match & self.sweep_end).any()
        past = (match & self.past).any()
        wpos, wsub, aptr, dptr, word = (as_array(v)[wsel] for v in (self.pos, self.sub, self.aptr, self.dptr,
                                                                     self.saddr))

        acc_busy = Signal()                     # a group of acc_owner is half accumulated
        owned = Signal()                        # ... and not dropped
        acc_owner = Signal(range(max(T, 2)))
        # ACC_CONFLICT: an FMAC of another descriptor than the accumulator's owner
        conflict_t = Cat(is_fmac_t[t] & owned & (acc_owner != t) for t in range(T))
        conflict = (match & conflict_t).any()
        taken = Signal()
        step = Signal()
        m.d.comb += [
            taken.eq(fire & match.any() & ~dup & ~conflict),
            self.step.eq(Mux(taken, match & ~self.past, 0)),
            self.stop.eq(Mux(taken, match & self.past, 0)),
            step.eq(taken & ~past),
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

        # ---- the pipeline: one stage record per cycle after stage 0 -------------------------
        slot_shape = range(max(slots, 2))
        stage = data.StructLayout({
            "fmac": 1, "first": 1, "last": 1, "slot": slot_shape, "store": 1, "inc": 1,
            "t": range(max(T, 2)), "w": 16, "data": 32, "addr": 16,
        })
        s1 = Signal(stage, name="s1")
        m.d.sync += [
            s1.fmac.eq(step & is_fmac),
            s1.first.eq(wpos == 0),
            s1.last.eq(unit_end),
            s1.slot.eq(wsub),
            s1.store.eq(step & ~is_fmac & in_range),
            s1.inc.eq(step & unit_end),
            s1.t.eq(wsel),
            s1.w.eq(self.rx.payload.data[16:32]),
            s1.data.eq(self.rx.payload.data),
            s1.addr.eq(Mux(is_fmac, dptr, word)),
        ]
        stages = [s1]                           # stages[k - 1]: the record in stage k
        for k in range(2, D + 1):
            sk = Signal(stage, name=f"s{k}")
            m.d.sync += sk.eq(stages[-1])
            stages.append(sk)
        out = stages[D - 1]                     # the write stage

        # ---- the lanes -----------------------------------------------------------------------
        acc = [[Signal(32, name=f"acc{r}_lane{l}") for l in range(L)] for r in range(slots)]
        snap = out.fmac & out.last
        for l in range(L):
            mul = m.submodules[f"lane{l}_mul"] = Bf16MulCore(M)
            add = m.submodules[f"lane{l}_add"] = Fp32AddCore(A)
            if M:
                m.d.comb += mul.en.eq(1)
            if A:
                m.d.comb += add.en.eq(1)
            m.d.comb += add.a.eq(self._partial(m, acc, l, stages, M, D, add.y))
            m.d.comb += [mul.a.eq(s1.w), mul.b.eq(self.rd_data[l][16:32]), add.b.eq(mul.y),
                         self.wr_data[l].eq(Mux(snap, add.y, out.data))]
            for r in range(slots):
                with m.If(out.fmac & (out.slot == r)):
                    m.d.sync += acc[r][l].eq(add.y)
        m.d.comb += [
            self.wr_addr.eq(out.addr),
            self.wr_mask.eq(Mux(snap, (1 << L) - 1, out.store)),
            self.inc.eq(out.inc),
            self.inc_t.eq(out.t),
            self.fmac.eq(s1.fmac),
            self.pending.eq(Cat(sk.fmac | sk.store | sk.inc for sk in stages[:D - 1]).any()),
        ]

        # ---- accumulator ownership: one descriptor's group at a time -----------------------
        # A group is dropped when its owner is (re)started, written or stopped; the drop is
        # registered (``dropped``) and acts from the next cycle, as the table's own restart does.
        # The registers' next values (``_n``) also give the next cycle's stall.
        fmac_step = step & is_fmac
        dropped, acc_busy_n, dropped_n = Signal(), Signal(), Signal()
        m.d.comb += [
            owned.eq(acc_busy & ~dropped),
            dropped_n.eq((self.restart | self.stop).bit_select(acc_owner, 1) & owned),
            acc_busy_n.eq(Mux(fmac_step, ~(unit_end & sweep_end), acc_busy & ~dropped)),
        ]
        m.d.sync += [dropped.eq(dropped_n), acc_busy.eq(acc_busy_n)]
        with m.If(fmac_step):
            m.d.sync += acc_owner.eq(wsel)

        # ---- stall: the owner's next wavelet would read a partial sum still in the adder ----
        # owner_sub, owner_mid: the owner's sub and pos != 0 (registers that follow its FMAC
        # steps; a restart or stop of the owner drops the group the next cycle, owned then 0).
        # rx.ready is a register: the stall of the next cycle, from the next values of owned,
        # owner_sub, owner_mid and of the records in stages 1..A (the one entering stage 1 and
        # those now in stages 1..A-1).
        owner_sub, owner_mid = Signal(range(max(slots, 2))), Signal()
        owner_sub_n, owner_mid_n = Signal.like(owner_sub), Signal()
        m.d.comb += [owner_sub_n.eq(Mux(fmac_step, Mux(sweep_end, 0, wsub + 1), owner_sub)),
                     owner_mid_n.eq(Mux(fmac_step, Mux(~sweep_end, wpos != 0, ~unit_end), owner_mid))]
        m.d.sync += [owner_sub.eq(owner_sub_n), owner_mid.eq(owner_mid_n)]
        if A:
            in_adder_n = Cat(fmac_step & (wsub == owner_sub_n),
                             *(sk.fmac & (sk.slot == owner_sub_n) for sk in stages[:A - 1]))
            stall = Signal()
            m.d.sync += stall.eq(acc_busy_n & ~dropped_n & owner_mid_n & in_adder_n.any())
            m.d.comb += self.rx.ready.eq(~stall)
        else:
            m.d.comb += self.rx.ready.eq(1)
        return m

    @staticmethod
    def _partial(m, acc, l, stages, M, D, y):
        """Lane ``l``'s adder input: the partial sum of the record entering the adder (stage
        ``M + 1``), +0.0 for a row's first wavelet. With ``M >= 1`` it is a register, loaded in the
        cycle before from the accumulator row of the record then in stage ``M``, or from the
        adder's output ``y`` when stage ``D`` writes that row at the same edge."""
        slots = len(acc)
        if M == 0:
            add_in = stages[0]
            partial = Array(acc[r][l] for r in range(slots))[add_in.slot] if slots > 1 else acc[0][l]
            return Mux(add_in.first, 0, partial)
        pre, out = stages[M - 1], stages[D - 1]
        row = Array(acc[r][l] for r in range(slots))[pre.slot] if slots > 1 else acc[0][l]
        part = Signal(32, name=f"partial_lane{l}")
        m.d.sync += part.eq(Mux(pre.first, 0, Mux(out.fmac & (out.slot == pre.slot), y, row)))
        return part
