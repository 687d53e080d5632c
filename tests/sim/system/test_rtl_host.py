"""The RTL-wafer system on the plain-Verilog testbench, one simulator process per phase
(sim/system/rtl_host.py): under Verilator in ``make sim``'s default configuration (built at -O0
here, tests/conftest.py), on ``--mesh 4x4`` wafers in small, and under Icarus on the smallest
system. The training loop checks the loss and every master weight bit for bit after every step
and every phase's cycles against the schedule's model; these tests check what the runs report."""


import numpy as np
import pytest

from sim.system.config import SystemRunConfig
from sim.system.rtl_host import cfg_words, read_hex, write_hex
from sim.system.run import run_system


@pytest.mark.slow
@pytest.mark.xdist_group("system-tb-hardware")      # one Verilator build: one worker runs both
@pytest.mark.parametrize("stall", [0, 64])
def test_default_system_under_verilator(tmp_path, stall, check_rtl_results):
    """``make sim``'s hardware and network (``stall`` is a run-time
    plusarg), two steps: bit-exact, cycles equal to the model without stalls, at least its
    formula with."""
    run = SystemRunConfig(steps=2, eval_every=1, stall=stall, out_dir=str(tmp_path),
                          simulator="verilator")
    results = run_system(run)
    check_rtl_results(results, run)
    assert results["simulator"] == "verilator"
    assert results["simulator_phases"] == 2 * 5
    assert results["simulator_cycles"] > results["simulated_cycles"] > 0
    assert results["cycles_per_cpu_second"] > 0
    assert results["simulated_pe_tiles"] == 2 * 2 * 2
    assert results["pe_cycles_per_cpu_second"] == 8 * results["simulator_cycles"] / results["simulator_cpu_seconds"]
    if stall == 0:
        assert [s["cycles"] for s in results["steps"]] == [3239, 2968]


@pytest.mark.slow
def test_mesh4x4_wafer_under_verilator(tmp_path, check_rtl_results):
    """The ``--mesh 4x4`` scenario in small (one wafer of 4 x 4 PE tiles, batch 16, 64-16-10, one
    step) on the same testbench."""
    run = SystemRunConfig(mesh=(4, 4), systems=1, batch=16, dims=(64, 16, 10), steps=1,
                          eval_every=1, out_dir=str(tmp_path), simulator="verilator")
    results = run_system(run)
    check_rtl_results(results, run)
    assert results["simulator"] == "verilator" and results["hardware"]["mesh_rows"] == 4


@pytest.mark.slow
def test_small_system_under_icarus(tmp_path, check_rtl_results, icarus):
    """The same testbench under Icarus (``--sim icarus``) on the smallest system (one wafer of 2 x
    2 tiles, 64-8-10, one step): bit-exact, every phase's cycles equal to the schedule model's,
    as under Verilator."""
    run = SystemRunConfig(systems=1, dims=(64, 8, 10), steps=1, eval_every=1, out_dir=str(tmp_path),
                          simulator="icarus")
    results = run_system(run)
    check_rtl_results(results, run)
    assert results["simulator"] == "icarus"


def test_hex_files_round_trip(tmp_path):
    words = np.array([0, 1, 0x1_2345_6789, (1 << 48) - 1], dtype=np.uint64)
    write_hex(tmp_path / "a.hex", words)
    assert read_hex(tmp_path / "a.hex", 4).tolist() == words.tolist()
    # $writememh output of either simulator: comments and addresses are skipped.
    (tmp_path / "b.hex").write_text("// $writememh\n@0\n1f\n20 // x\n")
    assert read_hex(tmp_path / "b.hex", 2).tolist() == [0x1F, 0x20]
    with pytest.raises(AssertionError, match="expected 3"):
        read_hex(tmp_path / "b.hex", 3)


def test_cfg_words_match_the_harness_layout():
    from sim.harness.rtl_system import cfg_word
    writes = [(0x1234, 0xDEADBEEF), (0xFFFF, 0), (7, 0xFFFFFFFF)]
    assert cfg_words(writes).tolist() == [cfg_word(a, v) for a, v in writes]
