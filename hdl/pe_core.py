"""The PE core (docs/pe.md): a descriptor-driven dataflow core with banked SRAM and FMAC lanes.

No instruction fetch: a table of ``num_tasks`` task descriptors (format: :mod:`arch.pe_map`)
bound to colors. Two engines run concurrently:

* the **wavelet engine** takes one wavelet per cycle from ``rx`` (``rx.ready`` is always high: it
  never waits for data or for ``tx``) and runs one step of the active ``FMAC`` or ``STORE``
  descriptor whose ``color`` matches;
* the **vector unit** runs ``VEC`` descriptors whose dependencies are met, one vector at a time,
  and is the only sender on ``tx``.

Ports: ``rx: In(stream.Signature(Wavelet))`` (from the router's RAMP output), ``tx:
Out(stream.Signature(Wavelet))`` (to the router's RAMP input; registered: valid and payload are
flops), ``cfg: In(ConfigBus())``, ``fault: Out(1)`` (the sticky fault flag).

Data: SRAM words are 32 bits. A bf16 value in a word (or wavelet) occupies the upper 16 bits (the
word is its exact fp32 value); the multipliers and the ReLU mask read only those 16 bits. A
*vector* is ``L = lanes`` consecutive words at any word address. SRAM is ``sram_banks``
interleaved banks (word ``a`` in bank ``a mod banks``, one ``lib.memory.Memory`` each), so with
``lanes <= sram_banks`` any vector is one read (or write) per bank in one cycle.

Operations (L = lanes; ``n`` = unit index, from 0, of a run of ``reps`` units)
----------------------------------------------------------------------------
``FMAC`` (wavelet, ``color``): wavelet ``i`` of row ``n`` (w = its upper 16 bits):
    ``acc[0:L] = fp32_add(acc, bf16_mul(w, mem[a_base + i*a_stride + 0:L]))``; after wavelet
    ``count - 1`` the row is written to ``mem[dst_base + n*L + 0:L]`` and acc restarts from +0.0.
    One wavelet per cycle, every lane one FMAC per cycle, no bubble between rows.
``STORE`` (wavelet, ``color``): word ``j`` of vector ``n`` goes to ``mem[dst_base + (n-lo)*L + j]``
    when ``lo <= n < hi`` (index range filter), else it is dropped; one wavelet per cycle.
``VEC`` (counter triggered): vector ``n`` fires once ``done[dep_a] > n`` (if ``dep_a_en``) and
    ``done[dep_b] > n`` (if ``dep_b_en``). With ``A = mem[a_base + n*a_stride + 0:L]`` and
    ``B = mem[b_base + n*b_stride + 0:L]``, element ``j`` is ``PASS: A[j]``, ``ADD: A[j] + B[j]``
    (add-and-forward of a reduction chain), ``MASK: B[j]`` where bf16 ``A[j]`` has sign 0 and is
    not zero, else +0.0 (the ReLU mask of backward); ``DOT`` makes ``count`` words per vector,
    word ``k = sum_j bf16(mem[a_base + k*a_stride + j]) * bf16(B[j])`` from +0.0 in ascending
    ``j`` (weight-gradient partials). Then ``relu`` (sign set -> +0.0) and ``round`` (fp32 ->
    bf16 RNE, upper half) if set; then ``send`` on ``color`` and/or ``store`` to
    ``mem[dst_base + (n-lo)*U + pos]`` (``U = L``, or ``count`` for DOT) when ``lo <= n < hi``.
    Cost: ``L + 2`` cycles per vector (per word for DOT) plus cycles waiting for ``tx``.
When the last unit (``reps``) of a descriptor is done it stops; with ``chain`` it starts ``next``
(if ``next`` is legal: committed without fault and not rewritten since). Writing any word of a
descriptor stops it and drops its half-accumulated FMAC row; writing word 0 commits it again.
``done[t]`` counts the finished units of the current run of ``t`` (reset when ``t`` starts).

Descriptor checks at commit (first failing one wins; the descriptor is left stopped)
--------------------------------------------------------------------------------
``COUNT``: ``reps == 0``; ``lo > hi`` (STORE/VEC); FMAC ``count == 0``; VEC ``count != 1``
(``count == 0`` for DOT). ``COLOR``: ``color >= num_colors`` (for VEC only with ``send``).
``INDEX``: ``next >= num_tasks`` or ``next == t`` with ``chain``; an enabled ``dep >= num_tasks``.
``NO_ACTION``: VEC without ``send`` and ``store``. ``RANGE``: an SRAM range runs past the end.
Run time: ``UNBOUND`` (index = color), ``DUP_COLOR``, ``ACC_CONFLICT``; the wavelet is dropped.

Configuration address map (``S = sram_words``, ``T = num_tasks``; :mod:`arch.pe_map`)
-------------------------------------------------------------------------------------
``[0, S)`` SRAM word (R/W). ``desc_addr(S, t, w)`` descriptor ``t`` word ``w < DESC_WORDS`` (R/W;
writing word 0 commits). ``status_base(S, T) + STATUS[name]``: ``FAULT`` (``FAULT_STATUS``; R, any
write clears), ``ACTIVE`` mask, ``FMAC_CYCLES`` (cycles the lanes did FMACs), ``VEC_CYCLES``
(cycles the vector unit worked, waiting for ``tx`` excluded), ``RX_COUNT``, ``TX_COUNT``,
``PARAMS`` (``PE_PARAMS``); ``done_addr(S, T, t)`` ``done[t]``. Configuration writes to SRAM have
priority over the vector unit's stores (it waits a cycle) but must not race the wavelet engine's
stores (write SRAM while no wavelets flow).
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from arch.config_bus import ADDR_BITS, WORD_BITS
from arch.pe_map import (
    DESC_STRIDE,
    DESC_WORDS,
    DESCRIPTOR,
    DONE_OFFSET,
    FAULT_STATUS,
    MAX_TASKS,
    PE_PARAMS,
    STATUS,
    Fault,
    Op,
    VecMode,
    core_span,
    desc_addr,
    status_base,
)
from arch.wavelet import MAX_COLORS

from .bf16_mul import Bf16MulCore
from .config import ConfigError, refuse
from .config_bus import ConfigBus
from .fp32_add import Fp32AddCore
from .layouts import cat_fields, struct_layout
from .wavelet import Wavelet

__all__ = ["PeCore", "Descriptor"]

# One task descriptor (arch.pe_map.DESCRIPTOR, DESC_WORDS configuration words).
Descriptor = struct_layout(DESCRIPTOR)
DESC_BITS = DESCRIPTOR.width


def _log2(n):
    return n.bit_length() - 1


class PeCore(wiring.Component):
    """PE core for ``cfg`` (``lanes``, ``sram_words``, ``sram_banks``, ``num_tasks``,
    ``num_colors``); see the module docstring."""

    def __init__(self, cfg):
        if cfg.lanes > cfg.sram_banks:
            refuse(self, ConfigError(f"PE core needs lanes <= sram_banks (one vector = one word per "
                                     f"bank), got lanes={cfg.lanes}, sram_banks={cfg.sram_banks}"))
        span = core_span(cfg.sram_words, cfg.num_tasks)
        if span > 1 << ADDR_BITS:
            refuse(self, ConfigError(f"PE core address map needs {span} addresses, more than the "
                                     f"{ADDR_BITS}-bit configuration bus (reduce sram_words)"))
        self._cfg = cfg
        super().__init__({
            "rx": In(stream.Signature(Wavelet)),
            "tx": Out(stream.Signature(Wavelet)),
            "cfg": In(ConfigBus()),
            "fault": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        L, S, NB, T, NC = cfg.lanes, cfg.sram_words, cfg.sram_banks, cfg.num_tasks, cfg.num_colors
        lb = _log2(NB)
        DESC, STAT = desc_addr(S, 0), status_base(S, T)

        # ---- SRAM: NB interleaved banks -----------------------------------------------------
        banks = []
        for b in range(NB):
            mem = memory.Memory(shape=32, depth=S // NB, init=[])
            m.submodules[f"bank{b}"] = mem
            banks.append(mem)
        rd_f = [mem.read_port() for mem in banks]   # FMAC lanes
        rd_a = [mem.read_port() for mem in banks]   # vector unit, operand A
        rd_b = [mem.read_port() for mem in banks]   # vector unit, operand B
        rd_c = [mem.read_port() for mem in banks]   # configuration reads
        wr_0 = [mem.write_port() for mem in banks]  # wavelet engine (row snapshot, STORE)
        wr_1 = [mem.write_port() for mem in banks]  # configuration, vector-unit stores

        def split(addr):
            lo = addr[:lb] if lb else Const(0, 1)
            return lo, addr[lb:16]

        def line_of_bank(b, lo, hi):
            """Bank ``b``'s line of the vector starting at ``hi * NB + lo``: banks below ``lo``
            hold the words that wrapped into the next line."""
            return hi + (lo > b) if b < NB - 1 else hi

        def lane_of_bank(b, lo):
            return (Const(b, lb + 1) - lo)[:lb] if lb else Const(0, 1)

        def vector_read(ports, addr, name):
            """Present a vector read of ``addr``; returns the L lane words (valid next cycle)."""
            lo, hi = split(addr)
            for b, p in enumerate(ports):
                m.d.comb += p.addr.eq(line_of_bank(b, lo, hi))
            lo_q = Signal(max(lb, 1), name=f"{name}_lo_q")
            m.d.sync += lo_q.eq(lo)
            words = Array(p.data for p in ports)
            return [words[(lo_q + l)[:lb]] if lb else ports[0].data for l in range(L)]

        def vector_write(ports, addr, lanes_data, wide, single, name):
            """Write all L lanes (``wide``) or lane 0 only (``single``) at ``addr``."""
            lo, hi = split(addr)
            # One entry per bank so every lane index is covered (lanes >= L are never enabled).
            lane_data = Array(list(lanes_data) + [Const(0, 32)] * (NB - L)) if NB > 1 else None
            for b, p in enumerate(ports):
                lane = Signal(max(lb, 1), name=f"{name}_lane{b}")
                m.d.comb += lane.eq(lane_of_bank(b, lo))
                m.d.comb += [
                    p.addr.eq(line_of_bank(b, lo, hi)),
                    p.data.eq(lane_data[lane] if NB > 1 else lanes_data[0]),
                    p.en.eq((wide & (lane < L)) | (single & (lane == 0))),
                ]

        # ---- descriptor table and per-descriptor state ---------------------------------------
        raw = [Signal(DESC_BITS, name=f"desc{t}") for t in range(T)]
        dv = [data.View(Descriptor, r) for r in raw]
        raw_a = Array(raw)
        active = Signal(T)
        pos = [Signal(16, name=f"pos{t}") for t in range(T)]
        cnt = [Signal(16, name=f"n{t}") for t in range(T)]
        done = [Signal(16, name=f"done{t}") for t in range(T)]
        pos_a, cnt_a = Array(pos), Array(cnt)
        done_a = Array(done + [Const(0, 16)] * (MAX_TASKS - T))    # any dep index (checked < T)

        fault_valid = Signal()
        fault_code = Signal(FAULT_STATUS.field_width("code"))
        fault_index = Signal(FAULT_STATUS.field_width("index"))
        m.d.comb += self.fault.eq(fault_valid)

        fmac_cycles, vec_cycles = Signal(32), Signal(32)
        rx_count, tx_count = Signal(32), Signal(32)

        # ---- configuration bus: decode, descriptor commit checks -----------------------------
        bus = self.cfg
        a = bus.addr
        is_sram = a < S
        is_desc = (a >= DESC) & (a < STAT)
        d_off = Signal(16)
        m.d.comb += d_off.eq(a - DESC)
        tc = Signal(range(T))
        stride_bits = DESC_STRIDE.bit_length() - 1
        m.d.comb += tc.eq(d_off[stride_bits:])
        d_word = d_off[:stride_bits]
        cfg_sram_we = Signal()
        m.d.comb += cfg_sram_we.eq(bus.we & is_sram)
        desc_we = bus.we & is_desc & (d_word < DESC_WORDS)
        commit = Signal()
        m.d.comb += commit.eq(desc_we & (d_word == 0))
        fault_clear = bus.we & (a == STAT + STATUS["FAULT"])

        for t in range(T):
            for w in range(DESC_WORDS):
                with m.If(desc_we & (tc == t) & (d_word == w)):
                    m.d.sync += raw[t][WORD_BITS * w:WORD_BITS * (w + 1)].eq(bus.wdata)

        cand_raw = Signal(DESC_BITS)
        m.d.comb += cand_raw.eq(Cat(bus.wdata, raw_a[tc][WORD_BITS:]))
        cand = data.View(Descriptor, cand_raw)
        commit_code = self._check(m, cand, tc, cfg)
        commit_start = Signal()
        m.d.comb += commit_start.eq(commit & (commit_code == 0) & (cand.op != Op.NOP) & cand.enable)

        # ---- wavelet engine, stage 0 (the cycle of the rx transfer) --------------------------
        m.d.comb += self.rx.ready.eq(1)
        rx_fire = self.rx.valid
        color = self.rx.payload.color
        match = Signal(T)
        m.d.comb += match.eq(Cat(
            active[t] & ((dv[t].op == Op.FMAC) | (dv[t].op == Op.STORE)) & (dv[t].color == color)
            for t in range(T)))
        wsel = Signal(range(T))
        for t in reversed(range(T)):
            with m.If(match[t]):
                m.d.comb += wsel.eq(t)
        dup = (match & (match - 1)).any()
        wd = data.View(Descriptor, raw_a[wsel])
        wpos, wn = pos_a[wsel], cnt_a[wsel]
        is_fmac = wd.op == Op.FMAC

        acc_busy = Signal()
        acc_owner = Signal(range(T))
        conflict = is_fmac & acc_busy & (acc_owner != wsel)
        w_ok = Signal()
        m.d.comb += w_ok.eq(rx_fire & match.any() & ~dup & ~conflict)
        unit_end = Signal()
        m.d.comb += unit_end.eq(Mux(is_fmac, wpos + 1 == wd.count, wpos == L - 1))
        w_unit = w_ok & unit_end
        w_run_end = Signal()
        m.d.comb += w_run_end.eq(w_unit & (wn + 1 == wd.reps))

        fmac_addr = Signal(16)
        m.d.comb += fmac_addr.eq(wd.a_base + wpos * wd.a_stride)
        x_lanes = vector_read(rd_f, fmac_addr, "rf")

        # Stage-1 registers.
        s1_fmac, s1_last, s1_store, s1_inc = Signal(), Signal(), Signal(), Signal()
        s1_w = Signal(16)
        s1_addr = Signal(16)
        s1_data = Signal(32)
        s1_t = Signal(range(T))
        in_range = (wn >= wd.lo) & (wn < wd.hi)
        m.d.sync += [
            s1_fmac.eq(w_ok & is_fmac),
            s1_last.eq(unit_end),
            s1_store.eq(w_ok & ~is_fmac & in_range),
            s1_inc.eq(w_unit),
            s1_w.eq(self.rx.payload.data[16:32]),
            s1_data.eq(self.rx.payload.data),
            s1_t.eq(wsel),
            s1_addr.eq(Mux(is_fmac, wd.dst_base + wn * L, wd.dst_base + (wn - wd.lo) * L + wpos)),
        ]
        with m.If(w_ok & is_fmac):
            m.d.sync += [acc_owner.eq(wsel), acc_busy.eq(~unit_end)]

        with m.If(fault_clear):
            m.d.sync += fault_valid.eq(0)
        with m.If(rx_fire & ~fault_valid & ~(commit & (commit_code != 0))):
            with m.If(~match.any()):
                m.d.sync += [fault_valid.eq(1), fault_code.eq(Fault.UNBOUND), fault_index.eq(color)]
            with m.Elif(dup):
                m.d.sync += [fault_valid.eq(1), fault_code.eq(Fault.DUP_COLOR), fault_index.eq(wsel)]
            with m.Elif(conflict):
                m.d.sync += [fault_valid.eq(1), fault_code.eq(Fault.ACC_CONFLICT),
                             fault_index.eq(wsel)]

        # ---- wavelet engine, stage 1: the lanes ---------------------------------------------
        acc = [Signal(32, name=f"acc{l}") for l in range(L)]
        sums = []
        for l in range(L):
            mul = m.submodules[f"lane{l}_mul"] = Bf16MulCore()
            add = m.submodules[f"lane{l}_add"] = Fp32AddCore()
            m.d.comb += [mul.a.eq(s1_w), mul.b.eq(x_lanes[l][16:32]),
                         add.a.eq(acc[l]), add.b.eq(mul.y)]
            with m.If(s1_fmac):
                m.d.sync += acc[l].eq(Mux(s1_last, 0, add.y))
            sums.append(add.y)
        snap = s1_fmac & s1_last
        vector_write(wr_0, s1_addr, [Mux(snap, sums[l], s1_data) for l in range(L)],
                     snap, s1_store, "w0")
        m.d.sync += fmac_cycles.eq(fmac_cycles + s1_fmac)

        # ---- vector unit -----------------------------------------------------------------------
        ready = Signal(T)
        m.d.comb += ready.eq(Cat(
            active[t] & (dv[t].op == Op.VEC)
            & (~dv[t].dep_a_en | (done_a[dv[t].dep_a] > cnt[t]))
            & (~dv[t].dep_b_en | (done_a[dv[t].dep_b] > cnt[t]))
            for t in range(T)))
        pick = Signal(range(T))
        for t in reversed(range(T)):
            with m.If(ready[t]):
                m.d.comb += pick.eq(t)

        vsel = Signal(range(T))
        vk = Signal(16)
        vj = Signal(range(max(L, 2)))
        vcur = Signal(range(T))
        vd = data.View(Descriptor, raw_a[vcur])
        vn = cnt_a[vcur]
        dot = vd.vmode == VecMode.DOT
        k_now = Signal(16)
        a_addr, b_addr = Signal(16), Signal(16)
        m.d.comb += [
            a_addr.eq(vd.a_base + Mux(dot, k_now, vn) * vd.a_stride),
            b_addr.eq(vd.b_base + vn * vd.b_stride),
        ]
        a_lanes = vector_read(rd_a, a_addr, "ra")
        b_lanes = vector_read(rd_b, b_addr, "rb")
        av = Array(Signal(32, name=f"av{l}") for l in range(L))
        bv = Array(Signal(32, name=f"bv{l}") for l in range(L))
        dacc = Signal(32)

        vmul = m.submodules.vec_mul = Bf16MulCore()
        vadd = m.submodules.vec_add = Fp32AddCore()
        a_j, b_j = av[vj], bv[vj]
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

        last_lane = vj == L - 1
        emit = ~dot | last_lane
        v_in_range = (vn >= vd.lo) & (vn < vd.hi)
        unit = Mux(dot, vd.count, L)
        dst_addr = Signal(16)
        m.d.comb += dst_addr.eq(vd.dst_base + (vn - vd.lo) * unit + Mux(dot, vk, vj))
        out_free = ~self.tx.valid | self.tx.ready
        v_store = emit & vd.store & v_in_range
        v_step = Signal()
        v_unit = Signal()
        v_run_end = Signal()
        vector_write(wr_1, Mux(cfg_sram_we, a, dst_addr), [Mux(cfg_sram_we, bus.wdata, result)] * L,
                     Const(0), cfg_sram_we | (v_step & v_store), "w1")

        with m.If(self.tx.ready):
            m.d.sync += self.tx.valid.eq(0)

        with m.FSM(name="vec"):
            with m.State("IDLE"):
                m.d.comb += [vcur.eq(pick), k_now.eq(0)]
                with m.If(ready.any()):
                    m.d.sync += [vsel.eq(pick), vk.eq(0), vec_cycles.eq(vec_cycles + 1)]
                    m.next = "LATCH"
            with m.State("ISSUE"):
                m.d.comb += [vcur.eq(vsel), k_now.eq(vk)]
                m.d.sync += vec_cycles.eq(vec_cycles + 1)
                m.next = "LATCH"
            with m.State("LATCH"):
                m.d.comb += [vcur.eq(vsel), k_now.eq(vk)]
                m.d.sync += [vec_cycles.eq(vec_cycles + 1), vj.eq(0), dacc.eq(0)]
                m.d.sync += [av[l].eq(a_lanes[l]) for l in range(L)]
                m.d.sync += [bv[l].eq(b_lanes[l]) for l in range(L)]
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [vcur.eq(vsel), k_now.eq(vk)]
                m.d.sync += vec_cycles.eq(vec_cycles + v_step)
                m.d.comb += v_step.eq((~(emit & vd.send) | out_free) & ~(v_store & cfg_sram_we))
                with m.If(v_step):
                    with m.If(emit & vd.send):
                        m.d.sync += [self.tx.valid.eq(1), self.tx.payload.data.eq(result),
                                     self.tx.payload.color.eq(vd.color),
                                     self.tx.payload.ctrl.eq(0)]
                    m.d.sync += dacc.eq(vadd.y)
                    with m.If(last_lane):
                        with m.If(dot & (vk + 1 < vd.count)):
                            m.d.sync += vk.eq(vk + 1)
                            m.next = "ISSUE"
                        with m.Else():
                            m.d.comb += v_unit.eq(1)
                            m.d.comb += v_run_end.eq(vn + 1 == vd.reps)
                            m.next = "IDLE"
                    with m.Else():
                        m.d.sync += vj.eq(vj + 1)

        with m.If(self.tx.valid & self.tx.ready):
            m.d.sync += tx_count.eq(tx_count + 1)
        m.d.sync += rx_count.eq(rx_count + rx_fire)

        # ---- descriptor state updates: start, step, stop, chain ------------------------------
        # A descriptor is *legal* from a clean commit of word 0 until any of its words is written
        # again; only legal descriptors can be started by a chain.
        legal = Signal(T)
        w_chain = w_run_end & wd.chain
        v_chain = v_run_end & vd.chain
        for t in range(T):
            with m.If(desc_we & (tc == t)):
                m.d.sync += legal[t].eq(commit & (commit_code == 0) & (cand.op != Op.NOP))
            start = (((w_chain & (wd.next == t)) | (v_chain & (vd.next == t))) & legal[t]
                     | (commit_start & (tc == t)))
            stop = ((w_run_end & (wsel == t)) | (v_run_end & (vsel == t))
                    | (desc_we & (tc == t)))
            with m.If(start):
                m.d.sync += [active[t].eq(1), pos[t].eq(0), cnt[t].eq(0), done[t].eq(0)]
            with m.Else():
                with m.If(stop):
                    m.d.sync += active[t].eq(0)
                with m.If(w_ok & (wsel == t)):
                    m.d.sync += pos[t].eq(Mux(unit_end, 0, pos[t] + 1))
                    with m.If(unit_end):
                        m.d.sync += cnt[t].eq(cnt[t] + 1)
                with m.If(v_unit & (vsel == t)):
                    m.d.sync += cnt[t].eq(cnt[t] + 1)
                with m.If((s1_inc & (s1_t == t)) | (v_unit & (vsel == t))):
                    m.d.sync += done[t].eq(done[t] + 1)
            # A descriptor that is (re)started or rewritten drops its half-accumulated row.
            with m.If((start | (desc_we & (tc == t))) & acc_busy & (acc_owner == t)):
                m.d.sync += acc_busy.eq(0)
                m.d.sync += [acc[l].eq(0) for l in range(L)]

        # ---- faults (a fault of this cycle wins over a clear) ---------------------------------
        with m.If(commit & (commit_code != 0) & ~fault_valid):
            m.d.sync += [fault_valid.eq(1), fault_code.eq(commit_code), fault_index.eq(tc)]

        # ---- configuration reads (registered) -------------------------------------------------
        lo, hi = split(a)
        for p in rd_c:
            m.d.comb += p.addr.eq(hi)
        rd_sram = Signal()
        rd_bank = Signal(max(lb, 1))
        rd_reg = Signal(32)
        m.d.sync += [rd_sram.eq(is_sram), rd_bank.eq(lo)]
        reg_val = Signal(32)
        desc_words = Array([raw_a[tc][WORD_BITS * w:WORD_BITS * (w + 1)] for w in range(DESC_WORDS)]
                           + [Const(0, WORD_BITS)] * (DESC_STRIDE - DESC_WORDS))
        with m.If(is_desc):
            m.d.comb += reg_val.eq(desc_words[d_word])
        with m.Else():
            with m.Switch(a):
                with m.Case(STAT + STATUS["FAULT"]):
                    m.d.comb += reg_val.eq(Mux(fault_valid, cat_fields(FAULT_STATUS, flag=fault_valid,
                                                                       code=fault_code,
                                                                       index=fault_index), 0))
                with m.Case(STAT + STATUS["ACTIVE"]):
                    m.d.comb += reg_val.eq(active)
                with m.Case(STAT + STATUS["FMAC_CYCLES"]):
                    m.d.comb += reg_val.eq(fmac_cycles)
                with m.Case(STAT + STATUS["VEC_CYCLES"]):
                    m.d.comb += reg_val.eq(vec_cycles)
                with m.Case(STAT + STATUS["RX_COUNT"]):
                    m.d.comb += reg_val.eq(rx_count)
                with m.Case(STAT + STATUS["TX_COUNT"]):
                    m.d.comb += reg_val.eq(tx_count)
                with m.Case(STAT + STATUS["PARAMS"]):
                    m.d.comb += reg_val.eq(PE_PARAMS.pack(lanes=L, num_tasks=T, num_colors=NC))
                for t in range(T):
                    with m.Case(STAT + DONE_OFFSET + t):
                        m.d.comb += reg_val.eq(done[t])
                with m.Default():
                    m.d.comb += reg_val.eq(0)
        m.d.sync += rd_reg.eq(reg_val)
        sram_words = Array(p.data for p in rd_c)
        m.d.comb += bus.rdata.eq(Mux(rd_sram, sram_words[rd_bank] if lb else rd_c[0].data, rd_reg))
        return m

    @staticmethod
    def _check(m, d, t, cfg):
        """Fault code (0 = legal) of the descriptor ``d`` being committed as entry ``t``."""
        L, S, T, NC = cfg.lanes, cfg.sram_words, cfg.num_tasks, cfg.num_colors
        is_f, is_s, is_v = d.op == Op.FMAC, d.op == Op.STORE, d.op == Op.VEC
        dot = is_v & (d.vmode == VecMode.DOT)
        uses_b = is_v & (d.vmode != VecMode.PASS)

        def minus1(v):
            s = Signal(16)
            m.d.comb += s.eq(v - 1)
            return s

        span = Signal(16)
        m.d.comb += span.eq(d.hi - d.lo)
        bad_count = ((d.reps == 0) | ((is_s | is_v) & (d.lo > d.hi)) | (is_f & (d.count == 0))
                     | (is_v & Mux(dot, d.count == 0, d.count != 1)))
        bad_color = (d.color >= NC) & (~is_v | d.send) if NC < MAX_COLORS else Const(0)
        bad_index = ((d.chain & ((d.next >= T) | (d.next == t)))
                     | (is_v & d.dep_a_en & (d.dep_a >= T)) | (is_v & d.dep_b_en & (d.dep_b >= T)))
        no_action = is_v & ~d.send & ~d.store
        a_rows = Mux(is_f | dot, d.count, d.reps)
        end_a = d.a_base + minus1(a_rows) * d.a_stride + L
        end_b = d.b_base + minus1(d.reps) * d.b_stride + L
        end_dst = Mux(is_f, d.dst_base + d.reps * L,
                      d.dst_base + span * Mux(dot, d.count, L))
        bad_range = (((is_f | is_v) & (end_a > S)) | (uses_b & (end_b > S))
                      | ((is_f | is_s | (is_v & d.store)) & (end_dst > S)))
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
        with m.Elif(bad_range):
            m.d.comb += code.eq(Fault.RANGE)
        return code
