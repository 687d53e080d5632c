"""Golden numerics (models/numerics.py) checked against an independent oracle: exact rational
arithmetic rounded to binary32 by hand (RNE, subnormals, signed zeros, canonical NaN), plus IEEE
properties (commutativity, sign symmetry, identities), bf16 rounding against ml_dtypes, and the
documented summation orders."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from models import numerics as nx

NAN = 0x7FC00000

# Interesting fp32 encodings (both signs are added by the strategy).
_F32_EDGES = [0x00000000, 0x00000001, 0x00000002, 0x007FFFFF, 0x00800000, 0x00800001,
              0x3F800000, 0x3F800001, 0x3F7FFFFF, 0x33800000, 0x33000000, 0x4B800000,
              0x7F7FFFFF, 0x7F000000, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF]
_BF16_EDGES = [0x0000, 0x0001, 0x007F, 0x0080, 0x3F80, 0x3F81, 0x3F7F, 0x3700, 0x3780,
               0x5F80, 0x7F7F, 0x7F80, 0x7FC0, 0x7F81]

f32_bits = st.one_of(
    st.integers(0, 0xFFFFFFFF),
    st.builds(lambda v, s: v | (s << 31), st.sampled_from(_F32_EDGES), st.integers(0, 1)),
    # close exponents / small magnitudes: subnormal and cancellation territory
    st.builds(lambda e, f, s: (s << 31) | (e << 23) | f, st.integers(0, 3), st.integers(0, 0x7FFFFF),
              st.integers(0, 1)),
)
bf16_bits = st.one_of(
    st.integers(0, 0xFFFF),
    st.builds(lambda v, s: v | (s << 15), st.sampled_from(_BF16_EDGES), st.integers(0, 1)),
)


# ---------------------------------------------------------------------------------------------
# independent oracle (pure Python integers and fractions, no numpy float arithmetic)

def _decode(bits, width):
    """('nan' | 'inf' | 'num', sign, Fraction magnitude) of an fp32 (width 32) / bf16 (16) pattern."""
    frac_bits = 23 if width == 32 else 7
    sign = bits >> (width - 1)
    exp = (bits >> frac_bits) & 0xFF
    frac = bits & ((1 << frac_bits) - 1)
    if exp == 0xFF:
        return ("nan" if frac else "inf"), sign, None
    if exp == 0:
        return "num", sign, Fraction(frac, 1 << (frac_bits + 126))
    return "num", sign, Fraction((1 << frac_bits) | frac) * Fraction(2) ** (exp - 127 - frac_bits)


def _round_f32(q):
    """binary32 bits of the exact non-zero rational ``q``: round to nearest, ties to even."""
    sign = int(q < 0)
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, -126)                                   # below: the fixed subnormal quantum
    scaled = q / Fraction(2) ** (e - 23)
    n = scaled.numerator // scaled.denominator
    rest = scaled - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2):
        n += 1
    if n == 1 << 24:
        n, e = 1 << 23, e + 1
    if e > 127:
        return (sign << 31) | 0x7F800000
    if n < (1 << 23):                                  # subnormal (or zero after underflow)
        return (sign << 31) | n
    return (sign << 31) | ((e + 127) << 23) | (n - (1 << 23))


def oracle_add(a, b):
    ka, sa, qa = _decode(a, 32)
    kb, sb, qb = _decode(b, 32)
    if "nan" in (ka, kb) or (ka == kb == "inf" and sa != sb):
        return NAN
    if ka == "inf" or kb == "inf":
        return ((sa if ka == "inf" else sb) << 31) | 0x7F800000
    total = (-qa if sa else qa) + (-qb if sb else qb)
    if total == 0:
        return (sa & sb) << 31                         # RNE: +0 unless both are -0
    return _round_f32(total)


def oracle_bf16_mul(a, b):
    ka, sa, qa = _decode(a, 16)
    kb, sb, qb = _decode(b, 16)
    sign = sa ^ sb
    if "nan" in (ka, kb):
        return NAN
    if ka == "inf" or kb == "inf":
        if (ka == "num" and qa == 0) or (kb == "num" and qb == 0):
            return NAN
        return (sign << 31) | 0x7F800000
    product = qa * qb
    if product == 0:
        return sign << 31
    return _round_f32(-product if sign else product)


def _add(a, b):
    return int(nx.fp32_add_bits(np.array([a], np.uint32), np.array([b], np.uint32))[0])


def _mul(a, b):
    return int(nx.bf16_mul_bits(np.array([a], np.uint16), np.array([b], np.uint16))[0])


# ---------------------------------------------------------------------------------------------
# the golden model against the oracle

@settings(max_examples=1500, deadline=None)
@given(f32_bits, f32_bits)
@example(0x3F800000, 0xBF800000)     # x + (-x) = +0
@example(0x80000000, 0x80000000)     # -0 + -0 = -0
@example(0x7F800000, 0xFF800000)     # inf - inf = NaN
@example(0x3F800000, 0x33800000)     # tie to even
@example(0x00000001, 0x80000002)     # subnormal result
def test_fp32_add_matches_exact_rounding(a, b):
    assert _add(a, b) == oracle_add(a, b), f"{a:#010x} + {b:#010x}"


@settings(max_examples=1500, deadline=None)
@given(bf16_bits, bf16_bits)
@example(0x0001, 0x3700)             # 2**-150: tie to even -> +0
@example(0x0003, 0x3700)             # 1.5 * 2**-149: tie to even -> 2 * 2**-149
@example(0x5F80, 0x5F80)             # 2**128 overflows
@example(0x7F80, 0x8000)             # inf * -0 = NaN
def test_bf16_mul_matches_exact_rounding(a, b):
    assert _mul(a, b) == oracle_bf16_mul(a, b), f"{a:#06x} * {b:#06x}"


def test_vectorized_equals_elementwise():
    rng = np.random.default_rng(7)
    a = rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)
    got = nx.fp32_add_bits(a, b)
    assert got.dtype == np.uint32 and got.shape == a.shape
    expected = [oracle_add(int(x), int(y)) for x, y in zip(a[:500], b[:500], strict=True)]
    assert [int(g) for g in got[:500]] == expected
    a16, b16 = (a >> 16).astype(np.uint16), (b & 0xFFFF).astype(np.uint16)
    got = nx.bf16_mul_bits(a16, b16)
    expected = [oracle_bf16_mul(int(x), int(y)) for x, y in zip(a16[:500], b16[:500], strict=True)]
    assert [int(g) for g in got[:500]] == expected


# ---------------------------------------------------------------------------------------------
# IEEE properties

@settings(max_examples=1000, deadline=None)
@given(f32_bits, f32_bits)
def test_fp32_add_commutes(a, b):
    assert _add(a, b) == _add(b, a)


@settings(max_examples=1000, deadline=None)
@given(bf16_bits, bf16_bits)
def test_bf16_mul_commutes(a, b):
    assert _mul(a, b) == _mul(b, a)


@settings(max_examples=1000, deadline=None)
@given(f32_bits, f32_bits)
def test_fp32_add_sign_symmetry(a, b):
    """RNE is symmetric: (-a) + (-b) = -(a + b), except that an exact zero sum of opposite signs
    is +0 both ways and NaN stays canonical."""
    y, ny = _add(a, b), _add(a ^ 0x80000000, b ^ 0x80000000)
    if y == NAN:
        assert ny == NAN
    elif y & 0x7FFFFFFF == 0 and (a ^ b) >> 31:
        assert y == ny == 0
    else:
        assert ny == y ^ 0x80000000


@settings(max_examples=1000, deadline=None)
@given(f32_bits)
def test_fp32_add_identities(a):
    is_nan = (a & 0x7F800000) == 0x7F800000 and (a & 0x7FFFFF)
    if is_nan:
        assert _add(a, 0) == _add(0, a) == NAN
    else:
        assert _add(a, 0x80000000) == a                  # x + (-0) = x, bit for bit
        assert _add(a, 0) == (0 if a == 0x80000000 else a)  # x + (+0) = x, but -0 + +0 = +0


@settings(max_examples=1000, deadline=None)
@given(bf16_bits)
def test_bf16_mul_by_one_is_exact_widening(a):
    is_nan = (a & 0x7F80) == 0x7F80 and (a & 0x7F)
    assert _mul(a, 0x3F80) == (NAN if is_nan else a << 16)


@settings(max_examples=1000, deadline=None)
@given(f32_bits)
def test_nan_results_are_canonical(a):
    """Any NaN operand (any sign, payload, quiet or signalling) gives exactly 0x7FC00000."""
    nan = 0x7F800000 | (a & 0x807FFFFF) | (1 if a & 0x7FFFFF == 0 else 0)
    assert _add(nan, a) == _add(a, nan) == NAN
    assert int(nx.bits(nx.canonical(nx.f32(np.array([nan], np.uint32))))[0]) == NAN
    hi = a >> 16
    nan16 = 0x7F80 | (hi & 0x807F) | (1 if hi & 0x7F == 0 else 0)
    assert _mul(nan16, hi) == _mul(hi, nan16) == NAN


# ---------------------------------------------------------------------------------------------
# fp32 -> bf16 rounding against ml_dtypes

@settings(max_examples=1500, deadline=None)
@given(f32_bits)
def test_bf16_bits_matches_ml_dtypes(a):
    value = nx.f32(np.array([a], np.uint32))
    ours = int(nx.bf16_bits(value)[0])
    with np.errstate(invalid="ignore"):
        ref = int(value.astype(ml_dtypes.bfloat16).view(np.uint16)[0])
    if np.isnan(value[0]):
        assert ours == 0x7FC0                            # canonical bf16 NaN
        assert (ref & 0x7F80) == 0x7F80 and (ref & 0x7F)  # ml_dtypes: some NaN
    else:
        assert ours == ref, f"{a:#010x}: ours {ours:#06x}, ml_dtypes {ref:#06x}"


def test_bf16_bits_exhaustive_upper_halves_with_ties():
    """Every bf16 pattern with the low half at 0x7FFF, 0x8000 (tie) and 0x8001 (all 3 x 65536)."""
    hi = np.arange(1 << 16, dtype=np.uint32) << 16
    for low in (0x7FFF, 0x8000, 0x8001):
        value = nx.f32(hi | low)
        with np.errstate(invalid="ignore"):
            ref = value.astype(ml_dtypes.bfloat16).view(np.uint16)
        ours = nx.bf16_bits(value)
        nan = np.isnan(value)
        assert np.array_equal(ours[~nan], ref[~nan])
        assert np.all(ours[nan] == 0x7FC0)


def test_round_bf16_roundtrip():
    b16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    values = nx.bf16_to_fp32(b16)
    finite = ~np.isnan(values)
    assert np.array_equal(nx.bf16_bits(values)[finite], b16[finite])
    assert np.array_equal(nx.bits(nx.round_bf16(values))[finite], nx.bits(values)[finite])


# ---------------------------------------------------------------------------------------------
# summation orders (the documented ones; fp32 addition is not associative, so order shows)

def test_chain_sum_order():
    t = np.array([1e8, -1e8, 1.0, 1e-8], dtype=np.float32)
    expected = nx.fp32_add(nx.fp32_add(nx.fp32_add(t[0], t[1]), t[2]), t[3])
    assert nx.bits(nx.chain_sum(t)) == nx.bits(expected)
    assert nx.chain_sum(np.array([1.0, 1e8, -1e8], np.float32)) == 0.0    # (1 + 1e8) - 1e8
    assert nx.chain_sum(np.array([1e8, -1e8, 1.0], np.float32)) == 1.0    # (1e8 - 1e8) + 1


def test_chain_sum_along_axis():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    rows = nx.chain_sum(x, axis=1)
    for i in range(5):
        acc = x[i, 0]
        for v in x[i, 1:]:
            acc = nx.fp32_add(acc, v)
        assert nx.bits(rows[i]) == nx.bits(acc)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_node_sum_order(n):
    c = np.array([1e8, 1.0, -1e8, 1.0], dtype=np.float32)[:n]
    add = nx.fp32_add
    expected = {1: lambda: c[0],
                2: lambda: add(c[0], c[1]),
                3: lambda: add(add(c[0], c[1]), c[2]),
                4: lambda: add(add(c[0], c[1]), add(c[2], c[3]))}[n]()
    assert nx.bits(nx.node_sum(c)) == nx.bits(np.float32(expected))
    if n == 4:    # the pairing matters: (1e8 + 1) + (-1e8 + 1) = 0, but a chain gives 1
        assert nx.node_sum(c) == 0.0 and nx.chain_sum(c) == 1.0


def test_node_sum_rejects_bad_fanin():
    with pytest.raises(ValueError, match="1..4 children"):
        nx.node_sum(np.zeros(5, np.float32))


def test_tree_sum_is_nodes_of_nodes():
    rng = np.random.default_rng(5)
    leaves = (rng.standard_normal((16, 3)) * 10.0 ** rng.integers(-6, 7, (16, 1))).astype(np.float32)
    level1 = [nx.node_sum(leaves[i:i + 4]) for i in range(0, 16, 4)]
    assert np.array_equal(nx.bits(nx.tree_sum(leaves)), nx.bits(nx.node_sum(np.stack(level1))))
    with pytest.raises(ValueError):
        nx.tree_sum(np.zeros((0, 3), np.float32))
