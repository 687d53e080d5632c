"""MemoryX: AdamW update throughput at 16 M and 64 M parameters on one core, side by side from one run:
MemoryX ``apply_gradient`` (gradient check + fused kernel + bf16 copy), the fused kernel alone, the
NumPy path (:meth:`Optimizer.numpy_step`, the plain in-place NumPy AdamW), jitted ``optax.adamw`` (jax
on the CPU, with and without donated buffers) and the copy-bandwidth bound measured on this machine;
then peak heap of streamed checkpoint/safetensors I/O of a store far larger than its DRAM budget,
flash-tier streaming rate against a raw sequential read of the same file, the bytes-per-parameter
table and the timing model fed with the measured rates.

One core: the process pins itself to one CPU (``sched_setaffinity``; restored afterwards), XLA runs
without its Eigen thread pool (``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``, set before jax is
imported) and the numba kernels are single-threaded. ``MEMORYX_BENCH_SIZES`` (comma separated parameter
counts) overrides the sizes; ``MEMORYX_BENCH_CPU`` picks the core.
"""

import gc
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from models.memoryx import (
    SGD,
    Adam,
    AdamW,
    MemoryX,
    MemoryXRates,
    Momentum,
    bytes_per_parameter,
    plan_bandwidth,
    step_timing,
    update_bytes_per_parameter,
)

SIZES = [16 << 20, 64 << 20]
K = 4096
REPS = 7
FLASH_PARAMS = 32 << 20
IO_PARAMS = 4 << 20
IO_BUDGET = 1 << 20
BOUND_BYTES = 28      # AdamW reads p, m, v, g and writes p, m, v: 7 x 4 bytes per parameter
BUILD = Path(__file__).resolve().parents[1] / "build" / "bench"
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false"



def _optax():
    """(jax, optax) or None. XLA is told to use one thread before jax is first imported."""
    if "jax" not in __import__("sys").modules:
        flags = os.environ.get("XLA_FLAGS", "")
        if XLA_ONE_THREAD not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} {XLA_ONE_THREAD}".strip()
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        import optax
    except ImportError:
        return None
    return jax, optax


def _optax_contenders(mods, n, g_np):
    """Timed callables of a jitted optax.adamw step (update + apply_updates), plain and with donated
    buffers (parameters and state updated in place)."""
    jax, optax = mods
    tx = optax.adamw(1e-3, weight_decay=1e-2)

    def step(params, state, g):
        u, state = tx.update(g, state, params)
        return optax.apply_updates(params, u), state

    g = jax.device_put(g_np.reshape(-1))
    out = {}
    for label, fn in (("optax jit", jax.jit(step)), ("optax donated", jax.jit(step, donate_argnums=(0, 1)))):
        box = [jax.numpy.zeros(n, jax.numpy.float32)]
        box.append(tx.init(box[0]))

        def run(box=box, fn=fn):
            box[0], box[1] = fn(box[0], box[1], g)
            box[0].block_until_ready()
        run()
        out[label] = run
    return out


def _memoryx_contenders(n, g):
    """Timed callables: AdamW apply_gradient of one layer of n params, the bare fused kernel pass and
    the NumPy-path pass on the same arrays."""
    mx = MemoryX(AdamW(lr=1e-3))
    mx.add_layer("w", g.shape, "zeros")
    mx.apply_gradient("w", g)                                   # warm-up (touches every page)
    opt = mx.optimizer
    p, b16 = (mx.tiers.acquire(("w", k)).reshape(-1) for k in ("master", "bf16"))
    states = [mx.tiers.acquire(("w", s)).reshape(-1) for s in opt.state_names]
    st = {s: a for s, a in zip(opt.state_names, states)}
    gf = g.reshape(-1)

    def numpy_path():
        with np.errstate(all="ignore"):
            opt.numpy_step(p, gf, st, 5, 1e-3)
    return mx, {"apply": lambda: mx.apply_gradient("w", g),
                "kernel": lambda: opt.commit(p, states, gf, gf, 1, b16, 5, 1e-3),
                "numpy": numpy_path}


def update_throughput(sizes):
    mods = _optax()
    rows = []
    for n in sizes:
        g = np.random.default_rng(0).standard_normal((n // K, K), dtype=np.float32)
        mx, runs = _memoryx_contenders(n, g)
        if mods:
            runs.update(_optax_contenders(mods, n, g))
        src = np.ones(n * BOUND_BYTES // 2 // 4, np.float32)     # the bound: a copy moving BOUND_BYTES/param
        dst = np.empty_like(src)
        runs["copy"] = lambda src=src, dst=dst: np.copyto(dst, src)
        best = dict.fromkeys(runs, float("inf"))
        for rep in range(REPS):              # interleaved, so every contender sees the same machine load
            for name, fn in runs.items():
                if name == "numpy" and rep >= 2:
                    continue
                t = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
        assert mx.counters()["store"]["checked_updates"] == 0      # every step proven finite by the bound
        mx.close()
        del runs, src, dst, g
        gc.collect()
        rate = {k: n / v / 1e6 for k, v in best.items()}
        ref = max(rate.get("optax jit", 0), rate.get("optax donated", 0))
        row = [n >> 20] + [round(rate[k]) for k in ("apply", "kernel", "numpy")]
        row += [round(rate["optax jit"]), round(rate["optax donated"])] if mods else []
        row += [round(rate["copy"]), round(rate["apply"] / rate["copy"], 2)]
        row += [round(rate["apply"] / ref, 2)] if mods else []
        rows.append(row)
    cols = ["M params", "apply", "kernel", "NumPy"] + (["optax", "optax donated"] if mods else [])
    cols += ["copy bound", "apply / bound"] + (["apply / optax"] if mods else [])
    note = (f"one core (CPU {_cpu()}); million parameters per second, best of {REPS} interleaved runs (NumPy: 2). "
            "apply = MemoryX.apply_gradient: gradient check (dtype, shape, NaN/Inf, largest magnitude) + "
            "overflow bound + fused AdamW pass writing the bf16 copy too; kernel = that fused pass alone; NumPy = "
            "Optimizer.numpy_step, the in-place NumPy AdamW (the previous implementation); optax = optax.adamw "
            "jitted (donated: parameters and state updated in place, as a training loop does; optax does not "
            f"write a bf16 copy); copy bound = numpy copy moving the {BOUND_BYTES} bytes/param AdamW must read "
            "and write; apply / optax against the faster optax column")
    if not mods:
        note += "; jax/optax not installed: optax columns omitted"
    return {"title": "AdamW update throughput, one layer, one core (M params/s)", "columns": cols, "rows": rows,
            "note": note}


def _peak(fn):
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        t = time.perf_counter()
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - base, time.perf_counter() - t
    finally:
        tracemalloc.stop()


def streamed_io(n=IO_PARAMS, budget=IO_BUDGET):
    """Peak heap (tracemalloc: Python and numpy allocations) of checkpoint save/restore and safetensors
    export/import of an AdamW store many times larger than its DRAM budget."""
    BUILD.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(dir=BUILD, prefix="memoryx-io-") as d:
        d = Path(d)
        mx = MemoryX(AdamW(lr=1e-3), dram_budget_bytes=budget, flash_dir=d / "a")
        shape = (n // K // 8, K)
        for i in range(8):
            mx.add_layer(f"l{i}", shape, "normal", seed=i)
        rng = np.random.default_rng(0)
        for name in mx.layer_names():
            mx.apply_gradient(name, rng.standard_normal(shape, dtype=np.float32))
        chunk = 4 * mx.chunk_elems
        store = mx.stored_bytes()
        ckpt, p_save, t_save = _peak(lambda: mx.save_checkpoint(d / "m.ckpt"))
        back, p_restore, t_restore = _peak(lambda: MemoryX.load_checkpoint(ckpt, dram_budget_bytes=budget,
                                                                           flash_dir=d / "b"))
        st, p_export, t_export = _peak(lambda: back.export_safetensors(d / "w.safetensors", include_state=True))
        _, p_import, t_import = _peak(lambda: mx.import_safetensors(st))
        for label, peak, secs, nbytes in (("checkpoint save", p_save, t_save, ckpt.stat().st_size),
                                          ("checkpoint restore", p_restore, t_restore, ckpt.stat().st_size),
                                          ("safetensors export", p_export, t_export, st.stat().st_size),
                                          ("safetensors import", p_import, t_import, st.stat().st_size)):
            rows.append([label, round(nbytes / 2**20, 1), round(peak / 2**10), round(peak / chunk, 1),
                         round(nbytes / secs / 1e6)])
        back.close()
        mx.close()
    return {"title": f"streamed I/O: AdamW store of {n >> 20} M params ({store / 2**20:.0f} MiB) under a "
                     f"{budget >> 20} MiB DRAM budget",
            "columns": ["operation", "file (MiB)", "peak heap (KiB)", "peak / chunk", "MB/s"],
            "rows": rows,
            "note": f"peak heap = tracemalloc peak during the call (numpy buffers included; memory-mapped flash "
                    f"pages are the flash tier, not heap); chunk = {chunk >> 10} KiB (chunk_elems x 4)"}


def _drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def flash_streaming(n=FLASH_PARAMS, rows_per_chunk=128):
    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD, prefix="memoryx-flash-") as d:
        mx = MemoryX(SGD(lr=0.1), dram_budget_bytes=0, flash_dir=d)   # every access goes to flash
        w = np.random.default_rng(1).standard_normal((n // K, K), dtype=np.float32)
        mx.add_layer("w", w.shape, w)
        del w
        path = Path(d) / mx.tiers._meta[("w", "bf16")][2]
        nbytes = path.stat().st_size
        buf = bytearray(rows_per_chunk * K * 2)

        def raw():
            with open(path, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass

        def stream():
            for _ in mx.stream("w", rows_per_chunk=rows_per_chunk):
                pass

        rows = []
        for state in ("cold", "warm"):
            res = {}
            for name, fn in (("stream", stream), ("raw", raw)):
                best = float("inf")
                for _ in range(2):
                    if state == "cold":
                        mx.tiers._maps.clear()          # unmap, so the kernel can drop the pages
                        gc.collect()
                        _drop_cache(path)
                    t = time.perf_counter()
                    fn()
                    best = min(best, time.perf_counter() - t)
                res[name] = nbytes / best / 1e6
            rows.append([state, nbytes, rows_per_chunk * K * 2, round(res["stream"]), round(res["raw"]),
                         round(res["stream"] / res["raw"], 3)])
        mx.close()
    return {"title": "flash-tier streaming of a bf16 layer (memory-mapped) vs raw sequential read",
            "columns": ["page cache", "bytes", "chunk bytes", "MemoryX stream (MB/s)", "raw read (MB/s)",
                        "stream / raw"],
            "rows": rows,
            "note": "cold = file pages dropped with posix_fadvise(DONTNEED) before each run"}


def accounting_table():
    rows = []
    for opt in (SGD(), Momentum(), Adam(), AdamW()):
        b = bytes_per_parameter(opt)
        u = update_bytes_per_parameter(opt)
        rows.append([opt.kind, b["master"], b["total"] - b["master"] - b["grad"] - b["bf16"], b["grad"],
                     b["bf16"], b["total"], u["total"], int(2.4e15 // b["total"] // 1e12)])
    return {"title": "bytes per parameter (exact) and capacity of 2.4 PB",
            "columns": ["optimizer", "master", "state", "grad", "bf16", "total", "update traffic",
                        "T params in 2.4 PB"],
            "rows": rows}


def timing_table(update_params_per_s, stream_bytes_per_s, samples=2048, wafer_flops=1e15):
    upd = update_bytes_per_parameter(AdamW())["total"]
    layers = [4096 * 4096] * 24
    plan = plan_bandwidth(sum(layers), AdamW(), samples, wafer_flops)
    configs = [("measured", MemoryXRates(stream_bytes_per_s, stream_bytes_per_s,
                                                        update_params_per_s * upd, wafer_flops)),
               ("planner-sized", MemoryXRates(plan.stream_out_bw, plan.gradient_in_bw, plan.update_bw,
                                              wafer_flops))]
    rows = []
    for label, rates in configs:
        for overlap in (True, False):
            t = step_timing(layers, samples, rates, AdamW(), overlap=overlap)
            rows.append([label, round(rates.stream_bw / 1e9, 1), round(rates.update_bw / 1e9, 1),
                         "yes" if overlap else "no", round(t.step_seconds * 1e3, 3),
                         round(t.exposed_seconds * 1e3, 3), round(t.utilization, 3)])
    return {"title": f"timing model: 24 x (4096 x 4096) AdamW layers, {samples} samples/wafer, "
                     f"{wafer_flops / 1e15:g} PFLOP/s wafer (assumed)",
            "columns": ["MemoryX", "stream GB/s", "update GB/s", "overlap", "step (ms)", "exposed (ms)",
                        "wafer busy"],
            "rows": rows,
            "note": "this machine: update rate of the largest size and the warm flash stream rate measured "
                    "above; planner-sized: plan_bandwidth() for the same model"}


def _cpu():
    return int(os.environ.get("MEMORYX_BENCH_CPU", min(os.sched_getaffinity(0))))


def run():
    sizes = [int(s) for s in os.environ.get("MEMORYX_BENCH_SIZES", "").split(",") if s] or SIZES
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {_cpu()})
    try:
        upd = update_throughput(sizes)
        io = streamed_io()
        flash = flash_streaming()
    finally:
        os.sched_setaffinity(0, affinity)
    tables = [upd, io, flash, accounting_table(),
              timing_table(upd["rows"][-1][1] * 1e6, flash["rows"][1][3] * 1e6)]
    return {"tables": tables, "sizes": sizes, "notes": [t.get("note", "") for t in tables]}
