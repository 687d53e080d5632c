"""The configuration bus every configurable block shares (docs/architecture.md): word addresses of
``ADDR_BITS`` bits, data words of ``WORD_BITS`` bits."""

__all__ = ["ADDR_BITS", "WORD_BITS", "WORD_MASK"]

ADDR_BITS = 16
WORD_BITS = 32
WORD_MASK = (1 << WORD_BITS) - 1
