"""The wafer's adapter registers (docs/wafer.md): the weight links and the gradient links.

They sit at the top ``ADAPTER_SPAN`` addresses of the configuration bus (:func:`adapter_base`,
shadowing whatever a tile has there), register ``r`` at ``adapter_base() + ADAPTER[r]``:
``W_COLOR`` (R/W: color of the weight wavelets), ``W_TAKEN``, ``G_SENT`` (R: words in over the
weight links and out over the gradient links since reset), ``G_COUNT + q`` (R/W, one per mesh
column: gradient words per block on link ``q``, ``last`` on the final one; a write restarts that
link's count), ``TILE_MASK`` (R/W: while not 0, a write to any tile's window goes to that local
address in every tile ``r * Q + q`` whose bit is set (tiles 0..31): one write configures many
tiles, :func:`delivered_writes`). Counts are ``ADAPTER_COUNT_BITS`` wide.
"""

from types import MappingProxyType

from .config_bus import ADDR_BITS, WORD_BITS

__all__ = ["ADAPTER", "ADAPTER_SPAN", "ADAPTER_COUNT_BITS", "MAX_ADAPTER_COLUMNS", "adapter_base",
           "delivered_writes"]

ADAPTER = MappingProxyType({"W_COLOR": 0, "W_TAKEN": 1, "G_SENT": 2, "TILE_MASK": 3, "G_COUNT": 16})
ADAPTER_SPAN = 64
ADAPTER_COUNT_BITS = 16
MAX_ADAPTER_COLUMNS = ADAPTER_SPAN - ADAPTER["G_COUNT"]


def adapter_base():
    """Configuration address of the adapter registers (``0xFFC0``)."""
    return (1 << ADDR_BITS) - ADAPTER_SPAN


def delivered_writes(writes, *, tiles, tile_addr_bits):
    """The writes a wafer of ``tiles`` tiles carries out for the bus writes ``writes`` (``[(addr,
    value)]``, in order, ``TILE_MASK`` 0 at the start): a tile write under a ``TILE_MASK`` is one
    write to each tile of the mask, at ``tile << tile_addr_bits | local``; adapter writes as
    they are."""
    mask_addr, base = adapter_base() + ADAPTER["TILE_MASK"], adapter_base()
    mask, local_mask, out = 0, (1 << tile_addr_bits) - 1, []
    for addr, value in writes:
        if addr == mask_addr:
            mask = value & ((1 << min(tiles, WORD_BITS)) - 1)
        if addr >= base or not mask:
            out.append((addr, value))
        else:
            out += [(t << tile_addr_bits | addr & local_mask, value) for t in range(tiles) if mask >> t & 1]
    return out
