"""The parts of the color router (docs/router.md#structure): per-input channel buffers read by
each output at its own pace from its own memory copy, round-robin arbiters with registered
requests, and the AND-OR helpers.
:class:`hdl.router.Router` joins them and holds the route table, the credits and the
configuration registers.

Timing rules the parts keep (the router closes a hop in one cycle): nothing between the state
flip-flops and a grant is an adder, a comparison or a carry chain (the flags a request needs,
``pending``, ``full``, the requests themselves, are flip-flops; the arbiters are OR trees); an
output selects a channel of an input by that input's memory copy's read address, which needs only
that input's requests, so no wide multiplexer waits for the grant; an output's next requests
follow its own grants only (the AND over the readers that frees a slot ends in a flip-flop).
"""

from amaranth import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from arch.wavelet import COLOR_BITS, DATA_BITS

from .formal import Properties, active
from .logic import and_all, or_all, or_tree

__all__ = ["DATA_CTRL", "ChannelBuffers", "RoundRobinArbiter", "prefix_or"]

DATA_CTRL = DATA_BITS + 1     # a channel word: data and ctrl (the color is the channel's)


class ChannelBuffers(wiring.Component):
    """The virtual channels of one input port: ``colors`` FIFOs of ``depth`` words, each word read
    once by every *reader* the channel is routed to, each reader at its own pace.

    The words live in one memory per *copy* (``colors * depth`` words, channel ``c``'s slots at
    ``c * depth``), each with one write port (every word is written into every copy) and one
    asynchronous read port; copy ``j`` belongs to reader ``copy_reader[j]`` (two copies may share a
    reader: the RAMP's two channels) and reads the next word that reader has not sent of channel
    ``read_select[j]``. So a reader selects a channel by a read address instead of a wide
    multiplexer after the memories, and an output reads on while another copy of a multicast
    waits. A word's slot is freed (``freed``) in the cycle after the last of its routed readers
    has sent it.

    Ports: ``w_en``, ``w_color``, ``w_data`` write a word into channel ``w_color`` (``w_color <
    colors`` when ``w_en``); ``routed`` (``readers * colors`` bits, reader-major) the channels each
    reader is routed from (constant while a channel holds words under a route: the router's
    ``BUSY_REWRITE`` rule); ``take`` (same layout) reader ``r`` sends its next word of channel
    ``c`` (only where ``pending``); ``read_select`` (``len(copy_reader) * colors`` bits, one-hot or
    zero per copy) and ``read_data`` (``len(copy_reader) * DATA_CTRL`` bits) the copies' channels
    and their readers' next words, in the same cycle (combinational); ``pending`` (reader-major) reader ``r`` has a
    word of channel ``c`` not yet sent, a flip-flop, and ``next_pending`` the value it takes at
    the clock edge (the router's registered requests are loaded from it); ``nonempty``, ``full``
    one bit per channel (it holds a word / ``depth`` words), flip-flops (bits of the channel's
    thermometer word count); ``freed`` one bit per channel, a flip-flop: the head slot leaves this
    cycle (the credit a link sends back); ``counts`` the words per channel (``count_width`` bits
    each, for the router's formal properties). Latency: a word written in cycle ``t`` can be
    taken from ``t + 1``; a word whose last reader takes it in ``t`` is freed in ``t + 1`` (its
    slot can be written again from ``t + 2``). A reader a channel is not routed to keeps count
    of its words too (they are pending for it), so a route written while the channel holds
    words that came with none sends them all.
    """

    def __init__(self, colors, depth, copy_reader):
        self._colors, self._depth = colors, depth
        self._copy_reader = tuple(copy_reader)
        self._readers = max(self._copy_reader) + 1
        self.count_width = Shape.cast(range(depth + 1)).width
        self.color_width = max(1, (colors - 1).bit_length())
        R, C = self._readers, colors
        super().__init__({
            "w_en": In(1), "w_color": In(COLOR_BITS), "w_data": In(DATA_CTRL),
            "routed": In(R * C), "take": In(R * C),
            "read_select": In(len(self._copy_reader) * colors),
            "read_data": Out(len(self._copy_reader) * DATA_CTRL),
            "pending": Out(R * C), "next_pending": Out(R * C),
            "nonempty": Out(C), "full": Out(C), "freed": Out(C),
            "counts": Out(C * self.count_width),
        })

    def elaborate(self, platform):
        # Written per state bit over all channels at once (C-bit vectors): few, wide nets, which is
        # what keeps event-driven simulation fast. Counts are thermometer codes (bit vector n:
        # the channels whose count is above n), pointers one-hot rings: no adder anywhere.
        m = Module()
        C, D, R = self._colors, self._depth, self._readers
        kw = self.color_width
        pw = max(1, (D - 1).bit_length())
        freed = self.freed
        ones = Const((1 << C) - 1, C)
        w_channel = Signal(C, name="w_channel")          # one-hot w_color (not gated by w_en)
        write = Signal(C, name="write")
        m.d.comb += [w_channel.eq(Cat(self.w_color == c for c in range(C))),
                     write.eq(w_channel & self.w_en.replicate(C))]

        def vec(name, init=0):
            return Signal(C, name=name, init=init)

        def named(name, value):
            """``value`` as a signal (an expression used twice would be written out twice)."""
            sig = vec(name)
            m.d.comb += sig.eq(value)
            return sig

        def thermometer(name, up, down):
            """Counts moved by ``up`` and ``down`` (C-bit vectors): their levels and next levels."""
            levels = [vec(f"{name}_gt{n}") for n in range(D)]
            nxt = [vec(f"{name}_gt{n}_next") for n in range(D)]
            up, down = named(f"{name}_up", up), named(f"{name}_down", down)
            hold = named(f"{name}_hold", ~(up | down))
            for n in range(D):
                below = levels[n - 1] if n else ones
                above = levels[n + 1] if n + 1 < D else Const(0, C)
                m.d.comb += nxt[n].eq((up & below) | (down & above) | (hold & levels[n]))
                m.d.sync += levels[n].eq(nxt[n])
            return levels, nxt

        def ring(name, advance):
            """Per channel a one-hot position ``0..D-1`` moved on by ``advance``: its binary bits."""
            advance = named(f"{name}_advance", advance)
            slots = [vec(f"{name}_at{j}", init=ones.value if j == 0 else 0) for j in range(D)]
            for j in range(D):
                m.d.sync += slots[j].eq((advance & slots[j - 1]) | (~advance & slots[j]))
            return [named(f"{name}_bit{b}", or_all([slots[j] for j in range(D) if j >> b & 1] or [Const(0, C)]))
                    for b in range(pw)]

        occupancy, _ = thermometer("occupancy", write & ~freed, freed & ~write)
        m.d.comb += [self.nonempty.eq(occupancy[0]), self.full.eq(occupancy[D - 1])]
        cw = self.count_width
        m.d.comb += self.counts.eq(Cat(Value.cast(sum(level[c] for level in occupancy))[:cw] for c in range(C)))
        wr = ring("wr", write)
        w_addr = Signal(pw + kw, name="w_addr")
        m.d.comb += w_addr.eq(Cat(*[(w_channel & bit).any() for bit in wr], self.w_color[:kw]))
        color_bits = [Const(sum(1 << c for c in range(C) if c >> k & 1), C) for k in range(kw)]

        # Per reader: words not yet sent (left), words sent but not yet freed (ahead), the read
        # position; a slot is freed the cycle after every routed reader has sent its word.
        done, rd, lefts, aheads = [], [], [], []
        any_routed = or_all([self.routed.word_select(r, C) for r in range(R)])
        for r in range(R):
            routed, take = self.routed.word_select(r, C), self.take.word_select(r, C)
            drop = freed & ~routed                          # an unrouted reader's word leaves
            advance = named(f"advance{r}", take | drop)
            left, left_next = thermometer(f"left{r}", write & ~advance, advance & ~write)
            ahead, _ = thermometer(f"ahead{r}", take & ~(freed & routed), freed & routed & ~take)
            m.d.comb += [self.pending.word_select(r, C).eq(left[0]),
                         self.next_pending.word_select(r, C).eq(left_next[0])]
            second = ahead[1] if D > 1 else Const(0, C)
            done.append(~routed | take | second | (ahead[0] & ~freed))
            rd.append(ring(f"rd{r}", advance))
            lefts.append(left)
            aheads.append(ahead)
        m.d.sync += freed.eq(any_routed & and_all(done))

        for j, r in enumerate(self._copy_reader):
            mem = Memory(shape=DATA_CTRL, depth=C * D, init=[])
            m.submodules[f"copy{j}"] = mem
            wp = mem.write_port()
            rp = mem.read_port(domain="comb")
            # The address as an AND-OR of the one-hot choice with the channels' addresses (no
            # encoder, then multiplexer, between the choice and the memory).
            select = self.read_select.word_select(j, C)
            m.d.comb += [
                wp.en.eq(self.w_en), wp.addr.eq(w_addr), wp.data.eq(self.w_data),
                rp.addr.eq(Cat(*[(select & bit).any() for bit in rd[r]],
                               *[(select & bit).any() for bit in color_bits])),
                self.read_data.word_select(j, DATA_CTRL).eq(rp.data),
            ]
        if active(platform):
            self._formal(m, platform, any_routed, occupancy, lefts, aheads)
        return m

    def _formal(self, m, platform, any_routed, occupancy, lefts, aheads):
        """Per channel: every word is sent once by each reader routed to it and freed in the
        cycle after its last copy; an unrouted reader has sent nothing; the counts are
        thermometer codes. Rules: a reader takes only a pending word; a channel's routes change
        only while it holds no word under a route."""
        f = Properties(m, platform, self)
        C, R = self._colors, self._readers
        ones = Const((1 << C) - 1, C)

        def count(levels, c):
            return sum(level[c] for level in levels)

        def is_code(levels):
            return and_all([levels[n] | ~levels[n + 1] for n in range(len(levels) - 1)] or [ones])
        holding = self.nonempty & any_routed
        all_sent = any_routed
        f.check("occupancy_code", is_code(occupancy) == ones)
        for r in range(R):
            routed, take, pending = (v.word_select(r, C) for v in (self.routed, self.take, self.pending))
            f.rule(f"take_pending{r}", (take & ~pending) == 0)
            f.rule(f"route_steady{r}", ((routed ^ f.past(routed, f"routed{r}")) & f.past(holding, f"holding{r}")) == 0)
            f.check(f"reader_codes{r}", (is_code(lefts[r]) & is_code(aheads[r])) == ones)
            for c in range(C):
                f.check(f"reader_words{r}_{c}", Mux(routed[c],
                                                    count(lefts[r], c) + count(aheads[r], c) == count(occupancy, c),
                                                    (count(lefts[r], c) == count(occupancy, c)) & ~aheads[r][0][c]))
            all_sent = all_sent & (~routed | aheads[r][0])
        f.check("freed_after_last_copy", (self.freed & ~all_sent) == 0)
        f.check("freed_next_cycle", (f.past(all_sent & ~self.freed, "unfreed") & ~self.freed) == 0)


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


