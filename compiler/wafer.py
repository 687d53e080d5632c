"""Layer compiler for the RTL wafer (:class:`hdl.wafer.Wafer`): from a layer shape, a mesh
(``Config``) and a batch, the configuration writes (route tables, SRAM contents, descriptors,
adapter registers) of a phase for every tile, following docs/architecture.md#layer-mapping and the
orders of ``models/pipeline/kernels.py`` (the per-PE programs come from ``models.pe``).

The addresses and word formats come from the architecture's maps (``arch.tile_map``,
``arch.router_map``, ``arch.pe_map``, ``arch.wafer_map``, ``arch.wavelet``). Configurations the
hardware cannot honour raise :class:`WaferCompileError` naming the limit.

Phases (docs/wafer.md):

* **forward** (:func:`compile_forward`): ``Z = W X``, FMAC over ``X[K_q, B_p]``, psum chain west
  to east, ReLU + bf16 at the east PE of each row; results leave row ``p`` at its west edge (east
  for a one-column mesh) and each PE keeps ``A[own_q, B_p]`` where the next layer finds its
  ``X[K_q, B_p]``; the last layer sends fp32 logits out of the east edge unrounded.
* **backward-data** (:func:`compile_backward_data`): ``W`` streamed transposed, FMAC over the
  stored ``dZ[M, B_p]``, VEC MASK + bf16; ``dZ_prev`` of column ``q`` leaves the west edge.
* **backward-weight** (:func:`compile_backward_weight`): partials per output row (FMAC broadcasts
  on the lanes, or VEC DOT), summed south to north down each column, out of the north edge on
  that column's gradient link.

Every mesh column has its own weight link and gradient link (a SwarmX tree each):
:func:`weight_streams` gives what the host (MemoryX) sends on each weight link,
:func:`join_gradients` puts the gradient links' words back into ``dW``.
"""

from dataclasses import dataclass, field

import numpy as np

from arch.pe_map import (
    DESCRIPTOR,
    STATUS,
    Op,
    VecMode,
    desc_addr,
    descriptor_writes,
    encode,
    fmac_order,
    pack_pair,
    status_base,
)
from arch.ports import Port
from arch.router_map import ADDR_RAMP2, route_addr, route_mask
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
from arch.wafer_map import ADAPTER, ADAPTER_COUNT_BITS, adapter_base
from arch.wavelet import pack_tagged, pack_wavelet, unpack_tagged, unpack_wavelet
from models import pe

__all__ = ["WaferCompileError", "WaferPhase", "compile_forward", "compile_backward_weight",
           "compile_backward_data", "forward_expected_outputs", "logits_expected_outputs",
           "COLOR_GRAD", "COLOR_DX0", "COLOR_DZ", "dw_on_lanes", "backward_weight_west_in", "split_dx",
           "weight_streams", "join_gradients", "activation_homes", "resident_bases",
           "can_transpose_x", "transposes_own_x", "input_stream_columns", "next_input_west_in"]

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
    registers are always written."""
    name: str
    writes: list = field(default_factory=list)
    plan: dict = field(default_factory=dict)
    out_edge: str = "west"
    link_words: list = field(default_factory=list)
    west_in: dict = field(default_factory=dict)
    settable: list = field(default_factory=list)


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


def _route_writes(cfg, plan, bits):
    """Each tile's routes, then its RAMP2 register (written even when 0: a PE may hold the
    previous phase's)."""
    out = []
    for (p, q), routes in sorted(plan["routes"].items()):
        for color, inp, outs in routes:
            out.append((tile_address(cfg.mesh_cols, p, q, route_addr(color, Port[inp]), bits),
                        route_mask(outs)))
    for (p, q), mask in sorted(plan["ramp2"].items()):
        out.append((tile_address(cfg.mesh_cols, p, q, ADDR_RAMP2, bits), mask))
    return out


def _commit_order(descs):
    """Descriptor indices in a safe commit order for a PE that may hold a previous phase's
    descriptors (whose ``done`` counters are stale): FMAC/STORE first (committing resets their
    counters), then VECs that wait on them, then VECs without dependencies (they start at once)."""
    def rank(t):
        d = descs[t]
        if d.get("op") != Op.VEC:
            return 0
        return 1 if (d.get("dep_a_en") or d.get("dep_b_en") or not d.get("enable")) else 2
    return sorted(descs, key=lambda t: (rank(t), t))


def _desc_writes(cfg, plan, bits):
    """First stop every descriptor of every PE (a write to its ``STOP`` register), then commit the
    phase's descriptors tile by tile (north-west first), each in :func:`_commit_order`. Returns
    ``(writes, settable)``: the words other than a descriptor's committing word 0 are settable."""
    out, settable = [], []
    S, T, Q = cfg.sram_words, cfg.num_tasks, cfg.mesh_cols
    stop = status_base(S, T) + STATUS["STOP"]
    for (p, q) in sorted(plan["pes"]):
        out.append((tile_address(Q, p, q, CORE_BASE + stop, bits), 0))
        settable.append(False)
    for (p, q), info in sorted(plan["pes"].items()):
        for t in _commit_order(info["descs"]):
            base = tile_address(Q, p, q, CORE_BASE + desc_addr(S, t), bits)
            words = descriptor_writes(base, encode(**info["descs"][t]))
            out += words
            settable += [addr != base for addr, _ in words]
    return out, settable


def _commit_indices(cfg, plan, writes, bits):
    """``{(p, q): {t: i}}``: the index in ``writes`` of the write that commits descriptor ``t``
    of PE ``(p, q)`` (the last write of its word 0)."""
    S, Q = cfg.sram_words, cfg.mesh_cols
    last = {addr: i for i, (addr, _) in enumerate(writes)}
    return {(p, q): {t: last[tile_address(Q, p, q, CORE_BASE + desc_addr(S, t), bits)]
                     for t in info["descs"]}
            for (p, q), info in plan["pes"].items()}


def _sram_writes(cfg, loads, bits):
    """``loads[(p, q)] = [(base, words)]``: SRAM words (uint32, a bf16 in the upper half) to write
    into each PE: two per write in the core's packed mode (``PACK = 1`` before, ``PACK = 0``
    after; an odd last word is written alone after that)."""
    out = []
    S, T, Q = cfg.sram_words, cfg.num_tasks, cfg.mesh_cols
    for (p, q), items in sorted(loads.items()):
        if not items:
            continue

        def addr(local, p=p, q=q):
            return tile_address(Q, p, q, CORE_BASE + local, bits)
        pack = addr(status_base(S, T) + STATUS["PACK"])
        out.append((pack, 1))
        tails = []
        for base, words in items:
            words = np.asarray(words, dtype=np.uint32).ravel()
            if (words & 0xFFFF).any():
                raise WaferCompileError("SRAM loads must hold bf16 values in the upper half")
            n = len(words) // 2 * 2
            pairs = pack_pair(words[0:n:2], words[1:n:2])
            out += [(addr(base + 2 * i), int(w)) for i, w in enumerate(pairs)]
            if n < len(words):
                tails.append((addr(base + n), int(words[n])))
        out.append((pack, 0))
        out += tails
    return out


def _upper(a16):
    """bf16 bit patterns as 32-bit words (the bf16 in the upper half)."""
    return np.asarray(a16, dtype=np.uint32) << 16


def _check_array(name, a, shape):
    a = np.asarray(a)
    if a.shape != shape:
        raise WaferCompileError(f"{name} has shape {a.shape}, expected {shape}")
    return a


def _sram_loads(pes, lanes, *, m, k, batch, x16=None, dz16=None):
    """Per PE, the SRAM inputs of a phase: its ``X[K_q, B_p]`` at ``x_base`` and its
    ``dZ[:, B_p]`` at ``dz_base`` (bf16 in the upper half of each word)."""
    if x16 is not None:
        x16 = _check_array("X", x16, (k, batch))
    if dz16 is not None:
        dz16 = _check_array("dZ", dz16, (m, batch))
    loads = {}
    for (p, q), info in pes.items():
        b = slice(p * lanes, (p + 1) * lanes)
        items = []
        if x16 is not None:
            items.append((info["x_base"], _upper(x16[info["k"].start:info["k"].stop, b])))
        if dz16 is not None:
            items.append((info["dz_base"], _upper(dz16[:, b])))
        loads[(p, q)] = items
    return loads


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


def _assemble(cfg, name, plan, loads, adapters, out_edge, link_words, sram_needed, sram_limit=None):
    _check_sram(cfg, name, sram_needed, sram_limit)
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    plan["ramp2"] = {pq: pe.ramp2_colors(info["descs"]) for pq, info in plan["pes"].items()}
    routes, loads = _route_writes(cfg, plan, bits), _sram_writes(cfg, loads, bits)
    descs, desc_settable = _desc_writes(cfg, plan, bits)
    base = adapter_base()
    adapter = [(base + ADAPTER[reg] + i, int(v)) for reg, vals in adapters for i, v in enumerate(vals)]
    writes = routes + loads + descs + adapter
    settable = [True] * len(routes) + [False] * len(loads) + desc_settable + [False] * len(adapter)
    plan["commits"] = _commit_indices(cfg, plan, writes, bits)
    return WaferPhase(name, writes, plan, out_edge, link_words, settable=settable)


def compile_forward(cfg, *, m, k, batch, x16=None, last=False, x_home=None, keep_home=None,
                    keep_t_home=None, x_t_home=None, sram_limit=None, next_input=None,
                    next_x16=None):
    """The forward phase of a ``m x k`` layer on a ``cfg.mesh_rows x cfg.mesh_cols`` wafer for a
    batch of ``batch`` samples. With ``x16`` (K x batch bf16 bit patterns) the writes also load
    each PE's input slice ``X[K_q, B_p]`` into its SRAM (upper 16 bits of each word; at ``x_home``
    when given); with ``x_home`` alone it is already there (the previous layer kept it, or the
    previous step streamed the input batch in: :func:`resident_bases`) and nothing is loaded.
    ``keep_home``: where the kept outputs land (default: after the working
    set); ``keep_t_home``: where every PE also keeps them transposed (``A^T[B_p, own]``, for the
    next layer's backward-weight on the lanes; ``models.pe.forward_kernel``); ``x_t_home``: where
    every PE also keeps its ``X`` transposed (``X^T[B_p, K_q]``, for this layer's backward-weight
    on the lanes: :func:`can_transpose_x`); ``sram_limit``: the working set ends below it (the
    resident activations above); ``next_input`` / ``next_x16``: the next step's input batch
    streams in during the run (:func:`next_input_west_in`).

    Hidden layer (``last=False``): ReLU + bf16 at the east PE, results west to their owners (kept
    at ``xn_base``) and out of the west edge (east for one column), ``COLOR_RESULT``.
    Last layer (``last=True``): no ReLU, no rounding: the east PE sends the fp32 ``Z`` rows out of
    the east edge of its row (``COLOR_RESULT``) for the host's softmax; nothing is kept."""
    _check_fit(cfg, m=m, k=k, batch=batch)
    if keep_t_home is not None and (last or cfg.num_tasks < FORWARD_T_TASKS):
        raise WaferCompileError("keeping the forward's outputs transposed needs a hidden layer and "
                                f"{FORWARD_T_TASKS} task descriptors per PE (num_tasks={cfg.num_tasks})")
    if x_t_home is not None and not can_transpose_x(cfg, m=m, k=k):
        raise WaferCompileError(f"transposing X on the wafer needs {FORWARD_X_T_TASKS} task descriptors "
                                f"and {pe.COLOR_X_T + 1} colors (num_tasks={cfg.num_tasks}, "
                                f"num_colors={cfg.num_colors})")
    L = cfg.lanes
    try:
        plan = pe.forward_kernel(lanes=L, sram_words=_limit(cfg, sram_limit), rows=cfg.mesh_rows,
                                 cols=cfg.mesh_cols, m=m, k=k, x_base=x_home,
                                 keep_base=None if last else keep_home, keep_t_base=keep_t_home,
                                 x_t_base=x_t_home)
    except ValueError as e:
        where = "" if sram_limit is None else \
            f" (its working set ends below the resident activations at {sram_limit})"
        raise WaferCompileError(f"layer {m}x{k} on a {cfg.mesh_rows}x{cfg.mesh_cols} wafer: "
                                f"{e}{where}") from None
    Q = cfg.mesh_cols
    if last:
        for (p, q), info in plan["pes"].items():
            descs = info["descs"]
            descs.pop(3, None)                         # nobody keeps the logits
            if x_t_home is not None:
                # The X^T STORE and PASS to slots 4, 5 (free: the last layer keeps nothing
                # transposed), so that they and a hidden layer's (6, 7) stay written from one
                # step to the next (compiler.config_state).
                descs[4], descs[5] = descs.pop(6), descs.pop(7)
            if q == Q - 1:
                vec = 1 if Q == 1 else 2               # the VEC that completes the row chain
                for f in ("relu", "round", "store", "lo", "hi", "dst_base"):
                    descs[vec].pop(f, None)
                descs[vec].update(send=1, color=pe.COLOR_RESULT)
            routes = [r for r in plan["routes"][(p, q)] if r[0] != pe.COLOR_RESULT]
            if q == Q - 1:
                routes.append((pe.COLOR_RESULT, "RAMP", ["E"]))
            plan["routes"][(p, q)] = routes
        plan["edge_out"] = "E"
    _add_next_input(cfg, plan, next_input)
    loads = _sram_loads(plan["pes"], L, m=m, k=k, batch=batch, x16=x16)
    phase = _assemble(cfg, "forward", plan, loads, [("W_COLOR", [pe.COLOR_W])],
                      "west" if plan["edge_out"] == "W" else "east",
                      [m * len(sl) for sl in plan["k_slices"]], 0)
    return _with_next_input(cfg, phase, next_input, next_x16, batch)


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
    ties: the earlier phase). Empty (one layer, or no room): the host loads the input batch
    every step."""
    n, T, Q, L = len(dims) - 1, cfg.num_tasks, cfg.mesh_cols, cfg.lanes
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


def dw_on_lanes(cfg, k):
    """Whether backward-weight runs its partials as FMAC broadcasts on the lanes: every column
    holds the same number of input features, a multiple of ``lanes`` (else VEC DOT)."""
    sizes = {len(s) for s in pe._split(k, cfg.mesh_cols)}
    return len(sizes) == 1 and min(sizes) % cfg.lanes == 0


def compile_backward_weight(cfg, *, m, k, batch, x16=None, dz16=None, x_home=None, sram_limit=None):
    """The backward-weight phase of a ``m x k`` layer: ``dW = dZ X^T`` (kernels.backward_weight).

    Each PE(p, q) computes ``partial_p[m, K_q]`` (b ascending from +0.0 over ``|B_p| = lanes``
    samples) into SRAM, row m at ``part_base + m*|K_q|``. The column chain runs **south to north**
    on ``COLOR_GRAD``, one L-word vector at a time: the south PE sends its partials north (VEC
    PASS); every other PE stores the incoming sums (STORE from the south) and sends
    ``fp32_add(incoming, own)`` north (VEC ADD, as each own vector is ready); the north PE's sums
    leave at the north edge on gradient link q (``grads[q]``: the rows of ``dW[:, K_q]`` in order,
    ``last`` on the final word; :func:`join_gradients`).

    Partials, when :func:`dw_on_lanes`: **FMAC broadcasts on the lanes**. PE(p, q) holds ``X^T``
    (``x_base``: for each sample b of ``B_p``, its ``|K_q|`` features); the host sends ``dZ`` into
    the west edge of row p (``west_in[p]``, :func:`backward_weight_west_in`: each ``dZ[m, B_p]``
    vector ``C = |K_q| / L`` times, on ``COLOR_DZ``), multicast east along the row into every
    RAMP; every PE's FMAC (``count = L`` wavelets b per row, ``group = C``) makes row ``n = m*C +
    c`` the L features ``c*L ..`` of ``partial[m]``. Otherwise a **VEC DOT** per output row over
    the stored ``X[K_q, B_p]`` (one vector per k) and ``dZ[M, B_p]`` (every PE). With ``x16`` /
    ``dz16`` the writes load them (on the lanes ``dz16`` gives ``west_in`` instead). ``x_home``
    says ``X`` (VEC DOT) or ``X^T`` (on the lanes) is resident there (not loaded; the working set
    from 0, below ``sram_limit``)."""
    _check_fit(cfg, m=m, k=k, batch=batch)
    _resident_x("backward-weight", x_home, x16)
    P, Q, L = cfg.mesh_rows, cfg.mesh_cols, cfg.lanes
    k_slices = pe._split(k, Q)
    words = {q: m * len(k_slices[q]) for q in range(Q)}
    if P > 1:
        for q, n in words.items():
            if n % L:
                raise WaferCompileError(
                    f"backward-weight: column {q} holds {m} x {len(k_slices[q])} = {n} partials, "
                    f"not a multiple of lanes={L} (the column chain adds whole L-word vectors)")
    lanes = dw_on_lanes(cfg, k)
    pes, routes = {}, {}
    x_base = 0 if x_home is None else x_home
    for p in range(P):
        for q in range(Q):
            kq = k_slices[q]
            dz_base = len(kq) * L if x_home is None else 0
            part_base = dz_base + (0 if lanes else m * L)       # on the lanes dZ is not stored
            in_base = part_base + words[q]
            south = p == P - 1
            if lanes:
                C = len(kq) // L
                units = m * C
                descs = {0: dict(op=Op.FMAC, enable=1, color=COLOR_DZ, a_base=x_base, a_stride=len(kq),
                                 count=L, reps=units, group=C, dst_base=part_base)}
                own = dict(dep_a_en=1, dep_a=0)
            else:
                units = words[q] // L
                dot = dict(op=Op.VEC, vmode=VecMode.DOT, enable=1, a_base=x_base, a_stride=L,
                           count=len(kq), b_base=dz_base, b_stride=L, reps=m)
                descs = {0: dict(dot, send=1, color=COLOR_GRAD) if south else
                         dict(dot, store=1, dst_base=part_base, lo=0, hi=m, chain=1, next=2)}
                own = {}
            if south:
                if lanes:
                    descs[1] = dict(op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=COLOR_GRAD,
                                    a_base=part_base, a_stride=L, count=1, reps=units, **own)
                need = part_base + words[q] if lanes else part_base
            else:
                descs[1] = dict(op=Op.STORE, enable=1, color=COLOR_GRAD, reps=units, lo=0, hi=units,
                                dst_base=in_base)
                descs[2] = dict(op=Op.VEC, vmode=VecMode.ADD, enable=int(lanes), send=1,
                                color=COLOR_GRAD, dep_b_en=1, dep_b=1, a_base=in_base, a_stride=L,
                                b_base=part_base, b_stride=L, count=1, reps=units, **own)
                need = in_base + words[q]
            info = {"descs": descs, "x_base": x_base, "dz_base": dz_base, "k": kq, "sram": need}
            r = [(COLOR_GRAD, "RAMP", ["N"])]
            if not south:
                r.append((COLOR_GRAD, "S", ["RAMP"]))
            if lanes:
                r.append((COLOR_DZ, "W", ["RAMP"] + (["E"] if q < Q - 1 else [])))
            pes[(p, q)] = info
            routes[(p, q)] = r
    plan = {"pes": pes, "routes": routes, "k_slices": k_slices, "edge_out": "N",
            "dw": "lanes" if lanes else "dot"}
    if lanes:       # the host's dZ stream into each row's west edge: (color, wavelets)
        plan["west_in"] = {p: (COLOR_DZ, m * len(k_slices[0])) for p in range(P)}
        loads = _bw_lane_loads(pes, L, k=k, batch=batch, x16=x16)
    else:
        loads = _sram_loads(pes, L, m=m, k=k, batch=batch, x16=x16, dz16=dz16)
    link_words = [words[q] for q in range(Q)]
    phase = _assemble(cfg, "backward-weight", plan, loads, [("G_COUNT", link_words)], "grads",
                      link_words, max(i["sram"] for i in pes.values()), sram_limit)
    if lanes and dz16 is not None:
        phase.west_in = backward_weight_west_in(cfg, m=m, k=k, batch=batch, dz16=dz16)
    return phase


def backward_weight_west_in(cfg, *, m, k, batch, dz16):
    """``{p: wavelets}`` the host sends into the west edge of row p for backward-weight on the
    lanes: for each m ascending, ``C = |K_q| / L`` times, ``dZ[m, B_p]`` (b ascending; bf16 in the
    upper half, color ``COLOR_DZ``): FMAC row ``m*C + c``, in the FMAC's order (:func:`fmac_stream`)."""
    L = cfg.lanes
    dz16 = _check_array("dZ", dz16, (m, batch))
    C = len(pe._split(k, cfg.mesh_cols)[0]) // L
    out = {}
    for p in range(cfg.mesh_rows):
        rows = np.repeat(np.asarray(dz16[:, p * L:(p + 1) * L], dtype=np.uint64), C, axis=0)
        out[p] = pack_wavelet(fmac_stream(cfg, rows) << np.uint64(16), COLOR_DZ)
    return out


def _bw_lane_loads(pes, lanes, *, k, batch, x16=None):
    """SRAM inputs of backward-weight on the lanes: every PE's ``X^T[B_p, K_q]`` at ``x_base``
    (sample-major)."""
    loads = {pq: [] for pq in pes}
    if x16 is not None:
        x16 = _check_array("X", x16, (k, batch))
        for (p, q), info in pes.items():
            b = slice(p * lanes, (p + 1) * lanes)
            loads[(p, q)].append((info["x_base"], _upper(x16[info["k"].start:info["k"].stop, b].T)))
    return loads


def compile_backward_data(cfg, *, m, k, batch, x16=None, dz16=None, x_home=None, sram_limit=None,
                          next_input=None, next_x16=None):
    """The backward-data phase of a ``m x k`` layer: ``dZ_prev = mask(X) * bf16(W^T dZ)``
    (kernels.backward_data). W streams **transposed** (row k of ``W^T`` = column k of W, m
    ascending, on the weight link of the column owning k, multicast down it; :func:`weight_streams`
    with ``transposed=True``): a PE has one accumulator row, so it FMACs over its stored
    ``dZ[M, B_p]`` (``dz_base``) and finishes ``dX[k, B_p]`` after M wavelets, in the kernel's ascending-m
    order. A VEC MASK (A = the stored activation ``X[k, B_p]``, B = the fp32 row) + bf16 round
    stores ``dZ_prev[K_q, B_p]`` at ``dx_base`` (one vector per k, bf16 in the upper half) and
    sends it out of the west edge of row p on color ``COLOR_DX0 + q`` (one color per column, so the
    host can tell the interleaved columns apart). With ``x16`` / ``dz16`` the writes load them;
    with ``x_home`` ``X`` is resident there (not loaded; the working set from 0, below
    ``sram_limit``); ``next_input`` / ``next_x16``: the next step's input batch streams in during
    the run (:func:`next_input_west_in`)."""
    _check_fit(cfg, m=m, k=k, batch=batch)
    _resident_x("backward-data", x_home, x16)
    P, Q, L = cfg.mesh_rows, cfg.mesh_cols, cfg.lanes
    if cfg.num_colors < COLOR_DX0 + Q:
        raise WaferCompileError(f"backward-data sends each column's dZ_prev west on its own "
                                f"color: {COLOR_DX0 + Q} colors for {Q} columns, the router has "
                                f"num_colors={cfg.num_colors}")
    k_slices = pe._split(k, Q)
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
            routes[(p, q)] = [(pe.COLOR_W, "N", ["RAMP"] + (["S"] if p < P - 1 else [])),
                              (COLOR_DX0 + q, "RAMP", ["W"])]
            routes[(p, q)] += [(COLOR_DX0 + e, "E", ["W"]) for e in range(q + 1, Q)]
    plan = {"pes": pes, "routes": routes, "k_slices": k_slices, "edge_out": None}
    _add_next_input(cfg, plan, next_input)
    loads = _sram_loads(pes, L, m=m, k=k, batch=batch, x16=x16, dz16=dz16)
    phase = _assemble(cfg, "backward-data", plan, loads, [("W_COLOR", [pe.COLOR_W])], None,
                      [m * len(sl) for sl in k_slices], max(i["sram"] for i in pes.values()), sram_limit)
    return _with_next_input(cfg, phase, next_input, next_x16, batch)


def forward_expected_outputs(cfg, a16):
    """Words the forward phase sends out of each row's edge for bf16 results ``a16`` (M x batch):
    ``{p: [wavelet payloads]}`` (color ``COLOR_RESULT``, bf16 in the upper half), output row m
    ascending, lanes ascending within it."""
    L = cfg.lanes
    return {p: [pack_wavelet(int(v) << 16, pe.COLOR_RESULT)
                for v in np.asarray(a16)[:, p * L:(p + 1) * L].ravel()]
            for p in range(cfg.mesh_rows)}


def logits_expected_outputs(cfg, z):
    """Words the last-layer forward sends out of each row's east edge for fp32 logits ``z``
    (M x batch): ``{p: [payloads]}`` (``COLOR_RESULT``, the fp32 bits), m ascending."""
    L = cfg.lanes
    zb = np.asarray(z, dtype=np.float32).view(np.uint32)
    return {p: [pack_wavelet(int(v), pe.COLOR_RESULT) for v in zb[:, p * L:(p + 1) * L].ravel()]
            for p in range(cfg.mesh_rows)}


def split_dx(cfg, words, k):
    """``dZ_prev[K, B_p]`` (uint16, ``k x lanes``) from the wavelet payloads one row's west edge
    delivered in backward-data (columns interleaved, told apart by their colors)."""
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


def weight_streams(cfg, w16, *, transposed=False):
    """What the host sends on each weight link for bf16 weights ``w16`` (``M x K`` bit patterns):
    a list of ``Q`` tagged-word arrays (uint64, ``arch.wavelet.pack_tagged``: the bf16 in the low
    half, ``last`` on each link's final word). Link ``q`` carries ``W[:, K_q]`` row by row
    (forward), or with ``transposed`` the rows ``k`` of ``W^T`` for ``k`` in ``K_q``, m ascending
    (backward-data); the rows in the FMAC's order, groups of ``cfg.acc_rows`` rows interleaved
    (``arch.pe_map.fmac_order``)."""
    w16 = np.asarray(w16)
    if w16.ndim != 2 or w16.shape[1] < cfg.mesh_cols:
        raise WaferCompileError(f"weights of shape {w16.shape} cannot be split over "
                                f"{cfg.mesh_cols} mesh columns")
    out = []
    for sl in pe._split(w16.shape[1], cfg.mesh_cols):
        part = fmac_stream(cfg, w16[:, sl].T if transposed else w16[:, sl])
        out.append(pack_tagged(part.astype(np.uint64), np.arange(len(part)) == len(part) - 1))
    return out


def fmac_stream(cfg, rows):
    """The wavelets of an FMAC whose row ``n`` takes ``rows[n]`` (a 2-D array, one row per FMAC
    row), in the order the PE takes them (``arch.pe_map.fmac_order`` with ``cfg.acc_rows``)."""
    rows = np.asarray(rows)
    order = np.array(fmac_order(rows.shape[0], rows.shape[1], cfg.acc_rows), dtype=np.int64)
    return rows[order[:, 0], order[:, 1]] if len(order) else rows.ravel()


def join_gradients(cfg, links, *, m, k):
    """``dW`` (``m x k`` fp32 bit patterns, uint32) from the tagged words received on each
    gradient link (link ``q``: the rows of ``dW[:, K_q]`` in order); raises ``ValueError`` when a
    link has the wrong number of words or ``last`` is not exactly on its final word."""
    slices = pe._split(k, cfg.mesh_cols)
    if len(links) != len(slices):
        raise ValueError(f"{len(links)} gradient links, the wafer has {len(slices)} columns")
    out = np.zeros((m, k), dtype=np.uint32)
    for q, (sl, words) in enumerate(zip(slices, links)):
        data, lasts = unpack_tagged(np.asarray(words, dtype=np.uint64))
        if len(data) != m * len(sl):
            raise ValueError(f"gradient link {q}: {len(data)} words, expected {m * len(sl)}")
        if not lasts[-1] or lasts[:-1].any():
            raise ValueError(f"gradient link {q}: 'last' must mark only the final word")
        out[:, sl] = data.astype(np.uint32).reshape(m, len(sl))
    return out
