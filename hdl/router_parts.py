"""The parts of the color router (docs/router.md): per-input channel buffers, round-robin
arbiters and the one-hot AND-OR crossbar. :class:`hdl.router.Router` joins them and holds the
route table, the credits and the configuration registers.

Every selection is one-hot AND-OR: a grant bit gates its channel's head word and the gated words
are ORed, so there is no encoder from a one-hot grant to an index and no wide multiplexer; each
channel memory has one write port and one read port (its head).
"""

from amaranth import Cat, Const, Module, Mux, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from arch.wavelet import COLOR_BITS, DATA_BITS

__all__ = ["DATA_CTRL", "ChannelBuffers", "RoundRobinArbiter", "and_or", "onehot_index"]

DATA_CTRL = DATA_BITS + 1     # a channel word: data and ctrl (the color is the channel's)


class ChannelBuffers(wiring.Component):
    """The virtual channels of one input port: ``colors`` FIFOs of ``depth`` words, each a
    memory with one write port and one asynchronous read port at its head.

    Ports: ``w_en``, ``w_color``, ``w_data`` write a word into channel ``w_color``; ``pop[c]``
    drops the head of channel ``c`` (any set of channels in one cycle); ``heads`` (``colors *
    DATA_CTRL`` bits, channel ``c`` at ``c * DATA_CTRL``) the head words; ``nonempty``, ``full``
    one bit per channel; ``counts`` the words per channel (``count_width`` bits each, for the
    router's formal properties). A write and a pop of one channel in one cycle keep its count.
    """

    def __init__(self, colors, depth):
        self._colors, self._depth = colors, depth
        self.count_width = Shape.cast(range(depth + 1)).width
        super().__init__({
            "w_en": In(1), "w_color": In(COLOR_BITS), "w_data": In(DATA_CTRL), "pop": In(colors),
            "heads": Out(colors * DATA_CTRL), "nonempty": Out(colors), "full": Out(colors),
            "counts": Out(colors * self.count_width),
        })

    def elaborate(self, platform):
        m = Module()
        C, D = self._colors, self._depth
        cw = Shape.cast(range(D + 1)).width
        pw = max(1, (D - 1).bit_length())
        counts = Signal(C * cw, name="counts")
        rd = Signal(C * pw, name="rd")
        wr = Signal(C * pw, name="wr")
        heads = []
        for c in range(C):
            n = counts[c * cw:(c + 1) * cw]
            r, w = rd[c * pw:(c + 1) * pw], wr[c * pw:(c + 1) * pw]
            mem = Memory(shape=DATA_CTRL, depth=D, init=[])
            m.submodules[f"vc{c}"] = mem
            rp = mem.read_port(domain="comb")
            wp = mem.write_port()
            write = Signal(name=f"write{c}")
            m.d.comb += [
                write.eq(self.w_en & (self.w_color == c)),
                wp.en.eq(write), wp.addr.eq(w), wp.data.eq(self.w_data),
                rp.addr.eq(r),
            ]
            heads.append(rp.data)
            pop = self.pop[c]
            with m.If(pop):
                m.d.sync += r.eq(r + 1)
            with m.If(write):
                m.d.sync += w.eq(w + 1)
            with m.If(write != pop):
                m.d.sync += n.eq(Mux(write, n + 1, n - 1))
        m.d.comb += [
            self.heads.eq(Cat(heads)),
            self.counts.eq(counts),
            self.nonempty.eq(Cat(counts[c * cw:(c + 1) * cw] != 0 for c in range(C))),
            self.full.eq(Cat(counts[c * cw:(c + 1) * cw] == D for c in range(C))),
        ]
        return m


class RoundRobinArbiter(wiring.Component):
    """One output's arbiter over ``n`` requests: ``grant`` (one-hot or zero) is the lowest request
    above the last grant, else the lowest request; the pointer moves on every grant."""

    def __init__(self, n):
        self._n = n
        super().__init__({"req": In(n), "grant": Out(n)})

    def elaborate(self, platform):
        m = Module()
        N = self._n
        above = Signal(N, init=(1 << N) - 1)     # requests strictly above the last grant
        hi = Signal(N)
        pick = Signal(N)
        m.d.comb += [
            hi.eq(self.req & above),
            pick.eq(Mux(hi != 0, hi, self.req)),
            self.grant.eq(pick & (~pick + 1)[:N]),
        ]
        with m.If(self.grant != 0):
            m.d.sync += above.eq(~(self.grant | (self.grant - 1)[:N]))
        return m


def and_or(select, words, width):
    """OR of ``words[k]`` (each ``width`` bits) over the set bits ``k`` of ``select``."""
    acc = Const(0, width)
    for k, w in enumerate(words):
        acc = acc | (w & select[k].replicate(width))
    return acc


def onehot_index(select, values, width):
    """``values[k]`` for the one set bit ``k`` of ``select`` (0 when none), as AND-OR: bit ``b`` of
    the result is the OR of the ``select`` bits whose value has bit ``b`` set."""
    bits = []
    for b in range(width):
        terms = [select[k] for k, v in enumerate(values) if (v >> b) & 1]
        bits.append(Cat(terms).any() if terms else Const(0))
    return Cat(bits)
