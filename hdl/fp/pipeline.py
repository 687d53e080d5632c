"""Stream wrapper that turns a floating-point core into a pipelined stream unit, and the pipeline
cuts (:class:`Stages`) by which a core is split into register stages."""

from amaranth import Module, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..formal import Properties, active
from ..skid_buffer import SkidBuffer

__all__ = ["FpStreamUnit", "Stages", "MIN_LATENCY", "MAX_LATENCY"]

MIN_LATENCY = 2     # the input and output registers around a combinational core
MAX_LATENCY = 6     # + up to 4 register stages inside the core


class Stages:
    """The register stages inside a core, in program order.

    A core calls :meth:`cut` at each of its candidate cut points with the values that cross it;
    at an *active* cut (``point in cuts``) every value, and every value carried with
    :meth:`carry`, passes through a register enabled by ``en`` (the whole pipeline advances in
    lock step); at an inactive one the values pass unchanged. With no active cut the core is
    combinational.
    """

    def __init__(self, m, cuts=(), en=None, prefix="stage"):
        self.m, self.cuts, self.en, self.prefix = m, frozenset(cuts), en, prefix
        self._carried = {}
        self.active = 0

    def carry(self, **values):
        """Values computed early and used only at the end (flags of special operands): they are
        delayed through every active cut that follows."""
        self._carried.update(values)

    def carried(self, name):
        return self._carried[name]

    def cut(self, point, **values):
        """``values`` after cut ``point``: registered copies if the cut is active, else themselves
        (a dict in the order given)."""
        if point not in self.cuts:
            return values
        self.active += 1
        out = {}
        for group in (values, self._carried):
            for name, v in group.items():
                v = Value.cast(v)
                r = Signal(v.shape(), name=f"{self.prefix}{self.active}_{name}")
                with self.m.If(self.en):
                    self.m.d.sync += r.eq(v)
                out[name] = r
        self._carried = {k: out[k] for k in self._carried}
        return {k: out[k] for k in values}


class FpStreamUnit(wiring.Component):
    """``i`` -> :class:`SkidBuffer` -> core (``latency - 2`` register stages) -> :class:`SkidBuffer` -> ``o``.

    Subclasses pass the operand and result widths and implement :meth:`core`, returning a fresh
    core component with ports ``a: In(width_a)``, ``b: In(width_b)``, ``y: Out(out_width)`` and,
    when ``stages > 0``, ``en: In(1)`` (advance the core's register stages).

    Ports
    -----
    i : In(stream.Signature(StructLayout({"a": width_a, "b": width_b})))
        Operand pair (``a`` in the least significant bits of ``i.payload``).
    o : Out(stream.Signature(out_width))
        ``core(a, b)``.

    Contract
    --------
    * ``LATENCY = latency`` (``MIN_LATENCY`` 2 .. ``MAX_LATENCY`` 6, ``Config.fp_latency``; default 2):
      a pair accepted on ``i`` in cycle ``t`` is offered on ``o`` from cycle ``t + LATENCY``
      (input register, ``LATENCY - 2`` core stages, output register).
    * One result per cycle while ``o.ready`` stays high; results leave in input order.
    * ``o.valid``, ``o.payload`` and ``i.ready`` are register outputs (no combinational path from
      ``o.ready`` to ``i.ready``); ``o.valid`` never waits for ``o.ready`` and ``o.payload`` stays
      stable while ``o.valid & ~o.ready``. The core's stages advance together while the output
      register stage can take a word (its registered ``i.ready``).
    * Capacity ``LATENCY + 2`` pairs in flight (two skid stages of 2 and the core's stages).
    """

    LATENCY = MIN_LATENCY

    def __init__(self, width_a, width_b, out_width, latency=MIN_LATENCY):
        if not MIN_LATENCY <= latency <= MAX_LATENCY:
            raise ValueError(f"latency must be in {MIN_LATENCY}..{MAX_LATENCY}, got {latency}")
        self.LATENCY = latency
        self._operands = data.StructLayout({"a": width_a, "b": width_b})
        self._out_width = out_width
        super().__init__({
            "i": In(stream.Signature(self._operands)),
            "o": Out(stream.Signature(out_width)),
        })

    @property
    def stages(self):
        return self.LATENCY - MIN_LATENCY

    def core(self):
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        m.submodules.operands = operands = SkidBuffer(self._operands)
        m.submodules.core = core = self.core()
        m.submodules.result = result = SkidBuffer(self._out_width)

        wiring.connect(m, wiring.flipped(self.i), operands.i)
        advance = result.i.ready        # a register: the stages move in lock step
        valid = operands.o.valid
        stage_valids = []
        for k in range(self.stages):
            v = Signal(name=f"stage{k + 1}_valid")
            with m.If(advance):
                m.d.sync += v.eq(valid)
            valid = v
            stage_valids.append(v)
        if self.stages:
            m.d.comb += core.en.eq(advance)
        m.d.comb += [
            core.a.eq(operands.o.payload.a),
            core.b.eq(operands.o.payload.b),
            result.i.payload.eq(core.y),
            result.i.valid.eq(valid),
            operands.o.ready.eq(advance),
        ]
        wiring.connect(m, result.o, wiring.flipped(self.o))
        if active(platform):
            platform.derive(result)      # result.i = core(operands.o), or the core's last stage: held
            self._formal(m, platform, [operands, result], stage_valids)
        return m

    # ---- formal properties (docs/verification.md#formal) ------------------------------------
    def _formal(self, m, platform, stages, core_valids=()):
        """Stream rules at ``i`` and ``o``; words in flight = the stages' occupancy (a
        :class:`SkidBuffer` holds ``o.valid + ~i.ready`` words, at most 2; a register stage of the
        core its valid bit)."""
        f = Properties(m, platform, self)
        f.input_stream(self.i, "i")
        f.output_stream(self.o, "o")
        take = self.i.valid & self.i.ready
        give = self.o.valid & self.o.ready
        inflight = f.counter("inflight", 5, take, give)
        occupancy = 0
        for s in stages:
            occupancy = occupancy + s.o.valid + ~s.i.ready
        for v in core_valids:
            occupancy = occupancy + v
        f.check("inflight_is_state", inflight == occupancy)
        m.d.comb += platform.probe(self, "inflight", 8).eq(inflight)     # for a parent's invariants
        f.check("capacity", inflight <= 2 * len(stages) + len(core_valids))
        f.check("offers_only_taken_words", ~self.o.valid | (inflight != 0))
        f.cover("full", ~self.i.ready)
        f.cover("full_rate", take & give)
