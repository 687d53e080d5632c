"""Run the system simulation for a :class:`SystemRunConfig`: RTL wafers on the plain-Verilog
testbench (``sim/system/rtl_host.py``, Verilator or Icarus) or under cocotb
(``sim/system/bench_rtl_wafers.py``), model wafers under cocotb (``sim/system/bench_model_wafers.py``).

The digits are loaded and split here, in the calling process, and handed to the simulator as
``digits.npz`` in the output folder: the simulator's embedded Python then never imports
scikit-learn (seconds of start-up per run).
"""

import json
from pathlib import Path

import numpy as np

from sim.harness.swarmx_system import SwarmxSystemHarness
from sim.kit.runner import cached_verilog, run_bench
from sim.system.config import DATA_FILE

__all__ = ["DATA_FILE", "run_system"]


def run_system(run, *, console=False, run_name=None, log=None):
    """Simulate ``run``; returns the parsed ``results.json`` (raises AssertionError on a failed check).
    ``log(text)``: progress of the plain-Verilog path (default: silent unless ``console``)."""
    from models.pipeline.digits import load

    out = Path(run.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    x_tr, x_te, y_tr, y_te = load(run.seed)
    np.savez(out / DATA_FILE, x_train=x_tr, x_test=x_te, y_train=y_tr, y_test=y_te)
    simulator = run.resolved_simulator()
    if run.wafer == "rtl" and simulator != "cocotb":
        from sim.system.rtl_host import run_rtl_host
        if log is None:
            log = (lambda text: print(text, flush=True)) if console else (lambda text: None)
        return run_rtl_host(run, simulator=simulator, log=log)
    if run.wafer == "rtl":
        from sim.system.rtl import harness_depths, rtl_config
        from sim.system.rtl_build import DUT, system_sources
        cfg = rtl_config(run)
        # the Verilog the plain-Verilog path uses, generated once per configuration
        top = system_sources(cfg, harness_depths(cfg, run.dims))[0]
        bench, name = "sim.system.bench_rtl_wafers", DUT
    else:
        top = cached_verilog("system", SwarmxSystemHarness, run.systems, run.words)
        bench, name = "sim.system.bench_model_wafers", "system"
    run_bench(top, name, bench, params=run.as_dict(), testcase="train", console=console,
              run_name=run_name)
    return json.loads((out / "results.json").read_text())
