"""Closed-loop cycle simulation of a wafer phase (models/pipeline/wafer_cycles.py): hand-worked
single-PE cases from the documented PE and router timing, and bad traffic."""

import pytest

from arch.pe_map import Op, VecMode
from models import pe
from models.pipeline.wafer_cycles import simulate_phase

ONE = dict(rows=1, cols=1, lanes=4, sram_banks=8, num_colors=8, vc_depth=4)


def _plan(m, k):
    return pe.forward_kernel(lanes=4, sram_words=4096, rows=1, cols=1, m=m, k=k)


def test_one_row_one_weight():
    # Word 0 offered and taken in cycle 3; the RAMP delivers it in 5 (0 links + 2); done rises
    # at the end of 6; FIDLE 7, FB 8, FL 9, RUN 10..13 load the tx register, words
    # transfer 11..14; the last leaves the east edge 14 + 2 = 16.
    last = simulate_phase(_plan(1, 1), streams={0: 1}, weight_color=pe.COLOR_W, first=3,
                          sinks={(0, 0, "E"): 4}, **ONE)
    assert last == 16


def test_vector_unit_fetches_the_next_vector_while_one_runs():
    # Row 1's weight arrives one cycle later (done at the end of 7); while row 0 runs (10..13) the
    # fetch stage takes row 1: FIDLE 10, FB 11, FL 12, held until row 0's last element in 13;
    # RUN 14..17, words 15..18, edge 20: L cycles per vector back to back. (Row 1's stage-1 write
    # in 7 is to banks 0..3 of words 8..11; the PASS stores row 0 at 20..23, banks 4..7, in 10..13.)
    last = simulate_phase(_plan(2, 1), streams={0: 2}, weight_color=pe.COLOR_W, first=3,
                          sinks={(0, 0, "E"): 8}, **ONE)
    assert last == 20


def test_row_completes_after_count_weights():
    # K = 3: the third weight (cycle 5) completes the row: 5 + 13 = 18.
    last = simulate_phase(_plan(1, 3), streams={0: 3}, weight_color=pe.COLOR_W, first=3,
                          sinks={(0, 0, "E"): 4}, **ONE)
    assert last == 18


STORE1 = dict(op=Op.STORE, enable=1, color=1, reps=1, lo=0, hi=1)
FMAC1 = dict(op=Op.FMAC, enable=1, color=1, a_base=0, count=1, reps=1)


@pytest.mark.parametrize("writer,keep,last", [
    (dict(STORE1, dst_base=2), dict(lo=0, hi=1), 10),   # word 2 -> bank 2, as lane 2: one stall
    (dict(STORE1, dst_base=3), dict(lo=0, hi=1), 9),    # bank 3: none
    (dict(STORE1, dst_base=2), dict(lo=0, hi=0), 9),    # vector 0 not kept: it does not store
    (dict(FMAC1, dst_base=0), dict(lo=0, hi=1), 10),    # the row -> banks 0..3: one stall
    (dict(FMAC1, dst_base=4), dict(lo=0, hi=1), 9),     # banks 4..7: none
])
def test_vector_store_waits_on_a_same_bank_stage1_write(writer, keep, last):
    # A PASS VEC without dependencies: FIDLE 0, FB 1, FL 2, RUN 3..6 stores lane j at
    # 32 + j (bank j of 8) and loads tx; words transfer 4..7, the last leaves the east edge 7 + 2
    # = 9. One wavelet (offered 2, at the RAMP 4) is written by stage 1 in 5, when lane 2 stores:
    # on the same bank, lane 2 waits to 6, lane 3 is 7, words 4, 5, 7, 8, edge 10.
    plan = {"pes": {(0, 0): {"descs": {
        0: writer,
        1: dict(op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, store=1, color=2, count=1,
                reps=1, a_base=0, dst_base=32, **keep)}}},
        "routes": {(0, 0): [(1, "N", ["RAMP"]), (2, "RAMP", ["E"])]}}
    # (the STORE gets one of its L words and stays active: no completion barrier)
    assert simulate_phase(plan, streams={0: 1}, weight_color=1, first=2,
                          sinks={(0, 0, "E"): 4}, barrier=False, **ONE) == last


@pytest.mark.parametrize("store_dst,last", [(0, 17), (1, 16)])
def test_dot_word_store_waits_on_a_same_bank_stage1_write(store_dst, last):
    # DOT, 2 words: IDLE 0, READ_B 1, LATCH 2, RUN 3..6 (word 0 at lane 3, stored at 32, bank 0),
    # ISSUE 7, READ_B 8, LATCH 9, RUN 10..13 (word 1 at 33); words transfer 7, 14, edge 16. The
    # STORE wavelet (offered 3, at the RAMP 5) is written in 6: to bank 0, word 0 waits to 7 and
    # everything after it one cycle: edge 17.
    plan = {"pes": {(0, 0): {"descs": {
        0: dict(STORE1, dst_base=store_dst),
        1: dict(op=Op.VEC, vmode=VecMode.DOT, enable=1, send=1, store=1, color=2, count=2,
                reps=1, lo=0, hi=1, dst_base=32)}}},
        "routes": {(0, 0): [(1, "N", ["RAMP"]), (2, "RAMP", ["E"])]}}
    assert simulate_phase(plan, streams={0: 1}, weight_color=1, first=3,
                          sinks={(0, 0, "E"): 2}, barrier=False, **ONE) == last


def test_unexpected_edge_word_is_an_error():
    with pytest.raises(ValueError, match="left the mesh"):
        simulate_phase(_plan(1, 1), streams={0: 1}, weight_color=pe.COLOR_W, first=0,
                       sinks={(0, 0, "W"): 4}, **ONE)


def test_unmatched_color_is_an_error():
    plan = _plan(1, 1)
    plan["pes"][(0, 0)]["descs"][0]["color"] = 6
    with pytest.raises(ValueError, match="matches descriptors"):
        simulate_phase(plan, streams={0: 1}, weight_color=pe.COLOR_W, first=0,
                       sinks={(0, 0, "E"): 4}, **ONE)


def _north_sender(reps):
    return {"pes": {(0, 0): {"descs": {0: dict(op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=3,
                                               count=1, reps=reps, a_base=0, a_stride=4)}}},
            "routes": {(0, 0): [(3, "RAMP", ["N"])]}}


def test_gradient_link_takes_the_north_output():
    # Two PASS vectors north: tx words transfer 4..7 and 8..11 (the second fetched FIDLE 3, FB 4,
    # FL 5 while the first runs 3..6, then RUN 7..10) and leave the north output of the column 2
    # cycles later, on the gradient link (always ready): the last in 13.
    assert simulate_phase(_north_sender(2), grads={0: 8}, **ONE) == 13


def test_weight_links_run_in_parallel():
    # 1 x 2 mesh, one weight per column, each on its own link from cycle 3: both RAMPs take their
    # weight in 5, both rows are done at the end of 6. Column 0's PASS: FIDLE 7, FB 8, FL
    # 9, RUN 10..13, psum words transfer 11..14, at column 1's RAMP 14..17 (1 link + 2); its
    # STORE is done at the end of 18; the ADD: FIDLE 19 .. RUN 22..25, words 23..26, one link west
    # and out of the west edge 26..29. Column 0 keeps the result: its STORE takes the last word on
    # its RAMP2 channel in 29 too and ends; busy, a register of its active flag, drops a cycle
    # after a sink's count would rise: with the completion barrier the phase ends as a transfer in
    # 30 would.
    two = pe.forward_kernel(lanes=4, sram_words=4096, rows=1, cols=2, m=1, k=2)
    args = dict(streams={0: 1, 1: 1}, weight_color=pe.COLOR_W, first=3, sinks={(0, 0, "W"): 4},
                **dict(ONE, cols=2))
    assert simulate_phase(two, barrier=False, **args) == 29
    assert simulate_phase(two, **args) == 30


def test_west_stream_feeds_row():
    # The host plays 4 wavelets into the west edge from cycle 3 (one per cycle, 3..6); the PE's
    # STORE takes them at its RAMP 2 cycles later (5..8); the PASS waiting on that vector sends its
    # first word DEP_TO_TX_CYCLES after the last (14), its last 3 later, at the east edge 2 later.
    plan = {"pes": {(0, 0): {"descs": {
        0: dict(op=Op.STORE, enable=1, color=1, reps=1, lo=0, hi=1, dst_base=0),
        1: dict(op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=2, dep_a_en=1, dep_a=0,
                count=1, reps=1, a_base=0, a_stride=4)}}},
        "routes": {(0, 0): [(1, "W", ["RAMP"]), (2, "RAMP", ["E"])]}}
    last = simulate_phase(plan, sinks={(0, 0, "E"): 4}, west_in={0: (1, 4)}, west_first=3, **ONE)
    assert last == 8 + pe.DEP_TO_TX_CYCLES + 3 + 2


def test_pipelined_vector_unit_back_to_back():
    # mul_stages 2, add_stages 3 (the hardware preset): the two PASS vectors of
    # test_gradient_link_takes_the_north_output issue their elements in 3..6 and 7..10 as there;
    # each word leaves the element pipeline add_stages + 2 = 5 cycles after its issue (8..15, into
    # tx), transfers one later (9..16) and leaves the north output 2 later: the last in 18.
    assert pe.vec_out_cycles(2, 3) == 5
    assert simulate_phase(_north_sender(2), grads={0: 8}, mul_stages=2, add_stages=3, **ONE) == 18


def test_pipelined_dot_then_pass():
    # mul_stages 4, add_stages 1: a DOT word (4 lanes) issues its elements 2 apart (each waits
    # for the previous sum): RUN 3, 5, 7, 9; the word leaves 4 + 1 + 3 = 8 later (17), tx 18,
    # north output 20. The PASS after it is fetched 10..12 but its first element waits until
    # mul_stages + 2 = 6 cycles after the DOT's last (15: it must reach the adder after the DOT's
    # product), so it issues 15..18, leaves 18..21, tx 19..22, north output 21..24.
    plan = {"pes": {(0, 0): {"descs": {
        0: dict(op=Op.VEC, vmode=VecMode.DOT, enable=1, send=1, color=3, count=1, reps=1),
        1: dict(op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=3, count=1, reps=1)}}},
        "routes": {(0, 0): [(3, "RAMP", ["N"])]}}
    assert pe.dot_word_cycles(4, 4, 1) == 3 * 2 + 4
    assert simulate_phase(plan, grads={0: 5}, mul_stages=4, add_stages=1, **ONE) == 24
