"""Closed-loop cycle simulation of a wafer phase (models/pipeline/wafer_cycles.py): hand-worked
single-PE cases from the documented PE and router timing, and bad traffic."""

import pytest

from models import pe
from models.pipeline.wafer_cycles import simulate_phase

ONE = dict(rows=1, cols=1, lanes=4, num_colors=8, vc_depth=4)


def _plan(m, k):
    return pe.forward_kernel(lanes=4, sram_words=4096, rows=1, cols=1, m=m, k=k)


def test_one_row_one_weight():
    # Word 0 offered and taken in cycle 3; the RAMP delivers it in 5 (0 links + 2); done rises
    # at the end of 6; IDLE 7, LATCH 8, RUN 9..12 load the tx register, words transfer 10..13;
    # the last leaves the east edge 13 + 2 = 15.
    last = simulate_phase(_plan(1, 1), stream_cols=[0], weight_color=pe.COLOR_W, first=3,
                          sinks={(0, 0, "E"): 4}, **ONE)
    assert last == 15


def test_vector_unit_takes_l_plus_2_cycles_per_vector():
    # Row 1's weight arrives one cycle later, but the vector unit is busy with row 0 until 12:
    # IDLE 13, LATCH 14, RUN 15..18, words 16..19, edge 21.
    last = simulate_phase(_plan(2, 1), stream_cols=[0, 0], weight_color=pe.COLOR_W, first=3,
                          sinks={(0, 0, "E"): 8}, **ONE)
    assert last == 21


def test_row_completes_after_count_weights():
    # K = 3: the third weight (cycle 5) completes the row: 5 + 12 = 17.
    last = simulate_phase(_plan(1, 3), stream_cols=[0] * 3, weight_color=pe.COLOR_W, first=3,
                          sinks={(0, 0, "E"): 4}, **ONE)
    assert last == 17


def test_unexpected_edge_word_is_an_error():
    with pytest.raises(ValueError, match="left the mesh"):
        simulate_phase(_plan(1, 1), stream_cols=[0], weight_color=pe.COLOR_W, first=0,
                       sinks={(0, 0, "W"): 4}, **ONE)


def test_unmatched_color_is_an_error():
    plan = _plan(1, 1)
    plan["pes"][(0, 0)]["descs"][0]["color"] = 6
    with pytest.raises(ValueError, match="matches descriptors"):
        simulate_phase(plan, stream_cols=[0], weight_color=pe.COLOR_W, first=0,
                       sinks={(0, 0, "E"): 4}, **ONE)
