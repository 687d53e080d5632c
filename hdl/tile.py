"""A PE tile (docs/pe.md): a :class:`~hdl.pe_core.PeCore` on the RAMP port of a
:class:`~hdl.router.Router`, behind one configuration bus.

Ports (``C = cfg.num_colors``; ``p`` in ``n, e, s, w``)
------------------------------------------------------
``p_in: In(stream.Signature(Wavelet))``, ``p_out: Out(stream.Signature(Wavelet))``, ``p_accept:
In(C)`` (the router's boundary ports, see :mod:`hdl.router`); ``cfg: In(ConfigBus())``;
``error: Out(1)`` (the router's sticky error flag); ``fault: Out(1)`` (the core's sticky fault).
The core takes every wavelet the router offers on RAMP (``rx.ready`` is always high), so the RAMP
accept mask is all ones.

Configuration address map (the same local map as a tile of :class:`~hdl.mesh.Mesh`)
---------------------------------------------------------------------------------
``0x000 .. 0x1FF``: the router's map. ``0x200 + a``: the core's address ``a`` (SRAM, descriptors,
status; :mod:`hdl.pe_core`). ``rdata`` is valid one cycle after ``addr``. A ``Mesh`` of PE cores
needs ``tile_addr_bits >= mesh_tile_addr_bits(cfg)`` for the same map in every tile.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config import ConfigError, refuse
from .config_bus import ADDR_BITS, ConfigBus
from .pe_core import PeCore, core_map
from .router import ROUTER_ADDR_SPAN, Router
from .wavelet import Wavelet

__all__ = ["Tile", "CORE_BASE", "mesh_tile_addr_bits"]

CORE_BASE = ROUTER_ADDR_SPAN
SIDES = ("n", "e", "s", "w")


def mesh_tile_addr_bits(cfg):
    """The ``tile_addr_bits`` a :class:`~hdl.mesh.Mesh` of PE cores built with ``cfg`` needs so
    that each tile's window holds the router (``0x000``) and the whole core map (``0x200 + a``);
    e.g. 10 for the ``tiny`` preset, 12 for ``default``."""
    return max(10, (CORE_BASE + core_map(cfg)[2] - 1).bit_length())


class Tile(wiring.Component):
    """Router + PE core for ``cfg``; see the module docstring."""

    def __init__(self, cfg):
        if CORE_BASE + core_map(cfg)[2] > 1 << ADDR_BITS:
            refuse(self, ConfigError(f"tile address map needs {CORE_BASE + core_map(cfg)[2]} addresses, "
                                     f"more than the {ADDR_BITS}-bit configuration bus"))
        self._cfg = cfg
        wave = stream.Signature(Wavelet)
        members = {"cfg": In(ConfigBus()), "error": Out(1), "fault": Out(1)}
        for side in SIDES:
            members[f"{side}_in"] = In(wave)
            members[f"{side}_out"] = Out(wave)
            members[f"{side}_accept"] = In(cfg.num_colors, init=(1 << cfg.num_colors) - 1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        router = m.submodules.router = Router(cfg)
        core = m.submodules.core = PeCore(cfg)
        for side in SIDES:
            wiring.connect(m, wiring.flipped(getattr(self, f"{side}_in")),
                           getattr(router, f"{side}_in"))
            wiring.connect(m, getattr(router, f"{side}_out"),
                           wiring.flipped(getattr(self, f"{side}_out")))
            m.d.comb += getattr(router, f"{side}_accept").eq(getattr(self, f"{side}_accept"))
        wiring.connect(m, core.tx, router.ramp_in)
        wiring.connect(m, router.ramp_out, core.rx)
        m.d.comb += router.ramp_accept.eq((1 << cfg.num_colors) - 1)

        bus = self.cfg
        to_router = bus.addr < CORE_BASE
        rd_router = Signal()
        m.d.sync += rd_router.eq(to_router)
        m.d.comb += [
            router.cfg.addr.eq(bus.addr), router.cfg.wdata.eq(bus.wdata),
            router.cfg.we.eq(bus.we & to_router),
            core.cfg.addr.eq(bus.addr - CORE_BASE), core.cfg.wdata.eq(bus.wdata),
            core.cfg.we.eq(bus.we & ~to_router),
            bus.rdata.eq(Mux(rd_router, router.cfg.rdata, core.cfg.rdata)),
            self.error.eq(router.error),
            self.fault.eq(core.fault),
        ]
        return m
