"""The system bench (``make sim``) in small configurations: SwarmX RTL in the training loop,
bit-exact against the golden pipeline model after every step, cycles against the SwarmX model."""

import pytest

from sim.kit.runner import bench_simulator, compare_simulators
from sim.system.config import SystemRunConfig
from sim.system.run import run_system


@pytest.mark.parametrize("systems,stall,optimizer", [(2, 0, "adamw"), (3, 96, "momentum")])
def test_system_training(tmp_path, systems, stall, optimizer):
    run = SystemRunConfig(dims=(64, 12, 10), systems=systems, batch=8, steps=3, stall=stall,
                          optimizer=optimizer, eval_every=3, out_dir=str(tmp_path),
                          wafer="model")
    results = run_system(run)
    assert [s["step"] for s in results["steps"]] == [1, 2, 3]
    assert (tmp_path / "weights.safetensors").stat().st_size > 4 * run.words
    for s in results["steps"]:
        if stall == 0:
            assert s["swarmx_broadcast_cycles"] == s["model_broadcast_cycles"]
            assert s["swarmx_reduce_cycles"] == s["model_reduce_cycles"]
        else:
            assert s["swarmx_broadcast_cycles"] > s["model_broadcast_cycles"]


@pytest.mark.slow
def test_system_training_rtl_wafers_cocotb(tmp_path, check_rtl_results):
    """The default bench, one step, under cocotb (``--sim cocotb``): N = 2 RTL wafers of 2 x 2
    PE tiles under the SwarmX RTL, with random gaps at the weight player and back-pressure at
    every recorder (stall 64; the cycles without stalls equal the model's on the same RTL in
    test_rtl_host.py, whose Verilog this shares)."""
    run = SystemRunConfig(steps=1, eval_every=1, stall=64, out_dir=str(tmp_path), wafer="rtl",
                          simulator="cocotb")
    results = run_system(run)
    assert results["simulator"] == "cocotb+" + bench_simulator("system_rtl")
    check_rtl_results(results, run)


def test_rtl_wafer_refuses_batch():
    from sim.system.rtl import rtl_config
    with pytest.raises(ValueError, match="batch per system must be 8"):
        rtl_config(SystemRunConfig(batch=16, wafer="rtl"))


@pytest.mark.parametrize("field,value,message", [
    ("dims", (32, 10), "must start with 64"), ("systems", 0, "systems must be in 1..16"),
    ("mesh", (2,), "two positive ints"), ("optimizer", "lamb", "must be one of"),
    ("stall", 256, "0..255"), ("wafer", "fpga", "wafer must be one of"),
    ("simulator", "xcelium", "simulator must be one of"), ("threads", 0, "threads must be in 1..64"),
    ("threads", True, "threads must be in 1..64"),
])
def test_bad_options(field, value, message):
    with pytest.raises(ValueError, match=message):
        SystemRunConfig(**{field: value})


def test_model_wafers_need_cocotb():
    with pytest.raises(ValueError, match="auto or cocotb with model wafers"):
        SystemRunConfig(wafer="model", simulator="verilator")
    assert SystemRunConfig(wafer="model").resolved_simulator() == "cocotb"


@pytest.mark.slow
def test_system_bench_same_under_icarus_and_verilator(tmp_path, icarus):
    """The system bench (MemoryX -> SwarmX RTL -> model wafers) under both simulators: the same
    outputs at every cycle (sim.kit.trace)."""
    run = SystemRunConfig(dims=(64, 12, 10), systems=2, batch=8, steps=1, stall=32, eval_every=1,
                          out_dir=str(tmp_path), wafer="model")
    with compare_simulators():
        results = run_system(run)
    assert [s["step"] for s in results["steps"]] == [1]
