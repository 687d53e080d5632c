"""A PE tile (docs/pe.md): a :class:`~hdl.pe.core.PeCore` on the RAMP port of a
:class:`~hdl.router.Router`, behind one configuration bus.

Ports (``C = cfg.num_colors``; ``p`` in ``n, e, s, w``)
------------------------------------------------------
``p_in: In(stream.Signature(Wavelet))``, ``p_out: Out(stream.Signature(Wavelet))``, ``p_accept:
In(C)`` (the router's boundary ports, see :mod:`hdl.router`); ``cfg: In(ConfigBus())``;
``error: Out(1)`` (the router's sticky error flag); ``fault: Out(1)`` (the core's sticky fault).
The core takes every wavelet the router offers on RAMP (``rx.ready`` is always high), so the RAMP
accept mask is all ones; the router's RAMP2 channel feeds the core's ``rx2`` (accept mask all
ones: a wavelet waits there only while ``rx2.ready`` is low).

Configuration address map (:mod:`arch.tile_map`; the same local map as a tile of a
:class:`~hdl.mesh.Mesh`)
---------------------------------------------------------------------------------
``[0, CORE_BASE)``: the router's map. ``CORE_BASE + a``: the core's address ``a`` (SRAM,
descriptors, status; :mod:`arch.pe_map`). ``rdata`` is valid one cycle after ``addr``. A ``Mesh``
of PE cores needs ``tile_addr_bits >= mesh_tile_addr_bits(sram_words, num_tasks)`` for the same
map in every tile.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from arch.config_bus import ADDR_BITS
from arch.ports import PORT_NAMES, SIDES
from arch.tile_map import CORE_BASE, tile_span

from .config import ConfigError, refuse
from .config_bus import ConfigBus
from .pe.core import PeCore
from .router import Router
from .wavelet import Wavelet

__all__ = ["Tile"]

SIDE_NAMES = tuple(PORT_NAMES[p] for p in SIDES)


class Tile(wiring.Component):
    """Router + PE core for ``cfg``; see the module docstring."""

    def __init__(self, cfg):
        span = tile_span(cfg.sram_words, cfg.num_tasks)
        if span > 1 << ADDR_BITS:
            refuse(self, ConfigError(f"tile address map needs {span} addresses, "
                                     f"more than the {ADDR_BITS}-bit configuration bus"))
        self._cfg = cfg
        wave = stream.Signature(Wavelet)
        members = {"cfg": In(ConfigBus()), "error": Out(1), "fault": Out(1)}
        for side in SIDE_NAMES:
            members[f"{side}_in"] = In(wave)
            members[f"{side}_out"] = Out(wave)
            members[f"{side}_accept"] = In(cfg.num_colors, init=(1 << cfg.num_colors) - 1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        router = m.submodules.router = Router(cfg)
        core = m.submodules.core = PeCore(cfg)
        for side in SIDE_NAMES:
            wiring.connect(m, wiring.flipped(getattr(self, f"{side}_in")),
                           getattr(router, f"{side}_in"))
            wiring.connect(m, getattr(router, f"{side}_out"),
                           wiring.flipped(getattr(self, f"{side}_out")))
            m.d.comb += getattr(router, f"{side}_accept").eq(getattr(self, f"{side}_accept"))
        wiring.connect(m, core.tx, router.ramp_in)
        wiring.connect(m, router.ramp_out, core.rx)
        wiring.connect(m, router.ramp2_out, core.rx2)
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
