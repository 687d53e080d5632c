"""What stays on the wafer between phases (compiler/wafer/residency.py): activation homes, the
phases that read them without loading, the input batch transposed on the wafer and streamed in
by the step before, and the errors of a resident X."""

import numpy as np
import pytest

from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
from arch.wavelet import unpack_wavelet
from compiler.wafer import (
    WaferCompileError,
    activation_homes,
    can_transpose_x,
    compile_backward_data,
    compile_backward_weight,
    compile_forward,
    dw_on_lanes,
    input_stream_columns,
    resident_bases,
)
from hdl.config import preset
from models.pe import PeModel

CFG = preset("system", mesh_rows=2, mesh_cols=3)


def test_activations_stay_where_the_next_phases_read_them():
    """activation_homes stacks each hidden layer's X (and X^T where its backward-weight runs on
    the lanes) down from the top of SRAM; forward l keeps its outputs at layer l + 1's homes, which
    forward, backward-data and backward-weight of layer l + 1 read without loading anything."""
    cfg = CFG.replace(sram_words=4096)
    dims, L, batch = (64, 24, 30, 10), cfg.lanes, 2 * cfg.lanes     # 24: 8 per column, on the lanes
    homes = activation_homes(cfg, dims)
    top = 4096 - 8 * L
    # 64 over 3 is not on the lanes: backward-weight 0 reads X itself, so the next input batch is
    # not streamed over it and the input batch has no home (loaded every step).
    assert homes == {0: (None, None), 1: (top, top - 8 * L),
                     2: (top - 8 * L - 10 * L, None)}                 # max |K_q|: 8, then 10
    assert dw_on_lanes(cfg, 24) and not dw_on_lanes(cfg, 30) and not dw_on_lanes(cfg, 64)
    assert input_stream_columns(cfg, dims) == {}
    # With 72 inputs (24 per column, on the lanes) it is: each column (96 wavelets per row) to the
    # phase with the most room under its run (forward 1 and backward-data 1: 30 x 8 weight words
    # per link; forward 2 and backward-data 2: 10 x 10; ties: the earlier phase).
    assert input_stream_columns(cfg, (72, *dims[1:])) == {("forward", 1): (0, 2), ("backward-data", 1): (1,)}

    def phase(kind, l, fn, **kw):
        return fn(cfg, m=dims[l + 1], k=dims[l], batch=batch, **kw, **resident_bases(cfg, dims, kind, l))
    fwd0 = phase("forward", 0, compile_forward)
    fwd1 = phase("forward", 1, compile_forward)
    bd1 = phase("backward-data", 1, compile_backward_data)
    bw1 = phase("backward-weight", 1, compile_backward_weight)
    bd2 = phase("backward-data", 2, compile_backward_data)
    bw2 = phase("backward-weight", 2, compile_backward_weight)
    assert bw1.plan["dw"] == "lanes" and bw2.plan["dw"] == "dot"
    for pq, info in fwd0.plan["pes"].items():
        # Forward 1 keeps its own X transposed (a PASS that starts at its commit), so forward 0
        # keeps its outputs only as X of layer 1.
        assert (info["xn_base"], info["xn_t_base"]) == (homes[1][0], None)
        assert 4 not in info["descs"] and 5 not in info["descs"]
        xt = fwd1.plan["pes"][pq]["descs"][6]                              # the transposed STORE
        assert (xt["dst_base"], xt["b_stride"]) == (homes[1][1], 8)
        assert "dep_a_en" not in fwd1.plan["pes"][pq]["descs"][7]         # the PASS waits on nothing
        assert fwd1.plan["pes"][pq]["x_base"] == homes[1][0] == fwd1.plan["pes"][pq]["descs"][0]["a_base"]
        assert fwd1.plan["pes"][pq]["xn_base"] == homes[2][0] and 5 not in fwd1.plan["pes"][pq]["descs"]
        assert bd1.plan["pes"][pq]["descs"][1]["a_base"] == homes[1][0]     # MASK reads the kept X
        assert bw1.plan["pes"][pq]["descs"][0]["a_base"] == homes[1][1]     # the FMAC reads X^T
        assert bd2.plan["pes"][pq]["descs"][1]["a_base"] == homes[2][0]
        assert bw2.plan["pes"][pq]["descs"][0]["a_base"] == homes[2][0]     # DOT reads X
        for ph in (fwd0, fwd1, bd1, bw1, bd2, bw2):                          # working sets below
            assert ph.plan["pes"][pq].get("sram", 0) <= homes[2][0]
    assert resident_bases(cfg, (64, 10), "forward", 0) == {"sram_limit": 4096, "x_home": None,
                                                           "keep_home": None, "keep_t_home": None,
                                                           "x_t_home": None}


def test_the_input_batch_is_transposed_on_the_wafer():
    """Where backward-weight of layer 0 runs on the lanes and the forward can transpose X (8 task
    descriptors, 5 colors; any ``|K_q|`` and M: the PASS waits on no FMAC row), forward 0 keeps
    the input batch's X^T, which backward-weight 0 reads: the host loads the input batch once."""
    cfg = preset("system", mesh_rows=2, mesh_cols=2).replace(sram_words=4096)
    dims, L, batch = (64, 32, 10), cfg.lanes, 2 * cfg.lanes
    homes = activation_homes(cfg, dims)
    size = 32 * L                                                     # |K_q| = 32, then 16 vectors of L
    assert homes == {0: (4096 - size, 4096 - 2 * size), 1: (4096 - 2 * size - 16 * L, 4096 - 2 * size - 32 * L)}
    x16 = np.arange(64 * batch, dtype=np.uint16).reshape(64, batch)
    fwd = compile_forward(cfg, m=32, k=64, batch=batch, x16=x16, **resident_bases(cfg, dims, "forward", 0))
    bw = compile_backward_weight(cfg, m=32, k=64, batch=batch, **resident_bases(cfg, dims, "backward-weight", 0))
    for pq, info in fwd.plan["pes"].items():
        assert info["descs"][6]["dst_base"] == homes[0][1] == bw.plan["pes"][pq]["descs"][0]["a_base"]
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    sram = {tile_address(cfg.mesh_cols, p, q, CORE_BASE + a, bits)
            for p, q in bw.plan["pes"] for a in range(cfg.sram_words)}
    assert not [a for a, _ in bw.writes if a in sram]                # no X^T load
    assert sum(a in sram for a, _ in fwd.writes) == 4 * 32 * L // 2  # X, two bf16 per write
    assert can_transpose_x(cfg, m=16, k=64)                           # |K_q| = 32 > M = 16 too
    assert activation_homes(cfg, (64, 16, 10))[0][1] is not None
    assert not can_transpose_x(cfg.replace(num_colors=4), m=32, k=64)
    assert not can_transpose_x(cfg.replace(num_tasks=6), m=32, k=64)
    assert activation_homes(cfg.replace(num_tasks=6), (64, 16, 10))[0][1] is None   # no X^T home
    with pytest.raises(WaferCompileError, match="transposing X on the wafer needs 8 task descriptors"):
        compile_forward(cfg.replace(num_tasks=6), m=16, k=64, batch=batch, x_t_home=3000)


def test_next_input_streams_into_its_home():
    """A phase carrying the next input batch: routes from the west edge to the last of its
    columns, and in each PE of them a STORE that takes every vector passing its RAMP; replayed on
    the PE model (the tile's writes, then the row's wavelets), each keeps X[K_q, B_p] at the home."""
    L, batch, home = CFG.lanes, 2 * CFG.lanes, 1500
    x16 = (np.arange(11 * batch, dtype=np.uint16).reshape(11, batch) + 0x3F00).astype(np.uint16)
    nxt = {"home": home, "k": 11, "columns": range(1, 3)}
    phase = compile_backward_data(CFG, m=8, k=12, batch=batch, next_input=nxt, next_x16=x16)
    color, words = phase.plan["west_in"][0]
    assert words == (4 + 3) * L and color == 1              # 11 over 3: 4, 4, 3; color 1 is free
    bits = mesh_tile_addr_bits(CFG.sram_words, CFG.num_tasks)
    for p in range(CFG.mesh_rows):
        assert (color, "W", ["E"]) in phase.plan["routes"][(p, 0)]
        assert (color, "W", ["RAMP", "E"]) in phase.plan["routes"][(p, 1)]
        assert (color, "W", ["RAMP"]) in phase.plan["routes"][(p, 2)]
        assert len(phase.west_in[p]) == words
        for q, ks in ((1, range(4, 8)), (2, range(8, 11))):
            core = PeModel(lanes=L, sram_words=CFG.sram_words, num_tasks=CFG.num_tasks,
                           num_colors=CFG.num_colors)
            for a, v in phase.writes:
                if a >> bits == p * CFG.mesh_cols + q and a & ((1 << bits) - 1) >= CORE_BASE:
                    core.cfg_write((a & ((1 << bits) - 1)) - CORE_BASE, v)
            for w in phase.west_in[p]:
                data, c, _ = unpack_wavelet(int(w))
                assert c == color
                core.wavelet(c, data, rx2=True)
            want = x16[ks.start:ks.stop, p * L:(p + 1) * L].astype(np.uint32) << 16
            assert core.mem[home:home + want.size].tolist() == want.ravel().tolist(), (p, q)
            assert not core.fault, (p, q, core.fault)
    assert input_stream_columns(CFG, (64, 10)) == {}
    with pytest.raises(WaferCompileError, match="next_x16 given without next_input"):
        compile_backward_data(CFG, m=8, k=12, batch=batch, next_x16=x16)
    with pytest.raises(WaferCompileError, match=r"next X has shape \(10, 8\), expected \(11, 8\)"):
        compile_backward_data(CFG, m=8, k=12, batch=batch, next_input=nxt, next_x16=x16[:10])


@pytest.mark.parametrize("mesh,dims", [((2, 2), (64, 32, 10)), ((2, 3), (64, 24, 10)), ((2, 3), (60, 24, 10)),
                                       ((2, 2), (64, 48, 24, 10)), ((4, 4), (64, 16, 10))])
def test_the_next_input_never_overwrites_an_x_the_step_still_reads(mesh, dims):
    """Where a phase streams the next step's input batch into its home, no later phase of the step
    reads this step's input there: backward-weight of layer 0 reads ``X^T`` (on the lanes), never
    ``X`` at that home (as VEC DOT it would read the next batch: 2 x 3, 64 inputs, found by a
    2 x 3 run of ``make sim``: no stream then, the input batch is loaded every step)."""
    cfg = preset("system", mesh_rows=mesh[0], mesh_cols=mesh[1])
    streams = input_stream_columns(cfg, dims)
    order = [("forward", l) for l in range(len(dims) - 1)] + \
            [(k, l) for l in range(len(dims) - 2, -1, -1) for k in ("backward-data", "backward-weight")
             if k == "backward-weight" or l > 0]
    homes = activation_homes(cfg, dims)
    assert bool(streams) == (homes[0][0] is not None) == dw_on_lanes(cfg, dims[0]), (streams, homes)
    for n, phase in enumerate(order):
        if phase not in streams:
            continue
        home = resident_bases(cfg, dims, *phase)["next_input"]["home"]
        for later in order[n + 1:]:
            if later[1] == 0:
                assert resident_bases(cfg, dims, *later)["x_home"] != home, (phase, later)


def test_resident_x_errors():
    x16 = np.zeros((32, 8), np.uint16)
    with pytest.raises(WaferCompileError, match="X is resident at 100, so there is no X to load"):
        compile_backward_data(CFG, m=8, k=32, batch=8, x16=x16, x_home=100)
    with pytest.raises(WaferCompileError, match="below the resident activations at 64"):
        compile_forward(CFG, m=9, k=32, batch=8, x_home=1000, keep_home=1500, sram_limit=64)
    with pytest.raises(WaferCompileError, match="transposed needs a hidden layer and 6 task descriptors"):
        compile_forward(CFG, m=9, k=32, batch=8, keep_home=1000, keep_t_home=1500, last=True)
    with pytest.raises(WaferCompileError, match=r"6 task descriptors per PE \(num_tasks=4\)"):
        compile_forward(CFG.replace(num_tasks=4), m=9, k=32, batch=8, keep_home=1000, keep_t_home=1500)
