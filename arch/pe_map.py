"""The PE core's task descriptor format and configuration address map (docs/pe.md).

A descriptor is ``DESC_WORDS`` configuration words (word ``w`` holds bits ``32*w .. 32*w+31`` of
:data:`DESCRIPTOR`, fields LSB first):

====  =====================================================================================
word  fields (LSB first)
====  =====================================================================================
0     ``op:2 vmode:2 enable:1 chain:1 relu:1 round:1 send:1 store:1 dep_a_en:1 dep_b_en:1
      color:5 next:5 dep_a:5 dep_b:5``
1     ``a_base:16 a_stride:16``
2     ``b_base:16 b_stride:16``
3     ``dst_base:16 count:16``
4     ``reps:16 lo:16``
5     ``hi:16 group:16``
====  =====================================================================================

Writing word 0 *commits* a descriptor (checked, and started when ``enable`` is set), so a
descriptor is written in :data:`COMMIT_ORDER` (:func:`descriptor_writes`).

Address map (``S = sram_words``, ``T = num_tasks``): ``[0, S)`` SRAM words (R/W);
``desc_addr(S, t, w) = S + DESC_STRIDE * t + w`` word ``w`` of descriptor ``t`` (R/W);
``status_base(S, T) + STATUS[name]`` the status registers (``FAULT`` holds :data:`FAULT_STATUS`,
any write clears it; ``PARAMS`` holds :data:`PE_PARAMS`; ``PACK`` (R/W) the packed SRAM write
mode: while it is 1, a write of ``d`` to SRAM word ``a`` writes two bf16, :func:`pack_pair`;
``STOP`` (W) stops every descriptor);
``done_addr(S, T, t)`` the done counter of descriptor ``t`` (R). The map spans ``core_span(S, T)``
addresses.
"""

import enum
from types import MappingProxyType

from .config_bus import WORD_BITS, WORD_MASK
from .layout import BitLayout
from .wavelet import COLOR_BITS

__all__ = ["TASK_BITS", "MAX_TASKS", "DESCRIPTOR", "DESC_WORDS", "DESC_STRIDE", "COMMIT_ORDER",
           "acc_rows", "acc_slots", "fmac_group_rows", "fmac_write_delay", "fmac_order", "Op", "VecMode",
           "Fault", "STATUS", "DONE_OFFSET", "FAULT_STATUS", "PE_PARAMS",
           "encode", "decode", "store_addr", "desc_addr", "status_base", "done_addr", "core_span", "pack_pair",
           "unpack_pair", "descriptor_writes", "vec_fifo_depth"]

TASK_BITS = 5                  # a descriptor index (next, dep_a, dep_b, fault index)
MAX_TASKS = 1 << TASK_BITS

DESCRIPTOR = BitLayout(
    "descriptor",
    ("op", 2), ("vmode", 2), ("enable", 1), ("chain", 1), ("relu", 1), ("round", 1),
    ("send", 1), ("store", 1), ("dep_a_en", 1), ("dep_b_en", 1), ("color", COLOR_BITS),
    ("next", TASK_BITS), ("dep_a", TASK_BITS), ("dep_b", TASK_BITS),
    ("a_base", 16), ("a_stride", 16), ("b_base", 16), ("b_stride", 16), ("dst_base", 16),
    ("count", 16), ("reps", 16), ("lo", 16), ("hi", 16), ("group", 16),
)
DESC_WORDS = DESCRIPTOR.width // WORD_BITS
assert DESC_WORDS * WORD_BITS == DESCRIPTOR.width
DESC_STRIDE = 8                # addresses per descriptor (words DESC_WORDS.. read 0)
COMMIT_ORDER = tuple(range(1, DESC_WORDS)) + (0,)      # word 0 last: writing it commits


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
    RANGE = 5         # run: an access of the descriptor runs past the end of SRAM
    UNBOUND = 6       # a wavelet arrived on a color no active descriptor listens on (index = color)
    DUP_COLOR = 7     # two active wavelet descriptors listen on the color (index = lower one)
    ACC_CONFLICT = 8  # FMAC wavelet of t while another descriptor's row is half accumulated


# Status registers at status_base + offset (R; a write to FAULT clears it; PACK is R/W; a write
# to STOP stops every descriptor, it reads 0).
STATUS = MappingProxyType({"FAULT": 0, "ACTIVE": 1, "FMAC_CYCLES": 2, "VEC_CYCLES": 3,
                           "RX_COUNT": 4, "TX_COUNT": 5, "PARAMS": 6, "PACK": 7, "STOP": 8})
DONE_OFFSET = 16               # done counter of descriptor t at status_base + DONE_OFFSET + t
# The FAULT register: all fields 0 while no fault is held.
FAULT_STATUS = BitLayout("PE fault status", ("flag", 1), ("code", 4), ("index", TASK_BITS))
# The PARAMS register.
PE_PARAMS = BitLayout("PE parameters", ("lanes", 8), ("num_tasks", 8), ("num_colors", 8))


def encode(**fields):
    """The ``DESC_WORDS`` configuration words of a descriptor with ``fields`` (missing fields are
    0; enums and bools accepted). A value that does not fit, or an unknown field, raises
    ``ValueError`` naming it."""
    value = DESCRIPTOR.pack(**fields)
    return [(value >> (WORD_BITS * w)) & WORD_MASK for w in range(DESC_WORDS)]


def decode(words):
    """``{field: value}`` of a descriptor from its ``DESC_WORDS`` configuration words."""
    return DESCRIPTOR.unpack(sum((int(w) & WORD_MASK) << (WORD_BITS * i) for i, w in enumerate(words)))


def store_addr(d, n, j, lanes):
    """SRAM word of word ``j`` of unit ``n`` (``lo <= n < hi``) of STORE descriptor ``d`` (a dict
    of its fields): ``dst_base + (n - lo)*L + j`` (vectors in order), or, with ``b_stride`` set
    (a *transposed* STORE), ``dst_base + (n - lo) + j*b_stride``: word ``j`` of every vector lands
    in row ``j`` of a ``lanes x b_stride`` array, vector ``n`` in its column ``n - lo``."""
    k = n - d.get("lo", 0)
    stride = d.get("b_stride", 0)
    return d.get("dst_base", 0) + (k + j * stride if stride else k * lanes + j)


def acc_rows(add_stages):
    """FMAC rows per group: a lane's accumulation (read the row's partial sum, add, write it back)
    takes ``add_stages + 1`` cycles, so that many rows are accumulated in turn."""
    return add_stages + 1


def acc_slots(add_stages):
    """Accumulator rows a lane holds: a group has up to ``2 * acc_rows - 1`` rows
    (:func:`fmac_group_rows`)."""
    return 2 * acc_rows(add_stages) - 1


def fmac_group_rows(rows_left, group_rows):
    """Rows of the FMAC group that starts with ``rows_left`` rows of the run left: ``group_rows``
    (``Config.acc_rows``), or all of them when fewer than ``2 * group_rows`` are left, so that no
    group but a run shorter than ``group_rows`` has fewer rows than the recurrence needs."""
    return rows_left if rows_left < 2 * group_rows else group_rows


def fmac_write_delay(mul_stages, add_stages):
    """Cycles from the ``rx`` transfer of a wavelet to the wavelet engine's SRAM write it causes
    (an FMAC row's last wavelet: the row; a STORE: its word): the operand read, the multiplier's
    ``mul_stages`` and the adder's ``add_stages``. 1 for a combinational lane."""
    return 1 + mul_stages + add_stages


def fmac_order(rows, count, group_rows):
    """The order an FMAC descriptor takes its ``rows * count`` wavelets: ``[(row, i)]``, wavelet
    ``i`` of row ``row``. Rows go in groups of ``group_rows`` (``Config.acc_rows``; the last group
    has the rest, up to ``2 * group_rows - 1``: :func:`fmac_group_rows`); inside a group the
    wavelets are interleaved ``i``-major, rows ascending, so a row is touched again only after
    every other row of its group."""
    order, n0 = [], 0
    while n0 < rows:
        ng = fmac_group_rows(rows - n0, group_rows)
        order += [(n0 + r, i) for i in range(count) for r in range(ng)]
        n0 += ng
    return order


def vec_fifo_depth(add_stages):
    """Entries of the pipelined vector unit's output FIFO, and its credits
    (``hdl/pe/vector_unit.py``): an element holds one from its issue until its word goes out,
    ``add_stages + 3`` cycles at full rate, so this many let one element per cycle through."""
    return add_stages + 3


def desc_addr(sram_words, t, word=0):
    """Address of word ``word`` of descriptor ``t``."""
    return sram_words + DESC_STRIDE * t + word


def status_base(sram_words, num_tasks):
    """Address of the first status register."""
    return sram_words + DESC_STRIDE * num_tasks


def done_addr(sram_words, num_tasks, t):
    """Address of the done counter of descriptor ``t``."""
    return status_base(sram_words, num_tasks) + DONE_OFFSET + t


def core_span(sram_words, num_tasks):
    """Addresses the core's map uses (``[0, core_span)``)."""
    return done_addr(sram_words, num_tasks, num_tasks)


def descriptor_writes(base, words):
    """``[(address, word)]`` writing descriptor ``words`` at ``base`` (the address of word 0) in
    :data:`COMMIT_ORDER`."""
    return [(base + w, words[w]) for w in COMMIT_ORDER]


def pack_pair(first, second):
    """The packed configuration word (``PACK = 1``) that writes SRAM words ``a`` and ``a + 1``:
    ``first`` and ``second`` are SRAM words holding a bf16 in the upper half (lower half 0); the
    packed word carries ``first``'s bf16 in its upper half and ``second``'s in its lower half."""
    return (first & 0xFFFF0000) | (second >> 16)


def unpack_pair(word):
    """The two SRAM words a packed configuration write of ``word`` writes (at ``a``, ``a + 1``)."""
    return word & 0xFFFF0000, (word << 16) & WORD_MASK
