"""Amaranth types of the fabric's words (:mod:`arch.wavelet`, docs/architecture.md#wavelets-and-links)
and the stream signatures that carry them.

The layouts are built from the :mod:`arch.wavelet` bit layouts, so a payload's bits are exactly
what ``arch.wavelet.pack_wavelet`` / ``pack_tagged`` make: a wavelet is
``{ctrl[37], color[36:32], data[31:0]}``, a tagged word ``{last[32], data[31:0]}``.
"""

from amaranth.lib import stream

from arch.wavelet import DATA_BITS, TAGGED, WAVELET

from .layouts import struct_layout

__all__ = ["Wavelet", "TaggedWord", "wavelet_stream", "word_stream", "tagged_stream"]

# One fabric message: 32 data bits, a 5-bit color (virtual channel) and a control bit.
Wavelet = struct_layout(WAVELET)
# A 32-bit word with an end-of-vector flag (the SwarmX link payload).
TaggedWord = struct_layout(TAGGED)


def wavelet_stream():
    """``stream.Signature`` carrying one :data:`Wavelet` per transfer."""
    return stream.Signature(Wavelet)


def word_stream(width=DATA_BITS):
    """``stream.Signature`` carrying a plain ``width``-bit word per transfer."""
    return stream.Signature(width)


def tagged_stream():
    """``stream.Signature`` carrying one :data:`TaggedWord` per transfer."""
    return stream.Signature(TaggedWord)
