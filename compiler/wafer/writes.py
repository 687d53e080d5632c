"""The configuration words of a phase from its plan (``models.pe`` descriptors and routes, SRAM
loads, adapter registers): routes and ``RAMP2`` first, then SRAM, then descriptors (every PE
stopped, then each committed in a safe order), then adapters (:func:`_assemble`)."""

import numpy as np

from arch.pe_map import STATUS, Op, desc_addr, descriptor_writes, encode, pack_pair, status_base
from arch.ports import Port
from arch.router_map import ADDR_RAMP2, route_addr, route_mask
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
from arch.wafer_map import ADAPTER, adapter_base
from models import pe

from .phase import WaferCompileError, WaferPhase, _check_array, _check_sram, _upper

__all__ = []


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


def _commit_rank(d):
    """A descriptor's place in the commit order of a phase for PEs that may hold a previous
    phase's descriptors (whose ``done`` counters are stale): FMAC/STORE first (committing resets
    their counters; they take the wavelets), then VECs that wait on them (and disabled ones), then
    VECs without dependencies (they start at once)."""
    if d.get("op") != Op.VEC:
        return 0
    return 1 if (d.get("dep_a_en") or d.get("dep_b_en") or not d.get("enable")) else 2


def _desc_writes(cfg, plan, bits):
    """First stop every descriptor of every PE (a write to its ``STOP`` register), then commit the
    phase's descriptors of every PE rank by rank (:func:`_commit_rank`), each rank slot by slot,
    each slot tile by tile (north-west first): no descriptor that takes wavelets commits after one
    that sends them, and the commits of one slot in several tiles are adjacent
    (``compiler.multicast`` writes equal ones once). Returns ``(writes, settable)``: the words
    other than a descriptor's committing word 0 are settable."""
    out, settable = [], []
    S, T, Q = cfg.sram_words, cfg.num_tasks, cfg.mesh_cols
    stop = status_base(S, T) + STATUS["STOP"]
    pes = plan["pes"]
    for (p, q) in sorted(pes):
        out.append((tile_address(Q, p, q, CORE_BASE + stop, bits), 0))
        settable.append(False)
    order = sorted((_commit_rank(d), t, pq) for pq, info in pes.items() for t, d in info["descs"].items())
    for _, t, (p, q) in order:
        base = tile_address(Q, p, q, CORE_BASE + desc_addr(S, t), bits)
        words = descriptor_writes(base, encode(**pes[(p, q)]["descs"][t]))
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
    routes, loads = _route_writes(cfg, plan, bits), _sram_writes(cfg, loads, bits)
    descs, desc_settable = _desc_writes(cfg, plan, bits)
    base = adapter_base()
    adapter = [(base + ADAPTER[reg] + i, int(v)) for reg, vals in adapters for i, v in enumerate(vals)]
    writes = routes + loads + descs + adapter
    settable = [True] * len(routes) + [False] * len(loads) + desc_settable + [False] * len(adapter)
    plan["commits"] = _commit_indices(cfg, plan, writes, bits)
    return WaferPhase(name, writes, plan, out_edge, link_words, settable=settable)
