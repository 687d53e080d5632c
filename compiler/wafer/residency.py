"""What stays on the wafer between phases (docs/wafer.md#resident-activations): where every PE
keeps each layer's input (and its transpose), the mapping choices that decide it
(:func:`dw_on_lanes`, :func:`can_transpose_x`, :func:`transposes_own_x`), the keyword arguments
that give a phase those homes (:func:`resident_bases`), and the next step's input batch streamed
in during a phase (:func:`input_stream_columns`, :func:`next_input_west_in`)."""

import numpy as np

from arch.pe_map import Op
from arch.wavelet import pack_wavelet
from models import pe

from .phase import (
    BACKWARD_DATA_TASKS,
    FORWARD_COLORS,
    FORWARD_TASKS,
    FORWARD_X_T_TASKS,
    WaferCompileError,
    _check_array,
)

__all__ = ["dw_on_lanes", "can_transpose_x", "transposes_own_x", "input_stream_columns",
           "activation_homes", "resident_bases", "next_input_west_in"]


def dw_on_lanes(cfg, k):
    """Whether backward-weight runs its partials as FMAC broadcasts on the lanes: every column
    holds the same number of input features, a multiple of ``lanes`` (else VEC DOT)."""
    sizes = {len(s) for s in pe._split(k, cfg.mesh_cols)}
    return len(sizes) == 1 and min(sizes) % cfg.lanes == 0


def can_transpose_x(cfg, *, m, k):
    """Whether the forward of an ``m x k`` layer can keep its ``X`` transposed on the wafer
    (``models.pe.forward_kernel``'s ``x_t_base``): 8 task descriptors, 5 colors (``m`` and ``k``
    no longer matter: the PASS waits on no FMAC row)."""
    return cfg.num_tasks >= FORWARD_X_T_TASKS and cfg.num_colors > pe.COLOR_X_T


def transposes_own_x(cfg, dims, l):
    """Whether forward ``l`` keeps its own input transposed (``x_t_home``) for backward-weight
    ``l`` on the lanes: a VEC PASS that starts at its commit, during the configuration, so it
    costs the run nothing. Otherwise (``l >= 1``) forward ``l - 1`` keeps its outputs transposed
    (``keep_t_home``: the east PE sends every result row a second time, in the run's tail)."""
    return dw_on_lanes(cfg, dims[l]) and can_transpose_x(cfg, m=dims[l + 1], k=dims[l])


def _keeps_t(cfg, dims, l):
    """Whether forward ``l`` keeps its outputs transposed for backward-weight ``l + 1``."""
    return (l < len(dims) - 2 and dw_on_lanes(cfg, dims[l + 1])
            and not transposes_own_x(cfg, dims, l + 1))


def input_stream_columns(cfg, dims):
    """``{(kind, l): columns}``: the phases of a step that stream the **next** step's input batch
    into the wafer while they run, and the mesh columns (a sorted tuple) whose ``X[K_q, B_p]``
    each carries: forward and backward-data of the layers ``l >= 1``, whose west edges take no
    input, where a descriptor slot and a color are free (:func:`next_input_west_in`). Each column
    (``|K_q| * L`` wavelets per row) goes to the phase with the most room left under its run,
    counted as the words on its fullest weight link (``M * max |K_q|`` of the phase's layer;
    ties: the earlier phase). Empty (one layer, no room, or a backward-weight of layer 0 as VEC
    DOT, which reads this step's ``X`` at the home the next batch would overwrite before it runs:
    :func:`dw_on_lanes`): the host loads the input batch every step."""
    n, T, Q, L = len(dims) - 1, cfg.num_tasks, cfg.mesh_cols, cfg.lanes
    if not dw_on_lanes(cfg, dims[0]):
        return {}
    room = {}
    for l in range(1, n):
        used = FORWARD_TASKS + 2 * _keeps_t(cfg, dims, l) + 2 * transposes_own_x(cfg, dims, l)
        if T > used and cfg.num_colors > FORWARD_COLORS + transposes_own_x(cfg, dims, l):
            room[("forward", l)] = dims[l + 1] * len(pe._split(dims[l], Q)[0])
    for l in range(n - 1, 0, -1):
        if T > BACKWARD_DATA_TASKS:
            room[("backward-data", l)] = dims[l + 1] * len(pe._split(dims[l], Q)[0])
    if not room:
        return {}
    order = list(room)
    columns = {ph: [] for ph in order}
    for q, kq in enumerate(pe._split(dims[0], Q)):
        ph = max(order, key=lambda ph: (room[ph], -order.index(ph)))
        columns[ph].append(q)
        room[ph] -= len(kq) * L
    return {ph: tuple(cols) for ph, cols in columns.items() if cols}


def activation_homes(cfg, dims):
    """``{l: (x, xt)}``: where every PE keeps layer ``l``'s input between phases: ``X[K_q, B_p]``
    at ``x`` (one L-word vector per k; the hidden layers ``l >= 1``, and the input batch when the
    previous step streams it in, :func:`input_stream_columns`; else ``None``: it is loaded) and,
    when backward-weight of ``l`` runs on the lanes (:func:`dw_on_lanes`),
    ``X^T[B_p, K_q]`` at ``xt`` (``|K_q|`` words per sample; for ``l = 0`` only if the forward can
    transpose it, :func:`can_transpose_x`; else ``None``); ``max |K_q| * L`` words each, stacked down
    from the top of SRAM. Forward ``l - 1`` leaves ``X`` there, and ``X^T`` too unless forward
    ``l`` transposes its own input (:func:`transposes_own_x`; forward 0 always does);
    forward ``l`` and backward-data ``l`` read ``X``, backward-weight ``l`` ``X`` (VEC DOT) or
    ``X^T``."""
    homes, top = {}, cfg.sram_words
    streamed = bool(input_stream_columns(cfg, dims))
    for l in range(len(dims) - 1):
        size = max(len(s) for s in pe._split(dims[l], cfg.mesh_cols)) * cfg.lanes
        x = xt = None
        if l > 0 or streamed:
            top -= size
            x = top
        if dw_on_lanes(cfg, dims[l]) and (l > 0 or can_transpose_x(cfg, m=dims[1], k=dims[0])):
            top -= size
            xt = top
        homes[l] = (x, xt)
    return homes


def resident_bases(cfg, dims, kind, layer):
    """Keyword arguments of ``compile_<kind>`` (``"forward"``, ``"backward-data"``,
    ``"backward-weight"``) for ``layer`` of a network of widths ``dims`` whose activations stay
    on the wafer (:func:`activation_homes`): ``x_home`` (the layer's input resident, not loaded:
    ``X`` for the hidden layers, ``X^T`` for backward-weight on the lanes), ``keep_home`` and
    ``keep_t_home`` (forward of a hidden layer: where its outputs stay, and transposed where
    the next forward does not transpose them itself), ``x_t_home`` (a forward that keeps its own
    input transposed, :func:`transposes_own_x`), ``sram_limit`` (the
    working set stays below the homes) and ``next_input`` (the phases of
    :func:`input_stream_columns`: where the next step's input batch goes, which columns)."""
    homes = activation_homes(cfg, dims)
    bases = [b for home in homes.values() for b in home if b is not None]
    x, xt = homes[layer]
    args = {"sram_limit": min(bases, default=cfg.sram_words), "x_home": x}
    if kind == "forward":
        last = layer == len(dims) - 2
        args["keep_home"], args["keep_t_home"] = (None, None) if last else homes[layer + 1]
        if not _keeps_t(cfg, dims, layer):
            args["keep_t_home"] = None
        args["x_t_home"] = xt if transposes_own_x(cfg, dims, layer) else None
    elif kind == "backward-weight":
        if dw_on_lanes(cfg, dims[layer]):
            args["x_home"] = xt
    elif kind != "backward-data":
        raise ValueError(f"unknown phase kind {kind!r}")
    columns = input_stream_columns(cfg, dims).get((kind, layer))
    if columns is not None:
        args["next_input"] = {"home": homes[0][0], "k": dims[0], "columns": columns}
    return args


def _add_next_input(cfg, plan, next_input):
    """Adds to ``plan`` the stream of the next input batch (``next_input``: ``home``, ``k``,
    ``columns``; none: nothing): on the phase's lowest unused color, from the west edge of every
    row east to the last of ``columns`` (into the RAMP of each of them), and in each of their PEs
    a STORE (the lowest free slot) that takes every vector passing and keeps its ``|K_q|`` at
    ``home``; ``plan["west_in"]``: ``{p: (color, wavelets)}``."""
    if next_input is None:
        return
    P, L = cfg.mesh_rows, cfg.lanes
    columns, k_slices = next_input["columns"], pe._split(next_input["k"], cfg.mesh_cols)
    used = {c for routes in plan["routes"].values() for c, _, _ in routes}
    used |= {d["color"] for info in plan["pes"].values() for d in info["descs"].values()}
    color = next((c for c in range(cfg.num_colors) if c not in used), None)
    if color is None:
        raise WaferCompileError(f"streaming the next input batch needs a free color; the phase "
                                f"uses all num_colors={cfg.num_colors}")
    vectors = sum(len(k_slices[q]) for q in columns)
    for p in range(P):
        for q in range(columns[-1] + 1):
            mine = q in columns
            plan["routes"][(p, q)].append((color, "W", ["RAMP"] * mine + ["E"] * (q < columns[-1])))
            if mine:
                descs = plan["pes"][(p, q)]["descs"]
                slot = next((t for t in range(cfg.num_tasks) if t not in descs), None)
                if slot is None:
                    raise WaferCompileError(f"streaming the next input batch needs a free task "
                                            f"descriptor; PE ({p}, {q}) uses all num_tasks={cfg.num_tasks}")
                lo = sum(len(k_slices[c]) for c in columns if c < q)
                descs[slot] = dict(op=Op.STORE, enable=1, color=color, reps=vectors, lo=lo,
                                   hi=lo + len(k_slices[q]), dst_base=next_input["home"])
    plan["west_in"] = {p: (color, vectors * L) for p in range(P)}


def _with_next_input(cfg, phase, next_input, next_x16, batch):
    """``phase`` with the wavelets of the next input batch ``next_x16`` (``k x batch`` bf16) in
    ``west_in`` (when given)."""
    if next_x16 is not None:
        if next_input is None:
            raise WaferCompileError("next_x16 given without next_input (where it goes)")
        x16 = _check_array("next X", next_x16, (next_input["k"], batch))
        phase.west_in = next_input_west_in(cfg, x16, columns=next_input["columns"],
                                           color=phase.plan["west_in"][0][0])
    return phase


def next_input_west_in(cfg, x16, *, columns, color):
    """``{p: wavelets}`` the host sends into the west edge of row p to stream an input batch
    ``x16`` (``K x batch`` bf16 bit patterns) into the PEs of ``columns``: for q in ``columns``,
    for k in ``K_q``, ``X[k, B_p]`` (b ascending; bf16 in the upper half, ``color``). Each PE's
    STORE keeps its ``|K_q|`` vectors, the PEs west of it pass them on."""
    L = cfg.lanes
    k_slices = pe._split(x16.shape[0], cfg.mesh_cols)
    out = {}
    for p in range(cfg.mesh_rows):
        rows = np.concatenate([x16[k_slices[q].start:k_slices[q].stop, p * L:(p + 1) * L]
                               for q in columns])
        out[p] = pack_wavelet(np.asarray(rows, dtype=np.uint64).ravel() << np.uint64(16), color)
    return out
