"""The cycle-level fabric model against properties stated in docs/router.md / hdl/router.py,
independently of the RTL."""

import random

import pytest

from arch.ports import RAMP2, Port
from arch.router_map import ErrorCode
from models.fabric import (
    CREDIT_LOOP,
    Deadlock,
    FabricModel,
    boundary_ports,
    walk,
    xy_path,
    xy_routes,
    zero_load_latency,
)


def _single(rows, cols, colors, flows, depth=4):
    routes = xy_routes(rows, cols, colors, flows)
    return FabricModel(rows, cols, colors, depth, routes), routes


def test_boundary_ports_count():
    assert len(boundary_ports(1, 1)) == 5
    assert len(boundary_ports(4, 4)) == 16 + 16
    assert len(boundary_ports(2, 3)) == 6 + 2 * 3 + 2 * 2


@pytest.mark.parametrize("dst", [(0, 0, Port.RAMP), (2, 3, Port.RAMP), (3, 3, Port.E),
                                 (3, 1, Port.S), (0, 2, Port.N)])
def test_zero_load_latency_is_hops_plus_two(dst):
    src = (0, 0, Port.RAMP)
    model, _ = _single(4, 4, 2, [(1, src, [dst])])
    hops = len(xy_path(4, 4, src, dst)) - 1
    acc, dl = model.run({src: [(7, 1, 0)]})
    assert dl == [(acc[src][0] + zero_load_latency(hops), dst, (7, 1, 0))]


@pytest.mark.parametrize("depth", [3, 4])
def test_one_wavelet_per_cycle_from_depth_three(depth):
    src, dst = (1, 0, Port.W), (1, 3, Port.E)
    model, _ = _single(2, 4, 1, [(0, src, [dst])], depth=depth)
    acc, dl = model.run({src: [(i, 0, 0) for i in range(100)]})
    assert acc[src] == list(range(100))
    assert [t for t, _, _ in dl] == [t + zero_load_latency(3) for t in range(100)]


@pytest.mark.parametrize("depth", [1, 2])
def test_shallow_channels_move_depth_words_per_credit_loop(depth):
    """The credit loop is three cycles (written, sent, freed): a ``depth``-deep channel moves
    ``depth`` wavelets per 3 cycles, through links and boundary inputs alike."""
    src, dst = (0, 0, Port.W), (0, 1, Port.E)
    model, _ = _single(1, 2, 1, [(0, src, [dst])], depth=depth)
    acc, dl = model.run({src: [(i, 0, 0) for i in range(48)]})
    assert CREDIT_LOOP == 3
    assert acc[src] == [3 * (i // depth) + i % depth for i in range(48)]
    assert [t for t, _, _ in dl] == [t + zero_load_latency(1) for t in acc[src]]


def test_multicast_each_copy_once_with_independent_stalls():
    src = (0, 0, Port.RAMP)
    dsts = [(0, 0, Port.N), (0, 0, Port.E), (0, 0, Port.S), (0, 0, Port.W), (0, 0, Port.RAMP)]
    model, _ = _single(1, 1, 1, [(0, src, dsts)])
    rng = random.Random(1)
    stalls = {d: [rng.random() < 0.6 for _ in range(5000)] for d in dsts}
    words = [(i, 0, i & 1) for i in range(200)]
    _, dl = model.run({src: words}, ready={d: (lambda t, s=stalls[d]: not s[t]) for d in dsts})
    for d in dsts:
        got = [(t, w) for t, p, w in dl if p == d]
        assert [w for _, w in got] == words
        assert all(not stalls[d][t] for t, _ in got), "transfer in a cycle with ready low"


def test_round_robin_shares_an_output_fairly():
    """Three inputs feeding one output on one color: each gets one third of the cycles."""
    dst = (0, 0, Port.E)
    srcs = [(0, 0, Port.N), (0, 0, Port.S), (0, 0, Port.W)]
    model, _ = _single(1, 1, 1, [(0, s, [dst]) for s in srcs])
    inputs = {s: [(k << 24 | i, 0, 0) for i in range(300)] for k, s in enumerate(srcs)}
    _, dl = model.run(inputs)
    first = [w[0] >> 24 for _, _, w in dl[:90]]
    assert first == [0, 1, 2] * 30


def test_stalled_color_does_not_slow_another():
    dst = (0, 1, Port.RAMP)
    model, _ = _single(1, 2, 2, [(0, (0, 0, Port.RAMP), [dst]), (1, (0, 0, Port.W), [dst])])
    inputs = {(0, 0, Port.RAMP): [(i, 0, 0) for i in range(20)],
              (0, 0, Port.W): [(i, 1, 0) for i in range(100)]}
    acc, dl = model.run(inputs, accept={dst: 0b10}, stuck_ok=True, stall_limit=50)
    ts = [t for t, _, w in dl]
    assert all(w[1] == 1 for _, _, w in dl) and len(dl) == 100
    # Color 0 may use the shared link only while it holds credits (vc_depth of them): after
    # that color 1 has every cycle.
    assert ts[-1] - ts[0] <= 99 + 4
    assert ts[10:] == list(range(ts[10], ts[10] + 90))
    assert len(acc[(0, 0, Port.RAMP)]) == 2 * 4     # two routers x vc_depth
    with pytest.raises(Deadlock, match="occupancy"):
        model.run({}, accept={dst: 0b10}, stall_limit=10)


def test_unrouted_wavelet_is_held_then_delivered():
    model = FabricModel(1, 1, 2, 2)
    src = (0, 0, Port.N)
    acc, dl = model.run({src: [(1, 1, 0)]}, stuck_ok=True, stall_limit=5)
    assert dl == [] and model.errors[(0, 0)] == (ErrorCode.NO_ROUTE, 1, Port.N)
    assert model.write_route(0, 0, 1, Port.N, 1 << Port.S) == 0
    model.clear_error(0, 0)
    _, dl = model.run({})
    assert [(p, w) for _, p, w in dl] == [((0, 0, Port.S), (1, 1, 0))]


def test_config_errors():
    model = FabricModel(1, 1, 2, 2)
    assert model.write_route(0, 0, 0, Port.E, 0x20) == ErrorCode.BAD_ROUTE
    assert model.errors[(0, 0)] == (ErrorCode.BAD_ROUTE, 0, Port.E)
    model.clear_error(0, 0)
    assert model.write_route(0, 0, 2, Port.E, 1) == ErrorCode.BAD_ADDR
    model.clear_error(0, 0)
    model.write_route(0, 0, 0, Port.E, 1 << Port.W)
    model.run({(0, 0, Port.E): [(i, 0, 0) for i in range(3)]},
              ready={(0, 0, Port.W): lambda t: False}, stuck_ok=True, stall_limit=5)
    assert model.write_route(0, 0, 0, Port.E, 1 << Port.S) == ErrorCode.BUSY_REWRITE
    assert model.routes[(0, 0)][0][Port.E] == 1 << Port.W
    with pytest.raises(ValueError, match="num_colors"):
        FabricModel(1, 1, 33, 2)


def test_walk_detects_loops():
    routes = {(0, 0): [[0] * 5], (0, 1): [[0] * 5]}
    routes[(0, 0)][0][Port.RAMP] = 1 << Port.E
    routes[(0, 1)][0][Port.W] = 1 << Port.W
    routes[(0, 0)][0][Port.E] = 1 << Port.E
    with pytest.raises(ValueError, match="loop"):
        walk(routes, 1, 2, 0, 0, Port.RAMP, 0)


def test_second_ramp_channel_takes_its_colors_in_parallel():
    """Colors set in a router's RAMP2 register leave on (r, q, RAMP2), the others on RAMP; both
    channels deliver one wavelet per cycle at once, so two sources into one RAMP move two words
    per cycle; a multicast's RAMP copy leaves once, on the channel of its color."""
    west, north = (0, 0, Port.W), (0, 0, Port.N)
    flows = [(0, west, [(0, 0, Port.RAMP)]), (1, north, [(0, 0, Port.RAMP), (0, 0, Port.E)])]
    routes = xy_routes(1, 1, 2, flows)
    one = FabricModel(1, 1, 2, 4, routes)
    two = FabricModel(1, 1, 2, 4, routes, ramp2={(0, 0): 0b10})
    n = 40
    inputs = {west: [(i, 0, 0) for i in range(n)], north: [(i, 1, 0) for i in range(n)]}
    _, dl1 = one.run(inputs)
    _, dl2 = two.run(inputs)
    assert {p for _, p, w in dl2 if w[1] == 1} == {(0, 0, RAMP2), (0, 0, Port.E)}
    assert {p for _, p, w in dl2 if w[1] == 0} == {(0, 0, Port.RAMP)}
    ramp = [t for t, p, _ in dl1 if p == (0, 0, Port.RAMP)]
    both = [t for t, p, _ in dl2 if p in ((0, 0, Port.RAMP), (0, 0, RAMP2))]
    assert len(ramp) == len(both) == 2 * n
    assert max(ramp) - min(ramp) + 1 == 2 * n          # one RAMP: one word per cycle
    assert max(both) - min(both) + 1 == n              # two channels: two per cycle
    assert walk(routes, 1, 1, *north, 1, ramp2=two.ramp2) == {(0, 0, RAMP2): 0, (0, 0, Port.E): 0}
