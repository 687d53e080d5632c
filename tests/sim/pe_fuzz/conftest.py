"""Fixtures of the fuzzer's tests."""

import pytest

from sim.pe_fuzz.generator import programs
from sim.pe_fuzz.model import expect
from sim.pe_fuzz.shrinker import FlipAddModel


@pytest.fixture(scope="session")
def synthetic_mismatch():
    """A legal ``tiny`` program whose sent words differ between the golden model and ``FlipAddModel``."""
    return next(p for p in programs("tiny", 60, seed=7, illegal=0.0)
                if expect(p, FlipAddModel)["out"] != expect(p)["out"])
