"""The configuration interface every configurable block shares (router tables, PE descriptors
and SRAM, tile = both behind one bus); widths from :mod:`arch.config_bus`.

Signature (from the bus master's side, i.e. a block has ``cfg: In(ConfigBus())``):

* ``addr: Out(ADDR_BITS)``, ``wdata: Out(WORD_BITS)``, ``we: Out(1)``: a write happens at a rising
  edge with ``we`` high; it takes effect from the next cycle.
* ``rdata: In(WORD_BITS)``: read data of ``addr``, valid exactly one cycle after ``addr`` was
  presented (registered read, so memories can sit behind it). Unmapped addresses read 0.

Each block documents its address map in its page under docs/ (the maps: ``arch.*_map``).
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from arch.config_bus import ADDR_BITS, WORD_BITS

__all__ = ["ConfigBus"]


class ConfigBus(wiring.Signature):
    def __init__(self):
        super().__init__({
            "addr": Out(ADDR_BITS),
            "wdata": Out(WORD_BITS),
            "we": Out(1),
            "rdata": In(WORD_BITS),
        })
