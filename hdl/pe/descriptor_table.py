"""The PE core's task descriptor table (docs/pe.md): ``num_tasks`` descriptors (format
:mod:`arch.pe_map`) with their commit checks and run state.

Per descriptor ``t``: the descriptor ``desc[t]``, ``active``, ``pos`` (word within the unit),
``cnt`` (index of the unit in progress: units its engine finished), ``done`` (finished units, an
FMAC/STORE unit counted one cycle after its last wavelet, in stage 1), the running
addresses ``aptr`` (FMAC: the operand row of the next wavelet; VEC: A of unit ``cnt``), ``bptr`` (VEC:
B of unit ``cnt``), ``dptr`` (the destination of unit ``cnt``: FMAC ``dst_base + cnt*L``, STORE and
VEC ``dst_base + (cnt - lo)*U`` once ``cnt >= lo``; a transposed STORE, ``b_stride`` set, ``U = 1``,
its words at ``dptr + pos*b_stride``, :func:`store_offset`), and ``in_range`` (``lo <= cnt < hi``).
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
* wavelet engine: ``w_step`` (a wavelet of ``w_t`` was taken), ``w_unit_end``, ``w_run_end``,
  ``w_stop`` (``w_t`` stops on a fault), ``w_inc``/``w_inc_t`` (stage 1: ``done[w_inc_t] += 1``).
* store engine (``rx2``): ``s_step``, ``s_t``, ``s_unit_end``, ``s_run_end``, ``s_stop``,
  ``s_inc``/``s_inc_t``, the same for a STORE descriptor (never the one ``w_t`` steps in the cycle).
* vector unit: ``v_issue`` (the operands of unit ``cnt`` of ``v_issue_t`` were fetched: the count
  and running addresses advance), ``v_unit`` (a unit of ``v_t`` is done: ``done`` counts it),
  ``v_run_end`` (it was the last), ``v_stop`` (``v_stop_t`` stops on a fault).
* ``restart[t]``: ``t`` was started or written this cycle (its half-accumulated row is dropped).

A run end stops the descriptor and, with ``chain``, starts ``next`` if it is legal (committed
without fault and not written since). A start clears ``pos``, ``cnt``, ``done`` and loads the
running addresses from the bases.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from arch.config_bus import WORD_BITS
from arch.pe_map import DESC_WORDS, DESCRIPTOR, FAULT_STATUS, Fault, Op, VecMode
from arch.wavelet import MAX_COLORS

from ..layouts import struct_layout

__all__ = ["DescriptorTable", "Descriptor", "PTR_BITS", "state_shapes", "store_offset"]

# One task descriptor (arch.pe_map.DESCRIPTOR, DESC_WORDS configuration words).
Descriptor = struct_layout(DESCRIPTOR)
PTR_BITS = 17
SUB_BITS = 4            # an FMAC row's index in its group (< arch.pe_map.acc_slots <= 9)


def store_offset(d, pos, lanes):
    """Offset from ``dptr`` of word ``pos`` (``< lanes``) of a STORE unit of descriptor ``d``:
    ``pos``, or ``pos * b_stride`` for a transposed STORE (``arch.pe_map.store_addr``), as
    ``ceil(log2(lanes))`` shifted adds (no multiplier: ``pos < lanes``)."""
    bits = max(1, (lanes - 1).bit_length())
    product = sum(Mux(pos[i], d.b_stride << i, 0) for i in range(bits))
    return Mux(d.b_stride == 0, pos, product)


def state_shapes(cfg, *names):
    """``{name: shape}`` of the table's state outputs ``names`` (all of them without names), for
    the engines' matching inputs."""
    T = cfg.num_tasks
    shapes = {"desc": data.ArrayLayout(Descriptor, T), "active": T, "in_range": T, "restart": T,
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
            "w_step": In(1), "w_t": In(idx), "w_unit_end": In(1), "w_sweep_end": In(1), "w_run_end": In(1),
            "w_stop": In(1), "w_inc": In(1), "w_inc_t": In(idx),
            "s_step": In(1), "s_t": In(idx), "s_unit_end": In(1), "s_run_end": In(1),
            "s_stop": In(1), "s_inc": In(1), "s_inc_t": In(idx),
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

        commit = self.we & (self.word == 0)
        upper = Signal(Descriptor.size - WORD_BITS)
        for t in range(T):
            with m.If(self.index == t):
                m.d.comb += upper.eq(raw[t][WORD_BITS:])
        cand = data.View(Descriptor, Cat(self.wdata, upper))
        code = self._check(m, cand, self.index, cfg)
        m.d.comb += self.commit_fault.eq(Mux(commit, code, 0))
        commit_start = commit & (code == 0) & (cand.op != Op.NOP) & cand.enable

        # ---- run state -------------------------------------------------------------------------
        legal = Signal(T)
        rep = [Signal(16, name=f"rep{t}") for t in range(T)]            # unit within its group
        rbase = [Signal(PTR_BITS, name=f"rbase{t}") for t in range(T)]  # FMAC: this row's operands
        # The group in progress (only the accumulator's owner is ever in the middle of one): its
        # first row's count, group position, operands and destination, and the operand offset
        # i*a_stride of the current wavelet index.
        g_cnt, g_rep = Signal(16), Signal(16)
        g_rbase, g_dptr, g_ioff = Signal(PTR_BITS), Signal(PTR_BITS), Signal(PTR_BITS)
        wd, sd, vd = desc[self.w_t], desc[self.s_t], desc[self.v_t]
        w_chain = self.w_run_end & wd.chain
        s_chain = self.s_run_end & sd.chain
        v_chain = self.v_run_end & vd.chain
        for t in range(T):
            d = desc[t]
            pos, cnt, done = self.pos[t], self.cnt[t], self.done[t]
            aptr, bptr, dptr = self.aptr[t], self.bptr[t], self.dptr[t]
            m.d.comb += self.in_range[t].eq((cnt >= d.lo) & (cnt < d.hi))
            written = (self.we & (self.index == t)) | self.stop_all
            with m.If(written):
                m.d.sync += legal[t].eq(commit & ~self.stop_all & (code == 0) & (cand.op != Op.NOP))
            start = (((w_chain & (wd.next == t)) | (s_chain & (sd.next == t)) | (v_chain & (vd.next == t)))
                     & legal[t]
                     | (commit_start & (self.index == t) & ~self.stop_all))
            w_here = self.w_t == t
            s_here = self.s_t == t
            v_here = self.v_t == t
            stop = (((self.w_run_end | self.w_stop) & w_here) | ((self.s_run_end | self.s_stop) & s_here)
                    | (self.v_run_end & v_here) | (self.v_stop & (self.v_stop_t == t)) | written)
            w_step = self.w_step & w_here
            unit_end = Mux(w_step, self.w_unit_end, self.s_unit_end)
            m.d.comb += self.restart[t].eq(start | written)
            group_end = rep[t] + 1 >= d.group
            with m.If(start):
                m.d.sync += [self.active[t].eq(1), pos.eq(0), self.sub[t].eq(0), cnt.eq(0), done.eq(0),
                             rep[t].eq(0),
                             aptr.eq(d.a_base), bptr.eq(d.b_base), dptr.eq(d.dst_base),
                             rbase[t].eq(d.a_base)]
            with m.Else():
                with m.If(stop):
                    m.d.sync += self.active[t].eq(0)
                next_row = Mux(group_end, d.a_base, rbase[t] + L)      # operands of row cnt + 1
                with m.If(w_step & (d.op == Op.FMAC)):
                    # FMAC rows in groups (docs/pe.md#fmac-pipeline): the next row of the group, or the
                    # group's first row at the next wavelet index, or the next group.
                    first = (pos == 0) & (self.sub[t] == 0)
                    ioff = Mux(first, 0, g_ioff)
                    with m.If(first):
                        m.d.sync += [g_cnt.eq(cnt), g_rep.eq(rep[t]), g_rbase.eq(rbase[t]),
                                     g_dptr.eq(dptr)]
                    with m.If(~self.w_sweep_end):
                        m.d.sync += [self.sub[t].eq(self.sub[t] + 1), cnt.eq(cnt + 1),
                                     rep[t].eq(Mux(group_end, 0, rep[t] + 1)), rbase[t].eq(next_row),
                                     aptr.eq(next_row + ioff), dptr.eq(dptr + L), g_ioff.eq(ioff)]
                    with m.Elif(~self.w_unit_end):
                        m.d.sync += [self.sub[t].eq(0), pos.eq(pos + 1),
                                     cnt.eq(Mux(first, cnt, g_cnt)), rep[t].eq(Mux(first, rep[t], g_rep)),
                                     rbase[t].eq(Mux(first, rbase[t], g_rbase)),
                                     dptr.eq(Mux(first, dptr, g_dptr)),
                                     aptr.eq(Mux(first, rbase[t], g_rbase) + ioff + d.a_stride),
                                     g_ioff.eq(ioff + d.a_stride)]
                    with m.Else():
                        m.d.sync += [self.sub[t].eq(0), pos.eq(0), cnt.eq(cnt + 1),
                                     rep[t].eq(Mux(group_end, 0, rep[t] + 1)), rbase[t].eq(next_row),
                                     aptr.eq(next_row), dptr.eq(dptr + L)]
                with m.Elif(w_step | (self.s_step & s_here)):
                    # STORE: word pos of vector cnt
                    m.d.sync += pos.eq(Mux(unit_end, 0, pos + 1))
                    with m.If(unit_end):
                        m.d.sync += cnt.eq(cnt + 1)
                        with m.If(self.in_range[t]):
                            m.d.sync += dptr.eq(dptr + Mux(d.b_stride == 0, L, 1))
                with m.If(self.v_issue & (self.v_issue_t == t)):
                    unit = Mux(d.vmode == VecMode.DOT, d.count, L)
                    m.d.sync += [cnt.eq(cnt + 1), bptr.eq(bptr + d.b_stride),
                                 rep[t].eq(Mux(group_end, 0, rep[t] + 1))]
                    with m.If(group_end):
                        m.d.sync += aptr.eq(aptr + d.a_stride)
                    with m.If(self.in_range[t]):
                        m.d.sync += dptr.eq(dptr + unit)
                w_inc = self.w_inc & (self.w_inc_t == t)
                s_inc = self.s_inc & (self.s_inc_t == t)
                with m.If(w_inc | s_inc | (self.v_unit & v_here)):
                    m.d.sync += done.eq(done + 1 + (w_inc & s_inc))
        return m

    @staticmethod
    def _check(m, d, t, cfg):
        """Fault code (0 = legal) of the descriptor ``d`` being committed as entry ``t``."""
        T, NC = cfg.num_tasks, cfg.num_colors
        is_f, is_s, is_v = d.op == Op.FMAC, d.op == Op.STORE, d.op == Op.VEC
        dot = is_v & (d.vmode == VecMode.DOT)
        bad_count = ((d.reps == 0) | ((is_s | is_v) & (d.lo > d.hi)) | (is_f & (d.count == 0))
                     | (is_v & Mux(dot, d.count == 0, d.count != 1)))
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
