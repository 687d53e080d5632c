"""bf16 x bf16 -> binary32 multiplier (docs/architecture.md#numerics): combinational core and stream top."""

from amaranth import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .fp32_add import CANONICAL_NAN, fp32_round_pack
from .pipeline import MIN_LATENCY, FpStreamUnit, Stages

__all__ = ["Bf16MulCore", "Bf16Mul", "MUL_CUTS"]


class Bf16MulCore(wiring.Component):
    """Combinational multiplier: ``y = fp32(bf16 a) * fp32(bf16 b)``.

    Ports: ``a: In(16)``, ``b: In(16)`` (bf16 bit patterns, i.e. the upper half of an fp32),
    ``y: Out(32)`` (binary32 bit pattern).

    Semantics (docs/architecture.md#numerics): the 8 x 8-bit significand product (at most 16 significant bits) is
    exact in binary32 except where it overflows (signed infinity) or falls below 2**-126, where
    it is rounded once to nearest even, with subnormal results (no flush to zero) down to a signed
    zero. Subnormal bf16 inputs are honoured. ``inf * 0`` and any NaN input give the canonical NaN
    ``0x7FC00000``; the sign of every other result, zeros included, is ``sign(a) ^ sign(b)``.
    Equal to numpy ``float32`` multiplication of the widened operands with NaN canonicalized
    (``models.numerics.bf16_mul``).

    ``stages`` (0 .. 4) register stages split it (``MUL_CUTS``); then it has an ``en: In(1)``
    input that advances them together, and ``y`` is ``stages`` cycles behind ``a``, ``b``.
    """

    def __init__(self, stages=0):
        self._cuts = MUL_CUTS[stages]
        members = {"a": In(16), "b": In(16), "y": Out(32)}
        if stages:
            members["en"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        st = Stages(m, self._cuts, getattr(self, "en", None))
        a, b = self.a, self.b
        sa, ea, fa = a[15], a[7:15], a[:7]
        sb, eb, fb = b[15], b[7:15], b[:7]
        nan_a, nan_b, inf_a, inf_b = Signal(), Signal(), Signal(), Signal()
        zero_a, zero_b, sign = Signal(), Signal(), Signal()
        m.d.comb += [
            nan_a.eq((ea == 0xFF) & (fa != 0)), inf_a.eq((ea == 0xFF) & (fa == 0)),
            nan_b.eq((eb == 0xFF) & (fb != 0)), inf_b.eq((eb == 0xFF) & (fb == 0)),
            zero_a.eq(a[:15] == 0), zero_b.eq(b[:15] == 0),
            sign.eq(sa ^ sb),
        ]

        product = Signal(16, name="bf16_significand_product")   # exact; tests/hdl/test_structure.py
        m.d.comb += product.eq(Cat(fa, ea != 0) * Cat(fb, eb != 0))
        # bf16 value = sig * 2**(x - 127 - 7) with x = max(e, 1); the product's bit 15 then weighs
        # 2**(xa + xb - 126 - 127), padded with 10 zero bits to the rounder's 26-bit minimum.
        exp_sum = Signal(signed(11))
        m.d.comb += exp_sum.eq(Mux(ea == 0, 1, ea) + Mux(eb == 0, 1, eb))
        exp = Signal(signed(11))
        m.d.comb += exp.eq(exp_sum - 126)
        st.carry(nan=nan_a | nan_b | (inf_a & zero_b) | (zero_a & inf_b), inf_any=inf_a | inf_b,
                 inf=Cat(C(0x7F800000, 31), sign))
        v = st.cut("product", product=product, exp=exp, sign=sign)
        rounded = fp32_round_pack(m, Cat(C(0, 10), v["product"]), v["exp"], v["sign"], stages=st)

        nan, inf_any, inf = st.carried("nan"), st.carried("inf_any"), st.carried("inf")
        y = st.cut("out", y=Mux(nan, CANONICAL_NAN, Mux(inf_any, inf, rounded)))["y"]
        m.d.comb += self.y.eq(y)
        return m


class Bf16Mul(FpStreamUnit):
    """Stream top ``bf16_mul`` (docs/architecture.md#verilog-tops): ``o = fp32(bf16 a) * fp32(bf16 b)`` via
    :class:`Bf16MulCore`.

    ``i: In(stream.Signature(StructLayout({"a": 16, "b": 16})))`` (``a`` in bits 15..0),
    ``o: Out(stream.Signature(32))``. ``LATENCY = latency`` (``Config.fp_latency``, 2..6, default
    2), one result per cycle, input order, registered handshakes (see
    :class:`hdl.fp.pipeline.FpStreamUnit`).
    """

    LATENCY = MIN_LATENCY

    def __init__(self, latency=MIN_LATENCY):
        super().__init__(16, 16, 32, latency)

    def core(self):
        return Bf16MulCore(self.stages)


# The active cuts of Bf16MulCore for 0..4 register stages, in program order: "product"
# (significands multiplied), "lz" (leading zeros counted), "shift" (normalized), "out" (result
# selected), chosen to balance the stages.
MUL_CUTS = {
    0: (),
    1: ("product",),
    2: ("product", "shift"),
    3: ("product", "lz", "shift"),
    4: ("product", "lz", "shift", "out"),
}
