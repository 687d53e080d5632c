"""The PE core's vector unit (docs/pe.md): runs the ``VEC`` descriptors whose dependencies are
met, one vector at a time (lowest index first), and is the only sender on ``tx``.

Two stages, so vectors follow each other without a gap:

* **Fetch**: FIDLE (pick the lowest ready VEC, read its A) -> FB (latch A, read B) -> FL (latch B;
  the unit is *issued*: the table advances the descriptor's count and running addresses, so the
  next unit of the same descriptor can be fetched at once) -> the execute stage, or FULL (hold
  the operands until the execute stage is free).
* **Execute**: RUN, one element per cycle, ``L`` cycles per vector; the unit is *done* (its
  ``done`` counter) after its last element. A ``DOT`` with more words goes from its last element
  to ISSUE (read the next row of A) -> READ_B (latch it, read B) -> LATCH (latch B) -> RUN; no
  fetch runs during a ``DOT``, and a ``DOT`` is fetched only into an idle execute stage.

So an isolated vector takes ``L + 3`` cycles from its pick (``models.pe.unit_cycles``), vectors
whose dependencies are met while the previous one runs take ``L`` each (``L >= 3``). A RUN cycle
steps only when its word can go: ``tx`` free if it sends, and if it stores, neither a
configuration SRAM write (``cfg_write``) nor the engines' writes to the same bank
(``wr_blocked``) in this cycle. ``busy`` is high in the RUN cycles that step (VEC_CYCLES: ``L``
per vector and per DOT word).

``RANGE`` is checked when a read is issued: A (or DOT row ``k``), B when the mode uses it, and
the destination of a stored unit; the unit then ends (``fault``, ``stop`` of ``stop_t``), nothing
of it goes out. ``tx`` is registered (valid and payload are flops).

Ports from the descriptor table: ``desc``, ``active``, ``cnt``, ``done``, ``aptr``, ``bptr``,
``dptr``, ``in_range``; to it: ``issue``/``issue_t`` (a unit was fetched), ``unit``/``t`` (a unit
of ``t`` is done), ``run_end`` (it was the last), ``stop``/``stop_t``.
SRAM: ``rd_addr`` -> ``rd_data`` (next cycle), ``wr_addr``/``wr_data``/``wr_en``.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from arch.pe_map import MAX_TASKS, Op, VecMode

from ..fp.bf16_mul import Bf16MulCore
from ..fp.fp32_add import Fp32AddCore
from .descriptor_table import PTR_BITS, state_shapes
from ..wavelet import Wavelet

__all__ = ["VectorUnit"]


class VectorUnit(wiring.Component):
    def __init__(self, cfg):
        self._cfg = cfg
        T, L = cfg.num_tasks, cfg.lanes
        idx = range(max(T, 2))
        vec = data.ArrayLayout(32, L)
        state = state_shapes(cfg, "desc", "active", "in_range", "cnt", "done", "aptr", "bptr", "dptr")
        super().__init__({
            "tx": Out(stream.Signature(Wavelet)),
            **{name: In(shape) for name, shape in state.items()},
            "t": Out(idx), "unit": Out(1), "run_end": Out(1),
            "issue": Out(1), "issue_t": Out(idx), "stop": Out(1), "stop_t": Out(idx),
            "rd_addr": Out(16), "rd_data": In(vec),
            "wr_addr": Out(16), "wr_data": Out(32), "wr_en": Out(1), "wr_blocked": In(1),
            "cfg_write": In(1),
            "fault": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        L, S, T = cfg.lanes, cfg.sram_words, cfg.num_tasks
        desc = self.desc
        idx = range(max(T, 2))

        done = Array([self.done[t] for t in range(T)] + [Const(0, 16)] * (MAX_TASKS - T))
        ready = Signal(T)
        m.d.comb += ready.eq(Cat(
            self.active[t] & (desc[t].op == Op.VEC) & (self.cnt[t] != desc[t].reps)
            & (~desc[t].dep_a_en | (done[desc[t].dep_a] > self.cnt[t]))
            & (~desc[t].dep_b_en | (done[desc[t].dep_b] > self.cnt[t]))
            for t in range(T)))
        pick = Signal(idx)
        for t in reversed(range(T)):
            with m.If(ready[t]):
                m.d.comb += pick.eq(t)

        # ---- fetch stage ------------------------------------------------------------------------
        f_t = Signal(idx)                 # the unit being fetched / held
        fcur = Signal(idx)                # the fetch stage's descriptor this cycle
        fd = desc[fcur]
        f_dot = fd.vmode == VecMode.DOT
        f_unit = Mux(f_dot, fd.count, L)
        a_first = Mux(f_dot, fd.a_base, self.aptr[fcur])
        first_past = Signal()
        m.d.comb += first_past.eq((a_first + L > S)
                                  | ((fd.vmode != VecMode.PASS) & (self.bptr[fcur] + L > S))
                                  | (fd.store & self.in_range.bit_select(fcur, 1)
                                     & (self.dptr[fcur] + f_unit > S)))
        pa = [Signal(32, name=f"pa{l}") for l in range(L)]
        pb = [Signal(32, name=f"pb{l}") for l in range(L)]
        p_dptr, p_bptr = Signal(PTR_BITS), Signal(PTR_BITS)
        p_in_range, p_last = Signal(), Signal()

        # ---- execute stage ----------------------------------------------------------------------
        vsel = self.t                     # the unit in execution
        vd = desc[vsel]
        dot = vd.vmode == VecMode.DOT
        e_dptr, e_bptr = Signal(PTR_BITS), Signal(PTR_BITS)
        e_in_range, e_last = Signal(), Signal()
        vk = Signal(16)
        kptr = Signal(PTR_BITS)           # DOT: row vk of A
        vj = Signal(range(max(L, 2)))
        row_past = kptr + L > S

        av = Array(Signal(32, name=f"av{l}") for l in range(L))
        bv = Array(Signal(32, name=f"bv{l}") for l in range(L))
        dacc = Signal(32)
        result, sum_ = self._element(m, vd, dot, av[vj], bv[vj], dacc)

        last_lane = vj == L - 1
        emit = ~dot | last_lane
        store = emit & vd.store & e_in_range
        send = emit & vd.send
        out_free = ~self.tx.valid | self.tx.ready
        step = Signal()
        dot_more = dot & (vk + 1 < vd.count)
        m.d.comb += [
            self.wr_addr.eq(e_dptr + Mux(dot, vk, vj)),
            self.wr_data.eq(result),
            self.wr_en.eq(step & store),
        ]
        with m.If(self.tx.ready):
            m.d.sync += self.tx.valid.eq(0)

        e_free = Signal()                 # the execute stage can take a unit at this edge
        e_idle = Signal()
        e_dot_busy = Signal()             # a DOT is in execution (the fetch stage waits)
        take = Signal()                   # the fetch stage hands its unit over at this edge

        def load(a_src, b_src, t, dptr, bptr, in_range, last, a_base):
            m.d.sync += [av[l].eq(a_src[l]) for l in range(L)]
            m.d.sync += [bv[l].eq(b_src[l]) for l in range(L)]
            m.d.sync += [vsel.eq(t), e_dptr.eq(dptr), e_bptr.eq(bptr), e_in_range.eq(in_range),
                         e_last.eq(last), vj.eq(0), vk.eq(0), dacc.eq(0), kptr.eq(a_base)]

        with m.FSM(name="vec_fetch"):
            with m.State("FIDLE"):
                m.d.comb += [fcur.eq(pick), self.rd_addr.eq(a_first)]
                may = ready.any() & ~e_dot_busy & (e_idle | ~f_dot)
                with m.If(may):
                    with m.If(first_past):
                        m.d.comb += [self.fault.eq(1), self.stop.eq(1), self.stop_t.eq(pick)]
                    with m.Else():
                        m.d.sync += f_t.eq(pick)
                        m.next = "FB"
            with m.State("FB"):
                m.d.comb += [fcur.eq(f_t), self.rd_addr.eq(self.bptr[fcur])]
                m.d.sync += [pa[l].eq(self.rd_data[l]) for l in range(L)]
                m.next = "FL"
            with m.State("FL"):
                m.d.comb += [fcur.eq(f_t), self.issue.eq(1), self.issue_t.eq(f_t)]
                m.d.sync += [p_dptr.eq(self.dptr[fcur]), p_bptr.eq(self.bptr[fcur]),
                             p_in_range.eq(self.in_range.bit_select(fcur, 1)),
                             p_last.eq(self.cnt[fcur] + 1 == fd.reps)]
                with m.If(e_free):
                    m.d.comb += take.eq(1)
                    load(pa, self.rd_data, f_t, self.dptr[fcur], self.bptr[fcur],
                         self.in_range.bit_select(fcur, 1), self.cnt[fcur] + 1 == fd.reps, fd.a_base)
                    m.next = "FIDLE"
                with m.Else():
                    m.d.sync += [pb[l].eq(self.rd_data[l]) for l in range(L)]
                    m.next = "FULL"
            with m.State("FULL"):
                m.d.comb += fcur.eq(f_t)
                with m.If(e_free):
                    m.d.comb += take.eq(1)
                    load(pa, pb, f_t, p_dptr, p_bptr, p_in_range, p_last, fd.a_base)
                    m.next = "FIDLE"

        with m.FSM(name="vec_execute"):
            with m.State("EIDLE"):
                m.d.comb += [e_idle.eq(1), e_free.eq(1)]
                with m.If(take):
                    m.next = "RUN"
            with m.State("ISSUE"):
                m.d.comb += [e_dot_busy.eq(1), self.rd_addr.eq(kptr)]
                with m.If(row_past):
                    m.d.comb += [self.fault.eq(1), self.stop.eq(1), self.stop_t.eq(vsel)]
                    m.next = "EIDLE"
                with m.Else():
                    m.next = "READ_B"
            with m.State("READ_B"):
                m.d.comb += [e_dot_busy.eq(1), self.rd_addr.eq(e_bptr)]
                m.d.sync += [av[l].eq(self.rd_data[l]) for l in range(L)]
                m.next = "LATCH"
            with m.State("LATCH"):
                m.d.comb += e_dot_busy.eq(1)
                m.d.sync += [vj.eq(0), dacc.eq(0)]
                m.d.sync += [bv[l].eq(self.rd_data[l]) for l in range(L)]
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [e_dot_busy.eq(dot),
                             step.eq((~send | out_free)
                                     & ~(store & (self.cfg_write | self.wr_blocked))),
                             self.busy.eq(step)]
                with m.If(step):
                    with m.If(send):
                        m.d.sync += [self.tx.valid.eq(1), self.tx.payload.data.eq(result),
                                     self.tx.payload.color.eq(vd.color),
                                     self.tx.payload.ctrl.eq(0)]
                    m.d.sync += dacc.eq(sum_)
                    with m.If(last_lane):
                        with m.If(dot_more):
                            m.d.sync += [vk.eq(vk + 1), kptr.eq(kptr + vd.a_stride)]
                            m.next = "ISSUE"
                        with m.Else():
                            m.d.comb += [self.unit.eq(1), self.run_end.eq(e_last), e_free.eq(1)]
                            with m.If(~take):
                                m.next = "EIDLE"
                    with m.Else():
                        m.d.sync += vj.eq(vj + 1)
        return m

    @staticmethod
    def _element(m, vd, dot, a_j, b_j, dacc):
        """Element ``j`` of the firing: PASS ``A[j]``, ADD ``A[j] + B[j]``, MASK ``B[j]`` where
        bf16 ``A[j]`` is positive, DOT ``dacc + A[j] * B[j]``; then ``relu`` and ``round``.
        Returns it and the adder's sum (the DOT accumulator's next value)."""
        vmul = m.submodules.vec_mul = Bf16MulCore()
        vadd = m.submodules.vec_add = Fp32AddCore()
        m.d.comb += [vmul.a.eq(a_j[16:32]), vmul.b.eq(b_j[16:32]),
                     vadd.a.eq(Mux(dot, dacc, a_j)), vadd.b.eq(Mux(dot, vmul.y, b_j))]
        a16 = a_j[16:32]
        elem = Signal(32)
        with m.Switch(vd.vmode):
            with m.Case(VecMode.PASS):
                m.d.comb += elem.eq(a_j)
            with m.Case(VecMode.ADD, VecMode.DOT):
                m.d.comb += elem.eq(vadd.y)
            with m.Case(VecMode.MASK):
                m.d.comb += elem.eq(Mux((a16 != 0) & ~a16[15], b_j, 0))
        relued = Mux(vd.relu & elem[31], 0, elem)
        r_nan = (relued[23:31] == 0xFF) & (relued[:23] != 0)
        r_sum = Signal(33)
        m.d.comb += r_sum.eq(relued + 0x7FFF + relued[16])
        rounded = Mux(r_nan, 0x7FC00000, Cat(Const(0, 16), r_sum[16:32]))
        result = Signal(32)
        m.d.comb += result.eq(Mux(vd.round, rounded, relued))
        return result, vadd.y
