"""sim.kit.config_bus: writes land one per cycle, only with ``we``, and a read returns the value
one cycle after its address (Amaranth's simulator, on a two-register block)."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from amaranth.sim import Simulator

from hdl.config_bus import ConfigBus
from sim.kit.config_bus import bus_read, bus_write


class TwoRegisters(wiring.Component):
    cfg: In(ConfigBus())

    def elaborate(self, platform):
        m = Module()
        regs = [Signal(32, name=f"r{i}") for i in range(2)]
        for i, r in enumerate(regs):
            with m.If(self.cfg.we & (self.cfg.addr == i)):
                m.d.sync += r.eq(self.cfg.wdata)
        with m.Switch(self.cfg.addr):
            for i, r in enumerate(regs):
                with m.Case(i):
                    m.d.sync += self.cfg.rdata.eq(r)
            with m.Default():
                m.d.sync += self.cfg.rdata.eq(0)
        return m


def test_writes_then_reads():
    dut = TwoRegisters()
    got = []

    async def bench(ctx):
        await bus_write(ctx, dut.cfg, [(0, 11), (1, 22), (0, 33)])
        assert ctx.get(dut.cfg.we) == 0
        ctx.set(dut.cfg.wdata, 99)                      # on the bus with we low: not written
        got.extend([await bus_read(ctx, dut.cfg, 0), await bus_read(ctx, dut.cfg, 1),
                    await bus_read(ctx, dut.cfg, 2)])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == [33, 22, 0]
