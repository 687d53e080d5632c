"""The system top's flags (hdl/system.py): ``error`` is the OR of every SwarmX tree's and every
wafer's ``error``, ``fault`` the OR of every wafer's ``fault``. Each case raises one source on
two ``tiny`` wafers (``tiny_system``, tests/hdl/conftest.py) and reads the flags after a further
empty phase (the flags are sticky; a phase can end before what it sent has arrived)."""

import pytest

from arch.router_map import ROUTER_ADDR_SPAN
from arch.wafer_map import ADAPTER, adapter_base

pytestmark = pytest.mark.xdist_group("tiny-system")     # one testbench build


def flags(system, writes, **phase):
    states, _ = system.run(system.phase(writes, **phase), system.phase([[], []]))
    assert not states[0]["timeout"], states[0]
    return states[1]


def test_a_router_error_of_a_wafer_raises_error(tiny_system):
    """A write to an unmapped router address (``BAD_ADDR``) in wafer 1 only."""
    route = tiny_system.route(0, 1, "W", "E")
    bad = (tiny_system.tile(0, 1, ROUTER_ADDR_SPAN - 1), 1)
    st = flags(tiny_system, [[route, route], [route, bad]])
    assert (st["error"], st["fault"], st["timeout"]) == (1, 0, 0), st


def test_a_pe_fault_of_a_wafer_raises_fault(tiny_system):
    """Wavelets routed to a core with no descriptor listening (``UNBOUND``)."""
    routes = [tiny_system.route(p, 0, "W", "RAMP") for p in range(2)]
    st = flags(tiny_system, [routes, routes], wavelets=1)
    assert (st["fault"], st["error"], st["timeout"]) == (1, 0, 0), st


def test_a_swarmx_last_mismatch_raises_error(tiny_system):
    """Both wafers send two words up gradient link 0; wafer 0 ends a block after every word, wafer
    1 after two, so the tree joins ``last`` 1 with ``last`` 0: a SwarmX error, no wafer error."""
    s = tiny_system
    routes = [s.route(0, 0, "W", "N"), s.route(1, 0, "W", "N"), s.route(0, 0, "S", "N")]
    g_count = adapter_base() + ADAPTER["G_COUNT"]
    st = flags(s, [routes + [(g_count, 1)], routes + [(g_count, 2)]], wavelets=1, roots=(2, 0))
    assert (st["error"], st["fault"], st["timeout"]) == (1, 0, 0), st
