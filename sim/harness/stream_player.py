"""Memory-backed stream player and recorder: bulk stimulus without Python on the per-cycle path.

A bench writes a whole burst into a player's memory (``<instance>.mem[i]`` through VPI, no
simulated time passes), pulses ``start`` and waits for ``done``; recorders capture every transfer
with its cycle stamp into their memories, read back the same way afterwards. Only phase
boundaries cost Python; the simulator runs the burst alone.

Both take random stalls from a 16-bit Galois LFSR: a cycle stalls when the LFSR's low byte is
below ``stall`` (0 = never, 128 = half the cycles). Cycle stamps count clock cycles since the
last ``start`` (the cycle of the first possible transfer is 0).
"""

from amaranth import Module, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamPlayer", "StreamRecorder", "lfsr_step"]

STAMP_BITS = 32


def lfsr_step(m, state):
    """Advance the 16-bit Galois LFSR ``state`` (taps 0xB400) every cycle."""
    feedback = state[0]
    m.d.sync += state.eq((state >> 1) ^ (feedback * 0xB400))


class StreamPlayer(wiring.Component):
    """Plays ``count`` words of its memory on ``o`` after ``start``, in address order.

    Ports: ``o`` (stream of ``shape``), ``count: In(32)``, ``stall: In(8)``, ``start: In(1)``
    (one-cycle pulse), ``busy: Out(1)``, ``first_stamp``/``last_stamp: Out(32)`` (cycle stamps
    of the first and last transfer, same clock as :class:`StreamRecorder`'s). ``valid`` never
    waits for ``ready``; the payload is stable until the transfer. Memory: ``mem`` (``depth``
    words of ``shape``).
    """

    def __init__(self, shape, depth, seed=1):
        if depth < 1:
            raise ValueError(f"player depth must be >= 1, got {depth}")
        self._shape, self._depth, self._seed = shape, depth, seed & 0xFFFF or 1
        super().__init__({
            "o": Out(stream.Signature(shape)),
            "count": In(32), "stall": In(8), "start": In(1), "busy": Out(1),
            "first_stamp": Out(STAMP_BITS), "last_stamp": Out(STAMP_BITS),
        })

    @property
    def depth(self):
        return self._depth

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self._shape, depth=self._depth, init=[])
        rd = mem.read_port(domain="comb")
        index = Signal(32)
        cycle = Signal(STAMP_BITS)
        lfsr = Signal(16, init=self._seed)
        lfsr_step(m, lfsr)
        m.d.sync += cycle.eq(cycle + 1)
        m.d.comb += [rd.addr.eq(index), self.o.payload.eq(rd.data)]
        with m.If(self.start):
            m.d.sync += [index.eq(0), self.busy.eq(self.count != 0), self.o.valid.eq(0), cycle.eq(0)]
        with m.Elif(self.busy):
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += [index.eq(index + 1), self.last_stamp.eq(cycle)]
                with m.If(index == 0):
                    m.d.sync += self.first_stamp.eq(cycle)
                with m.If(index + 1 == self.count):
                    m.d.sync += [self.busy.eq(0), self.o.valid.eq(0)]
                with m.Else():
                    m.d.sync += self.o.valid.eq(lfsr[:8] >= self.stall)
            with m.Elif(~self.o.valid):
                m.d.sync += self.o.valid.eq(lfsr[:8] >= self.stall)
        return m


class StreamRecorder(wiring.Component):
    """Accepts words on ``i`` (with random back-pressure) and stores payload and cycle stamp.

    Ports: ``i`` (stream of ``shape``), ``stall: In(8)``, ``start: In(1)`` (clears the count and
    the cycle counter), ``count: Out(32)`` (words recorded since ``start``), ``overflow: Out(1)``
    (sticky: a word arrived with the memory full; it is still accepted and dropped so the DUT
    never deadlocks, and the bench fails on the flag). Memories: ``mem`` (payloads) and
    ``stamps`` (cycle of each transfer).
    """

    def __init__(self, shape, depth, seed=1):
        if depth < 1:
            raise ValueError(f"recorder depth must be >= 1, got {depth}")
        self._shape, self._depth, self._seed = shape, depth, seed & 0xFFFF or 1
        super().__init__({
            "i": In(stream.Signature(shape)),
            "stall": In(8), "start": In(1), "count": Out(32), "overflow": Out(1),
        })

    @property
    def depth(self):
        return self._depth

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self._shape, depth=self._depth, init=[])
        m.submodules.stamps = stamps = memory.Memory(shape=STAMP_BITS, depth=self._depth, init=[])
        wr, wr_stamp = mem.write_port(), stamps.write_port()
        cycle = Signal(STAMP_BITS)
        ready = Signal()
        lfsr = Signal(16, init=self._seed)
        lfsr_step(m, lfsr)
        m.d.sync += [cycle.eq(cycle + 1), ready.eq(lfsr[:8] >= self.stall)]
        m.d.comb += self.i.ready.eq(ready)
        fire = self.i.valid & self.i.ready
        full = self.count == self._depth
        m.d.comb += [
            wr.addr.eq(self.count), wr.data.eq(self.i.payload), wr.en.eq(fire & ~full),
            wr_stamp.addr.eq(self.count), wr_stamp.data.eq(cycle), wr_stamp.en.eq(fire & ~full),
        ]
        with m.If(self.start):
            m.d.sync += [self.count.eq(0), cycle.eq(0), self.overflow.eq(0)]
        with m.Elif(fire):
            with m.If(full):
                m.d.sync += self.overflow.eq(1)
            with m.Else():
                m.d.sync += self.count.eq(self.count + 1)
        return m
