"""fp32_add: the stream top (and so Fp32AddCore) bit-exact against models.numerics.fp32_add."""

import pytest

from sim.bench_fp import golden, random_pairs, run_harness, special_pairs

UNIT = "fp32_add"


def _check(result, n):
    assert result["mismatches"] == [] and result["errors"] == 0, result["mismatches"]
    assert result["n"] == n and result["sent"] == n and result["extra"] == 0


def test_special_pairs_harness():
    """Every pair of the special/boundary set, with random valid gaps and back-pressure."""
    a, b = special_pairs(UNIT)
    _check(run_harness(UNIT, a, b, gap=20, stall=30, seed=11, tag="special"), len(a))


def test_harness_detects_a_wrong_result():
    """The bulk harness really compares: one flipped expected bit is reported at its index."""
    a, b = special_pairs(UNIT)
    y = golden(UNIT, a, b)
    y[123] ^= 1
    result = run_harness(UNIT, a, b, expected=y, tag="corrupt")
    assert result["errors"] == 1 and result["mismatches"][0].startswith("MISMATCH 123:")
