"""The PE core's task descriptor table (docs/pe.md): ``num_tasks`` descriptors (format
:mod:`arch.pe_map`) with their commit checks and run state.

Per descriptor ``t``: the descriptor ``desc[t]``, ``active``, ``pos`` (word within the unit),
``cnt`` (index of the unit in progress: units its engine finished), ``done`` (finished units, an
FMAC/STORE unit counted one cycle after its last wavelet, in stage 1), the running
addresses ``aptr`` (FMAC: the operand row of the next wavelet; VEC: A of unit ``cnt``), ``bptr`` (VEC:
B of unit ``cnt``), ``dptr`` (the destination of unit ``cnt``: FMAC ``dst_base + cnt*L``, STORE and
VEC ``dst_base + (cnt - lo)*U`` once ``cnt >= lo``; a transposed STORE, ``b_stride`` set, ``U = 1``,
its words at ``dptr + pos*b_stride``, ``arch.pe_map.store_addr``), and ``in_range`` (STORE and
VEC: ``lo <= cnt < hi``, a register that follows ``cnt``).
Running addresses are 17 bits so an address past a 16-bit SRAM is seen, not wrapped. ``group``
(0 counts as 1) takes units in groups: an FMAC row ``n`` reads its operands from ``a_base + (n mod
group)*L`` on (a row per L-word chunk, the chunks again for the next group), a VEC unit ``n``
reads A at ``a_base + (n div group)*a_stride`` (``group`` units share one A vector).

Ports:

* configuration: ``we``, ``index``, ``word``, ``wdata`` write word ``word`` of descriptor ``index``
  (it takes effect next cycle; any write stops the descriptor, writing word 0 commits it);
  ``rdata`` (combinational) is that word; ``commit_fault`` the fault code of this cycle's commit
  (0: none or legal); ``stop_all`` stops every descriptor as a write to it would (words and
  ``done`` counters kept, not legal until committed again).
* the next step of each descriptor, registers (so the engines' stage 0 only picks the descriptor
  and never waits on this arithmetic): every update of a descriptor's state also loads the flags
  of the state it produces, computed from the current registers beside the update (``_flags``;
  the inputs that would chain before it, ``first``: ``pos == 0`` and ``sub == 0``, and
  ``group_end``: the unit's group ends, are registers too): ``unit_end[t]`` (FMAC: the row's
  last wavelet, ``pos + 1 == count``; STORE: the vector's last word), ``run_end[t]`` (and the
  run's last unit), ``sweep_end[t]`` (FMAC: a wavelet of its group's last row), ``past[t]`` (the
  step would run past the end of SRAM: the FMAC operand vector or, at a row's end, its
  destination; a STORE word in range; a VEC unit's A, B or stored unit), ``saddr[t]`` (a STORE's
  word address, ``dptr + pos*b_stride`` or ``dptr + pos``: a register that follows it).
* wavelet engine: ``w_step[t]`` (a wavelet of ``t`` was taken; one bit at most), ``w_stop[t]``
  (``t`` stops on a fault), ``w_inc``/``w_inc_t`` (the write stage: ``done[w_inc_t] += 1``).
* store engine (``rx2``): ``s_step``, ``s_stop``, ``s_inc``/``s_inc_t``, the same for a STORE
  descriptor (never the one ``w_step`` steps in the cycle).
* vector unit: ``v_issue`` (the operands of unit ``cnt`` of ``v_issue_t`` were fetched: the count
  and running addresses advance), ``v_unit`` (a unit of ``v_t`` is done: ``done`` counts it),
  ``v_run_end`` (it was the last), ``v_stop`` (``v_stop_t`` stops on a fault).
* ``restart[t]``: ``t`` was started or written this cycle (its half-accumulated row is dropped).

A run end stops the descriptor and, with ``chain``, starts ``next`` if it is legal (committed
without fault and not written since), not written in that cycle, and idle or stopping in that
cycle (a running ``next`` keeps running). The start state (``pos``, ``sub``, ``cnt`` 0, the
running addresses at the bases, its flags) is loaded beforehand: at the commit (word 0 written,
whatever the checks say) and again when a run ends or a fault stops it; so a start only sets
``active`` and ``done`` to read 0 (``done_zero``), and no start reaches the run state's registers.
The commit checks read registered facts of words 1.. (``_upper_facts``) and word 0 as written.
"""

from amaranth import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from arch.config_bus import WORD_BITS
from arch.pe_map import DESC_WORDS, DESCRIPTOR, FAULT_STATUS, Fault, Op, VecMode
from arch.wavelet import MAX_COLORS

from ..formal import Properties, active
from ..layouts import struct_layout
from ..logic import or_all, two_or_more

__all__ = ["DescriptorTable", "Descriptor", "PTR_BITS", "state_shapes"]

# One task descriptor (arch.pe_map.DESCRIPTOR, DESC_WORDS configuration words).
Descriptor = struct_layout(DESCRIPTOR)
PTR_BITS = 17
SUB_BITS = 4            # an FMAC row's index in its group (< arch.pe_map.acc_slots <= 9)
# What the commit checks read of a descriptor's words 1.. (DescriptorTable._upper_facts), and
# their values for words of zeros (the reset state)
UPPER_FACTS = ("reps == 0", "lo > hi", "count == 0", "count != 1")
UPPER_FACTS_INIT = 0b1101


def state_shapes(cfg, *names):
    """``{name: shape}`` of the table's state outputs ``names`` (all of them without names), for
    the engines' matching inputs."""
    T = cfg.num_tasks
    shapes = {"desc": data.ArrayLayout(Descriptor, T), "active": T, "in_range": T, "restart": T,
              "unit_end": T, "run_end": T, "sweep_end": T, "past": T,
              "saddr": data.ArrayLayout(PTR_BITS + 2, T),
              "pos": data.ArrayLayout(16, T), "sub": data.ArrayLayout(SUB_BITS, T),
              "cnt": data.ArrayLayout(16, T),
              "done": data.ArrayLayout(16, T), "aptr": data.ArrayLayout(PTR_BITS, T),
              "bptr": data.ArrayLayout(PTR_BITS, T), "dptr": data.ArrayLayout(PTR_BITS, T)}
    return {n: shapes[n] for n in names or shapes}


class DescriptorTable(wiring.Component):
    def __init__(self, cfg):
        self._cfg = cfg
        T = cfg.num_tasks
        idx = range(max(T, 2))
        super().__init__({
            "we": In(1), "index": In(idx), "word": In(3), "wdata": In(WORD_BITS), "stop_all": In(1),
            "rdata": Out(WORD_BITS), "commit_fault": Out(FAULT_STATUS.field_width("code")),
            **{name: Out(shape) for name, shape in state_shapes(cfg).items()},
            "w_step": In(T), "w_stop": In(T), "w_inc": In(1), "w_inc_t": In(idx),
            "s_step": In(T), "s_stop": In(T), "s_inc": In(1), "s_inc_t": In(idx),
            "v_unit": In(1), "v_t": In(idx), "v_run_end": In(1),
            "v_issue": In(1), "v_issue_t": In(idx), "v_stop": In(1), "v_stop_t": In(idx),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        L, T = cfg.lanes, cfg.num_tasks
        desc = self.desc

        # ---- configuration writes and commit -------------------------------------------------
        raw = [desc[t].as_value() for t in range(T)]
        m.d.comb += self.rdata.eq(Const(0))
        for t in range(T):
            for w in range(DESC_WORDS):
                hit = (self.index == t) & (self.word == w)
                with m.If(hit):
                    m.d.comb += self.rdata.eq(raw[t][WORD_BITS * w:WORD_BITS * (w + 1)])
                with m.If(self.we & hit):
                    m.d.sync += raw[t][WORD_BITS * w:WORD_BITS * (w + 1)].eq(self.wdata)

        # The commit checks per descriptor, on its own upper words (no lookup by ``index``): the
        # facts of words 1.. (``_upper_facts``) are registers that follow them, loaded from the
        # words as this cycle's write leaves them, so a commit right after a write sees it.
        commit = self.we & (self.word == 0)
        cand, code, upper_facts = [], [], []
        for t in range(T):
            upper = Signal(Descriptor.size - WORD_BITS, name=f"upper_next{t}")
            m.d.comb += upper.eq(raw[t][WORD_BITS:])
            for w in range(1, DESC_WORDS):
                with m.If(self.we & (self.index == t) & (self.word == w)):
                    m.d.comb += upper[WORD_BITS * (w - 1):WORD_BITS * w].eq(self.wdata)
            facts = Signal(len(UPPER_FACTS), name=f"upper_facts{t}", init=UPPER_FACTS_INIT)
            m.d.sync += facts.eq(self._upper_facts(data.View(Descriptor, Cat(Const(0, WORD_BITS), upper))))
            upper_facts.append(facts)
            cand.append(data.View(Descriptor, Cat(self.wdata, raw[t][WORD_BITS:])))
            code.append(self._check(m, cand[t], t, cfg, facts=facts))
        picked_code = Signal.like(code[0])
        for t in range(T):
            with m.If(self.index == t):
                m.d.comb += picked_code.eq(code[t])
        m.d.comb += self.commit_fault.eq(Mux(commit, picked_code, 0))
        op0 = data.View(Descriptor, Cat(self.wdata, Const(0, Descriptor.size - WORD_BITS)))

        flags = [Cat(self.unit_end[t], self.run_end[t], self.sweep_end[t], self.past[t]) for t in range(T)]

        # ---- run state -------------------------------------------------------------------------
        legal = Signal(T)
        rep = [Signal(16, name=f"rep{t}") for t in range(T)]            # unit within its group
        gend = [Signal(name=f"group_end{t}") for t in range(T)]         # rep + 1 >= group, a register
        rbase = [Signal(PTR_BITS, name=f"rbase{t}") for t in range(T)]  # FMAC: this row's operands
        # The group in progress (only the accumulator's owner is ever in the middle of one): its
        # first row's count, group position, operands and destination, and the operand offset
        # i*a_stride of the current wavelet index.
        g_cnt, g_rep, g_gend = Signal(16), Signal(16), Signal()
        g_rbase, g_dptr, g_ioff = Signal(PTR_BITS), Signal(PTR_BITS), Signal(PTR_BITS)
        # a run ends (one-hot per engine); signals, so that a bit of them is one wire in the Verilog
        ends, v_ends = Signal(T), Signal(T)
        m.d.comb += [ends.eq((self.w_step | self.s_step) & self.run_end),
                     v_ends.eq(Cat(self.v_run_end & (self.v_t == t) for t in range(T)))]
        is_fmac = Cat(desc[t].op == Op.FMAC for t in range(T))
        first = Signal(T, init=(1 << T) - 1)      # pos == 0 and sub == 0 (a register that follows them)
        # done[t] = 0 after a start, else done_q[t]: the start only sets done_zero (no 16-bit clear
        # waits on it)
        done_q = [Signal(16, name=f"done_q{t}") for t in range(T)]
        done_zero = Signal(T)
        m.d.comb += [self.done[t].eq(Mux(done_zero[t], 0, done_q[t])) for t in range(T)]

        def picked(values):
            """``values[t]`` of the descriptor the wavelet engine steps (0 if none): an AND-OR."""
            return or_all([Mux(self.w_step[t], values[t], 0) for t in range(T)])

        # The group registers follow the FMAC descriptor the wavelet engine steps. Every value is
        # computed per descriptor from its state, and the step only picks one (stage-0 timing).
        ioff = [Mux(first[t], 0, g_ioff) for t in range(T)]   # i*a_stride of its next wavelet
        w_fmac = (self.w_step & is_fmac).any()
        with m.If(w_fmac & (self.w_step & first).any()):
            m.d.sync += [g_cnt.eq(picked(self.cnt)), g_rep.eq(picked(rep)), g_gend.eq(picked(gend)),
                         g_rbase.eq(picked(rbase)), g_dptr.eq(picked(self.dptr))]
        with m.If(w_fmac):
            m.d.sync += g_ioff.eq(picked([Mux(~self.sweep_end[t], ioff[t],
                                              Mux(~self.unit_end[t], ioff[t] + desc[t].a_stride, g_ioff))
                                          for t in range(T)]))

        P, SB = PTR_BITS, SUB_BITS
        for t in range(T):
            d = desc[t]
            pos, cnt, done, sub = self.pos[t], self.cnt[t], self.done[t], self.sub[t]
            aptr, bptr, dptr = self.aptr[t], self.bptr[t], self.dptr[t]
            saddr, in_range = self.saddr[t], self.in_range[t]
            written = (self.we & (self.index == t)) | self.stop_all
            ok = (code[t] == 0) & (op0.op != Op.NOP)
            with m.If(written):
                m.d.sync += legal[t].eq(commit & ~self.stop_all & ok)
            # A run starts from a state loaded beforehand (*armed*): by the commit of the descriptor
            # (word 0 written, whatever its checks say), and again when a run of it ends or a
            # fault stops it; so a start itself only sets ``active`` and clears ``done`` and no
            # start (a chain's, after an engine's step) reaches the run state's registers. A
            # chain starts ``next`` only when it is idle or stops in the same cycle (an active
            # ``next`` keeps running), and not when it is written in that cycle.
            chained = or_all([(ends[u] | v_ends[u]) & desc[u].chain & (desc[u].next == t)
                               for u in range(T) if u != t])
            commit_here = commit & (self.index == t) & ~self.stop_all
            committed = commit_here & ok & op0.enable
            v_here = self.v_t == t
            own_end = ends[t] | (self.v_run_end & v_here)
            fault_stop = self.w_stop[t] | self.s_stop[t] | (self.v_stop & (self.v_stop_t == t))
            arm = commit_here | own_end | fault_stop
            start = committed | (chained & legal[t] & ~written & (~self.active[t] | own_end | fault_stop))
            stop = own_end | fault_stop | written
            w_step = self.w_step[t]
            unit_end = self.unit_end[t]
            m.d.comb += self.restart[t].eq(start | written)
            group_end = gend[t]
            # the next unit of the group (rep + 1, or 0 after the group's last): its group_end
            next_rep = [rep[t].eq(Mux(group_end, 0, rep[t] + 1)),
                        gend[t].eq(Mux(group_end, d.group <= 1, rep[t] + 2 >= d.group))]
            # lo <= cnt + 1 < hi, from lo <= cnt < hi (lo <= hi: a commit check)
            in_range_next = Mux(cnt + 1 == d.hi, 0, Mux(cnt + 1 == d.lo, 1, in_range))

            with m.If(start):
                m.d.sync += self.active[t].eq(1)
            with m.Elif(stop):
                m.d.sync += self.active[t].eq(0)
            next_row = Mux(group_end, d.a_base, rbase[t] + L)[:P]      # operands of row cnt + 1
            with m.If(w_step & is_fmac[t]):
                # FMAC rows in groups (docs/pe.md#fmac-pipeline): the next row of the group, or the
                # group's first row at the next wavelet index, or the next group.
                with m.If(~self.sweep_end[t]):
                    nx = dict(cnt=(cnt + 1)[:16], sub=(sub + 1)[:SB], aptr=(next_row + ioff[t])[:P],
                              dptr=(dptr + L)[:P])
                    m.d.sync += [sub.eq(nx["sub"]), cnt.eq(nx["cnt"]), first[t].eq(0),
                                 *next_rep, rbase[t].eq(next_row),
                                 aptr.eq(nx["aptr"]), dptr.eq(nx["dptr"]),
                                 flags[t].eq(self._flags(cfg, d, Op.FMAC, unit_end=unit_end, **nx))]
                with m.Elif(~unit_end):
                    nx = dict(pos=(pos + 1)[:16], cnt=Mux(first[t], cnt, g_cnt), sub=Const(0),
                              aptr=(Mux(first[t], rbase[t], g_rbase) + ioff[t] + d.a_stride)[:P],
                              dptr=Mux(first[t], dptr, g_dptr))
                    m.d.sync += [sub.eq(0), pos.eq(nx["pos"]), cnt.eq(nx["cnt"]), first[t].eq(0),
                                 rep[t].eq(Mux(first[t], rep[t], g_rep)),
                                 gend[t].eq(Mux(first[t], gend[t], g_gend)),
                                 rbase[t].eq(Mux(first[t], rbase[t], g_rbase)),
                                 dptr.eq(nx["dptr"]), aptr.eq(nx["aptr"]),
                                 flags[t].eq(self._flags(cfg, d, Op.FMAC, **nx))]
                with m.Else():
                    nx = dict(pos=Const(0), cnt=(cnt + 1)[:16], sub=Const(0), aptr=next_row,
                              dptr=(dptr + L)[:P])
                    m.d.sync += [sub.eq(0), pos.eq(0), cnt.eq(nx["cnt"]), first[t].eq(1),
                                 *next_rep, rbase[t].eq(next_row),
                                 aptr.eq(next_row), dptr.eq(nx["dptr"]),
                                 flags[t].eq(self._flags(cfg, d, Op.FMAC, **nx))]
            with m.Elif(w_step | self.s_step[t]):
                # STORE: word pos of vector cnt (saddr follows it)
                with m.If(~unit_end):
                    nx = dict(pos=(pos + 1)[:16], cnt=cnt, in_range=in_range,
                              saddr=(saddr + Mux(d.b_stride == 0, 1, d.b_stride))[:P + 2])
                    m.d.sync += [pos.eq(nx["pos"]), saddr.eq(nx["saddr"]), first[t].eq(0),
                                 flags[t].eq(self._flags(cfg, d, Op.STORE, **nx))]
                with m.Else():
                    next_dptr = (dptr + Mux(in_range, Mux(d.b_stride == 0, L, 1), 0))[:P]
                    nx = dict(pos=Const(0), cnt=(cnt + 1)[:16], in_range=in_range_next, saddr=next_dptr)
                    m.d.sync += [pos.eq(0), cnt.eq(nx["cnt"]), dptr.eq(next_dptr), saddr.eq(next_dptr),
                                 first[t].eq(1), in_range.eq(in_range_next),
                                 flags[t].eq(self._flags(cfg, d, Op.STORE, **nx))]
            with m.If(self.v_issue & (self.v_issue_t == t)):
                unit = Mux(d.vmode == VecMode.DOT, d.count, L)
                nx = dict(cnt=(cnt + 1)[:16], bptr=(bptr + d.b_stride)[:P],
                          aptr=Mux(group_end, aptr + d.a_stride, aptr)[:P],
                          dptr=Mux(in_range, dptr + unit, dptr)[:P], in_range=in_range_next)
                m.d.sync += [cnt.eq(nx["cnt"]), bptr.eq(nx["bptr"]), aptr.eq(nx["aptr"]), dptr.eq(nx["dptr"]),
                             *next_rep, in_range.eq(in_range_next),
                             flags[t].eq(self._flags(cfg, d, Op.VEC, vmode=d.vmode, store=d.store,
                                                     unit_end=unit_end, **nx))]
            w_inc = self.w_inc & (self.w_inc_t == t)
            s_inc = self.s_inc & (self.s_inc_t == t)
            with m.If(w_inc | s_inc | (self.v_unit & v_here)):
                m.d.sync += [done_q[t].eq(done + 1 + (w_inc & s_inc)), done_zero[t].eq(0)]
            with m.If(start):
                m.d.sync += done_zero[t].eq(1)
            with m.If(arm):
                # a commit's op and modes are in the word written now (word 0), not yet in desc
                new = data.View(Descriptor, Mux(commit_here, cand[t].as_value(), d.as_value()))
                regs = self._run_state(t, first, rep, gend, flags[t])
                m.d.sync += [regs[k].eq(v) for k, v in self._start_state(cfg, d, new).items()]
                m.d.sync += rbase[t].eq(d.a_base)
        if active(platform):
            self._formal(m, platform, legal=legal, first=first, rep=rep, gend=gend,
                         group=(g_cnt, g_rep, g_gend), upper_facts=upper_facts)
        return m

    def _run_state(self, t, first, rep, gend, flags):
        """Descriptor ``t``'s run state registers by name, in the order of :meth:`_start_state`."""
        return dict(pos=self.pos[t], sub=self.sub[t], cnt=self.cnt[t], first=first[t], rep=rep[t],
                    gend=gend[t], aptr=self.aptr[t], bptr=self.bptr[t], dptr=self.dptr[t],
                    saddr=self.saddr[t], in_range=self.in_range[t], flags=flags)

    @classmethod
    def _start_state(cls, cfg, d, mode):
        """The run state a start of descriptor ``d`` begins from (``mode``: the view whose
        ``op``, ``vmode``, ``store`` apply): counters 0, the running addresses at the bases, and
        the flags of that state."""
        in_range0 = (d.lo == 0) & (d.hi != 0)
        return dict(pos=Const(0), sub=Const(0), cnt=Const(0), first=Const(1), rep=Const(0),
                    gend=d.group <= 1, aptr=d.a_base, bptr=d.b_base, dptr=d.dst_base, saddr=d.dst_base,
                    in_range=in_range0,
                    flags=cls._flags(cfg, d, mode.op, vmode=mode.vmode, store=mode.store, pos=Const(0),
                                     cnt=Const(0), sub=Const(0), aptr=d.a_base, bptr=d.b_base,
                                     dptr=d.dst_base, saddr=d.dst_base, in_range=in_range0))

    @staticmethod
    def _flags(cfg, d, op, *, vmode=0, store=0, unit_end=None, pos=None, cnt, sub=0, aptr=0, bptr=0, dptr=0,
               saddr=0, in_range=0):
        """``Cat(unit_end, run_end, sweep_end, past)`` of descriptor ``d`` (operation ``op``, an
        :class:`Op` or a signal; ``vmode``, ``store`` for a VEC) in the given run state: what its
        next step would do. ``unit_end`` may be given (a state whose ``pos`` is unchanged)."""
        L, S, R = cfg.lanes, cfg.sram_words, cfg.acc_rows
        is_f = op == Op.FMAC
        if unit_end is None:
            unit_end = Mux(is_f, pos + 1 == d.count, pos == L - 1)
        last_unit = cnt + 1 == d.reps
        # sweep_end (FMAC): the group's last row: its last row of the run, or row R - 1 unless the
        # rows after the group's first R are fewer than R (then they join it: fmac_group_rows)
        sweep_end = last_unit | ((sub == R - 1) & (cnt + (R + 1) <= d.reps))
        dot = vmode == VecMode.DOT      # (x + L > S as x > S - L: a compare with a constant)
        vec_past = (Mux(dot, d.a_base > S - L, aptr > S - L)
                    | ((vmode != VecMode.PASS) & (bptr > S - L))
                    | (store & in_range & Mux(dot, dptr + d.count > S, dptr > S - L)))
        past = Mux(is_f, (aptr > S - L) | (unit_end & (dptr > S - L)),
                   Mux(op == Op.VEC, vec_past, in_range & (saddr >= S)))
        return Cat(unit_end, unit_end & last_unit, sweep_end, past)

    @staticmethod
    def _upper_facts(d):
        """:data:`UPPER_FACTS` of descriptor ``d``'s words 1.. (what the commit checks read of them)."""
        return Cat(d.reps == 0, d.lo > d.hi, d.count == 0, d.count != 1)

    @classmethod
    def _check(cls, m, d, t, cfg, facts=None):
        """Fault code (0 = legal) of the descriptor ``d`` being committed as entry ``t``; ``facts``:
        its :meth:`_upper_facts` if already computed."""
        T, NC = cfg.num_tasks, cfg.num_colors
        if facts is None:
            facts = cls._upper_facts(d)
        reps0, lo_gt_hi, count0, count_ne1 = facts[0], facts[1], facts[2], facts[3]
        is_f, is_s, is_v = d.op == Op.FMAC, d.op == Op.STORE, d.op == Op.VEC
        dot = is_v & (d.vmode == VecMode.DOT)
        bad_count = (reps0 | ((is_s | is_v) & lo_gt_hi) | (is_f & count0)
                     | (is_v & Mux(dot, count0, count_ne1)))
        bad_color = (d.color >= NC) & (~is_v | d.send) if NC < MAX_COLORS else Const(0)
        bad_index = ((d.chain & ((d.next >= T) | (d.next == t)))
                     | (is_v & d.dep_a_en & (d.dep_a >= T)) | (is_v & d.dep_b_en & (d.dep_b >= T)))
        no_action = is_v & ~d.send & ~d.store
        code = Signal(FAULT_STATUS.field_width("code"))
        with m.If(d.op == Op.NOP):
            m.d.comb += code.eq(0)
        with m.Elif(bad_count):
            m.d.comb += code.eq(Fault.COUNT)
        with m.Elif(bad_color):
            m.d.comb += code.eq(Fault.COLOR)
        with m.Elif(bad_index):
            m.d.comb += code.eq(Fault.INDEX)
        with m.Elif(no_action):
            m.d.comb += code.eq(Fault.NO_ACTION)
        return code

    # ---- formal properties (docs/verification.md#formal) ------------------------------------
    def _formal(self, m, platform, *, legal, first, rep, gend, group, upper_facts):
        """The engines' contract (rules: assumed at the top, asserted inside a core): the
        wavelet engine steps or RANGE-stops at most one active FMAC/STORE descriptor, the store
        engine one active STORE, never the same one; a step only with ``past`` low, a stop only
        with it high; an FMAC steps only while no other active FMAC is in the middle of a row
        group (``ACC_CONFLICT``); ``v_issue`` is unit ``cnt`` of an active VEC with units left; the
        vector unit and the wavelet engines never count a unit of one descriptor in one cycle.

        Asserted per descriptor: next cycle it is active exactly if it starts (a legal commit with
        ``enable``, or a run end of another descriptor chaining into it while it is legal and not
        written) or was active and did not stop (its run end, its RANGE fault, a write of it,
        ``stop_all``): every stop leaves it inactive, a fault stops only the descriptor it names,
        a commit fault leaves it stopped and not legal; ``legal`` = committed without fault and
        not written since; an inactive descriptor's run state, or that of one stopped by a fault,
        moves only by a start; ``done`` is 0 after a start, else counts the engines' units. An
        active or legal descriptor passes the commit checks. An active one's counters are in range
        (FMAC ``pos < count``, STORE ``pos < L``, ``cnt < reps``, VEC ``cnt <= reps``; FMAC ``sub
        <= cnt``, ``sub < 2 acc_rows - 1``, ``sub >= acc_rows`` only in the run's last group;
        ``rep < group``) and its flags, ``first``, ``group_end`` and ``in_range`` equal their
        definitions on its state; at most one active FMAC is in the middle of a group, and the
        group registers hold that group's first row."""
        f = Properties(m, platform, self)
        cfg = self._cfg
        L, T, R = cfg.lanes, cfg.num_tasks, cfg.acc_rows
        desc = self.desc
        g_cnt, g_rep, g_gend = group
        fmac = Cat(desc[t].op == Op.FMAC for t in range(T))
        store = Cat(desc[t].op == Op.STORE for t in range(T))
        vec = Cat(desc[t].op == Op.VEC for t in range(T))

        # ---- the engines: wavelet_engine.py stage 0 (match: active FMAC/STORE of the color;
        # step/stop only when taken, match one-hot; ACC_CONFLICT: owned & acc_owner != t),
        # store_engine.py stage 0 (active STOREs; dup includes w_match), vector_unit.py FL
        # (the pick: active, VEC, cnt != reps), the engines' inc / unit outputs
        w = self.w_step | self.w_stop
        s = self.s_step | self.s_stop
        f.rule("w_names_one", ~two_or_more(w) & ((self.w_step & self.w_stop) == 0))
        f.rule("w_active_fmac_or_store", (w & ~(self.active & (fmac | store))) == 0)
        f.rule("w_step_not_past", (self.w_step & self.past) == 0)
        f.rule("w_stop_past", (self.w_stop & ~self.past) == 0)
        f.rule("s_names_one", ~two_or_more(s) & ((self.s_step & self.s_stop) == 0))
        f.rule("s_active_store", (s & ~(self.active & store)) == 0)
        f.rule("s_step_not_past", (self.s_step & self.past) == 0)
        f.rule("s_stop_past", (self.s_stop & ~self.past) == 0)
        f.rule("s_not_w", (w & s) == 0)
        mid = self.active & fmac & ~first          # an active FMAC in the middle of a row group
        for t in range(T):
            others = Cat(mid[u] for u in range(T) if u != t) if T > 1 else Const(0)
            f.rule(f"w_fmac{t}_owns_accumulator", ~(self.w_step[t] & fmac[t]) | ~others.any())
        # (the pick is two cycles before FL: a write of the descriptor in between breaks this, an
        # RTL gap, docs/verification.md#rtl-gaps)
        f.rule("v_issue_current_unit", ~self.v_issue | or_all(
            [(self.v_issue_t == t) & self.active[t] & vec[t] & (self.cnt[t] != desc[t].reps)
             for t in range(T)]))
        f.rule("one_engine_counts_a_descriptor",
               ~(self.v_unit & ((self.w_inc & (self.w_inc_t == self.v_t))
                                | (self.s_inc & (self.s_inc_t == self.v_t)))))

        # ---- start, stop, legal (docs/pe.md#operations, #configuration-address-map) ---------
        word0 = data.View(Descriptor, Cat(self.wdata, Const(0, Descriptor.size - WORD_BITS)))
        ghost_legal = Signal(T, name="ghost_legal")
        run_end_of, written, commit_ok = [], [], []
        for t in range(T):
            run_end_of.append(((self.w_step[t] | self.s_step[t]) & self.run_end[t])
                              | (self.v_run_end & (self.v_t == t)))
            written.append((self.we & (self.index == t)) | self.stop_all)
            commit_ok.append(self.we & (self.index == t) & (self.word == 0) & ~self.stop_all
                             & (self.commit_fault == 0) & (word0.op != Op.NOP))
            with m.If(written[t]):
                m.d.sync += ghost_legal[t].eq(commit_ok[t])
        chained_by_step = []
        for t in range(T):
            d = desc[t]
            chain_in = [run_end_of[u] & desc[u].chain & (desc[u].next == t) for u in range(T) if u != t]
            chained = or_all(chain_in) & ghost_legal[t]
            fault = self.w_stop[t] | self.s_stop[t] | (self.v_stop & (self.v_stop_t == t))
            stop = run_end_of[t] | fault | written[t]
            # a chain starts an idle descriptor, or one that stops now, and never one written now
            start = (commit_ok[t] & word0.enable) | (chained & ~written[t] & (~self.active[t] | run_end_of[t] | fault))
            f.check(f"legal{t}", legal[t] == ghost_legal[t])
            f.check(f"active{t}_iff_started_or_not_stopped",
                    self.active[t] == f.past(start | (self.active[t] & ~stop), f"active{t}_next"))
            regs = self._run_state(t, first, rep, gend,
                                   Cat(self.unit_end[t], self.run_end[t], self.sweep_end[t], self.past[t]))
            run_state = Cat(*regs.values())
            step = self.w_step[t] | self.s_step[t] | (self.v_issue & (self.v_issue_t == t))
            commit_of = self.we & (self.index == t) & (self.word == 0) & ~self.stop_all
            # (the vector unit's run end or fault of t loads the start state even when t is idle:
            # its last unit leaves after a write of t)
            v_end = (self.v_run_end & (self.v_t == t)) | (self.v_stop & (self.v_stop_t == t))
            still = f.past(~commit_of & ~step & ~v_end & ~self.active[t], f"still{t}")
            f.check(f"idle{t}_never_moves", ~still | (run_state == f.past(run_state, f"state{t}")))
            armed = Cat(Cat(v, Const(0, len(regs[k]) - len(Value.cast(v))))
                        for k, v in self._start_state(cfg, d, d).items())
            f.check(f"idle{t}_armed", ~(legal[t] & ~self.active[t]) | (run_state == armed))
            units = ((self.w_inc & (self.w_inc_t == t)) + (self.s_inc & (self.s_inc_t == t))
                     + (self.v_unit & (self.v_t == t)))
            f.check(f"done{t}_counts_units",
                    self.done[t] == Mux(f.past(start, f"start{t}"), 0,
                                        f.past((self.done[t] + units)[:16], f"done{t}_next")))
            chained_by_step.append(ghost_legal[t] & ~written[t] & or_all(
                [(self.w_step[u] | self.s_step[u]) & self.run_end[u] & desc[u].chain & (desc[u].next == t)
                 for u in range(T) if u != t]))

            # ---- a legal or active descriptor -------------------------------------------------
            f.check(f"upper_facts{t}", upper_facts[t] == self._upper_facts(d))
            checked = (self._check(m, d, t, cfg) == 0) & (d.op != Op.NOP)
            f.check(f"legal{t}_passes_checks", ~legal[t] | checked)
            f.check(f"active{t}_passes_checks", ~self.active[t] | checked)
            pos, cnt, sub = self.pos[t], self.cnt[t], self.sub[t]
            in_span = (d.lo <= cnt) & (cnt < d.hi)
            group1 = Mux(d.group == 0, 1, d.group)
            flags = self._flags(cfg, d, d.op, vmode=d.vmode, store=d.store, pos=pos, cnt=cnt, sub=sub,
                                aptr=self.aptr[t], bptr=self.bptr[t], dptr=self.dptr[t],
                                saddr=self.saddr[t], in_range=self.in_range[t])
            run = Cat(self.unit_end[t], self.run_end[t], self.sweep_end[t], self.past[t])
            common = (run == flags) & (rep[t] < group1) & (gend[t] == (rep[t] + 1 >= d.group))
            fmac_ok = ((pos < d.count) & (cnt < d.reps) & (sub <= cnt) & (sub <= 2 * R - 2)
                       & ((sub < R) | (cnt - sub + 2 * R > d.reps))      # beyond R: the last group
                       & (first[t] == ((pos == 0) & (sub == 0))))
            store_ok = ((pos < L) & (cnt < d.reps) & (sub == 0) & (first[t] == (pos == 0))
                        & (self.in_range[t] == in_span))
            vec_ok = (pos == 0) & (sub == 0) & first[t] & (cnt <= d.reps) & (self.in_range[t] == in_span)
            f.check(f"active{t}_in_range",
                    ~self.active[t] | (common & Mux(fmac[t], fmac_ok, Mux(store[t], store_ok, vec_ok))))
            f.check(f"group{t}_registers", ~mid[t] | ((g_cnt == cnt - sub) & (g_rep < group1)
                                                      & (g_gend == (g_rep + 1 >= d.group))))
        f.check("one_group_in_progress", ~two_or_more(mid))

        f.cover("commit_start", (Cat(commit_ok) != 0) & word0.enable)
        f.cover("commit_fault", self.commit_fault != 0)
        f.cover("chain_start_at_a_run_end", Cat(chained_by_step).any())
        f.cover("fmac_last_group_row", (self.active & fmac & Cat(self.sub[t] == 2 * R - 2
                                                                  for t in range(T))).any())
        f.cover("fmac_back_to_group_start", (self.w_step & fmac & self.sweep_end & ~self.unit_end
                                             & ~first).any())
        f.cover("store_step", self.s_step.any())
        f.cover("vec_last_issue", self.v_issue & or_all(
            [(self.v_issue_t == t) & (self.cnt[t] + 1 == desc[t].reps) for t in range(T)]))
        f.cover("range_stop", self.w_stop.any())
