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
    # 10 x 32 layer on 2x2, 4 lanes, 2 wafers: go -> player busy (1), 320 words, broadcast
    # through one tree level (1), two routers down to row 1's RAMP (1 link + 2), FMAC row done
    # -> first MASK word (5), 3 more words, one link west to the edge (1 + 2), recorder count (1).
    cycles, exact = rs.backward_data_run_cycles(10, 32, HW)
    assert cycles == 1 + 320 + 1 + 3 + 5 + 3 + 3 + 1 == 337
    assert exact
    # M = 4 < L + 2: one VEC per 4 weight words cannot keep up: only a bound.
    assert rs.backward_data_run_cycles(4, 32, HW)[1] is False


def test_forward_hand_worked_hidden_and_logits():
    assert rs.forward_run_cycles(32, 64, HW) == 1 + 2048 + 1 + 3 + 5 + 3 + 3 + 1
    # The logits leave the east edge of the last column: no link.
    assert rs.forward_run_cycles(10, 32, HW, last=True) == 1 + 320 + 1 + 3 + 5 + 3 + 2 + 1
    # One column: hidden results leave east too.
    one = rs.RtlHardware(mesh_rows=1, mesh_cols=1, lanes=4, systems=1)
    assert rs.forward_run_cycles(3, 5, one) == rs.forward_run_cycles(3, 5, one, last=True) \
        == 1 + 15 + 1 + 2 + 5 + 3 + 2 + 1


def test_latency_terms_follow_the_component_models():
    deep = rs.RtlHardware(mesh_rows=3, mesh_cols=4, lanes=8, systems=5)
    assert SwarmxTiming(5, 2).broadcast_latency == 2
    m, k = 12, 40
    expect = (1 + m * k + 2 + zero_load_latency(2) + DEP_TO_TX_CYCLES + 7 + zero_load_latency(3)
              + 1)
    assert rs.backward_data_run_cycles(m, k, deep) == (expect, m >= unit_cycles(8))
    assert rs.forward_run_cycles(m, k, deep) == expect


def test_backward_weight_hand_worked_single_pe():
    # One PE: DOT only, 2 x 4 = 8 words of 6 cycles = 48; after its commit come the adapter
    # words G_ROW_LEN, G_COUNT, G_BOUND (3), then 2 cycles to go; the last word crosses the
    # router to the north edge (2), the 2-leaf reduce (2 * 2 + 3 = 7) and the recorder (1).
    one = rs.RtlHardware(mesh_rows=1, mesh_cols=1, lanes=4, systems=2)
    assert rs.backward_weight_run_cycles(2, 4, one) == 48 - 3 - 2 + 2 + 7 + 1


def test_backward_weight_hand_worked_2x2():
    # 10 x 32: each column 16 features: 160 DOT words + 40 chain ADDs, 6 cycles each = 1200.
    # Column 1's north PE (tile (0, 1)) commits before tiles (1, 0), (1, 1) (one descriptor each,
    # 6 words) and 4 adapter words: 16 writes after it.
    assert rs.backward_weight_run_cycles(10, 32, HW) == 1200 - 16 - 2 + 2 + 7 + 1
    assert rs.backward_weight_desc_counts(HW) == {(0, 0): 3, (0, 1): 3, (1, 0): 1, (1, 1): 1}


def test_forward_and_backward_data_grow_by_one_cycle_per_weight():
    for m, k in ((10, 32), (32, 64), (7, 9)):
        base = rs.forward_run_cycles(m, k, HW)
        assert rs.forward_run_cycles(m + 1, k, HW) - base == k
        assert rs.forward_run_cycles(m, k + 1, HW) - base == m
        assert base > m * k
        assert rs.backward_data_run_cycles(m, k, HW)[0] == base


def test_backward_weight_monotonic_and_vector_bound():
    prev = 0
    for m in range(1, 40, 3):
        c = rs.backward_weight_run_cycles(m, 64, HW)
        assert c >= prev and c >= 1
        prev = c
    assert rs.backward_weight_run_cycles(32, 64, HW) > 32 * 32 * unit_cycles(4) - 100


def test_step_schedule_order_and_config():
    dims = [64, 32, 10]
    writes = {("forward", 0): 633, ("forward", 1): 363, ("backward-data", 1): 511,
              ("backward-weight", 1): 506, ("backward-weight", 0): 1114}
    out = rs.step_schedule(dims, HW, writes)
    assert [(p.phase, p.layer) for p in out] == list(writes)
    assert [p.config for p in out] == [634, 364, 512, 507, 1115]
    assert [p.run_exact for p in out] == [False, False, True, False, False]
    assert out[1].run == rs.forward_run_cycles(10, 32, HW, last=True)


@pytest.mark.parametrize("call,message", [
    (lambda: rs.RtlHardware(0, 2, 4, 2), "mesh_rows"),
    (lambda: rs.RtlHardware(2, 2, True, 2), "lanes"),
    (lambda: rs.forward_run_cycles(4, 1, HW), "K >= mesh_cols"),
    (lambda: rs.backward_weight_run_cycles(0, 8, HW), "M >= 1"),
    (lambda: rs.step_schedule([64], HW, {}), "dims"),
    (lambda: rs.step_schedule([8, 4], HW, {}), "no entry"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
