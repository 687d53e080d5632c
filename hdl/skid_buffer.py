"""Stream pipeline register with a skid slot."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

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
        return m
