"""Stream wrapper that turns a combinational floating-point core into a pipelined stream unit."""

from amaranth import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .skid_buffer import SkidBuffer

__all__ = ["FpStreamUnit"]


class FpStreamUnit(wiring.Component):
    """``i`` -> :class:`SkidBuffer` -> combinational core -> :class:`SkidBuffer` -> ``o``.

    Subclasses pass the operand and result widths and implement :meth:`core`, returning a fresh
    combinational component with ports ``a: In(width_a)``, ``b: In(width_b)``, ``y: Out(out_width)``.

    Ports
    -----
    i : In(stream.Signature(StructLayout({"a": width_a, "b": width_b})))
        Operand pair (``a`` in the least significant bits of ``i.payload``).
    o : Out(stream.Signature(out_width))
        ``core(a, b)``.

    Contract
    --------
    * ``LATENCY = 2``: a pair accepted on ``i`` in cycle ``t`` is offered on ``o`` from cycle
      ``t + 2`` (input register, core, output register).
    * One result per cycle while ``o.ready`` stays high; results leave in input order.
    * ``o.valid``, ``o.payload`` and ``i.ready`` are register outputs (no combinational path from
      ``o.ready`` to ``i.ready``); ``o.valid`` never waits for ``o.ready`` and ``o.payload`` stays
      stable while ``o.valid & ~o.ready``.
    * Capacity 4 pairs in flight (two registered stages with a skid slot each).
    """

    LATENCY = 2

    def __init__(self, width_a, width_b, out_width):
        self._operands = data.StructLayout({"a": width_a, "b": width_b})
        self._out_width = out_width
        super().__init__({
            "i": In(stream.Signature(self._operands)),
            "o": Out(stream.Signature(out_width)),
        })

    def core(self):
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        m.submodules.operands = operands = SkidBuffer(self._operands)
        m.submodules.core = core = self.core()
        m.submodules.result = result = SkidBuffer(self._out_width)

        wiring.connect(m, wiring.flipped(self.i), operands.i)
        m.d.comb += [
            core.a.eq(operands.o.payload.a),
            core.b.eq(operands.o.payload.b),
            result.i.payload.eq(core.y),
            result.i.valid.eq(operands.o.valid),
            operands.o.ready.eq(result.i.ready),
        ]
        wiring.connect(m, result.o, wiring.flipped(self.o))
        return m
