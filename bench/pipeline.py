"""Weight-streaming pipeline model: timing answers (bench/configs/scaling.toml, plots in
build/bench/pipeline/), the speed of the exact kernels, and the load_digits reference check."""

import time
from pathlib import Path

import numpy as np

from models.pipeline import kernels
from models.pipeline.digits import digits_experiment
from models.pipeline.scaling import DEFAULT_CONFIG, analyse, load_config, write_plots

OUT = Path(__file__).resolve().parents[1] / "build" / "bench" / "pipeline"


def kernel_speed(mesh=(64, 64), m=1024, k=1024, batch=64, seed=0):
    """Wall-clock seconds of each exact kernel for one layer (vectorized numpy)."""
    rng = np.random.default_rng(seed)
    w = kernels.to_bf16(rng.standard_normal((m, k)) / np.sqrt(k))
    x = kernels.relu_bf16(rng.standard_normal((k, batch)).astype(np.float32))
    dz = kernels.to_bf16(rng.standard_normal((m, batch)) * 1e-3)
    rows = []
    for name, fn in (("forward", lambda: kernels.forward(w, x, mesh)),
                     ("backward-data", lambda: kernels.backward_data(w, dz, x)),
                     ("backward-weight", lambda: kernels.backward_weight(dz, x, mesh))):
        start = time.perf_counter()
        fn()
        rows.append([name, f"{mesh[0]}x{mesh[1]}", f"{m}x{k}", batch, round(time.perf_counter() - start, 3)])
    return rows


def run():
    params, cfg = load_config(DEFAULT_CONFIG)
    result = analyse(params, cfg)
    result["plots"] = write_plots(result, OUT)
    result["tables"].insert(0, {"title": "Exact kernels (vectorized numpy), one layer",
                                "columns": ["kernel", "mesh", "MxK", "batch", "seconds"],
                                "rows": kernel_speed()})
    start = time.perf_counter()
    d = digits_experiment(hidden=(64,), mesh=(4, 4), systems=4, batch=8, epochs=6, lr=3e-3, seed=0)
    seconds = time.perf_counter() - start
    result["digits"] = d
    result["tables"].insert(1, {
        "title": f"load_digits {d['dims']}: {d['systems']} systems x batch {d['batch_per_system']} on "
                 f"{d['mesh'][0]}x{d['mesh'][1]} PEs, AdamW lr {d['lr']}, {d['epochs']} epochs "
                 f"({d['steps']} steps, {seconds:.1f} s), {d['test_samples']} test samples",
        "columns": ["training", "test accuracy", "first-epoch loss", "last-epoch loss"],
        "rows": [["exact kernels (bf16, fixed orders)", round(d["exact_accuracy"], 4),
                  round(d["exact_loss"][0], 4), round(d["exact_loss"][-1], 4)],
                 ["plain float32 numpy", round(d["float32_accuracy"], 4),
                  round(d["float32_loss"][0], 4), round(d["float32_loss"][-1], 4)]]})
    return result
