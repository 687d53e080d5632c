"""A phase's configuration words (compiler/wafer/writes.py): the packed SRAM loads, replayed on
the PE model, leave each PE's SRAM as plain writes of the same words would; the commits' order."""

import numpy as np

from arch.pe_map import STATUS, Op, status_base
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
from compiler.wafer import compile_backward_data, compile_backward_weight, compile_forward
from hdl.config import preset
from models.pe import PeModel

CFG = preset("system", mesh_rows=2, mesh_cols=3)


def test_packed_loads_fill_sram_as_plain_writes_would():
    # K = 7 over 3 columns: column 0 holds 3 x 4 = 12 words (pairs only), columns 1, 2 hold 8.
    # An odd count is covered by lanes = 3 (column 0: 9 words, the last one alone).
    for lanes in (4, 3):
        cfg = CFG.replace(lanes=lanes, sram_banks=4)
        rng = np.random.default_rng(lanes)
        x16 = rng.integers(0, 1 << 16, (7, 2 * lanes), dtype=np.uint16)
        phase = compile_forward(cfg, m=5, k=7, batch=2 * lanes, x16=x16)
        bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
        span = 1 << bits
        pack = status_base(cfg.sram_words, cfg.num_tasks) + STATUS["PACK"]
        for (p, q), info in phase.plan["pes"].items():
            base = tile_address(cfg.mesh_cols, p, q, CORE_BASE, bits)
            mine = [(a - base, v) for a, v in phase.writes if base <= a < base - CORE_BASE + span]
            core = PeModel(lanes=lanes, sram_words=cfg.sram_words, num_tasks=cfg.num_tasks,
                           num_colors=cfg.num_colors)
            for a, v in mine:
                core.cfg_write(a, v)
            want = x16[info["k"].start:info["k"].stop, p * lanes:(p + 1) * lanes].astype(np.uint32) << 16
            n = want.size
            assert core.mem[info["x_base"]:info["x_base"] + n].tolist() == want.ravel().tolist()
            assert core.cfg_read(pack) == 0, "PACK left on"
            assert sum(a < cfg.sram_words for a, _ in mine) == (n + 1) // 2


def test_commits_take_wavelets_before_any_tile_sends():
    """Across the wafer: every FMAC/STORE commits before any VEC, VECs that wait before VECs that
    start at once; within a rank, slot by slot (the commits compiler.multicast merges are adjacent)."""
    rng = np.random.default_rng(0)
    x16 = rng.integers(0, 1 << 15, (12, 8), dtype=np.uint16)
    for phase in (compile_forward(CFG, m=6, k=12, batch=8, x16=x16),
                  compile_backward_data(CFG, m=6, k=12, batch=8, x16=x16, dz16=x16[:6]),
                  compile_backward_weight(CFG, m=6, k=12, batch=8, x16=x16, dz16=x16[:6])):
        order = sorted((i, pq, t) for pq, commits in phase.plan["commits"].items() for t, i in commits.items())
        keys = []
        for _, pq, t in order:
            d = phase.plan["pes"][pq]["descs"][t]
            waits = d.get("dep_a_en") or d.get("dep_b_en") or not d.get("enable")
            keys.append((0 if d.get("op") != Op.VEC else 1 if waits else 2, t))
        assert keys == sorted(keys), phase.name
