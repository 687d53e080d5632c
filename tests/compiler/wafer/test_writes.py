"""A phase's configuration words (compiler/wafer/writes.py): the packed SRAM loads, replayed on
the PE model, leave each PE's SRAM as plain writes of the same words would; the commits' order;
what may be written after ``go``."""

import numpy as np

from arch.pe_map import STATUS, Op, desc_addr, status_base
from arch.ports import Port
from arch.router_map import ROUTER_ADDR_SPAN, route_addr
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
from arch.wafer_map import ADAPTER, adapter_base
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


def _phases():
    rng = np.random.default_rng(0)
    x16 = rng.integers(0, 1 << 15, (12, 8), dtype=np.uint16)
    return (compile_forward(CFG, m=6, k=12, batch=8, x16=x16),
            compile_forward(CFG, m=6, k=12, batch=8, x16=x16, last=True),
            compile_backward_data(CFG, m=6, k=12, batch=8, x16=x16, dz16=x16[:6]),
            compile_backward_weight(CFG, m=6, k=12, batch=8, x16=x16, dz16=x16[:6]))


def _host_colors(phase):
    w = [v for a, v in phase.writes if a == adapter_base() + ADAPTER["W_COLOR"]]
    return set(w) | {c for c, _ in phase.plan.get("west_in", {}).values()}


def test_commits_take_wavelets_before_any_tile_sends():
    """Across the wafer: the FMACs and STOREs that take what the host sends commit first, then every
    other FMAC/STORE before any VEC, VECs that wait before VECs that start at once; within a rank,
    slot by slot (the commits compiler.multicast merges are adjacent)."""
    for phase in _phases():
        host = _host_colors(phase)
        order = sorted((i, pq, t) for pq, commits in phase.plan["commits"].items() for t, i in commits.items())
        keys = []
        for _, pq, t in order:
            d = phase.plan["pes"][pq]["descs"][t]
            waits = d.get("dep_a_en") or d.get("dep_b_en") or not d.get("enable")
            takes_host = d.get("op") in (Op.FMAC, Op.STORE) and d.get("color", 0) in host
            keys.append((not takes_host, 0 if d.get("op") != Op.VEC else 1 if waits else 2, t))
        assert keys == sorted(keys), phase.name


def test_writes_after_go_configure_only_what_takes_nothing_from_the_host():
    """The late writes are the last ones; before ``go``: every SRAM load, STOP, the routes of the
    host's colors and the descriptors that take them (each FMAC among them), the weight color;
    after: the other routes, the gradient counts and descriptors, none of them taking a host
    color, the VECs among them."""
    bits = mesh_tile_addr_bits(CFG.sram_words, CFG.num_tasks)
    S, T = CFG.sram_words, CFG.num_tasks
    route_color = {route_addr(c, port): c for c in range(CFG.num_colors) for port in Port}
    for phase in _phases():
        g, host = phase.go_after, _host_colors(phase)
        assert 0 < g < len(phase.writes) and phase.late == [False] * g + [True] * (len(phase.writes) - g)
        descs = {"early": [], "late": []}
        for pq, commits in phase.plan["commits"].items():
            for t, i in commits.items():
                descs["late" if i >= g else "early"].append(phase.plan["pes"][pq]["descs"][t])
        assert all(d["op"] in (Op.FMAC, Op.STORE) and d["color"] in host for d in descs["early"]), phase.name
        assert all(d["op"] != Op.FMAC and d.get("color", 0) not in host for d in descs["late"]), phase.name
        assert Op.VEC in {d["op"] for d in descs["late"]}, phase.name
        for addr, _ in phase.writes[g:]:
            if addr >= adapter_base():
                assert addr - adapter_base() >= ADAPTER["G_COUNT"], f"{phase.name}: {addr:#x} after go"
                continue
            local = addr & ((1 << bits) - 1)
            if local < ROUTER_ADDR_SPAN:
                assert route_color[local] not in host, f"{phase.name}: a route of a host color after go"
            else:
                assert S <= local - CORE_BASE < desc_addr(S, T), f"{phase.name}: {addr:#x} after go"
