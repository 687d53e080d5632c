"""The backward-data phase of a layer (``dZ_prev = mask(X) * bf16(W^T dZ)``; docs/wafer.md) and
``dZ_prev`` back from the words of the west and east edges."""

import numpy as np

from arch.pe_map import Op, VecMode
from arch.wavelet import unpack_wavelet
from models import pe
from models.pipeline.mapping import dx_west_columns

from .phase import COLOR_DX0, WaferCompileError, _check_fit, _resident_x
from .residency import _add_next_input, _with_next_input
from .writes import _assemble, _sram_loads

__all__ = ["compile_backward_data", "dx_edge_words", "split_dx"]


def compile_backward_data(cfg, *, m, k, batch, x16=None, dz16=None, x_home=None, sram_limit=None,
                          next_input=None, next_x16=None):
    """The backward-data phase of a ``m x k`` layer: ``dZ_prev = mask(X) * bf16(W^T dZ)``
    (kernels.backward_data). W streams **transposed** (row k of ``W^T`` = column k of W, m
    ascending, on the weight link of the column owning k, multicast down it; :func:`weight_streams`
    with ``transposed=True``): a PE has one accumulator row, so it FMACs over its stored
    ``dZ[M, B_p]`` (``dz_base``) and finishes ``dX[k, B_p]`` after M wavelets, in the kernel's ascending-m
    order. A VEC MASK (A = the stored activation ``X[k, B_p]``, B = the fp32 row) + bf16 round
    stores ``dZ_prev[K_q, B_p]`` at ``dx_base`` (one vector per k, bf16 in the upper half) and
    sends it out of the west edge of row p, or the east edge for the columns from
    ``models.pipeline.mapping.dx_west_columns`` on (:func:`dx_edge_words`), on color
    ``COLOR_DX0 + q`` (one color per column, so the host can tell the interleaved columns
    apart). With ``x16`` / ``dz16`` the writes load them; with ``x_home`` ``X`` is resident there
    (not loaded; the working set from 0, below ``sram_limit``); ``next_input`` / ``next_x16``:
    the next step's input batch streams in during the run (:func:`next_input_west_in`)."""
    _check_fit(cfg, m=m, k=k, batch=batch)
    _resident_x("backward-data", x_home, x16)
    P, Q, L = cfg.mesh_rows, cfg.mesh_cols, cfg.lanes
    if cfg.num_colors < COLOR_DX0 + Q:
        raise WaferCompileError(f"backward-data sends each column's dZ_prev to an edge on its own "
                                f"color: {COLOR_DX0 + Q} colors for {Q} columns, the router has "
                                f"num_colors={cfg.num_colors}")
    k_slices, h = pe._split(k, Q), dx_west_columns(Q)
    pes, routes = {}, {}
    for p in range(P):
        for q in range(Q):
            kq = k_slices[q]
            x_base, dz_base = (0, len(kq) * L) if x_home is None else (x_home, 0)
            acc_base = dz_base + m * L
            dx_base = acc_base + len(kq) * L
            descs = {
                1: dict(op=Op.VEC, vmode=VecMode.MASK, enable=1, round=1, store=1,
                        send=1, color=COLOR_DX0 + q,
                        dep_b_en=1, dep_b=0, a_base=x_base, a_stride=L, b_base=acc_base,
                        b_stride=L, count=1, reps=len(kq), lo=0, hi=len(kq), dst_base=dx_base),
                0: dict(op=Op.FMAC, enable=1, color=pe.COLOR_W, a_base=dz_base,
                        a_stride=L, count=m, reps=len(kq), dst_base=acc_base),
            }
            pes[(p, q)] = {"descs": descs, "x_base": x_base, "dz_base": dz_base,
                           "dx_base": dx_base, "k": kq, "sram": dx_base + len(kq) * L}
            west = q < h
            routes[(p, q)] = [(pe.COLOR_W, "N", ["RAMP"] + (["S"] if p < P - 1 else [])),
                              (COLOR_DX0 + q, "RAMP", ["W" if west else "E"])]
            routes[(p, q)] += ([(COLOR_DX0 + e, "E", ["W"]) for e in range(q + 1, h)] if west else
                               [(COLOR_DX0 + e, "W", ["E"]) for e in range(h, q)])
    plan = {"pes": pes, "routes": routes, "k_slices": k_slices, "edge_out": None}
    _add_next_input(cfg, plan, next_input)
    loads = _sram_loads(pes, L, m=m, k=k, batch=batch, x16=x16, dz16=dz16)
    phase = _assemble(cfg, "backward-data", plan, loads, [("W_COLOR", [pe.COLOR_W])], None,
                      [m * len(sl) for sl in k_slices], max(i["sram"] for i in pes.values()), sram_limit)
    return _with_next_input(cfg, phase, next_input, next_x16, batch)


def dx_edge_words(cfg, k):
    """``(west, east)``: the ``dZ_prev`` words each row's west and east edge delivers in the
    backward-data of a layer of ``k`` inputs."""
    sizes = [len(sl) * cfg.lanes for sl in pe._split(k, cfg.mesh_cols)]
    h = dx_west_columns(cfg.mesh_cols)
    return sum(sizes[:h]), sum(sizes[h:])


def split_dx(cfg, words, k):
    """``dZ_prev[K, B_p]`` (uint16, ``k x lanes``) from the wavelet payloads one row's west and
    east edges delivered in backward-data, in any order of the two edges (columns interleaved,
    told apart by their colors)."""
    L, Q = cfg.lanes, cfg.mesh_cols
    k_slices = pe._split(k, Q)
    out = np.zeros((k, L), dtype=np.uint16)
    data, colors, _ = unpack_wavelet(np.asarray(words, dtype=np.uint64))
    for q, sl in enumerate(k_slices):
        mine = data[colors == COLOR_DX0 + q]
        if len(mine) != len(sl) * L:
            raise ValueError(f"column {q}: {len(mine)} dZ_prev words, expected {len(sl) * L}")
        out[sl.start:sl.stop] = (mine >> 16).astype(np.uint16).reshape(len(sl), L)
    return out
