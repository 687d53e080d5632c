"""The configuration interface every configurable block shares (router tables, PE descriptors
and SRAM, tile = both behind one bus).

Signature (from the bus master's side, i.e. a block has ``cfg: In(ConfigBus())``):

* ``addr: Out(16)``, ``wdata: Out(32)``, ``we: Out(1)``: a write happens at a rising edge with
  ``we`` high; it takes effect from the next cycle.
* ``rdata: In(32)``: read data of ``addr``, valid exactly one cycle after ``addr`` was presented
  (registered read, so memories can sit behind it). Unmapped addresses read 0.

Each block documents its address map in its page under docs/
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ConfigBus", "ADDR_BITS"]

ADDR_BITS = 16


class ConfigBus(wiring.Signature):
    def __init__(self):
        super().__init__({
            "addr": Out(ADDR_BITS),
            "wdata": Out(32),
            "we": Out(1),
            "rdata": In(32),
        })
