"""Stream wrapper that turns a combinational floating-point core into a pipelined stream unit."""

from amaranth import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .formal import Properties, active
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
        if active(platform):
            platform.derive(result)      # result.i = core(operands.o): held when operands.o is
            self._formal(m, platform, [operands, result])
        return m

    # ---- formal properties (docs/verification.md#formal) ------------------------------------
    def _formal(self, m, platform, stages):
        """Stream rules at ``i`` and ``o``; words in flight = the stages' occupancy (a
        :class:`SkidBuffer` holds ``o.valid + ~i.ready`` words), at most 2 per stage."""
        f = Properties(m, platform, self)
        f.input_stream(self.i, "i")
        f.output_stream(self.o, "o")
        take = self.i.valid & self.i.ready
        give = self.o.valid & self.o.ready
        inflight = f.counter("inflight", 5, take, give)
        occupancy = 0
        for s in stages:
            occupancy = occupancy + s.o.valid + ~s.i.ready
        f.check("inflight_is_state", inflight == occupancy)
        m.d.comb += platform.probe(self, "inflight", 8).eq(inflight)     # for a parent's invariants
        f.check("capacity", inflight <= 2 * len(stages))
        f.check("offers_only_taken_words", ~self.o.valid | (inflight != 0))
        f.cover("full", ~self.i.ready)
        f.cover("full_rate", take & give)
