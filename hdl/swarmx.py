"""SwarmX broadcast/reduce node and tree (docs/swarmx.md, top ``swarmx`` of docs/architecture.md#verilog-tops).

Every link is an ``amaranth.lib.stream`` of :class:`hdl.wavelet.TaggedWord` (``data: 32``,
``last: 1``). The golden model (numbers, latency, a cycle-exact model) is ``models.swarmx``.

Reduce unit (:class:`SwarmxReduceUnit`)
    Joins two input streams, issues the pair into the pipelined :class:`hdl.fp.fp32_add.Fp32Add`
    (latency ``L``: ``Config.fp_latency``, default ``Fp32Add.LATENCY``) and writes ``a + b`` into
    an output FIFO of ``L + 2`` words. It issues only while *words in the adder + words in the
    output FIFO < L + 2*, so the adder's output is always accepted (``o.ready`` tied high) and
    nothing is lost however long the consumer stalls; ``L + 2`` is the least depth that still
    issues one word per cycle (a word holds a credit from its issue until the cycle after it leaves the FIFO: ``L + 1``
    cycles, and the credit count is a register). ``last`` rides beside the adder in a FIFO of
    its own; the unit's output ``last`` is the OR of the inputs', and a sticky ``error`` rises
    when the two inputs' ``last`` flags differ. An absent input is tied to ``-0.0``: ``x + -0.0``
    is ``x`` bit for bit (NaN canonicalized), which is exactly how ``node_sum`` drops a term.

Node (:class:`SwarmxNode`)
    One parent link, up to four children. Broadcast: one FIFO of ``fifo_depth`` words per
    child; the parent word is accepted when every child FIFO has room and is written to all of
    them (latency 1), each child drains its own FIFO. So a slow child stalls the parent only
    once it is ``fifo_depth`` words behind, and a fast child runs up to ``fifo_depth`` words
    ahead of the slowest; ``fifo_depth >= 2`` keeps one word per cycle with registered ready.
    Reduce: one FIFO of ``fifo_depth`` words per child (a child running ahead fills it, then
    waits), units ``A = c0 + c1`` and ``B = c2 + c3``, then ``C = A + B`` to the parent: the
    order ``((c0 + c1) + (c2 + c3))``, absent children dropped. Latency ``2 L + 3`` cycles for
    any number of children (every node has the same latency, so the tree's is
    ``depth * (2 L + 3)``). ``split=True`` configures the node as two independent 1:2 units:
    parent link 0 serves children 0 and 1 (``c0 + c1``), parent link 1 children 2 and 3,
    latency ``L + 2``.

Tree (:class:`SwarmxTree`)
    ``N >= 1`` leaves, ``ceil(log4 N)`` levels of 1:4 nodes (one node for ``N = 1``); leaf ``i``
    is child ``i mod 4`` of bottom node ``i div 4``, each level above grouped the same way;
    unused children tied off. Broadcast latency ``depth``, reduce latency ``depth * (2 L + 3)``,
    one word per cycle in both directions. Every handshake output (``ready`` of the inputs,
    ``valid``/``payload`` of the outputs) is a function of registers only.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from arch.wavelet import TAGGED, TAGGED_BITS

from .config import refuse
from .formal import Properties, active
from .fp.fp32_add import Fp32Add
from .layouts import cat_fields
from .wavelet import TaggedWord

__all__ = ["NEG_ZERO", "SwarmxReduceUnit", "SwarmxNode", "SwarmxTree", "tree_shape"]

NEG_ZERO = 0x80000000
_WORD = TAGGED_BITS


def _tagged():
    return stream.Signature(TaggedWord)


def _fifo_stream(m, name, depth, src, dst):
    """``src`` (stream, producer side) -> SyncFIFO(depth) -> ``dst`` (stream, consumer side)."""
    q = fifo.SyncFIFO(width=_WORD, depth=depth)
    m.submodules[name] = q
    m.d.comb += [
        q.w_data.eq(src.payload), q.w_en.eq(src.valid), src.ready.eq(q.w_rdy),
        dst.payload.eq(q.r_data), dst.valid.eq(q.r_rdy), q.r_en.eq(dst.ready),
    ]
    return q


def _check_fifo_depth(component, depth):
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 2:
        refuse(component, ValueError(f"fifo_depth must be an int >= 2 (one word per cycle with "
                                     f"registered ready), got {depth!r}"))


def tree_shape(leaves):
    """Children per node, per level (bottom first): 7 -> ``[[4, 3], [2]]``."""
    if isinstance(leaves, bool) or not isinstance(leaves, int) or leaves < 1:
        raise ValueError(f"a SwarmX tree needs an integer number of leaves >= 1, got {leaves!r}")
    shape, width = [], leaves
    while True:
        count = -(-width // 4)
        shape.append([min(4, width - 4 * j) for j in range(count)])
        width = count
        if count == 1:
            return shape


class SwarmxReduceUnit(wiring.Component):
    """``o = a + b`` (fp32, tagged), line rate, credit-protected output FIFO.

    Parameters
    ----------
    inputs : 1 or 2
        With 1, ``b`` is absent and tied to ``-0.0`` (``o = canonical(a)``).

    Ports: ``a``, ``b`` (if present): ``In(stream(TaggedWord))``; ``o``: ``Out(stream(TaggedWord))``;
    ``error: Out(1)`` sticky, set when ``a.last != b.last`` for a joined pair.
    Latency ``LATENCY = L + 1`` from an issue (both inputs valid and a credit) to ``o.valid``;
    output FIFO of ``FIFO_DEPTH = L + 2`` words; ``L = adder_latency`` (``Config.fp_latency``,
    default ``Fp32Add.LATENCY``).
    """

    LATENCY = Fp32Add.LATENCY + 1
    FIFO_DEPTH = Fp32Add.LATENCY + 2

    def __init__(self, inputs=2, *, adder_latency=Fp32Add.LATENCY):
        if inputs not in (1, 2):
            refuse(self, ValueError(f"a reduce unit has 1 or 2 inputs, got {inputs!r}"))
        self._inputs = inputs
        self._adder_latency = adder_latency
        self.LATENCY = adder_latency + 1
        self.FIFO_DEPTH = adder_latency + 2
        ports = {"a": In(_tagged()), "o": Out(_tagged()), "error": Out(1)}
        if inputs == 2:
            ports["b"] = In(_tagged())
        super().__init__(ports)

    @property
    def inputs(self):
        return self._inputs

    def elaborate(self, platform):
        m = Module()
        depth = self.FIFO_DEPTH
        m.submodules.add = add = Fp32Add(self._adder_latency)
        m.submodules.out = out = fifo.SyncFIFO(width=_WORD, depth=depth)
        m.submodules.tags = tags = fifo.SyncFIFO(width=1, depth=depth)

        count = Signal(range(depth + 1))    # words in the adder + words in ``out``
        join = Signal()
        issue = Signal()
        pop = Signal()
        if self._inputs == 2:
            b_data, b_last = self.b.payload.data, self.b.payload.last
            m.d.comb += join.eq(self.a.valid & self.b.valid)
            mismatch = self.a.payload.last != b_last
            last = self.a.payload.last | b_last
        else:
            b_data = Const(NEG_ZERO, 32)
            m.d.comb += join.eq(self.a.valid)
            mismatch = Const(0)
            last = self.a.payload.last

        m.d.comb += [
            add.i.valid.eq(join & (count < depth)),
            add.i.payload.a.eq(self.a.payload.data),
            add.i.payload.b.eq(b_data),
            issue.eq(add.i.valid & add.i.ready),
            self.a.ready.eq(issue),
            tags.w_data.eq(last),
            tags.w_en.eq(issue),
            # Credits guarantee room: the adder never waits, results are never dropped.
            add.o.ready.eq(1),
            out.w_en.eq(add.o.valid),
            out.w_data.eq(cat_fields(TAGGED, data=add.o.payload, last=tags.r_data)),
            tags.r_en.eq(add.o.valid),
            self.o.payload.eq(out.r_data),
            self.o.valid.eq(out.r_rdy),
            out.r_en.eq(self.o.ready),
            pop.eq(self.o.valid & self.o.ready),
        ]
        if self._inputs == 2:
            m.d.comb += self.b.ready.eq(issue)
        with m.If(issue & ~pop):
            m.d.sync += count.eq(count + 1)
        with m.Elif(pop & ~issue):
            m.d.sync += count.eq(count - 1)
        with m.If(issue & mismatch):
            m.d.sync += self.error.eq(1)
        if active(platform):
            self._formal(m, platform, count=count, issue=issue, pop=pop, last=last, mismatch=mismatch,
                         add=add, out=out, tags=tags)
        return m

    # ---- formal properties (docs/verification.md#formal) ------------------------------------
    def _formal(self, m, platform, *, count, issue, pop, last, mismatch, add, out, tags):
        f = Properties(m, platform, self)
        depth = self.FIFO_DEPTH
        f.input_stream(self.a, "a")
        if self._inputs == 2:
            f.input_stream(self.b, "b")
        f.output_stream(self.o, "o")
        f.check("issue_only_when_offered", ~issue | self.a.valid & (self.b.valid if self._inputs == 2 else 1))
        f.check("credits_within_depth", count <= depth)
        f.check("credits_count_words_held", count == tags.level + out.level)
        f.check("adder_result_has_room", ~add.o.valid | out.w_rdy)
        f.check("adder_words_have_tags", platform.probe(add, "inflight", 8) == tags.level)
        err_before = f.past(self.error, "error")
        joined_bad = f.past(issue & mismatch, "joined_bad")
        # (the ``past_`` registers reset with the block, so a reset leaves no obligation)
        f.check("error_sticky", ~err_before | self.error)
        f.check("error_only_on_mismatch", self.error == (err_before | joined_bad))
        if f.top and getattr(platform, "fair_stall", None) is not None:
            # ``last`` exactly once per reduction: every output word carries the ``last`` of the
            # pair it was joined from (a checker shift register of the words in flight, oldest
            # first); with one word out per pair (credit accounting above) a reduction's ``last``
            # leaves exactly once and none is made up. Needs a consumer that stalls at most
            # ``fair_stall`` cycles in a row, so that k-induction closes (a word cannot wait forever).
            shadow = Signal(depth, name="last_shadow")
            shifted = Mux(pop, shadow >> 1, shadow)
            tail = Mux(pop, count - 1, count)[:depth.bit_length()]
            pushed = (shifted & ~(Const(1, depth) << tail)) | (last << tail)
            m.d.sync += shadow.eq(Mux(issue, pushed, shifted)[:depth])
            f.check("last_of_its_pair", ~self.o.valid | (self.o.payload.last == shadow[0]))
        f.cover("credit_limit", (count == depth) & self.a.valid)
        f.cover("last_out", pop & self.o.payload.last)
        if self._inputs == 2:
            f.cover("mismatch", issue & mismatch)


class SwarmxNode(wiring.Component):
    """One SwarmX node: a 1:4 unit, or (``split=True``) two 1:2 units.

    Parameters
    ----------
    children : 1..4 (3..4 when split)
    split : bool
        Two independent 1:2 units (parent link ``p`` serves children ``2p`` and ``2p + 1``).
    fifo_depth : int >= 2
        Words per child FIFO, in each direction.

    Ports
    -----
    bcast_in : In(stream(TaggedWord))   (array of 2 when split)   parent -> node
    reduce_out : Out(stream(TaggedWord)) (array of 2 when split)  node -> parent
    bcast_out : Out(stream(TaggedWord)).array(children)          node -> child c
    reduce_in : In(stream(TaggedWord)).array(children)           child c -> node
    error : Out(1)   sticky: two children's ``last`` flags disagreed on a word

    Latency: broadcast 1 cycle; reduce ``2 L + 3`` (1:4) or ``L + 2`` (split), ``L =
    adder_latency`` (default ``Fp32Add.LATENCY``). One word per cycle in both directions.
    """

    def __init__(self, children=4, *, split=False, fifo_depth=4, adder_latency=Fp32Add.LATENCY):
        if isinstance(children, bool) or not isinstance(children, int) or not 1 <= children <= 4:
            refuse(self, ValueError(f"a SwarmX node has 1..4 children, got {children!r}"))
        if split and children < 3:
            refuse(self, ValueError(f"a node split into two 1:2 units needs 3 or 4 children, got {children}"))
        _check_fifo_depth(self, fifo_depth)
        self._children = children
        self._split = split
        self._fifo_depth = fifo_depth
        self._adder_latency = adder_latency
        parent_in, parent_out = In(_tagged()), Out(_tagged())
        if split:
            parent_in, parent_out = parent_in.array(2), parent_out.array(2)
        super().__init__({
            "bcast_in": parent_in,
            "reduce_out": parent_out,
            "bcast_out": Out(_tagged()).array(children),
            "reduce_in": In(_tagged()).array(children),
            "error": Out(1),
        })

    @property
    def children(self):
        return self._children

    @property
    def split(self):
        return self._split

    @property
    def fifo_depth(self):
        return self._fifo_depth

    @property
    def groups(self):
        """Children served by each parent link."""
        k = self._children
        return [[0, 1], list(range(2, k))] if self._split else [list(range(k))]

    @staticmethod
    def reduce_latency(split=False, adder_latency=Fp32Add.LATENCY):
        return adder_latency + 2 if split else 2 * adder_latency + 3

    def elaborate(self, platform):
        m = Module()
        k, depth = self._children, self._fifo_depth
        bcast_in = list(self.bcast_in) if self._split else [self.bcast_in]
        reduce_out = list(self.reduce_out) if self._split else [self.reduce_out]

        # Broadcast: a FIFO per child, written together when all of the group's have room.
        bcast_queues = {}
        for p, group in enumerate(self.groups):
            queues = []
            for c in group:
                q = fifo.SyncFIFO(width=_WORD, depth=depth)
                m.submodules[f"bcast_fifo{c}"] = q
                queues.append(q)
                bcast_queues[c] = q
                m.d.comb += [
                    self.bcast_out[c].payload.eq(q.r_data),
                    self.bcast_out[c].valid.eq(q.r_rdy),
                    q.r_en.eq(self.bcast_out[c].ready),
                ]
            room = Signal(name=f"bcast{p}_room")
            m.d.comb += room.eq(Cat(*(q.w_rdy for q in queues)).all())
            m.d.comb += bcast_in[p].ready.eq(room)
            for q in queues:
                m.d.comb += [q.w_data.eq(bcast_in[p].payload), q.w_en.eq(bcast_in[p].valid & room)]

        # Reduce: a FIFO per child, then the units.
        heads = []
        for c in range(k):
            head = _tagged().create(path=(f"child{c}",))
            _fifo_stream(m, f"reduce_fifo{c}", depth, self.reduce_in[c], head)
            heads.append(head)

        def unit(name, sources):
            u = SwarmxReduceUnit(len(sources), adder_latency=self._adder_latency)
            m.submodules[name] = u
            wiring.connect(m, sources[0], u.a)
            if len(sources) == 2:
                wiring.connect(m, sources[1], u.b)
            return u

        ua = unit("unit_a", heads[0:2])
        ub = unit("unit_b", heads[2:4]) if k >= 3 else None
        units = [u for u in (ua, ub) if u is not None]
        if self._split:
            tops = [ua, ub]
        else:
            uc = unit("unit_c", [ua.o] + ([ub.o] if ub is not None else []))
            units.append(uc)
            tops = [uc]
        for u, port in zip(tops, reduce_out):
            wiring.connect(m, u.o, wiring.flipped(port))
        error = 0
        for u in units:
            error = error | u.error
        m.d.comb += self.error.eq(error)
        if active(platform):
            self._formal(m, platform, bcast_in, reduce_out, bcast_queues)
        return m

    # ---- formal properties (docs/verification.md#formal) ------------------------------------
    def _formal(self, m, platform, bcast_in, reduce_out, bcast_queues):
        """Stream rules on every port; broadcast: each parent word reaches every child of its
        group exactly once (words taken - words given = that child's FIFO level)."""
        f = Properties(m, platform, self)
        for p, port in enumerate(bcast_in):
            f.input_stream(port, f"bcast_in{p}")
        for p, port in enumerate(reduce_out):
            f.output_stream(port, f"reduce_out{p}")
            f.cover(f"reduce_out{p}_last", port.valid & port.ready & port.payload.last)
        for c in range(self._children):
            f.input_stream(self.reduce_in[c], f"reduce_in{c}")
            f.output_stream(self.bcast_out[c], f"bcast_out{c}")
        for p, group in enumerate(self.groups):
            taken = bcast_in[p].valid & bcast_in[p].ready
            for c in group:
                out = self.bcast_out[c]
                copies = f.counter(f"bcast{c}", 8, taken, out.valid & out.ready)
                f.check(f"bcast{c}_each_word_once", copies == bcast_queues[c].level)
            if len(group) > 1:
                a, b = bcast_queues[group[0]], bcast_queues[group[-1]]
                f.cover(f"bcast{p}_child_ahead", (a.level == 0) & (b.level == self._fifo_depth))
        f.cover("error", self.error)


class SwarmxTree(wiring.Component):
    """SwarmX tree for ``leaves`` systems (the ``swarmx`` top of docs/architecture.md#verilog-tops).

    Ports
    -----
    bcast_in : In(stream(TaggedWord))                       from MemoryX
    reduce_in : In(stream(TaggedWord)).array(leaves)        gradients from system i
    bcast_out : Out(stream(TaggedWord)).array(leaves)       weights to system i
    reduce_out : Out(stream(TaggedWord))                    tree-order sum, to MemoryX
    error : Out(1)                                          sticky ``last`` mismatch, any node

    Latency: broadcast ``depth`` cycles, reduce ``depth * (2 L + 3)`` cycles (``depth`` =
    ``len(tree_shape(leaves))``, ``L = adder_latency``); one word per cycle both ways.
    """

    def __init__(self, leaves, *, fifo_depth=4, adder_latency=Fp32Add.LATENCY):
        try:
            self._shape = tree_shape(leaves)
        except ValueError as error:
            refuse(self, error)
        self._leaves = leaves
        self._fifo_depth = fifo_depth
        self._adder_latency = adder_latency
        _check_fifo_depth(self, fifo_depth)
        super().__init__({
            "bcast_in": In(_tagged()),
            "reduce_out": Out(_tagged()),
            "bcast_out": Out(_tagged()).array(leaves),
            "reduce_in": In(_tagged()).array(leaves),
            "error": Out(1),
        })

    @classmethod
    def from_config(cls, cfg):
        """The tree of ``cfg.swarmx_leaves`` leaves with ``cfg.swarmx_fifo_depth`` and adders of
        latency ``cfg.fp_latency``."""
        leaves, depth, latency = cls.config_key(cfg)
        return cls(leaves, fifo_depth=depth, adder_latency=latency)

    @staticmethod
    def config_key(cfg):
        """``(leaves, fifo_depth, adder_latency)`` of ``cfg``: all a tree of :meth:`from_config`
        depends on (its key as a shared block)."""
        return cfg.swarmx_leaves, cfg.swarmx_fifo_depth, cfg.fp_latency

    @property
    def leaves(self):
        return self._leaves

    @property
    def depth(self):
        return len(self._shape)

    @property
    def shape(self):
        return [list(level) for level in self._shape]

    @property
    def reduce_latency(self):
        return self.depth * SwarmxNode.reduce_latency(adder_latency=self._adder_latency)

    @property
    def adder_latency(self):
        return self._adder_latency

    @property
    def broadcast_latency(self):
        return self.depth

    def elaborate(self, platform):
        m = Module()
        levels = []
        for lv, level in enumerate(self._shape):
            nodes = []
            for j, k in enumerate(level):
                node = SwarmxNode(k, fifo_depth=self._fifo_depth, adder_latency=self._adder_latency)
                m.submodules[f"node_l{lv}_{j}"] = node
                nodes.append(node)
            levels.append(nodes)
        for i in range(self._leaves):
            node, slot = levels[0][i // 4], i % 4
            wiring.connect(m, wiring.flipped(self.reduce_in[i]), node.reduce_in[slot])
            wiring.connect(m, node.bcast_out[slot], wiring.flipped(self.bcast_out[i]))
        for lv in range(len(levels) - 1):
            for j, node in enumerate(levels[lv]):
                parent, slot = levels[lv + 1][j // 4], j % 4
                wiring.connect(m, node.reduce_out, parent.reduce_in[slot])
                wiring.connect(m, parent.bcast_out[slot], node.bcast_in)
        root = levels[-1][0]
        wiring.connect(m, wiring.flipped(self.bcast_in), root.bcast_in)
        wiring.connect(m, root.reduce_out, wiring.flipped(self.reduce_out))
        error = 0
        for level in levels:
            for node in level:
                error = error | node.error
        m.d.comb += self.error.eq(error)
        if active(platform):
            self._formal(m, platform)
        return m

    # ---- formal properties (docs/verification.md#formal) ------------------------------------
    def _formal(self, m, platform):
        """Stream rules at the tree's ports (the nodes' and units' own properties, asserted
        below the top, check every internal link)."""
        f = Properties(m, platform, self)
        f.input_stream(self.bcast_in, "bcast_in")
        f.output_stream(self.reduce_out, "reduce_out")
        for i in range(self._leaves):
            f.input_stream(self.reduce_in[i], f"reduce_in{i}")
            f.output_stream(self.bcast_out[i], f"bcast_out{i}")
        out = self.reduce_out
        f.cover("reduce_out_last", out.valid & out.ready & out.payload.last)
