"""The pipeline kernels against a straightforward per-PE scalar implementation written here, with
the orders of docs/architecture.md#layer-mapping as documented in models/pipeline/kernels.py
(independent of numerics.py: bf16 through ml_dtypes, fp32 through numpy float32 scalars)."""

import ml_dtypes
import numpy as np
import pytest

from models.pipeline import kernels
from models.pipeline.mapping import LayerMapping, split

BF16 = ml_dtypes.bfloat16
F = np.float32


def bf(x16):
    return np.asarray(x16, np.uint16).view(BF16).astype(np.float32)


def to16(values):
    return np.asarray(values, np.float32).astype(BF16).view(np.uint16)


def owners(n, parts):
    """Ascending contiguous slices, the first n % parts one longer (written independently)."""
    sizes = [n // parts + (i < n % parts) for i in range(parts)]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [range(bounds[i], bounds[i + 1]) for i in range(parts)]


def ref_forward(w16, x16, P, Q):
    w, x = bf(w16), bf(x16)
    M, K = w.shape
    B = x.shape[1]
    z = np.zeros((M, B), np.float32)
    ks, bs = owners(K, Q), owners(B, P)
    for p in range(P):
        for m in range(M):
            for b in bs[p]:
                psums = []
                for q in range(Q):
                    acc = F(0.0)
                    for k in ks[q]:
                        acc = F(acc + F(w[m, k] * x[k, b]))
                    psums.append(acc)
                s = psums[0]                      # west PE first, add-and-forward eastward
                for t in psums[1:]:
                    s = F(s + t)
                z[m, b] = s
    return z


def ref_backward_data(w16, dz16, x16):
    w, dz = bf(w16), bf(dz16)
    M, K = w.shape
    B = dz.shape[1]
    out = np.zeros((K, B), np.uint16)
    for k in range(K):
        for b in range(B):
            acc = F(0.0)
            for m in range(M):
                acc = F(acc + F(w[m, k] * dz[m, b]))
            xv = x16[k, b]
            out[k, b] = to16(acc) if (xv != 0 and xv < 0x8000) else 0
    return out


def ref_backward_weight(dz16, x16, P, Q):
    dz, x = bf(dz16), bf(x16)
    M, B = dz.shape
    K = x.shape[0]
    dw = np.zeros((M, K), np.float32)
    bs = owners(B, P)
    for m in range(M):
        for k in range(K):
            partials = []
            for p in range(P):
                acc = F(0.0)
                for b in bs[p]:
                    acc = F(acc + F(dz[m, b] * x[k, b]))
                partials.append(acc)
            s = partials[P - 1]                   # south PE first, toward the north edge
            for p in range(P - 2, -1, -1):
                s = F(s + partials[p])
            dw[m, k] = s
    return dw


def wide_bf16(rng, shape):
    """bf16 values over a wide exponent range with both signs and some zeros (rounding matters)."""
    v = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 12, shape))
    v[rng.random(shape) < 0.05] = 0.0
    return to16(v)


SHAPES = [  # (P, Q, M, K, B): even, uneven, more PEs than features / batch, one PE
    (1, 1, 3, 5, 4), (2, 2, 4, 8, 6), (3, 4, 5, 11, 7), (4, 3, 6, 2, 3), (2, 5, 3, 13, 1),
    (5, 2, 7, 9, 11),
]


@pytest.mark.parametrize("P,Q,M,K,B", SHAPES)
def test_forward_bit_exact(P, Q, M, K, B):
    rng = np.random.default_rng(P * 100 + Q * 10 + K)
    w, x = wide_bf16(rng, (M, K)), wide_bf16(rng, (K, B))
    z = kernels.forward(w, x, (P, Q))
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z.view(np.uint32), ref_forward(w, x, P, Q).view(np.uint32))


@pytest.mark.parametrize("P,Q,M,K,B", SHAPES)
def test_backward_data_bit_exact(P, Q, M, K, B):
    rng = np.random.default_rng(7 + K * B)
    w, dz = wide_bf16(rng, (M, K)), wide_bf16(rng, (M, B))
    x = kernels.relu_bf16(bf(wide_bf16(rng, (K, B))))   # a ReLU output: zeros and positives
    np.testing.assert_array_equal(kernels.backward_data(w, dz, x), ref_backward_data(w, dz, x))


@pytest.mark.parametrize("P,Q,M,K,B", SHAPES)
def test_backward_weight_bit_exact(P, Q, M, K, B):
    rng = np.random.default_rng(11 + M * B)
    dz, x = wide_bf16(rng, (M, B)), wide_bf16(rng, (K, B))
    dw = kernels.backward_weight(dz, x, (P, Q))
    np.testing.assert_array_equal(dw.view(np.uint32), ref_backward_weight(dz, x, P, Q).view(np.uint32))


def test_summation_order_is_visible():
    """2^30 + 1 - 2^30 + 1 in fp32: the chain split changes the bits, as the orders say."""
    w = to16([[2.0 ** 30, 1.0, -(2.0 ** 30), 1.0]])
    x = to16(np.ones((4, 1)))
    assert kernels.forward(w, x, (1, 1))[0, 0] == 1.0   # ((2^30+1)-2^30)+1 = 0+1
    assert kernels.forward(w, x, (1, 2))[0, 0] == 0.0   # (2^30+1) + (-2^30+1) = 2^30 - 2^30
    # backward-weight: the same terms spread over the batch, chained south to north
    dz = to16([[2.0 ** 30, 1.0, -(2.0 ** 30), 1.0]])
    x1 = to16(np.ones((1, 4)))
    assert kernels.backward_weight(dz, x1, (4, 1))[0, 0] == 0.0  # ((1 + -2^30) + 1) + 2^30
    assert kernels.backward_weight(dz, x1, (1, 1))[0, 0] == 1.0


def test_values_depend_only_on_documented_mesh_axis():
    rng = np.random.default_rng(3)
    w, x, dz = wide_bf16(rng, (9, 17)), wide_bf16(rng, (17, 10)), wide_bf16(rng, (9, 10))
    z = kernels.forward(w, x, (1, 3))
    for rows in (2, 5, 10, 13):
        np.testing.assert_array_equal(kernels.forward(w, x, (rows, 3)).view(np.uint32), z.view(np.uint32))
    dw = kernels.backward_weight(dz, x, (4, 1))
    for cols in (2, 7, 17, 20):
        np.testing.assert_array_equal(kernels.backward_weight(dz, x, (4, cols)).view(np.uint32),
                                      dw.view(np.uint32))


def test_relu_on_sign_bit_and_mask():
    z = np.array([1.5, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45], np.float32)
    a = kernels.relu_bf16(z)
    assert a.tolist() == [0x3FC0, 0, 0, 0, 0x7F80, 0, 0x7FC0, 0]   # 1e-45 rounds to +0 in bf16
    assert kernels.relu_pass(a).tolist() == [True, False, False, False, True, False, True, False]


def test_softmax_xent_against_float64():
    rng = np.random.default_rng(5)
    z = (rng.standard_normal((10, 6)) * 3).astype(np.float32)
    labels = rng.integers(0, 10, 6)
    loss, dz16 = kernels.softmax_xent(z, labels, 24)
    z64 = z.astype(np.float64)
    s = np.exp(z64 - z64.max(0)) / np.exp(z64 - z64.max(0)).sum(0)
    expect = (s - np.eye(10)[:, labels]) / 24
    # dz16 is one bf16 rounding (plus a few fp32 ulps) away from the exact value
    np.testing.assert_allclose(bf(dz16), expect, rtol=2 ** -8, atol=1e-9)
    assert loss == pytest.approx(-np.mean(np.log(s[labels, np.arange(6)])), rel=1e-5)
    # columns of softmax - onehot sum to ~0: the gradient pushes the label up, the rest down
    assert np.all(bf(dz16)[labels, np.arange(6)] < 0)


def test_partition():
    assert [(s.start, s.stop) for s in split(10, 4)] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert [(s.start, s.stop) for s in split(2, 3)] == [(0, 1), (1, 2), (2, 2)]
    mp = LayerMapping(rows=3, cols=4, m=7, k=10, batch=8)
    assert (mp.k_per_col, mp.b_per_row) == (3, 3)
    assert sum(s.stop - s.start for s in mp.m_slices) == 7


@pytest.mark.parametrize("call,match", [
    (lambda: kernels.forward(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.uint16), (1, 1)), "uint16"),
    (lambda: kernels.forward(np.zeros((2, 3), np.uint16), np.zeros((4, 2), np.uint16), (1, 1)), "rows"),
    (lambda: kernels.forward(np.zeros((2, 3), np.uint16), np.zeros((3, 2), np.uint16), (0, 1)), "rows"),
    (lambda: kernels.backward_weight(np.zeros((2, 3), np.uint16), np.zeros((4, 2), np.uint16), (1, 1)), "batch"),
    (lambda: kernels.backward_data(np.zeros((2, 3), np.uint16), np.zeros((2, 2), np.uint16),
                                   np.zeros((2, 2), np.uint16)), "shape"),
    (lambda: kernels.softmax_xent(np.zeros((3, 2), np.float32), np.array([0, 3]), 2), "labels"),
    (lambda: kernels.softmax_xent(np.zeros((3, 2), np.float32), np.array([0, 1]), 1), "global_batch"),
    (lambda: split(0, 2), "items"),
    (lambda: LayerMapping(rows=0, cols=1, m=1, k=1, batch=1), "rows"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_partials_are_what_the_chains_add():
    """Per-PE partials (for RTL checks) against the scalar reference's per-PE accumulators."""
    rng = np.random.default_rng(9)
    P, Q, M, K, B = 3, 4, 5, 10, 7
    w, x, dz = wide_bf16(rng, (M, K)), wide_bf16(rng, (K, B)), wide_bf16(rng, (M, B))
    fp = kernels.forward_partials(w, x, (P, Q))
    wp = kernels.weight_partials(dz, x, (P, Q))
    assert fp.shape == (Q, M, B) and wp.shape == (P, M, K)
    for q, ks in enumerate(owners(K, Q)):
        cols = list(ks)
        np.testing.assert_array_equal(fp[q].view(np.uint32), ref_forward(w[:, cols], x[cols], 1, 1).view(np.uint32))
    for p, bs in enumerate(owners(B, P)):
        b = list(bs)
        np.testing.assert_array_equal(wp[p].view(np.uint32),
                                      ref_backward_weight(dz[:, b], x[:, b], 1, 1).view(np.uint32))


def test_specials_give_canonical_nan_and_infinities():
    inf, ninf = 0x7F80, 0xFF80
    w = np.array([[inf, ninf], [inf, 0x3F80]], np.uint16)       # inf - inf; inf + 1
    x = np.full((2, 1), 0x3F80, np.uint16)
    z = kernels.forward(w, x, (1, 2))
    assert z.view(np.uint32)[:, 0].tolist() == [0x7FC00000, 0x7F800000]
    w0 = np.array([[inf, 0x3F80]], np.uint16)
    x0 = np.array([[0x0000], [0x3F80]], np.uint16)               # inf * 0 = NaN
    assert kernels.forward(w0, x0, (1, 1)).view(np.uint32)[0, 0] == 0x7FC00000
