"""Configuration addresses of a PE tile and of the tiles of a mesh (docs/mesh.md, docs/pe.md).

In a tile, local addresses ``[0, CORE_BASE)`` are the router's map (:mod:`arch.router_map`) and
``CORE_BASE + a`` is the core's address ``a`` (:mod:`arch.pe_map`). In a mesh of ``mesh_cols``
columns, tile ``(row, col)`` owns the window of ``2**tile_addr_bits`` addresses at
``(row * mesh_cols + col) << tile_addr_bits``.
"""

from .config_bus import ADDR_BITS
from .pe_map import core_span
from .router_map import ROUTER_ADDR_SPAN

__all__ = ["CORE_BASE", "MIN_TILE_ADDR_BITS", "DEFAULT_TILE_ADDR_BITS", "tile_address",
           "tile_span", "mesh_tile_addr_bits"]

CORE_BASE = ROUTER_ADDR_SPAN
MIN_TILE_ADDR_BITS = ROUTER_ADDR_SPAN.bit_length() - 1      # a window holds at least the router
DEFAULT_TILE_ADDR_BITS = 10
assert MIN_TILE_ADDR_BITS <= DEFAULT_TILE_ADDR_BITS < ADDR_BITS


def tile_address(mesh_cols, row, col, local, tile_addr_bits=DEFAULT_TILE_ADDR_BITS):
    """Configuration address of local address ``local`` in tile ``(row, col)``."""
    return ((row * mesh_cols + col) << tile_addr_bits) | local


def tile_span(sram_words, num_tasks):
    """Local addresses a PE tile uses (router and core map)."""
    return CORE_BASE + core_span(sram_words, num_tasks)


def mesh_tile_addr_bits(sram_words, num_tasks):
    """The ``tile_addr_bits`` a mesh of PE tiles needs so that every window holds the router and
    the whole core map (10 for the ``tiny`` preset, 12 for ``default``)."""
    return max(DEFAULT_TILE_ADDR_BITS, (tile_span(sram_words, num_tasks) - 1).bit_length())
