"""Timing model of the RTL system schedule (models/pipeline/rtl_schedule.py): hand-worked small
cases from the documented latencies, invariants and bad input."""

import pytest

from models.fabric import zero_load_latency
from models.pe import DEP_TO_TX_CYCLES, unit_cycles
from models.pipeline import rtl_schedule as rs
from models.swarmx import SwarmxTiming

HW = rs.RtlHardware(mesh_rows=2, mesh_cols=2, lanes=4, systems=2)


def test_config_cycles_one_idle_cycle_then_one_write_per_cycle():
    assert rs.config_cycles(0) == 0
    assert rs.config_cycles(1) == 2
    assert rs.config_cycles(633) == 634
    with pytest.raises(ValueError, match="writes"):
        rs.config_cycles(-1)


def test_backward_data_hand_worked():
    # 10 x 32 layer on 2x2, 4 lanes, 2 wafers: go -> player busy (1), 10 x 16 words on each
    # column's link, broadcast through one tree level (1), two routers down to row 1's RAMP (1
    # link + 2), FMAC row done -> first MASK word (6), 3 more words; column 0's leave the west
    # edge, column 1's the east edge: no link (2), recorder count (1).
    assert rs.backward_data_run_cycles(10, 32, HW) == 1 + 160 + 1 + 3 + 6 + 3 + 2 + 1 == 177
    # Uneven columns (K = 33: 17 and 16): column 0's stream is 10 words longer and its results
    # cross no link: 1 + 170 + 1 + 3 + 6 + 3 + 2 + 1.
    assert rs.backward_data_run_cycles(10, 33, HW) == 1 + 170 + 1 + 3 + 6 + 3 + 2 + 1


def test_forward_hand_worked_hidden_and_logits():
    # 32 x 64 on 2 columns: 32 x 32 weights on each link.
    assert rs.forward_run_cycles(32, 64, HW) == 1 + 1024 + 1 + 3 + 6 + 3 + 3 + 1
    # The logits leave the east edge of the last column: no link.
    assert rs.forward_run_cycles(10, 32, HW, last=True) == 1 + 160 + 1 + 3 + 6 + 3 + 2 + 1
    # One column: hidden results leave east too.
    one = rs.RtlHardware(mesh_rows=1, mesh_cols=1, lanes=4, systems=1)
    assert rs.forward_run_cycles(3, 5, one) == rs.forward_run_cycles(3, 5, one, last=True) \
        == 1 + 15 + 1 + 2 + 6 + 3 + 2 + 1


def test_latency_terms_follow_the_component_models():
    deep = rs.RtlHardware(mesh_rows=3, mesh_cols=4, lanes=8, systems=5)
    assert SwarmxTiming(5, 2).broadcast_latency == 2
    m, k = 12, 40       # 10 features per column
    rest = 1 + m * 10 + 2 + zero_load_latency(2) + DEP_TO_TX_CYCLES + 7 + 1
    # Forward: out of the west edge, 3 links; backward-data: columns 0, 1 west, 2, 3 east, at
    # most one link.
    assert rs.forward_run_cycles(m, k, deep) == rest + zero_load_latency(3)
    assert rs.backward_data_run_cycles(m, k, deep) == rest + zero_load_latency(1)


def test_backward_weight_hand_worked_single_pe():
    # One PE: DOT only, 2 x 4 = 8 words of 7 cycles = 56; after its commit comes the adapter
    # word G_COUNT (one per column), then 2 cycles to go; the last word crosses the router to
    # the north edge (2), the 2-leaf reduce (2 * 2 + 3 = 7) and the recorder (1).
    one = rs.RtlHardware(mesh_rows=1, mesh_cols=1, lanes=4, systems=2)
    assert rs.backward_weight_run_cycles(2, 4, one) == 56 - 1 - 2 + 2 + 7 + 1


def test_backward_weight_on_the_lanes_hand_worked():
    # One PE, 2 x 4 (one chunk of L = 4): the dZ stream starts 2 cycles after go; 8 dZ wavelets
    # through its RAMP, the last row's stage 1 (1) and its partial vector, fetched and sent (7),
    # weigh more than the 2 vectors back to back (3 + 2 x 4 = 11); then router (2), the 2-leaf
    # reduce (7) and the recorder (1).
    one = rs.RtlHardware(mesh_rows=1, mesh_cols=1, lanes=4, systems=2)
    assert rs.backward_weight_run_cycles(2, 4, one, lanes=True) == 2 + 16 + 2 + 7 + 1
    # 2 x 2, 10 x 32: a north PE takes 10 x 16 dZ wavelets through its RAMP (the 160 incoming
    # sums come on the RAMP's second channel): 160 + 1 + 7 = 168 > 3 + 40 chain ADDs x 4 = 163
    assert rs.backward_weight_run_cycles(10, 32, HW, lanes=True) == 2 + 168 + 2 + 7 + 1


def test_backward_weight_hand_worked_2x2():
    # 10 x 32: each column 16 features: 160 DOT words at 7 cycles + 40 chain ADDs at 4 (fetches
    # overlapped) = 1280. Column 1's north PE (tile (0, 1)) commits before tiles (1, 0), (1, 1)
    # (one descriptor each, 6 words) and 2 adapter words: 14 writes after it.
    assert rs.backward_weight_run_cycles(10, 32, HW) == 1280 - 14 - 2 + 2 + 7 + 1
    assert rs.backward_weight_desc_counts(HW) == {(0, 0): 3, (0, 1): 3, (1, 0): 1, (1, 1): 1}


def test_forward_and_backward_data_grow_by_one_cycle_per_weight_on_a_link():
    for m, k in ((10, 32), (32, 64), (7, 10)):
        base = rs.forward_run_cycles(m, k, HW)
        assert rs.forward_run_cycles(m + 1, k, HW) - base == k // 2
        assert rs.forward_run_cycles(m, k + 2, HW) - base == m
        assert base > m * k // 2
        # Backward-data's columns leave by the west and the east edge: no link, as the logits.
        assert rs.backward_data_run_cycles(m, k, HW) == rs.forward_run_cycles(m, k, HW, last=True)


def test_backward_weight_monotonic_and_vector_bound():
    prev = 0
    for m in range(1, 40, 3):
        c = rs.backward_weight_run_cycles(m, 64, HW)
        assert c >= prev and c >= 1
        prev = c
    assert rs.backward_weight_run_cycles(32, 64, HW) > 32 * 32 * unit_cycles(4) - 100


def _compiled(P, Q, kind, m, k, last=False):
    """The layer compiler's phase (compiler/wafer/) on the system preset."""
    from compiler import wafer as wc
    from hdl.config import preset
    cfg = preset("system", mesh_rows=P, mesh_cols=Q, swarmx_leaves=2).replace(sram_words=4096)
    fn = {"forward": wc.compile_forward, "backward-data": wc.compile_backward_data,
          "backward-weight": wc.compile_backward_weight}[kind]
    extra = {"last": last} if kind == "forward" else {}
    return fn(cfg, m=m, k=k, batch=P * cfg.lanes, **extra)


@pytest.mark.parametrize("P,Q", [(1, 1), (2, 1), (1, 2), (2, 2), (3, 2)])
def test_simulation_against_the_formulas(P, Q):
    """The cycle simulation never beats the contention-free formula; it equals it where nothing
    shares the path: one column (only weights use a RAMP port, no psum chain); the psum / result
    traffic of two columns costs cycles in the forward pass."""
    hw = rs.RtlHardware(mesh_rows=P, mesh_cols=Q, lanes=4, systems=2)
    for m, k in ((1, 4), (4, 8), (8, 8), (10, 32)):
        for last in (False, True):
            sim = rs.simulated_run_cycles("forward", _compiled(P, Q, "forward", m, k, last).plan,
                                          m, k, hw, last=last)
            formula = rs.forward_run_cycles(m, k, hw, last=last)
            assert sim == formula if Q == 1 else sim > formula, (m, k, last, sim, formula)
        sim = rs.simulated_run_cycles("backward-data", _compiled(P, Q, "backward-data", m, k).plan,
                                      m, k, hw)
        formula = rs.backward_data_run_cycles(m, k, hw)
        assert sim >= formula, (m, k, sim, formula)
        if Q == 1 and m > unit_cycles(4):   # each MASK is done before the next row's write
            assert sim == formula, (m, k, sim, formula)
        if m * k // Q % 4 == 0:
            ph = _compiled(P, Q, "backward-weight", m, k)
            sim = rs.simulated_run_cycles("backward-weight", ph.plan, m, k, hw,
                                          writes=len(ph.writes))
            lanes = ph.plan["dw"] == "lanes"
            assert lanes == (k % (Q * 4) == 0), (m, k)
            assert sim >= rs.backward_weight_run_cycles(m, k, hw, lanes=lanes), (m, k)


def test_backward_data_mask_store_wait_is_hidden_by_the_next_fetch():
    """1 x 1, K = 5, M = 7 = L + 3: row r's stage-1 write (cycle w) is followed by its MASK: FIDLE
    w+1, FB w+2, FL w+3, RUN w+4..w+7; row r+1's write is in w+7, to acc_base + 4(r+1) + 0..3 =
    52 + 4r..55 + 4r (banks 4r+4..4r+7 mod 8), while the MASK stores lane 3 at dx_base + 4r + 3 =
    71 + 4r (bank 4r+7 mod 8): it waits a cycle, w+8. Row r+1's MASK can only be fetched from
    w+8 (its row is counted at the end of w+7), so the wait costs nothing: the run is the formula,
    as with M = 8, where the write comes after."""
    hw = rs.RtlHardware(mesh_rows=1, mesh_cols=1, lanes=4, systems=2)
    plan = _compiled(1, 1, "backward-data", 7, 5).plan
    assert plan["pes"][(0, 0)]["descs"][0]["dst_base"] == 48
    assert plan["pes"][(0, 0)]["descs"][1]["dst_base"] == 68
    for m in (7, 8):
        plan = _compiled(1, 1, "backward-data", m, 5).plan
        assert rs.simulated_run_cycles("backward-data", plan, m, 5, hw) \
            == rs.backward_data_run_cycles(m, 5, hw)


def test_step_schedule_default_network():
    """64-32-10 on N = 2 wafers of 2 x 2: order, configuration = writes before ``go`` + 1, every phase at
    least its formula (backward-data: its hand-worked 177, exactly: column 0's MASK words leave
    by the west edge, column 1's by the east, neither waits for the other's)."""
    dims = [64, 32, 10]
    hw = rs.RtlHardware(mesh_rows=2, mesh_cols=2, lanes=4, systems=2)
    order = [("forward", 0), ("forward", 1), ("backward-data", 1), ("backward-weight", 1),
             ("backward-weight", 0)]
    phases = {}
    for kind, l in order:
        ph = _compiled(2, 2, kind, dims[l + 1], dims[l], last=l == 1)
        phases[(kind, l)] = (len(ph.writes), ph.go_after, ph.plan)
    out = rs.step_schedule(dims, hw, phases)
    assert [(p.phase, p.layer) for p in out] == order
    assert [p.config for p in out] == [phases[key][1] + 1 for key in order]
    assert out[2].run_formula == 177 == out[2].run
    assert all(p.run >= p.run_formula for p in out)
    assert out[0].run_formula == rs.forward_run_cycles(32, 64, hw)
    # The writes after ``go`` come before the run needs them: a forward or backward-data run takes
    # as long as with every write before ``go`` (backward-weight, which starts at its commits, no
    # longer in all), and every phase has some.
    for (kind, l), p in zip(order, out):
        writes, go_after, plan = phases[(kind, l)]
        assert go_after < writes, (kind, l)
        before = rs.simulated_run_cycles(kind, plan, dims[l + 1], dims[l], hw, writes=writes, last=l == 1)
        if kind == "backward-weight":
            assert p.config + p.run <= rs.config_cycles(writes) + before, (kind, l)
        else:
            assert p.run == before, (kind, l)
    with pytest.raises(ValueError, match="no entry"):
        rs.step_schedule(dims, hw, {key: v for key, v in phases.items() if key != order[-1]})


@pytest.mark.parametrize("call,message", [
    (lambda: rs.RtlHardware(0, 2, 4, 2), "mesh_rows"),
    (lambda: rs.RtlHardware(2, 2, True, 2), "lanes"),
    (lambda: rs.RtlHardware(2, 2, 4, 2, sram_banks=0), "sram_banks must be an int >= 1"),
    (lambda: rs.RtlHardware(2, 2, 4, 2, sram_banks=6), "sram_banks must be a power of two"),
    (lambda: rs.forward_run_cycles(4, 1, HW), "K >= mesh_cols"),
    (lambda: rs.backward_weight_run_cycles(0, 8, HW), "M >= 1"),
    (lambda: rs.step_schedule([64], HW, {}), "dims"),
    (lambda: rs.simulated_run_cycles("sideways", {}, 4, 8, HW), "unknown phase kind"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
