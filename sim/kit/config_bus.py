"""A configuration bus (``hdl.config_bus.ConfigBus``) driven from a testbench of Amaranth's own
simulator (``ctx`` of ``Simulator.add_testbench``), one access per cycle."""

__all__ = ["bus_write", "bus_read"]


async def bus_write(ctx, bus, writes):
    """Write ``[(addr, data)]``, one per cycle, then lower ``we``."""
    for addr, data in writes:
        ctx.set(bus.addr, addr)
        ctx.set(bus.wdata, data)
        ctx.set(bus.we, 1)
        await ctx.tick()
    ctx.set(bus.we, 0)


async def bus_read(ctx, bus, addr):
    """The value at ``addr`` (``rdata`` one cycle after ``addr``); ``we`` must be low."""
    ctx.set(bus.addr, addr)
    await ctx.tick()
    return ctx.get(bus.rdata)
