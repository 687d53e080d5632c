"""The PE core's vector unit (docs/pe.md): runs the ``VEC`` descriptors whose dependencies are
met, one vector at a time (lowest index first), and is the only sender on ``tx``.

Two stages, so vectors follow each other without a gap:

* **Fetch**: FIDLE (pick the lowest ready VEC, read its A) -> FB (latch A, read B) -> FL (latch B;
  the unit is *issued*: the table advances the descriptor's count and running addresses, so the
  next unit of the same descriptor can be fetched at once) -> the execute stage, or FULL (hold
  the operands until the execute stage is free).
* **Execute**: RUN, one element per cycle, ``L`` cycles per vector. A ``DOT`` with more words
  goes from its last element to ISSUE (read the next row of A) -> READ_B (latch it, read B) ->
  LATCH (latch B) -> RUN; no fetch runs during a ``DOT``, and a ``DOT`` is fetched only into an
  idle execute stage.

Unpipelined (``Config.mul_stages = add_stages = 0``) an element is computed in its RUN cycle
(multiplier, adder, ``relu``, ``round``) and goes out in it: a RUN cycle steps only when its
word can go (``tx`` free if it sends; if it stores, neither a configuration SRAM write,
``cfg_write``, nor the engines' writes to the same bank, ``wr_blocked``, in this cycle), and the
unit is *done* (its ``done`` counter) after its last element. So an isolated vector takes
``L + 3`` cycles from its pick (``models.pe.unit_cycles``), vectors whose dependencies are met
while the previous one runs ``L`` each (``L >= 3``), a DOT word ``L + 3``.

Pipelined (``mul_stages + add_stages > 0``, ``M``, ``A``; docs/pe.md#vector-unit-pipeline) RUN
only *issues* an element into an element pipeline that never stalls: the operands are shift
registers (element ``j`` is always ``av[0]``, ``bv[0]``: no lane-select multiplexer); ADD goes
through the adder (``Fp32AddCore(A)``), PASS and MASK through ``A`` registers beside it, DOT
through the multiplier (``Bf16MulCore(M)``), a product register and the adder, whose sum goes
round again through ``yreg`` (the accumulator); every element's result is registered after the
adder (``yreg``), ``relu``/``round`` is applied between that register and the output FIFO
(``A + 3`` entries, the oldest in a register of its own), and the FIFO's head goes out on ``tx``
and/or to SRAM under the same conditions as above. An element is issued only when a
FIFO entry is free for it (credits: issued and not yet out, at most ``A + 3``, which is exactly
enough for one element per cycle), so back-pressure and bank conflicts never stall the pipeline
and nothing is lost. A unit is *done* when its last word leaves the FIFO. Costs: an element
leaves ``A + 2`` cycles after its issue (a DOT word ``M + A + 3``); a DOT element waits
``A + 1`` cycles for the previous sum (the summation order is kept); a non-DOT element waits
until ``M + 2`` cycles after the last DOT element (the two paths meet at the adder in order).
The VECs' readiness is registered (``ready_q``, with the count of a unit issued at that edge
advanced; no pick in the cycle after a descriptor starts: ``restart``), so the pick starts at a
register and sees a counted unit one cycle later. ``models.pe`` states every figure.

``busy`` is high in the cycles an element is made (stepped or issued; VEC_CYCLES: ``L`` per
vector and per DOT word).

``RANGE`` is checked when a read is issued: A (or DOT row ``k``), B when the mode uses it, and
the destination of a stored unit; the unit then ends (``fault``, ``stop`` of ``stop_t``), nothing
of it goes out (a DOT's earlier words do). ``tx`` is a :class:`~hdl.skid_buffer.SkidBuffer`
(valid, payload and its own ready are flops): a word put in it in cycle ``t`` is offered from
``t + 1``; ``tx`` is *free* while its skid slot is empty, so ``tx.ready`` reaches only the
buffer, and a word goes out while the one before it waits for ``tx.ready`` (then no more until
that one is taken).

Ports from the descriptor table: ``desc``, ``active``, ``cnt``, ``done``, ``aptr``, ``bptr``,
``dptr``, ``in_range``, ``past`` (a unit's reads or store would run past SRAM); to it:
``issue``/``issue_t`` (a unit was fetched), ``unit``/``t`` (a unit of ``t`` is done), ``run_end``
(it was the last), ``stop``/``stop_t``.
SRAM: ``rd_addr`` -> ``rd_data`` (next cycle), ``wr_addr``/``wr_data``/``wr_en``.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from arch.pe_map import MAX_TASKS, Op, VecMode, vec_fifo_depth
from arch.wavelet import COLOR_BITS

from ..fp.bf16_mul import Bf16MulCore
from ..fp.fp32_add import Fp32AddCore
from ..layouts import as_array
from ..skid_buffer import SkidBuffer
from ..wavelet import Wavelet
from .descriptor_table import PTR_BITS, Descriptor, state_shapes

# the descriptor fields the execute stage reads (latched with its unit)
EXEC_FIELDS = ("vmode", "relu", "round", "send", "store", "color", "a_stride")

__all__ = ["VectorUnit"]


class VectorUnit(wiring.Component):
    def __init__(self, cfg):
        self._cfg = cfg
        T, L = cfg.num_tasks, cfg.lanes
        idx = range(max(T, 2))
        vec = data.ArrayLayout(32, L)
        state = state_shapes(cfg, "desc", "active", "in_range", "past", "restart", "cnt", "done", "aptr", "bptr",
                             "dptr")
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
        M, A = cfg.mul_stages, cfg.add_stages
        piped = bool(M or A)
        desc = as_array(self.desc)
        aptr_a, bptr_a, dptr_a, cnt_a = (as_array(v) for v in (self.aptr, self.bptr, self.dptr, self.cnt))
        idx = range(max(T, 2))

        done = Array([self.done[t] for t in range(T)] + [Const(0, 16)] * (MAX_TASKS - T))

        def ready_of(cnt):
            return Cat(
                self.active[t] & (desc[t].op == Op.VEC) & (cnt[t] != desc[t].reps)
                & (~desc[t].dep_a_en | (done[desc[t].dep_a] > cnt[t]))
                & (~desc[t].dep_b_en | (done[desc[t].dep_b] > cnt[t]))
                for t in range(T))

        ready = Signal(T)
        if piped:
            # Registered: the pick reads a register, not the counters' comparisons. ready_q says
            # what the counters said in the previous cycle, with the count of a unit issued at
            # that edge already advanced; a descriptor is then still ready unless it stopped
            # (active), or a descriptor started again at that edge (its count and done restarted
            # at 0: restart then, active now; it may be a dependency): then none is picked.
            # (done > cnt + inc from one subtraction: its difference is positive, and not 1 when a
            # unit was issued; shallower than comparisons of the counters)
            ready_n = []
            for t in range(T):
                d, cnt = desc[t], self.cnt[t]
                inc = self.issue & (self.issue_t == t)
                cnt1 = Signal(16, name=f"cnt1_{t}")
                m.d.comb += cnt1.eq(cnt + 1)
                dep = []
                for en, sel in ((d.dep_a_en, d.dep_a), (d.dep_b_en, d.dep_b)):
                    diff = Signal(17, name=f"dep_diff{t}_{len(dep)}")
                    m.d.comb += diff.eq(done[sel] - cnt)
                    dep.append(~en | (~diff[16] & (diff[:16] != 0) & ~(inc & (diff[:16] == 1))))
                ready_n.append(self.active[t] & (d.op == Op.VEC) & Mux(inc, cnt1 != d.reps, cnt != d.reps)
                               & dep[0] & dep[1])
            ready_q = Signal(T, name="ready_q")
            restart_q = Signal(T, name="restart_q")
            m.d.sync += [ready_q.eq(Cat(ready_n)), restart_q.eq(self.restart)]
            started = Signal()
            m.d.comb += [started.eq((restart_q & self.active).any()),
                         ready.eq(Mux(started, 0, ready_q & self.active))]
        else:
            m.d.comb += ready.eq(ready_of(self.cnt))
        pick = Signal(idx)
        for t in reversed(range(T)):
            with m.If(ready[t]):
                m.d.comb += pick.eq(t)

        # ---- fetch stage ------------------------------------------------------------------------
        f_t = Signal(idx)                 # the unit being fetched / held
        fcur = Signal(idx)                # the fetch stage's descriptor this cycle
        fd = desc[fcur]
        f_dot = fd.vmode == VecMode.DOT
        a_first = Mux(f_dot, fd.a_base, aptr_a[fcur])
        first_past = self.past.bit_select(fcur, 1)
        # The unit held in FB, FL, FULL: pipelined, its descriptor is looked up by the register
        # f_t, not by fcur (so the pick's logic stays out of those paths); unpipelined fcur = f_t
        # there.
        if piped:
            m.d.comb += fcur.eq(pick)     # FIDLE's lookups only
            hcur = f_t
        else:
            hcur = fcur
        hd = desc[hcur]
        h_past = self.past.bit_select(hcur, 1)   # pipelined: the range check of the unit f_t, in FB
        pa = [Signal(32, name=f"pa{l}") for l in range(L)]
        pb = [Signal(32, name=f"pb{l}") for l in range(L)]
        p_dptr, p_bptr = Signal(PTR_BITS), Signal(PTR_BITS)
        p_in_range, p_last = Signal(), Signal()

        # ---- execute stage ----------------------------------------------------------------------
        # (unpipelined, the unit in execution is also the unit the table counts: ``t``)
        vsel = Signal(idx, name="vsel") if piped else self.t
        # the fields of the unit's descriptor, latched when it enters (no lookup by vsel)
        vd = Signal(data.StructLayout({name: Descriptor.members[name] for name in EXEC_FIELDS}), name="e_desc")
        dot = Signal(name="e_dot")
        e_dptr, e_bptr = Signal(PTR_BITS), Signal(PTR_BITS)
        e_in_range, e_last = Signal(), Signal()
        vk = Signal(16)
        e_left = Signal(16)               # DOT: words after word vk
        kptr = Signal(PTR_BITS)           # DOT: row vk of A
        vj = Signal(range(max(L, 2)))
        row_past = kptr + L > S

        if piped:       # shift registers: element vj is av[0], bv[0]
            av = [Signal(32, name=f"av{l}") for l in range(L)]
            bv = [Signal(32, name=f"bv{l}") for l in range(L)]
            a_j, b_j = av[0], bv[0]
        else:
            av = Array(Signal(32, name=f"av{l}") for l in range(L))
            bv = Array(Signal(32, name=f"bv{l}") for l in range(L))
            a_j, b_j = av[vj], bv[vj]
        dacc = Signal(32)

        last_lane = vj == L - 1
        emit = ~dot | last_lane
        store = emit & vd.store & e_in_range
        send = emit & vd.send
        # tx: the skid buffer's output register and skid slot; a word may go out while its skid
        # slot is free (a register: the router's ready reaches no further than the buffer)
        m.submodules.tx_skid = tx_skid = SkidBuffer(Wavelet)
        wiring.connect(m, tx_skid.o, wiring.flipped(self.tx))
        out_free = tx_skid.i.ready
        step = Signal()                   # unpipelined: element vj is made and goes out
        issue = Signal()                  # pipelined: element vj enters the element pipeline
        dot_more = dot & (e_left != 0)

        if piped:
            issue_ok = self._pipeline(m, vd, dot, a_j, b_j, vj, vk, vsel, e_dptr, e_last,
                                              issue, last_lane, emit, send, store, dot_more,
                                              tx_skid.i)
            with m.If(issue):             # before the loads below: a load at the same edge wins
                m.d.sync += [av[l].eq(av[l + 1]) for l in range(L - 1)]
                m.d.sync += [bv[l].eq(bv[l + 1]) for l in range(L - 1)]
        else:
            result, sum_ = self._element(m, vd, dot, a_j, b_j, dacc)
            m.d.comb += [
                self.wr_addr.eq(e_dptr + Mux(dot, vk, vj)),
                self.wr_data.eq(result),
                self.wr_en.eq(step & store),
            ]

        e_free = Signal()                 # the execute stage can take a unit at this edge
        e_idle = Signal()
        e_dot_busy = Signal()             # a DOT is in execution (the fetch stage waits)
        take = Signal()                   # the fetch stage hands its unit over at this edge

        def load(a_src, b_src, t, dptr, bptr, in_range, last, a_base):
            m.d.sync += [av[l].eq(a_src[l]) for l in range(L)]
            m.d.sync += [bv[l].eq(b_src[l]) for l in range(L)]
            m.d.sync += [vsel.eq(t), e_dptr.eq(dptr), e_bptr.eq(bptr), e_in_range.eq(in_range),
                         e_last.eq(last), vj.eq(0), vk.eq(0), kptr.eq(a_base), e_left.eq(hd.count - 1),
                         dot.eq(hd.vmode == VecMode.DOT)]
            m.d.sync += [getattr(vd, name).eq(getattr(hd, name)) for name in EXEC_FIELDS]
            if not piped:
                m.d.sync += dacc.eq(0)

        with m.FSM(name="vec_fetch"):
            with m.State("FIDLE"):
                if not piped:
                    m.d.comb += fcur.eq(pick)
                m.d.comb += self.rd_addr.eq(a_first)
                may = ready.any() & ~e_dot_busy & (e_idle | ~f_dot)
                with m.If(may):
                    if piped:             # the range check comes in FB
                        m.d.sync += f_t.eq(pick)
                        m.next = "FB"
                    else:
                        with m.If(first_past):
                            m.d.comb += [self.fault.eq(1), self.stop.eq(1), self.stop_t.eq(pick)]
                        with m.Else():
                            m.d.sync += f_t.eq(pick)
                            m.next = "FB"
            with m.State("FB"):
                if not piped:
                    m.d.comb += fcur.eq(f_t)
                m.d.comb += self.rd_addr.eq(bptr_a[hcur])
                m.d.sync += [pa[l].eq(self.rd_data[l]) for l in range(L)]
                if piped:
                    with m.If(h_past):
                        m.d.comb += [self.fault.eq(1), self.stop.eq(1), self.stop_t.eq(f_t)]
                        m.next = "FIDLE"
                    with m.Else():
                        m.next = "FL"
                else:
                    m.next = "FL"
            with m.State("FL"):
                if not piped:
                    m.d.comb += fcur.eq(f_t)
                m.d.comb += [self.issue.eq(1), self.issue_t.eq(f_t)]
                m.d.sync += [p_dptr.eq(dptr_a[hcur]), p_bptr.eq(bptr_a[hcur]),
                             p_in_range.eq(self.in_range.bit_select(hcur, 1)),
                             p_last.eq(cnt_a[hcur] + 1 == hd.reps)]
                with m.If(e_free):
                    m.d.comb += take.eq(1)
                    load(pa, self.rd_data, f_t, dptr_a[hcur], bptr_a[hcur],
                         self.in_range.bit_select(hcur, 1), cnt_a[hcur] + 1 == hd.reps, hd.a_base)
                    m.next = "FIDLE"
                with m.Else():
                    m.d.sync += [pb[l].eq(self.rd_data[l]) for l in range(L)]
                    m.next = "FULL"
            with m.State("FULL"):
                if not piped:
                    m.d.comb += fcur.eq(f_t)
                with m.If(e_free):
                    m.d.comb += take.eq(1)
                    load(pa, pb, f_t, p_dptr, p_bptr, p_in_range, p_last, hd.a_base)
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
                m.d.sync += vj.eq(0)
                if not piped:
                    m.d.sync += dacc.eq(0)
                m.d.sync += [bv[l].eq(self.rd_data[l]) for l in range(L)]
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += e_dot_busy.eq(dot)
                if piped:
                    made = issue
                    m.d.comb += [issue.eq(issue_ok), self.busy.eq(issue)]
                else:
                    made = step
                    m.d.comb += [step.eq((~send | out_free)
                                         & ~(store & (self.cfg_write | self.wr_blocked))),
                                 self.busy.eq(step)]
                with m.If(made):
                    if not piped:
                        with m.If(send):
                            m.d.comb += [tx_skid.i.valid.eq(1), tx_skid.i.payload.data.eq(result),
                                         tx_skid.i.payload.color.eq(vd.color), tx_skid.i.payload.ctrl.eq(0)]
                        m.d.sync += dacc.eq(sum_)
                    with m.If(last_lane):
                        with m.If(dot_more):
                            m.d.sync += [vk.eq(vk + 1), e_left.eq(e_left - 1), kptr.eq(kptr + vd.a_stride)]
                            m.next = "ISSUE"
                        with m.Else():
                            if not piped:
                                m.d.comb += [self.unit.eq(1), self.run_end.eq(e_last)]
                            m.d.comb += e_free.eq(1)
                            with m.If(~take):
                                m.next = "EIDLE"
                    with m.Else():
                        m.d.sync += vj.eq(vj + 1)
        return m

    # ---- the element pipeline (mul_stages + add_stages > 0) ---------------------------------
    def _pipeline(self, m, vd, dot, a_j, b_j, vj, vk, vsel, e_dptr, e_last, issue, last_lane,
                  emit, send, store, dot_more, out):
        """The element pipeline, its output FIFO and the output (``tx``, the SRAM store, the
        unit's ``done``). Returns whether the RUN cycle may issue element ``vj``: a FIFO entry
        is free for it (a credit; not needed by a DOT element that writes no word) and, DOT: its
        previous sum is back (not for a word's first element), others: no DOT element is ahead
        of the adder."""
        cfg = self._cfg
        M, A, T = cfg.mul_stages, cfg.add_stages, cfg.num_tasks
        idx = range(max(T, 2))
        F = vec_fifo_depth(A)
        ctl = data.StructLayout({
            "valid": 1, "emit": 1, "add": 1, "first": 1, "send": 1, "store": 1, "relu": 1,
            "round": 1, "color": COLOR_BITS, "waddr": 16, "unit_end": 1, "last": 1, "t": idx})
        entry = data.StructLayout({
            "data": 32, "send": 1, "store": 1, "color": COLOR_BITS, "waddr": 16, "unit_end": 1,
            "last": 1, "t": idx})

        def delay(value, n, name, shape):
            """``value`` after ``n`` registers (always enabled)."""
            for k in range(n):
                r = Signal(shape, name=f"{name}{k}")
                m.d.sync += r.eq(value)
                value = r
            return value

        # What travels with element vj from its issue.
        ictl = Signal(ctl)
        m.d.comb += [
            ictl.emit.eq(emit), ictl.add.eq(dot | (vd.vmode == VecMode.ADD)), ictl.first.eq(vj == 0),
            ictl.send.eq(send), ictl.store.eq(store), ictl.relu.eq(vd.relu),
            ictl.round.eq(vd.round), ictl.color.eq(vd.color),
            ictl.waddr.eq(e_dptr + Mux(dot, vk, vj)), ictl.unit_end.eq(last_lane & ~dot_more),
            ictl.last.eq(e_last), ictl.t.eq(vsel),
        ]
        d_in, n_in = Signal(ctl), Signal(ctl)
        m.d.comb += [d_in.eq(ictl), d_in.valid.eq(issue & dot),
                     n_in.eq(ictl), n_in.valid.eq(issue & ~dot)]

        # DOT: multiplier (M stages), product register, then the adder with the running sum.
        vmul = m.submodules.vec_mul = Bf16MulCore(M)
        m.d.comb += [vmul.a.eq(a_j[16:32]), vmul.b.eq(b_j[16:32])]
        if M:
            m.d.comb += vmul.en.eq(1)
        preg = Signal(32)
        m.d.sync += preg.eq(vmul.y)
        p_ctl = delay(d_in, M + 1, "vec_dctl", ctl)      # beside the multiplier and preg

        # PASS / MASK: their value beside the adder.
        a16 = a_j[16:32]
        n_val = Mux((vd.vmode == VecMode.MASK), Mux((a16 != 0) & ~a16[15], b_j, 0), a_j)

        # The adder: a DOT element from preg (its sum so far in yreg; +0.0 for the first), else
        # the element issued now (ADD). The issue rule keeps them from meeting.
        yreg = Signal(32)                 # every element's result; the DOT accumulator
        vadd = m.submodules.vec_add = Fp32AddCore(A)
        if A:
            m.d.comb += vadd.en.eq(1)
        p_valid = p_ctl.valid
        m.d.comb += [vadd.a.eq(Mux(p_valid, Mux(p_ctl.first, 0, yreg), a_j)),
                     vadd.b.eq(Mux(p_valid, preg, b_j))]
        a_in = Signal(ctl)
        m.d.comb += a_in.eq(Mux(p_valid, p_ctl.as_value(), n_in.as_value()))
        o_ctl = delay(a_in, A, "vec_actl", ctl)
        o_val = delay(n_val, A, "vec_aval", 32)
        y_ctl = Signal(ctl)
        m.d.sync += y_ctl.eq(o_ctl)
        with m.If(o_ctl.valid):
            m.d.sync += yreg.eq(Mux(o_ctl.add, vadd.y, o_val))

        # relu / round, into the FIFO.
        push = y_ctl.valid & y_ctl.emit
        q = Signal(entry)
        m.d.comb += [q.data.eq(self._post(m, yreg, y_ctl.relu, y_ctl.round)),
                     q.send.eq(y_ctl.send), q.store.eq(y_ctl.store), q.color.eq(y_ctl.color),
                     q.waddr.eq(y_ctl.waddr), q.unit_end.eq(y_ctl.unit_end),
                     q.last.eq(y_ctl.last), q.t.eq(y_ctl.t)]
        # The FIFO: its oldest entry in a register (``head``, what the output and the table's
        # counters see), the F - 1 behind it in a ring.
        head = Signal(entry)
        ring = Signal(data.ArrayLayout(entry, F - 1))
        wp, rp = Signal(range(F - 1)), Signal(range(F - 1))
        queued = Signal(range(F + 1))     # entries in the FIFO (the head's included)
        in_ring = Signal(range(F))        # entries in the ring
        used = Signal(range(F + 1))       # credits taken: issued (emitting) and not yet out
        pop = Signal()
        m.d.comb += pop.eq((queued != 0) & (~head.send | out.ready)
                           & ~(head.store & (self.cfg_write | self.wr_blocked)))
        refill = pop | (queued == 0)      # the head is free after this cycle
        from_ring = refill & (in_ring != 0)
        direct = push & refill & (in_ring == 0)
        with m.If(from_ring):
            m.d.sync += [head.eq(ring[rp]), rp.eq(Mux(rp == F - 2, 0, rp + 1))]
        with m.Elif(direct):
            m.d.sync += head.eq(q)
        # A pushed entry is written at wp whether or not it goes to the head directly (wp then
        # stays: the slot is free), so the ring's write enables never wait on pop.
        with m.If(push):
            m.d.sync += ring[wp].eq(q)
        with m.If(push & ~direct):
            m.d.sync += wp.eq(Mux(wp == F - 2, 0, wp + 1))
        m.d.sync += [queued.eq(queued + push - pop), in_ring.eq(in_ring + (push & ~direct) - from_ring),
                     used.eq(used + (issue & emit) - pop)]

        # The output: tx (its skid buffer, ``out``), the store, the unit's done count.
        m.d.comb += [
            self.wr_addr.eq(head.waddr), self.wr_data.eq(head.data),
            self.wr_en.eq(pop & head.store),
            self.t.eq(head.t), self.unit.eq(pop & head.unit_end),
            self.run_end.eq(pop & head.unit_end & head.last),
        ]
        with m.If(pop & head.send):
            m.d.comb += [out.valid.eq(1), out.payload.data.eq(head.data), out.payload.color.eq(head.color),
                         out.payload.ctrl.eq(0)]

        # The issue rule.
        credit = used < F
        if A:
            gap = Signal(range(A + 1))    # DOT: cycles until the previous sum is in yreg
            with m.If(issue & dot):
                m.d.sync += gap.eq(A)
            with m.Elif(gap != 0):
                m.d.sync += gap.eq(gap - 1)
            sum_back = gap == 0
        else:
            sum_back = Const(1)
        dot_ahead = Signal(M + 1)         # a DOT element was issued 1 .. M + 1 cycles ago
        m.d.sync += dot_ahead.eq(Cat(issue & dot, dot_ahead[:M]))
        issue_ok = Mux(dot, ((vj == 0) | sum_back) & (~last_lane | credit),
                       credit & (dot_ahead == 0))
        return issue_ok

    @staticmethod
    def _post(m, elem, relu, round_):
        """``relu`` (sign set -> +0.0), then ``round`` (fp32 -> bf16 RNE, in the upper half;
        NaN -> canonical) of the 32-bit ``elem``."""
        relued = Mux(relu & elem[31], 0, elem)
        r_nan = (relued[23:31] == 0xFF) & (relued[:23] != 0)
        r_sum = Signal(33)
        m.d.comb += r_sum.eq(relued + 0x7FFF + relued[16])
        rounded = Mux(r_nan, 0x7FC00000, Cat(Const(0, 16), r_sum[16:32]))
        result = Signal(32)
        m.d.comb += result.eq(Mux(round_, rounded, relued))
        return result

    @classmethod
    def _element(cls, m, vd, dot, a_j, b_j, dacc):
        """Unpipelined element ``j`` of the firing: PASS ``A[j]``, ADD ``A[j] + B[j]``, MASK
        ``B[j]`` where bf16 ``A[j]`` is positive, DOT ``dacc + A[j] * B[j]``; then ``relu`` and
        ``round``. Returns it and the adder's sum (the DOT accumulator's next value)."""
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
        return cls._post(m, elem, vd.relu, vd.round), vadd.y
