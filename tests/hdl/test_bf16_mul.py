"""bf16_mul (Bf16Mul and the Bf16MulCore inside it) bit-exact against models.numerics.bf16_mul,
plus the stream contract of DESIGN.md 8 (order, back-pressure, latency, throughput)."""

import os
import random

import numpy as np
import pytest

from hdl.bf16_mul import Bf16Mul
from hdl.config import Config
from hdl.tops import build_top
from sim.bench_fp import golden, random_pairs, run_core_harness, run_harness, special_pairs
from sim.runner import run_bench

UNIT = "bf16_mul"
TOP = Bf16Mul
DTYPE = np.uint16

# Literal IEEE-754 results of fp32(bf16 a) * fp32(bf16 b) (not from numpy): (a, b, y).
DIRECTED = [
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


def test_directed_ieee_cases():
    """Hand-derived IEEE results: the golden model and the core both produce them."""
    a, b, y = zip(*DIRECTED, strict=True)
    a, b, y = np.array(a, DTYPE), np.array(b, DTYPE), np.array(y, np.uint32)
    assert [hex(v) for v in golden(UNIT, a, b)] == [hex(v) for v in y]
    _clean(run_core_harness(UNIT, a, b, expected=y, tag="directed"), len(a))


def test_special_pairs_core():
    """Every pair of the special and boundary set through the combinational core."""
    a, b = special_pairs(UNIT)
    _clean(run_core_harness(UNIT, a, b, tag="special"), len(a))


def test_special_pairs_stream():
    """Every special pair through the stream top with random valid gaps and back-pressure."""
    a, b = special_pairs(UNIT)
    _clean(run_harness(UNIT, a, b, gap=20, stall=30, seed=11, tag="special"), len(a))


@pytest.mark.parametrize("kind", ["uniform", "close"])
def test_random_pairs_core(kind, seed):
    """BULK random pairs of each kind (together >= 1,000,000 per run), bit-exact, Icarus only."""
    a, b = random_pairs(UNIT, BULK, seed, kind)
    _clean(run_core_harness(UNIT, a, b, tag=f"random-{kind}"), BULK, f"seed={seed}")


def test_random_pairs_stream(seed):
    """Random pairs through the stream top with heavy random gaps and back-pressure."""
    a, b = random_pairs(UNIT, 20_000, seed)
    _clean(run_harness(UNIT, a, b, gap=30, stall=50, seed=seed % 100_000, tag="random"), 20_000,
           f"seed={seed}")


def test_harnesses_detect_wrong_results():
    """Both harnesses really compare: flipped expected bits are reported at their indices."""
    a, b = special_pairs(UNIT)
    y = golden(UNIT, a, b)
    y[123] ^= 1
    y[-1] ^= 0x80000000
    for run in (run_core_harness, run_harness):
        result = run(UNIT, a, b, expected=y, tag="corrupt")
        assert result["errors"] == 2, result
        assert result["mismatches"][0].startswith("MISMATCH 123:")
        assert result["mismatches"][1].startswith(f"MISMATCH {len(a) - 1}:")


def test_cocotb_special_pairs_and_timing():
    """cocotb: special pairs with random gaps / back-pressure and cycle-exact replay of the
    pipeline model; full-rate latency == LATENCY and one result per cycle; results held (and
    the pipeline filled to capacity) while o.ready is low."""
    run_bench(build_top(UNIT, Config()), UNIT, "sim.bench_fp",
              params={"unit": UNIT, "vectors": "special", "gap_prob": 0.3, "stall_prob": 0.3,
                      "latency": TOP.LATENCY})


def test_cocotb_random_heavy_backpressure(seed):
    """cocotb: random pairs, mostly-stalled output and frequent input gaps, cycle-exact."""
    run_bench(build_top(UNIT, Config()), UNIT, "sim.bench_fp", testcase="stream_traffic",
              seed=seed % (1 << 31),
              params={"unit": UNIT, "vectors": "random", "n": 1500, "gap_prob": 0.5,
                      "stall_prob": 0.8, "latency": TOP.LATENCY})


def test_port_contract():
    """DESIGN.md 8: i carries {a, b} with a in the least significant bits, o is 32 bits wide;
    the generated module has clk, rst and Amaranth's stream port names."""
    from amaranth import Shape
    from amaranth.lib import data

    from sim.runner import verilog_text

    width = np.dtype(DTYPE).itemsize * 8
    top = build_top(UNIT, Config())
    layout = data.Layout.cast(top.signature.members["i"].signature.members["payload"].shape)
    fields = [(name, field.offset, field.width) for name, field in layout]
    assert fields == [("a", 0, width), ("b", width, width)]
    assert Shape.cast(top.signature.members["o"].signature.members["payload"].shape).width == 32
    text = verilog_text(top, UNIT)
    for port, bits in [("i__payload", 2 * width), ("o__payload", 32), ("i__valid", 1), ("i__ready", 1),
                       ("o__valid", 1), ("o__ready", 1), ("clk", 1), ("rst", 1)]:
        decl = f"[{bits - 1}:0] {port};" if bits > 1 else f" {port};"
        assert any(line.strip().startswith(("input", "output")) and line.endswith(decl)
                   for line in text.splitlines()), port
