"""Golden numerics (docs/architecture.md#numerics): one contract for RTL and models, vectorized numpy.

* fp32 is IEEE-754 binary32, round to nearest even, subnormals kept, signed zeros and
  infinities per IEEE; every NaN *result* is the canonical quiet NaN ``0x7FC00000``.
* bf16 values travel as the upper 16 bits of an fp32; fp32 -> bf16 rounds to nearest even
  (NaN -> ``0x7FC0``).
* A bf16 x bf16 product is formed in fp32 (exact except overflow / subnormal range, rounded once).
* Every reduction has one fixed order; the helpers here are the only implementations of those
  orders, shared by the fabric, PE, SwarmX and pipeline models.

Bit-level functions take and return ``uint32`` (fp32 bits) or ``uint16`` (bf16 bits) arrays;
value-level functions take and return ``float32`` arrays.
"""

import numpy as np

__all__ = [
    "CANONICAL_NAN", "CANONICAL_NAN_BF16",
    "f32", "bits", "canonical", "fp32_add", "fp32_mul", "bf16_mul", "fma_bf16",
    "fp32_add_bits", "bf16_mul_bits", "bf16_bits", "bf16_to_fp32", "round_bf16",
    "chain_sum", "node_sum", "tree_sum",
]

CANONICAL_NAN = np.uint32(0x7FC00000)
CANONICAL_NAN_BF16 = np.uint16(0x7FC0)


def f32(bits_u32):
    """fp32 values with the given bit patterns."""
    return np.asarray(bits_u32, dtype=np.uint32).view(np.float32)


def bits(values):
    """Bit patterns (``uint32``) of fp32 values."""
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def canonical(values):
    """``values`` (fp32) with every NaN replaced by the canonical quiet NaN."""
    v = np.array(values, dtype=np.float32, copy=True)
    v[np.isnan(v)] = f32(CANONICAL_NAN)
    return v


def fp32_add(a, b):
    """IEEE binary32 ``a + b`` (RNE), canonical NaN."""
    with np.errstate(all="ignore"):
        return canonical(np.add(np.float32(a) if np.isscalar(a) else np.asarray(a, np.float32),
                                np.asarray(b, np.float32), dtype=np.float32))


def fp32_mul(a, b):
    """IEEE binary32 ``a * b`` (RNE), canonical NaN."""
    with np.errstate(all="ignore"):
        return canonical(np.multiply(np.asarray(a, np.float32), np.asarray(b, np.float32),
                                     dtype=np.float32))


def bf16_to_fp32(b16):
    """fp32 values of bf16 bit patterns (exact)."""
    return f32(np.asarray(b16, dtype=np.uint32) << 16)


def bf16_bits(values):
    """bf16 bit patterns (``uint16``) of fp32 ``values``, round to nearest even, NaN -> 0x7FC0."""
    v = np.asarray(values, dtype=np.float32)
    u = v.view(np.uint32)
    # uint32 arithmetic: only NaN patterns (|u| > 0x7F800000) can wrap, and they are replaced.
    with np.errstate(over="ignore"):
        rounded = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(v), CANONICAL_NAN_BF16, rounded).astype(np.uint16)


def round_bf16(values):
    """fp32 values rounded to bf16 precision (RNE), returned as fp32."""
    return bf16_to_fp32(bf16_bits(values))


def bf16_mul(a16, b16):
    """fp32 product of two bf16 bit-pattern arrays (the ``bf16_mul`` unit)."""
    return fp32_mul(bf16_to_fp32(a16), bf16_to_fp32(b16))


def fma_bf16(acc, a16, b16):
    """``acc + a * b`` as the PE computes it: bf16 product rounded to fp32, then an fp32 add."""
    return fp32_add(acc, bf16_mul(a16, b16))


def fp32_add_bits(a_bits, b_bits):
    """The ``fp32_add`` unit on bit patterns."""
    return bits(fp32_add(f32(a_bits), f32(b_bits)))


def bf16_mul_bits(a16, b16):
    """The ``bf16_mul`` unit on bit patterns."""
    return bits(bf16_mul(a16, b16))


def chain_sum(terms, axis=0):
    """``((t0 + t1) + t2) + ...`` along ``axis``: the order of a reduction chain (mesh row or column,
    west to east / north to south, first term = first PE of the chain)."""
    terms = np.moveaxis(np.asarray(terms, dtype=np.float32), axis, 0)
    acc = canonical(terms[0])
    for t in terms[1:]:
        acc = fp32_add(acc, t)
    return acc


def node_sum(children):
    """One SwarmX node over its 1..4 children (axis 0), docs/swarmx.md:
    ``((c0 + c1) + (c2 + c3))``; absent children drop out: ``((c0 + c1) + c2)``, ``(c0 + c1)``, ``c0``."""
    c = np.asarray(children, dtype=np.float32)
    n = c.shape[0]
    if not 1 <= n <= 4:
        raise ValueError(f"a SwarmX node has 1..4 children, got {n}")
    if n == 1:
        return canonical(c[0])
    left = fp32_add(c[0], c[1])
    if n == 2:
        return left
    if n == 3:
        return fp32_add(left, c[2])
    return fp32_add(left, fp32_add(c[2], c[3]))


def tree_sum(leaves):
    """Sum ``leaves`` (axis 0, N >= 1) through the SwarmX tree: leaf i is child ``i mod 4`` of
    bottom-level node ``i div 4``, and each level above groups the nodes below it the same way."""
    level = np.asarray(leaves, dtype=np.float32)
    if level.shape[0] < 1:
        raise ValueError("tree_sum needs at least one leaf")
    if level.shape[0] == 1:
        return canonical(level[0])
    while level.shape[0] > 1:
        level = np.stack([node_sum(level[i:i + 4]) for i in range(0, level.shape[0], 4)])
    return level[0]
