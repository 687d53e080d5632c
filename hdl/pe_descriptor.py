"""PE task descriptor format (docs/pe.md): the Amaranth ``data.Struct`` and its Python encoder.

A descriptor is 192 bits, written as six 32-bit configuration words (word ``w`` holds bits
``32*w .. 32*w+31``; fields pack LSB first as Amaranth's ``StructLayout`` packs them). Writing
word 0 *commits* the descriptor: it is checked, and started when ``enable`` is set (see
:mod:`hdl.pe_core` for the operations, the checks and the fault codes).

====  =====================================================================================
word  fields (LSB first)
====  =====================================================================================
0     ``op:2 vmode:2 enable:1 chain:1 relu:1 round:1 send:1 store:1 dep_a_en:1 dep_b_en:1
      color:5 next:5 dep_a:5 dep_b:5``
1     ``a_base:16 a_stride:16``
2     ``b_base:16 b_stride:16``
3     ``dst_base:16 count:16``
4     ``reps:16 lo:16``
5     ``hi:16 reserved:16``
====  =====================================================================================
"""

import enum

from amaranth.lib import data

__all__ = ["Op", "VecMode", "Fault", "Descriptor", "DESC_WORDS", "FIELD_WIDTHS", "encode"]

DESC_WORDS = 6


class Op(enum.IntEnum):
    """What a descriptor does (``op`` field)."""
    NOP = 0      # disabled; committing it stops the descriptor
    FMAC = 1     # wavelet-triggered: acc[0:L] += w * mem[a_base + i*a_stride + 0:L]
    STORE = 2    # wavelet-triggered: filtered store of incoming words, L per vector
    VEC = 3      # counter-triggered vector unit: PASS / ADD / MASK / DOT, then send and/or store


class VecMode(enum.IntEnum):
    """Element operation of a ``VEC`` descriptor (``vmode`` field); A, B are SRAM vectors."""
    PASS = 0     # e = A[j]
    ADD = 1      # e = A[j] + B[j] (fp32)
    MASK = 2     # e = B[j] where bf16(A[j]) > +0 (sign 0, not zero), else +0.0
    DOT = 3      # e = sum_j bf16(A_k[j]) * bf16(B[j]), from +0.0, j ascending; one word per k


class Fault(enum.IntEnum):
    """Sticky fault codes; the status register names the descriptor (or the color)."""
    NONE = 0
    COUNT = 1         # count/reps zero, lo > hi, or a non-DOT VEC with count != 1
    COLOR = 2         # trigger / send color >= num_colors
    INDEX = 3         # next or dep index >= num_tasks, or a descriptor chaining to itself
    NO_ACTION = 4     # VEC with neither send nor store
    RANGE = 5         # an SRAM range of the descriptor runs past the end of SRAM
    UNBOUND = 6       # a wavelet arrived on a color no active descriptor listens on (index = color)
    DUP_COLOR = 7     # two active wavelet descriptors listen on the color (index = lower one)
    ACC_CONFLICT = 8  # FMAC wavelet of t while another descriptor's row is half accumulated


class Descriptor(data.Struct):
    """One task descriptor (192 bits); see the module docstring and :mod:`hdl.pe_core`."""
    op: 2
    vmode: 2
    enable: 1
    chain: 1
    relu: 1
    round: 1
    send: 1
    store: 1
    dep_a_en: 1
    dep_b_en: 1
    color: 5
    next: 5
    dep_a: 5
    dep_b: 5
    a_base: 16
    a_stride: 16
    b_base: 16
    b_stride: 16
    dst_base: 16
    count: 16
    reps: 16
    lo: 16
    hi: 16
    reserved: 16


FIELD_WIDTHS = {name: field.width for name, field in data.Layout.cast(Descriptor)}


def encode(**fields):
    """The six configuration words of a descriptor with ``fields`` (missing fields are 0).

    Enum values (:class:`Op`, :class:`VecMode`) and bools are accepted; a value that does not fit
    its field, or an unknown field name, raises ``ValueError`` naming it.
    """
    value = 0
    layout = data.Layout.cast(Descriptor)
    known = {name for name, _ in layout}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"unknown descriptor field(s) {', '.join(unknown)}; known: "
                         f"{', '.join(name for name, _ in layout)}")
    for name, field in layout:
        v = int(fields.get(name, 0))
        if not 0 <= v < (1 << field.width):
            raise ValueError(f"descriptor field {name!r} = {v} does not fit in {field.width} bits")
        value |= v << field.offset
    return [(value >> (32 * w)) & 0xFFFFFFFF for w in range(DESC_WORDS)]
