"""Stream pipeline register with a skid slot."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .formal import Properties, active

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """Registered stream stage: breaks the valid/payload path *and* the ready path.

    Ports
    -----
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))

    Contract
    --------
    * Latency 1: a word accepted on ``i`` in cycle ``t`` is offered on ``o`` from cycle ``t + 1``.
    * Throughput 1 word/cycle while ``o.ready`` stays high.
    * ``o.valid``, ``o.payload`` and ``i.ready`` are register outputs (no combinational path
      through the buffer); ``i.ready`` is low only while the skid slot is occupied.
    * Capacity 2 words (output register + skid slot); order is preserved.
    """

    def __init__(self, shape):
        self._shape = shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    @property
    def shape(self):
        return self._shape

    def elaborate(self, platform):
        m = Module()
        skid = Signal(self._shape)
        skid_valid = Signal()

        m.d.comb += self.i.ready.eq(~skid_valid)
        with m.If(self.o.ready | ~self.o.valid):
            with m.If(skid_valid):
                m.d.sync += [self.o.payload.eq(skid), self.o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += self.o.valid.eq(self.i.valid)
                with m.If(self.i.valid):
                    m.d.sync += self.o.payload.eq(self.i.payload)
        with m.Elif(self.i.valid & ~skid_valid):
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(1)]
        if active(platform):
            self._formal(m, platform, skid_valid)
        return m

    # ---- formal properties (docs/verification.md#formal) ------------------------------------
    def _formal(self, m, platform, skid_valid):
        f = Properties(m, platform, self)
        f.input_stream(self.i, "i")
        f.output_stream(self.o, "o")
        take = self.i.valid & self.i.ready
        give = self.o.valid & self.o.ready
        held = f.counter("held", 3, take, give)           # words in - words out
        f.check("held_is_state", held == self.o.valid + skid_valid)
        f.check("capacity", held <= 2)
        f.check("offers_only_taken_words", ~self.o.valid | (held != 0))
        f.cover("full", ~self.i.ready & self.o.valid)
        f.cover("through_at_full_rate", take & give)
