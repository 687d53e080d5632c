"""compiler/multicast.py: a phase written through TILE_MASK leaves every tile configured as the
plain writes would, before ``go`` and at the end, with fewer writes, commits in their order and
TILE_MASK 0 at the end."""

import numpy as np

from arch.pe_map import desc_addr
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits
from arch.wafer_map import ADAPTER, adapter_base, delivered_writes
from compiler.config_state import ConfigState
from compiler.multicast import multicast
from compiler.wafer import compile_backward_data, compile_backward_weight, compile_forward, resident_bases
from hdl.config import preset

CFG = preset("system", mesh_rows=2, mesh_cols=2).replace(sram_words=4096)
DIMS, B = (64, 32, 10), 8
MASK = adapter_base() + ADAPTER["TILE_MASK"]
BITS = mesh_tile_addr_bits(CFG.sram_words, CFG.num_tasks)
LOCAL = (1 << BITS) - 1
COMMITS = {CORE_BASE + desc_addr(CFG.sram_words, t) for t in range(CFG.num_tasks)}


def _step(rng):
    """The five phases of a training step of DIMS (resident activations, next input streamed)."""
    def bf16(*shape):
        return rng.integers(0, 1 << 15, shape, dtype=np.uint16)
    dz, nx = bf16(10, B), bf16(64, B)
    return [compile_forward(CFG, m=32, k=64, batch=B, **resident_bases(CFG, DIMS, "forward", 0)),
            compile_forward(CFG, m=10, k=32, batch=B, last=True, next_x16=nx,
                            **resident_bases(CFG, DIMS, "forward", 1)),
            compile_backward_data(CFG, m=10, k=32, batch=B, dz16=dz, next_x16=nx,
                                  **resident_bases(CFG, DIMS, "backward-data", 1)),
            compile_backward_weight(CFG, m=10, k=32, batch=B, dz16=dz,
                                    **resident_bases(CFG, DIMS, "backward-weight", 1)),
            compile_backward_weight(CFG, m=32, k=64, batch=B, dz16=bf16(32, B),
                                    **resident_bases(CFG, DIMS, "backward-weight", 0))]


def _delivered(writes):
    return [w for w in delivered_writes(writes, tiles=4, tile_addr_bits=BITS) if w[0] != MASK]


def _delivered_at(writes, i, tile):
    """What write ``i`` of ``writes`` does in ``tile`` (None: nothing)."""
    before = len(delivered_writes(writes[:i], tiles=4, tile_addr_bits=BITS))
    delivered = [w for w in delivered_writes(writes[:i + 1], tiles=4, tile_addr_bits=BITS)[before:]
                 if w[0] >> BITS == tile]
    return delivered[-1] if delivered else None


def test_multicast_configures_the_tiles_as_the_plain_writes():
    rng = np.random.default_rng(3)
    state = ConfigState()
    saved = []
    for _ in range(2):
        for phase in _step(rng):
            plain = state.program(phase)
            mc = multicast(CFG, plain)
            assert dict(_delivered(mc.writes)) == dict(_delivered(plain.writes))
            # Each part on its own: what is written before ``go`` is what the plain writes set then.
            assert mc.late == [False] * mc.go_after + [True] * (len(mc.writes) - mc.go_after)
            assert dict(_delivered(mc.writes[:mc.go_after])) == dict(_delivered(plain.writes[:plain.go_after]))
            assert [v for a, v in mc.writes if a == MASK][-1:] in ([], [0]), "TILE_MASK left set"
            # Commits: the same writes reach each tile, in the same order.
            for pq, commits in mc.plan["commits"].items():
                tile = pq[0] * CFG.mesh_cols + pq[1]
                assert {t: _delivered_at(mc.writes, i, tile) for t, i in commits.items()} == \
                       {t: plain.writes[i] for t, i in plain.plan["commits"][pq].items()}
                assert sorted(commits, key=commits.get) == sorted(plain.plan["commits"][pq],
                                                                  key=plain.plan["commits"][pq].get)
            # At every commit, whatever the plain writes had set by then is set alike (another
            # tile's commit of the same word may be the same write).
            for pq, commits in mc.plan["commits"].items():
                for t, i in commits.items():
                    then = {a: v for a, v in _delivered(plain.writes[:plain.plan["commits"][pq][t]])
                            if (a & LOCAL) not in COMMITS}
                    now = dict(_delivered(mc.writes[:i]))
                    assert all(now.get(a) == v for a, v in then.items()), (pq, t)
            saved.append(len(plain.writes) - len(mc.writes))
    assert min(saved) > 0, saved
    assert sum(saved[5:]) > 100, saved          # the steady step: registers alike in every PE, dZ per row


def test_nothing_shared_is_left_alone():
    one = preset("system", mesh_rows=1, mesh_cols=1)
    phase = compile_forward(one, m=4, k=4, batch=4, x16=np.ones((4, 4), np.uint16) << 7)
    assert multicast(one, phase).writes == phase.writes
