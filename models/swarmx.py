"""Golden model of SwarmX (docs/swarmx.md): numbers, timing, a cycle model, and tree vs ring.

Structure
---------
``N`` leaves (systems) hang under a tree of 1:4 nodes. Leaf ``i`` is child ``i mod 4`` of
bottom-level node ``i div 4``; node ``j`` of a level is child ``j mod 4`` of node ``j div 4`` of
the level above. The tree has ``ceil(log4 N)`` levels for ``N >= 2`` and one node (with a single
child) for ``N = 1``, so that even one system's gradient passes the same registered, NaN-
canonicalizing path (``tree_sum`` of one leaf is ``canonical(leaf)``).

Numbers
-------
Reduction order is ``models.numerics.node_sum`` per node and ``tree_sum`` for the tree (the only
implementations of that order). ``last`` flags travel with the data: the output flag of word
``k`` is the OR of the leaves' flags, and the sticky error flag rises at the first word whose
leaves' flags disagree.

Timing (the RTL of ``hdl.swarmx``)
----------------------------------
A node is three *reduce units* (``A = c0 + c1``, ``B = c2 + c3``, ``C = A + B``) behind one input
FIFO per child. A unit joins its two inputs, issues the pair into a pipelined fp32 adder of
latency ``L`` and writes the sum into its own output FIFO of ``L + 2`` words; it issues only
while ``words in the adder + words in its output FIFO < L + 2`` (credits), so the adder never
has to stall and nothing is lost when the parent stops. An absent child is tied to the constant
``-0.0`` (``x + -0.0 == x`` bit for bit, NaN canonicalized), so every node has the same latency:

* reduce: ``2 L + 3`` cycles per node (input FIFO 1, adder A/B ``L``, FIFO 1, adder C ``L``,
  FIFO 1) from a leaf transfer to the word being valid one level up;
* broadcast: 1 cycle per node (one FIFO per child);
* one word per cycle sustained in both directions, for any ``N``.

:class:`NodeCycleModel` and :class:`TreeCycleModel` reproduce the RTL handshakes cycle for cycle
(every output is a function of registered state, so a bench can compare them every cycle).
"""

import math
from collections import deque

import numpy as np

from .numerics import bits, f32, tree_sum

__all__ = [
    "MIN_FIFO_DEPTH", "NEG_ZERO", "node_reduce_latency", "tree_levels", "tree_depth", "node_children", "reduce_bits",
    "reduce_last", "broadcast", "SwarmxTiming", "ring_allreduce_cycles", "tree_vs_ring",
    "NodeCycleModel", "TreeCycleModel",
]

MIN_FIFO_DEPTH = 2
NEG_ZERO = 0x80000000          # the tie-off of an absent child: x + (-0.0) == canonical(x)


def _check_leaves(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"a SwarmX tree needs an integer number of leaves >= 1, got {n!r}")
    return int(n)


def tree_levels(n):
    """Node counts per level, bottom (next to the leaves) first: 16 -> [4, 1], 7 -> [2, 1]."""
    n = _check_leaves(n)
    levels, width = [], n
    while True:
        width = -(-width // 4)
        levels.append(width)
        if width == 1:
            return levels


def tree_depth(n):
    """Levels of nodes: ``ceil(log4 N)`` for ``N >= 2``, 1 for ``N = 1``."""
    return len(tree_levels(n))


def node_children(n):
    """Children per node, per level (bottom first): 7 -> [[4, 3], [2]]."""
    out, width = [], _check_leaves(n)
    for count in tree_levels(n):
        out.append([min(4, width - 4 * j) for j in range(count)])
        width = count
    return out


def reduce_bits(leaf_bits):
    """Tree sum of ``leaf_bits`` (uint32 fp32 patterns, shape ``(N, S)``) -> uint32 ``(S,)``."""
    leaf_bits = np.asarray(leaf_bits, dtype=np.uint32)
    if leaf_bits.ndim != 2 or leaf_bits.shape[0] < 1:
        raise ValueError(f"leaf_bits must have shape (N >= 1, S), got {leaf_bits.shape}")
    return bits(tree_sum(f32(leaf_bits)))


def reduce_last(leaf_last):
    """``(last_out, first_error)`` for leaf flags of shape ``(N, S)``: ``last_out[k]`` is the OR
    over leaves, ``first_error`` the first word index whose flags disagree (``None`` if none)."""
    leaf_last = np.asarray(leaf_last, dtype=bool)
    if leaf_last.ndim != 2 or leaf_last.shape[0] < 1:
        raise ValueError(f"leaf_last must have shape (N >= 1, S), got {leaf_last.shape}")
    disagree = leaf_last.any(axis=0) & ~leaf_last.all(axis=0)
    first = int(np.argmax(disagree)) if disagree.any() else None
    return leaf_last.any(axis=0), first


def broadcast(words, n):
    """What each of the ``n`` leaves receives from a broadcast of ``words``: the same list, in order."""
    n = _check_leaves(n)
    return [list(words) for _ in range(n)]


def node_reduce_latency(adder_latency, split=False):
    """Reduce latency of one node: ``2 L + 3`` as a 1:4 node (input FIFO, adder A/B, FIFO, adder C,
    FIFO), ``L + 2`` for each unit of a node split into two 1:2 units."""
    return adder_latency + 2 if split else 2 * adder_latency + 3


class SwarmxTiming:
    """Latency and rate of the SwarmX tree for ``n`` leaves and adder latency ``adder_latency``.

    Latencies count cycles from an input transfer to the word being valid at the output (equal
    to the output transfer while the receiver is ready).
    """

    WORDS_PER_CYCLE = 1.0

    def __init__(self, n, adder_latency):
        self.n = _check_leaves(n)
        if isinstance(adder_latency, bool) or not isinstance(adder_latency, int) or adder_latency < 1:
            raise ValueError(f"adder_latency must be an int >= 1, got {adder_latency!r}")
        self.adder_latency = adder_latency
        self.depth = tree_depth(n)

    @property
    def unit_fifo_depth(self):
        """Output FIFO words of one reduce unit: the adder's ``L`` in flight + 2 (see module doc)."""
        return self.adder_latency + 2

    @property
    def node_reduce_latency(self):
        return node_reduce_latency(self.adder_latency)

    @property
    def node_broadcast_latency(self):
        return 1

    @property
    def reduce_latency(self):
        return self.depth * self.node_reduce_latency

    @property
    def broadcast_latency(self):
        return self.depth * self.node_broadcast_latency

    def reduce_cycles(self, words):
        """Cycles from the first leaf transfer until the last of ``words`` sums is delivered."""
        return self.reduce_latency + math.ceil(words / self.WORDS_PER_CYCLE)

    def broadcast_cycles(self, words):
        return self.broadcast_latency + math.ceil(words / self.WORDS_PER_CYCLE)


def ring_allreduce_cycles(n, words, hop_latency):
    """Best case of a ring all-reduce of ``words`` fp32 words among ``n`` systems at one word per
    cycle per link: reduce-scatter then all-gather, ``2 (n - 1)`` steps of ``ceil(words / n)``
    words each, pipelined word by word so that a step starts ``hop_latency`` cycles after the
    previous one's first word (or when the link is free, whichever is later).

    Each link carries ``2 (n - 1) / n * words`` words. ``n = 1`` needs no communication: 0.
    """
    n = _check_leaves(n)
    if n == 1 or words == 0:
        return 0
    steps = 2 * (n - 1)
    chunk = -(-words // n)
    return (steps - 1) * max(chunk, hop_latency) + chunk + hop_latency


def tree_vs_ring(ns, words, adder_latency):
    """Rows ``(N, depth, tree cycles, ring cycles, ring/tree, tree link words, ring link words)``:
    reducing ``words`` words of N systems through the tree (to its root, i.e. MemoryX) against a
    ring all-reduce among the systems with the same link rate and a hop latency of one reduce
    unit (``L + 2``: input FIFO, adder, output FIFO), which favours the ring."""
    rows = []
    for n in ns:
        timing = SwarmxTiming(n, adder_latency)
        tree = timing.reduce_cycles(words)
        ring = ring_allreduce_cycles(n, words, adder_latency + 2)
        ring_link = 2 * (n - 1) / n * words
        rows.append((n, timing.depth, tree, ring, ring / tree, words, ring_link))
    return rows


# --------------------------------------------------------------------------------------------
# Cycle model. Tokens: broadcast words are carried as they are (any object); reduce tokens are
# ``(index, last)`` pairs; the numbers of word ``index`` are ``reduce_bits`` (the tree order).

class _Fifo:
    """``lib.fifo.SyncFIFO``: writable while not full, readable while not empty, a write is
    visible the cycle after it."""

    def __init__(self, depth):
        self.depth = depth
        self.items = deque()

    @property
    def w_rdy(self):
        return len(self.items) < self.depth

    @property
    def head(self):
        return self.items[0] if self.items else None


class _TieOff:
    """An absent child: the constant ``-0.0``, always valid, never contributes a ``last`` flag."""
    head = None
    valid = True


class _Unit:
    """Join two sources, issue into an adder of latency ``L``, output FIFO of ``L + 2`` words."""

    def __init__(self, sources, adder_latency):
        self.sources = sources          # _Fifo objects (active) or _TieOff
        self.pipe = [None] * adder_latency
        self.out = _Fifo(adder_latency + 2)
        self.count = 0                  # words in the adder + words in ``out``
        self.error = False
        self.credit_stalls = 0          # cycles with both inputs present but no credit

    def inputs_present(self):
        return all(s.items for s in self.sources if isinstance(s, _Fifo))

    def can_issue(self):
        return self.inputs_present() and self.count < self.out.depth

    def issue_token(self):
        heads = [s.items[0] for s in self.sources if isinstance(s, _Fifo)]
        index = heads[0][0]
        if any(h[0] != index for h in heads):
            raise AssertionError(f"model invariant: unit joined words {[h[0] for h in heads]}")
        lasts = [h[1] for h in heads]
        return (index, any(lasts)), len(set(lasts)) > 1


class NodeCycleModel:
    """Cycle model of ``hdl.swarmx.SwarmxNode(children, split=...)``.

    ``groups[p]`` lists the children served by parent link ``p``: ``[[0..k-1]]`` for a 1:4 node,
    ``[[0, 1], [2, ...]]`` for two 1:2 units. Per cycle: read :meth:`outputs` (functions of the
    state only), decide the transfers, then call :meth:`update` with them.
    """

    def __init__(self, children, *, fifo_depth, adder_latency, split=False):
        if not 1 <= children <= 4:
            raise ValueError(f"a SwarmX node has 1..4 children, got {children}")
        if split and children < 3:
            raise ValueError(f"two 1:2 units need 3 or 4 children, got {children}")
        if fifo_depth < MIN_FIFO_DEPTH:
            raise ValueError(f"fifo_depth must be >= {MIN_FIFO_DEPTH}, got {fifo_depth}")
        self.children = children
        self.split = split
        self.groups = [[0, 1], list(range(2, children))] if split else [list(range(children))]
        self.bcast = [_Fifo(fifo_depth) for _ in range(children)]
        self.rin = [_Fifo(fifo_depth) for _ in range(children)]

        def src(c):
            return self.rin[c] if c < children else _TieOff()

        a = _Unit([src(0), src(1)], adder_latency)
        b = _Unit([src(2), src(3)], adder_latency) if children >= 3 else None
        if split:
            self.units = [a, b]
            self.tops = [a, b]
        else:
            c = _Unit([a.out, b.out if b else _TieOff()], adder_latency)
            self.units = [u for u in (a, b, c) if u is not None]
            self.tops = [c]

    @property
    def parents(self):
        return len(self.groups)

    @property
    def error(self):
        return any(u.error for u in self.units)

    @property
    def credit_stalls(self):
        """Unit-cycles in which a pair was ready but the unit had no credit (parent stalling)."""
        return sum(u.credit_stalls for u in self.units)

    def outputs(self):
        """``(bcast_in_ready[p], bcast_out[c] token|None, reduce_in_ready[c], reduce_out[p] token|None)``."""
        return ([all(self.bcast[c].w_rdy for c in g) for g in self.groups],
                [f.head for f in self.bcast],
                [f.w_rdy for f in self.rin],
                [u.out.head for u in self.tops])

    def update(self, bcast_in, bcast_out_taken, reduce_in, reduce_out_taken):
        """Advance one clock edge. ``bcast_in[p]`` / ``reduce_in[c]``: token transferred into the
        node this cycle or ``None``; ``*_taken``: whether the output word was transferred."""
        # Decisions from the state before the edge.
        issues = [u.can_issue() for u in self.units]
        for u, issue in zip(self.units, issues):
            u.credit_stalls += int(u.inputs_present() and not issue)
        popped = {id(u): False for u in self.units}
        for v, issue in zip(self.units, issues):
            for u in self.units:
                if issue and u.out in v.sources:
                    popped[id(u)] = True            # unit C consumes A's and B's sums
        for p, u in enumerate(self.tops):
            if reduce_out_taken[p]:
                if not u.out.items:
                    raise AssertionError(f"reduce_out[{p}] taken while not valid")
                popped[id(u)] = True
        # Apply.
        for u, issue in zip(self.units, issues):
            token = None
            if issue:
                token, mismatch = u.issue_token()
                u.error |= mismatch
                for s in u.sources:
                    if isinstance(s, _Fifo):
                        s.items.popleft()
            if popped[id(u)] and u in self.tops:
                u.out.items.popleft()
            leaving = u.pipe.pop()
            u.pipe.insert(0, token)
            if leaving is not None:
                u.out.items.append(leaving)
                if len(u.out.items) > u.out.depth:
                    raise AssertionError("model invariant: adder result with a full output FIFO")
            u.count += int(issue) - int(popped[id(u)])
        for c, f in enumerate(self.rin):
            if reduce_in[c] is not None:
                if not f.w_rdy:
                    raise AssertionError(f"reduce_in[{c}] transferred while not ready")
                f.items.append(reduce_in[c])
        for c, f in enumerate(self.bcast):
            if bcast_out_taken[c]:
                if not f.items:
                    raise AssertionError(f"bcast_out[{c}] taken while not valid")
                f.items.popleft()
        for p, g in enumerate(self.groups):
            if bcast_in[p] is not None:
                if not all(self.bcast[c].w_rdy for c in g):
                    raise AssertionError(f"bcast_in[{p}] transferred while not ready")
                for c in g:
                    self.bcast[c].items.append(bcast_in[p])


class TreeCycleModel:
    """Cycle model of ``hdl.swarmx.SwarmxTree(n)``: 1:4 nodes wired as in the module doc.

    Same protocol as :class:`NodeCycleModel` with one parent link and ``n`` children.
    """

    def __init__(self, n, *, fifo_depth, adder_latency):
        self.n = _check_leaves(n)
        self.levels = [[NodeCycleModel(k, fifo_depth=fifo_depth, adder_latency=adder_latency)
                        for k in level] for level in node_children(n)]
        self.groups = [list(range(self.n))]

    @property
    def root(self):
        return self.levels[-1][0]

    @property
    def error(self):
        return any(node.error for level in self.levels for node in level)

    @property
    def credit_stalls(self):
        return sum(node.credit_stalls for level in self.levels for node in level)

    def outputs(self):
        bottom = [node.outputs() for node in self.levels[0]]
        root = self.root.outputs()
        return ([root[0][0]],
                [bottom[i // 4][1][i % 4] for i in range(self.n)],
                [bottom[i // 4][2][i % 4] for i in range(self.n)],
                [root[3][0]])

    def update(self, bcast_in, bcast_out_taken, reduce_in, reduce_out_taken):
        outs = [[node.outputs() for node in level] for level in self.levels]
        # Per node: (bcast_in, bcast_out_taken, reduce_in, reduce_out_taken), filled level by level.
        args = [[[None, [False] * node.children, [None] * node.children, False] for node in level]
                for level in self.levels]
        for i in range(self.n):
            args[0][i // 4][1][i % 4] = bcast_out_taken[i]
            args[0][i // 4][2][i % 4] = reduce_in[i]
        for lv in range(len(self.levels) - 1):
            for j, node_out in enumerate(outs[lv]):
                parent_out, slot = outs[lv + 1][j // 4], j % 4
                word = parent_out[1][slot]                      # parent's bcast_out[slot]
                if word is not None and node_out[0][0]:
                    args[lv][j][0] = word
                    args[lv + 1][j // 4][1][slot] = True
                up = node_out[3][0]                             # this node's reduce_out
                if up is not None and parent_out[2][slot]:
                    args[lv + 1][j // 4][2][slot] = up
                    args[lv][j][3] = True
        args[-1][0][0] = bcast_in[0]
        args[-1][0][3] = reduce_out_taken[0]
        for level, level_args in zip(self.levels, args):
            for node, (b_in, b_taken, r_in, r_taken) in zip(level, level_args):
                node.update([b_in], b_taken, r_in, [r_taken])
