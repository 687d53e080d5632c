"""A per-cycle record of a top's outputs, to compare two simulators cycle for cycle.

When :func:`sim.kit.runner.run_bench` runs a bench with ``trace=True`` it sets ``WS_TRACE`` (a file)
and ``WS_TRACE_PORTS`` (the top's output ports); :func:`sim.kit.clocking.start_clock` then starts
:func:`record`: at every rising edge of ``clk`` it reads those outputs (``x``/``z`` bits as such)
from the second on (at the first, at time 0, Icarus has not yet evaluated the combinational
logic) and folds them into a running SHA-1, and every :data:`WINDOW` cycles and when the test ends it
appends ``<clock start> <cycle> <digest>`` to the file. Two runs behave alike cycle for cycle when
their files are equal; the first line that differs names the window of cycles where they part.
With ``WS_TRACE_RAW=1`` every cycle's values are written too (in the order of ``WS_TRACE_PORTS``).
"""

import hashlib
import os

import cocotb
from cocotb.triggers import RisingEdge

__all__ = ["WINDOW", "start_if_requested", "record"]

WINDOW = 256
_starts = 0


def start_if_requested(dut):
    """Start :func:`record` on ``dut`` when the runner asked for a trace."""
    global _starts
    path = os.environ.get("WS_TRACE")
    if path:
        ports = [getattr(dut, name) for name in os.environ["WS_TRACE_PORTS"].split(",") if name]
        cocotb.start_soon(record(dut.clk, ports, path, _starts))
        _starts += 1


async def record(clk, ports, path, start):
    digest, cycle, raw = hashlib.sha1(), 0, os.environ.get("WS_TRACE_RAW", "0") not in ("", "0")
    await RisingEdge(clk)       # the edge at time 0: Icarus has not evaluated ``always @*`` yet
    with open(path, "a") as out:
        try:
            while True:
                await RisingEdge(clk)
                values = " ".join(str(p.value) for p in ports)
                digest.update(values.encode())
                if raw:
                    out.write(f"{start} {cycle} {values}\n")
                cycle += 1
                if cycle % WINDOW == 0:
                    out.write(f"{start} {cycle} {digest.hexdigest()}\n")
        finally:
            out.write(f"{start} {cycle} {digest.hexdigest()} end\n")
