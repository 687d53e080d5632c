"""Mesh benches in the plain-Verilog harness (sim/benches/mesh.py), every phase checked against
the cycle-level model (models/fabric.py) and the route-walking scoreboard."""

import random

import pytest

from arch.ports import Port
from arch.router_map import ADDR_ERROR, ADDR_VC_BUSY, ERROR_STATUS, ErrorCode, route_addr
from hdl.config import Config, ConfigError
from hdl.mesh import Mesh
from models.fabric import FabricModel, walk, xy_routes, zero_load_latency
from sim.benches.mesh import Scenario, Traffic, random_flows, random_timing, random_traffic

CFG = Config(num_colors=4, vc_depth=4)     # the 4x4 mesh under test: 4 colors, 4-deep VCs
TOP = "mesh4x4"


def _routes(flows, colors=CFG.num_colors, rows=4, cols=4):
    return xy_routes(rows, cols, colors, flows)


@pytest.mark.slow
def test_random_traffic_two_phases(tmp_path):
    """>= 100,000 wavelets of random multi-color traffic (unicast and multicast routes, random
    injection rates, random back-pressure on every edge and RAMP output) in two phases with the
    routes rewritten in between (and colors moved to the RAMPs' second channels); nothing lost or
    duplicated, order per (source, color), every multicast copy delivered, every accept and
    departure cycle equal to the model's. Under Verilator (80,000 cycles of bulk traffic; the
    other mesh benches run under Icarus)."""
    rng = random.Random(2024)
    sc = Scenario(TOP, CFG, 4, 4, 40000)
    total = 0
    for phase in range(2):
        flows, routes = random_flows(rng, 4, 4, CFG.num_colors, max_sources=8, max_dests=3)
        sc.set_routes(routes)
        if phase == 1:      # and in the second phase, random colors on every RAMP's second channel
            sc.set_ramp2({key: rng.getrandbits(CFG.num_colors) for key in sc.routes})
        n_src = len({src for _, src, _ in flows})
        per_source = -(-52000 // n_src)
        scratch = Traffic(sc.ports, 0)
        sent = random_traffic(rng, sc.ports, flows, 0, per_source, scratch, sid_base=phase * 64)
        total += sum(len(ws) for ws in sent.values())
        sc.phase(sent)
    random_timing(rng, sc.ports, sc.traffic, max_gap=0.3, max_stall=0.2)
    log = sc.run(tmp_path, simulator="verilator")
    assert not log.deadlocked, "\n".join(log.dump)
    assert total >= 100_000
    delivered = sum(len(v) for v in log.delivered.values())
    assert delivered >= total


def test_zero_load_latency_per_hop(tmp_path):
    """One wavelet at a time from RAMP (0, 0) to every RAMP and to every edge output: latency is
    the model's, hops + 2, for every hop count 0..6."""
    sc = Scenario(TOP, CFG, 4, 4, 100)
    src = (0, 0, Port.RAMP)
    dests = [(r, q, Port.RAMP) for r in range(4) for q in range(4)] + \
            [(3, q, Port.S) for q in range(4)] + [(r, 3, Port.E) for r in range(4)]
    expect = []
    for i, dst in enumerate(dests):
        sc.set_routes(_routes([(0, src, [dst])]))
        ph = sc.phase({src: [(i, 0, 0)]})
        hops = abs(dst[0]) + abs(dst[1])
        expect.append((ph, hops))
    log = sc.run(tmp_path)
    assert not log.deadlocked, "\n".join(log.dump)
    seen = set()
    for ph, hops in expect:
        (t_in,) = log.accepted[ph][src]
        ((t_out, _, _),) = log.delivered[ph]
        assert t_out - t_in == zero_load_latency(hops), f"{hops} hops took {t_out - t_in} cycles"
        seen.add(hops)
    assert seen == set(range(7))


def test_single_stream_and_broadcasts_sustain_one_per_cycle(tmp_path):
    """A single stream across the mesh, a row broadcast (one west-edge source to every RAMP of
    a row and the east edge) and a column multicast (north edge down a column): every receiver
    gets one wavelet per cycle, at the model's cycles."""
    sc = Scenario(TOP, CFG, 4, 4, 1000)
    n = 300
    cases = [
        ((0, 0, Port.RAMP), [(3, 3, Port.RAMP)]),
        ((1, 0, Port.W), [(1, q, Port.RAMP) for q in range(4)] + [(1, 3, Port.E)]),
        ((0, 2, Port.N), [(r, 2, Port.RAMP) for r in range(4)] + [(3, 2, Port.S)]),
    ]
    for color, (src, dsts) in enumerate(cases):
        sc.set_routes(_routes([(color, src, dsts)]))
        ph = sc.phase({src: [((color << 24) | i, color, i & 1) for i in range(n)]})
    log = sc.run(tmp_path)
    assert not log.deadlocked, "\n".join(log.dump)
    for ph, (_src, dsts) in enumerate(cases):
        for dst in dsts:
            ts = [t for t, port, _ in log.delivered[ph] if port == dst]
            assert len(ts) == n and ts == list(range(ts[0], ts[0] + n)), \
                f"phase {ph}: {dst} did not receive one wavelet per cycle"


def test_color_isolation(tmp_path):
    """RAMP (3, 3) never accepts color 0, which arrives from RAMP (0, 0) through the same links
    as color 1; color 1 from three sources (merging on those links) keeps full throughput at
    (3, 3), cycle for cycle as the model predicts, while color 0 waits in its channels."""
    sc = Scenario(TOP, CFG, 4, 4, 3000)
    dst = (3, 3, Port.RAMP)
    flows = [(0, (0, 0, Port.RAMP), [dst]),
             (1, (0, 0, Port.N), [dst]), (1, (0, 1, Port.RAMP), [dst]), (1, (3, 0, Port.W), [dst])]
    sc.set_routes(_routes(flows))
    sc.traffic.accept[dst] = (1 << CFG.num_colors) - 1 - 1
    inputs = {(0, 0, Port.RAMP): [(i, 0, 0) for i in range(50)]}
    for sid, src in enumerate([(0, 0, Port.N), (0, 1, Port.RAMP), (3, 0, Port.W)], start=1):
        inputs[src] = [((sid << 24) | i, 1, 0) for i in range(400)]
    ph = sc.phase(inputs, copies=1200, stuck_ok=True)
    log = sc.run(tmp_path)
    assert not log.deadlocked, "\n".join(log.dump)
    got = log.delivered[ph]
    assert all(w[1] == 1 for _, _, w in got) and len(got) == 1200
    ts = [t for t, _, _ in got]
    assert ts == list(range(ts[0], ts[0] + 1200)), "color 1 lost throughput at the shared output"
    # Color 0 fills exactly the channels on its path (7 routers x vc_depth) and then stops.
    path_len = 7
    assert len(log.accepted[ph][(0, 0, Port.RAMP)]) == path_len * CFG.vc_depth
    occupancy = sc.model.occupancy()
    assert sum(occupancy.values()) == path_len * CFG.vc_depth
    assert all(c == 0 for (_, _, _, c) in occupancy)


def test_errors_and_readback(tmp_path):
    """Route tables read back through the mesh bus; a bad route write and an unrouted color
    raise the error pin and the tile's status register (color and port), clearing works."""
    sc = Scenario(TOP, CFG, 4, 4, 200)
    rng = random.Random(7)
    addrs = {}
    for _ in range(40):
        r, q, c, p = rng.randrange(4), rng.randrange(4), rng.randrange(4), rng.randrange(5)
        mask = rng.randrange(1, 32)
        addrs[sc.ports.addr(r, q, route_addr(c, p))] = mask
    for a, mask in addrs.items():
        sc.program.write(a, mask)
    for a in addrs:
        sc.program.read(a)
    err = sc.ports.addr(2, 1, ADDR_ERROR)
    sc.program.read(err)
    sc.program.write(sc.ports.addr(2, 1, route_addr(3, Port.W)), 0x40)   # bit 6: no such port
    sc.program.read(err)
    sc.program.read(sc.ports.addr(2, 1, route_addr(3, Port.W)))
    sc.program.write(err, 0)
    sc.program.read(err)
    log = sc.run(tmp_path, check_model=False)
    reads = log.reads
    for (a, data, _), (a2, mask) in zip(reads, addrs.items()):
        assert a == a2 and data == mask, f"address {a:#x} reads {data:#x}, wrote {mask:#x}"
    status = reads[len(addrs):]
    assert status[0][1] == 0 and status[0][2] == 0, "error before any bad write"
    err = ERROR_STATUS.unpack(status[1][1])
    assert (err["flag"], err["code"], err["port"], err["color"]) == (1, ErrorCode.BAD_ROUTE, Port.W, 3)
    assert status[1][2] == 1
    assert status[2][1] == addrs.get(sc.ports.addr(2, 1, route_addr(3, Port.W)), 0), \
        "a refused write changed the table"
    assert status[3][1] == 0 and status[3][2] == 0, "clear did not clear"


def test_unrouted_color_flags_and_holds(tmp_path):
    """A wavelet entering on a color with no route at (1, 2) raises NO_ROUTE there (the error
    pin of the mesh too) and stays in its channel: nothing delivered, nothing dropped."""
    sc = Scenario(TOP, CFG, 4, 4, 200)
    src, dst = (1, 0, Port.W), (1, 3, Port.E)
    routes = _routes([(2, src, [dst])])
    routes[(1, 2)][2][Port.W] = 0             # cut the route in the middle of the row
    sc.set_routes(routes)
    sc.phase({src: [(5, 2, 0)]}, copies=0, stuck_ok=True)
    sc.program.read(sc.ports.addr(1, 2, ADDR_ERROR))
    sc.program.read(sc.ports.addr(1, 2, ADDR_VC_BUSY + Port.W))
    log = sc.run(tmp_path)
    assert log.delivered[0] == []
    (_, status, pin), (_, busy, _) = log.reads
    err = ERROR_STATUS.unpack(status)
    assert pin == 1 and err["flag"] and err["code"] == ErrorCode.NO_ROUTE
    assert err["port"] == Port.W and err["color"] == 2
    assert busy == 1 << 2, "the held wavelet is not in the (W, color 2) channel"
    assert sc.model.errors[(1, 2)] == (ErrorCode.NO_ROUTE, 2, Port.W)


def test_deadlock_watchdog_dumps_what_is_stuck(tmp_path):
    """A phase waiting for copies that can never leave (their output never accepts the color)
    trips the watchdog; the dump names the stuck channels, which are the model's."""
    sc = Scenario(TOP, CFG, 4, 4, 200)
    src, dst = (2, 0, Port.RAMP), (2, 2, Port.RAMP)
    sc.set_routes(_routes([(3, src, [dst])]))
    sc.traffic.accept[dst] = 0b0111
    sc.phase({src: [(i, 3, 0) for i in range(20)]})
    log = sc.run(tmp_path)
    assert log.deadlocked
    model = FabricModel(4, 4, CFG.num_colors, CFG.vc_depth, sc.routes)
    model.run({src: [(i, 3, 0) for i in range(20)]}, accept=sc.traffic.accept, stuck_ok=True)
    stuck = {(r, q, p.name.lower()) for (r, q, p, c) in model.occupancy()}
    dumped = set()
    for line in log.dump:
        f = line.split()
        if f[0] == "router" and f[3] == "vc_busy":
            dumped.add((int(f[1]), int(f[2]), f[5]))
            assert f[7] == "1000", line
    assert dumped == stuck and len(stuck) == 3
    assert any(f"sent {3 * CFG.vc_depth} of 20" in line for line in log.dump), log.dump


def test_mesh_config_errors():
    with pytest.raises(ConfigError, match="tiles"):
        Mesh(Config(mesh_rows=9, mesh_cols=8))
    with pytest.raises(ConfigError, match="tile_addr_bits"):
        Mesh(Config(), tile_addr_bits=8)


def test_routes_walk_is_loop_free_and_exact():
    flows, routes = random_flows(random.Random(3), 4, 4, 4)
    for c, src, dsts in flows:
        assert set(dsts) <= set(walk(routes, 4, 4, *src, c))


def test_mesh_with_cores_on_the_ramps():
    """The core hook: a 1 x 2 mesh whose tiles carry a small echo core (recolors, adds a
    configurable offset, has no ``rx_accept``: its RAMP takes every color); routes and the core
    register written through the mesh's bus, each write reaching its own tile only; a tile past the
    mesh reads 0."""
    from amaranth import Module, Signal
    from amaranth.lib import stream, wiring
    from amaranth.lib.wiring import In, Out
    from amaranth.sim import Simulator

    from arch.tile_map import CORE_BASE, tile_address
    from hdl.config_bus import ConfigBus
    from hdl.wavelet import Wavelet
    from sim.kit.config_bus import bus_read, bus_write

    class EchoCore(wiring.Component):
        tx: Out(stream.Signature(Wavelet))
        rx: In(stream.Signature(Wavelet))
        cfg: In(ConfigBus())

        def elaborate(self, platform):
            m = Module()
            offset = Signal(32)
            with m.If(self.cfg.we & (self.cfg.addr == 0)):
                m.d.sync += offset.eq(self.cfg.wdata)
            m.d.sync += self.cfg.rdata.eq(offset)
            with m.If(~self.tx.valid | self.tx.ready):
                m.d.sync += [self.tx.valid.eq(self.rx.valid),
                             self.tx.payload.data.eq(self.rx.payload.data + offset),
                             self.tx.payload.color.eq(1), self.tx.payload.ctrl.eq(0)]
            m.d.comb += self.rx.ready.eq(~self.tx.valid | self.tx.ready)
            return m

    cfg = Config(num_colors=2, vc_depth=2, mesh_rows=1, mesh_cols=2)
    mesh = Mesh(cfg, core=lambda r, q: EchoCore())
    assert "ramp_in" not in mesh.signature.members and isinstance(mesh.cores[0][1], EchoCore)
    Q = cfg.mesh_cols
    writes = [(tile_address(Q, 0, 0, route_addr(c, Port.W)), 1 << Port.E) for c in (0, 1)] + [
              (tile_address(Q, 0, 1, route_addr(c, Port.W)), 1 << Port.RAMP) for c in (0, 1)] + [
              (tile_address(Q, 0, 1, route_addr(1, Port.RAMP)), 1 << Port.W),
              (tile_address(Q, 0, 0, route_addr(1, Port.E)), 1 << Port.W),
              (tile_address(Q, 0, 1, CORE_BASE), 1000)]
    got = []

    async def read(ctx, addr):
        return await bus_read(ctx, mesh.cfg, addr)

    async def bench(ctx):
        await bus_write(ctx, mesh.cfg, writes)
        ctx.set(mesh.cfg.wdata, 7)                      # on the bus, not written: we is low
        assert await read(ctx, tile_address(Q, 0, 1, CORE_BASE)) == 1000, "core register not readable through the mesh"
        assert await read(ctx, tile_address(Q, 0, 0, CORE_BASE)) == 0, "a write to tile 1's core reached tile 0's"
        assert await read(ctx, tile_address(Q, 0, 1, route_addr(0, Port.W))) == 1 << Port.RAMP
        assert await read(ctx, tile_address(Q, 0, Q, route_addr(0, Port.W))) == 0, "a tile past the mesh must read 0"
        for i in range(10):                             # both colors reach the core's RAMP
            ctx.set(mesh.w_in[0].valid, 1)
            ctx.set(mesh.w_in[0].payload, {"data": i, "color": i % 2, "ctrl": 0})
            await ctx.tick().until(mesh.w_in[0].ready)
        ctx.set(mesh.w_in[0].valid, 0)

    async def collect(ctx):
        ctx.set(mesh.w_out[0].ready, 1)
        for _ in range(80):
            if ctx.get(mesh.w_out[0].valid):
                got.append(ctx.get(mesh.w_out[0].payload.data))
            await ctx.tick()

    sim = Simulator(mesh)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_testbench(collect)
    sim.run_until(100e-6)                               # a wavelet never taken fails, not hangs
    assert sorted(got) == [1000 + i for i in range(10)]
