"""Clock and synchronous reset for cocotb benches (``clk``, ``rst`` active high)."""

from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from sim.kit.trace import start_if_requested

__all__ = ["start_clock", "reset"]

PERIOD_NS = 10


def start_clock(dut):
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    start_if_requested(dut)


async def reset(dut, cycles=2):
    """Start ``clk`` and hold ``rst`` for ``cycles`` rising edges; returns after release."""
    start_clock(dut)
    dut.rst.value = 1
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    dut.rst.value = 0

