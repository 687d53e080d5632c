"""The step timeline (sim/system/timeline.py) on a hand-built step: phase placement, the SwarmX
and MemoryX lanes, and the MemoryX update with and without the seed's overlap."""

import pytest

from models.pipeline.timing import TimingParams
from sim.system.timeline import draw_timeline, step_timeline

# dims 4-3-2: layer 0 has 12 parameters, layer 1 has 6.
PHASES = [dict(phase="forward", layer=0, config_cycles=10, run_cycles=100, stream_cycles=80),
          dict(phase="forward", layer=1, config_cycles=5, run_cycles=50, stream_cycles=40),
          dict(phase="backward-data", layer=1, config_cycles=5, run_cycles=30, stream_cycles=20),
          dict(phase="backward-weight", layer=1, config_cycles=5, run_cycles=40, stream_cycles=0),
          dict(phase="backward-weight", layer=0, config_cycles=10, run_cycles=60, stream_cycles=0)]


@pytest.fixture
def params():
    p = TimingParams(memoryx_optimizer="sgd", memoryx_update_latency=5)
    return p.replace(memoryx_update_bytes_per_cycle=p.update_bytes_per_parameter)  # 1 cycle/param


def test_phases_and_lanes(params):
    tl = step_timeline(PHASES, (4, 3, 2), params)["overlap"]
    runs = [(s["label"], s["start"], s["cycles"]) for s in tl["segments"]
            if s["lane"] == "wafers" and s["kind"] != "config"]
    # configuration then run, back to back: 0+10, 110+5, 165+5, 200+5, 245+10; then the next step
    assert runs[:5] == [("L0 fwd", 10, 100), ("L1 fwd", 115, 50), ("L1 bwd-data", 170, 30),
                        ("L1 bwd-wgt", 205, 40), ("L0 bwd-wgt", 255, 60)]
    swarmx = [(s["kind"], s["start"], s["cycles"]) for s in tl["segments"] if s["lane"] == "SwarmX"]
    assert swarmx == [("broadcast", 10, 80), ("broadcast", 115, 40), ("broadcast", 170, 20),
                      ("reduce", 205, 40), ("reduce", 255, 60)]
    assert tl["update_cycles"] == {"1": 6, "0": 12}


def test_update_overlap(params):
    tl = step_timeline(PHASES, (4, 3, 2), params)
    upd = {k: [(s["label"], s["start"], s["cycles"]) for s in v["segments"] if s["kind"] == "update"]
           for k, v in tl.items()}
    # overlap: layer 1 from its gradient (245), layer 0 from its own (315); ready 327 + 5; the next
    # step's layer-0 stream at max(315 + 10, 332)
    assert upd["overlap"] == [("upd L1", 245, 6), ("upd L0", 315, 12)]
    assert (tl["overlap"]["step_cycles"], tl["overlap"]["memoryx_exposed_cycles"]) == (332 - 10, 332 - 325)
    # without: both after the backward pass (315), one at a time; ready 333 + 5
    assert upd["no_overlap"] == [("upd L1", 315, 6), ("upd L0", 321, 12)]
    assert (tl["no_overlap"]["step_cycles"], tl["no_overlap"]["memoryx_exposed_cycles"]) == (338 - 10, 338 - 325)


def test_draw(params, tmp_path):
    draw_timeline(step_timeline(PHASES, (4, 3, 2), params), tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
