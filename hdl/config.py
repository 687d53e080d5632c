"""The one validated configuration object of the RTL, with named presets.

Every generator (``hdl.tops``), bench and model that needs a hardware parameter takes a
:class:`Config`. Invalid values raise :class:`ConfigError` naming the field, at construction,
before anything is elaborated.
"""

import dataclasses
from dataclasses import dataclass

from arch.pe_map import MAX_TASKS, acc_rows
from arch.wavelet import COLOR_BITS, MAX_COLORS

# Latency range of the pipelined fp stream units (hdl.fp.pipeline.MIN_LATENCY / MAX_LATENCY).
FP_LATENCIES = range(2, 7)
# Register stages inside the PE core's fp units (hdl.fp.bf16_mul.MUL_CUTS, hdl.fp.fp32_add.ADD_CUTS).
PE_STAGES = range(0, 5)

__all__ = ["Config", "ConfigError", "PRESETS", "preset", "refuse"]


class ConfigError(ValueError):
    """A configuration field has a value the hardware cannot be built with."""


def refuse(component, error):
    """Raise ``error`` from ``component``'s constructor. The half-built component is never
    elaborated, so it is marked as used first: Amaranth would otherwise warn "created but never
    used" when it is garbage-collected, long after the real error."""
    component._MustUse__silence = True
    raise error


def _is_pow2(n):
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True, kw_only=True)
class Config:
    """Hardware parameters.

    Attributes
    ----------
    num_colors : int
        Routable colors (virtual channels) per router, 1..32 (docs/router.md; 24 on the WSE).
    vc_depth : int
        Wavelets buffered per (input port, color) in a router; >= 2, a power of two.
    mesh_rows, mesh_cols : int
        Wafer size P x Q in tiles, >= 1 each.
    swarmx_leaves : int
        Systems served by the SwarmX tree, 1..192.
    swarmx_fifo_depth : int
        Words buffered per child link in a SwarmX node; >= 2, a power of two.
    lanes : int
        FMAC lanes per PE core, 1..16.
    sram_words : int
        32-bit words of SRAM per PE (8 KB = 2048 words), a power of two >= 64.
    sram_banks : int
        SRAM banks per PE, a power of two dividing ``sram_words``.
    num_tasks : int
        Task descriptors per PE core, 1..32.
    fp_latency : int
        Cycles from operands to result of the pipelined fp stream units (the ``fp32_add`` and
        ``bf16_mul`` tops and the SwarmX adders), 2..6: 2 is the input and output register around
        the combinational core, every cycle above 2 a register stage inside it (docs/fp_units.md).
    """

    num_colors: int = 24
    vc_depth: int = 4
    mesh_rows: int = 4
    mesh_cols: int = 4
    swarmx_leaves: int = 4
    swarmx_fifo_depth: int = 4
    lanes: int = 4
    sram_words: int = 2048
    sram_banks: int = 8
    num_tasks: int = 8
    fp_latency: int = 2
    mul_stages: int = 0
    add_stages: int = 0

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{field.name} must be an int, got {value!r}")

        def check(name, ok, rule):
            if not ok:
                raise ConfigError(f"{name} {rule}, got {getattr(self, name)}")

        check("num_colors", 1 <= self.num_colors <= MAX_COLORS,
              f"must be in 1..{MAX_COLORS} ({COLOR_BITS}-bit color)")
        check("vc_depth", self.vc_depth >= 2 and _is_pow2(self.vc_depth), "must be a power of two >= 2")
        check("mesh_rows", self.mesh_rows >= 1, "must be >= 1")
        check("mesh_cols", self.mesh_cols >= 1, "must be >= 1")
        check("swarmx_leaves", 1 <= self.swarmx_leaves <= 192, "must be in 1..192")
        check("swarmx_fifo_depth", self.swarmx_fifo_depth >= 2 and _is_pow2(self.swarmx_fifo_depth),
              "must be a power of two >= 2")
        check("lanes", 1 <= self.lanes <= 16, "must be in 1..16")
        check("sram_words", self.sram_words >= 64 and _is_pow2(self.sram_words),
              "must be a power of two >= 64")
        check("sram_banks", _is_pow2(self.sram_banks) and self.sram_words % self.sram_banks == 0,
              "must be a power of two dividing sram_words")
        check("num_tasks", 1 <= self.num_tasks <= MAX_TASKS, f"must be in 1..{MAX_TASKS}")
        check("fp_latency", self.fp_latency in FP_LATENCIES,
              f"must be in {FP_LATENCIES.start}..{FP_LATENCIES.stop - 1}")
        check("mul_stages", self.mul_stages in PE_STAGES, f"must be in 0..{PE_STAGES.stop - 1}")
        check("add_stages", self.add_stages in PE_STAGES, f"must be in 0..{PE_STAGES.stop - 1}")

    @property
    def acc_rows(self):
        """FMAC accumulator rows in flight: the length of a lane's accumulation recurrence."""
        return acc_rows(self.add_stages)

    def replace(self, **changes):
        """A copy with ``changes`` applied (validated); unknown names raise :class:`ConfigError`."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ConfigError(f"unknown configuration field(s) {', '.join(unknown)}; "
                              f"known: {', '.join(sorted(names))}")
        return dataclasses.replace(self, **changes)

    def as_dict(self):
        return dataclasses.asdict(self)

    def tile(self):
        """This configuration as a tile's blocks (router, PE core) are built from: the fields of
        the mesh and of SwarmX, which they do not read, at :class:`Config`'s defaults, so that the
        tiles of every mesh share one shared block (:mod:`hdl.shared_block`)."""
        return self.replace(**{f: getattr(Config, f) for f in _SYSTEM_FIELDS})

    def router(self):
        """This configuration as a router is built from: ``num_colors`` and ``vc_depth``, the
        only fields it reads, every other one at :class:`Config`'s defaults, so that meshes whose
        tiles differ in their PE cores share their routers (:mod:`hdl.shared_block`)."""
        return Config(num_colors=self.num_colors, vc_depth=self.vc_depth)


_SYSTEM_FIELDS = ("mesh_rows", "mesh_cols", "swarmx_leaves", "swarmx_fifo_depth")

PRESETS = {
    "default": Config(),
    # Small enough for fast regression benches.
    "tiny": Config(num_colors=4, mesh_rows=2, mesh_cols=2, swarmx_leaves=2, lanes=2,
                   sram_words=256, sram_banks=2, num_tasks=4),
    # The system simulation's default: 2x2 wafers, 2 systems.
    "system": Config(num_colors=8, mesh_rows=2, mesh_cols=2, swarmx_leaves=2),
    # The system simulation's wafers with the PE's fp units pipelined to close timing on an FPGA
    # (docs/synthesis.md): the preset `make sim` and the per-layer bench run.
    "hardware": Config(num_colors=8, mesh_rows=2, mesh_cols=2, swarmx_leaves=2, mul_stages=4,
                       add_stages=4),
    # A WSE-like router (24 colors) on an 8x8 mesh for fabric benchmarks.
    "mesh8": Config(mesh_rows=8, mesh_cols=8),
}


def preset(name, **changes):
    """The preset ``name`` with ``changes`` applied; unknown presets raise :class:`ConfigError`."""
    try:
        base = PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
    return base.replace(**changes) if changes else base
