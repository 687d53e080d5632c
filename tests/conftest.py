"""Fixtures shared by the whole suite."""

import os

import pytest

from sim.kit.toolchain import ICARUS_MISSING, icarus_available
from sim.kit.verilator import OPT_ENV

# Plain-Verilog testbenches build at -O0 under test: their runs take seconds, their -Os builds minutes
# (sim.kit.verilator; make sim and make bench keep Verilator's default).
os.environ.setdefault(OPT_ENV, "-O0")


@pytest.fixture
def icarus():
    """Skips the test, saying so in one line, on a machine without Icarus Verilog (the
    cross-simulator checks need it; CI installs it)."""
    if not icarus_available():
        pytest.skip(f"{ICARUS_MISSING}: this Icarus cross-check did not run")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` (a Verilator build or minutes of simulation, cold) start first, in
    their file order, so that the pytest-xdist workers do not finish on one long test while the
    other idles. Stable: every worker collects the same order, as xdist requires."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
