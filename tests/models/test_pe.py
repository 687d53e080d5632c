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


@pytest.mark.parametrize("rows,cols,shuffle,transposed", [
    (1, 4, False, False), (1, 4, True, True), (3, 1, True, True), (2, 3, True, False), (2, 3, True, True)])
def test_forward_micro_kernel_equals_pipeline_kernels(rows, cols, shuffle, transposed):
    """The forward micro-kernel on a mesh of PE models (ideal fabric, any arrival order) gives
    relu_bf16(kernels.forward(W, X)) at the edge and in the owners' SRAM, bit for bit, and with
    ``keep_t_base`` also transposed (``A^T[B_p, own]``) in the owners' SRAM, nothing more at the edge;
    with ``x_t_base`` every PE also holds its ``X^T`` (where ``|K_q| <= M``)."""
    rng = np.random.default_rng(rows * 10 + cols + shuffle)
    M, K = 10, 11
    B = rows * L
    w16, x16 = rand_bf16(rng, (M, K)), rand_bf16(rng, (K, B))
    w16[0, 0], x16[0, 0] = 0x7F80, 0x0000          # inf * 0 -> NaN in row 0
    xt, xxt = (S - 64, S - 128) if transposed else (None, None)
    if -(-K // cols) > M:           # X is transposed under the weight stream: |K_q| <= M
        xxt = None
    plan = pe.forward_kernel(lanes=L, sram_words=S, rows=rows, cols=cols, m=M, k=K, keep_t_base=xt,
                             x_t_base=xxt)
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
            if transposed:
                kept_t = mdl.mem[xt:xt + len(own) * L].reshape(L, len(own))
                assert np.array_equal(kept_t >> 16, a16[own.start:own.stop, p * L:(p + 1) * L].T)
            if xxt is not None:
                kq = info["k"]
                x_t = mdl.mem[xxt:xxt + len(kq) * L].reshape(L, len(kq))
                assert np.array_equal(x_t >> 16, x16[kq.start:kq.stop, p * L:(p + 1) * L].T)
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
    assert mdl.cycles(1) == M * K * (L + 3)         # DOT words are never overlapped
    assert mdl.vec_cycles == M * K * L              # VEC_CYCLES: the element cycles


def test_vector_unit_cycle_formulas():
    """The vector unit's figures (hdl/pe/vector_unit.py, docs/pe.md#timing): unpipelined the
    constants of the combinational unit; pipelined (mul_stages, add_stages) the element
    pipeline: ``A + 2`` cycles to a word's output (a DOT word ``M + A + 3``), DOT elements
    ``A + 1`` apart, the pick one cycle behind the counters; the fetch stays 3 cycles.
    ``PeModel.cycles`` follows them."""
    assert (pe.VEC_FETCH_CYCLES, pe.DEP_TO_TX_CYCLES, pe.dep_to_tx_cycles()) == (3, 6, 6)
    assert pe.vec_out_cycles() == pe.vec_out_cycles(dot=True) == 0
    assert pe.unit_cycles(L) == pe.dot_word_cycles(L) == L + 3 and pe.vec_done_to_tx_cycles() == 5
    assert pe.vec_pick_delay() == 0
    for ms, ads in ((2, 3), (0, 1), (4, 0), (1, 4)):
        assert pe.vec_out_cycles(ms, ads) == ads + 2
        assert pe.vec_out_cycles(ms, ads, dot=True) == ms + ads + 3
        assert pe.unit_cycles(L, ms, ads) == L + 3 + ads + 2
        assert pe.vec_pick_delay(ms, ads) == 1 and pe.vec_done_to_tx_cycles(ms, ads) == ads + 8
        assert pe.dot_word_cycles(L, ms, ads) == (L - 1) * (ads + 1) + 4
        mdl = pe.PeModel(lanes=L, sram_words=S, num_tasks=T, num_colors=C, mul_stages=ms,
                         add_stages=ads)
        program(mdl, 0, op=Op.VEC, vmode=VecMode.DOT, send=1, color=3, count=5, reps=2)
        program(mdl, 1, op=Op.VEC, vmode=VecMode.ADD, send=1, color=3, count=1, reps=6)
        assert mdl.cycles(0) == 2 * 5 * pe.dot_word_cycles(L, ms, ads) + ms + ads + 3
        assert mdl.cycles(1) == 3 + 6 * L + ads + 2


def test_store_queue_cycles():
    """The store engine's stage 1 (models.pe.StoreQueue), hand-worked: one word per cycle on
    rx2, words to banks 0, 1, 2, 3 of vector 0 (the last ends the unit), then 4, 5."""
    q = pe.StoreQueue()
    row = {0, 1, 2, 3}          # a row write into banks 0..3
    # cycle 0: word 0 in; nothing to write
    assert q.ready(set()) and q.cycle(set(), (0, 0, False)) == (set(), None)
    # cycle 1: word 0's bank is taken: it waits, word 1 comes in behind it (rx2 still ready)
    assert q.ready(row) and q.cycle(row, (0, 1, False)) == (set(), None) and q.waits == 1
    # cycle 2: both held and the head's bank is taken again: rx2 is not ready
    assert not q.ready(row) and q.pending(row)
    assert q.cycle(row) == (set(), None)
    with pytest.raises(ValueError, match="not ready"):
        q.cycle(row, (0, 2, False))
    # cycle 3: words 0 and 1 written together, word 2 in
    assert q.ready(set()) and q.cycle(set(), (0, 2, False)) == ({0, 1}, None)
    # cycle 4: word 2 written, word 3 (the unit's last) in; cycle 5: written, the unit counts
    assert q.cycle(set(), (0, 3, True)) == ({2}, None)
    assert q.cycle(set(), (0, None, False)) == ({3}, 0)
    # a word outside [lo, hi) writes nothing and leaves at once; two words of one bank go apart
    assert q.cycle({2}, (0, 5, False)) == (set(), None)
    assert q.cycle({5}, (0, 5, False)) == (set(), None)          # bank 5 taken: both wait
    assert q.cycle(set()) == ({5}, None) and not q.pending(set())  # one bank: one at a time
    assert q.cycle(set()) == ({5}, None) and q.q == []
    # two unit ends go one per cycle (one count per cycle)
    q.cycle({1}, (1, 1, True))
    q.cycle({1}, (2, 2, True))
    assert q.cycle(set()) == ({1}, 1) and q.cycle(set()) == ({2}, 2)
    assert q.waits == 4


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
    # SRAM ranges are checked at run time only.
    (dict(op=Op.FMAC, color=1, count=3, reps=1, a_base=S - L - 1, a_stride=1), None),
    (dict(op=Op.STORE, color=1, reps=9, lo=0, hi=9, dst_base=S - 8 * L), None),
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


# ---- run-time RANGE faults: the access that runs past SRAM (S = 1024 words) faults ----

ONE, TWO, THREE = 0x3F800000, 0x40000000, 0x40400000      # fp32 (= bf16) 1.0, 2.0, 3.0


def assert_range_stop(mdl, t):
    assert mdl.fault == (Fault.RANGE, t) and not mdl.active[t]


def test_fmac_operand_past_sram_faults_and_drops_the_row():
    # Rows at a_base + i: S-5, S-4 fit (end S-1, S); wavelet 2's row S-3 ends at S+1.
    mdl = model()
    load(mdl, S - L - 1, [ONE] * (L + 1))
    program(mdl, 2, op=Op.FMAC, enable=1, color=1, a_base=S - L - 1, a_stride=1, count=3, reps=2,
            dst_base=0)
    mdl.wavelet(1, TWO)
    mdl.wavelet(1, TWO)
    assert mdl.fault is None and mdl.acc_owner == 2
    mdl.wavelet(1, TWO)
    assert_range_stop(mdl, 2)
    assert mdl.done[2] == 0 and mdl.fmac_cycles == 2 and mdl.acc_owner is None
    assert not mdl.mem[0:L].any()
    # The half row is gone: another FMAC starts from +0.0 (no ACC_CONFLICT): 3 * 1.0.
    program(mdl, 3, op=Op.FMAC, enable=1, color=2, a_base=S - L, a_stride=0, count=1, reps=1,
            dst_base=64)
    mdl.wavelet(2, THREE)
    assert list(mdl.mem[64:64 + L]) == [THREE] * L
    assert mdl.fault == (Fault.RANGE, 2)


def test_fmac_destination_past_sram_faults_on_the_rows_last_wavelet():
    # count 2, dst_base S-6: row 0 -> S-6..S-3; row 1 would end at S+2: its wavelet 1 faults.
    # Descriptor 5 (legal, not enabled) would be chained to on completion: it is not.
    mdl = model()
    load(mdl, 0, [ONE] * L)
    program(mdl, 5, op=Op.STORE, color=4, reps=1, lo=0, hi=1, dst_base=128)
    program(mdl, 2, op=Op.FMAC, enable=1, color=1, a_base=0, a_stride=0, count=2, reps=2,
            dst_base=S - L - 2, chain=1, next=5)
    for _ in range(3):
        mdl.wavelet(1, ONE)
    assert mdl.fault is None and mdl.done[2] == 1
    assert list(mdl.mem[S - L - 2:S - 2]) == [TWO] * L
    mdl.wavelet(1, ONE)
    assert_range_stop(mdl, 2)
    assert mdl.done[2] == 1 and mdl.fmac_cycles == 3 and mdl.acc_owner is None
    assert not mdl.mem[S - 2:S].any() and not mdl.active[5]


def test_range_comes_after_acc_conflict_and_keeps_a_pending_fault():
    mdl = model()
    program(mdl, 0, op=Op.FMAC, enable=1, color=1, a_base=0, a_stride=0, count=2, reps=1,
            dst_base=0)
    program(mdl, 1, op=Op.FMAC, enable=1, color=2, a_base=S, a_stride=0, count=1, reps=1,
            dst_base=0)
    mdl.wavelet(1, ONE)                 # descriptor 0 owns the accumulator
    mdl.wavelet(2, ONE)
    assert mdl.fault == (Fault.ACC_CONFLICT, 1) and mdl.active[1]
    mdl.wavelet(1, ONE)                 # row 0 of descriptor 0 done: the accumulator is free
    mdl.wavelet(2, ONE)                 # RANGE: not recorded (a fault is pending), 1 still stops
    assert mdl.fault == (Fault.ACC_CONFLICT, 1) and not mdl.active[1]


def test_store_past_sram_faults_on_the_word():
    # dst_base S-6: vector 0 -> S-6..S-3, vector 1 words 0, 1 -> S-2, S-1, word 2 -> S faults.
    mdl = model()
    program(mdl, 2, op=Op.STORE, enable=1, color=1, reps=3, lo=0, hi=3, dst_base=S - 6)
    for w in range(1, 8):
        mdl.wavelet(1, w)
    assert_range_stop(mdl, 2)
    assert list(mdl.mem[S - 6:S]) == [1, 2, 3, 4, 5, 6] and mdl.done[2] == 1


def test_store_outside_lo_hi_is_not_checked():
    # Vector 0 is kept at S-4..S-1; vector 1 (n >= hi) would land at S: dropped, no fault.
    mdl = model()
    program(mdl, 2, op=Op.STORE, enable=1, color=1, reps=2, lo=0, hi=1, dst_base=S - L)
    for w in range(1, 9):
        mdl.wavelet(1, w)
    assert mdl.fault is None and mdl.done[2] == 2 and not mdl.active[2]
    assert list(mdl.mem[S - L:S]) == [1, 2, 3, 4]


@pytest.mark.parametrize("fields,sent", [
    # A of vector n at S-9 + 4n: vectors 0, 1 end at S-5, S-1; vector 2 ends at S+3.
    (dict(vmode=VecMode.PASS, a_base=S - 9, a_stride=L), 2),
    # ADD reads B: vector 1's B ends at S+1. PASS does not read B.
    (dict(vmode=VecMode.ADD, b_base=S - 7, b_stride=L), 1),
    (dict(vmode=VecMode.PASS, b_base=S - 7, b_stride=L), 3),
    (dict(vmode=VecMode.MASK, b_base=S - L + 1), 0),
    # Kept vectors n in [0, 2) at dst_base + 4n: with S-7 vector 1 would end at S+1; with S-8 it
    # ends at S, and vector 2 (not kept) is not checked.
    (dict(vmode=VecMode.PASS, store=1, lo=0, hi=2, dst_base=S - 7), 1),
    (dict(vmode=VecMode.PASS, store=1, lo=0, hi=2, dst_base=S - 8), 3),
])
def test_vector_range_checked_when_a_vector_is_issued(fields, sent):
    mdl = model()
    load(mdl, 0, [ONE] * L)
    program(mdl, 2, **{**dict(op=Op.VEC, enable=1, send=1, color=3, count=1, reps=3), **fields})
    assert len(mdl.out) == sent * L and mdl.done[2] == sent
    assert mdl.vec_cycles == sent * L
    if fields.get("store"):
        dst, kept = fields["dst_base"], min(sent, 2) * L
        assert list(mdl.mem[dst:dst + kept]) == [ONE] * kept and not mdl.mem[dst + kept:S].any()
    if sent < 3:
        assert_range_stop(mdl, 2)
    else:
        assert mdl.fault is None and not mdl.active[2]


def test_dot_row_past_sram_faults_that_word():
    # Rows of A at S-9 + 4k: rows 0, 1 fit, row 2 ends at S+3. Words 0, 1 of vector 0
    # (1.0 * 2.0 over 4 lanes = 8.0) stay sent and stored, word 2 does nothing.
    mdl = model()
    load(mdl, S - 9, [ONE] * 9)
    load(mdl, 0, [TWO] * L)
    program(mdl, 2, op=Op.VEC, vmode=VecMode.DOT, enable=1, send=1, store=1, color=3,
            a_base=S - 9, a_stride=L, b_base=0, b_stride=L, count=3, reps=2, lo=0, hi=2,
            dst_base=64)
    eight = 0x41000000
    assert mdl.out == [(3, eight), (3, eight)]
    assert list(mdl.mem[64:67]) == [eight, eight, 0]
    assert_range_stop(mdl, 2)
    assert mdl.done[2] == 0 and mdl.vec_cycles == 2 * L


@pytest.mark.parametrize("fields,sent", [
    (dict(a_base=S - L + 1), 0),                       # row 0 of A, checked at issue
    (dict(b_base=S - 7, b_stride=L), 3),               # vector 1's B ends at S+1
    (dict(store=1, lo=0, hi=2, dst_base=S - 5), 3),    # vector 1's 3 words at S-2..S
])
def test_dot_range_checked_when_a_vector_is_issued(fields, sent):
    mdl = model()
    program(mdl, 2, **{**dict(op=Op.VEC, vmode=VecMode.DOT, enable=1, send=1, color=3,
                              a_stride=0, count=3, reps=2), **fields})
    assert len(mdl.out) == sent and mdl.vec_cycles == sent * L
    assert_range_stop(mdl, 2)
