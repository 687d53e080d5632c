"""Stream (valid/ready/payload) driver and monitor for cocotb, with random gaps and back-pressure.

Both follow ``amaranth.lib.stream`` rules on the DUT side of a top's ``<port>__valid``,
``<port>__ready`` and ``<port>__payload`` signals. A transfer happens at a rising edge where
``valid`` and ``ready`` were both high; cycle numbers count rising edges since the object started
(start all drivers and monitors of a bench in the same cycle so their numbers agree).
"""

import random
from collections import deque

import cocotb
from cocotb.triggers import Event, RisingEdge

__all__ = ["StreamDriver", "StreamMonitor", "bernoulli", "always", "recorded", "replay_closed_loop"]


def always():
    """Pattern that never inserts a gap / never back-pressures."""
    return lambda: False


def bernoulli(probability, rng=None):
    """Pattern that stalls each cycle independently with ``probability``."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"stall probability must be in [0, 1], got {probability}")
    rng = rng or random
    return lambda: rng.random() < probability


def _signal(dut, name):
    try:
        return getattr(dut, name)
    except AttributeError:
        raise AttributeError(f"{dut._name} has no signal {name!r}") from None


class StreamDriver:
    """Drive words into a DUT input stream ``prefix``.

    ``gaps`` is a callable returning True when the driver should stay idle this cycle (only
    decided while nothing is offered: once ``valid`` is high it stays high, payload stable,
    until the transfer). ``accepted`` lists the cycle of every transfer.
    """

    def __init__(self, clk, dut, prefix, *, gaps=None):
        self.clk = clk
        self.valid = _signal(dut, f"{prefix}__valid")
        self.ready = _signal(dut, f"{prefix}__ready")
        self.payload = _signal(dut, f"{prefix}__payload")
        self.gaps = gaps or always()
        self.queue = deque()
        self.accepted = []
        self._idle = Event()
        self._idle.set()
        self.valid.value = 0
        self._task = cocotb.start_soon(self._run())

    def send(self, words):
        """Queue ``words`` (ints) for transmission."""
        self.queue.extend(int(w) for w in words)
        if self.queue:
            self._idle.clear()

    async def wait_idle(self):
        """Return once every queued word has been accepted."""
        await self._idle.wait()

    async def _run(self):
        cycle = 0
        offering = False
        while True:
            if not offering and self.queue and not self.gaps():
                self.payload.value = self.queue[0]
                self.valid.value = 1
                offering = True
            await RisingEdge(self.clk)
            if offering and int(self.ready.value):
                self.queue.popleft()
                self.accepted.append(cycle)
                offering = False
                self.valid.value = 0
                if not self.queue:
                    self._idle.set()
            cycle += 1


class StreamMonitor:
    """Accept words from a DUT output stream ``prefix``, driving ``ready`` with back-pressure.

    ``stall`` is a callable returning True when ``ready`` should be low this cycle (``None``
    means always ready). ``words`` and ``cycles`` hold the received payloads and their transfer
    cycles; ``callback(word, cycle)`` is called on each transfer.
    """

    def __init__(self, clk, dut, prefix, *, stall=None, callback=None):
        self.clk = clk
        self.valid = _signal(dut, f"{prefix}__valid")
        self.ready = _signal(dut, f"{prefix}__ready")
        self.payload = _signal(dut, f"{prefix}__payload")
        self.stall = stall or always()
        self.callback = callback
        self.words = []
        self.cycles = []
        self.ready.value = 0
        self._task = cocotb.start_soon(self._run())

    async def wait_for(self, count):
        """Return once ``count`` words in total have been received."""
        while len(self.words) < count:
            await RisingEdge(self.clk)

    async def _run(self):
        cycle = 0
        while True:
            ready = not self.stall()
            self.ready.value = int(ready)
            await RisingEdge(self.clk)
            if ready and int(self.valid.value):
                word = int(self.payload.value)
                self.words.append(word)
                self.cycles.append(cycle)
                if self.callback is not None:
                    self.callback(word, cycle)
            cycle += 1


def recorded(probability, rng, log):
    """Pattern like :func:`bernoulli` that also appends every decision to ``log``, so a golden
    cycle model can replay the bench's exact gaps and stalls (:func:`replay_closed_loop`)."""
    def decide():
        stall = rng.random() < probability
        log.append(stall)
        return stall
    return decide


def replay_closed_loop(model, payloads, gap_log, stall_log, cycles):
    """Replay a :class:`StreamDriver` -> DUT -> :class:`StreamMonitor` run through a cycle model.

    ``model.cycle(in_valid, in_payload, out_ready) -> (in_ready, accepted, emitted)`` is called
    once per cycle; the driver offers ``payloads`` in order, deciding gaps from ``gap_log`` (one
    entry per decision taken while idle, as :class:`StreamDriver` asks) and the monitor's ready
    from ``stall_log`` (one entry per cycle). Returns the expected input accept cycles, output
    transfer cycles and output words.
    """
    gaps, stalls = iter(gap_log), iter(stall_log)
    sent, offering = 0, False
    accepts, emits, words = [], [], []
    for cycle in range(cycles):
        if not offering and sent < len(payloads) and not next(gaps):
            offering = True
        _, accepted, emitted = model.cycle(offering, payloads[sent] if offering else 0, not next(stalls))
        if accepted:
            accepts.append(cycle)
            sent += 1
            offering = False
        if emitted is not None:
            emits.append(cycle)
            words.append(emitted)
    return accepts, emits, words
