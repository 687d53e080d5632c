"""IEEE-754 binary32 adder (docs/architecture.md#numerics): combinational core and pipelined stream top.

Also holds :func:`fp32_round_pack`, the fp32 normalize / round-to-nearest-even / pack stage that
the bf16 multiplier shares, so both units round through the same logic.
"""

from amaranth import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .pipeline import MIN_LATENCY, FpStreamUnit, Stages

__all__ = ["CANONICAL_NAN", "fp32_round_pack", "Fp32AddCore", "Fp32Add", "ADD_CUTS"]

CANONICAL_NAN = 0x7FC00000
_INF = 0x7F800000


def _leading_zeros(m, value, name):
    """Count of leading zeros of ``value`` (``len(value)`` when it is zero), as a tree: each node
    merges the (all zero, count) of its two halves, so the depth grows with ``log2(len(value))``
    multiplexers and no shift waits on another."""
    width = len(value)
    levels = max((width - 1).bit_length(), 1)
    padded = 1 << levels
    v = Cat(C(0, padded - width), value)        # zeros below: the count of a nonzero value is kept

    def node(lo, size):
        """(all zero, leading zeros below the all-zero case) of ``v[lo:lo + size]``."""
        if size == 1:
            return ~v[lo], C(0, 0)
        half = size // 2
        z_hi, c_hi = node(lo + half, half)
        z_lo, c_lo = node(lo, half)
        zero = Signal(name=f"{name}_z{lo}_{size}")
        count = Signal(size.bit_length() - 1, name=f"{name}_c{lo}_{size}")
        m.d.comb += [zero.eq(z_hi & z_lo),
                     count.eq(Cat(Mux(z_hi, c_lo, c_hi), z_hi) if half > 1 else z_hi)]
        return zero, count

    _, count = node(0, padded)
    lz = Signal(range(width + 1), name=name)
    m.d.comb += lz.eq(Mux(value == 0, width, count))
    return lz


def shift_left(m, value, amount, name):
    """``(value << amount)`` truncated to ``len(value)`` bits, as a logarithmic shifter (one
    constant-shift multiplexer per bit of ``amount``)."""
    width = len(value)
    for k in range(len(amount)):
        step = Signal(width, name=f"{name}_{k}")
        m.d.comb += step.eq(Mux(amount[k], (value << (1 << k))[:width], value))
        value = step
    return value


def shift_right_sticky(m, value, amount, name):
    """``(value >> amount, sticky)``: a logarithmic right shifter that also returns the OR of
    every bit shifted out."""
    width = len(value)
    sticky = C(0, 1)
    for k in range(len(amount)):
        dist = 1 << k
        step = Signal(width, name=f"{name}_{k}")
        lost = Signal(name=f"{name}_lost_{k}")
        m.d.comb += [
            step.eq(Mux(amount[k], value >> dist, value)),
            lost.eq(sticky | (amount[k] & value[:min(dist, width)].any())),
        ]
        value, sticky = step, lost
    return value, sticky


def fp32_round_pack(m, sig, exp, sign, *, underflow_shift=True, prefix="rnd", stages=None):
    """Round the finite value ``(-1)**sign * sig * 2**(exp - 127 - (len(sig) - 1))`` to binary32.

    ``sig`` is an unsigned significand of ``W = len(sig) >= 26`` bits whose most significant bit
    has weight ``2**(exp - 127)``; bits below the top 25 act as sticky bits. ``exp`` is a signed
    value. Returns a 32-bit value: the RNE result with subnormals (no flush to zero), infinity
    on overflow, and a zero of sign ``sign`` when ``sig`` is zero or the result underflows to zero.

    With ``underflow_shift=False`` the caller promises ``exp >= 1`` and the right-shift path
    for results far below the subnormal range is left out.

    ``stages`` (:class:`hdl.fp.pipeline.Stages`) offers two cuts: ``"lz"`` after the leading-zero
    count and ``"shift"`` after the normalizing shift.
    """
    width = len(sig)
    if width < 26:
        raise ValueError(f"fp32_round_pack needs a significand of at least 26 bits, got {width}")
    if stages is None:
        stages = Stages(m)
    lz = _leading_zeros(m, sig, f"{prefix}_lz")
    v = stages.cut("lz", sig=sig, lz=lz, exp=exp, sign=sign)
    sig, lz, exp, sign = v["sig"], v["lz"], v["exp"], v["sign"]
    sign_in = sign
    sign = Signal(name=f"{prefix}_sign")
    m.d.comb += sign.eq(sign_in)
    exp_in = exp
    exp = Signal(signed(12), name=f"{prefix}_exp")
    m.d.comb += exp.eq(exp_in)

    e_norm = Signal(signed(12), name=f"{prefix}_e_norm")   # exponent once the MSB is at the top
    normal = Signal(name=f"{prefix}_normal")               # e_norm fits the normal range (>= 1)
    m.d.comb += [
        e_norm.eq(exp - lz),
        normal.eq(e_norm >= 1),
    ]
    # Normal: shift the leading one to the top. Subnormal: shift so that the exponent is 1.
    left = Signal(range(width), name=f"{prefix}_left")
    m.d.comb += left.eq(Mux(normal, lz, Mux(exp >= 1, exp - 1, 0)))
    shifted = shift_left(m, sig, left, f"{prefix}_left")
    sticky_out = C(0, 1)
    if underflow_shift:
        # exp < 1: the value lies below the subnormal grid of this significand: shift right by
        # 1 - exp, clamped at W (from there on everything is below the guard bit, i.e. sticky).
        right = Signal(range(width + 1), name=f"{prefix}_right")
        m.d.comb += right.eq(Mux(exp >= 1, 0, Mux(1 - exp >= width, width, 1 - exp)))
        down, sticky_out = shift_right_sticky(m, sig, right, f"{prefix}_right")
        merged = Signal(width, name=f"{prefix}_shifted")
        m.d.comb += merged.eq(Mux(exp < 1, down, shifted))
        shifted = merged

    v = stages.cut("shift", shifted=shifted, sticky_out=sticky_out, normal=normal, e_norm=e_norm,
                   sign=sign, zero=sig == 0)
    shifted, sticky_out, normal, e_norm, sign, zero = (
        v["shifted"], v["sticky_out"], v["normal"], v["e_norm"], v["sign"], v["zero"])
    mant = shifted[width - 24:]                 # 24 bits including the hidden bit
    guard = shifted[width - 25]
    sticky = shifted[:width - 25].any() | sticky_out
    round_up = guard & (sticky | mant[0])
    exp_field = Signal(range(256), name=f"{prefix}_exp_field")   # biased exponent before rounding
    m.d.comb += exp_field.eq(Mux(normal, e_norm, 1))
    # Packing (exp_field - 1) << 23 plus the 24-bit mantissa adds the hidden bit into the exponent;
    # a rounding carry out of the mantissa increments the exponent, up to infinity (0x7F800000).
    packed = Signal(31, name=f"{prefix}_packed")
    m.d.comb += packed.eq(((exp_field - 1) << 23) + mant + round_up)

    result = Signal(32, name=f"{prefix}_result")
    m.d.comb += result.eq(Cat(Mux(zero, 0, Mux(normal & (e_norm >= 255), _INF, packed)), sign))
    return result


class Fp32AddCore(wiring.Component):
    """Combinational binary32 adder: ``y = a + b``.

    Ports: ``a: In(32)``, ``b: In(32)``, ``y: Out(32)`` (IEEE binary32 bit patterns).

    Semantics (docs/architecture.md#numerics): round to nearest even; subnormal inputs and outputs (no flush to
    zero); ``x + (-x) = +0`` and ``-0 + -0 = -0``; overflow gives a signed infinity;
    ``inf + -inf`` and any NaN input give the canonical NaN ``0x7FC00000``. Equal to numpy
    ``float32`` addition with NaN canonicalized (``models.numerics.fp32_add``).

    ``stages`` (0 .. 4) register stages split it (``ADD_CUTS``); then it has an ``en: In(1)``
    input that advances them together, and ``y`` is ``stages`` cycles behind ``a``, ``b``.
    """

    def __init__(self, stages=0):
        self._cuts = ADD_CUTS[stages]
        members = {"a": In(32), "b": In(32), "y": Out(32)}
        if stages:
            members["en"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        st = Stages(m, self._cuts, getattr(self, "en", None))
        a, b = self.a, self.b
        sa, ea, fa = a[31], a[23:31], a[:23]
        sb, eb, fb = b[31], b[23:31], b[:23]
        nan_a, nan_b, inf_a, inf_b = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [
            nan_a.eq((ea == 0xFF) & (fa != 0)), inf_a.eq((ea == 0xFF) & (fa == 0)),
            nan_b.eq((eb == 0xFF) & (fb != 0)), inf_b.eq((eb == 0xFF) & (fb == 0)),
        ]

        # Order by magnitude (the 31 low bits compare like magnitudes): |big| >= |small|.
        swap = Signal()
        m.d.comb += swap.eq(a[:31] < b[:31])
        s_big, s_small = Signal(), Signal()
        e_big, e_small = Signal(8), Signal(8)
        f_big, f_small = Signal(23), Signal(23)
        m.d.comb += [
            s_big.eq(Mux(swap, sb, sa)), s_small.eq(Mux(swap, sa, sb)),
            e_big.eq(Mux(swap, eb, ea)), e_small.eq(Mux(swap, ea, eb)),
            f_big.eq(Mux(swap, fb, fa)), f_small.eq(Mux(swap, fa, fb)),
        ]
        # Subnormals: exponent field 0 means exponent 1 without the hidden bit.
        x_big = Signal(8)
        sig_big, sig_small = Signal(27), Signal(27)      # significand, guard, round, sticky
        m.d.comb += [
            x_big.eq(Mux(e_big == 0, 1, e_big)),
            sig_big.eq(Cat(C(0, 3), f_big, e_big != 0)),
            sig_small.eq(Cat(C(0, 3), f_small, e_small != 0)),
        ]

        # The alignment distance min(x_big - x_small, 27) (x: the exponent, 1 for a subnormal),
        # both ways at once beside the magnitude compare (swap then only selects): no subtraction
        # waits for the compare's carry chain.
        xa, xb = Mux(ea == 0, 1, ea), Mux(eb == 0, 1, eb)
        d_ab, d_ba = Signal(8), Signal(8)
        m.d.comb += [d_ab.eq(xa - xb), d_ba.eq(xb - xa)]
        dist_ab, dist_ba = Signal(range(28)), Signal(range(28))
        m.d.comb += [dist_ab.eq(Mux(d_ab > 27, 27, d_ab)), dist_ba.eq(Mux(d_ba > 27, 27, d_ba))]
        dist = Signal(range(28))
        m.d.comb += dist.eq(Mux(swap, dist_ba, dist_ab))
        st.carry(nan=nan_a | nan_b | (inf_a & inf_b & (sa != sb)), inf_any=inf_a | inf_b,
                 inf=Cat(C(_INF, 31), Mux(inf_a, sa, sb)))
        v = st.cut("order", sub=sa ^ sb, both_neg=sa & sb, s_big=s_big, x_big=x_big, sig_big=sig_big,
                   sig_small=sig_small, dist=dist)
        shifted, lost = shift_right_sticky(m, v["sig_small"], v["dist"], "align")
        aligned = Signal(27)    # the sticky bit collects everything shifted out
        m.d.comb += aligned.eq(shifted | lost)
        v = st.cut("align", aligned=aligned, **{k: v[k] for k in ("sub", "both_neg", "s_big", "x_big", "sig_big")})

        total = Signal(28)      # MSB weight 2**(x_big + 1 - 127)
        m.d.comb += total.eq(Mux(v["sub"], v["sig_big"] - v["aligned"], v["sig_big"] + v["aligned"]))
        # A zero sum is +0 except -0 + -0 (RNE): exact cancellation always has opposite signs.
        sign = Mux(total == 0, v["both_neg"], v["s_big"])
        v = st.cut("sum", total=total, sign=sign, x_big=v["x_big"])
        rounded = fp32_round_pack(m, v["total"], v["x_big"] + 1, v["sign"], underflow_shift=False, stages=st)

        nan, inf_any, inf = st.carried("nan"), st.carried("inf_any"), st.carried("inf")
        m.d.comb += self.y.eq(Mux(nan, CANONICAL_NAN, Mux(inf_any, inf, rounded)))
        return m


class Fp32Add(FpStreamUnit):
    """Stream top ``fp32_add`` (docs/architecture.md#verilog-tops): ``o = fp32(a) + fp32(b)`` via :class:`Fp32AddCore`.

    ``i: In(stream.Signature(StructLayout({"a": 32, "b": 32})))`` (``a`` in bits 31..0),
    ``o: Out(stream.Signature(32))``. ``LATENCY = latency`` (``Config.fp_latency``, 2..6, default
    2), one result per cycle, input order, registered handshakes (see
    :class:`hdl.fp.pipeline.FpStreamUnit`).
    """

    LATENCY = MIN_LATENCY

    def __init__(self, latency=MIN_LATENCY):
        super().__init__(32, 32, 32, latency)

    def core(self):
        return Fp32AddCore(self.stages)


# The active cuts of Fp32AddCore for 0..4 register stages, in program order: "order" (operands
# ordered, exponent difference), "align" (smaller significand aligned), "sum" (significands
# added), "lz" (leading zeros counted), "shift" (normalized); chosen to balance the stages.
ADD_CUTS = {
    0: (),
    1: ("sum",),
    2: ("align", "lz"),
    3: ("align", "sum", "shift"),
    4: ("order", "align", "lz", "shift"),
}
