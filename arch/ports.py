"""Router ports and mesh directions (docs/architecture.md#wavelets-and-links).

Router ``(r, q)`` of a mesh sits in row ``r`` (0 = north) and column ``q`` (0 = west).
"""

import enum

__all__ = ["Port", "PORT_NAMES", "NUM_PORTS", "SIDES", "STEP", "OPPOSITE"]


class Port(enum.IntEnum):
    """Router ports; the value is the bit index in a route mask."""
    N = 0
    E = 1
    S = 2
    W = 3
    RAMP = 4


PORT_NAMES = tuple(p.name.lower() for p in Port)     # "n", "e", "s", "w", "ramp": RTL port prefixes
NUM_PORTS = len(Port)
SIDES = (Port.N, Port.E, Port.S, Port.W)              # the ports that lead to a neighbour
STEP = {Port.N: (-1, 0), Port.E: (0, 1), Port.S: (1, 0), Port.W: (0, -1)}   # (row, col) step
OPPOSITE = {Port.N: Port.S, Port.E: Port.W, Port.S: Port.N, Port.W: Port.E}  # input at the neighbour
