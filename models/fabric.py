"""Cycle-level golden model of the color router and the P x Q mesh (hdl/router.py, hdl/mesh.py).

Given the route tables and, per boundary input, the wavelets and the cycles the driver leaves
idle ("gaps"), per boundary output the ``ready`` of every cycle and the accept mask, it gives
the cycle at which every wavelet is accepted and the cycle at which every copy leaves. It is
written from the contract in hdl/router.py (not from the RTL):

* state changes only at clock edges; everything a router decides in cycle ``t`` depends on its
  state at the start of ``t`` and on ``ready``/``accept``/input ``valid`` in ``t``;
* virtual channel ``(input i, color c)`` (candidate index ``k = i * C + c``) requests output
  ``o`` while its route mask has bit ``o`` and it holds a wavelet that output has not sent yet
  (each output reads the channel's words in order, at its own pace), and output ``o`` can take
  color ``c`` (a credit; or the accept bit and an output register that is empty or being read in
  ``t``); round-robin per output: the lowest request above the last grant, else the lowest;
* the head leaves its channel (its slot is freed) in the cycle after the one its last copy is
  granted in, at the end of that cycle;
* a boundary input is ready when the offered color's channel is not full at the start of ``t``;
* a link grant in ``t`` writes the downstream channel at the end of ``t``; a freed slot's credit
  returns at the end of the cycle it is freed in; a boundary output register loaded in ``t`` is
  offered from ``t + 1``.

* a wavelet routed to RAMP whose color is set in the router's RAMP2 mask leaves on the RAMP's
  second channel instead, a boundary output of its own (``(r, q, RAMP2)``, its own round-robin
  pointer and register); it counts as the RAMP copy of the route.

Ports are named ``(row, col, Port)`` (``(row, col, RAMP2)`` for the RAMP's second channel, an
output only); a standalone router is the 1 x 1 mesh.
"""

from collections import deque

from arch.ports import NUM_OUTPUTS, NUM_PORTS, OPPOSITE, RAMP2, STEP, Port
from arch.router_map import ROUTE_MASK_BITS, ErrorCode
from arch.wavelet import MAX_COLORS

__all__ = ["FabricModel", "boundary_ports", "neighbour", "walk", "xy_path", "xy_routes",
           "ZERO_LOAD_OVERHEAD", "CREDIT_LOOP", "zero_load_latency", "Deadlock"]

# Cycles from a boundary input transfer to the first cycle the wavelet is offered on a boundary
# output, beyond one cycle per router-to-router link (injection write + output register).
ZERO_LOAD_OVERHEAD = 2
# Cycles from a channel slot's write to the next write it can take when its word leaves at once
# (written in t, sent in t + 1, freed in t + 2, written again in t + 3; over a link the credit
# makes the same loop): a channel of ``vc_depth`` words moves ``min(vc_depth, 3)`` per 3 cycles.
CREDIT_LOOP = 3


class Deadlock(RuntimeError):
    """No progress although wavelets are still in flight."""


def zero_load_latency(hops):
    """Cycles from input transfer to output transfer at zero load with ``ready`` high."""
    return hops + ZERO_LOAD_OVERHEAD


def neighbour(rows, cols, r, q, port):
    """``(r2, q2, input port)`` reached through output ``port`` of router ``(r, q)``, or None
    when that output is a boundary port."""
    if port == Port.RAMP:
        return None
    dr, dq = STEP[Port(port)]
    r2, q2 = r + dr, q + dq
    if 0 <= r2 < rows and 0 <= q2 < cols:
        return r2, q2, OPPOSITE[Port(port)]
    return None


def boundary_ports(rows, cols):
    """Every boundary port ``(r, q, Port)`` of a ``rows x cols`` mesh (inputs and outputs alike)."""
    out = []
    for r in range(rows):
        for q in range(cols):
            for p in Port:
                if neighbour(rows, cols, r, q, p) is None:
                    out.append((r, q, p))
    return out


# The ports a route mask names, ascending, for every mask.
_SET_BITS = [tuple(o for o in range(NUM_PORTS) if m >> o & 1) for m in range(1 << NUM_PORTS)]


def _out_key(o):
    return RAMP2 if o == RAMP2 else Port(o)


def walk(routes, rows, cols, r, q, port, color, limit=10000, ramp2=None):
    """Boundary outputs ``[(r, q, Port), ...]`` (with hop counts: ``{dest: links}``) a wavelet of
    ``color`` entering router ``(r, q)`` on input ``port`` reaches, following the route tables
    ``routes[(r, q)][color][port]`` (and the RAMP2 masks ``ramp2[(r, q)]``: a RAMP destination of
    a color set there is ``(r, q, RAMP2)``). Raises ``ValueError`` on a routing loop."""
    dests = {}
    stack = [(r, q, Port(port), 0)]
    steps = 0
    while stack:
        r, q, p, h = stack.pop()
        steps += 1
        if steps > limit:
            raise ValueError("routing loop: a wavelet would circulate forever")
        mask = routes[(r, q)][color][p]
        for o in Port:
            if mask >> o & 1:
                nb = neighbour(rows, cols, r, q, o)
                if nb is None:
                    if o == Port.RAMP and ramp2 and ramp2.get((r, q), 0) >> color & 1:
                        o = RAMP2
                    if (r, q, o) in dests:
                        raise ValueError(f"two copies of color {color} reach {(r, q, o)}")
                    dests[(r, q, o)] = h
                else:
                    stack.append((*nb, h + 1))
    return dests


def xy_path(rows, cols, src, dst):
    """Dimension-ordered (X then Y) path from boundary input ``src`` to boundary output ``dst``:
    list of ``((r, q), input port, output port)`` per router."""
    (r, q, pin), (rd, qd, pout) = src, dst
    path = []
    cur_in = Port(pin)
    while (r, q) != (rd, qd):
        if q != qd:
            o = Port.E if qd > q else Port.W
        else:
            o = Port.S if rd > r else Port.N
        path.append(((r, q), cur_in, o))
        r, q, cur_in = neighbour(rows, cols, r, q, o)
    path.append(((r, q), cur_in, Port(pout)))
    return path


def xy_routes(rows, cols, num_colors, flows):
    """Route tables ``{(r, q): [[mask per input port] per color]}`` for ``flows``: a list of
    ``(color, source boundary input, [boundary outputs])``, each routed X then Y; flows of one
    color share table entries (so a wavelet goes wherever the union of the entries it meets
    leads: use :func:`walk` for the destinations)."""
    routes = {(r, q): [[0] * NUM_PORTS for _ in range(num_colors)] for r in range(rows) for q in range(cols)}
    for color, src, dsts in flows:
        for dst in dsts:
            for (r, q), pin, pout in xy_path(rows, cols, src, dst):
                routes[(r, q)][color][pin] |= 1 << pout
    return routes


class _Router:
    __slots__ = ("r", "q", "vc", "ahead", "freeing", "rr", "credit", "outreg", "links", "edge_outputs")

    def __init__(self, r, q, links, colors, depth):
        self.r, self.q = r, q
        self.links = links                          # {out port: (r2, q2, in port)}
        self.vc = {}                                # (i, c) -> deque of (data, ctrl)
        self.ahead = {}                             # (i, c) -> per route bit: words sent, not freed
        self.freeing = set()                        # (i, c) whose head leaves at the end of this cycle
        self.rr = [-1] * NUM_OUTPUTS
        self.credit = {o: [depth] * colors for o in links}
        self.outreg = [None] * NUM_OUTPUTS          # boundary outputs: (data, color, ctrl)
        self.edge_outputs = [(o, (r, q, _out_key(o))) for o in range(NUM_OUTPUTS) if o not in links]


class FabricModel:
    """Cycle-level model of a ``rows x cols`` mesh of routers (``1 x 1`` = one router).

    ``routes`` is ``{(r, q): [[mask] * NUM_PORTS per color]}``, as :func:`xy_routes` builds; it can be
    changed between runs (the fabric keeps its state across :meth:`run` calls, like hardware
    across phases) through :meth:`write_route`, which applies the same checks as the hardware.
    ``ramp2``: ``{(r, q): mask}`` the RAMP2 register of each router (missing: 0), also written by
    :meth:`write_ramp2`.
    """

    def __init__(self, rows, cols, num_colors, vc_depth, routes=None, ramp2=None):
        if not (1 <= num_colors <= MAX_COLORS):
            raise ValueError(f"num_colors must be in 1..{MAX_COLORS}, got {num_colors}")
        if vc_depth < 1:
            raise ValueError(f"vc_depth must be >= 1, got {vc_depth}")
        self.rows, self.cols, self.colors, self.depth = rows, cols, num_colors, vc_depth
        self.routes = routes or {(r, q): [[0] * NUM_PORTS for _ in range(num_colors)]
                                 for r in range(rows) for q in range(cols)}
        self.routers = {}
        for r in range(rows):
            for q in range(cols):
                links = {}
                for p in (Port.N, Port.E, Port.S, Port.W):
                    nb = neighbour(rows, cols, r, q, p)
                    if nb is not None:
                        links[p] = nb
                self.routers[(r, q)] = _Router(r, q, links, num_colors, vc_depth)
        self.errors = {rq: None for rq in self.routers}    # (code, color, port) sticky
        self.ramp2 = {rq: 0 for rq in self.routers}
        for rq, mask in (ramp2 or {}).items():
            self.write_ramp2(*rq, mask)
        self.cycle = 0

    # ---- configuration (same rules as the hardware's config bus) ----------------------------
    def write_route(self, r, q, color, port, mask):
        """Write a route entry; returns the :class:`~arch.router_map.ErrorCode` raised (``NONE`` =
        accepted)."""
        rt = self.routers[(r, q)]
        code = ErrorCode.NONE
        if not (0 <= color < self.colors and 0 <= port < NUM_PORTS):
            code = ErrorCode.BAD_ADDR
            color, port = 0, 0
        elif rt.vc.get((port, color)) and self.routes[(r, q)][color][port]:
            code = ErrorCode.BUSY_REWRITE
        elif mask >> ROUTE_MASK_BITS:
            code = ErrorCode.BAD_ROUTE
        else:
            self.routes[(r, q)][color][port] = mask
        if code and self.errors[(r, q)] is None:
            self.errors[(r, q)] = (code, color, port)
        return code

    def write_ramp2(self, r, q, mask):
        """Write the RAMP2 register of router ``(r, q)`` (acts from the next cycle, any time)."""
        self.ramp2[(r, q)] = mask & ((1 << self.colors) - 1)

    def clear_error(self, r, q):
        self.errors[(r, q)] = None

    def idle(self):
        return all(not rt.vc and all(x is None for x in rt.outreg) for rt in self.routers.values())

    def occupancy(self):
        """``{(r, q, Port, color): wavelets}`` of every non-empty virtual channel."""
        return {(rt.r, rt.q, Port(i), c): len(d) for rt in self.routers.values()
                for (i, c), d in rt.vc.items() if d}

    # ---- simulation -------------------------------------------------------------------------
    def run(self, inputs, *, gaps=None, ready=None, accept=None, max_cycles=1_000_000,
            stall_limit=2000, until_idle=True, stuck_ok=False):
        """Simulate from the current state.

        inputs : ``{(r, q, Port): [(data, color, ctrl), ...]}`` per boundary input, in order.
        gaps : ``{port: f(cycle) -> bool}`` (True = the driver stays idle that cycle, only
            consulted while it offers nothing); missing = never idle.
        ready : ``{port: f(cycle) -> bool}`` for boundary outputs; missing = always ready.
        accept : ``{port: mask}`` per boundary output; missing = all colors.
        Cycles are counted from 0 at the first call after construction, continuing across calls
        (``self.cycle``). Stops when every input is consumed and the fabric is idle
        (``until_idle``) or after ``max_cycles``; raises :class:`Deadlock` when nothing moves
        for ``stall_limit`` cycles while wavelets wait (with ``stuck_ok``: returns instead, the
        stuck wavelets staying where they are).

        Returns ``(accepted, delivered)``: ``accepted[port]`` = list of input transfer cycles;
        ``delivered`` = list of ``(cycle, (r, q, Port), (data, color, ctrl))`` output transfers.
        """
        C, D = self.colors, self.depth
        gaps = gaps or {}
        ready = ready or {}
        accept = accept or {}
        full_mask = (1 << C) - 1
        queues = {p: list(ws) for p, ws in inputs.items()}
        remaining = sum(len(ws) for ws in queues.values())     # words not yet accepted
        ptr = {p: 0 for p in queues}
        offering = {p: False for p in queues}
        accepted = {p: [] for p in queues}
        delivered = []
        routers = self.routers
        routes = self.routes
        inputs_by_router = {}
        for p in queues:
            inputs_by_router.setdefault((p[0], p[1]), []).append(p)
        last_progress = self.cycle
        end = self.cycle + max_cycles
        while self.cycle < end:
            t = self.cycle
            progress = False
            # Drivers decide what they offer in t.
            for p in queues:
                if not offering[p] and ptr[p] < len(queues[p]):
                    g = gaps.get(p)
                    if g is None or not g(t):
                        offering[p] = True
            link_writes = []      # (router key, (i, c), word)
            credit_back = []      # (router key, out port, color)
            new_errors = {}
            for key, rt in routers.items():
                r, q = key
                ins = inputs_by_router.get(key, ())
                if not rt.vc and rt.outreg.count(None) == NUM_OUTPUTS and not any(
                        offering[p] for p in ins):
                    continue
                # Boundary outputs: transfers in t, and which can be (re)loaded.
                free = {}
                for o, port in rt.edge_outputs:
                    rd = ready.get(port)
                    is_ready = True if rd is None else bool(rd(t))
                    if rt.outreg[o] is not None and is_ready:
                        delivered.append((t, port, rt.outreg[o]))
                        progress = True
                    free[o] = (rt.outreg[o] is None or is_ready,
                               accept.get(port, full_mask))
                # Boundary input readiness from start-of-cycle counts.
                in_take = []
                for p in ins:
                    if offering[p]:
                        data, color, ctrl = queues[p][ptr[p]]
                        if color >= C:
                            in_take.append((p, None))
                        else:
                            d = rt.vc.get((p[2], color))
                            if d is None or len(d) < D:
                                in_take.append((p, (data, color, ctrl)))
                # Requests.
                reqs = [[] for _ in range(NUM_OUTPUTS)]
                tab = routes[key]
                split = self.ramp2[key]
                for (i, c), d in rt.vc.items():
                    mask = tab[c][i]
                    if not mask:
                        continue
                    ahead = rt.ahead.setdefault((i, c), [0] * NUM_PORTS)
                    k = i * C + c
                    for o in _SET_BITS[mask]:
                        if ahead[o] >= len(d):
                            continue
                        if o == Port.RAMP and split >> c & 1:
                            o = RAMP2
                        if o in rt.links:
                            ok = rt.credit[o][c] > 0
                        else:
                            f, acc = free[o]
                            ok = f and (acc >> c & 1)
                        if ok:
                            reqs[o].append(k)
                granted = {}
                for o in range(NUM_OUTPUTS):
                    req = reqs[o]
                    if req:
                        last = rt.rr[o]
                        above = [k for k in req if k > last]
                        k = min(above) if above else min(req)
                        rt.rr[o] = k
                        i, c = divmod(k, C)
                        bit = Port.RAMP if o == RAMP2 else o
                        granted.setdefault((i, c), []).append(bit)
                        data, ctrl = rt.vc[(i, c)][rt.ahead[(i, c)][bit]]
                        if o in rt.links:
                            rt.credit[o][c] -= 1
                            link_writes.append((rt.links[o], (data, c, ctrl)))
                        else:
                            rt.outreg[o] = (data, c, ctrl)
                        progress = True
                    elif o in free and rt.outreg[o] is not None and free[o][0]:
                        rt.outreg[o] = None
                # End of cycle: the freed heads leave, the granted readers move on, and a head
                # every routed reader has now sent is freed in the next cycle.
                changed = rt.freeing | granted.keys()        # the only channels whose state moves
                for ic in rt.freeing:
                    rt.vc[ic].popleft()
                    mask, ahead = tab[ic[1]][ic[0]], rt.ahead[ic]
                    for o in _SET_BITS[mask]:
                        ahead[o] -= 1
                    i, c = ic
                    if i in rt.links:
                        r2, q2, p2 = rt.links[i]
                        credit_back.append(((r2, q2), p2, c))
                for ic, bits in granted.items():
                    for bit in bits:
                        rt.ahead[ic][bit] += 1
                rt.freeing = set()
                for ic in changed:
                    d = rt.vc[ic]
                    if not d:
                        del rt.vc[ic]
                        rt.ahead.pop(ic, None)
                        continue
                    mask = tab[ic[1]][ic[0]]
                    ahead = rt.ahead.get(ic)
                    if mask and ahead and all(ahead[o] for o in _SET_BITS[mask]):
                        rt.freeing.add(ic)
                # Boundary inputs accepted in t.
                for p, word in in_take:
                    accepted[p].append(t)
                    ptr[p] += 1
                    remaining -= 1
                    offering[p] = False
                    progress = True
                    if word is None:
                        new_errors.setdefault(key, []).append((p[2], ErrorCode.BAD_COLOR,
                                                               queues[p][ptr[p] - 1][1]))
                    else:
                        link_writes.append(((r, q, p[2]), word))
            # End of cycle: writes into channels, credits back.
            for (r2, q2, i), (data, c, ctrl) in link_writes:
                rt2 = routers[(r2, q2)]
                rt2.vc.setdefault((i, c), deque()).append((data, ctrl))
                if len(rt2.vc[(i, c)]) > D:
                    raise AssertionError(f"model overflow at {(r2, q2, i, c)}")
                if routes[(r2, q2)][c][i] == 0:
                    new_errors.setdefault((r2, q2), []).append((i, ErrorCode.NO_ROUTE, c))
            for key, o, c in credit_back:
                routers[key].credit[o][c] += 1
            for key, evs in new_errors.items():
                if self.errors[key] is None:
                    i, code, c = min(evs)
                    self.errors[key] = (code, c, i)
            self.cycle += 1
            if progress:
                last_progress = self.cycle
            if until_idle and not remaining and self.idle():
                break
            if self.cycle - last_progress > stall_limit:
                if stuck_ok:
                    break
                raise Deadlock(f"no progress for {stall_limit} cycles at cycle {self.cycle}; "
                               f"occupancy {self.occupancy()}")
        return accepted, delivered
