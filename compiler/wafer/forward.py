"""The forward phase of a layer (``Z = W X``; docs/wafer.md) and the words it sends out of the
wafer's edges."""

import numpy as np

from arch.wavelet import pack_wavelet
from models import pe

from .phase import FORWARD_T_TASKS, FORWARD_X_T_TASKS, WaferCompileError, _check_fit, _limit
from .residency import _add_next_input, _with_next_input, can_transpose_x
from .writes import _assemble, _sram_loads

__all__ = ["compile_forward", "forward_expected_outputs", "logits_expected_outputs"]


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
