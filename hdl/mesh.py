"""P x Q mesh of color routers (docs/mesh.md), optionally with a core on every RAMP port.

Router ``(r, q)`` sits in row ``r`` (0 = north) and column ``q`` (0 = west). Neighbours are joined
by :class:`~hdl.router.CreditLink` pairs (per-color credits, so a stalled color never blocks a
link); every port on the mesh boundary is an ``amaranth.lib.stream`` of wavelets.

Ports (``C = cfg.num_colors``, ``P = cfg.mesh_rows``, ``Q = cfg.mesh_cols``)
------------------------------------------------------------------------------
``n_in``, ``n_out``: arrays of Q wavelet streams (north edge, column q), ``n_accept``: array of Q
    ``C``-bit per-color accept masks of ``n_out`` (see :class:`~hdl.router.Router`);
``s_in``, ``s_out``, ``s_accept``: south edge, Q of each;
``w_in``, ``w_out``, ``w_accept``, ``e_in``, ``e_out``, ``e_accept``: west / east edges, P of each
    (index = row);
``ramp_in``, ``ramp_out``, ``ramp_accept``: P x Q arrays (``ramp_in[r][q]``), and ``ramp2_out``,
    ``ramp2_accept`` (the RAMP's second channel), only when no ``core`` factory is given;
``cfg: In(ConfigBus())``; ``error: Out(1)`` (OR of every router's sticky error flag);
``cfg_tiles: In(P * Q)`` only with ``multicast=True`` (see below).
In Verilog: ``n_in__<q>__valid``, ``ramp_out__<r>__<q>__payload``, ``w_accept__<r>``, ...

Cores
-----
``core`` is ``None`` or a factory ``core(row, col) -> Component`` with ``tx: Out(wavelet stream)``
(into the router's RAMP input), ``rx: In(wavelet stream)`` (from the RAMP output), optionally
``rx2: In(wavelet stream)`` (from the RAMP's second channel; without it that channel is never
ready, so no color may be set in the router's RAMP2 register), optionally ``rx_accept: Out(C)``
(tied to all ones when absent) and optionally ``cfg: In(ConfigBus())``.
The built cores are ``mesh.cores[r][q]`` (``mesh.routers[r][q]`` likewise). Where Verilog is
written (:mod:`hdl.shared_block`) a router is the shared block ``router_<links>`` of its
neighbour links (``router_es``: east and south), one module per distinct set.

Configuration address map
-------------------------
``addr = tile_address(Q, r, q, local, tile_addr_bits)`` (:mod:`arch.tile_map`: tile ``r * Q + q``);
local addresses ``[0, CORE_BASE)`` are the router's map (:mod:`arch.router_map`); local addresses
``CORE_BASE ..`` go to the core's ``cfg`` as ``local - CORE_BASE``. ``rdata`` is valid one cycle
after ``addr`` as on every bus. Addresses of tiles that do not exist read 0 and writes to them are
ignored. With ``multicast``, while ``cfg_tiles`` is not 0 a write goes to ``local`` of every tile
whose bit ``r * Q + q`` is set, whatever tile the address names (reads are not affected).

Timing (zero load): a wavelet entering at a boundary input in cycle ``t`` and crossing ``h``
router-to-router links is offered on its boundary output from cycle ``t + h + 2``.
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from arch.config_bus import ADDR_BITS
from arch.ports import PORT_NAMES, Port
from arch.tile_map import CORE_BASE, DEFAULT_TILE_ADDR_BITS, MIN_TILE_ADDR_BITS

from .config import ConfigError, refuse
from .config_bus import ConfigBus
from .router import Router
from .shared_block import shared
from .wavelet import Wavelet

__all__ = ["Mesh"]


class Mesh(wiring.Component):
    """``cfg.mesh_rows x cfg.mesh_cols`` routers; see the module docstring."""

    def __init__(self, cfg, *, core=None, tile_addr_bits=DEFAULT_TILE_ADDR_BITS, multicast=False):
        P, Q, C = cfg.mesh_rows, cfg.mesh_cols, cfg.num_colors
        if not (MIN_TILE_ADDR_BITS <= tile_addr_bits < ADDR_BITS):
            refuse(self, ConfigError(f"tile_addr_bits must be in {MIN_TILE_ADDR_BITS}..{ADDR_BITS - 1}, "
                                     f"got {tile_addr_bits}"))
        if P * Q > 1 << (ADDR_BITS - tile_addr_bits):
            refuse(self, ConfigError(f"a {P}x{Q} mesh has more tiles than the {ADDR_BITS}-bit config bus "
                                     f"addresses with {tile_addr_bits}-bit tile windows "
                                     f"({1 << (ADDR_BITS - tile_addr_bits)} max)"))
        self._cfg = cfg
        self._tile_addr_bits = tile_addr_bits
        self._core_factory = core
        wave = stream.Signature(Wavelet)
        members = {"cfg": In(ConfigBus()), "error": Out(1)}
        if multicast:
            members["cfg_tiles"] = In(P * Q)
        for side, n in (("n", Q), ("s", Q), ("w", P), ("e", P)):
            members[f"{side}_in"] = In(wave).array(n)
            members[f"{side}_out"] = Out(wave).array(n)
            members[f"{side}_accept"] = In(C, init=(1 << C) - 1).array(n)
        if core is None:
            members["ramp_in"] = In(wave).array(P, Q)
            members["ramp_out"] = Out(wave).array(P, Q)
            members["ramp_accept"] = In(C, init=(1 << C) - 1).array(P, Q)
            members["ramp2_out"] = Out(wave).array(P, Q)
            members["ramp2_accept"] = In(C, init=(1 << C) - 1).array(P, Q)
        super().__init__(members)
        self.routers = [[self._router(r, q) for q in range(Q)] for r in range(P)]
        self.cores = [[core(r, q) for q in range(Q)] for r in range(P)] if core else None

    @property
    def config(self):
        return self._cfg

    @property
    def tile_addr_bits(self):
        return self._tile_addr_bits

    def _router(self, r, q):
        links = self._links(r, q)
        name = "router_" + "".join(PORT_NAMES[p] for p in sorted(links))
        rcfg = self._cfg.router()
        return shared(Router(rcfg, links=links), name, (rcfg, frozenset(links)))

    def _links(self, r, q):
        P, Q = self._cfg.mesh_rows, self._cfg.mesh_cols
        links = set()
        if r > 0:
            links.add(Port.N)
        if r < P - 1:
            links.add(Port.S)
        if q > 0:
            links.add(Port.W)
        if q < Q - 1:
            links.add(Port.E)
        return links

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        P, Q, C = cfg.mesh_rows, cfg.mesh_cols, cfg.num_colors
        R = self.routers
        for r in range(P):
            for q in range(Q):
                m.submodules[f"router_{r}_{q}"] = R[r][q]
                if self.cores:
                    m.submodules[f"core_{r}_{q}"] = self.cores[r][q]

        # Links between neighbours.
        for r in range(P):
            for q in range(Q):
                if r < P - 1:
                    wiring.connect(m, R[r][q].s_out, R[r + 1][q].n_in)
                    wiring.connect(m, R[r + 1][q].n_out, R[r][q].s_in)
                if q < Q - 1:
                    wiring.connect(m, R[r][q].e_out, R[r][q + 1].w_in)
                    wiring.connect(m, R[r][q + 1].w_out, R[r][q].e_in)

        # Edges.
        def edge(side, index, router):
            wiring.connect(m, wiring.flipped(getattr(self, f"{side}_in")[index]),
                           getattr(router, f"{side}_in"))
            wiring.connect(m, getattr(router, f"{side}_out"),
                           wiring.flipped(getattr(self, f"{side}_out")[index]))
            m.d.comb += getattr(router, f"{side}_accept").eq(getattr(self, f"{side}_accept")[index])

        for q in range(Q):
            edge("n", q, R[0][q])
            edge("s", q, R[P - 1][q])
        for r in range(P):
            edge("w", r, R[r][0])
            edge("e", r, R[r][Q - 1])

        # RAMP ports: cores or top-level streams.
        for r in range(P):
            for q in range(Q):
                router = R[r][q]
                if self.cores:
                    core = self.cores[r][q]
                    wiring.connect(m, core.tx, router.ramp_in)
                    wiring.connect(m, router.ramp_out, core.rx)
                    if "rx_accept" in core.signature.members:
                        m.d.comb += router.ramp_accept.eq(core.rx_accept)
                    else:
                        m.d.comb += router.ramp_accept.eq((1 << C) - 1)
                    if "rx2" in core.signature.members:
                        wiring.connect(m, router.ramp2_out, core.rx2)
                else:
                    wiring.connect(m, wiring.flipped(self.ramp_in[r][q]), router.ramp_in)
                    wiring.connect(m, router.ramp_out, wiring.flipped(self.ramp_out[r][q]))
                    m.d.comb += router.ramp_accept.eq(self.ramp_accept[r][q])
                    wiring.connect(m, router.ramp2_out, wiring.flipped(self.ramp2_out[r][q]))
                    m.d.comb += router.ramp2_accept.eq(self.ramp2_accept[r][q])

        # Configuration bus: tile select on the high address bits, registered read select.
        bits = self._tile_addr_bits
        tile = self.cfg.addr[bits:]
        local = self.cfg.addr[:bits]
        is_router = local < CORE_BASE
        rd_tile = Signal.like(tile)
        rd_router = Signal()
        m.d.sync += [rd_tile.eq(tile), rd_router.eq(is_router)]
        router_rdata, core_rdata = [], []
        for r in range(P):
            for q in range(Q):
                t = r * Q + q
                hit = tile == t
                if "cfg_tiles" in self.signature.members:
                    hit = Mux(self.cfg_tiles.any(), self.cfg_tiles[t], hit)
                bus = R[r][q].cfg
                m.d.comb += [bus.addr.eq(local), bus.wdata.eq(self.cfg.wdata),
                             bus.we.eq(self.cfg.we & hit & is_router)]
                router_rdata.append(bus.rdata)
                if self.cores and "cfg" in self.cores[r][q].signature.members:
                    cbus = self.cores[r][q].cfg
                    m.d.comb += [cbus.addr.eq(local - CORE_BASE), cbus.wdata.eq(self.cfg.wdata),
                                 cbus.we.eq(self.cfg.we & hit & ~is_router)]
                    core_rdata.append(cbus.rdata)
                else:
                    core_rdata.append(0)
        n_tiles = P * Q
        in_range = rd_tile < n_tiles
        with m.If(in_range & rd_router):
            m.d.comb += self.cfg.rdata.eq(Array(router_rdata)[rd_tile])
        with m.Elif(in_range):
            m.d.comb += self.cfg.rdata.eq(Array(core_rdata)[rd_tile])

        m.d.comb += self.error.eq(Cat(*(R[r][q].error for r in range(P) for q in range(Q))).any())
        return m

