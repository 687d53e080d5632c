"""What every phase of the layer compiler shares: the error, the compiled phase, the colors and
descriptor counts of the kernels, and the checks of a layer against the wafer's limits."""

from dataclasses import dataclass, field

import numpy as np

from arch.pe_map import DESCRIPTOR
from arch.wafer_map import ADAPTER_COUNT_BITS

__all__ = ["WaferCompileError", "WaferPhase", "COLOR_GRAD", "COLOR_DZ", "COLOR_DX0"]

FORWARD_COLORS = 4      # weights, psum chain, results (models.pe.COLOR_*), gradient chain
COLOR_GRAD = 3          # the backward-weight column chain (south to north)
COLOR_DZ = 1            # backward-weight on the lanes: dZ from the west edge along each row
COLOR_DX0 = 4           # backward-data: column q sends dZ_prev west on COLOR_DX0 + q
FORWARD_TASKS = 4       # descriptors 0..3 of models.pe.forward_kernel
FORWARD_T_TASKS = 6     # ... and 4, 5 when it keeps its outputs transposed too
FORWARD_X_T_TASKS = 8   # ... and 6, 7 when it keeps its X transposed too
BACKWARD_DATA_TASKS = 2     # FMAC, VEC MASK
# Descriptor count/reps/lo/hi fields and the adapter counters bound M and K.
COUNT_LIMIT = 1 << min(ADAPTER_COUNT_BITS, *(DESCRIPTOR.field_width(f) for f in ("count", "reps", "lo", "hi")))


class WaferCompileError(ValueError):
    """A layer/mesh/batch the wafer hardware cannot run, with the limit it breaks."""


@dataclass
class WaferPhase:
    """One compiled phase: ``writes`` ``[(addr, word)]`` for the wafer's config bus (routes and
    SRAM first, then descriptors (:func:`_desc_writes`), then adapters), ``plan`` (models.pe plan;
    ``plan["commits"]``: the index of each descriptor's committing write), ``out_edge``
    (``"west"``/``"east"``), ``link_words`` (words on each column's weight link, or for
    backward-weight on its gradient link), ``west_in`` (``{p: wavelet words}`` the host sends
    into the west edge of row p, or empty), ``settable[i]``: write ``i`` only sets a
    configuration register (a route, ``RAMP2``, a descriptor word other than the committing
    word 0), so a host that knows the register holds the value may leave it out
    (:class:`compiler.config_state.ConfigState`); SRAM loads, ``STOP``, commits and adapter
    registers are always written. ``late[i]``: write ``i`` may come after ``go`` (the late writes
    are the last ones, :attr:`go_after`): a route of a color the host does not send, a gradient
    link's count, or a word of a descriptor that takes nothing the host sends (a VEC, a STORE of
    what other PEs send); the run needs them only once those PEs send (:mod:`compiler.wafer.writes`)."""
    name: str
    writes: list = field(default_factory=list)
    plan: dict = field(default_factory=dict)
    out_edge: str = "west"
    link_words: list = field(default_factory=list)
    west_in: dict = field(default_factory=dict)
    settable: list = field(default_factory=list)
    late: list = field(default_factory=list)

    @property
    def go_after(self):
        """The writes before ``go``: the run starts when they are written, the late ones are
        written while it runs (all of them when ``late`` is empty or all false)."""
        return self.late.index(True) if any(self.late) else len(self.writes)


def _check_fit(cfg, *, m, k, batch):
    P, Q, L = cfg.mesh_rows, cfg.mesh_cols, cfg.lanes
    if batch != P * L:
        raise WaferCompileError(
            f"batch {batch} does not fit the wafer: the forward kernel gives each of the "
            f"{P} mesh rows one batch slice of lanes={L} columns, so batch must be {P * L}")
    if cfg.num_colors < FORWARD_COLORS:
        raise WaferCompileError(f"the wafer kernels need {FORWARD_COLORS} colors, "
                                f"the router has num_colors={cfg.num_colors}")
    if cfg.num_tasks < FORWARD_TASKS:
        raise WaferCompileError(f"the forward kernel needs {FORWARD_TASKS} task descriptors "
                                f"per PE, the core has num_tasks={cfg.num_tasks}")
    if k < Q:
        raise WaferCompileError(f"K={k} input features cannot be split over {Q} mesh columns "
                                f"(every column needs at least one)")
    if m < 1 or m >= COUNT_LIMIT or k >= COUNT_LIMIT:
        raise WaferCompileError(f"layer {m}x{k}: M and K must be in 1..{COUNT_LIMIT - 1} "
                                f"({COUNT_LIMIT.bit_length() - 1}-bit descriptor and adapter counters)")


def _upper(a16):
    """bf16 bit patterns as 32-bit words (the bf16 in the upper half)."""
    return np.asarray(a16, dtype=np.uint32) << 16


def _check_array(name, a, shape):
    a = np.asarray(a)
    if a.shape != shape:
        raise WaferCompileError(f"{name} has shape {a.shape}, expected {shape}")
    return a


def _limit(cfg, sram_limit):
    return cfg.sram_words if sram_limit is None else min(sram_limit, cfg.sram_words)


def _check_sram(cfg, name, needed, sram_limit):
    if needed > _limit(cfg, sram_limit):
        where = "" if sram_limit is None else f", below the resident activations at {sram_limit}"
        raise WaferCompileError(f"the {name} phase needs {needed} SRAM words per PE{where}, "
                                f"the PE has sram_words={cfg.sram_words}")


def _resident_x(name, x_home, x16):
    if x_home is not None and x16 is not None:
        raise WaferCompileError(f"{name}: X is resident at {x_home}, so there is no X to load "
                                f"(x16 must be None)")
