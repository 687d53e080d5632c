"""Router ports and mesh directions (docs/architecture.md#wavelets-and-links).

Router ``(r, q)`` of a mesh sits in row ``r`` (0 = north) and column ``q`` (0 = west).
"""

import enum

__all__ = ["Port", "PORT_NAMES", "NUM_PORTS", "SIDES", "STEP", "OPPOSITE", "RAMP2", "RAMP2_NAME",
           "NUM_OUTPUTS", "output_name"]


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

# The RAMP's second channel (docs/router.md#second-ramp-channel): an output only, index 5 among a
# router's outputs. Wavelets routed to RAMP whose color is set in the router's RAMP2 register
# leave on it instead of on RAMP, so the core takes two wavelets per cycle. It is not a route
# mask bit: a route still names RAMP.
RAMP2 = len(Port)
RAMP2_NAME = "ramp2"
NUM_OUTPUTS = RAMP2 + 1


def output_name(o):
    """RTL port prefix of router output ``o`` (a :class:`Port` or :data:`RAMP2`)."""
    return RAMP2_NAME if o == RAMP2 else PORT_NAMES[o]
