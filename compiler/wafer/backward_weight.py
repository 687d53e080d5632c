"""The backward-weight phase of a layer (``dW = dZ X^T``; docs/wafer.md): partials in every PE,
summed down each mesh column onto its gradient link, and ``dW`` back from the links' words."""

import numpy as np

from arch.pe_map import Op, VecMode
from arch.wavelet import pack_wavelet, unpack_tagged
from models import pe

from .phase import COLOR_DZ, COLOR_GRAD, WaferCompileError, _check_array, _check_fit, _resident_x, _upper
from .residency import dw_on_lanes
from .streams import fmac_stream
from .writes import _assemble, _sram_loads

__all__ = ["compile_backward_weight", "backward_weight_west_in", "join_gradients"]


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
