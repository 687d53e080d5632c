"""What the host knows of a wafer's configuration registers, so that a phase writes only what
changed (docs/wafer.md#configuration-that-stays).

The wafer keeps its routes, ``RAMP2`` registers and descriptor words from one phase to the next
(nothing but a reset clears them, and the hardware never changes them). :class:`ConfigState`
remembers every register value a phase set since the wafer's reset; :meth:`ConfigState.program`
drops a phase's writes that only set a register (``WaferPhase.settable``) to the value it
already holds. Every SRAM load, ``STOP``, descriptor commit (word 0) and adapter register is
still written, in the compiled order.
"""

import dataclasses
import itertools

__all__ = ["ConfigState"]


class ConfigState:
    """The configuration registers of one wafer as written since its reset (start: unknown)."""

    def __init__(self):
        self.registers = {}

    def program(self, phase):
        """``phase`` (:class:`compiler.wafer.WaferPhase`) without the writes of values the
        registers already hold, its commit indices renumbered; records the values it sets."""
        keep = []
        for (addr, value), settable in zip(phase.writes, phase.settable, strict=True):
            same = settable and self.registers.get(addr) == value
            keep.append(not same)
            if settable:
                self.registers[addr] = value
        shift = list(itertools.accumulate((not k for k in keep), initial=0))  # drops before i
        plan = dict(phase.plan)
        plan["commits"] = {pq: {t: i - shift[i] for t, i in c.items()}
                           for pq, c in phase.plan["commits"].items()}
        late = phase.late or [False] * len(keep)
        return dataclasses.replace(
            phase, writes=[w for w, k in zip(phase.writes, keep) if k],
            settable=[s for s, k in zip(phase.settable, keep) if k],
            late=[x for x, k in zip(late, keep, strict=True) if k], plan=plan)
