"""Registry of the Verilog tops: name -> factory(Config) -> Component.

``make verilog`` writes ``build/verilog/<name>.v`` for every entry; the module inside has the
same name. Benches elaborate tops through this registry too, so generated and simulated RTL are
the same.
"""

from .skid_buffer import SkidBuffer
from .wavelet import Wavelet

__all__ = ["TOPS", "build_top"]


TOPS = {
    # 38-bit wavelet pipeline register (DESIGN.md 5.1).
    "skid_buffer": lambda cfg: SkidBuffer(Wavelet),
}


def build_top(name, cfg):
    """Elaborate-ready component for top ``name``; unknown names raise ``KeyError`` listing all."""
    try:
        factory = TOPS[name]
    except KeyError:
        raise KeyError(f"unknown top {name!r}; known tops: {', '.join(sorted(TOPS))}") from None
    return factory(cfg)
