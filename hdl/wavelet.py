"""Shared fabric types (docs/architecture.md#wavelets-and-links): the wavelet, router ports and the stream signatures.

Payload fields pack as Amaranth's ``StructLayout`` packs them: the first field in the least
significant bits. A wavelet is therefore ``{ctrl[37], color[36:32], data[31:0]}``.
"""

from amaranth.lib import data, stream

from .ports import Port

__all__ = [
    "DATA_BITS", "COLOR_BITS", "MAX_COLORS", "Port", "Wavelet", "TaggedWord",
    "wavelet_stream", "word_stream", "tagged_stream",
]

DATA_BITS = 32
COLOR_BITS = 5
MAX_COLORS = 1 << COLOR_BITS


class Wavelet(data.Struct):
    """One fabric message: 32 data bits, a 5-bit color (virtual channel) and a control bit."""
    data: DATA_BITS
    color: COLOR_BITS
    ctrl: 1


class TaggedWord(data.Struct):
    """A 32-bit word with an end-of-vector flag (the SwarmX link payload)."""
    data: DATA_BITS
    last: 1


def wavelet_stream():
    """``stream.Signature`` carrying one :class:`Wavelet` per transfer."""
    return stream.Signature(Wavelet)


def word_stream(width=DATA_BITS):
    """``stream.Signature`` carrying a plain ``width``-bit word per transfer."""
    return stream.Signature(width)


def tagged_stream():
    """``stream.Signature`` carrying one :class:`TaggedWord` per transfer."""
    return stream.Signature(TaggedWord)
