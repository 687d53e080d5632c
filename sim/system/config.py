"""Options of the system simulation (``make sim``), validated, with their defaults."""

import dataclasses
import os
from dataclasses import dataclass

from hdl.config import PRESETS
from models.memoryx import SGD, Adam, AdamW, Momentum

__all__ = ["SystemRunConfig", "OPTIMIZERS", "SIMULATORS", "DATA_FILE", "default_threads"]

OPTIMIZERS = {
    "adamw": lambda lr: AdamW(lr=lr, weight_decay=1e-4),
    "adam": lambda lr: Adam(lr=lr),
    "momentum": lambda lr: Momentum(lr=lr, momentum=0.9),
    "sgd": lambda lr: SGD(lr=lr),
}

DIGITS_FEATURES, DIGITS_CLASSES = 64, 10
# The data split handed to the simulator, in the output folder (sim/system/run.py).
DATA_FILE = "digits.npz"
# "rtl": RTL wafers of PE tiles (sim/system/rtl_training.py); "model": the golden wafer kernels.
WAFERS = ("rtl", "model")
# How the RTL is simulated (docs/system_simulation.md#simulators): "verilator" / "icarus": the
# plain-Verilog testbench, one process for the run (sim/system/rtl_host.py); "cocotb": cocotb on
# the simulator sim.kit.runner picks for the bench (Verilator), one simulation for the run; "auto":
# verilator (RTL wafers), cocotb (model wafers, whose bench is cocotb only).
SIMULATORS = ("auto", "verilator", "icarus", "cocotb")
MAX_THREADS = 64


def default_threads():
    """``make sim``'s Verilator threads: 2 where the machine has two cores or more, else 1 (what 2
    gain: docs/system_simulation.md, options)."""
    return min(2, os.cpu_count() or 1)


@dataclass(frozen=True, kw_only=True)
class SystemRunConfig:
    """``dims``: layer widths, inputs first (64 pixels) and classes last (10 digits);
    ``mesh``: (P, Q) PEs per wafer; ``systems``: N wafers under the SwarmX tree (1..16 in RTL);
    ``batch``: samples per system per step; ``steps``; ``optimizer`` (adamw, adam, momentum, sgd)
    and ``lr``; ``stall``: random valid gaps and back-pressure at every player and recorder,
    0..255 (probability stall/256 per cycle); ``eval_every``: steps between held-out accuracy
    evaluations; ``seed``; ``out_dir``; ``wafer``: ``rtl`` (RTL wafers of PE tiles) or ``model``
    (the golden wafer kernels, only SwarmX in RTL); ``simulator``: one of :data:`SIMULATORS`;
    ``threads``: threads of the Verilator model of the plain-Verilog testbench (``make sim``'s
    default :func:`default_threads`; the results do not depend on it); ``preset``."""

    dims: tuple = (64, 32, 10)
    mesh: tuple = (2, 2)
    systems: int = 2
    batch: int = 8
    steps: int = 150
    optimizer: str = "adamw"
    lr: float = 1e-2
    stall: int = 0
    eval_every: int = 10
    seed: int = 0
    out_dir: str = "build/sim"
    wafer: str = "rtl"
    simulator: str = "auto"
    preset: str = "hardware"
    threads: int = 1

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(self.dims))
        object.__setattr__(self, "mesh", tuple(self.mesh))

        def bad(field, rule):
            raise ValueError(f"{field} {rule}, got {getattr(self, field)!r}")

        if len(self.dims) < 2 or any(not isinstance(d, int) or d < 1 for d in self.dims):
            bad("dims", "must be >= 2 positive layer widths")
        if self.dims[0] != DIGITS_FEATURES or self.dims[-1] != DIGITS_CLASSES:
            bad("dims", f"must start with {DIGITS_FEATURES} (digit pixels) and end with "
                        f"{DIGITS_CLASSES} (classes)")
        if len(self.mesh) != 2 or any(not isinstance(v, int) or v < 1 for v in self.mesh):
            bad("mesh", "must be two positive ints (P, Q)")
        if not isinstance(self.systems, int) or not 1 <= self.systems <= 16:
            bad("systems", "must be in 1..16 (the SwarmX RTL simulated here)")
        if not isinstance(self.batch, int) or self.batch < 1:
            bad("batch", "must be >= 1")
        if not isinstance(self.steps, int) or self.steps < 1:
            bad("steps", "must be >= 1")
        if self.optimizer not in OPTIMIZERS:
            bad("optimizer", f"must be one of {', '.join(OPTIMIZERS)}")
        if not self.lr > 0:
            bad("lr", "must be > 0")
        if not isinstance(self.stall, int) or not 0 <= self.stall <= 255:
            bad("stall", "must be in 0..255")
        if not isinstance(self.eval_every, int) or self.eval_every < 1:
            bad("eval_every", "must be >= 1")
        if self.wafer not in WAFERS:
            bad("wafer", f"must be one of {', '.join(WAFERS)}")
        if self.simulator not in SIMULATORS:
            bad("simulator", f"must be one of {', '.join(SIMULATORS)}")
        if self.wafer == "model" and self.simulator not in ("auto", "cocotb"):
            bad("simulator", "must be auto or cocotb with model wafers (their bench is cocotb only)")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or not 1 <= self.threads <= MAX_THREADS:
            bad("threads", f"must be in 1..{MAX_THREADS}")
        if self.preset not in PRESETS:
            bad("preset", f"must be one of {', '.join(PRESETS)}")
        if self.systems * self.batch > 1437:
            bad("batch", "times systems must fit the 1437 training digits")

    def resolved_simulator(self):
        """The simulator this run uses (``auto`` resolved on this machine)."""
        if self.simulator != "auto":
            return self.simulator
        if self.wafer == "model":
            return "cocotb"
        from sim.kit.testbench import default_simulator
        return default_simulator()

    def make_optimizer(self):
        return OPTIMIZERS[self.optimizer](self.lr)

    @property
    def words(self):
        """Words per SwarmX phase: every weight of the network."""
        return sum(a * b for a, b in zip(self.dims[:-1], self.dims[1:]))

    def as_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        return cls(**d)
