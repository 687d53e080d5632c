"""The PE core (docs/pe.md): a descriptor-driven dataflow core with banked SRAM and FMAC lanes.

No instruction fetch: a table of ``num_tasks`` task descriptors (format: :mod:`arch.pe_map`)
bound to colors. Three engines run concurrently:

* the **wavelet engine** takes one wavelet per cycle from ``rx`` (it never waits for data or for
  ``tx``; ``rx.ready`` falls only while a short FMAC group's partial sum is in the adder) and
  runs one step of the active ``FMAC`` or ``STORE`` descriptor whose ``color`` matches;
* the **store engine** takes one wavelet per cycle from ``rx2`` (the router's RAMP2 channel) and
  runs one step of the active ``STORE`` descriptor whose ``color`` matches; its stage 1 holds
  two words, so ``rx2.ready`` is low only in a cycle it holds two and the first waits for a bank
  the wavelet engine writes (the two are written together, in two banks, once it is free);
* the **vector unit** runs ``VEC`` descriptors whose dependencies are met, one vector at a time,
  and is the only sender on ``tx``.

Ports: ``rx: In(stream.Signature(Wavelet))`` (from the router's RAMP output; ``rx.ready`` a
flop), ``rx2: In(stream.Signature(Wavelet))`` (from the router's RAMP2 output), ``tx:
Out(stream.Signature(Wavelet))`` (to the router's RAMP input; a skid buffer: valid, payload and
the vector unit's view of ``tx.ready`` are flops), ``cfg: In(ConfigBus())``, ``fault: Out(1)``
(the sticky fault flag), ``busy: Out(1)`` (registered: in the previous cycle a descriptor was
active, or a wavelet or store engine's word was still on its way to SRAM after it; low means
every run has ended and its last word is written, so the core holds its results).

Parts: :class:`~hdl.pe.descriptor_table.DescriptorTable` (descriptors, commit checks, run state,
running addresses), :class:`~hdl.pe.wavelet_engine.WaveletEngine`,
:class:`~hdl.pe.store_engine.StoreEngine`,
:class:`~hdl.pe.vector_unit.VectorUnit`, :class:`~hdl.pe.sram.PeSram`; this module decodes the
configuration bus, keeps the sticky fault and the status counters.

Data: SRAM words are 32 bits. A bf16 value in a word (or wavelet) occupies the upper 16 bits (the
word is its exact fp32 value); the multipliers and the ReLU mask read only those 16 bits. A
*vector* is ``L = lanes`` consecutive words at any word address. SRAM is ``sram_banks``
interleaved banks (word ``a`` in bank ``a mod banks``), so with ``lanes <= sram_banks`` any vector
is one access per bank. It is held twice, each bank a 1R1W memory: the lanes' copy (also read by
configuration reads) and the vector unit's; every write goes to both: the wavelet engine's first,
then the store engine's (up to two words, in two banks), then a configuration write or the
vector unit's store.

Operations (L = lanes; ``n`` = unit index, from 0, of a run of ``reps`` units)
----------------------------------------------------------------------------
``FMAC`` (wavelet, ``color``): wavelet ``i`` of row ``n`` (w = its upper 16 bits):
    ``acc[0:L] = fp32_add(acc, bf16_mul(w, mem[a_base + (n mod G)*L + i*a_stride + 0:L]))``
    (``G = group``, 0 counts as 1: rows cycle over L-word operand chunks); after wavelet
    ``count - 1`` the row is written to ``mem[dst_base + n*L + 0:L]`` and acc restarts from +0.0.
    One wavelet per cycle, every lane one FMAC per cycle, no bubble between rows.
``STORE`` (wavelet, ``color``): word ``j`` of vector ``n`` goes to ``mem[dst_base + (n-lo)*L + j]``
    when ``lo <= n < hi`` (index range filter), else it is dropped; one wavelet per cycle.
``VEC`` (counter triggered): vector ``n`` fires once ``done[dep_a] > n`` (if ``dep_a_en``) and
    ``done[dep_b] > n`` (if ``dep_b_en``). With ``A = mem[a_base + (n div G)*a_stride + 0:L]`` and
    ``B = mem[b_base + n*b_stride + 0:L]``, element ``j`` is ``PASS: A[j]``, ``ADD: A[j] + B[j]``
    (add-and-forward of a reduction chain), ``MASK: B[j]`` where bf16 ``A[j]`` has sign 0 and is
    not zero, else +0.0 (the ReLU mask of backward); ``DOT`` makes ``count`` words per vector,
    word ``k = sum_j bf16(mem[a_base + k*a_stride + j]) * bf16(B[j])`` from +0.0 in ascending
    ``j`` (weight-gradient partials). Then ``relu`` (sign set -> +0.0) and ``round`` (fp32 ->
    bf16 RNE, upper half) if set; then ``send`` on ``color`` and/or ``store`` to
    ``mem[dst_base + (n-lo)*U + pos]`` (``U = L``, or ``count`` for DOT) when ``lo <= n < hi``.
    Cost: ``L + 3`` cycles per vector (per word for DOT) plus cycles waiting for ``tx`` or, for
    a store, for a configuration SRAM write or the wavelet engine writing the same bank (with
    pipelined fp units, ``Config.mul_stages``/``add_stages``: docs/pe.md#vector-unit-pipeline).
When the last unit (``reps``) of a descriptor is done it stops; with ``chain`` it starts ``next``
(if ``next`` is legal: committed without fault and not rewritten since). Writing any word of a
descriptor stops it and drops its half-accumulated FMAC row; writing word 0 commits it again.
``done[t]`` counts the finished units of the current run of ``t`` (reset when ``t`` starts).

Descriptor checks at commit (first failing one wins; the descriptor is left stopped)
--------------------------------------------------------------------------------
``COUNT``: ``reps == 0``; ``lo > hi`` (STORE/VEC); FMAC ``count == 0``; VEC ``count != 1``
(``count == 0`` for DOT). ``COLOR``: ``color >= num_colors`` (for VEC only with ``send``).
``INDEX``: ``next >= num_tasks`` or ``next == t`` with ``chain``; an enabled ``dep >= num_tasks``.
``NO_ACTION``: VEC without ``send`` and ``store``.
Run time: ``UNBOUND`` (index = color), ``DUP_COLOR``, ``ACC_CONFLICT`` (the wavelet is dropped);
``RANGE``: an access of the descriptor would run past the end of SRAM (FMAC operand vector or
row destination, STORE word, VEC A / B / stored unit, checked when the access is issued): the
wavelet is dropped or the firing ends, and the descriptor stops. Address arithmetic is by
running addresses (additions), so there is no multiplier outside the lanes.

Configuration address map (``S = sram_words``, ``T = num_tasks``; :mod:`arch.pe_map`)
-------------------------------------------------------------------------------------
``[0, S)`` SRAM word (R/W). ``desc_addr(S, t, w)`` descriptor ``t`` word ``w < DESC_WORDS`` (R/W;
writing word 0 commits). ``status_base(S, T) + STATUS[name]``: ``FAULT`` (``FAULT_STATUS``; R, any
write clears), ``ACTIVE`` mask, ``FMAC_CYCLES`` (cycles the lanes did FMACs), ``VEC_CYCLES``
(cycles the vector unit worked, waiting for ``tx`` excluded), ``RX_COUNT``, ``TX_COUNT``,
``PARAMS`` (``PE_PARAMS``), ``PACK`` (R/W, reset 0: while 1, a write of ``d`` to SRAM word ``a``
writes two bf16: ``d``'s upper half to word ``a`` and its lower half to word ``a + 1``, each in the
upper half of its word with a zero lower half (``arch.pe_map.pack_pair``); ``a + 1`` past the end
of SRAM is not written), ``STOP`` (W: any write stops every descriptor, as a write to each would;
reads 0); ``done_addr(S, T, t)`` ``done[t]``. Configuration writes to SRAM have
priority over the vector unit's stores (it waits a cycle); configuration reads and writes of SRAM
must not race the wavelet or store engine (access SRAM while no wavelets flow: an FMAC wavelet
takes the read port, an engine's write wins the bank).
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from arch.config_bus import ADDR_BITS
from arch.pe_map import (
    DESC_STRIDE,
    DESC_WORDS,
    DONE_OFFSET,
    FAULT_STATUS,
    PE_PARAMS,
    STATUS,
    Fault,
    core_span,
    desc_addr,
    status_base,
)

from ..config import ConfigError, refuse
from ..config_bus import ConfigBus
from ..layouts import cat_fields
from ..wavelet import Wavelet
from .descriptor_table import Descriptor, DescriptorTable
from .sram import PeSram
from .store_engine import StoreEngine
from .vector_unit import VectorUnit
from .wavelet_engine import WaveletEngine

__all__ = ["PeCore", "Descriptor"]


class PeCore(wiring.Component):
    """PE core for ``cfg`` (``lanes``, ``sram_words``, ``sram_banks``, ``num_tasks``,
    ``num_colors``); see the module docstring."""

    def __init__(self, cfg):
        if cfg.lanes > cfg.sram_banks:
            refuse(self, ConfigError(f"PE core needs lanes <= sram_banks (one vector = one word per "
                                     f"bank), got lanes={cfg.lanes}, sram_banks={cfg.sram_banks}"))
        if cfg.sram_banks < 2:
            refuse(self, ConfigError(f"PE core needs sram_banks >= 2 (a packed configuration write "
                                     f"puts two words in two banks), got sram_banks={cfg.sram_banks}"))
        span = core_span(cfg.sram_words, cfg.num_tasks)
        if span > 1 << ADDR_BITS:
            refuse(self, ConfigError(f"PE core address map needs {span} addresses, more than the "
                                     f"{ADDR_BITS}-bit configuration bus (reduce sram_words)"))
        self._cfg = cfg
        super().__init__({
            "rx": In(stream.Signature(Wavelet)),
            "rx2": In(stream.Signature(Wavelet)),
            "tx": Out(stream.Signature(Wavelet)),
            "cfg": In(ConfigBus()),
            "fault": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        L, S, T, NC = cfg.lanes, cfg.sram_words, cfg.num_tasks, cfg.num_colors
        DESC, STAT = desc_addr(S, 0), status_base(S, T)

        sram = m.submodules.sram = PeSram(words=S, banks=cfg.sram_banks, lanes=L)
        table = m.submodules.table = DescriptorTable(cfg)
        weng = m.submodules.wavelet_engine = WaveletEngine(cfg)
        seng = m.submodules.store_engine = StoreEngine(cfg)
        m.d.sync += self.busy.eq(table.active.any() | weng.pending | seng.pending)
        vec = m.submodules.vector_unit = VectorUnit(cfg)

        # ---- configuration bus decode ---------------------------------------------------------
        bus = self.cfg
        a = bus.addr
        is_sram = a < S
        is_desc = (a >= DESC) & (a < STAT)
        d_off = Signal(16)
        m.d.comb += d_off.eq(a - DESC)
        stride_bits = DESC_STRIDE.bit_length() - 1
        d_word = d_off[:stride_bits]
        cfg_sram_we = Signal()
        m.d.comb += [
            cfg_sram_we.eq(bus.we & is_sram),
            table.we.eq(bus.we & is_desc & (d_word < DESC_WORDS)),
            table.index.eq(d_off[stride_bits:]),
            table.word.eq(d_word),
            table.wdata.eq(bus.wdata),
        ]
        fault_clear = bus.we & (a == STAT + STATUS["FAULT"])
        m.d.comb += table.stop_all.eq(bus.we & (a == STAT + STATUS["STOP"]))
        pack = Signal()
        with m.If(bus.we & (a == STAT + STATUS["PACK"])):
            m.d.sync += pack.eq(bus.wdata[0])

        # ---- the table's state to the engines, their steps back ------------------------------
        for name in ("desc", "active", "in_range", "aptr", "dptr"):
            m.d.comb += [getattr(weng, name).eq(getattr(table, name)),
                         getattr(vec, name).eq(getattr(table, name))]
        for name in ("pos", "sub", "restart", "unit_end", "sweep_end", "past", "saddr"):
            m.d.comb += getattr(weng, name).eq(getattr(table, name))
        for name in ("desc", "active", "in_range", "unit_end", "past", "saddr"):
            m.d.comb += getattr(seng, name).eq(getattr(table, name))
        m.d.comb += [vec.cnt.eq(table.cnt), vec.done.eq(table.done), vec.bptr.eq(table.bptr), vec.past.eq(table.past),
                     vec.restart.eq(table.restart), seng.w_match.eq(weng.match)]
        m.d.comb += [
            table.w_step.eq(weng.step), table.w_stop.eq(weng.stop),
            table.w_inc.eq(weng.inc), table.w_inc_t.eq(weng.inc_t),
            table.s_step.eq(seng.step), table.s_stop.eq(seng.stop),
            table.s_inc.eq(seng.inc), table.s_inc_t.eq(seng.inc_t),
            table.v_unit.eq(vec.unit), table.v_t.eq(vec.t), table.v_run_end.eq(vec.run_end),
            table.v_issue.eq(vec.issue), table.v_issue_t.eq(vec.issue_t),
            table.v_stop.eq(vec.stop), table.v_stop_t.eq(vec.stop_t),
        ]
        wiring.connect(m, weng.rx, wiring.flipped(self.rx))
        wiring.connect(m, seng.rx2, wiring.flipped(self.rx2))
        wiring.connect(m, vec.tx, wiring.flipped(self.tx))

        # ---- SRAM: copy 0 for the lanes (configuration reads when no FMAC wavelet), copy 1 for
        # the vector unit; the wavelet engine's row write has priority over the store engine's
        # word, that over the word write (configuration, else the vector unit's store).
        m.d.comb += [
            sram.lane_addr.eq(Mux(weng.rd_en, weng.rd_addr, a)),
            weng.rd_data.eq(sram.lane_data),
            sram.vec_addr.eq(vec.rd_addr),
            vec.rd_data.eq(sram.vec_data),
            sram.row_addr.eq(weng.wr_addr), sram.row_data.eq(weng.wr_data),
            sram.row_mask.eq(weng.wr_mask),
            sram.store_addr.eq(seng.wr_addr), sram.store_data.eq(seng.wr_data),
            sram.store_en.eq(seng.wr_en), seng.wr_blocked.eq(sram.store_blocked),
            sram.store2_addr.eq(seng.wr2_addr), sram.store2_data.eq(seng.wr2_data),
            sram.store2_en.eq(seng.wr2_en), seng.wr2_blocked.eq(sram.store2_blocked),
            sram.word_addr.eq(Mux(cfg_sram_we, a, vec.wr_addr)),
            sram.word_data.eq(Mux(cfg_sram_we, Mux(pack, bus.wdata & 0xFFFF0000, bus.wdata),
                                  vec.wr_data)),
            sram.word_pair.eq(cfg_sram_we & pack),
            sram.word_data2.eq(bus.wdata << 16),
            sram.word_en.eq(cfg_sram_we | vec.wr_en),
            vec.wr_blocked.eq(sram.word_blocked),
            vec.cfg_write.eq(cfg_sram_we),
        ]

        # ---- faults: sticky; a commit fault wins over a wavelet fault, that over a store-engine
        # fault, that over a vector fault; a fault of this cycle wins over a clear.
        fault_valid = Signal()
        fault_code = Signal(FAULT_STATUS.field_width("code"))
        fault_index = Signal(FAULT_STATUS.field_width("index"))
        m.d.comb += self.fault.eq(fault_valid)
        with m.If(fault_clear):
            m.d.sync += fault_valid.eq(0)
        with m.If(~fault_valid):
            with m.If(table.commit_fault != 0):
                m.d.sync += [fault_valid.eq(1), fault_code.eq(table.commit_fault),
                             fault_index.eq(table.index)]
            with m.Elif(weng.fault):
                m.d.sync += [fault_valid.eq(1), fault_code.eq(weng.fault_code),
                             fault_index.eq(weng.fault_index)]
            with m.Elif(seng.fault):
                m.d.sync += [fault_valid.eq(1), fault_code.eq(seng.fault_code),
                             fault_index.eq(seng.fault_index)]
            with m.Elif(vec.fault):
                m.d.sync += [fault_valid.eq(1), fault_code.eq(Fault.RANGE),
                             fault_index.eq(vec.stop_t)]

        # ---- counters -------------------------------------------------------------------------
        fmac_cycles, vec_cycles = Signal(32), Signal(32)
        rx_count, tx_count = Signal(32), Signal(32)
        m.d.sync += [
            fmac_cycles.eq(fmac_cycles + weng.fmac),
            vec_cycles.eq(vec_cycles + vec.busy),
            rx_count.eq(rx_count + (self.rx.valid & self.rx.ready) + (self.rx2.valid & self.rx2.ready)),
            tx_count.eq(tx_count + (self.tx.valid & self.tx.ready)),
        ]

        # ---- configuration reads (registered) -------------------------------------------------
        rd_sram = Signal()
        rd_reg = Signal(32)
        m.d.sync += rd_sram.eq(is_sram)
        reg_val = Signal(32)
        with m.If(is_desc):
            m.d.comb += reg_val.eq(table.rdata)
        with m.Else():
            with m.Switch(a):
                with m.Case(STAT + STATUS["FAULT"]):
                    m.d.comb += reg_val.eq(Mux(fault_valid, cat_fields(FAULT_STATUS, flag=fault_valid,
                                                                       code=fault_code,
                                                                       index=fault_index), 0))
                with m.Case(STAT + STATUS["ACTIVE"]):
                    m.d.comb += reg_val.eq(table.active)
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
                with m.Case(STAT + STATUS["PACK"]):
                    m.d.comb += reg_val.eq(pack)
                for t in range(T):
                    with m.Case(STAT + DONE_OFFSET + t):
                        m.d.comb += reg_val.eq(table.done[t])
                with m.Default():
                    m.d.comb += reg_val.eq(0)
        m.d.sync += rd_reg.eq(reg_val)
        m.d.comb += bus.rdata.eq(Mux(rd_sram, sram.lane_data[0], rd_reg))
        return m
