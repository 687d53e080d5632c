"""The PE core's vector unit (docs/pe.md): runs the ``VEC`` descriptors whose dependencies are
met, one firing at a time (lowest index first), and is the only sender on ``tx``.

FSM, ``L + 3`` cycles per vector (per word for ``DOT``) without waiting: IDLE (pick, read A) ->
READ_B (latch A, read B) -> LATCH (latch B) -> RUN (one element per cycle) -> IDLE; a ``DOT``
with more words goes from its last element to ISSUE (read the next row of A) -> READ_B. A RUN
cycle steps only when its word can go: ``tx`` free if it sends, and if it stores, neither a
configuration SRAM write (``cfg_write``) nor the wavelet engine's row write to the same bank
(``wr_blocked``) in this cycle. ``busy`` is high in the cycles counted as VEC_CYCLES (every
cycle of a firing except RUN cycles that wait).

``RANGE`` is checked when a read is issued: A (or DOT row ``k``), B when the mode uses it, and
the destination of a stored unit; the firing then ends (``fault``, ``stop``), nothing of it goes
out. ``tx`` is registered (valid and payload are flops).

Ports from the descriptor table: ``desc``, ``active``, ``cnt``, ``done``, ``aptr``, ``bptr``,
``dptr``, ``in_range``; to it: ``t`` (the firing's descriptor), ``unit``, ``run_end``, ``stop``.
SRAM: ``rd_addr`` -> ``rd_data`` (next cycle), ``wr_addr``/``wr_data``/``wr_en``.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from arch.pe_map import MAX_TASKS, Op, VecMode

from .bf16_mul import Bf16MulCore
from .fp32_add import Fp32AddCore
from .pe_descriptor_table import PTR_BITS, state_shapes
from .wavelet import Wavelet

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
            "t": Out(idx), "unit": Out(1), "run_end": Out(1), "stop": Out(1),
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

        done = Array([self.done[t] for t in range(T)] + [Const(0, 16)] * (MAX_TASKS - T))
        ready = Signal(T)
        m.d.comb += ready.eq(Cat(
            self.active[t] & (desc[t].op == Op.VEC)
            & (~desc[t].dep_a_en | (done[desc[t].dep_a] > self.cnt[t]))
            & (~desc[t].dep_b_en | (done[desc[t].dep_b] > self.cnt[t]))
            for t in range(T)))
        pick = Signal(range(max(T, 2)))
        for t in reversed(range(T)):
            with m.If(ready[t]):
                m.d.comb += pick.eq(t)

        vsel = Signal(range(max(T, 2)))
        vcur = self.t                     # the firing's descriptor (the pick while IDLE)
        vd = desc[vcur]
        vn = self.cnt[vcur]
        dot = vd.vmode == VecMode.DOT
        in_range = self.in_range.bit_select(vcur, 1)
        vk = Signal(16)
        kptr = Signal(PTR_BITS)           # DOT: row vk of A
        vj = Signal(range(max(L, 2)))
        unit = Mux(dot, vd.count, L)

        # RANGE at issue: A (the DOT row), B if used, the destination if the unit is stored.
        a_first = Mux(dot, vd.a_base, self.aptr[vcur])
        first_past = Signal()
        m.d.comb += first_past.eq((a_first + L > S)
                                  | ((vd.vmode != VecMode.PASS) & (self.bptr[vcur] + L > S))
                                  | (vd.store & in_range & (self.dptr[vcur] + unit > S)))
        row_past = kptr + L > S

        av = Array(Signal(32, name=f"av{l}") for l in range(L))
        bv = Array(Signal(32, name=f"bv{l}") for l in range(L))
        dacc = Signal(32)
        a_j, b_j = av[vj], bv[vj]
        result, sum_ = self._element(m, vd, dot, a_j, b_j, dacc)

        last_lane = vj == L - 1
        emit = ~dot | last_lane
        store = emit & vd.store & in_range
        send = emit & vd.send
        out_free = ~self.tx.valid | self.tx.ready
        step = Signal()
        m.d.comb += [
            self.wr_addr.eq(self.dptr[vcur] + Mux(dot, vk, vj)),
            self.wr_data.eq(result),
            self.wr_en.eq(step & store),
        ]

        with m.If(self.tx.ready):
            m.d.sync += self.tx.valid.eq(0)

        with m.FSM(name="vec"):
            with m.State("IDLE"):
                m.d.comb += [vcur.eq(pick), self.rd_addr.eq(a_first)]
                with m.If(ready.any()):
                    with m.If(first_past):
                        m.d.comb += [self.fault.eq(1), self.stop.eq(1)]
                    with m.Else():
                        m.d.comb += self.busy.eq(1)
                        m.d.sync += [vsel.eq(pick), vk.eq(0), kptr.eq(vd.a_base)]
                        m.next = "READ_B"
            with m.State("ISSUE"):
                m.d.comb += [vcur.eq(vsel), self.rd_addr.eq(kptr)]
                with m.If(row_past):
                    m.d.comb += [self.fault.eq(1), self.stop.eq(1)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += self.busy.eq(1)
                    m.next = "READ_B"
            with m.State("READ_B"):
                m.d.comb += [vcur.eq(vsel), self.rd_addr.eq(self.bptr[vcur]), self.busy.eq(1)]
                m.d.sync += [av[l].eq(self.rd_data[l]) for l in range(L)]
                m.next = "LATCH"
            with m.State("LATCH"):
                m.d.comb += [vcur.eq(vsel), self.busy.eq(1)]
                m.d.sync += [vj.eq(0), dacc.eq(0)]
                m.d.sync += [bv[l].eq(self.rd_data[l]) for l in range(L)]
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += vcur.eq(vsel)
                m.d.comb += step.eq((~send | out_free)
                                    & ~(store & (self.cfg_write | self.wr_blocked)))
                m.d.comb += self.busy.eq(step)
                with m.If(step):
                    with m.If(send):
                        m.d.sync += [self.tx.valid.eq(1), self.tx.payload.data.eq(result),
                                     self.tx.payload.color.eq(vd.color),
                                     self.tx.payload.ctrl.eq(0)]
                    m.d.sync += dacc.eq(sum_)
                    with m.If(last_lane):
                        with m.If(dot & (vk + 1 < vd.count)):
                            m.d.sync += [vk.eq(vk + 1), kptr.eq(kptr + vd.a_stride)]
                            m.next = "ISSUE"
                        with m.Else():
                            m.d.comb += [self.unit.eq(1), self.run_end.eq(vn + 1 == vd.reps)]
                            m.next = "IDLE"
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
