"""Timing model of the update/stream-out overlap, against hand-derived schedules."""

import pytest

from models.memoryx import SGD, AdamW, MemoryXRates, step_timing

# layers of 1, 2, 1 M parameters; 1 GB/s stream and gradient links, 10 GB/s update memory, compute
# negligible (1e14 flop/s, 1000 samples): S = 2, 4, 2 ms; G = 4, 8, 4 ms; AdamW U = 30 B * P / 10 GB/s
# = 3, 6, 3 ms. Forward 2 + 4 + 2 = 8 ms, backward (gradient-bound) 4 + 8 + 4 = 16 ms.
RATES = MemoryXRates(stream_bw=1e9, gradient_bw=1e9, update_bw=1e10, wafer_flops=1e14)
LAYERS = [1e6, 2e6, 1e6]
MS = 1e-3


def test_overlap_hand_derived():
    t = step_timing(LAYERS, 1000, RATES, AdamW())
    # gradients in at 12 (layer 2), 20 (layer 1), 24 ms (layer 0); updates 12-15, 20-26, then layer 0
    # waits for the engine: 26-29; the next forward pass starts at 29 ms: 5 ms exposed
    assert [l.grad_in_at / MS for l in t.layers] == pytest.approx([24, 20, 12])
    assert [l.update_start / MS for l in t.layers] == pytest.approx([26, 20, 12])
    assert [l.update_end / MS for l in t.layers] == pytest.approx([29, 26, 15])
    assert [l.next_forward_at / MS for l in t.layers] == pytest.approx([29, 31, 35])
    assert t.step_seconds / MS == pytest.approx(29)
    assert t.busy_seconds / MS == pytest.approx(24)
    assert t.exposed_seconds / MS == pytest.approx(5)
    assert t.utilization == pytest.approx(24 / 29)
    assert all(l.slack >= 0 for l in t.layers)


def test_without_overlap_all_updates_are_exposed():
    t = step_timing(LAYERS, 1000, RATES, AdamW(), overlap=False)
    # updates after the backward pass: 24-27 (layer 2), 27-33 (layer 1), 33-36 (layer 0)
    assert t.exposed_seconds / MS == pytest.approx(12)
    assert t.step_seconds / MS == pytest.approx(36)


def test_fast_update_exposes_only_the_first_layer():
    # SGD moves 14 B/param: U = 1.4, 2.8, 1.4 ms, each done before the next gradient arrives
    t = step_timing(LAYERS, 1000, RATES, SGD())
    assert t.exposed_seconds / MS == pytest.approx(1.4)


def test_compute_bound_phases():
    # 100 samples at 1e11 flop/s: F = 2 P B / 1e11 = 2, 4, 2 ms = S; Bk = 4, 8, 4 ms = G
    t = step_timing(LAYERS, 100, MemoryXRates(1e9, 1e9, 1e10, 1e11), AdamW())
    assert [l.forward / MS for l in t.layers] == pytest.approx([2, 4, 2])
    t = step_timing(LAYERS, 1000, MemoryXRates(1e9, 1e9, 1e10, 1e11), AdamW())
    assert [l.forward / MS for l in t.layers] == pytest.approx([20, 40, 20])
    assert [l.backward / MS for l in t.layers] == pytest.approx([40, 80, 40])
    assert t.exposed_seconds / MS == pytest.approx(3)      # only layer 0's update


def test_bad_arguments():
    with pytest.raises(ValueError, match="stream_bw"):
        MemoryXRates(0, 1, 1, 1)
    with pytest.raises(ValueError, match="layer_params"):
        step_timing([], 1, RATES, AdamW())
