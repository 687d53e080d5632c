"""Registry of the Verilog tops: name -> factory(Config) -> Component.

``make verilog`` writes ``build/verilog/<name>.v`` for every entry; the module inside has the
same name. Benches elaborate tops through this registry too, so generated and simulated RTL are
the same.
"""

from .fp.bf16_mul import Bf16Mul
from .fp.fp32_add import Fp32Add
from .mesh import Mesh
from .pe.core import PeCore
from .router import Router
from .skid_buffer import SkidBuffer
from .swarmx import SwarmxTree
from .system import System
from .tile import Tile
from .wafer import Wafer
from .wavelet import Wavelet

__all__ = ["TOPS", "build_top"]


TOPS = {
    # 38-bit wavelet pipeline register (docs/skid_buffer.md).
    "skid_buffer": lambda cfg: SkidBuffer(Wavelet),
    # SwarmX broadcast/reduce tree for cfg.swarmx_leaves systems (docs/swarmx.md).
    "swarmx": lambda cfg: SwarmxTree.from_config(cfg),
    # One color router, every port a boundary stream (docs/router.md).
    "router": lambda cfg: Router(cfg),
    # 4x4 mesh of routers, edges and RAMPs as streams (docs/mesh.md).
    "mesh4x4": lambda cfg: Mesh(cfg.replace(mesh_rows=4, mesh_cols=4)),
    # binary32 adder, stream {a: 32, b: 32} -> 32, latency cfg.fp_latency (docs/fp_units.md).
    "fp32_add": lambda cfg: Fp32Add(cfg.fp_latency),
    # bf16 x bf16 -> binary32 multiplier, stream {a: 16, b: 16} -> 32 (docs/fp_units.md).
    "bf16_mul": lambda cfg: Bf16Mul(cfg.fp_latency),
    # PE core: descriptors, banked SRAM, cfg.lanes FMAC lanes, vector unit (docs/pe.md); a vector
    # needs one bank per lane, so these tops use at least `lanes` banks.
    "pe_core": lambda cfg: PeCore(_pe_banks(cfg)),
    # PE tile: router + core on its RAMP port, one config bus (docs/pe.md).
    "tile": lambda cfg: Tile(_pe_banks(cfg)),
    # Wafer: mesh_rows x mesh_cols PE tiles + SwarmX weight/gradient adapters + host edges
    # (docs/wafer.md).
    "wafer": lambda cfg: Wafer(_pe_banks(cfg)),
    # System: a SwarmX tree per mesh column + 2 wafers of 2x2 PE tiles, the `make sim` default size (other fields
    # from cfg; any size: hdl.system.System(cfg)) (docs/wafer.md).
    "system": lambda cfg: System(_pe_banks(cfg.replace(mesh_rows=2, mesh_cols=2,
                                                       swarmx_leaves=2))),
}


def _pe_banks(cfg):
    """``cfg`` with ``sram_banks`` raised to the power of two >= ``max(lanes, 2)`` when it is
    smaller (the PE core's vectors and packed writes)."""
    need = max(cfg.lanes, 2)
    if need <= cfg.sram_banks:
        return cfg
    return cfg.replace(sram_banks=1 << (need - 1).bit_length())


def build_top(name, cfg):
    """Elaborate-ready component for top ``name``; unknown names raise ``KeyError`` listing all."""
    try:
        factory = TOPS[name]
    except KeyError:
        raise KeyError(f"unknown top {name!r}; known tops: {', '.join(sorted(TOPS))}") from None
    return factory(cfg)
