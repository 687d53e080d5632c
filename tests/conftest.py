"""Fixtures shared by the whole suite."""

import pytest

from sim.kit.toolchain import ICARUS_MISSING, icarus_available


@pytest.fixture
def icarus():
    """Skips the test, saying so in one line, on a machine without Icarus Verilog (the
    cross-simulator checks need it; CI installs it)."""
    if not icarus_available():
        pytest.skip(f"{ICARUS_MISSING}: this Icarus cross-check did not run")
