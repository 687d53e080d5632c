"""A wafer (docs/wafer.md): ``cfg.mesh_rows x cfg.mesh_cols`` PE tiles (a :class:`~hdl.mesh.Mesh`
with a :class:`~hdl.pe.core.PeCore` on every RAMP port) plus the edge adapters that join it to its
SwarmX links (one per mesh column) and to the host.

Ports (``P = cfg.mesh_rows``, ``Q = cfg.mesh_cols``)
----------------------------------------------------
``weights: In(stream.Signature(TaggedWord)).array(Q)``: the weight links, one per mesh column
    (each the broadcast output of a SwarmX tree): word ``{data, last}`` of link ``q``, one bf16 in
    the **low** 16 bits, becomes a wavelet ``{color: W_COLOR, data: bf16 << 16}`` on the north edge
    of column ``q``. Which words go on which link is the sender's choice (the compiler's column
    split of K, docs/architecture.md#layer-mapping); ``last`` is not looked at. Combinational:
    a word is taken when the column's router takes the wavelet (one per cycle per link).
``grads: Out(stream.Signature(TaggedWord)).array(Q)``: the gradient links: the words leaving the
    north edge of column ``q`` (their 32 data bits as they are), ``last`` on word
    ``G_COUNT[q] - 1`` of a block (then the count restarts). Valid and payload come from the
    router's output register.
``west_in``, ``west_out``, ``east_in``, ``east_out``: arrays of P wavelet streams, the host's
    ports on the west / east edges of row ``p`` (activations, labels, dZ in; results out). The
    host takes every color (accept masks all ones).
``cfg: In(ConfigBus())``; ``error: Out(1)`` (any router's sticky error); ``fault: Out(1)`` (any
    core's sticky fault); ``busy: Out(1)`` (any core's ``busy``: low when every PE's runs have
    ended, the completion barrier of a phase whose results stay on the wafer).

Configuration address map
-------------------------
Tile ``(p, q)`` at ``tile_address(Q, p, q, 0, mesh_tile_addr_bits(sram_words, num_tasks))``
(:mod:`arch.tile_map`; router at local 0, core at ``CORE_BASE``). The adapter registers
(:mod:`arch.wafer_map`: ``ADAPTER`` at ``adapter_base()``, the top ``ADAPTER_SPAN`` addresses of
the bus) shadow whatever the mesh has there; while ``TILE_MASK`` is not 0, a tile write goes to
every tile of the mask (the mesh's multicast). ``rdata`` is valid one cycle after ``addr``.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from arch.config_bus import ADDR_BITS, WORD_BITS
from arch.tile_map import mesh_tile_addr_bits, tile_span
from arch.wafer_map import ADAPTER, ADAPTER_COUNT_BITS, ADAPTER_SPAN, MAX_ADAPTER_COLUMNS, adapter_base
from arch.wavelet import COLOR_BITS

from .config import ConfigError, refuse
from .config_bus import ConfigBus
from .mesh import Mesh
from .pe.core import PeCore
from .shared_block import shared
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
            "cfg": In(ConfigBus()), "error": Out(1), "fault": Out(1), "busy": Out(1),
            "weights": In(tagged).array(Q), "grads": Out(tagged).array(Q),
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
        mesh = m.submodules.mesh = Mesh(cfg, core=lambda r, q: shared(PeCore(cfg.tile()), "pe_core", cfg.tile()),
                                        tile_addr_bits=bits, multicast=True)
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
        w_taken = Signal(32)
        g_sent = Signal(32)
        g_count = [Signal(COUNT_BITS, name=f"g_count_{q}") for q in range(Q)]
        tile_mask = Signal(min(P * Q, WORD_BITS))      # tiles 0..31 can be multicast to
        m.d.comb += mesh.cfg_tiles.eq(tile_mask)
        regs = {ADAPTER["W_COLOR"]: w_color, ADAPTER["W_TAKEN"]: w_taken, ADAPTER["G_SENT"]: g_sent,
                ADAPTER["TILE_MASK"]: tile_mask}
        regs.update({ADAPTER["G_COUNT"] + q: s for q, s in enumerate(g_count)})
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

        # Weight links: link q into the north edge of column q.
        taken = []
        for q in range(Q):
            link, n_in = self.weights[q], mesh.n_in[q]
            m.d.comb += [n_in.payload.data.eq(link.payload.data[:16] << 16),
                         n_in.payload.color.eq(w_color), n_in.valid.eq(link.valid),
                         link.ready.eq(n_in.ready)]
            taken.append(link.valid & link.ready)
        m.d.sync += w_taken.eq(w_taken + _ones(m, taken, "w_fires"))

        # Gradient links: the north edge of column q out of link q, ``last`` every G_COUNT[q] words.
        sent = []
        count_written = [Signal(name=f"g_count_written_{q}") for q in range(Q)]
        for q in range(Q):
            link, n_out = self.grads[q], mesh.n_out[q]
            gn = Signal(COUNT_BITS, name=f"g_index_{q}")   # words sent in the current block
            last = gn + 1 >= g_count[q]
            m.d.comb += [link.payload.data.eq(n_out.payload.data), link.payload.last.eq(last),
                         link.valid.eq(n_out.valid), n_out.ready.eq(link.ready)]
            fire = link.valid & link.ready
            sent.append(fire)
            with m.If(count_written[q]):
                m.d.sync += gn.eq(0)
            with m.Elif(fire):
                m.d.sync += gn.eq(Mux(last, 0, gn + 1))
        m.d.sync += g_sent.eq(g_sent + _ones(m, sent, "g_fires"))

        # Register writes.
        with m.If(bus.we & to_adapter):
            with m.Switch(local):
                for a in sorted(writable):
                    with m.Case(a):
                        m.d.sync += regs[a].eq(bus.wdata)
                        if a >= ADAPTER["G_COUNT"]:
                            m.d.comb += count_written[a - ADAPTER["G_COUNT"]].eq(1)

        faults = Cat(*(mesh.cores[r][q].fault for r in range(P) for q in range(Q)))
        busy = Cat(*(mesh.cores[r][q].busy for r in range(P) for q in range(Q)))
        m.d.comb += [self.error.eq(mesh.error), self.fault.eq(faults.any()), self.busy.eq(busy.any())]
        return m


def _ones(m, bits, name):
    """Signal = how many of the one-bit ``bits`` are high."""
    total = Signal(range(len(bits) + 1), name=name)
    m.d.comb += total.eq(sum(bits))
    return total
