"""The 5-port color router (docs/router.md): per-color virtual channels, multicast, round-robin
arbitration per output, per-color credit flow control between routers, run-time route tables.

Ports (``p`` is one of ``n``, ``e``, ``s``, ``w``, ``ramp``; ``C = cfg.num_colors``)
--------------------------------------------------------------------------------------
A port is either a *boundary* port (edges of a mesh, the RAMP, every port of a standalone
router) or a *link* port (``links=...``: a neighbour router inside a mesh).

Boundary port ``p``:
    ``p_in: In(stream.Signature(Wavelet))``  wavelets into the router. ``ready`` is high when the
        virtual channel of the offered color has room (it depends on ``payload.color``): a stream
        whose head color is full waits, so one input stream is in order, as a stream must be.
    ``p_out: Out(stream.Signature(Wavelet))``  wavelets out; a register stage: ``valid`` is a
        flop and stays high until the transfer; ``payload`` is decoded from flops only (the held
        head words of the five inputs' memory copies, AND-OR by the held one-hot winning input:
        two LUT levels after the flops, no path from any input).
    ``p_accept: In(C)``  per-color consumer mask: the router only *starts* offering a wavelet of
        color ``c`` on ``p_out`` while ``p_accept[c]`` is high. A consumer that will never take
        color ``c`` clears the bit and keeps ``ready`` high for the others: that color then waits
        in its virtual channel and no other color is slowed. A plain stream consumer ties it to
        all ones (the mesh does that for cores without ``rx_accept``); it must then take whatever
        is offered, like any stream.
Link port ``p`` (:class:`CreditLink`): ``p_in: In(CreditLink(C))``, ``p_out: Out(CreditLink(C))``.
    ``valid``/``payload`` forward, ``credit[c]`` backward (one pulse = one slot of color ``c``
    freed in the receiver). The sender starts with ``vc_depth`` credits per color and only sends
    color ``c`` while it holds a credit for it, so the link never back-pressures as a whole.
``ramp2_out: Out(stream.Signature(Wavelet))``, ``ramp2_accept: In(C)``: the RAMP's second
    channel, a boundary output like ``ramp_out``. A wavelet routed to RAMP whose color bit is set in
    the ``RAMP2`` register leaves here instead of on ``ramp_out`` (its own arbiter and output
    register), so a core can take two wavelets per cycle: one per channel.
``cfg: In(ConfigBus())``, ``error: Out(1)`` (the sticky error flag).

Timing
------
* Injection: a wavelet transferred on a boundary ``p_in`` in cycle ``t`` is in its virtual
  channel at ``t + 1``; it can cross a link in cycle ``t + 1`` (one cycle per hop: a wavelet
  leaving a router in cycle ``t`` can leave the next one in ``t + 1``) or be loaded into a
  boundary output register in ``t + 1`` and be offered on ``p_out`` from ``t + 2``.
  Through ``h`` links: input transfer at ``t``, output offered from ``t + h + 2``.
* A word's slot is freed (its credit sent back) in the cycle after its last copy leaves: the
  credit loop is 3 cycles, one wavelet per output per cycle is sustained with ``vc_depth >= 3``
  (``vc_depth`` words per 3 cycles below).
* Several virtual channels of one input may leave on different outputs in the same cycle.

Structure (docs/router.md#structure): per input, channel buffers read by one reader per route
bit at its own pace, one memory copy per output (:class:`~hdl.router_parts.ChannelBuffers`); per
output a :class:`~hdl.router_parts.RoundRobinArbiter` whose requests are flip-flops (loaded from
the next values of the route table and of its reader's pending words); an output reads its
winner by the read address of the winner's input copy.

Arbitration
-----------
Candidates of output ``o`` are the virtual channels ``k = input * C + color`` that hold a word
``o`` has not sent (route bit set) and whose color can go (a credit, or accept bit and a
free/freeing output register). Round-robin: the lowest candidate above the last grant of ``o``,
else the lowest candidate. Each word leaves on each output of its mask exactly once, every
output in the channel's order at its own pace; its slot is freed the cycle after its last copy.

Configuration address map: :mod:`arch.router_map` (route masks at ``route_addr(color, port)``,
reset value 0 = no route; ``ADDR_ERROR``, ``ADDR_PARAMS``, ``ADDR_RAMP2`` (the colors of the
RAMP's second channel, reset 0), ``ADDR_VC_BUSY + port``, ``ADDR_OUT_BLOCKED + output``). Writes
take effect the next cycle, reads are registered; other addresses read 0 and a write to them is an
error (``BAD_ADDR``).

Errors (sticky; the first one is kept until cleared; ties in one cycle: lowest port, lowest
color)
---------------------------------------------------------------------------------------------
``NO_ROUTE`` (1): a wavelet arrived on ``(port, color)`` whose route mask is 0. It is kept in its
    virtual channel (never dropped): it leaves once a route is written.
``BAD_COLOR`` (2): a wavelet with ``color >= num_colors`` arrived; it has no virtual channel and
    is discarded (the only discard, always flagged).
``BUSY_REWRITE`` (3): a route write for ``(color, port)`` while that virtual channel holds
    wavelets under a non-zero route (or has sent part of a multicast); the write is ignored
    (routes change only while their channel is idle; a channel holding wavelets that arrived
    with no route can always be given one).
``BAD_ROUTE`` (4): a route write with bits above bit 4 (``ROUTE_MASK_BITS``); ignored.
``BAD_ADDR`` (5): a write to an unmapped address (e.g. a color ``>= num_colors``); ignored.
"""

from amaranth import Cat, Const, Module, Mux, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from arch.ports import NUM_PORTS, PORT_NAMES, RAMP2, Port, output_name
from arch.router_map import (
    ADDR_ERROR,
    ADDR_OUT_BLOCKED,
    ADDR_PARAMS,
    ADDR_RAMP2,
    ADDR_VC_BUSY,
    ERROR_STATUS,
    ROUTE_ADDR,
    ROUTE_MASK_BITS,
    ROUTER_PARAMS,
    ErrorCode,
)
from arch.wavelet import COLOR_BITS, DATA_BITS, MAX_COLORS

from .config import refuse
from .config_bus import ConfigBus
from .formal import Properties, active
from .layouts import cat_fields
from .logic import and_or, onehot_index, or_all
from .router_parts import DATA_CTRL, ChannelBuffers, RoundRobinArbiter
from .wavelet import Wavelet

__all__ = ["Router", "CreditLink"]


class CreditLink(wiring.Signature):
    """Router-to-router link, from the sender's side: ``valid``, ``payload`` (a :class:`Wavelet`)
    forward, ``credit`` (``num_colors`` bits, one pulse per freed slot of that color) backward."""

    def __init__(self, num_colors):
        self._num_colors = num_colors
        super().__init__({"valid": Out(1), "payload": Out(Wavelet), "credit": In(num_colors)})

    @property
    def num_colors(self):
        return self._num_colors

    def __eq__(self, other):
        return isinstance(other, CreditLink) and other.num_colors == self.num_colors

    def __repr__(self):
        return f"CreditLink({self._num_colors})"


class Router(wiring.Component):
    """Color router; see the module docstring for ports, timing and the address map.

    Parameters
    ----------
    cfg : Config
        ``num_colors`` and ``vc_depth`` are used.
    links : iterable of Port
        Ports (among N, E, S, W) that are credit links to a neighbour; the others are boundary
        stream ports.
    """

    def __init__(self, cfg, *, links=()):
        links = frozenset(Port(p) for p in links)
        if Port.RAMP in links:
            refuse(self, ValueError("the RAMP port is always a stream port, it cannot be a credit link"))
        self._cfg = cfg
        self._links = links
        colors = cfg.num_colors
        members = {"cfg": In(ConfigBus()), "error": Out(1)}
        for p in Port:
            name = PORT_NAMES[p]
            if p in links:
                members[f"{name}_in"] = In(CreditLink(colors))
                members[f"{name}_out"] = Out(CreditLink(colors))
            else:
                members[f"{name}_in"] = In(stream.Signature(Wavelet))
                members[f"{name}_out"] = Out(stream.Signature(Wavelet))
                members[f"{name}_accept"] = In(colors, init=(1 << colors) - 1)
        members["ramp2_out"] = Out(stream.Signature(Wavelet))
        members["ramp2_accept"] = In(colors, init=(1 << colors) - 1)
        super().__init__(members)

    @property
    def config(self):
        return self._cfg

    @property
    def links(self):
        return self._links

    def port_in(self, p):
        return getattr(self, f"{PORT_NAMES[p]}_in")

    def port_out(self, o):
        """The output stream of port ``o`` (a :class:`Port`, or :data:`~arch.ports.RAMP2`)."""
        return getattr(self, f"{output_name(o)}_out")

    def elaborate(self, platform):
        # Written with wide vectors (one bit per virtual channel k = input * C + color) so the
        # generated Verilog has few, wide nets: that is what keeps event-driven simulation fast.
        m = Module()
        C, D = self._cfg.num_colors, self._cfg.vc_depth
        N = NUM_PORTS * C
        ports = list(Port)
        outs = ports + [RAMP2]
        names = PORT_NAMES
        onames = [output_name(o) for o in outs]

        def vec(name, width=N, **kw):
            return Signal(width, name=name, **kw)

        # Route table, stored per route bit: bit k of route_v[o] = VC k is routed to port o.
        # Each register has its next value as a signal (*_next): the arbiters' request
        # registers are computed from them.
        route_v = [vec(f"route_{names[o]}") for o in ports]
        route_next = [vec(f"route_next_{names[o]}") for o in ports]
        for o in ports:
            m.d.sync += route_v[o].eq(route_next[o])
        routed = vec("routed")
        m.d.comb += routed.eq(or_all(route_v))
        # The RAMP's copy leaves on RAMP2 for the colors of the RAMP2 register: per output, the
        # channels routed to it (out_route) and the route bit, the reader, it sends for (bit_of).
        ramp2_colors = Signal(C, name="ramp2_colors")
        ramp2_next = Signal(C, name="ramp2_next")
        m.d.sync += ramp2_colors.eq(ramp2_next)

        def split(route, ramp2):
            to_ramp2 = Cat(ramp2 for _ in ports)
            return route[:Port.RAMP] + [route[Port.RAMP] & ~to_ramp2, route[Port.RAMP] & to_ramp2]
        out_route = split(route_v, ramp2_colors)
        out_route_next = split(route_next, ramp2_next)
        bit_of = ports + [Port.RAMP]

        # ---- virtual channels: per input port, C channel FIFOs (ChannelBuffers), one reader per
        # route bit (the RAMP's two outputs share one), one memory copy per output --------------
        bufs = [ChannelBuffers(C, D, bit_of) for _ in ports]
        for i in ports:
            m.submodules[f"vc_{names[i]}"] = bufs[i]
        kw = bufs[0].color_width

        def by_reader(signal_of, r):
            """Bit k = i * C + c: ``signal_of(bufs[i])``'s bits of reader ``r``."""
            return Cat(signal_of(b)[r * C:(r + 1) * C] for b in bufs)
        pending = [vec(f"pending_{names[r]}") for r in ports]
        pending_next = [vec(f"pending_next_{names[r]}") for r in ports]
        for r in ports:
            m.d.comb += [pending[r].eq(by_reader(lambda b: b.pending, r)),
                         pending_next[r].eq(by_reader(lambda b: b.next_pending, r))]
        nonempty = vec("nonempty")
        full = vec("full")
        freed = vec("freed")
        m.d.comb += [
            nonempty.eq(Cat(b.nonempty for b in bufs)),
            full.eq(Cat(b.full for b in bufs)),
            freed.eq(Cat(b.freed for b in bufs)),
        ]
        cw = Shape.cast(range(D + 1)).width
        count = [[b.counts[c * cw:(c + 1) * cw] for c in range(C)] for b in bufs]   # words per channel

        # ---- output eligibility per color ---------------------------------------------------
        credit = {}
        has_credit = {}
        elig = []         # per output: the colors it can take now
        color_ok = []     # ... the colors it could take if its register is free
        free = []         # ... its register is free or freeing (links: always)
        for o in outs:
            out = self.port_out(o)
            e = vec(f"elig_{onames[o]}", C)
            if o in self._links:
                credit_reg = Signal(C * cw, name=f"credit_{names[o]}",
                                    init=sum(D << (c * cw) for c in range(C)))
                credit[o] = [credit_reg[c * cw:(c + 1) * cw] for c in range(C)]
                # credit != 0 per color, a flip-flop updated with the counts.
                has_credit[o] = Signal(C, name=f"has_credit_{names[o]}", init=(1 << C) - 1)
                m.d.comb += e.eq(has_credit[o])
                color_ok.append(has_credit[o])
                free.append(Const(1))
            else:
                accept = getattr(self, f"{onames[o]}_accept")
                m.d.comb += e.eq(Mux(~out.valid | out.ready, accept, 0))
                color_ok.append(accept)
                free.append(~out.valid | out.ready)
            elig.append(e)

        # ---- requests, round-robin grants (one RoundRobinArbiter per output) -----------------
        # want[o] (routed here, a word this output has not sent) is a register in the arbiter,
        # loaded from the next values of the route table and of the reader's pending flags.
        want = []
        grants = []
        granting = []     # per output: some grant (from the requests, not from the grant)
        arbs = []
        for o in outs:
            arb = RoundRobinArbiter(NUM_PORTS, C)
            m.submodules[f"arb_{onames[o]}"] = arb
            w = vec(f"want_{onames[o]}")
            m.d.comb += [
                arb.next_want.eq(out_route_next[o] & pending_next[bit_of[o]]),
                arb.elig.eq(color_ok[o]),
                arb.free.eq(free[o]),
                w.eq(arb.want),
            ]
            want.append(w)
            grant = vec(f"grant_{onames[o]}")
            m.d.comb += grant.eq(arb.grant)
            grants.append(grant)
            granting.append(arb.any)
            arbs.append(arb)

        bit_grants = grants[:Port.RAMP] + [grants[Port.RAMP] | grants[RAMP2]]
        for i in ports:
            m.d.comb += [bufs[i].routed.eq(Cat(route_v[r][i * C:(i + 1) * C] for r in ports)),
                         bufs[i].take.eq(Cat(bit_grants[r][i * C:(i + 1) * C] for r in ports))]

        # ---- crossbar: each input's copy for this output reads the channel the arbiter picks
        # in that input (a read address: needs only that input's requests), then a one-hot
        # AND-OR over the inputs by the winning input.
        for o in outs:
            arb = arbs[o]
            word = Signal(DATA_CTRL, name=f"xbar_{onames[o]}_word")
            color = Signal(COLOR_BITS, name=f"xbar_{onames[o]}_color")
            local_color = [Signal(kw, name=f"xbar_{onames[o]}_{names[i]}_color") for i in ports]
            for i in ports:
                m.d.comb += [
                    local_color[i].eq(onehot_index(arb.local[i * C:(i + 1) * C], range(C), kw)),
                    bufs[i].read_select.word_select(o, C).eq(arb.local[i * C:(i + 1) * C]),
                ]
            words = [b.read_data.word_select(o, DATA_CTRL) for b in bufs]
            out = self.port_out(o)
            if o in self._links:
                m.d.comb += [
                    word.eq(and_or(arb.group, words, DATA_CTRL)),
                    color.eq(and_or(arb.group, local_color, kw)),
                    out.valid.eq(granting[o]),
                    out.payload.data.eq(word[:DATA_BITS]), out.payload.ctrl.eq(word[DATA_BITS]),
                    out.payload.color.eq(color),
                ]
                used = vec(f"used_{names[o]}", C)
                m.d.comb += used.eq(or_all([grants[o][i * C:(i + 1) * C] for i in ports]))
                for c in range(C):
                    back, n = out.credit[c], credit[o][c]
                    with m.If(back != used[c]):
                        m.d.sync += n.eq(Mux(used[c], n - 1, n + 1))
                    # used implies a credit, so a credit back with a send keeps the flag set.
                    m.d.sync += has_credit[o][c].eq(back | (has_credit[o][c] & ~(used[c] & (n == 1))))
            else:
                # The output register holds the words of every input's copy and the winning
                # input (one-hot); the payload is their AND-OR, decoded from flip-flops only.
                held = [Signal(DATA_CTRL, name=f"out_{onames[o]}_{names[i]}_word") for i in ports]
                held_group = Signal(NUM_PORTS, name=f"out_{onames[o]}_group")
                held_color = Signal(COLOR_BITS, name=f"out_{onames[o]}_color")
                with m.If(granting[o]):
                    m.d.sync += [out.valid.eq(1), held_group.eq(arb.group),
                                 held_color.eq(and_or(arb.group, local_color, kw))]
                    m.d.sync += [held[i].eq(words[i]) for i in ports]
                with m.Elif(out.ready):
                    m.d.sync += out.valid.eq(0)
                m.d.comb += [
                    word.eq(and_or(held_group, held, DATA_CTRL)),
                    color.eq(held_color),
                    out.payload.data.eq(word[:DATA_BITS]), out.payload.ctrl.eq(word[DATA_BITS]),
                    out.payload.color.eq(color),
                ]

        # ---- inputs: writes into the virtual channels, credits back -------------------------
        err_events = []   # (condition, code, color, port) in priority order
        for i in ports:
            inp = self.port_in(i)
            color_in = inp.payload.color
            in_range = (color_in < C) if C < MAX_COLORS else Const(1)
            if i in self._links:
                take = inp.valid
                m.d.comb += inp.credit.eq(freed[i * C:(i + 1) * C])
            else:
                m.d.comb += inp.ready.eq(~in_range | ~full[i * C:(i + 1) * C].bit_select(color_in, 1))
                take = inp.valid & inp.ready
            err_events.append((take & in_range & ~routed[i * C:(i + 1) * C].bit_select(color_in, 1),
                               ErrorCode.NO_ROUTE, color_in, i))
            if C < MAX_COLORS:
                err_events.append((take & ~in_range, ErrorCode.BAD_COLOR, color_in, i))
            m.d.comb += [
                bufs[i].w_en.eq(take & in_range),
                bufs[i].w_color.eq(color_in),
                bufs[i].w_data.eq(Cat(inp.payload.data, inp.payload.ctrl)),
            ]

        # ---- configuration bus --------------------------------------------------------------
        bus = self.cfg
        a_color = bus.addr[ROUTE_ADDR.field_slice("color")]
        a_port = bus.addr[ROUTE_ADDR.field_slice("port")]
        is_route = Signal()
        is_error = Signal()
        sel = Signal(range(N))
        sel_v = vec("route_sel")          # one-hot: the channel (a_port, a_color)
        busy_v = vec("busy")              # per channel: its route may not change now
        busy = Signal()
        route_we = vec("route_we")
        m.d.comb += [
            is_route.eq((bus.addr[ROUTE_ADDR.width:] == 0) & (a_port < NUM_PORTS) & (a_color < C)),
            is_error.eq(bus.addr == ADDR_ERROR),
            sel.eq(a_port * C + a_color),
            sel_v.eq(Cat((a_port == k // C) & (a_color == k % C) for k in range(N))),
            busy_v.eq(nonempty & routed),
            busy.eq((busy_v & sel_v).any()),
            route_we.eq(sel_v & ~busy_v & (bus.we & is_route & (bus.wdata[ROUTE_MASK_BITS:] == 0)
                                           ).replicate(N)),
        ]
        for o in ports:
            m.d.comb += route_next[o].eq((route_v[o] & ~route_we) | (bus.wdata[o].replicate(N) & route_we))
        err_events.append((bus.we & is_route & busy, ErrorCode.BUSY_REWRITE, a_color, a_port))
        err_events.append((bus.we & is_route & ~busy & (bus.wdata[ROUTE_MASK_BITS:] != 0),
                           ErrorCode.BAD_ROUTE, a_color, a_port))
        is_ramp2 = bus.addr == ADDR_RAMP2
        m.d.comb += ramp2_next.eq(Mux(bus.we & is_ramp2, bus.wdata[:C], ramp2_colors))
        err_events.append((bus.we & ~is_route & ~is_error & ~is_ramp2, ErrorCode.BAD_ADDR, 0, 0))

        err_flag = Signal()
        err_code = Signal(ERROR_STATUS.field_width("code"))
        err_color = Signal(COLOR_BITS)
        err_port = Signal(ERROR_STATUS.field_width("port"))
        m.d.comb += self.error.eq(err_flag)
        with m.If(bus.we & is_error):
            m.d.sync += [err_flag.eq(0), err_code.eq(0), err_color.eq(0), err_port.eq(0)]
        with m.If(~err_flag):
            first = True
            for cond, code, color, port in err_events:
                ctx = m.If(cond) if first else m.Elif(cond)
                first = False
                with ctx:
                    m.d.sync += [err_flag.eq(1), err_code.eq(code), err_color.eq(color),
                                 err_port.eq(port)]

        with m.If(is_route):
            m.d.sync += bus.rdata.eq(Cat(route_v[o].bit_select(sel, 1) for o in ports))
        with m.Elif(is_error):
            m.d.sync += bus.rdata.eq(cat_fields(ERROR_STATUS, flag=err_flag, code=err_code, port=err_port,
                                                 color=err_color))
        with m.Elif(bus.addr == ADDR_PARAMS):
            m.d.sync += bus.rdata.eq(ROUTER_PARAMS.pack(num_colors=C, vc_depth=D))
        with m.Elif(is_ramp2):
            m.d.sync += bus.rdata.eq(ramp2_colors)
        with m.Else():
            m.d.sync += bus.rdata.eq(0)
            for p in ports:
                with m.If(bus.addr == ADDR_VC_BUSY + p):
                    m.d.sync += bus.rdata.eq(nonempty[p * C:(p + 1) * C])
            for o in outs:
                with m.If(bus.addr == ADDR_OUT_BLOCKED + o):
                    m.d.sync += bus.rdata.eq(~elig[o])
        if active(platform):
            self._formal(m, platform, nonempty=nonempty, full=full, count=count, want=want, elig=elig,
                         grants=grants, granting=granting, pending=pending, credit=credit,
                         has_credit=has_credit, out_route=out_route, bit_of=bit_of, route_v=route_v,
                         bit_grants=bit_grants)
        return m

    # ---- formal properties (docs/verification.md#formal) ------------------------------------
    def _formal(self, m, platform, *, nonempty, full, count, want, elig, grants, granting, pending,
                credit, has_credit, out_route, bit_of, route_v, bit_grants):
        """Stream rules at boundary ports; credits within ``0..vc_depth`` on both sides of a link;
        channels within their depth; the registered flags and requests equal what they stand for
        (``nonempty``, ``full``, credit ``!= 0``, ``want``, ``any``); an output grants only a
        requesting channel, at most one (the channel buffers state that every word leaves once
        per routed output and is freed after its last copy). At the top, a link's neighbour is
        assumed to keep the credit protocol."""
        f = Properties(m, platform, self)
        C, D = self._cfg.num_colors, self._cfg.vc_depth
        cw = len(count[0][0])
        ports = list(Port)
        names = PORT_NAMES
        for p in ports:
            n, inp, out = names[p], self.port_in(p), self.port_out(p)
            if p in self._links:
                # For a parent's link properties (sim/formal/mesh_link.py): the credits this side
                # holds, the words its channel holds.
                for c in range(C):
                    m.d.comb += [platform.probe(self, f"{n}_out_credit{c}", cw).eq(credit[p][c]),
                                 platform.probe(self, f"{n}_in_count{c}", cw).eq(count[p][c])]
                # Receiving side: the neighbour sends color c only while it holds a credit for it.
                for c in range(C):
                    sent = inp.valid & (inp.payload.color == c)
                    held = f.counter(f"{n}_in_outstanding{c}", 8, sent, inp.credit[c])
                    f.rule(f"{n}_in_sender_has_credit{c}", ~sent | (held < D))
                    f.check(f"{n}_in_credits_match_channel{c}", held == count[p][c])
                f.rule(f"{n}_in_color_exists", ~inp.valid | (inp.payload.color < C))
                # Sending side: credits come back only for words sent (the neighbour's rule).
                for c in range(C):
                    sent = out.valid & (out.payload.color == c)
                    away = f.counter(f"{n}_out_outstanding{c}", 8, sent, out.credit[c])
                    f.rule(f"{n}_out_credit_for_sent_word{c}", ~out.credit[c] | (away != 0) | sent)
                    f.check(f"{n}_out_credit_within_depth{c}", credit[p][c] <= D)
                    f.check(f"{n}_out_credit_flag{c}", has_credit[p][c] == (credit[p][c] != 0))
                    f.check(f"{n}_out_credit_balance{c}", credit[p][c] + away == D)
                    f.cover(f"{n}_out_no_credit{c}", credit[p][c] == 0)
            else:
                f.input_stream(inp, f"{n}_in")
                f.output_stream(out, f"{n}_out")
            for c in range(C):
                k = p * C + c
                f.check(f"{n}_vc{c}_within_depth", count[p][c] <= D)
                f.check(f"{n}_vc{c}_flags", (nonempty[k] == (count[p][c] != 0)) &
                        (full[k] == (count[p][c] == D)))
            f.cover(f"{n}_vc_full", Cat(count[p][c] == D for c in range(C)).any())
        f.output_stream(self.ramp2_out, "ramp2_out")
        N = len(ports) * C
        for o in ports + [RAMP2]:
            n, g = output_name(o), grants[o]
            req = want[o] & Cat(elig[o] for _ in ports)
            f.check(f"{n}_grant_requested", (g & ~req) == 0)
            f.check(f"{n}_grant_one_hot", (g & (g - 1)[:N]) == 0)
            f.check(f"{n}_grant_routed_here", (g & ~out_route[o]) == 0)
            f.check(f"{n}_granting", granting[o] == (g != 0))
            f.check(f"{n}_want_registered", want[o] == (out_route[o] & pending[bit_of[o]]))
        f.cover("ramp2_used", grants[RAMP2] != 0)
        apart = 0
        for o in ports:
            for q in ports:
                if q != o:
                    apart = apart | (bit_grants[o] & route_v[q] & ~bit_grants[q])
        f.cover("multicast_copies_in_different_cycles", apart != 0)
