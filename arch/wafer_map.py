"""The wafer's adapter registers (docs/wafer.md): the weight demux and the gradient mux.

They sit at the top ``ADAPTER_SPAN`` addresses of the configuration bus (:func:`adapter_base`,
shadowing whatever a tile has there), register ``r`` at ``adapter_base() + ADAPTER[r]``:
``W_COLOR``, ``W_ROW_LEN``, ``W_MODE`` (:class:`WeightMode`), ``G_ROW_LEN``, ``G_COUNT`` (R/W;
writing a row length or ``G_COUNT`` restarts that counter), ``W_TAKEN``, ``G_SENT`` (R: words
through the adapter since reset), ``W_BOUND + q``, ``G_BOUND + q`` (R/W, one per mesh column).
Row lengths, counts and bounds are ``ADAPTER_COUNT_BITS`` wide.
"""

import enum
from types import MappingProxyType

from .config_bus import ADDR_BITS

__all__ = ["ADAPTER", "ADAPTER_SPAN", "ADAPTER_COUNT_BITS", "MAX_ADAPTER_COLUMNS", "WeightMode",
           "adapter_base"]

ADAPTER = MappingProxyType({"W_COLOR": 0, "W_ROW_LEN": 1, "G_ROW_LEN": 2, "G_COUNT": 3,
                            "W_TAKEN": 4, "G_SENT": 5, "W_MODE": 6, "W_BOUND": 16, "G_BOUND": 40})
ADAPTER_SPAN = 64
ADAPTER_COUNT_BITS = 16
MAX_ADAPTER_COLUMNS = ADAPTER["G_BOUND"] - ADAPTER["W_BOUND"]


class WeightMode(enum.IntEnum):
    """``W_MODE``: how the weight demux picks the column of a word."""
    ROWS = 0          # by the word's index k within its row (W, forward)
    TRANSPOSED = 1    # by the row index (W^T, backward-data)


def adapter_base():
    """Configuration address of the adapter registers (``0xFFC0``)."""
    return (1 << ADDR_BITS) - ADAPTER_SPAN
