"""Formal statements of the stream rules, stated once in the RTL (docs/verification.md#formal).

A block states its properties in a method of its own (``_formal``), called from ``elaborate``
only when the block is elaborated for a proof: ``platform == "formal"``, the convention
Amaranth's own FIFOs use for their pointer invariants. :class:`FormalPlatform` is that platform
(a ``str`` equal to ``"formal"``) and also knows which component is the top of the proof, because
a stream rule is an *assumption* about the environment at the top (``Assume``) but an *assertion*
about the neighbouring RTL everywhere below it (``Assert``): a nested block proves that its
producer keeps the rules it relies on. Generated Verilog and simulation (``platform=None``) carry
none of these statements.

The flow that proves them (bounded model checking and k-induction with Yosys) is
``sim.kit.formal``; ``make formal`` runs the proofs of ``sim.formal``.
"""

from amaranth import Signal, Value
from amaranth.hdl import Assert, Assume, Cover

__all__ = ["FormalPlatform", "active", "is_top", "Properties"]


class FormalPlatform(str):
    """``platform`` argument of a formal elaboration: equal to ``"formal"``, plus the top
    component (``top``), the bound of the consumer's stalls assumed at the top (``fair_stall``:
    ``None`` = any stall, ``R`` = at most ``R`` stalled cycles in a row) and a register of
    the statements made (``statements``: ``(kind, block, name)``)."""

    def __new__(cls, top, *, fair_stall=None):
        obj = super().__new__(cls, "formal")
        obj.top = top
        obj.fair_stall = fair_stall
        obj.statements = []
        obj.probes = {}
        obj.derived = set()
        return obj

    def derive(self, component):
        """Declare that ``component``'s input streams are a combinational function of a stream its
        parent proves held (e.g. the result stage of an fp unit, fed by the core from the operand
        stage): their held rule follows from that one, so it is not re-proved by SAT, which would
        mean proving the core equal to itself across cycles (hard for a multiplier)."""
        self.derived.add(id(component))

    def probe(self, component, name, width):
        """A signal shared by a block (which drives it in its ``_formal``) and its parent (which
        states how it relates to its own state): e.g. the words inside a nested pipeline, which a
        parent's k-induction needs but cannot see. The same ``(component, name)`` gives the same
        signal, whichever side asks first."""
        key = (id(component), name)
        if key not in self.probes:
            self.probes[key] = (component, Signal(width, name=f"probe_{name}"))
        return self.probes[key][1]


def active(platform):
    return isinstance(platform, str) and platform == "formal"


def is_top(platform, component):
    return getattr(platform, "top", None) is component


class Properties:
    """Statement helper for one block: ``Properties(m, platform, self)``. Every statement drives a
    named signal (``fp_<name>`` for assertions and assumptions, ``fc_<name>`` for covers), so the
    proof flow can tell them apart in the generated netlist."""

    def __init__(self, m, platform, component):
        self.m, self.platform, self.component = m, platform, component
        self.top = is_top(platform, component)
        self.block = type(component).__name__

    def _record(self, kind, name):
        reg = getattr(self.platform, "statements", None)
        if reg is not None:
            reg.append((kind, self.block, name))

    def check(self, name, cond):
        """Assert ``cond`` every cycle."""
        s = Signal(name=f"fp_{name}")
        self.m.d.comb += [s.eq(cond), Assert(s)]
        self._record("assert", name)

    def assume(self, name, cond):
        s = Signal(name=f"fp_{name}")
        self.m.d.comb += [s.eq(cond), Assume(s)]
        self._record("assume", name)

    def rule(self, name, cond):
        """An input rule: assumed at the top of the proof, asserted below it."""
        (self.assume if self.top else self.check)(name, cond)

    def cover(self, name, cond):
        s = Signal(name=f"fc_{name}")
        self.m.d.comb += [s.eq(cond), Cover(s)]
        self._record("cover", name)

    def past(self, value, name):
        """``value`` one cycle ago (reset value 0, so no obligation right after a reset)."""
        value = Value.cast(value)
        s = Signal(len(value), name=f"past_{name}")
        self.m.d.sync += s.eq(value)
        return s

    def held(self, port, name):
        """Stream rule of ``port`` as an expression: once ``valid`` is high without ``ready``, the
        next cycle ``valid`` is still high and ``payload`` unchanged (a word is held until taken)."""
        stalled = self.past(port.valid & ~port.ready, f"{name}_stalled")
        payload = self.past(port.payload, f"{name}_payload")
        return ~stalled | (port.valid & (Value.cast(port.payload) == payload))

    def input_stream(self, port, name):
        """Rules of an input stream (``In(stream.Signature)``): the producer holds its word (the
        producer may pause forever). Skipped for a block its parent declared derived."""
        if id(self.component) in getattr(self.platform, "derived", ()):
            self._record("derived", f"{name}_held")
            return
        self.rule(f"{name}_held", self.held(port, name))

    def output_stream(self, port, name):
        """Rules of an output stream: the block holds its word until taken; at the top of a proof
        with ``fair_stall = R`` the consumer is assumed to stall at most ``R`` cycles in a row."""
        self.check(f"{name}_held", self.held(port, name))
        fair = getattr(self.platform, "fair_stall", None)
        if self.top and fair is not None:
            waited = Signal(range(fair + 2), name=f"{name}_waited")
            with self.m.If(port.valid & ~port.ready):
                self.m.d.sync += waited.eq(waited + 1)
            with self.m.Else():
                self.m.d.sync += waited.eq(0)
            self.assume(f"{name}_fair", ~(port.valid & ~port.ready) | (waited < fair))

    def counter(self, name, width, inc, dec=0):
        """A wrapping checker counter (``inc`` and ``dec`` are 1-bit conditions)."""
        c = Signal(width, name=f"cnt_{name}")
        self.m.d.sync += c.eq(c + inc - dec)
        return c
