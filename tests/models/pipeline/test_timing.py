"""Timing-model invariants (utilization <= 1, monotonicity, log-depth scaling, what prefetch and
the MemoryX overlap hide) and a worked example computed by hand from the documented formulas."""

import math

import numpy as np
import pytest

from models.pipeline.timing import TimingError, TimingParams, scaling, step_timing, swarmx_depth

SMALL = TimingParams(mesh_rows=4, mesh_cols=4, lanes=2)


def random_cases(n, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        tp = TimingParams(mesh_rows=int(rng.integers(1, 80)), mesh_cols=int(rng.integers(1, 80)),
                          lanes=int(rng.integers(1, 17)), weight_words_per_cycle=float(rng.uniform(0.5, 200)),
                          grad_words_per_cycle=float(rng.uniform(0.5, 200)),
                          bf16_per_wavelet=int(rng.integers(1, 3)),
                          memoryx_update_bytes_per_cycle=float(rng.uniform(16, 8192)),
                          prefetch_weights=bool(rng.integers(2)), memoryx_update_overlap=bool(rng.integers(2)),
                          input_double_buffered=bool(rng.integers(2)))
        dims = tuple(int(d) for d in rng.integers(1, 3000, int(rng.integers(2, 6))))
        yield tp, dims, int(rng.integers(1, 4096)), int(rng.integers(1, 193))


def test_utilization_at_most_one_and_accounting_consistent():
    for tp, dims, batch, n in random_cases(300):
        st = step_timing(dims, batch, n, tp)
        assert 0 < st.utilization <= 1
        for p in st.forward + st.backward:
            assert 0 < p.utilization <= 1
            assert p.cycles == p.exposed_fill_cycles + p.stream_cycles + p.drain_cycles
            assert 0 <= p.exposed_fill_cycles
        assert st.cycles == (sum(p.cycles for p in st.forward + st.backward) + st.host_cycles
                             + st.memoryx_exposed_cycles + st.input_exposed_cycles)
        macs = sum(dims[i] * dims[i + 1] for i in range(len(dims) - 1)) * batch
        assert st.useful_fmacs == 3 * macs - dims[0] * dims[1] * batch


def test_monotone_in_resources_and_load():
    dims = (512, 1024, 256, 10)
    for tp, _, batch, n in random_cases(40, seed=1):
        t = step_timing(dims, batch, n, tp).cycles
        assert step_timing(dims, batch + 64, n, tp).cycles >= t
        assert step_timing(dims, batch, n, tp.replace(weight_words_per_cycle=tp.weight_words_per_cycle * 2)).cycles <= t
        assert step_timing(dims, batch, n, tp.replace(grad_words_per_cycle=tp.grad_words_per_cycle * 2)).cycles <= t
        assert step_timing(dims, batch, n, tp.replace(vector_overhead_cycles=tp.vector_overhead_cycles + 3)).cycles >= t
        assert step_timing(dims, batch, n, tp.replace(dw_dot_product=True)).cycles >= \
            step_timing(dims, batch, n, tp.replace(dw_dot_product=False)).cycles
        for name in ("hop_latency", "link_latency", "memoryx_stream_latency", "host_loss_cycles",
                     "swarmx_reduce_latency", "memoryx_update_latency"):
            assert step_timing(dims, batch, n, tp.replace(**{name: getattr(tp, name) + 50})).cycles >= t
        assert step_timing(dims, batch, min(192, n * 4), tp).cycles >= t
        assert step_timing(dims, batch, n, tp.replace(prefetch_weights=False)).cycles >= \
            step_timing(dims, batch, n, tp.replace(prefetch_weights=True)).cycles
        assert step_timing(dims, batch, n, tp.replace(memoryx_update_overlap=False)).cycles >= \
            step_timing(dims, batch, n, tp.replace(memoryx_update_overlap=True)).cycles


def test_step_time_grows_with_tree_depth_only():
    """Weak scaling: T(N) depends on N only through ceil(log4 N), one level = bcast + reduce."""
    tp = TimingParams()
    dims, batch = (1024, 1024, 1024, 10), 256
    by_depth = {}
    for n in range(1, 193):
        st = step_timing(dims, batch, n, tp)
        assert st.swarmx_depth == max(1, math.ceil(math.log(n, 4) - 1e-12))
        by_depth.setdefault(st.swarmx_depth, set()).add(st.cycles)
    assert all(len(v) == 1 for v in by_depth.values())
    t = {d: v.pop() for d, v in by_depth.items()}
    for d in (2, 3, 4):
        assert t[d] - t[d - 1] == tp.swarmx_bcast_latency + tp.swarmx_reduce_latency
    rows = scaling(dims, batch, [1, 4, 16, 64, 192], tp)
    eff = [r["efficiency"] for r in rows]
    assert eff[0] == 1 and all(a >= b for a, b in zip(eff, eff[1:])) and eff[-1] > 0.999


def test_strong_scaling_efficiency_falls_when_batch_per_system_shrinks():
    rows = scaling((1024, 1024, 1024, 10), 3072, [1, 2, 4, 16, 64, 192], TimingParams(), strong=True)
    assert [r["batch_per_system"] for r in rows] == [3072, 1536, 768, 192, 48, 16]
    assert all(r["efficiency"] <= 1 + 1e-12 for r in rows)
    assert rows[-1]["efficiency"] < 0.2 < 0.9 < rows[1]["efficiency"]


def test_prefetch_hides_every_weight_load_but_the_first():
    tp = TimingParams(host_loss_cycles=5000)
    dims = (1024, 1024, 1024, 1024, 10)
    on = step_timing(dims, 256, 4, tp)
    off = step_timing(dims, 256, 4, tp.replace(prefetch_weights=False))
    fill = on.forward[0].fill_cycles
    row_cross = tp.router_io_latency + (tp.mesh_cols - 1) * tp.hop_latency
    assert fill > row_cross
    assert [p.exposed_fill_cycles for p in on.forward] == [fill, 0, 0, 0]
    assert [p.exposed_fill_cycles for p in on.backward] == [row_cross] * 4   # fill hidden by the host
    assert [p.exposed_fill_cycles for p in off.forward + off.backward] == [fill] * 8
    assert off.cycles - on.cycles == 3 * fill + 4 * (fill - row_cross)


def test_memoryx_overlap_hides_all_updates_but_the_first_layers():
    tp = TimingParams(memoryx_update_bytes_per_cycle=4096)
    dims = (1024, 1024, 1024, 10)
    on = step_timing(dims, 256, 1, tp)
    off = step_timing(dims, 256, 1, tp.replace(memoryx_update_overlap=False))
    update0 = 1024 * 1024 * tp.update_bytes_per_parameter / 4096
    grad_path = ((tp.mesh_rows - 1) * (tp.hop_latency + tp.chain_add_latency) + tp.router_io_latency
                 + tp.swarmx_reduce_latency + tp.link_latency)
    assert on.memoryx_exposed_cycles == math.ceil(grad_path + update0 + tp.memoryx_update_latency)
    assert off.memoryx_exposed_cycles == math.ceil(grad_path + on.memoryx_update_cycles
                                                   + tp.memoryx_update_latency)
    assert tp.update_bytes_per_parameter == 30      # AdamW: 4+4+4+4 read, 4+4+4+2 written


def test_worked_example_by_hand():
    """2 x 2 mesh, 1 lane, layers 4 -> 4 -> 2, batch 4, one system, every number from the docs."""
    tp = TimingParams(mesh_rows=2, mesh_cols=2, lanes=1, weight_words_per_cycle=64, grad_words_per_cycle=32,
                      hop_latency=1, router_io_latency=2, vector_overhead_cycles=2, swarmx_bcast_latency=1,
                      swarmx_reduce_latency=7, link_latency=10, memoryx_stream_latency=20,
                      memoryx_update_bytes_per_cycle=30, memoryx_update_latency=5, host_loss_cycles=100,
                      dw_dot_product=True)
    assert tp.chain_add_latency == 3                          # one vector-unit ADD: L + 2 here
    st = step_timing((4, 4, 2), 4, 1, tp)
    # Kq = 2, Bp = 2; a vector back to back max(L, 2) = 2 cycles, a DOT word L + 2 = 3. Weights
    # max(4/64, 2) = 2 per row, links 2 per row.
    fill = 20 + 10 + 1 + 2 + 1                                 # = 34
    f0, f1 = st.forward
    # layer 0: wavelet engine 2 FMAC x 2 vectors = 4; store engine 2 partials + 2 results = 4;
    # vector unit 2 x 2 = 4 (ties: the first named bound, fmac)
    assert (f0.row_cycles, f0.bound, f0.stream_cycles, f0.exposed_fill_cycles) == (4, "fmac", 16, fill)
    assert f0.drain_cycles == (1 * (1 + 3) + 2) + (2 + 1 + 2)  # chain, then results west: 11
    assert f0.cycles == 34 + 16 + 11
    # layer 1 (last): wavelet engine 4, store 2, vector 4; drain chain 6 + one hop to the host 3
    assert (f1.row_cycles, f1.stream_cycles, f1.exposed_fill_cycles, f1.drain_cycles) == (4, 8, 0, 9)
    b1, b0 = st.backward
    # layer 1: vector unit: column ADD 2 x 2 + DOT 2 words x 2 vectors x 3 = 16 per row, 2 rows;
    # its fill 34 is hidden behind the forward drain 9 + host 100: only the row crossing 3 is left;
    # drain: mask + round of the 2 x 2 dX tile, 4 vectors x 2
    assert (b1.row_cycles, b1.bound, b1.stream_cycles, b1.exposed_fill_cycles, b1.drain_cycles) == \
        (16, "vector", 32, 3, 8)
    # layer 0: no dX; vector unit 16 per row, 4 rows
    assert (b0.row_cycles, b0.stream_cycles, b0.exposed_fill_cycles, b0.drain_cycles) == (16, 64, 3, 0)
    assert b0.useful_fmacs == 4 * 4 * 4 and b1.useful_fmacs == 2 * 2 * 4 * 4
    t_fwd, t_bwd = 61 + 17, 43 + 67
    grad_path = 1 * (1 + 3) + 2 + 7 + 10                       # = 23
    # updates: layer 1 (8 params x 30 bytes at 30 bytes/cycle = 8 cycles) when its gradient is in,
    # then layer 0 (16 cycles) once its gradient is in, + 5 cycles latency
    assert st.memoryx_exposed_cycles == grad_path + 16 + 5
    assert st.memoryx_update_cycles == 24
    assert st.input_load_cycles == 3 + 4 * 2 and st.input_exposed_cycles == 0
    assert st.cycles == t_fwd + 100 + t_bwd + 44 == 332
    assert st.useful_fmacs == (16 + 8) * 4 + (8 * 2 + 16) * 4
    assert st.utilization == st.useful_fmacs / (4 * 332)
    # the same with dW as FMAC broadcasts: layer 1 wavelet engine 4 + 2 + 2 x 2 = 10 per row,
    # layer 0: 2 + 4 = 6 (vector unit 4, store engine 2)
    alt = step_timing((4, 4, 2), 4, 1, tp.replace(dw_dot_product=False))
    assert [(p.row_cycles, p.bound) for p in alt.backward] == [(10, "fmac"), (6, "fmac")]


def test_defaults_follow_the_rtl_documentation():
    tp = TimingParams()
    assert tp.swarmx_reduce_latency == 2 * tp.fp_add_latency + 3       # hdl/swarmx.py: 2 L + 3
    assert tp.replace(fp_add_latency=4).swarmx_reduce_latency == 11
    assert swarmx_depth(1) == 1 and swarmx_depth(4) == 1 and swarmx_depth(5) == 2 and swarmx_depth(192) == 4


@pytest.mark.parametrize("changes,match", [
    (dict(mesh_rows=0), "mesh_rows"), (dict(lanes=17), "lanes"), (dict(hop_latency=-1), "hop_latency"),
    (dict(weight_words_per_cycle=0), "weight_words_per_cycle"), (dict(bf16_per_wavelet=3), "bf16_per_wavelet"),
    (dict(link_words_per_cycle=2), "link_words_per_cycle"), (dict(prefetch_weights=1), "prefetch_weights"),
    (dict(memoryx_optimizer="lion"), "memoryx_optimizer"), (dict(grad_words_per_cycle=float("inf")), "grad"),
    (dict(nonsense=1), "nonsense"),
])
def test_bad_parameters_are_named(changes, match):
    with pytest.raises(TimingError, match=match):
        TimingParams().replace(**changes)


def test_bad_scenarios_are_named():
    with pytest.raises(TimingError, match="systems"):
        step_timing((4, 4), 4, 193)
    with pytest.raises(TimingError, match="dims"):
        step_timing((4,), 4)
    with pytest.raises(TimingError, match="batch"):
        step_timing((4, 4), 0)
    with pytest.raises(TimingError, match="params"):
        step_timing((4, 4), 4, 1, params={"lanes": 2})


def test_defaults_match_the_rtl_latencies():
    """The RTL's own constants: the fp32 adder, the SwarmX tree (hdl/swarmx.py, models/swarmx.py),
    the router's zero-load latency (models/fabric.py) and the PE vector unit (models/pe.py)."""
    from hdl.fp.fp32_add import Fp32Add
    from models.fabric import zero_load_latency
    from models.pe import unit_cycles
    from models.swarmx import SwarmxTiming

    tp = TimingParams()
    assert tp.fp_add_latency == Fp32Add.LATENCY
    for hops in (0, 1, 5, 63):
        assert tp.router_io_latency + hops * tp.hop_latency == zero_load_latency(hops)
    for lanes in (1, 2, 4, 16):
        assert lanes + tp.vector_overhead_cycles == unit_cycles(lanes) == tp.replace(lanes=lanes).chain_add_latency
        # the pipelined vector unit (Config.mul_stages / add_stages): a chain hop is one isolated ADD
        # and the pick's registered readiness
        for ms, ads in ((2, 3), (0, 1), (4, 0)):
            hw = tp.replace(lanes=lanes, mul_stages=ms, add_stages=ads)
            assert hw.chain_add_latency == unit_cycles(lanes, ms, ads) + 1 == lanes + 3 + 1 + ads + 2
    for n in (1, 4, 5, 16, 17, 192):
        sx = SwarmxTiming(n, Fp32Add.LATENCY)
        assert swarmx_depth(n) * tp.swarmx_reduce_latency == sx.reduce_latency
        assert swarmx_depth(n) * tp.swarmx_bcast_latency == sx.broadcast_latency
