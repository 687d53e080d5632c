"""The golden PE model (models/pe.py) against the pinned kernels (models/pipeline/kernels.py);
descriptors in the shared format (arch/pe_map.py)."""

import numpy as np
import pytest

from arch.pe_map import STATUS, Fault, Op, VecMode, desc_addr, descriptor_writes, encode, status_base
from models import pe
from models.numerics import bf16_bits
from models.pipeline import kernels

L, S, T, C = 4, 1024, 8, 8


def rand_bf16(rng, shape, scale=4):
    v = (rng.standard_normal(shape) * np.exp2(rng.integers(-scale, scale, shape))).astype(np.float32)
    return bf16_bits(v)


def model():
    return pe.PeModel(lanes=L, sram_words=S, num_tasks=T, num_colors=C)


def program(mdl, t, **fields):
    for addr, word in descriptor_writes(desc_addr(S, t), encode(**fields)):
        mdl.cfg_write(addr, word)


def load(mdl, base, words):
    for i, w in enumerate(np.asarray(words, dtype=np.uint32).ravel()):
        mdl.cfg_write(base + i, int(w))


def test_fmac_rows_equal_kernel_forward():
    """FMAC over K wavelets per row = kernels.forward on one PE (acc from +0.0, ascending k)."""
    rng = np.random.default_rng(1)
    M, K = 6, 9
    w16, x16 = rand_bf16(rng, (M, K)), rand_bf16(rng, (K, L))
    mdl = model()
    load(mdl, 0, x16.astype(np.uint32) << 16)
    program(mdl, 0, op=Op.FMAC, enable=1, color=1, a_base=0, a_stride=L, count=K, reps=M,
            dst_base=512)
    for m in range(M):
        for k in range(K):
            mdl.wavelet(1, (int(w16[m, k]) << 16) | int(rng.integers(1 << 16)))  # low half ignored
    z = kernels.forward(w16, x16, (1, 1))
    assert np.array_equal(mdl.mem[512:512 + M * L].reshape(M, L), z.view(np.uint32))
    assert mdl.done[0] == M and not mdl.active[0]
    assert mdl.cycles(0) == mdl.fmac_cycles == M * K


@pytest.mark.parametrize("rows,cols,shuffle", [(1, 4, False), (1, 4, True), (3, 1, True),
                                               (2, 3, True)])
def test_forward_micro_kernel_equals_pipeline_kernels(rows, cols, shuffle):
    """The forward micro-kernel on a mesh of PE models (ideal fabric, any arrival order) gives
    relu_bf16(kernels.forward(W, X)) at the edge and in the owners' SRAM, bit for bit."""
    rng = np.random.default_rng(rows * 10 + cols + shuffle)
    M, K = 10, 11
    B = rows * L
    w16, x16 = rand_bf16(rng, (M, K)), rand_bf16(rng, (K, B))
    w16[0, 0], x16[0, 0] = 0x7F80, 0x0000          # inf * 0 -> NaN in row 0
    plan = pe.forward_kernel(lanes=L, sram_words=S, rows=rows, cols=cols, m=M, k=K)
    models, edges = pe.run_forward_kernel(plan, lanes=L, sram_words=S, num_tasks=T, num_colors=C,
                                          w16=w16, x16=x16, rng=rng if shuffle else None)
    a16 = kernels.relu_bf16(kernels.forward(w16, x16, (rows, cols)))
    for p in range(rows):
        got = np.array(edges[(p, plan["edge_out"])], dtype=np.uint32).reshape(M, L)
        assert np.array_equal(got, a16[:, p * L:(p + 1) * L].astype(np.uint32) << 16)
        for q in range(cols):
            info, mdl = plan["pes"][(p, q)], models[(p, q)]
            own = info["own"]
            kept = mdl.mem[info["xn_base"]:info["xn_base"] + len(own) * L].reshape(len(own), L)
            assert np.array_equal(kept >> 16, a16[own.start:own.stop, p * L:(p + 1) * L])
            assert mdl.fault is None
            assert not any(mdl.active)


def test_dot_equals_backward_weight_partials():
    rng = np.random.default_rng(3)
    M, K = 5, 7
    dz16, x16 = rand_bf16(rng, (M, L)), rand_bf16(rng, (K, L))
    mdl = model()
    load(mdl, 0, x16.astype(np.uint32) << 16)
    program(mdl, 0, op=Op.STORE, enable=1, color=2, reps=M, lo=0, hi=M, dst_base=256)
    program(mdl, 1, op=Op.VEC, vmode=VecMode.DOT, enable=1, store=1, send=1, color=3,
            dep_b_en=1, dep_b=0, a_base=0, a_stride=L, b_base=256, b_stride=L, count=K, reps=M,
            lo=0, hi=M, dst_base=512)
    for m in range(M):
        for b in range(L):
            mdl.wavelet(2, int(dz16[m, b]) << 16)
    dw = kernels.backward_weight(dz16, x16, (1, 1))
    assert np.array_equal(mdl.mem[512:512 + M * K].reshape(M, K), dw.view(np.uint32))
    assert [d for _, d in mdl.out] == list(dw.view(np.uint32).ravel())
    assert mdl.vec_cycles == mdl.cycles(1) == M * K * (L + 2)


def test_mask_round_equals_backward_data():
    """MASK + round on the fp32 dX accumulators with the stored activations = backward_data."""
    rng = np.random.default_rng(4)
    M, K = 6, 5
    w16, dz16 = rand_bf16(rng, (M, K)), rand_bf16(rng, (M, L))
    x16 = rand_bf16(rng, (K, L))
    x16[rng.random((K, L)) < 0.3] = 0
    acc = kernels.backward_data_acc(w16, dz16)
    mdl = model()
    load(mdl, 0, x16.astype(np.uint32) << 16)
    load(mdl, 128, acc.view(np.uint32))
    program(mdl, 0, op=Op.VEC, vmode=VecMode.MASK, enable=1, round=1, store=1, a_base=0,
            a_stride=L, b_base=128, b_stride=L, count=1, reps=K, lo=0, hi=K, dst_base=256)
    want = kernels.backward_data(w16, dz16, x16).astype(np.uint32) << 16
    assert np.array_equal(mdl.mem[256:256 + K * L].reshape(K, L), want)


def test_relu_and_round_follow_the_kernel():
    z = np.array([1.5, -0.0, 0.0, -3.0, np.inf, -np.inf, 3.0000002, 1e-40, -1e-40, np.nan,
                  255.9, -7e-39], dtype=np.float32)
    mdl = model()
    load(mdl, 0, z.view(np.uint32))
    program(mdl, 0, op=Op.VEC, vmode=VecMode.PASS, enable=1, relu=1, round=1, store=1,
            a_base=0, a_stride=L, count=1, reps=3, lo=0, hi=3, dst_base=64)
    assert np.array_equal(mdl.mem[64:76] >> 16, kernels.relu_bf16(z))


@pytest.mark.parametrize("fields,code", [
    (dict(op=Op.FMAC, color=1, count=0, reps=1), "COUNT"),
    (dict(op=Op.VEC, count=2, reps=1, send=1), "COUNT"),
    (dict(op=Op.STORE, color=C, reps=1), "COLOR"),
    (dict(op=Op.VEC, count=1, reps=1, store=1, color=31), None),   # no send: color unused
    (dict(op=Op.FMAC, color=1, count=1, reps=1, chain=1, next=T), "INDEX"),
    (dict(op=Op.VEC, count=1, reps=1), "NO_ACTION"),
    (dict(op=Op.FMAC, color=1, count=3, reps=1, a_base=S - L - 2, a_stride=1), None),
    (dict(op=Op.FMAC, color=1, count=3, reps=1, a_base=S - L - 1, a_stride=1), "RANGE"),
    (dict(op=Op.STORE, color=1, reps=9, lo=0, hi=9, dst_base=S - 8 * L), "RANGE"),
])
def test_descriptor_checks(fields, code):
    mdl = model()
    program(mdl, 2, enable=1, **fields)
    if code is None:
        assert mdl.fault is None and (mdl.active[2] or mdl.done[2] == fields["reps"])
    else:
        assert mdl.fault == (Fault[code], 2) and not mdl.active[2]
        mdl.wavelet(5, 0)                                      # a later fault does not replace it
        assert mdl.fault == (Fault[code], 2)
        mdl.cfg_write(status_base(S, T) + STATUS["FAULT"], 0)
        mdl.wavelet(5, 0)
        assert mdl.fault == (Fault.UNBOUND, 5)


def backward_data_program(mdl, M, K):
    """One PE's backward-data: dZ[m, B_p] arrives (color 1) and is stored; W streams transposed
    (column k of W, m ascending; color 0) so FMAC accumulates dX[k] from +0.0 in ascending m;
    each finished dX row is masked with the stored activation X[k] and rounded to bf16."""
    dz, acc, out = 256, 512, 768
    program(mdl, 2, op=Op.VEC, vmode=VecMode.MASK, enable=1, round=1, store=1, dep_b_en=1,
            dep_b=1, a_base=0, a_stride=L, b_base=acc, b_stride=L, count=1, reps=K, lo=0, hi=K,
            dst_base=out)
    program(mdl, 1, op=Op.FMAC, enable=1, color=0, a_base=dz, a_stride=L, count=M, reps=K,
            dst_base=acc)
    program(mdl, 0, op=Op.STORE, enable=1, color=1, reps=M, lo=0, hi=M, dst_base=dz)
    return out


def test_backward_data_with_transposed_weights():
    rng = np.random.default_rng(6)
    M, K = 7, 5
    w16, dz16, x16 = rand_bf16(rng, (M, K)), rand_bf16(rng, (M, L)), rand_bf16(rng, (K, L))
    x16[rng.random((K, L)) < 0.3] = 0
    mdl = model()
    load(mdl, 0, x16.astype(np.uint32) << 16)
    out = backward_data_program(mdl, M, K)
    for v in dz16.ravel():
        mdl.wavelet(1, int(v) << 16)
    for v in w16.T.ravel():
        mdl.wavelet(0, int(v) << 16)
    want = kernels.backward_data(w16, dz16, x16).astype(np.uint32) << 16
    assert np.array_equal(mdl.mem[out:out + K * L].reshape(K, L), want)
