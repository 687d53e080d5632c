"""Layer compiler for the RTL wafer (:class:`hdl.wafer.Wafer`): from a layer shape, a mesh
(``Config``) and a batch, the configuration writes (route tables, SRAM contents, descriptors,
adapter registers) of a phase for every tile, following DESIGN.md 6 and the orders of
``models/pipeline/kernels.py`` (the per-PE programs come from ``models.pe``).

It lives in ``sim/`` because the addresses come from the RTL's maps (``hdl.mesh``,
``hdl.router``, ``hdl.tile``, ``hdl.wafer``). Configurations the hardware cannot honour raise
:class:`WaferCompileError` naming the limit.

Phases compiled today: **forward** (``Z = W X``, ReLU + bf16 at the east PE of each row; the
results leave row ``p`` at its west edge, or east for a one-column mesh, one vector of ``lanes``
words per output row ``m``, and each PE keeps ``A[own_q, B_p]`` in SRAM, where the next layer's
forward finds its ``X[K_q, B_p]``).
"""

from dataclasses import dataclass, field

import numpy as np

from hdl.mesh import tile_address
from hdl.router import route_addr
from hdl.tile import CORE_BASE, mesh_tile_addr_bits
from hdl.wafer import ADAPTER, adapter_base
from hdl.wavelet import Port
from models import pe

__all__ = ["WaferCompileError", "WaferPhase", "compile_forward", "forward_expected_outputs"]

FORWARD_COLORS = 3      # weights, psum chain, results (models.pe.COLOR_*)
FORWARD_TASKS = 4       # descriptors 0..3 of models.pe.forward_kernel
COUNT_LIMIT = 1 << 16   # descriptor count/reps/lo/hi fields and adapter counters are 16 bits


class WaferCompileError(ValueError):
    """A layer/mesh/batch the wafer hardware cannot run, with the limit it breaks."""


@dataclass
class WaferPhase:
    """One compiled phase: ``writes`` ``[(addr, word)]`` for the wafer's config bus (routes and
    SRAM first, then descriptors consumers-first, then adapters), ``plan`` (models.pe plan),
    ``out_edge`` (``"west"``/``"east"``), ``weight_words`` (the weight stream's length)."""
    name: str
    writes: list = field(default_factory=list)
    plan: dict = field(default_factory=dict)
    out_edge: str = "west"
    weight_words: int = 0


def _check_fit(cfg, *, m, k, batch):
    P, Q, L = cfg.mesh_rows, cfg.mesh_cols, cfg.lanes
    if batch != P * L:
        raise WaferCompileError(
            f"batch {batch} does not fit the wafer: the forward kernel gives each of the "
            f"{P} mesh rows one batch slice of lanes={L} columns, so batch must be {P * L}")
    if cfg.num_colors < FORWARD_COLORS:
        raise WaferCompileError(f"the forward kernel needs {FORWARD_COLORS} colors, "
                                f"the router has num_colors={cfg.num_colors}")
    if cfg.num_tasks < FORWARD_TASKS:
        raise WaferCompileError(f"the forward kernel needs {FORWARD_TASKS} task descriptors "
                                f"per PE, the core has num_tasks={cfg.num_tasks}")
    if k < Q:
        raise WaferCompileError(f"K={k} input features cannot be split over {Q} mesh columns "
                                f"(every column needs at least one)")
    if m < 1 or m >= COUNT_LIMIT or k >= COUNT_LIMIT:
        raise WaferCompileError(f"layer {m}x{k}: M and K must be in 1..{COUNT_LIMIT - 1} "
                                f"(16-bit descriptor and adapter counters)")


def _route_writes(cfg, plan, bits):
    out = []
    for (p, q), routes in sorted(plan["routes"].items()):
        for color, inp, outs in routes:
            mask = sum(1 << Port[o] for o in outs)
            out.append((tile_address(cfg, p, q, route_addr(color, Port[inp]), bits), mask))
    return out


def _desc_writes(cfg, plan, bits):
    out = []
    S = cfg.sram_words
    for (p, q), info in sorted(plan["pes"].items()):
        for t in sorted(info["descs"], reverse=True):     # consumers before their producers
            words = pe.encode(**info["descs"][t])
            for w in (1, 2, 3, 4, 5, 0):                  # word 0 last: it commits
                out.append((tile_address(cfg, p, q, CORE_BASE + pe.desc_addr(S, t, w), bits),
                            words[w]))
    return out


def compile_forward(cfg, *, m, k, batch, x16=None):
    """The forward phase of a ``m x k`` layer on a ``cfg.mesh_rows x cfg.mesh_cols`` wafer for a
    batch of ``batch`` samples. With ``x16`` (K x batch bf16 bit patterns) the writes also load
    each PE's input slice ``X[K_q, B_p]`` into its SRAM (upper 16 bits of each word)."""
    _check_fit(cfg, m=m, k=k, batch=batch)
    L, S = cfg.lanes, cfg.sram_words
    try:
        plan = pe.forward_kernel(lanes=L, sram_words=S, rows=cfg.mesh_rows,
                                 cols=cfg.mesh_cols, m=m, k=k)
    except ValueError as e:
        raise WaferCompileError(f"layer {m}x{k} on a {cfg.mesh_rows}x{cfg.mesh_cols} wafer: "
                                f"{e}") from None
    bits = mesh_tile_addr_bits(cfg)
    writes = _route_writes(cfg, plan, bits)
    if x16 is not None:
        x16 = np.asarray(x16)
        if x16.shape != (k, batch):
            raise WaferCompileError(f"X has shape {x16.shape}, expected ({k}, {batch})")
        for (p, q), info in sorted(plan["pes"].items()):
            xs = x16[info["k"].start:info["k"].stop, p * L:(p + 1) * L].astype(np.uint32) << 16
            for i, word in enumerate(xs.ravel()):
                writes.append((tile_address(cfg, p, q, CORE_BASE + info["x_base"] + i, bits),
                               int(word)))
    writes += _desc_writes(cfg, plan, bits)
    base = adapter_base(cfg)
    writes.append((base + ADAPTER["W_COLOR"], pe.COLOR_W))
    writes.append((base + ADAPTER["W_ROW_LEN"], k))
    for q, sl in enumerate(plan["k_slices"]):
        writes.append((base + ADAPTER["W_BOUND"] + q, sl.stop))
    return WaferPhase("forward", writes, plan, "west" if plan["edge_out"] == "W" else "east",
                      m * k)


def forward_expected_outputs(cfg, a16):
    """Words the forward phase sends out of each row's edge for bf16 results ``a16`` (M x batch):
    ``{p: [wavelet payloads]}`` (color ``COLOR_RESULT``, bf16 in the upper half), output row m
    ascending, lanes ascending within it."""
    L = cfg.lanes
    return {p: [(pe.COLOR_RESULT << 32) | (int(v) << 16)
                for v in np.asarray(a16)[:, p * L:(p + 1) * L].ravel()]
            for p in range(cfg.mesh_rows)}
