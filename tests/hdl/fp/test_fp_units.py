"""The fp units (``fp32_add``: Fp32Add/Fp32AddCore, ``bf16_mul``: Bf16Mul/Bf16MulCore) bit-exact
against ``models.numerics``, plus the stream contract of docs/architecture.md#verilog-tops (order, back-pressure,
latency, throughput). Every test runs for both units."""

import os
import random
from dataclasses import dataclass

import numpy as np
import pytest

from hdl.config import Config
from hdl.fp.bf16_mul import Bf16Mul
from hdl.fp.fp32_add import Fp32Add
from hdl.tops import build_top
from sim.benches.fp import (
    fp_coverage,
    golden,
    random_pairs,
    rounding_case,
    run_core_harness,
    run_harness,
    special_pairs,
)
from sim.kit.runner import compare_simulators, run_bench, top_verilog

# Literal IEEE-754 binary32 facts (not from numpy): (a, b, a + b).
ADD_DIRECTED = [
    (0x3F800000, 0xBF800000, 0x00000000),   # x + (-x) = +0 under RNE
    (0xBF800000, 0x3F800000, 0x00000000),
    (0x80000000, 0x80000000, 0x80000000),   # -0 + -0 = -0
    (0x00000000, 0x80000000, 0x00000000),   # +0 + -0 = +0
    (0x80000000, 0x00000000, 0x00000000),
    (0x80000001, 0x00000001, 0x00000000),   # subnormal cancellation = +0
    (0x7F800000, 0xFF800000, 0x7FC00000),   # inf - inf = canonical NaN
    (0xFF800000, 0xFF800000, 0xFF800000),   # -inf + -inf = -inf
    (0x7F800000, 0x7F7FFFFF, 0x7F800000),
    (0x7F800001, 0x3F800000, 0x7FC00000),   # signalling NaN -> canonical NaN
    (0x3F800000, 0xFFC12345, 0x7FC00000),   # negative quiet NaN with payload -> canonical
    (0x00000001, 0x00000001, 0x00000002),   # smallest subnormals add exactly
    (0x007FFFFF, 0x00000001, 0x00800000),   # largest subnormal + ulp = smallest normal
    (0x00800000, 0x80000001, 0x007FFFFF),   # smallest normal - ulp = largest subnormal
    (0x7F7FFFFF, 0x7F7FFFFF, 0x7F800000),   # overflow to +inf
    (0xFF7FFFFF, 0xF3000000, 0xFF800000),   # -max - half an ulp: tie rounds to even = -inf
    (0x7F7FFFFF, 0x72FFFFFF, 0x7F7FFFFF),   # max + just under half an ulp stays max
    (0x3F800000, 0x33800000, 0x3F800000),   # 1 + 2**-24: tie, rounds to even (1)
    (0x3F800001, 0x33800000, 0x3F800002),   # (1 + ulp) + 2**-24: tie, rounds to even (up)
    (0x3F800000, 0x33800001, 0x3F800001),   # just above the tie rounds up
    (0x3F800000, 0xB3000000, 0x3F800000),   # 1 - 2**-25: tie below 1 rounds to even (1)
    (0x3F800000, 0xB3000001, 0x3F7FFFFF),   # just beyond that tie rounds down
    (0x4B800000, 0x3F800000, 0x4B800000),   # 2**24 + 1: tie, stays even
    (0x4B800001, 0x3F800000, 0x4B800002),   # (2**24 + 2) + 1: tie, rounds up to even
    (0x3F800000, 0x0D000000, 0x3F800000),   # huge exponent gap: absorbed
    (0x3F800000, 0x8D000000, 0x3F800000),   # ... either sign
    (0x3F800001, 0xBF800000, 0x34000000),   # cancellation to one ulp of 1 (2**-23)
]


# Literal IEEE-754 results of fp32(bf16 a) * fp32(bf16 b) (not from numpy): (a, b, y).
MUL_DIRECTED = [
    (0x3F80, 0x3F80, 0x3F800000),   # 1 * 1
    (0x3FFF, 0x3FFF, 0x407E0100),   # (255/128)**2: all 16 product bits kept, exact
    (0x5F7F, 0x5F7F, 0x7F7E0100),   # same significand near the top of the range, exact
    (0x5F80, 0x5F00, 0x7F000000),   # 2**64 * 2**63 = 2**127
    (0x5F80, 0x5F80, 0x7F800000),   # 2**128 overflows to +inf
    (0xDFFF, 0x5F7F, 0xFF800000),   # overflow keeps the sign: -inf
    (0x7F7F, 0x4000, 0x7F800000),   # largest bf16 * 2 overflows
    (0x0001, 0x3F80, 0x00010000),   # smallest bf16 subnormal 2**-133, exact in fp32
    (0x0001, 0x3F00, 0x00008000),   # 2**-134
    (0x0080, 0x3F00, 0x00400000),   # smallest normal / 2 = 2**-127 (subnormal, exact)
    (0x0081, 0x3F00, 0x00408000),   # (1 + 2**-7) * 2**-127, exact subnormal
    (0x0001, 0x3780, 0x00000001),   # 2**-133 * 2**-16 = 2**-149, the smallest subnormal
    (0x0001, 0x3700, 0x00000000),   # 2**-150: tie between 0 and 2**-149, rounds to even (0)
    (0x8001, 0x3700, 0x80000000),   # ... keeping the sign: -0
    (0x0001, 0x3740, 0x00000001),   # 0.75 * 2**-149 rounds up
    (0x0003, 0x3700, 0x00000002),   # 1.5 * 2**-149: tie, rounds to even (2)
    (0x00C0, 0x3400, 0x00000002),   # 1.5 * 2**-149 from a normal operand: tie to even
    (0x00A0, 0x3400, 0x00000001),   # 1.25 * 2**-149 rounds down
    (0x00FF, 0x3400, 0x00000002),   # (255/128) * 2**-149 rounds up
    (0x0140, 0x3400, 0x00000003),   # 3 * 2**-149, exact
    (0x00C0, 0x3380, 0x00000001),   # 0.75 * 2**-149 rounds up
    (0x8000, 0x3F80, 0x80000000),   # -0 * 1 = -0
    (0x8000, 0x8000, 0x00000000),   # -0 * -0 = +0
    (0x0000, 0xFF7F, 0x80000000),   # +0 * -max = -0
    (0x7F80, 0x0000, 0x7FC00000),   # inf * 0 = canonical NaN
    (0x8000, 0x7F80, 0x7FC00000),   # -0 * inf = canonical NaN
    (0xFF80, 0x3F80, 0xFF800000),   # -inf * 1 = -inf
    (0xFF80, 0x8001, 0x7F800000),   # -inf * -subnormal = +inf
    (0x7F81, 0x3F80, 0x7FC00000),   # signalling NaN -> canonical NaN
    (0xFFC1, 0x0000, 0x7FC00000),   # negative quiet NaN with payload -> canonical NaN
]



@dataclass(frozen=True)
class Unit:
    name: str          # top name, also the sim.benches.fp unit key
    top: type          # the stream top class (LATENCY)
    dtype: type        # operand bit-pattern type
    directed: list


UNITS = [Unit("fp32_add", Fp32Add, np.uint32, ADD_DIRECTED),
         Unit("bf16_mul", Bf16Mul, np.uint16, MUL_DIRECTED)]


@pytest.fixture(params=UNITS, ids=lambda u: u.name)
def unit(request):
    return request.param


BULK = 500_000     # pairs per kind; uniform + close = 1,000,000 random pairs per regression run


@pytest.fixture
def seed():
    """A fresh seed per run (reported on failure); WS_FP_SEED=<n> reproduces one."""
    return int(os.environ.get("WS_FP_SEED", random.randrange(1 << 32)))


def _clean(result, n, context=""):
    assert result["errors"] == 0 and result["mismatches"] == [], f"{context} {result['mismatches']}"
    assert result["n"] == n, f"{context} checked {result['n']} of {n} vectors"
    for key in ("sent", "extra"):
        if key in result:
            assert result[key] == (n if key == "sent" else 0), f"{context} {key}={result[key]}"


def test_directed_ieee_cases(unit):
    """Hand-derived IEEE results: the golden model and the core both produce them."""
    a, b, y = zip(*unit.directed, strict=True)
    a, b, y = np.array(a, unit.dtype), np.array(b, unit.dtype), np.array(y, np.uint32)
    assert [hex(v) for v in golden(unit.name, a, b)] == [hex(v) for v in y]
    _clean(run_core_harness(unit.name, a, b, expected=y, tag="directed"), len(a))


def test_special_pairs_core(unit):
    """Every pair of the special and boundary set through the combinational core."""
    a, b = special_pairs(unit.name)
    _clean(run_core_harness(unit.name, a, b, tag="special"), len(a))


def test_special_pairs_stream(unit):
    """Every special pair through the stream top with random valid gaps and back-pressure."""
    a, b = special_pairs(unit.name)
    _clean(run_harness(unit.name, a, b, gap=20, stall=30, seed=11, tag="special"), len(a))


@pytest.mark.parametrize("kind", ["uniform", "close"])
def test_random_pairs_core(unit, kind, seed):
    """BULK random pairs of each kind (together >= 1,000,000 per run), bit-exact (a bulk run: Verilator)."""
    a, b = random_pairs(unit.name, BULK, seed, kind)
    _clean(run_core_harness(unit.name, a, b, tag=f"random-{kind}"), BULK, f"seed={seed}")


def test_random_pairs_stream(unit, seed):
    """Random pairs through the stream top with heavy random gaps and back-pressure."""
    a, b = random_pairs(unit.name, 20_000, seed)
    _clean(run_harness(unit.name, a, b, gap=30, stall=50, seed=seed % 100_000, tag="random"), 20_000,
           f"seed={seed}")


@pytest.mark.parametrize("latency", [3, 4, 5, 6])
def test_special_pairs_stream_deeper(unit, latency):
    """Config.fp_latency > 2 (register stages inside the core): every special pair bit-exact through
    the stream top with random gaps and back-pressure."""
    a, b = special_pairs(unit.name)
    _clean(run_harness(unit.name, a, b, gap=20, stall=30, seed=11, tag="special", latency=latency), len(a))


@pytest.mark.parametrize("latency", [4, 6])
def test_cocotb_deeper_pipeline_timing(unit, latency):
    """cocotb at Config.fp_latency 4 and 6: cycle-exact against the pipeline model (stages that
    advance together), full-rate latency == fp_latency, capacity fp_latency + 2."""
    cfg = Config(fp_latency=latency)
    assert build_top(unit.name, cfg).LATENCY == latency
    run_bench(top_verilog(unit.name, cfg), unit.name, "sim.benches.fp",
              params={"unit": unit.name, "vectors": "special", "gap_prob": 0.3, "stall_prob": 0.3,
                      "latency": latency})


def test_harnesses_detect_wrong_results(unit):
    """Both harnesses really compare: flipped expected bits are reported at their indices."""
    a, b = special_pairs(unit.name)
    y = golden(unit.name, a, b)
    y[123] ^= 1
    y[-1] ^= 0x80000000
    for run in (run_core_harness, run_harness):
        result = run(unit.name, a, b, expected=y, tag="corrupt")
        assert result["errors"] == 2, result
        assert result["mismatches"][0].startswith("MISMATCH 123:")
        assert result["mismatches"][1].startswith(f"MISMATCH {len(a) - 1}:")


def test_cocotb_special_pairs_and_timing(unit):
    """cocotb: special pairs with random gaps / back-pressure and cycle-exact replay of the
    pipeline model; full-rate latency == LATENCY and one result per cycle; results held (and
    the pipeline filled to capacity) while o.ready is low."""
    run_bench(top_verilog(unit.name, Config()), unit.name, "sim.benches.fp",
              params={"unit": unit.name, "vectors": "special", "gap_prob": 0.3, "stall_prob": 0.3,
                      "latency": unit.top.LATENCY})


def test_cocotb_random_heavy_backpressure(unit, seed):
    """cocotb: random pairs, mostly-stalled output and frequent input gaps, cycle-exact."""
    run_bench(top_verilog(unit.name, Config()), unit.name, "sim.benches.fp", testcase="stream_traffic",
              seed=seed % (1 << 31),
              params={"unit": unit.name, "vectors": "random", "n": 1500, "gap_prob": 0.5,
                      "stall_prob": 0.8, "latency": unit.top.LATENCY})


def test_port_contract(unit):
    """docs/architecture.md#verilog-tops: i carries {a, b} with a in the least significant bits, o is 32 bits wide;
    the generated module has clk, rst and Amaranth's stream port names."""
    from amaranth import Shape
    from amaranth.lib import data

    from hdl.verilog import verilog_text

    width = np.dtype(unit.dtype).itemsize * 8
    top = build_top(unit.name, Config())
    layout = data.Layout.cast(top.signature.members["i"].signature.members["payload"].shape)
    fields = [(name, field.offset, field.width) for name, field in layout]
    assert fields == [("a", 0, width), ("b", width, width)]
    assert Shape.cast(top.signature.members["o"].signature.members["payload"].shape).width == 32
    text = verilog_text(top, unit.name)
    for port, bits in [("i__payload", 2 * width), ("o__payload", 32), ("i__valid", 1), ("i__ready", 1),
                       ("o__valid", 1), ("o__ready", 1), ("clk", 1), ("rst", 1)]:
        decl = f"[{bits - 1}:0] {port};" if bits > 1 else f" {port};"
        assert any(line.strip().startswith(("input", "output")) and line.endswith(decl)
                   for line in text.splitlines()), port


@pytest.mark.parametrize("unit", ["fp32_add", "bf16_mul"])
def test_coverage_of_bench_vectors(unit):
    """The vectors of ``bench fp_units`` (special pairs + random pairs) fill every reachable IEEE
    class pair and rounding bin; the rounding classifier agrees with hand-made cases."""
    sa, sb = special_pairs(unit)
    ra, rb = random_pairs(unit, 100_000, seed=1)
    for report in fp_coverage(unit, np.concatenate([sa, ra]), np.concatenate([sb, rb])):
        assert report["empty_reachable"] == [], report["name"]
    if unit == "fp32_add":
        one, ulp = 0x3F800000, 0x33800000                  # 1.0 and 2**-24 (half an ulp of 1.0)
        a = np.array([one, one, 0x3F800001, 0x7F7FFFFF, 0x7F800000], dtype=np.uint32)
        b = np.array([one, ulp, ulp, 0x7F7FFFFF, 0xFF800000], dtype=np.uint32)
        assert rounding_case(unit, a, b).tolist() == ["exact", "tie_down_even", "tie_up_even", "overflow",
                                                      "invalid"]


def test_cocotb_same_under_icarus_and_verilator(unit, icarus):
    """The cocotb bench under both simulators: the same outputs at every cycle (sim.kit.trace)."""
    with compare_simulators():
        test_cocotb_special_pairs_and_timing(unit)


@pytest.mark.parametrize("width", [1, 5, 8, 9, 28])
def test_leading_zeros_tree(width):
    """The normalizer's leading-zero count (a tree of half merges) against Python's bit_length:
    every value up to 9 bits; at 28 bits (the adder's sum) every single bit, all ones below it,
    and random values."""
    from amaranth import Module, Signal
    from amaranth.sim import Simulator

    from hdl.fp.fp32_add import _leading_zeros

    m = Module()
    x = Signal(width)
    lz = _leading_zeros(m, x, "lz")
    if width <= 9:
        values = range(1 << width)
    else:
        rng = random.Random(width)
        values = ([0] + [1 << k for k in range(width)] + [(2 << k) - 1 for k in range(width)]
                  + [rng.getrandbits(width) >> rng.randrange(width) for _ in range(300)])
    got = []

    async def bench(ctx):
        for v in values:
            ctx.set(x, v)
            got.append(ctx.get(lz))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert got == [width - v.bit_length() for v in values]
