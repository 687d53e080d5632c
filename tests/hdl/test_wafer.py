"""The RTL wafer (hdl/wafer.py) running phases compiled by compiler/wafer/: weights enter
on one SwarmX TaggedWord link per mesh column (bf16 in the low half, compiler.wafer.weight_streams),
the kernels run on P x Q PE tiles, results leave at the host edges and gradients on one link per
column. Bit-exact against models.pipeline.kernels. Bench: sim/benches/tile.py (generic stream
bench)."""

import json

import numpy as np
import pytest

from arch.pe_map import STATUS, status_base
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
from arch.wafer_map import ADAPTER, adapter_base
from arch.wavelet import pack_tagged, unpack_tagged
from compiler.wafer import (
    WaferCompileError,
    compile_backward_data,
    compile_backward_weight,
    compile_forward,
    dx_edge_words,
    forward_expected_outputs,
    join_gradients,
    logits_expected_outputs,
    split_dx,
    weight_streams,
)
from hdl.config import ConfigError, preset
from hdl.wafer import Wafer
from models.numerics import bf16_bits
from models.pipeline import kernels
from sim.kit.runner import compare_simulators, config_verilog, run_bench


def no_gradients(cfg):
    """Bench outputs for phases without gradients: every gradient link watched (ready driven)
    and must stay silent."""
    return {f"grads__{q}": 0 for q in range(cfg.mesh_cols)}


def link_inputs(cfg, w16, *, transposed=False):
    """The bench inputs of the weight links: ``{"weights__q": [tagged words]}``."""
    return {f"weights__{q}": [int(w) for w in words]
            for q, words in enumerate(weight_streams(cfg, w16, transposed=transposed))}


# The RTL tests share two wafers (a Verilator build and a Verilog conversion each, a minute or two
# cold): SYSTEM_3X2 (the combinational lanes of `make sim --preset system`) and HW_2X3 (the pipelined
# lanes of `make sim`); each group runs on one pytest-xdist worker (make test: --dist loadgroup), so
# no worker waits on another's build of the same wafer.
SYSTEM_3X2 = pytest.mark.xdist_group("wafer-system-3x2")
HW_2X3 = pytest.mark.xdist_group("wafer-hardware-2x3")


# (1 x 2: the system bench's layers cover one-row chains.)
# "hardware": the pipelined lanes (rows in groups of acc_rows = 5: 13 = 5 + 8).
@pytest.mark.slow
@pytest.mark.parametrize("pre,rows,cols,m,k,gap,stall", [
    pytest.param("system", 3, 2, 10, 13, 0.0, 0.0, marks=SYSTEM_3X2),
    pytest.param("hardware", 2, 3, 13, 13, 0.2, 0.3, marks=HW_2X3)])
def test_wafer_forward(pre, rows, cols, m, k, gap, stall):
    cfg = preset(pre, mesh_rows=rows, mesh_cols=cols)
    rng = np.random.default_rng(rows * 10 + cols)
    batch = rows * cfg.lanes
    w16 = bf16_bits((rng.standard_normal((m, k)) * 0.5).astype(np.float32))
    x16 = bf16_bits((rng.standard_normal((k, batch)) * 2).astype(np.float32))
    # Exact zeros and a tie to exercise ReLU and rounding.
    x16[0, 0] = 0
    a16 = kernels.relu_bf16(kernels.forward(w16, x16, (rows, cols)))
    phase = compile_forward(cfg, m=m, k=k, batch=batch, x16=x16)
    expect = forward_expected_outputs(cfg, a16)
    side = phase.out_edge
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    stat = status_base(cfg.sram_words, cfg.num_tasks)
    reads, want = [], []
    for (p, q), info in sorted(phase.plan["pes"].items()):
        own = info["own"]
        kept = a16[own.start:own.stop, p * cfg.lanes:(p + 1) * cfg.lanes].astype(np.uint32) << 16
        for i, word in enumerate(kept.ravel()):
            reads.append(tile_address(cfg.mesh_cols, p, q, CORE_BASE + info["xn_base"] + i, bits))
            want.append(int(word))
        for reg, value in (("FAULT", 0), ("ACTIVE", 0), ("FMAC_CYCLES", m * len(info["k"]))):
            reads.append(tile_address(cfg.mesh_cols, p, q, CORE_BASE + stat + STATUS[reg], bits))
            want.append(value)
    reads.append(adapter_base() + ADAPTER["W_TAKEN"])
    want.append(m * k)
    params = {"writes": [list(w) for w in phase.writes],
              "inputs": link_inputs(cfg, w16),
              "outputs": {**{f"{side}_out__{p}": len(v) for p, v in expect.items()},
                          **no_gradients(cfg)},
              "accept": [], "num_colors": cfg.num_colors, "reads": reads,
              "gap_prob": gap, "stall_prob": stall}
    test_dir = run_bench(config_verilog("wafer", cfg, Wafer), "wafer", "sim.benches.tile", params=params)
    result = json.loads((test_dir / "result.json").read_text())
    assert all(not result["outputs"][name] for name in no_gradients(cfg)), "gradient words in forward"
    for p, words in expect.items():
        got = result["outputs"][f"{side}_out__{p}"]
        assert len(got) == len(words), f"row {p}: {len(got)} words out, expected {len(words)}"
        bad = [i for i in range(len(words)) if got[i] != words[i]]
        assert not bad, (f"row {p}: {len(bad)} words differ, first at {bad[0]}: "
                         f"RTL {got[bad[0]]:#012x}, kernels {words[bad[0]]:#012x}")
    got = result["reads"]
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    assert not bad, (f"{len(bad)} read-backs differ, first at {reads[bad[0]]:#06x}: "
                     f"RTL {got[bad[0]]:#x}, expected {want[bad[0]]:#x}")


def dx_edges(cfg, k):
    """Backward-data's ``dZ_prev`` words per west and east edge output of each row (none: left out)."""
    west, east = dx_edge_words(cfg, k)
    return {f"{side}_out__{p}": n for p in range(cfg.mesh_rows)
            for side, n in (("west", west), ("east", east)) if n}


def dx_words(cfg, result, p):
    """What row ``p`` sent out of its west and east edges."""
    return np.concatenate([result["outputs"].get(f"{side}_out__{p}", []) for side in ("west", "east")])


def run_phase(cfg, phase, weights, outputs, reads, gap=0.0, stall=0.0):
    """Run a compiled phase on the RTL wafer; ``outputs`` ``{prefix: expected words}``,
    ``reads`` ``[(addr, expected)]``, each read twice (a read must not change what it reads).
    Checks every word and read-back; returns the result."""
    reads = reads * 2
    inputs = {f"weights__{q}": [] for q in range(cfg.mesh_cols)}     # idle links: valid low
    inputs.update(weights)
    inputs.update({f"west_in__{p}": [int(w) for w in words] for p, words in phase.west_in.items()})
    params = {"writes": [list(w) for w in phase.writes],
              "inputs": inputs,
              "outputs": {n: v if isinstance(v, int) else len(v) for n, v in outputs.items()},
              "accept": [], "num_colors": cfg.num_colors, "reads": [a for a, _ in reads],
              "gap_prob": gap, "stall_prob": stall}
    test_dir = run_bench(config_verilog("wafer", cfg, Wafer), "wafer", "sim.benches.tile", params=params)
    result = json.loads((test_dir / "result.json").read_text())
    for n, words in outputs.items():
        got = result["outputs"][n]
        if isinstance(words, int):          # only counted here, checked by the caller
            assert len(got) == words, f"{n}: {len(got)} words out, expected {words}"
            continue
        assert len(got) == len(words), f"{n}: {len(got)} words out, expected {len(words)}"
        bad = [i for i in range(len(words)) if got[i] != words[i]]
        assert not bad, (f"{n}: {len(bad)} words differ, first at {bad[0]}: "
                         f"RTL {got[bad[0]]:#012x}, kernels {words[bad[0]]:#012x}")
    got = result["reads"]
    bad = [i for i, (_, v) in enumerate(reads) if got[i] != v]
    assert not bad, (f"{len(bad)} read-backs differ, first at {reads[bad[0]][0]:#06x}: "
                     f"RTL {got[bad[0]]:#x}, expected {reads[bad[0]][1]:#x}")
    return result


def status_reads(cfg, phase, **expected):
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    stat = status_base(cfg.sram_words, cfg.num_tasks)
    return [(tile_address(cfg.mesh_cols, p, q, CORE_BASE + stat + STATUS[reg], bits), value)
            for (p, q) in sorted(phase.plan["pes"]) for reg, value in expected.items()]


def random_layer(rng, m, k, batch):
    w16 = bf16_bits((rng.standard_normal((m, k)) * 0.5).astype(np.float32))
    x16 = bf16_bits(np.maximum(rng.standard_normal((k, batch)), -0.2).astype(np.float32))
    x16[0, :2] = [0x0000, 0x8000]        # +0 and -0 activations: the ReLU mask blocks both
    dz16 = bf16_bits((rng.standard_normal((m, batch)) * 0.1).astype(np.float32))
    return w16, x16, dz16


@pytest.mark.slow
@HW_2X3
def test_wafer_forward_last_layer():
    """Last layer: fp32 logits (no ReLU, no rounding) leave at the east edge of every row."""
    cfg = preset("hardware", mesh_cols=3)
    m, k, batch = 10, 13, 2 * cfg.lanes
    w16, x16, _ = random_layer(np.random.default_rng(5), m, k, batch)
    phase = compile_forward(cfg, m=m, k=k, batch=batch, x16=x16, last=True)
    assert phase.out_edge == "east"
    z = kernels.forward(w16, x16, (cfg.mesh_rows, cfg.mesh_cols))
    assert (z < 0).any(), "the test needs negative logits (they must not be ReLU'd)"
    outputs = {f"east_out__{p}": v for p, v in logits_expected_outputs(cfg, z).items()}
    outputs.update(no_gradients(cfg))
    run_phase(cfg, phase, link_inputs(cfg, w16), outputs,
              status_reads(cfg, phase, FAULT=0, ACTIVE=0), gap=0.2, stall=0.3)


@pytest.mark.slow
@pytest.mark.parametrize("pre,rows,cols,m,k,dw", [
    pytest.param("system", 3, 2, 4, 7, "dot", marks=SYSTEM_3X2),
    pytest.param("system", 3, 2, 5, 16, "lanes", marks=SYSTEM_3X2),
    pytest.param("hardware", 2, 3, 7, 24, "lanes", marks=HW_2X3)])
def test_wafer_backward_weight(pre, rows, cols, m, k, dw):
    """dW = dZ X^T: partials per PE (FMAC broadcasts of dZ on the lanes when every column holds a
    multiple of L features, else VEC DOT), column chain south to north, rows of dW out of the
    gradient links as SwarmX TaggedWords (link q: rows of dW[:, K_q], last on its final word),
    = kernels.backward_weight; at the hardware preset on pipelined lanes (14 rows: 5 + 9)."""
    cfg = preset(pre, mesh_rows=rows, mesh_cols=cols)
    batch = rows * cfg.lanes
    _, x16, dz16 = random_layer(np.random.default_rng(rows * 7 + k), m, k, batch)
    phase = compile_backward_weight(cfg, m=m, k=k, batch=batch, x16=x16, dz16=dz16)
    assert phase.plan["dw"] == dw
    dw = kernels.backward_weight(dz16, x16, (rows, cols)).view(np.uint32)
    links = {}
    for q, sl in enumerate(phase.plan["k_slices"]):
        part = dw[:, sl].ravel()
        links[f"grads__{q}"] = [pack_tagged(int(v), i == len(part) - 1) for i, v in enumerate(part)]
    assert [len(v) for v in links.values()] == phase.link_words
    # join_gradients is the inverse of that split.
    joined = join_gradients(cfg, [np.array(v, dtype=np.uint64) for v in links.values()], m=m, k=k)
    assert np.array_equal(joined, dw)
    reads = status_reads(cfg, phase, FAULT=0, ACTIVE=0)
    reads.append((adapter_base() + ADAPTER["G_SENT"], m * k))
    run_phase(cfg, phase, {}, links, reads, stall=0.3)


def test_backward_weight_on_the_lanes_plan():
    """Each commit index is the write of the descriptor's word 0 with an operation in it; the
    host's west-edge stream of row p is every dZ[m, B_p] vector C = |K_q| / L times."""
    from arch.pe_map import desc_addr
    from arch.wavelet import unpack_wavelet
    from compiler.wafer import COLOR_DZ
    cfg = preset("system", mesh_rows=2, mesh_cols=2)
    dz16 = np.arange(4 * 8, dtype=np.uint16).reshape(4, 8)
    phase = compile_backward_weight(cfg, m=4, k=16, batch=8, dz16=dz16)
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    commits = phase.plan["commits"]
    for p in range(2):
        data, colors, _ = unpack_wavelet(np.asarray(phase.west_in[p], dtype=np.uint64))
        assert (colors == COLOR_DZ).all()
        want = [int(dz16[m, 4 * p + b]) << 16 for m in range(4) for _ in range(2) for b in range(4)]
        assert data.tolist() == want
        assert phase.plan["west_in"][p] == (COLOR_DZ, len(want))
    for (p, q), ts in commits.items():
        for t, i in ts.items():
            addr, word = phase.writes[i]
            assert addr == tile_address(cfg.mesh_cols, p, q, CORE_BASE + desc_addr(cfg.sram_words, t), bits)
            assert word & 3, f"tile {(p, q)} descriptor {t}: the commit write holds a NOP"


def dx_reads(cfg, phase, want):
    """Read-backs of the dZ_prev ``want`` (``k x batch`` bf16) each PE of a backward-data phase
    keeps at its ``dx_base``."""
    L, bits = cfg.lanes, mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    reads = []
    for (p, q), info in sorted(phase.plan["pes"].items()):
        kept = want[info["k"].start:info["k"].stop, p * L:(p + 1) * L].astype(np.uint32) << 16
        reads += [(tile_address(cfg.mesh_cols, p, q, CORE_BASE + info["dx_base"] + i, bits), int(v))
                  for i, v in enumerate(kept.ravel())]
    return reads


@pytest.mark.slow
@HW_2X3
def test_wafer_backward_data():
    """dZ_prev = mask(X) * bf16(W^T dZ): W streamed transposed, row k on the link of its column,
    FMAC over the stored dZ, VEC MASK + round into SRAM, = kernels.backward_data; at the hardware
    preset, where the columns' 4, 4 and 3 rows are runs shorter than acc_rows = 5 (the lanes
    stall; the combinational lanes of the system preset run backward-data in make sim --preset
    system and the PE core's tests)."""
    cfg = preset("hardware", mesh_cols=3)
    m, k, batch = 6, 11, 2 * cfg.lanes
    L = cfg.lanes
    w16, x16, dz16 = random_layer(np.random.default_rng(9), m, k, batch)
    phase = compile_backward_data(cfg, m=m, k=k, batch=batch, x16=x16, dz16=dz16)
    want = kernels.backward_data(w16, dz16, x16)
    reads = dx_reads(cfg, phase, want) + status_reads(cfg, phase, FAULT=0, ACTIVE=0)
    reads.append((adapter_base() + ADAPTER["W_TAKEN"], m * k))
    edges = dx_edges(cfg, k)
    edges.update(no_gradients(cfg))
    result = run_phase(cfg, phase, link_inputs(cfg, w16, transposed=True), edges, reads,
                       gap=0.2)
    for p in range(cfg.mesh_rows):      # the same values leave the edges, columns by color
        got = split_dx(cfg, dx_words(cfg, result, p), k)
        assert np.array_equal(got, want[:, p * L:(p + 1) * L]), f"row {p}: dZ_prev at the edges"


@pytest.mark.slow
@HW_2X3
def test_wafer_multicast_configuration_and_next_input_stream():
    """Backward-data configured through TILE_MASK (compiler.multicast: shared registers and the
    rows' alike dZ loads written once) while the next input batch streams in at the west edges
    into the PEs of columns 0 and 2 (column 1 passes it on): dZ_prev equal to the kernels, and
    every PE of those columns holds its X[K_q, B_p] at the home afterwards."""
    from compiler.config_state import ConfigState
    from compiler.multicast import multicast
    cfg = preset("hardware", mesh_cols=3)
    m, k, batch, k_in, home = 6, 12, 2 * cfg.lanes, 9, 1500
    L = cfg.lanes
    rng = np.random.default_rng(12)
    w16, x16, dz16 = random_layer(rng, m, k, batch)
    x_next = rng.integers(0, 1 << 16, (k_in, batch)).astype(np.uint16)
    full = compile_backward_data(cfg, m=m, k=k, batch=batch, x16=x16, dz16=dz16, next_x16=x_next,
                                 next_input={"home": home, "k": k_in, "columns": (0, 2)})
    phase = multicast(cfg, ConfigState().program(full))
    assert len(phase.writes) < len(full.writes) * 3 // 4
    want = kernels.backward_data(w16, dz16, x16)
    bits = mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)
    reads = dx_reads(cfg, phase, want)
    for p, q in sorted(phase.plan["pes"]):
        if q != 1:
            ks = range(3 * q, 3 * q + 3)
            mine = x_next[ks.start:ks.stop, p * L:(p + 1) * L].astype(np.uint32) << 16
            reads += [(tile_address(cfg.mesh_cols, p, q, CORE_BASE + home + i, bits), int(v))
                      for i, v in enumerate(mine.ravel())]
    reads += status_reads(cfg, phase, FAULT=0, ACTIVE=0)
    reads.append((adapter_base() + ADAPTER["TILE_MASK"], 0))
    edges = dx_edges(cfg, k)
    edges.update(no_gradients(cfg))
    result = run_phase(cfg, phase, link_inputs(cfg, w16, transposed=True),
                       edges, reads, gap=0.2)
    for p in range(cfg.mesh_rows):
        got = split_dx(cfg, dx_words(cfg, result, p), k)
        assert np.array_equal(got, want[:, p * L:(p + 1) * L]), f"row {p}: dZ_prev at the edges"


@pytest.mark.xdist_group("tiny-system")
def test_gradient_link_block_restarts_when_its_count_is_written(tiny_system):
    """``G_COUNT + q`` written mid-block restarts link q's block: with 3 words per block, two
    words sent (``last`` 0, 0), then the count written as 2, the next two words carry ``last``
    0, 1 (the SwarmX tree ORs the two wafers' alike flags). Rows 0 and 1 of column 0 send their
    wavelet up the column into gradient link 0."""
    s = tiny_system
    routes = [s.route(0, 0, "W", "N"), s.route(1, 0, "W", "N"), s.route(0, 0, "S", "N")]
    g_count = adapter_base() + ADAPTER["G_COUNT"]
    first = s.phase([routes + [(g_count, 3)]] * 2, wavelets=1, roots=(2, 0))
    states, roots = s.run(first, s.phase([[(g_count, 2)]] * 2, wavelets=1, roots=(2, 0)))
    assert not any(st["error"] or st["fault"] or st["timeout"] for st in states), states
    assert [unpack_tagged(int(w))[1] for w in roots[0]] == [0, 1]


@pytest.mark.parametrize("changes,kw,match", [
    ({}, dict(m=8, k=16, batch=6), "batch must be 8"),
    ({"num_colors": 2}, dict(m=8, k=16, batch=8), "need 4 colors"),
    ({"num_tasks": 3}, dict(m=8, k=16, batch=8), "needs 4 task descriptors"),
    ({}, dict(m=8, k=1, batch=8), "cannot be split over 2 mesh columns"),
    ({"sram_words": 64, "sram_banks": 4}, dict(m=32, k=64, batch=8), "SRAM words"),
])
def test_compiler_refuses(changes, kw, match):
    with pytest.raises(WaferCompileError, match=match):
        compile_forward(preset("system", **changes), **kw)


def test_backward_weight_refuses_partial_vectors():
    with pytest.raises(WaferCompileError, match="not a multiple of lanes=4"):
        compile_backward_weight(preset("system"), m=3, k=10, batch=8)


def test_compiler_rejects_wrong_input_shape():
    with pytest.raises(WaferCompileError, match=r"X has shape \(4, 8\), expected \(16, 8\)"):
        compile_forward(preset("system"), m=8, k=16, batch=8, x16=np.zeros((4, 8), np.uint16))


def test_wafer_too_many_tiles_for_the_bus():
    with pytest.raises(ConfigError, match="more tiles than the 16-bit configuration bus"):
        Wafer(preset("system", mesh_rows=5, mesh_cols=4))
    full = Wafer(preset("system", mesh_rows=4, mesh_cols=4))  # fills the bus; adapters above tile 15
    assert full.config.mesh_rows == 4
    full._MustUse__silence = True        # checked for construction only, not elaborated


@pytest.mark.slow
@HW_2X3
def test_wafer_bench_same_under_icarus_and_verilator(icarus):
    """A 2 x 3 forward phase at the hardware preset with gaps and back-pressure under both
    simulators: the same outputs at every cycle (sim.kit.trace)."""
    with compare_simulators():
        test_wafer_forward("hardware", 2, 3, 13, 13, 0.2, 0.3)
