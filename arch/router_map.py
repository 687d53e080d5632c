"""The router's configuration address map, its status words and error codes (docs/router.md).

Addresses (word addresses of the configuration bus; writes act the next cycle, reads are
registered): ``route_addr(color, port)`` (``0x000 + color * 8 + port``) the route mask (R/W, reset
0 = no route; bit ``p`` = output ``Port(p)``) of wavelets of ``color`` arriving on input ``port``;
``ADDR_ERROR`` the :data:`ERROR_STATUS` word (R; any write clears it); ``ADDR_PARAMS`` the
:data:`ROUTER_PARAMS` word (R); ``ADDR_RAMP2`` bit ``c`` = wavelets of color ``c`` routed to RAMP
leave on the RAMP's second channel (R/W, reset 0); ``ADDR_VC_BUSY + port`` bit ``c`` = channel
``(port, c)`` holds a wavelet (R); ``ADDR_OUT_BLOCKED + output`` bit ``c`` = that output (a port,
or ``RAMP2``) cannot take color ``c`` now: no credit, accept bit low, or output register full and
not being read (R). Other addresses read
0 and a write to them is a ``BAD_ADDR`` error. A router uses ``ROUTER_ADDR_SPAN`` addresses.
"""

import enum

from .layout import BitLayout
from .ports import NUM_PORTS, Port
from .wavelet import COLOR_BITS

__all__ = ["ROUTE_ADDR", "route_addr", "route_mask", "ROUTE_MASK_BITS", "ADDR_ERROR",
           "ADDR_PARAMS", "ADDR_RAMP2", "ADDR_VC_BUSY", "ADDR_OUT_BLOCKED", "ROUTER_ADDR_SPAN", "ErrorCode",
           "ERROR_STATUS", "ROUTER_PARAMS"]

ROUTE_ADDR = BitLayout("route address", ("port", 3), ("color", COLOR_BITS))
ROUTE_MASK_BITS = NUM_PORTS         # bit p of a route mask = output Port(p); higher bits: BAD_ROUTE
ADDR_ERROR = 0x100
ADDR_PARAMS = 0x101
ADDR_RAMP2 = 0x102
ADDR_VC_BUSY = 0x108
ADDR_OUT_BLOCKED = 0x110
ROUTER_ADDR_SPAN = 0x200
assert 1 << ROUTE_ADDR.width == ADDR_ERROR      # route entries fill [0, ADDR_ERROR)


def route_addr(color, port):
    """Configuration address of the route mask of ``(color, input port)``."""
    return ROUTE_ADDR.pack(port=port, color=color)


def route_mask(ports):
    """Route mask of ``ports`` (:class:`Port` values or their names ``"N"`` .. ``"RAMP"``)."""
    mask = 0
    for p in ports:
        mask |= 1 << (Port[p] if isinstance(p, str) else Port(p))
    return mask


class ErrorCode(enum.IntEnum):
    """Sticky router errors (the ``code`` of :data:`ERROR_STATUS`)."""
    NONE = 0
    NO_ROUTE = 1        # a wavelet arrived on (port, color) with route mask 0; it is held
    BAD_COLOR = 2       # a wavelet with color >= num_colors arrived; it is discarded
    BUSY_REWRITE = 3    # a route write while that channel holds routed wavelets; ignored
    BAD_ROUTE = 4       # a route write with bits above ROUTE_MASK_BITS; ignored
    BAD_ADDR = 5        # a write to an unmapped address; ignored


# The word at ADDR_ERROR: all fields 0 while no error is held.
ERROR_STATUS = BitLayout("router error status", ("flag", 1), ("code", 3), ("port", 3),
                         ("reserved", 1), ("color", COLOR_BITS))
# The word at ADDR_PARAMS.
ROUTER_PARAMS = BitLayout("router parameters", ("num_colors", 8), ("vc_depth", 8))
