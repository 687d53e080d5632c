"""Benches for the floating-point stream tops ``fp32_add`` and ``bf16_mul`` (DESIGN.md 4, 8).

Two paths, both bit-exact against ``models.numerics``:

* Bulk (no cocotb, Python off the per-cycle path): :func:`run_harness` writes operand pairs and
  their golden results to a hex file and runs ``sim/harness/fp_stream_harness.v`` on the top under
  plain Icarus (``sim.runner.run_vvp``) with random valid gaps and back-pressure driven from
  Verilog; the harness compares every result in order.
* cocotb (this module's ``@cocotb.test``s, parameters from ``sim.params()``): the special and
  boundary pairs with random gaps and back-pressure, the cycle of every transfer checked against
  a closed-loop replay of the pipeline's cycle model, and latency / throughput at full rate.

Vector sets: :func:`special_values` (signed zeros, subnormal and normal boundaries, 1 and its
neighbours, largest normals, infinities, quiet and signalling NaNs, rounding ties, cancellation
and large exponent gaps), :func:`random_pairs` (half uniform bit patterns, half close exponents
for the adder / result exponents at the subnormal and overflow boundaries for the multiplier).
"""

import json
import random
import re
from pathlib import Path

import numpy as np

from models import numerics as nx
from sim import params
from sim.runner import BUILD, ROOT, run_vvp, write_verilog

UNITS = {
    # unit: (operand width, golden function on bit patterns)
    "fp32_add": (32, nx.fp32_add_bits),
    "bf16_mul": (16, nx.bf16_mul_bits),
}
HARNESS = ROOT / "sim" / "harness" / "fp_stream_harness.v"

__all__ = ["UNITS", "special_values", "special_pairs", "random_pairs", "golden", "hex_lines",
           "run_harness", "HarnessResult"]


# ----------------------------------------------------------------------------------------------
# vector sets

_FP32_SPECIALS = [
    0x00000000,                                     # zero
    0x00000001, 0x00000002, 0x00000003,             # smallest subnormals
    0x00400000, 0x007FFFFE, 0x007FFFFF,             # mid / largest subnormals
    0x00800000, 0x00800001, 0x00FFFFFF, 0x01000000, # smallest normals
    0x3F800000, 0x3F800001, 0x3F7FFFFF, 0x3F7FFFFE, # 1 and its neighbours
    0x3FC00000, 0x40000000, 0x40400000, 0x3F000000, # 1.5, 2, 3, 0.5
    0x33800000, 0x33800001, 0x337FFFFF, 0x33000000, # half an ulp of 1 (ties against 1), nearby
    0x34000000, 0x33C00000,                         # one ulp of 1, 1.5 half-ulps
    0x4B800000, 0x4B800001, 0x4B7FFFFF, 0x4B000001, # 2**24 (ties with 1: odd and even)
    0x7F7FFFFF, 0x7F7FFFFE, 0x7F000000, 0x7F7FFFFD, # largest normals (overflow on add)
    0x73800000, 0x73000000,                         # half an ulp of the largest normal, below
    0x0D000000, 0x50000000, 0x1A2B3C4D, 0x6E5D4C3B, # very large exponent differences
    0x7F800000,                                     # infinity
    0x7FC00000, 0x7FC00001, 0x7FFFFFFF,             # quiet NaNs
    0x7F800001, 0x7FBFFFFF, 0x7FA00000,             # signalling NaNs
]

_BF16_SPECIALS = [
    0x0000,                                         # zero
    0x0001, 0x0002, 0x0003, 0x0040, 0x007E, 0x007F, # subnormals (smallest, mid, largest)
    0x0080, 0x0081, 0x00FF, 0x0100,                 # smallest normals
    0x3F80, 0x3F81, 0x3F7F, 0x3FFF,                 # 1 and its neighbours, just below 2
    0x3FC0, 0x4000, 0x4040, 0x3F00, 0x3FA0,         # 1.5, 2, 3, 0.5, 1.25
    0x3780, 0x3700, 0x3740, 0x36C0, 0x3600, 0x3500, # 2**-16 .. 2**-21 (products land subnormal)
    0x33C0, 0x3380, 0x3400, 0x2000, 0x1F80, 0x1FFF, # 2**-24 neighbourhood, 2**-63, 2**-64
    0x5F80, 0x5F7F, 0x5FFF, 0x6000, 0x4780, 0x4B00, # 2**64 neighbourhood (products overflow)
    0x7F7F, 0x7F7E, 0x7F00,                         # largest normals
    0x7F80,                                         # infinity
    0x7FC0, 0x7FC1, 0x7FFF,                         # quiet NaNs
    0x7F81, 0x7FBF,                                 # signalling NaNs
]


def special_values(unit):
    """The special and boundary operands of ``unit`` (both signs), as ``uint32``/``uint16``."""
    width, _ = UNITS[unit]
    base = np.array(_FP32_SPECIALS if width == 32 else _BF16_SPECIALS, dtype=np.uint64)
    values = np.concatenate([base, base | (1 << (width - 1))])
    return values.astype(np.uint32 if width == 32 else np.uint16)


def special_pairs(unit):
    """Every ordered pair ``(a, b)`` of :func:`special_values`, plus, for the adder, each value
    against its negation's neighbours (cancellation to one or two ulps)."""
    v = special_values(unit)
    a, b = np.meshgrid(v, v, indexing="ij")
    a, b = a.ravel(), b.ravel()
    if unit == "fp32_add":
        finite = v[(v & 0x7F800000) != 0x7F800000].astype(np.int64)
        near = [((finite ^ 0x80000000) + d) & 0xFFFFFFFF for d in (-2, -1, 1, 2)]
        keep = [(n & 0x7FFFFFFF) <= 0x7F7FFFFF for n in near]
        a = np.concatenate([a] + [finite[k] for k in keep]).astype(np.uint32)
        b = np.concatenate([b] + [n[k] for n, k in zip(near, keep)]).astype(np.uint32)
    return a, b


def random_pairs(unit, n, seed):
    """``n`` random operand pairs: the first half uniform over bit patterns; the second half with
    close exponents (adder: ``|ea - eb| <= 2``, any signs, so cancellation is common) or, for
    the multiplier, with the product's exponent near the subnormal (2**-150 .. 2**-125) or the
    overflow (2**126 .. 2**129) boundary."""
    width, _ = UNITS[unit]
    rng = np.random.default_rng(seed)
    dtype = np.uint32 if width == 32 else np.uint16
    a = rng.integers(0, 1 << width, n, dtype=np.uint64).astype(dtype)
    b = rng.integers(0, 1 << width, n, dtype=np.uint64).astype(dtype)
    half = n // 2
    if half == 0:
        return a, b
    if unit == "fp32_add":
        ea = rng.integers(0, 255, half)
        eb = np.clip(ea + rng.integers(-2, 3, half), 0, 254)
        a[half:] = (a[half:] & 0x807FFFFF) | (ea.astype(np.uint32) << 23)[: n - half]
        b[half:] = (b[half:] & 0x807FFFFF) | (eb.astype(np.uint32) << 23)[: n - half]
    else:
        # result exponent (unbiased) target: product of (ea - 127) + (eb - 127) near -126 / +127
        m = n - half
        target = np.where(rng.random(m) < 0.6, rng.integers(-152, -124, m), rng.integers(125, 130, m))
        ea = rng.integers(0, 255, m)
        eb = target + 254 - ea
        ok = (eb >= 0) & (eb <= 254)
        eb = np.where(ok, eb, np.clip(eb, 0, 254))
        a[half:] = (a[half:] & 0x807F) | (ea.astype(np.uint16) << 7)
        b[half:] = (b[half:] & 0x807F) | (eb.astype(np.uint16) << 7)
    return a, b


def golden(unit, a, b):
    """Golden results (``uint32``) of ``unit`` on operand bit patterns."""
    return UNITS[unit][1](a, b).astype(np.uint32)


# ----------------------------------------------------------------------------------------------
# bulk path: plain Verilog harness under Icarus

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def hex_lines(*columns):
    """One text line per row: the hex of each ``(array, digits)`` column, concatenated."""
    n = len(columns[0][0])
    total = sum(d for _, d in columns)
    out = np.empty((n, total + 1), dtype=np.uint8)
    pos = 0
    for arr, digits in columns:
        arr = np.asarray(arr, dtype=np.uint64)
        for k in range(digits):
            out[:, pos + k] = _HEX[(arr >> np.uint64(4 * (digits - 1 - k))) & np.uint64(15)]
        pos += digits
    out[:, -1] = ord("\n")
    return out.tobytes()


class HarnessResult(dict):
    """Parsed ``RESULT`` line of the harness (``n, errors, extra, cycles, first_in, first_out,
    sent``) plus ``mismatches`` (the harness's first ten ``MISMATCH`` lines)."""


def run_harness(unit, a, b, *, expected=None, gap=0, stall=0, seed=1, tag="bulk"):
    """Stream the pairs ``(a[k], b[k])`` through top ``unit`` under plain Icarus, with ``gap`` /
    ``stall`` percent random valid gaps / back-pressure; returns a :class:`HarnessResult`.
    ``expected`` defaults to the golden model's results."""
    from hdl.config import Config
    from hdl.tops import build_top

    if unit not in UNITS:
        raise KeyError(f"unknown fp unit {unit!r}; known: {', '.join(UNITS)}")
    width, _ = UNITS[unit]
    if len(a) != len(b) or len(a) == 0:
        raise ValueError(f"need equally long, non-empty operand arrays, got {len(a)} and {len(b)}")
    expected = golden(unit, a, b) if expected is None else np.asarray(expected, dtype=np.uint32)
    work = BUILD / f"harness-{unit}"
    verilog = write_verilog(build_top(unit, Config()), unit, work / "rtl")
    import os
    run_dir = work / f"{tag}-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    digits = width // 4
    (run_dir / "vectors.hex").write_bytes(hex_lines((a, digits), (b, digits), (expected, 8)))
    out = run_vvp([verilog, HARNESS], "fp_stream_harness", run_dir,
                  plusargs=["+vectors=vectors.hex", f"+gap={gap}", f"+stall={stall}", f"+seed={seed}"],
                  defines={"DUT": unit, "WA": width, "WB": width, "NVEC": len(a)})
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT")), None)
    if line is None:
        raise AssertionError(f"harness printed no RESULT line:\n{out}")
    result = HarnessResult((k, int(v)) for k, v in re.findall(r"(\w+)=(-?\d+)", line))
    result["mismatches"] = [ln for ln in out.splitlines() if ln.startswith("MISMATCH")]
    (run_dir / "vectors.hex").unlink()
    return result
