"""The wafer's adapter registers (docs/wafer.md): the weight links and the gradient links.

They sit at the top ``ADAPTER_SPAN`` addresses of the configuration bus (:func:`adapter_base`,
shadowing whatever a tile has there), register ``r`` at ``adapter_base() + ADAPTER[r]``:
``W_COLOR`` (R/W: color of the weight wavelets), ``W_TAKEN``, ``G_SENT`` (R: words in over the
weight links and out over the gradient links since reset), ``G_COUNT + q`` (R/W, one per mesh
column: gradient words per block on link ``q``, ``last`` on the final one; a write restarts that
link's count). Counts are ``ADAPTER_COUNT_BITS`` wide.
"""

from types import MappingProxyType

from .config_bus import ADDR_BITS

__all__ = ["ADAPTER", "ADAPTER_SPAN", "ADAPTER_COUNT_BITS", "MAX_ADAPTER_COLUMNS", "adapter_base"]

ADAPTER = MappingProxyType({"W_COLOR": 0, "W_TAKEN": 1, "G_SENT": 2, "G_COUNT": 16})
ADAPTER_SPAN = 64
ADAPTER_COUNT_BITS = 16
MAX_ADAPTER_COLUMNS = ADAPTER_SPAN - ADAPTER["G_COUNT"]


def adapter_base():
    """Configuration address of the adapter registers (``0xFFC0``)."""
    return (1 << ADDR_BITS) - ADAPTER_SPAN
