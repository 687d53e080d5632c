"""The standalone router: cocotb bench (configuration, errors, isolation, timing) and bulk
random multi-color traffic in the plain-Verilog harness, cycle-exact against the model."""

import random

import pytest
from amaranth.back import rtlil

from arch.ports import RAMP2, Port
from arch.router_map import ADDR_RAMP2
from hdl.config import Config, preset
from hdl.router import Router
from models.fabric import FabricModel, walk
from sim.benches.mesh import (
    FabricPorts,
    Program,
    Traffic,
    fabric_verilog,
    random_flows,
    random_timing,
    random_traffic,
    run_harness,
    scoreboard,
)
from sim.kit.runner import compare_simulators, run_bench, top_verilog


@pytest.mark.parametrize("num_colors,vc_depth", [(4, 2), (24, 4)])
def test_router_bench(num_colors, vc_depth):
    cfg = Config(num_colors=num_colors, vc_depth=vc_depth)
    run_bench(top_verilog("router", cfg), "router", "sim.benches.router",
              params={"num_colors": num_colors, "vc_depth": vc_depth})


def test_router_links_signature():
    r = Router(Config(num_colors=4), links=[Port.N, Port.E])
    r._MustUse__silence = True      # inspected, never elaborated
    assert "n_accept" not in r.signature.members and "s_accept" in r.signature.members
    with pytest.raises(ValueError, match="RAMP"):
        Router(Config(), links=[Port.RAMP])


def test_router_is_built_from_its_own_fields():
    """A router reads ``num_colors`` and ``vc_depth`` only, so meshes share routers keyed by
    ``Config.router()`` (hdl/mesh.py): a router of a full configuration is the same circuit."""
    cfg = preset("tiny", vc_depth=2, lanes=1, sram_words=64, mul_stages=4, mesh_rows=3)
    assert cfg.router() == Config(num_colors=4, vc_depth=2)
    assert preset("hardware").router() == preset("system").router()
    links = [Port.S, Port.E]
    assert (rtlil.convert(Router(cfg, links=links), name="r", emit_src=False)
            == rtlil.convert(Router(cfg.router(), links=links), name="r", emit_src=False))


@pytest.mark.parametrize("seed", [1, 2])
def test_router_random_traffic(seed, tmp_path):
    """Random unicast/multicast routes on all five ports, random colors on the RAMP's second
    channel, random gaps and back-pressure."""
    cfg = Config(num_colors=6, vc_depth=2)
    ports = FabricPorts(1, 1, cfg.num_colors, mesh=False)
    rng = random.Random(seed)
    flows, routes = random_flows(rng, 1, 1, cfg.num_colors, max_sources=3, max_dests=5)
    ramp2 = {(0, 0): rng.getrandbits(cfg.num_colors)}
    traffic = Traffic(ports, 20000)
    sent = random_traffic(rng, ports, flows, 0, 800, traffic)
    random_timing(rng, ports, traffic)
    prog = Program(ports)
    prog.write_routes(routes)
    prog.write(ADDR_RAMP2, ramp2[(0, 0)])
    copies = sum(len(walk(routes, 1, 1, *s, w[1], ramp2=ramp2)) for s, ws in sent.items() for w in ws)
    prog.phase(copies)
    log = run_harness(fabric_verilog("router", cfg), "router", ports, prog, traffic, tmp_path)
    assert not log.deadlocked, "\n".join(log.dump)
    assert scoreboard(routes, 1, 1, sent, log.delivered[0], ramp2=ramp2) == copies
    assert any(p[2] == RAMP2 for _, p, _ in log.delivered[0]), "nothing left on the RAMP's second channel"
    model = FabricModel(1, 1, cfg.num_colors, cfg.vc_depth, routes, ramp2=ramp2)
    acc, dl = model.run(traffic.phase_inputs(0), gaps=traffic.gaps_fn(), ready=traffic.ready_fn())
    assert dict(log.accepted[0]) == acc, "input accept cycles differ from the model"
    assert log.delivered[0] == dl, "output transfers differ from the model (cycle-exact)"


def test_router_coverage_run_fills_every_bin(tmp_path):
    """The coverage-directed run (``bench router``): cycle-exact against the model and
    scoreboarded, and every input x output x color class x back-pressure x fan-out bin hit."""
    from sim.benches.router_coverage import coverage_scenario, router_coverage

    sc, sent = coverage_scenario(random.Random(1))
    log = sc.run(tmp_path)
    assert not log.deadlocked, "\n".join(log.dump)
    report = router_coverage(sc, sent, log)
    assert report["reachable"] == report["bins"] == 300
    assert report["empty_reachable"] == []


def test_router_bench_same_under_icarus_and_verilator(icarus):
    """The cocotb bench under both simulators: the same outputs at every cycle (sim.kit.trace)."""
    with compare_simulators():
        test_router_bench(4, 2)
