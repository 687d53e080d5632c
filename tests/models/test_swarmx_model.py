"""Golden SwarmX model: tree structure, numbers in tree order, timing, cycle model, tree vs ring."""

import numpy as np
import pytest

from models.numerics import CANONICAL_NAN, bits, f32, fp32_add, fp32_add_bits
from models.swarmx import (
    NEG_ZERO,
    NodeCycleModel,
    SwarmxTiming,
    TreeCycleModel,
    broadcast,
    node_children,
    reduce_bits,
    reduce_last,
    ring_allreduce_cycles,
    tree_depth,
    tree_levels,
    tree_vs_ring,
)

SPECIALS = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FA00001, 0xFFC12345,
                     0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
                     0x3F800000], dtype=np.uint32)


def _ceil_log4(n):
    d = 0
    while 4 ** d < n:
        d += 1
    return d


@pytest.mark.parametrize("n", list(range(1, 70)) + [128, 191, 192])
def test_tree_structure(n):
    levels = tree_levels(n)
    assert tree_depth(n) == max(1, _ceil_log4(n))
    assert levels[-1] == 1
    children = node_children(n)
    width = n
    for count, kids in zip(levels, children):
        assert count == len(kids) and sum(kids) == width and all(1 <= k <= 4 for k in kids)
        assert all(k == 4 for k in kids[:-1])       # leaves grouped in order, 4 per node
        width = count


def test_reduce_order_explicit():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((7, 257)) * np.exp2(rng.integers(-20, 20, (7, 257)))).astype(np.float32)
    add = fp32_add
    n0 = add(add(x[0], x[1]), add(x[2], x[3]))
    n1 = add(add(x[4], x[5]), x[6])
    assert np.array_equal(reduce_bits(bits(x)), bits(add(n0, n1)))
    # A different order gives different bits on this data: the order matters and is fixed.
    assert not np.array_equal(bits(add(n0, n1)), bits(add(add(x[0], x[2]), add(x[1], x[3])) + n1))


def test_reduce_specials_and_single_leaf():
    leaf = SPECIALS[None, :]
    out = reduce_bits(leaf)
    nan = np.isnan(f32(SPECIALS))
    assert np.array_equal(out[~nan], SPECIALS[~nan])
    assert (out[nan] == CANONICAL_NAN).all()


def test_tie_off_is_identity():
    """An absent child is tied to -0.0: x + (-0.0) is x bit for bit, NaNs canonical."""
    rng = np.random.default_rng(2)
    x = np.concatenate([SPECIALS, rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)])
    y = fp32_add_bits(x, np.full_like(x, NEG_ZERO))
    nan = np.isnan(f32(x))
    assert np.array_equal(y[~nan], x[~nan]) and (y[nan] == CANONICAL_NAN).all()


def test_reduce_last_and_error():
    last = np.array([[0, 1, 0, 1], [0, 1, 0, 1], [0, 1, 1, 1]], dtype=bool)
    out, first = reduce_last(last)
    assert out.tolist() == [False, True, True, True] and first == 2
    out, first = reduce_last(last[:2])
    assert out.tolist() == [False, True, False, True] and first is None


def test_broadcast_and_bad_input():
    assert broadcast([1, 2, 3], 3) == [[1, 2, 3]] * 3
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="leaves >= 1"):
            tree_levels(bad)
    with pytest.raises(ValueError, match="shape"):
        reduce_bits(np.zeros(4, np.uint32))
    with pytest.raises(ValueError, match="adder_latency"):
        SwarmxTiming(4, 0)
    with pytest.raises(ValueError, match="1..4 children"):
        NodeCycleModel(5, fifo_depth=4, adder_latency=2)
    with pytest.raises(ValueError, match="fifo_depth"):
        NodeCycleModel(4, fifo_depth=1, adder_latency=2)


def _run(model, n, words, *, leaf_offer=None, child_ready=None, cycles=400):
    """Offer ``words`` words on every input (``leaf_offer(i)`` False keeps leaf i silent),
    return the transfer cycles seen at the ports."""
    P = len(model.groups)
    sent, bsent = [0] * n, [0] * P
    rin_t, rout_t = [[] for _ in range(n)], [[] for _ in range(P)]
    bin_t, bout_t = [[] for _ in range(P)], [[] for _ in range(n)]
    for cyc in range(cycles):
        b_ready, b_out, r_ready, r_out = model.outputs()
        r_in = [None] * n
        for i in range(n):
            if sent[i] < words and r_ready[i] and (leaf_offer is None or leaf_offer(i)):
                r_in[i] = (sent[i], False)
                sent[i] += 1
                rin_t[i].append(cyc)
        b_in = [None] * P
        for p in range(P):
            if bsent[p] < words and b_ready[p]:
                b_in[p] = bsent[p]
                bsent[p] += 1
                bin_t[p].append(cyc)
        taken = [w is not None and (child_ready is None or child_ready(c)) for c, w in enumerate(b_out)]
        for c, t in enumerate(taken):
            if t:
                bout_t[c].append(cyc)
        r_taken = [w is not None for w in r_out]
        for p, t in enumerate(r_taken):
            if t:
                rout_t[p].append(cyc)
        model.update(b_in, taken, r_in, r_taken)
    return bin_t, bout_t, rin_t, rout_t


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 16, 17, 20, 33, 64, 65, 192])   # 20, 192: the RTL's deep trees
@pytest.mark.parametrize("adder_latency", [1, 2, 5])
def test_cycle_model_full_rate_matches_timing(n, adder_latency):
    timing = SwarmxTiming(n, adder_latency)
    model = TreeCycleModel(n, fifo_depth=2, adder_latency=adder_latency)
    words = 40
    bin_t, bout_t, rin_t, rout_t = _run(model, n, words, cycles=words + timing.reduce_latency + 5)
    assert bin_t[0] == list(range(words))
    for c in range(n):
        assert rin_t[c] == list(range(words))
        assert bout_t[c] == [t + timing.broadcast_latency for t in range(words)]
    assert rout_t[0] == [t + timing.reduce_latency for t in range(words)]
    assert rout_t[0][-1] + 1 == timing.reduce_cycles(words)
    assert not model.error


@pytest.mark.parametrize("depth", [2, 4, 8])
def test_buffering_slow_and_silent_children(depth):
    """A stalled child holds the parent back only after ``depth`` words; the others get them.
    A silent leaf lets its siblings run ahead by exactly the buffering on their path."""
    L = 2
    model = TreeCycleModel(4, fifo_depth=depth, adder_latency=L)
    bin_t, bout_t, rin_t, rout_t = _run(model, 4, 50, leaf_offer=lambda i: i != 3,
                                        child_ready=lambda c: c != 3)
    assert len(bin_t[0]) == depth and len(bout_t[3]) == 0
    assert all(len(bout_t[c]) == depth for c in range(3))
    # Leaves 0 and 1 fill their FIFOs and unit A (adder + its L + 2 output FIFO); leaf 2 only its
    # FIFO (unit B waits for leaf 3); nothing reaches the root.
    assert [len(t) for t in rin_t] == [depth + L + 2, depth + L + 2, depth, 0]
    assert rout_t[0] == []


def test_split_node_units_are_independent():
    model = NodeCycleModel(4, fifo_depth=4, adder_latency=2, split=True)
    assert model.groups == [[0, 1], [2, 3]]
    _, bout_t, rin_t, rout_t = _run(model, 4, 30, leaf_offer=lambda i: i != 3, cycles=80)
    assert len(rout_t[0]) == 30 and rout_t[0][0] == 2 + 2          # L + 2, leaf 3 irrelevant
    assert rout_t[1] == []
    assert all(len(t) == 30 for t in bout_t)


def _ring_reference(n, words, hop):
    """Word-level event recursion of a pipelined ring all-reduce (independent of the closed form)."""
    if n == 1:
        return 0
    steps, chunk = 2 * (n - 1), -(-words // n)
    prev = None
    for _ in range(steps):
        row = []
        for w in range(chunk):
            t = row[w - 1] + 1 if w else (prev[-1] + 1 if prev else 0)
            if prev:
                t = max(t, prev[w] + hop)
            row.append(t)
        prev = row
    return prev[-1] + hop + 1


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16, 61, 192])
@pytest.mark.parametrize("words", [1, 5, 100, 4096])
@pytest.mark.parametrize("hop", [1, 4, 9])
def test_ring_closed_form(n, words, hop):
    assert ring_allreduce_cycles(n, words, hop) == _ring_reference(n, words, hop)


def test_tree_vs_ring_table():
    words = 1 << 20
    rows = tree_vs_ring(range(1, 193), words, adder_latency=2)
    assert [r[0] for r in rows] == list(range(1, 193))
    by_n = {r[0]: r for r in rows}
    assert by_n[1][3] == 0                          # one system: nothing to all-reduce
    for n in (2, 4, 16, 192):
        _, depth, tree, ring, ratio, tree_link, ring_link = by_n[n]
        assert tree == words + depth * 7
        assert ring_link == pytest.approx(2 * (n - 1) / n * words)
        assert ratio == pytest.approx(ring / tree)
    assert by_n[192][4] > 1.9                       # the ring moves ~2x the data per link
    assert by_n[2][4] < 1.01                        # N = 2: one chunk each way, same as the tree
