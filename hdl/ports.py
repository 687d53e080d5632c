"""Router port numbering (docs/architecture.md#wavelets-and-links), shared by the RTL and the golden models.

Plain Python on purpose (no amaranth import): ``models/`` imports it.
"""

import enum

__all__ = ["Port"]


class Port(enum.IntEnum):
    """Router ports; the value is the bit index in a 5-bit route mask."""
    N = 0
    E = 1
    S = 2
    W = 3
    RAMP = 4
