"""The configuration words of a phase from its plan (``models.pe`` descriptors and routes, SRAM
loads, adapter registers), in two parts (:func:`_assemble`). Before ``go``: the routes of the
colors the host sends and ``RAMP2``, SRAM, the descriptors that take what the host sends (every PE
stopped first, then each committed in a safe order) and the weight link's color. After ``go``,
while the phase runs (*late*): the other routes, the gradient links' counts, then the other
descriptors: nothing sends on their colors before they are written."""

import numpy as np

from arch.pe_map import STATUS, Op, desc_addr, descriptor_writes, encode, pack_pair, status_base
from arch.ports import Port
from arch.router_map import ADDR_RAMP2, route_addr, route_mask
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
from arch.wafer_map import ADAPTER, adapter_base
from models import pe

from .phase import WaferCompileError, WaferPhase, _check_array, _check_sram, _upper

__all__ = []


def _route_writes(cfg, plan, bits, host_colors):
    """``(early, late)``: each tile's routes of ``host_colors``, then its RAMP2 register (written
    even when 0: a PE may hold the previous phase's); the routes of the other colors."""
    early, late = [], []
    for (p, q), routes in sorted(plan["routes"].items()):
        for color, inp, outs in routes:
            (early if color in host_colors else late).append(
                (tile_address(cfg.mesh_cols, p, q, route_addr(color, Port[inp]), bits), route_mask(outs)))
    for (p, q), mask in sorted(plan["ramp2"].items()):
        early.append((tile_address(cfg.mesh_cols, p, q, ADDR_RAMP2, bits), mask))
    return early, late


def _commit_rank(d):
    """A descriptor's place in the commit order of a phase for PEs that may hold a previous
    phase's descriptors (whose ``done`` counters are stale): FMAC/STORE first (committing resets
    their counters; they take the wavelets), then VECs that wait on them (and disabled ones), then
    VECs without dependencies (they start at once)."""
    if d.get("op") != Op.VEC:
        return 0
    return 1 if (d.get("dep_a_en") or d.get("dep_b_en") or not d.get("enable")) else 2


def _takes_host_words(d, host_colors):
    """Whether descriptor ``d`` takes wavelets the host sends (an FMAC or a STORE on one of
    ``host_colors``): it must be committed before ``go``."""
    return d.get("op") in (Op.FMAC, Op.STORE) and d.get("color", 0) in host_colors


def _desc_writes(cfg, plan, bits, host_colors):
    """First stop every descriptor of every PE (a write to its ``STOP`` register), then commit the
    phase's descriptors of every PE rank by rank (:func:`_commit_rank`), each rank slot by slot,
    each slot tile by tile (north-west first): no descriptor that takes wavelets commits after one
    that sends them, and the commits of one slot in several tiles are adjacent
    (``compiler.multicast`` writes equal ones once). The descriptors that take what the host sends
    (on ``host_colors``, :func:`_takes_host_words`) come first; the others are *late*: they take
    only what descriptors committed before them send, so they may be written after ``go``.
    Returns ``(writes, settable, late)``: the words other than a descriptor's committing word 0
    are settable."""
    out, settable, late = [], [], []
    S, T, Q = cfg.sram_words, cfg.num_tasks, cfg.mesh_cols
    stop = status_base(S, T) + STATUS["STOP"]
    pes = plan["pes"]
    for (p, q) in sorted(pes):
        out.append((tile_address(Q, p, q, CORE_BASE + stop, bits), 0))
        settable.append(False)
    late += [False] * len(out)
    order = sorted((not _takes_host_words(d, host_colors), _commit_rank(d), t, pq)
                   for pq, info in pes.items() for t, d in info["descs"].items())
    for is_late, _, t, (p, q) in order:
        base = tile_address(Q, p, q, CORE_BASE + desc_addr(S, t), bits)
        words = descriptor_writes(base, encode(**pes[(p, q)]["descs"][t]))
        out += words
        settable += [addr != base for addr, _ in words]
        late += [is_late] * len(words)
    return out, settable, late


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


def _assemble(cfg, name, plan, loads, adapters, out_edge, link_words, sram_needed, sram_limit=None):
    _check_sram(cfg, name, sram_needed, sram_limit)
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    plan["ramp2"] = {pq: pe.ramp2_colors(info["descs"]) for pq, info in plan["pes"].items()}
    host_colors = {c for reg, vals in adapters if reg == "W_COLOR" for c in vals}
    host_colors |= {c for c, _ in plan.get("west_in", {}).values()}
    routes, late_routes = _route_writes(cfg, plan, bits, host_colors)
    loads = _sram_writes(cfg, loads, bits)
    descs, desc_settable, late = _desc_writes(cfg, plan, bits, host_colors)
    early = late.index(True) if True in late else len(late)
    base = adapter_base()
    adapter, late_adapter = [], []      # a gradient link's count is read when its words come
    for reg, vals in adapters:
        (late_adapter if reg == "G_COUNT" else adapter).extend(
            (base + ADAPTER[reg] + i, int(v)) for i, v in enumerate(vals))
    writes = routes + loads + descs[:early] + adapter + late_routes + late_adapter + descs[early:]
    settable = ([True] * len(routes) + [False] * len(loads) + desc_settable[:early] + [False] * len(adapter)
                + [True] * len(late_routes) + [False] * len(late_adapter) + desc_settable[early:])
    go_after = len(routes) + len(loads) + early + len(adapter)
    late = [False] * go_after + [True] * (len(writes) - go_after)
    plan["commits"] = _commit_indices(cfg, plan, writes, bits)
    return WaferPhase(name, writes, plan, out_edge, link_words, settable=settable, late=late)
