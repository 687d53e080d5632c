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
    run_bench(SwarmxSystemHarness(run.systems, run.words), "system", "sim.bench_system",
              params=run.as_dict(), testcase="train", console=console, run_name=run_name)
    return json.loads((out / "results.json").read_text())
