"""cocotb bench for the standalone ``router`` top: configuration bus, error flag, held and
discarded wavelets, per-color isolation at a boundary output, zero-load timing. Every check of
cycle behaviour compares with the golden model (models/fabric.py, a 1 x 1 mesh).

Bulk random traffic through the router runs in the plain-Verilog harness instead
(sim/benches/mesh.py, tests/hdl/test_router.py).

Parameters (``sim.kit.params()``): ``num_colors``, ``vc_depth``.
"""

import random

import cocotb
from cocotb.triggers import FallingEdge, Timer

from arch.ports import PORT_NAMES, Port
from arch.router_map import (
    ADDR_ERROR,
    ADDR_OUT_BLOCKED,
    ADDR_PARAMS,
    ADDR_VC_BUSY,
    ERROR_STATUS,
    ROUTE_MASK_BITS,
    ROUTER_PARAMS,
    ErrorCode,
    route_addr,
    route_mask,
)
from arch.wavelet import pack_wavelet, unpack_wavelet
from models.fabric import CREDIT_LOOP, FabricModel, zero_load_latency
from sim.kit import params
from sim.kit.clocking import reset


class Bench:
    """One coroutine drives every port of the router, once per cycle (at the falling edge)."""

    def __init__(self, dut):
        self.dut = dut
        p = params()
        self.C = p["num_colors"]
        self.D = p["vc_depth"]
        self.cycle = 0
        for name in PORT_NAMES:
            getattr(dut, f"{name}_in__valid").value = 0
            getattr(dut, f"{name}_in__payload").value = 0
            getattr(dut, f"{name}_out__ready").value = 0
            getattr(dut, f"{name}_accept").value = (1 << self.C) - 1
        dut.cfg__we.value = 0
        dut.cfg__addr.value = 0
        dut.cfg__wdata.value = 0

    async def start(self):
        await reset(self.dut)
        await FallingEdge(self.dut.clk)

    async def write(self, addr, data):
        d = self.dut
        d.cfg__addr.value, d.cfg__wdata.value, d.cfg__we.value = addr, data, 1
        await FallingEdge(d.clk)
        d.cfg__we.value = 0

    async def read(self, addr):
        self.dut.cfg__addr.value = addr
        await FallingEdge(self.dut.clk)
        return int(self.dut.cfg__rdata.value)

    async def error_status(self):
        v = ERROR_STATUS.unpack(await self.read(ADDR_ERROR))
        assert v["flag"] == int(self.dut.error.value), "error pin and status register disagree"
        if not v["flag"]:
            return None
        return v["code"], v["color"], v["port"]

    async def traffic(self, inputs, cycles, *, ready=None, accept=None):
        """Offer ``inputs`` ({Port: [(data, color, ctrl)]}, no gaps) for ``cycles`` cycles;
        returns (accept cycles per port, [(cycle, Port, wavelet)]) with cycle 0 = first cycle."""
        d = self.dut
        queues = {p: list(ws) for p, ws in inputs.items()}
        accepted = {p: [] for p in queues}
        delivered = []
        for p in Port:
            getattr(d, f"{PORT_NAMES[p]}_accept").value = (accept or {}).get(p, (1 << self.C) - 1)
        for t in range(cycles):
            for p in Port:
                name = PORT_NAMES[p]
                q = queues.get(p)
                v = getattr(d, f"{name}_in__valid")
                if q:
                    v.value = 1
                    getattr(d, f"{name}_in__payload").value = pack_wavelet(*q[0])
                else:
                    v.value = 0
                r = (ready or {}).get(p)
                getattr(d, f"{name}_out__ready").value = 1 if r is None else int(r(t))
            await Timer(1, "ns")
            for p in Port:
                name = PORT_NAMES[p]
                if queues.get(p) and int(getattr(d, f"{name}_in__ready").value):
                    accepted[p].append(t)
                    queues[p].pop(0)
                if int(getattr(d, f"{name}_out__valid").value) and \
                        int(getattr(d, f"{name}_out__ready").value):
                    delivered.append((t, p, unpack_wavelet(int(getattr(d, f"{name}_out__payload").value))))
            await FallingEdge(d.clk)
        for p in Port:
            getattr(d, f"{PORT_NAMES[p]}_in__valid").value = 0
            getattr(d, f"{PORT_NAMES[p]}_out__ready").value = 0
        return accepted, delivered


def _model_run(model, inputs, **kw):
    model.cycle = 0
    acc, dl = model.run({(0, 0, p): ws for p, ws in inputs.items()}, **kw)
    return ({p[2]: c for p, c in acc.items()},
            [(t, port[2], w) for t, port, w in dl])


@cocotb.test()
async def config_readback(dut):
    """Every route entry reads back what was written; parameters and unmapped reads."""
    b = Bench(dut)
    await b.start()
    rng = random.Random(cocotb.RANDOM_SEED)
    table = {(c, p): rng.randrange(1 << ROUTE_MASK_BITS) for c in range(b.C) for p in Port}
    for (c, p), mask in table.items():
        await b.write(route_addr(c, p), mask)
    for (c, p), mask in table.items():
        got = await b.read(route_addr(c, p))
        assert got == mask, f"route (color {c}, port {p}) reads {got:#x}, wrote {mask:#x}"
    assert await b.read(ADDR_PARAMS) == ROUTER_PARAMS.pack(num_colors=b.C, vc_depth=b.D)
    assert await b.read(0x1F0) == 0, "unmapped address must read 0"
    for p in Port:
        assert await b.read(ADDR_VC_BUSY + p) == 0, "idle router reports a busy channel"
        # Outputs are blocked for no color while idle (out registers empty, credits full).
        assert await b.read(ADDR_OUT_BLOCKED + p) == 0
    assert await b.error_status() is None


@cocotb.test()
async def config_errors(dut):
    """Bad writes raise the sticky flag with code, color and port, and are ignored."""
    b = Bench(dut)
    await b.start()
    model = FabricModel(1, 1, b.C, b.D)
    await b.write(route_addr(1, Port.E), 1 << Port.W)
    model.write_route(0, 0, 1, Port.E, 1 << Port.W)
    # A mask with bits above bit 4.
    await b.write(route_addr(1, Port.E), 0x25)
    code = model.write_route(0, 0, 1, Port.E, 0x25)
    assert code == ErrorCode.BAD_ROUTE
    assert await b.error_status() == (ErrorCode.BAD_ROUTE, 1, Port.E)
    assert await b.read(route_addr(1, Port.E)) == 1 << Port.W, "a bad write changed the table"
    # Sticky: a second error does not overwrite the first.
    await b.write(0x1F0, 1)
    assert await b.error_status() == (ErrorCode.BAD_ROUTE, 1, Port.E)
    await b.write(ADDR_ERROR, 0)
    assert await b.error_status() is None, "write to the status register must clear it"
    await b.write(0x1F0, 1)
    assert await b.error_status() == (ErrorCode.BAD_ADDR, 0, 0)
    await b.write(ADDR_ERROR, 0)
    if b.C < 32:
        await b.write(route_addr(b.C, Port.N), 1)   # a color the router does not have
        assert await b.error_status() == (ErrorCode.BAD_ADDR, 0, 0)
        await b.write(ADDR_ERROR, 0)


@cocotb.test()
async def unrouted_and_bad_colors(dut):
    """A wavelet on an unrouted color is held (flag NO_ROUTE) and leaves once routed; rewriting
    a route whose channel holds routed wavelets is refused (BUSY_REWRITE); a color beyond
    num_colors is discarded with BAD_COLOR and the stream goes on."""
    b = Bench(dut)
    await b.start()
    C = b.C
    w0, w1 = (0x12345678, C - 1, 1), (0x9ABCDEF0, C - 1, 0)
    acc, dl = await b.traffic({Port.N: [w0, w1]}, 6)
    assert acc[Port.N] == [0, 1] and dl == [], "unrouted wavelets must be held, not delivered"
    assert await b.error_status() == (ErrorCode.NO_ROUTE, C - 1, Port.N)
    assert await b.read(ADDR_VC_BUSY + Port.N) == 1 << (C - 1), "held wavelet not in its channel"
    await b.write(ADDR_ERROR, 0)
    # Route it to the RAMP, but keep the RAMP output stalled: the channel is busy and routed.
    await b.write(route_addr(C - 1, Port.N), 1 << Port.RAMP)
    acc, dl = await b.traffic({}, 4, ready={Port.RAMP: lambda t: False})
    await b.write(route_addr(C - 1, Port.N), 1 << Port.E)
    assert await b.error_status() == (ErrorCode.BUSY_REWRITE, C - 1, Port.N)
    assert await b.read(route_addr(C - 1, Port.N)) == 1 << Port.RAMP
    await b.write(ADDR_ERROR, 0)
    acc, dl = await b.traffic({}, 3)
    assert dl == [(0, Port.RAMP, w0), (1, Port.RAMP, w1)], f"held wavelets not delivered once: {dl}"
    if C < 32:
        await b.write(route_addr(0, Port.W), 1 << Port.S)
        ws = [(1, C, 0), (2, 0, 0), (3, 0, 1)]
        acc, dl = await b.traffic({Port.W: ws}, 8)
        assert acc[Port.W] == [0, 1, 2]
        assert [w for _, _, w in dl] == ws[1:], f"only the in-range colors may leave: {dl}"
        assert await b.error_status() == (ErrorCode.BAD_COLOR, C, Port.W)


@cocotb.test()
async def busy_channels_per_port(dut):
    """VC_BUSY of each input port shows that port's held channels and no other port's: one
    unrouted wavelet held on every port, each on its own color where there are enough."""
    b = Bench(dut)
    await b.start()
    color = {p: p % b.C for p in Port}
    await b.traffic({p: [(0x100 + p, color[p], 0)] for p in Port}, 6)
    for p in Port:
        assert await b.read(ADDR_VC_BUSY + p) == 1 << color[p], f"VC_BUSY of port {p}"


@cocotb.test()
async def zero_load_and_multicast(dut):
    """Zero-load latency, one wavelet per cycle per output, multicast to all five outputs with
    outputs freeing up in different cycles: cycle-exact against the model."""
    b = Bench(dut)
    await b.start()
    model = FabricModel(1, 1, b.C, b.D)
    for port, mask in ((Port.W, 1 << Port.E), (Port.RAMP, route_mask(Port))):
        await b.write(route_addr(0, port), mask)
        model.write_route(0, 0, 0, port, mask)
    stream = [(i, 0, i & 1) for i in range(40)]
    acc, dl = await b.traffic({Port.W: stream}, 70)
    macc, mdl = _model_run(model, {Port.W: stream})
    assert dl == mdl and acc[Port.W] == macc[Port.W]
    # A slot is written again 3 cycles after the last (input, read, free): one wavelet per
    # cycle from vc_depth 3 on, vc_depth words per 3 cycles below.
    per = min(b.D, CREDIT_LOOP)
    assert [t for t, _, _ in dl] == [zero_load_latency(0) + CREDIT_LOOP * (i // per) + i % per
                                     for i in range(40)], "not the channel's rate at zero-load latency"
    rng = random.Random(cocotb.RANDOM_SEED)
    pattern = {p: [rng.random() < 0.5 for _ in range(2000)] for p in Port}
    ready = {p: (lambda t, s=pattern[p]: s[t]) for p in Port}
    mready = {(0, 0, p): ready[p] for p in Port}
    bursts = [(0x100 + i, 0, 0) for i in range(30)]
    acc, dl = await b.traffic({Port.RAMP: bursts}, 200, ready=ready)
    macc, mdl = _model_run(model, {Port.RAMP: bursts}, ready=mready)
    assert acc[Port.RAMP] == macc[(Port.RAMP)], "input accept cycles differ from the model"
    assert dl == mdl, "multicast departures differ from the model"
    for p in Port:
        assert [w for _, q, w in dl if q == p] == bursts, f"output {p.name}: copies lost or doubled"


@cocotb.test()
async def color_isolation(dut):
    """Output E never accepts color 0: color 1, merging into E from two inputs, keeps one
    wavelet per cycle; color 0's input stream stops once its channel is full."""
    b = Bench(dut)
    await b.start()
    model = FabricModel(1, 1, b.C, b.D)
    for c, port in ((0, Port.RAMP), (1, Port.N), (1, Port.S)):
        await b.write(route_addr(c, port), 1 << Port.E)
        model.write_route(0, 0, c, port, 1 << Port.E)
    inputs = {Port.RAMP: [(i, 0, 0) for i in range(20)],
              Port.N: [(0x1000 + i, 1, 0) for i in range(40)],
              Port.S: [(0x2000 + i, 1, 1) for i in range(40)]}
    acc, dl = await b.traffic(inputs, 100, accept={Port.E: ((1 << b.C) - 1) & ~1})
    model.cycle = 0
    macc, mdl = model.run({(0, 0, p): ws for p, ws in inputs.items()},
                          accept={(0, 0, Port.E): ((1 << b.C) - 1) & ~1}, stuck_ok=True,
                          stall_limit=20)
    mdl = [(t, port[2], w) for t, port, w in mdl if t < 100]
    assert dl == mdl, "departures differ from the model"
    assert all(w[1] == 1 for _, _, w in dl) and len(dl) == 80
    times = [t for t, _, _ in dl]
    assert times == list(range(times[0], times[0] + 80)), "color 1 lost throughput"
    assert len(acc[Port.RAMP]) == b.D, "blocked color must fill exactly its channel"
    assert await b.read(ADDR_OUT_BLOCKED + Port.E) & 1, "status must show color 0 blocked at E"
