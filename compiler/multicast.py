"""Multicast configuration (docs/wafer.md#multicast-configuration): a register that several
tiles of a phase set to the same value is written once, under the wafer's ``TILE_MASK``
(:mod:`arch.wafer_map`)."""

import dataclasses
from collections import defaultdict

from arch.pe_map import STATUS, desc_addr, status_base
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits
from arch.wafer_map import ADAPTER, adapter_base

__all__ = ["multicast"]


def multicast(cfg, phase):
    """``phase`` (:class:`compiler.wafer.WaferPhase`, after
    :meth:`compiler.config_state.ConfigState.program`) with every register write that two or more
    tiles (of tiles 0..31) make with the same local address and value (routes, ``RAMP2``, descriptor
    words other than the committing word 0, ``STOP``) written once, after the registers of single
    tiles at the start of its part of the phase (the writes before ``go``, the late ones after:
    ``WaferPhase.late``, each part on its own): per distinct set of tiles a ``TILE_MASK`` write and
    then its writes, then ``TILE_MASK = 0``; the other writes follow in their order,
    ``plan["commits"]`` renumbered. SRAM loads that several tiles receive alike (``dZ`` in every PE
    of a row) are written once too, under a ``TILE_MASK`` where the first of them was, and so are
    the commits of one slot that several tiles make with the same word 0, where the last of them
    was. A set of tiles is used only where it saves writes. Moving the register writes forward keeps
    every effect: they only set registers (a descriptor write stops the descriptor), the phase's
    descriptors start at their commits, which keep each tile's order, and the wafer is idle when a
    phase's configuration starts (a late part's registers are its own descriptors', stopped until
    their commits). The part before ``go`` leaves ``TILE_MASK`` set; the late part clears it where
    it needs it clear."""
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    mask_addr = adapter_base() + ADAPTER["TILE_MASK"]
    n = len(phase.writes)
    split = phase.go_after
    if any(phase.late[:split]) or not all(phase.late[split:]):
        raise ValueError(f"{phase.name}: the late writes must be the last ones")
    early, late = _part(cfg, phase, range(split), bits), _part(cfg, phase, range(split, n), bits)
    if early and late and early[-1][0] == (mask_addr, 0):
        early.pop()                     # cleared after ``go``, where the late part needs it
        if late[0][0][0] != mask_addr:
            late.insert(0, ((mask_addr, 0), False, None))
    out = early + late
    moved = {j: n for n, (_, _, i) in enumerate(out) if i is not None for j in (i if isinstance(i, tuple) else (i,))}
    plan = dict(phase.plan)
    plan["commits"] = {pq: {t: moved[i] for t, i in c.items()} for pq, c in phase.plan["commits"].items()}
    return dataclasses.replace(phase, writes=[w for w, _, _ in out], settable=[s for _, s, _ in out],
                               late=[False] * len(early) + [True] * len(late), plan=plan)


def _part(cfg, phase, indices, bits):
    """The writes ``indices`` of ``phase`` with shared ones written once (:func:`multicast`), as
    ``(write, settable, index in phase.writes or None)``."""
    tiles = min(cfg.mesh_rows * cfg.mesh_cols, 32)
    base, local_mask = adapter_base(), (1 << bits) - 1
    status = CORE_BASE + status_base(cfg.sram_words, cfg.num_tasks)
    stop, pack = status + STATUS["STOP"], status + STATUS["PACK"]
    sram = range(CORE_BASE, CORE_BASE + cfg.sram_words)
    sites = defaultdict(list)           # (local, value) -> [(index, tile)]
    per_register = defaultdict(int)     # (tile, local) -> candidate writes
    for i in indices:
        (addr, value), settable = phase.writes[i], phase.settable[i]
        tile, local = addr >> bits, addr & local_mask
        if addr < base and tile < tiles and (settable or local == stop):
            sites[(local, value)].append((i, tile))
            per_register[(tile, local)] += 1
    groups = defaultdict(list)          # mask -> [the writes of each shared value]
    for (local, _), found in sites.items():
        if len(found) > 1 and all(per_register[(t, local)] == 1 for _, t in found):
            groups[sum(1 << t for _, t in found)].append([i for i, _ in found])
    # A set of tiles costs its TILE_MASK write; the closing TILE_MASK = 0 one more.
    groups = {mask: shared for mask, shared in groups.items()
              if sum(len(w) - 1 for w in shared) > 1}
    if sum(len(w) - 1 for shared in groups.values() for w in shared) <= len(groups) + 1:
        groups = {}
    merged = {i for shared in groups.values() for w in shared for i in w}
    mask_addr = base + ADAPTER["TILE_MASK"]
    shared = []
    for mask in sorted(groups, key=lambda m: min(w[0] for w in groups[m])):
        shared.append(((mask_addr, mask), False, None))
        shared += [(phase.writes[w[0]], False, None) for w in sorted(groups[mask])]
    if groups:
        shared.append(((mask_addr, 0), False, None))
    # (write, settable, index in phase.writes or None): the shared writes after the leading
    # register writes of single tiles, so that the commits that follow may keep their mask.
    out = [(phase.writes[i], phase.settable[i], i) for i in indices if i not in merged]
    lead = next((n for n, (_, settable, _) in enumerate(out) if not settable), len(out))
    out[lead:lead] = shared
    out = _shared_loads(out, bits, tiles, mask_addr, lambda local: local in sram or local == pack)
    commit = {CORE_BASE + desc_addr(cfg.sram_words, t) for t in range(cfg.num_tasks)}
    return _shared_commits(out, bits, tiles, mask_addr, base, lambda local: local in commit)


def _shared_loads(out, bits, tiles, mask_addr, is_load):
    """``out`` with the SRAM loads that several tiles receive alike (runs of consecutive load
    writes of one tile, ``PACK`` included, equal in local addresses and values) written once under
    a ``TILE_MASK``, where the first of them was."""
    local_mask = (1 << bits) - 1
    runs, n = [], 0                     # (start, end, tile)
    while n < len(out):
        (addr, _), _, _ = out[n]
        tile = addr >> bits
        end = n
        while (end < len(out) and out[end][0][0] >> bits == tile and tile < tiles
               and is_load(out[end][0][0] & local_mask)):
            end += 1
        if end > n:
            runs.append((n, end, tile))
        n = max(end, n + 1)
    alike = defaultdict(list)
    for start, end, tile in runs:
        alike[tuple((a & local_mask, v) for (a, v), _, _ in out[start:end])].append((start, end, tile))
    replace, drop = {}, set()
    for body, found in alike.items():
        tiles_of = {t for _, _, t in found}
        if len(tiles_of) < 2 or len(tiles_of) != len(found) or (len(found) - 1) * len(body) <= 2:
            continue
        start, end, _ = found[0]
        mask = sum(1 << t for t in tiles_of)
        replace[start] = [((mask_addr, mask), False, None)] + out[start:end] + [((mask_addr, 0), False, None)]
        drop |= {i for s, e, _ in found for i in range(s, e)}
    if not replace:
        return out
    result = []
    for n, item in enumerate(out):
        result += replace.get(n, [])
        if n not in drop:
            result.append(item)
    return result


def _shared_commits(out, bits, tiles, mask_addr, base, is_commit):
    """``out`` with the commits of one descriptor slot that several tiles make with the same word
    (adjacent: the compiler commits slot by slot, tile by tile, ``compiler.wafer.writes``)
    written once under a ``TILE_MASK``, where the last of them was; every ``TILE_MASK`` write
    placed again where the mask the writes need changes, ``TILE_MASK = 0`` at the end. Merged
    commits carry the tuple of their indices. Used only where it saves writes."""
    local_mask = (1 << bits) - 1
    items, mask = [], 0                 # (write, settable, index, mask it needs: None for adapters)
    for write, settable, i in out:
        if write[0] == mask_addr:
            mask = write[1]
        else:
            items.append((write, settable, i, None if write[0] >= base else mask))

    def alone(item):                    # a commit of a tile of the mask range, written alone
        (addr, _), _, _, need = item
        return need == 0 and addr >> bits < tiles and is_commit(addr & local_mask)

    merged, n = [], 0
    while n < len(items):
        if not alone(items[n]):
            merged.append(items[n])
            n += 1
            continue
        local = items[n][0][0] & local_mask
        end = n + 1                     # past the run's last commit of this slot
        for j in range(n + 1, len(items)):
            if alone(items[j]) and items[j][0][0] & local_mask == local:
                end = j + 1
            elif items[j][3] != 0 or is_commit(items[j][0][0] & local_mask):
                break
        run, n = items[n:end], end
        commits, others, committed = defaultdict(list), [], set()
        for item in run:
            tile = item[0][0] >> bits
            if alone(item):
                commits[item[0][1]].append(item)
                committed.add(tile)
            elif tile in committed:     # a tile written after its commit: keep the run's order
                merged += run
                break
            else:
                others.append(item)
        else:
            merged += others
            merged += [same[0] if len(same) == 1 else
                       (same[0][0], False, tuple(item[2] for item in same),
                        sum(1 << (item[0][0] >> bits) for item in same))
                       for same in commits.values()]
    return min(_with_masks(items, mask_addr), _with_masks(merged, mask_addr), key=len)


def _with_masks(items, mask_addr):
    """``items`` as ``(write, settable, index)`` with a ``TILE_MASK`` write wherever the mask they
    need changes, and ``TILE_MASK = 0`` at the end."""
    out, mask = [], 0
    for write, settable, i, need in items:
        if need is not None and need != mask:
            out.append(((mask_addr, need), False, None))
            mask = need
        out.append((write, settable, i))
    if mask:
        out.append(((mask_addr, 0), False, None))
    return out
