"""The parts of the color router (docs/router.md#structure): per-input channel buffers with one
memory copy per output, round-robin arbiters with registered requests, and the AND-OR helpers.
:class:`hdl.router.Router` joins them and holds the route table, the credits and the
configuration registers.

Timing rules the parts keep (the router closes a hop in one cycle): nothing between the state
flip-flops and a grant is an adder, a comparison or a carry chain (the flags a request needs,
``nonempty``, ``full``, the requests themselves, are flip-flops; the arbiters are OR trees); an
output selects a channel of an input by that input's memory copy's read address, which needs only
that input's requests, so no wide multiplexer waits for the grant.
"""

from amaranth import Cat, Const, Module, Mux, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from arch.wavelet import COLOR_BITS, DATA_BITS

from .formal import Properties, active

__all__ = ["DATA_CTRL", "ChannelBuffers", "RoundRobinArbiter", "and_or", "onehot_index", "or_tree",
           "prefix_or"]

DATA_CTRL = DATA_BITS + 1     # a channel word: data and ctrl (the color is the channel's)


class ChannelBuffers(wiring.Component):
    """The virtual channels of one input port: ``colors`` FIFOs of ``depth`` words, read by
    ``readers`` (the router's outputs) independently.

    The words live in one memory per reader (``colors * depth`` words, channel ``c``'s slots at
    ``c * depth``), each with one write port (every word is written into every copy) and one
    asynchronous read port: reader ``j`` reads the head of channel ``read_color[j]``. So a reader
    selects a channel by a read address instead of a wide multiplexer after the memories (on an
    FPGA with LUT memories, such as the ECP5, the address decoding is the memory's own).

    Ports: ``w_en``, ``w_color``, ``w_data`` write a word into channel ``w_color`` (``w_color <
    colors`` when ``w_en``); ``pop[c]`` drops the head of channel ``c`` (any set of channels in one
    cycle; only a non-empty one); ``read_color`` (``readers * color_width`` bits) and
    ``read_data`` (``readers * DATA_CTRL`` bits) the readers' channels and their head words, in
    the same cycle (combinational); ``nonempty``, ``full`` one bit per channel, flip-flops (bits of
    the channel's one-hot word count: no adder or comparison on the way to a request); ``next_nonempty``
    the value ``nonempty`` takes at the clock edge (the router's registered requests are loaded
    from it); ``counts`` the words per channel (``count_width`` bits each, for the router's formal
    properties). A write and a pop of one channel in one cycle keep its count. Latency: a word
    written in cycle ``t`` is a head (readable) from ``t + 1``.
    """

    def __init__(self, colors, depth, readers):
        self._colors, self._depth, self._readers = colors, depth, readers
        self.count_width = Shape.cast(range(depth + 1)).width
        self.color_width = max(1, (colors - 1).bit_length())
        super().__init__({
            "w_en": In(1), "w_color": In(COLOR_BITS), "w_data": In(DATA_CTRL), "pop": In(colors),
            "read_color": In(readers * self.color_width), "read_data": Out(readers * DATA_CTRL),
            "nonempty": Out(colors), "full": Out(colors), "next_nonempty": Out(colors),
            "counts": Out(colors * self.count_width),
        })

    def elaborate(self, platform):
        m = Module()
        C, D, R = self._colors, self._depth, self._readers
        cw, kw = self.count_width, self.color_width
        pw = max(1, (D - 1).bit_length())
        counts = Signal(C * cw, name="counts")
        rd = Signal(C * pw, name="rd")
        wr = Signal(C * pw, name="wr")
        write = Signal(C, name="write")
        w_addr = Signal(pw + kw, name="w_addr")
        m.d.comb += [
            write.eq(Cat(self.w_en & (self.w_color == c) for c in range(C))),
            w_addr.eq(Cat(wr.word_select(self.w_color[:kw], pw), self.w_color[:kw])),
        ]
        for j in range(R):
            mem = Memory(shape=DATA_CTRL, depth=C * D, init=[])
            m.submodules[f"copy{j}"] = mem
            wp = mem.write_port()
            rp = mem.read_port(domain="comb")
            color = self.read_color.word_select(j, kw)
            m.d.comb += [
                wp.en.eq(self.w_en), wp.addr.eq(w_addr), wp.data.eq(self.w_data),
                rp.addr.eq(Cat(rd.word_select(color, pw), color)),
                self.read_data.word_select(j, DATA_CTRL).eq(rp.data),
            ]
        for c in range(C):
            r, w = rd[c * pw:(c + 1) * pw], wr[c * pw:(c + 1) * pw]
            pop = self.pop[c]
            with m.If(pop):
                m.d.sync += r.eq(r + 1)
            with m.If(write[c]):
                m.d.sync += w.eq(w + 1)
            # The count, one-hot (bit n set when the channel holds n words): the flags are its
            # bits, and it moves by a shift, without an adder.
            occ = Signal(D + 1, name=f"occupancy{c}", init=1)
            up, down = write[c] & ~pop, pop & ~write[c]
            m.d.sync += occ.eq(Mux(up, occ << 1, Mux(down, occ >> 1, occ)))
            m.d.comb += [
                self.nonempty[c].eq(~occ[0]),
                self.full[c].eq(occ[D]),
                self.next_nonempty[c].eq(write[c] | (~occ[0] & ~(pop & occ[1]))),
                counts[c * cw:(c + 1) * cw].eq(onehot_index(occ, range(D + 1), cw)),
            ]
        m.d.comb += self.counts.eq(counts)
        return m


class RoundRobinArbiter(wiring.Component):
    """One output's arbiter over ``groups * size`` requests (request ``k = g * size + c``: the
    router's channel ``k = input * C + color``), its request vector in flip-flops.

    Ports: ``next_want`` the channels that want the output next cycle (the caller's next-state
    logic); ``want`` the same, registered (this cycle's); ``elig`` (``size`` bits, the same for
    every group) the positions that may go this cycle (per color: credit, ``accept``) and ``free``
    whether any may (the output register is free or being read); both combinational. The requests
    are ``want & elig`` while ``free``. ``grant`` (one-hot or zero) is the lowest request above
    the last grant, else the lowest request; the pointer moves on every grant (at the clock edge);
    ``any`` = some request; ``denied = want & ~grant``. The same choice in two steps, for the
    crossbar: ``local`` (one-hot or zero per group) is the request each group would give (the
    same rule on the group's slice of the pointer), ``group`` (one-hot or zero) the winning group,
    ``grant = local & group & free``; ``local`` and ``group`` do not wait for ``free`` (an output's
    ``ready``, often its latest signal), which only gates ``grant``, ``denied`` and ``any``.

    Request ``k`` is beaten when, above the pointer, a request above the pointer comes before it
    in its group or in an earlier group; when not above it, any request above the pointer or any
    request before it. The earlier groups' requests are ORed per position from flip-flops first
    and gated by ``elig`` last; no carry chain, no comparison."""

    def __init__(self, groups, size):
        self._groups, self._size = groups, size
        n = groups * size
        super().__init__({"next_want": In(n), "elig": In(size), "free": In(1), "want": Out(n),
                          "grant": Out(n), "denied": Out(n), "local": Out(n), "group": Out(groups),
                          "any": Out(1)})

    def elaborate(self, platform):
        m = Module()
        G, S = self._groups, self._size
        N = G * S
        above = Signal(N, init=(1 << N) - 1)     # requests strictly above the last grant
        want_above = Signal(N)
        elig = self.elig
        req = Signal(N)
        hi = Signal(N)                           # requests above the pointer
        before_hi = Signal(G)    # per group: a request above the pointer in an earlier group
        before_any = Signal(G)   # ... any request above the pointer, or any in an earlier group
        next_above = Signal(N)

        def part(v, g):
            return v[g * S:(g + 1) * S]

        # Per group and position, from flip-flops only: a (want & above), a want of that position
        # in an earlier group; a (want & above) of that position anywhere.
        wa_all = or_tree((part(want_above, g) for g in range(G)), S)
        wa_before = [or_tree((part(want_above, h) for h in range(g)), S) for g in range(G)]
        w_before = [or_tree((part(self.want, h) for h in range(g)), S) for g in range(G)]
        m.d.comb += [
            want_above.eq(self.want & above),
            req.eq(self.want & elig.replicate(G)),
            hi.eq(want_above & elig.replicate(G)),
            before_hi.eq(Cat((elig & wa_before[g]).any() for g in range(G))),
            before_any.eq(Cat((elig & (wa_all | w_before[g])).any() for g in range(G))),
        ]
        local, beaten, group = [], [], []
        for g in range(G):
            a, h, r = part(above, g), part(hi, g), part(req, g)
            h_below, r_below = prefix_or(m, h, exclusive=True), prefix_or(m, r, exclusive=True)
            local.append(r & ~((a & h_below) | (~a & (h.any().replicate(S) | r_below))))
            beaten.append((a & (before_hi[g].replicate(S) | h_below)) |
                          (~a & (before_any[g].replicate(S) | r_below)))
            group.append((h.any() & ~before_hi[g]) | (~h.any() & r.any() & ~before_any[g]))
        lose = Cat(beaten) | ~elig.replicate(G) | ~self.free.replicate(N)
        m.d.comb += [
            self.local.eq(Cat(local)),
            self.grant.eq(self.want & ~lose),
            self.denied.eq(self.want & lose),
            self.group.eq(Cat(group)),
            self.any.eq(req.any() & self.free),
        ]
        groups_below = prefix_or(m, self.group, exclusive=True)   # groups above the winning one
        m.d.comb += next_above.eq(Mux(self.any, Cat(
            groups_below[g].replicate(S) |
            (self.group[g].replicate(S) & prefix_or(m, part(self.local, g), exclusive=True))
            for g in range(G)), above))
        m.d.sync += [
            above.eq(next_above),
            self.want.eq(self.next_want),
        ]
        if active(platform):
            f = Properties(m, platform, self)
            f.check("above_is_a_suffix", (above & (above << 1)[:N]) == (above << 1)[:N])
        return m


def prefix_or(m, value, *, exclusive=False):
    """Bit ``k`` = OR of the bits ``0..k`` of ``value`` (``0..k-1`` when ``exclusive``), as a
    log-depth tree of shifted ORs (no carry chain), each level a signal of ``m`` (an expression
    would hold the level below twice, doubling per level)."""
    n = len(value)
    acc = value
    step = 1
    while step < n:
        level = Signal(n)
        m.d.comb += level.eq((acc | (acc << step))[:n])
        acc = level
        step *= 2
    return (acc << 1)[:n] if exclusive else acc


def or_tree(values, width):
    """OR of ``values`` (each ``width`` bits) as a balanced tree."""
    values = list(values)
    if not values:
        return Const(0, width)
    while len(values) > 1:
        values = [values[i] | values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def and_or(select, words, width):
    """OR of ``words[k]`` (each ``width`` bits) over the set bits ``k`` of ``select``."""
    return or_tree((w & select[k].replicate(width) for k, w in enumerate(words)), width)


def onehot_index(select, values, width):
    """``values[k]`` for the one set bit ``k`` of ``select`` (0 when none), as AND-OR: bit ``b`` of
    the result is the OR of the ``select`` bits whose value has bit ``b`` set."""
    bits = []
    for b in range(width):
        terms = [select[k] for k, v in enumerate(values) if (v >> b) & 1]
        bits.append(Cat(terms).any() if terms else Const(0))
    return Cat(bits)
