"""The fabric's words (docs/architecture.md#wavelets-and-links): the wavelet of the router mesh and
the tagged word of the SwarmX links, and their only packers.

A wavelet is ``{ctrl[37], color[36:32], data[31:0]}``; a tagged word ``{last[32], data[31:0]}``
(``last`` ends a vector). The pack/unpack helpers take ints or numpy integer arrays
(:class:`arch.layout.BitLayout`).
"""

from .layout import BitLayout

__all__ = ["DATA_BITS", "COLOR_BITS", "MAX_COLORS", "WAVELET", "WAVELET_BITS", "TAGGED",
           "TAGGED_BITS", "pack_wavelet", "unpack_wavelet", "pack_tagged", "unpack_tagged"]

DATA_BITS = 32
COLOR_BITS = 5
MAX_COLORS = 1 << COLOR_BITS

WAVELET = BitLayout("wavelet", ("data", DATA_BITS), ("color", COLOR_BITS), ("ctrl", 1))
WAVELET_BITS = WAVELET.width        # 38
TAGGED = BitLayout("tagged word", ("data", DATA_BITS), ("last", 1))
TAGGED_BITS = TAGGED.width          # 33


def pack_wavelet(data, color, ctrl=0):
    """The wavelet word of ``(data, color, ctrl)``."""
    return WAVELET.pack(data=data, color=color, ctrl=ctrl)


def unpack_wavelet(word):
    """``(data, color, ctrl)`` of a wavelet word."""
    f = WAVELET.unpack(word)
    return f["data"], f["color"], f["ctrl"]


def pack_tagged(data, last=0):
    """The tagged word of ``(data, last)``."""
    return TAGGED.pack(data=data, last=last)


def unpack_tagged(word):
    """``(data, last)`` of a tagged word."""
    f = TAGGED.unpack(word)
    return f["data"], f["last"]
