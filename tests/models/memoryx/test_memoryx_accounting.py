"""Bytes-per-parameter accounting, the seed's 20 bytes/parameter arithmetic, and the planner."""

import pytest

from models.memoryx import (
    SEED_EXAMPLE,
    SGD,
    Adam,
    AdamW,
    MemoryXRates,
    Momentum,
    bytes_per_parameter,
    max_parameters,
    plan_bandwidth,
    plan_capacity,
    step_timing,
    update_bytes_per_parameter,
)


def test_bytes_per_parameter_table():
    assert bytes_per_parameter(AdamW()) == {"master": 4, "exp_avg": 4, "exp_avg_sq": 4, "grad": 4, "bf16": 2,
                                            "total": 18}
    assert bytes_per_parameter(Adam())["total"] == 18
    assert bytes_per_parameter(Momentum()) == {"master": 4, "momentum_buffer": 4, "grad": 4, "bf16": 2,
                                               "total": 14}
    assert bytes_per_parameter(SGD()) == {"master": 4, "grad": 4, "bf16": 2, "total": 10}
    # the optimizer reads master, state, gradient and writes master, state, bf16 copy
    assert update_bytes_per_parameter(AdamW()) == {"read": 16, "write": 14, "total": 30}
    assert update_bytes_per_parameter(SGD()) == {"read": 8, "write": 6, "total": 14}
    with pytest.raises(ValueError, match="optimizer instance"):
        bytes_per_parameter("adam")


def test_seed_example_120T_parameters_in_2_4PB():
    assert SEED_EXAMPLE["bytes_per_parameter"] == 20.0
    # 2.4 PB / 20 B = 120 T parameters; 4 TB / 20 B = 200 G parameters (the range of MemoryX)
    assert max_parameters(2.4e15, 20) == 120 * 10**12
    assert max_parameters(4e12, 20) == 200 * 10**9
    # AdamW needs 18 of the 20 bytes: 120 T fits in 4 TB DRAM + 2.396 PB flash, with 2 B/param to spare
    plan = plan_capacity(120e12, AdamW(), dram_bytes=4e12, flash_bytes=2.396e15)
    assert plan.fits and not plan.fits_in_dram
    assert plan.bytes_needed == 120e12 * 18
    assert plan.headroom_bytes == pytest.approx(120e12 * 2, rel=1e-12)
    assert plan.dram_fraction == pytest.approx(4e12 / 2.16e15)
    # at exactly 20 B/param 120 T fits with nothing to spare; 121 T does not
    assert plan_capacity(120e12, 20, 4e12, 2.396e15).headroom_bytes == pytest.approx(0.0, abs=1e3)
    assert not plan_capacity(121e12, 20, 4e12, 2.396e15).fits
    assert plan_capacity(200e9, SGD(), dram_bytes=4e12).fits_in_dram       # 2 TB


def test_bandwidth_plan_hand_derived():
    # 1 G parameters, 1000 samples per wafer, 1 PFLOP/s: forward 2e12 flops = 2 ms, backward 4 ms
    p = plan_bandwidth(1e9, AdamW(), samples_per_wafer=1000, wafer_flops=1e15, n_wafers=16)
    assert (p.forward_seconds, p.backward_seconds) == pytest.approx((2e-3, 4e-3))
    assert p.step_seconds == pytest.approx(6e-3)
    assert p.stream_out_bytes == 4e9 and p.gradient_in_bytes == 4e9 and p.update_bytes == 30e9
    assert p.stream_out_bw == pytest.approx(2e9 / 2e-3)        # 2 GB of bf16 in the 2 ms forward pass
    assert p.gradient_in_bw == pytest.approx(4e9 / 4e-3)
    assert p.update_bw == pytest.approx(30e9 / 4e-3)
    # SwarmX broadcast/reduce: the same with 1 or 16 wafers; without it, 16x
    one = plan_bandwidth(1e9, AdamW(), 1000, 1e15, n_wafers=1)
    assert one.stream_out_bw == p.stream_out_bw
    no_tree = plan_bandwidth(1e9, AdamW(), 1000, 1e15, n_wafers=16, swarmx=False)
    assert no_tree.stream_out_bw == pytest.approx(16 * p.stream_out_bw)
    assert no_tree.update_bw == p.update_bw
    # fixed global batch 16000: per-wafer batch shrinks, bandwidth grows with N
    g = [plan_bandwidth(1e9, AdamW(), 16000 / n, 1e15, n_wafers=n).stream_out_bw for n in (1, 4, 16)]
    assert g[1] == pytest.approx(4 * g[0]) and g[2] == pytest.approx(16 * g[0])
    half = plan_bandwidth(1e9, AdamW(), 1000, 1e15, utilization=0.5)
    assert half.stream_out_bw == pytest.approx(p.stream_out_bw / 2)
    with pytest.raises(ValueError):
        plan_bandwidth(1e9, AdamW(), 0, 1e15)


def test_planner_rates_keep_the_timing_model_busy():
    # with the planned bandwidths every phase is compute-bound and only layer 0's update is exposed
    layers = [3e6, 1e6, 2e6, 2e6]
    plan = plan_bandwidth(sum(layers), AdamW(), 500, 1e14)
    rates = MemoryXRates(plan.stream_out_bw, plan.gradient_in_bw, plan.update_bw, 1e14)
    t = step_timing(layers, 500, rates, AdamW())
    assert t.busy_seconds == pytest.approx(plan.step_seconds)
    assert t.exposed_seconds == pytest.approx(plan.backward_seconds * layers[0] / sum(layers))
    # half the stream bandwidth: the forward pass takes twice as long; in the backward pass the stream
    # now takes exactly the compute time (2 P_l / (bw / 2) = 4 P_l B / F), so it is unchanged
    slower = MemoryXRates(plan.stream_out_bw / 2, plan.gradient_in_bw, plan.update_bw, 1e14)
    assert step_timing(layers, 500, slower, AdamW()).busy_seconds == pytest.approx(
        plan.step_seconds + plan.forward_seconds)
