"""Run the system bench (``sim/bench_system.py``) for a :class:`SystemRunConfig`.

The digits are loaded and split here, in the calling process, and handed to the simulator as
``digits.npz`` in the output folder: the simulator's embedded Python then never imports
scikit-learn (seconds of start-up per run).
"""

import json
from pathlib import Path

import numpy as np

from sim.runner import run_bench
from sim.system_harness import SwarmxSystemHarness

__all__ = ["DATA_FILE", "run_system"]

DATA_FILE = "digits.npz"


def run_system(run, *, console=False, run_name=None):
    """Simulate ``run``; returns the parsed ``results.json`` (raises AssertionError on a failed check)."""
    from models.pipeline.digits import load

    out = Path(run.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    x_tr, x_te, y_tr, y_te = load(run.seed)
    np.savez(out / DATA_FILE, x_train=x_tr, x_test=x_te, y_train=y_tr, y_test=y_te)
    if run.wafer == "rtl":
        from sim.system_rtl import harness_depths, rtl_config
        from sim.system_rtl_harness import RtlSystemHarness
        cfg = rtl_config(run)
        top = RtlSystemHarness(cfg, **harness_depths(cfg, run.dims))
        bench, name = "sim.bench_system_rtl", "system_rtl"
    else:
        top, bench, name = SwarmxSystemHarness(run.systems, run.words), "sim.bench_system", "system"
    run_bench(top, name, bench, params=run.as_dict(), testcase="train", console=console,
              run_name=run_name)
    return json.loads((out / "results.json").read_text())
