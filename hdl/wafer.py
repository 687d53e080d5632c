"""A wafer (docs/wafer.md): ``cfg.mesh_rows x cfg.mesh_cols`` PE tiles (a :class:`~hdl.mesh.Mesh`
with a :class:`~hdl.pe_core.PeCore` on every RAMP port) plus the edge adapters that join it to a
SwarmX leaf and to the host.

Ports (``P = cfg.mesh_rows``, ``Q = cfg.mesh_cols``)
----------------------------------------------------
``weights: In(stream.Signature(TaggedWord))``: the weight stream of a SwarmX leaf, one bf16 per
    word in the **low** 16 bits, rows of ``W`` in order (``W_ROW_LEN`` words per row). The *weight
    demux* turns word ``k`` of every row (``k`` counts ``0 .. W_ROW_LEN-1`` and restarts after
    ``last``) into a wavelet ``{color: W_COLOR, data: bf16 << 16}`` on the north edge of the
    column ``q`` whose slice holds ``k`` (``W_BOUND[q-1] <= k < W_BOUND[q]``): the column split of
    the K dimension of docs/architecture.md#layer-mapping. With ``W_MODE = 1`` (a transposed stream, row ``k`` of
    ``W^T`` = column k of W, for backward-data) the column is chosen by the *row* index instead
    (rows counted from 0 after ``last``). Combinational: a word is taken when that column's router
    takes the wavelet (one per cycle).
``grads: Out(stream.Signature(TaggedWord))``: the *gradient mux*, the same split in reverse:
    each column's north-edge words go into a FIFO of ``grad_fifo_depth`` words (a word written in
    cycle ``t`` can leave from ``t + 2``; the column is back-pressured when its FIFO is full), and
    word ``k`` of every row (``G_ROW_LEN`` per row) is taken from the FIFO of the column holding
    ``k`` (``G_BOUND``), its 32 data bits passed as they are; ``last`` on word ``G_COUNT - 1``
    (then the count restarts).
``west_in``, ``west_out``, ``east_in``, ``east_out``: arrays of P wavelet streams, the host's
    ports on the west / east edges of row ``p`` (activations, labels, dZ in; results out). The
    host takes every color (accept masks all ones).
``cfg: In(ConfigBus())``; ``error: Out(1)`` (any router's sticky error); ``fault: Out(1)`` (any
    core's sticky fault).

Configuration address map
-------------------------
Tile ``(p, q)`` at ``tile_address(Q, p, q, 0, mesh_tile_addr_bits(sram_words, num_tasks))``
(:mod:`arch.tile_map`; router at local 0, core at ``CORE_BASE``). The adapter registers
(:mod:`arch.wafer_map`: ``ADAPTER`` at ``adapter_base()``, the top ``ADAPTER_SPAN`` addresses of
the bus) shadow whatever the mesh has there. ``rdata`` is valid one cycle after ``addr``.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from arch.config_bus import ADDR_BITS
from arch.tile_map import mesh_tile_addr_bits, tile_span
from arch.wafer_map import ADAPTER, ADAPTER_COUNT_BITS, ADAPTER_SPAN, MAX_ADAPTER_COLUMNS, adapter_base
from arch.wavelet import COLOR_BITS

from .config import ConfigError, refuse
from .config_bus import ConfigBus
from .mesh import Mesh
from .pe_core import PeCore
from .wavelet import TaggedWord, Wavelet

__all__ = ["Wafer"]

COUNT_BITS = ADAPTER_COUNT_BITS


class Wafer(wiring.Component):
    """P x Q PE tiles with SwarmX and host adapters; see the module docstring."""

    def __init__(self, cfg):
        P, Q = cfg.mesh_rows, cfg.mesh_cols
        bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
        windows = 1 << (ADDR_BITS - bits)
        if P * Q > windows:
            refuse(self, ConfigError(f"a {P}x{Q} wafer has more tiles than the {ADDR_BITS}-bit "
                                     f"configuration bus holds ({windows} windows of 2**{bits})"))
        if P * Q == windows and tile_span(cfg.sram_words, cfg.num_tasks) > (1 << bits) - ADAPTER_SPAN:
            refuse(self, ConfigError(f"a {P}x{Q} wafer fills the configuration bus and the last tile's "
                                     f"window has no room for the {ADAPTER_SPAN} adapter registers"))
        if Q > MAX_ADAPTER_COLUMNS:
            refuse(self, ConfigError(f"the wafer adapters support at most "
                                     f"{MAX_ADAPTER_COLUMNS} columns, got {Q}"))
        self._cfg = cfg
        wave = stream.Signature(Wavelet)
        tagged = stream.Signature(TaggedWord)
        super().__init__({
            "cfg": In(ConfigBus()), "error": Out(1), "fault": Out(1),
            "weights": In(tagged), "grads": Out(tagged),
            "west_in": In(wave).array(P), "west_out": Out(wave).array(P),
            "east_in": In(wave).array(P), "east_out": Out(wave).array(P),
        })

    @property
    def config(self):
        return self._cfg

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        P, Q, C = cfg.mesh_rows, cfg.mesh_cols, cfg.num_colors
        bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
        mesh = m.submodules.mesh = Mesh(cfg, core=lambda r, q: PeCore(cfg), tile_addr_bits=bits)
        all_colors = (1 << C) - 1

        # Host edges.
        for p in range(P):
            wiring.connect(m, wiring.flipped(self.west_in[p]), mesh.w_in[p])
            wiring.connect(m, mesh.w_out[p], wiring.flipped(self.west_out[p]))
            wiring.connect(m, wiring.flipped(self.east_in[p]), mesh.e_in[p])
            wiring.connect(m, mesh.e_out[p], wiring.flipped(self.east_out[p]))
            m.d.comb += [mesh.w_accept[p].eq(all_colors), mesh.e_accept[p].eq(all_colors)]
        for q in range(Q):
            m.d.comb += [mesh.n_accept[q].eq(all_colors), mesh.s_accept[q].eq(all_colors)]

        # Adapter registers.
        w_color = Signal(COLOR_BITS)
        w_mode = Signal(1)
        w_row_len = Signal(COUNT_BITS)
        g_row_len = Signal(COUNT_BITS)
        g_count = Signal(COUNT_BITS)
        w_taken = Signal(32)
        g_sent = Signal(32)
        w_bound = [Signal(COUNT_BITS, name=f"w_bound_{q}") for q in range(Q)]
        g_bound = [Signal(COUNT_BITS, name=f"g_bound_{q}") for q in range(Q)]
        regs = {ADAPTER["W_COLOR"]: w_color, ADAPTER["W_ROW_LEN"]: w_row_len,
                ADAPTER["W_MODE"]: w_mode,
                ADAPTER["G_ROW_LEN"]: g_row_len, ADAPTER["G_COUNT"]: g_count,
                ADAPTER["W_TAKEN"]: w_taken, ADAPTER["G_SENT"]: g_sent}
        regs.update({ADAPTER["W_BOUND"] + q: s for q, s in enumerate(w_bound)})
        regs.update({ADAPTER["G_BOUND"] + q: s for q, s in enumerate(g_bound)})
        writable = set(regs) - {ADAPTER["W_TAKEN"], ADAPTER["G_SENT"]}

        bus = self.cfg
        base = adapter_base()
        to_adapter = bus.addr >= base
        local = bus.addr[:(ADAPTER_SPAN - 1).bit_length()]
        m.d.comb += [mesh.cfg.addr.eq(bus.addr), mesh.cfg.wdata.eq(bus.wdata),
                     mesh.cfg.we.eq(bus.we & ~to_adapter)]
        rd_adapter = Signal()
        rd_value = Signal(32)
        m.d.sync += rd_adapter.eq(to_adapter)
        with m.Switch(local):
            for a, sig in regs.items():
                with m.Case(a):
                    m.d.sync += rd_value.eq(sig)
            with m.Default():
                m.d.sync += rd_value.eq(0)
        m.d.comb += bus.rdata.eq(Mux(rd_adapter, rd_value, mesh.cfg.rdata))

        wk = Signal(COUNT_BITS)     # index of the next weight word within its row
        wr = Signal(COUNT_BITS)     # row of the next weight word (since the last `last`)
        gk = Signal(COUNT_BITS)
        gn = Signal(COUNT_BITS)     # gradient words sent in the current block

        # Weight demux: column of word wk = number of bounds <= wk.
        w_sel = _column(m, Mux(w_mode, wr, wk), w_bound, "w_sel")
        w_ready = Signal()
        for q in range(Q):
            n_in = mesh.n_in[q]
            m.d.comb += [n_in.payload.data.eq(self.weights.payload.data[:16] << 16),
                         n_in.payload.color.eq(w_color),
                         n_in.valid.eq(self.weights.valid & (w_sel == q))]
            with m.If(w_sel == q):
                m.d.comb += w_ready.eq(n_in.ready)
        m.d.comb += self.weights.ready.eq(w_ready)
        w_fire = self.weights.valid & self.weights.ready
        with m.If(w_fire):
            m.d.sync += w_taken.eq(w_taken + 1)
            with m.If(self.weights.payload.last):
                m.d.sync += [wk.eq(0), wr.eq(0)]
            with m.Elif(wk + 1 >= w_row_len):
                m.d.sync += [wk.eq(0), wr.eq(wr + 1)]
            with m.Else():
                m.d.sync += wk.eq(wk + 1)

        # Gradient mux: a FIFO per column, taken column by column along each row.
        g_sel = _column(m, gk, g_bound, "g_sel")
        for q in range(Q):
            n_out = mesh.n_out[q]
            fifo = m.submodules[f"grad_fifo{q}"] = SyncFIFOBuffered(width=32, depth=cfg.grad_fifo_depth)
            m.d.comb += [fifo.w_data.eq(n_out.payload.data), fifo.w_en.eq(n_out.valid),
                         n_out.ready.eq(fifo.w_rdy), fifo.r_en.eq(self.grads.ready & (g_sel == q))]
            with m.If(g_sel == q):
                m.d.comb += [self.grads.valid.eq(fifo.r_rdy),
                             self.grads.payload.data.eq(fifo.r_data)]
        last = gn + 1 >= g_count
        m.d.comb += self.grads.payload.last.eq(last)
        with m.If(self.grads.valid & self.grads.ready):
            m.d.sync += [g_sent.eq(g_sent + 1), gn.eq(gn + 1)]
            with m.If(last):
                m.d.sync += [gn.eq(0), gk.eq(0)]
            with m.Elif(gk + 1 >= g_row_len):
                m.d.sync += gk.eq(0)
            with m.Else():
                m.d.sync += gk.eq(gk + 1)

        # Register writes (after the counters: a row-length write restarts its counter).
        with m.If(bus.we & to_adapter):
            with m.Switch(local):
                for a in sorted(writable):
                    with m.Case(a):
                        m.d.sync += regs[a].eq(bus.wdata)
                        if a == ADAPTER["W_ROW_LEN"]:
                            m.d.sync += [wk.eq(0), wr.eq(0)]
                        if a in (ADAPTER["G_ROW_LEN"], ADAPTER["G_COUNT"]):
                            m.d.sync += [gk.eq(0), gn.eq(0)]

        faults = Cat(*(mesh.cores[r][q].fault for r in range(P) for q in range(Q)))
        m.d.comb += [self.error.eq(mesh.error), self.fault.eq(faults.any())]
        return m


def _column(m, k, bounds, name):
    """Signal = number of ``bounds`` that are ``<= k`` (the column whose slice holds ``k``),
    clamped to the last column."""
    sel = Signal(range(len(bounds)), name=name)
    total = 0
    for b in bounds[:-1]:
        total = total + (b <= k)
    m.d.comb += sel.eq(total)
    return sel

