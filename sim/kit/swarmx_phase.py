"""cocotb driver of one phase of the SwarmX system harness (``sim.harness.swarmx_system``):
set the word counts (and the stall thresholds), pulse ``start``, wait for ``done``."""

import cocotb
from cocotb.triggers import RisingEdge, with_timeout

from sim.kit.clocking import PERIOD_NS

__all__ = ["run_swarmx_phase"]


async def run_swarmx_phase(dut, bcast_count, reduce_count, timeout_cycles, stall=None):
    """Run one phase; ``stall`` (0..255) sets both LFSR thresholds, ``None`` keeps them. Raises
    ``AssertionError`` when ``done`` does not come within ``timeout_cycles`` (words lost or the tree
    deadlocked), when a recorder overflowed (extra words) or when SwarmX flags a ``last`` mismatch."""
    dut.bcast_count.value = bcast_count
    dut.reduce_count.value = reduce_count
    if stall is not None:
        dut.src_stall.value = stall
        dut.sink_stall.value = stall
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    await RisingEdge(dut.clk)
    try:
        await with_timeout(RisingEdge(dut.done), timeout_cycles * PERIOD_NS, "ns")
    except cocotb.triggers.SimTimeoutError:
        raise AssertionError(f"phase did not finish within {timeout_cycles} cycles: words lost or "
                             f"the tree deadlocked (overflow={int(dut.overflow.value)}, "
                             f"error={int(dut.error.value)})") from None
    assert not int(dut.overflow.value), "a recorder overflowed: the tree delivered extra words"
    assert not int(dut.error.value), "SwarmX raised its last-mismatch error"
