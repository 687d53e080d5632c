import pytest

from hdl.config import Config
from sim.kit.runner import compare_simulators, run_bench, top_verilog


@pytest.mark.parametrize("stall_prob", [0.0, 0.3, 0.8])
def test_skid_buffer(stall_prob):
    run_bench(top_verilog("skid_buffer", Config()), "skid_buffer", "sim.benches.skid_buffer",
              params={"words": 2000, "gap_prob": 0.3, "stall_prob": stall_prob})


def test_skid_buffer_same_under_icarus_and_verilator(icarus):
    """The bench under both simulators: the same outputs at every cycle (sim.kit.trace)."""
    with compare_simulators():
        test_skid_buffer(0.3)


def test_verilator_build_is_reused():
    """A second run of a bench under Verilator compiles nothing: it reuses the cached binary
    (sim.kit.runner: build stamp of sources, Verilator version and flags)."""
    def run():
        test_dir = run_bench(top_verilog("skid_buffer", Config()), "skid_buffer", "sim.benches.skid_buffer",
                             params={"words": 50, "gap_prob": 0.3, "stall_prob": 0.3}, simulator="verilator")
        return (test_dir.parent / "skid_buffer").stat().st_mtime_ns
    assert run() == run()
