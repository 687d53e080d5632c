"""MemoryX: AdamW update throughput (16 M to 256 M parameters) against a memory-bandwidth bound
measured on this machine (and torch.optim.AdamW where torch is installed), flash-tier streaming rate
against a raw sequential read of the same file, the bytes-per-parameter table and the timing model
fed with the measured rates.

``MEMORYX_BENCH_SIZES`` (comma separated parameter counts) overrides the sizes.
"""

import gc
import os
import tempfile
import time
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

SIZES = [16 << 20, 64 << 20, 256 << 20]
K = 4096
REPS = 3
FLASH_PARAMS = 32 << 20
BUILD = Path(__file__).resolve().parents[1] / "build" / "bench"


def _best(fn, reps=REPS):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _torch_rates(torch, n, g_np):
    out = {}
    for mode in ("foreach", "fused"):
        p = torch.nn.Parameter(torch.zeros(n))
        p.grad = torch.from_numpy(g_np.reshape(-1))
        try:
            opt = torch.optim.AdamW([p], lr=1e-3, **{mode: True})
            opt.step()
        except (RuntimeError, TypeError) as e:     # e.g. fused not supported on this CPU build
            out[mode] = f"n/a ({type(e).__name__})"
            continue
        out[mode] = n / _best(opt.step)
        del opt, p
    return out


def _memoryx_rates(n, g):
    """Seconds per AdamW apply_gradient and per bare optimizer kernel pass, one layer of n params."""
    mx = MemoryX(AdamW(lr=1e-3))
    mx.add_layer("w", g.shape, "zeros")
    mx.apply_gradient("w", g)                                   # warm-up (touches every page)
    t_apply = _best(lambda: mx.apply_gradient("w", g))
    # the optimizer kernel alone (no input checks, no gradient landing, no bf16 copy)
    p = mx.tiers.acquire(("w", "master")).reshape(-1)
    st = {s: mx.tiers.acquire(("w", s)).reshape(-1) for s in mx.optimizer.state_names}
    gf, c, opt = g.reshape(-1), mx.chunk_elems, mx.optimizer

    def kernel():
        for s in range(0, n, c):
            opt.step(p[s:s + c], gf[s:s + c], {k: v[s:s + c] for k, v in st.items()}, 5, 1e-3)
    t_kernel = _best(kernel)
    mx.close()
    return t_apply, t_kernel


def _copy_seconds(nbytes):
    """Best time of a numpy copy of ``nbytes / 2`` bytes (reads and writes ``nbytes`` in total)."""
    src = np.ones(nbytes // 2 // 4, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    return _best(lambda: np.copyto(dst, src))


def update_throughput(sizes):
    torch = _torch()
    rows = []
    upd = update_bytes_per_parameter(AdamW())["total"]
    for n in sizes:
        g = np.random.default_rng(0).standard_normal((n // K, K), dtype=np.float32)
        t_mx, t_kernel = _memoryx_rates(n, g)
        gc.collect()
        t_torch = _torch_rates(torch, n, g) if torch else {}
        del g
        gc.collect()
        # memory-bandwidth bound: a copy moving the bytes the update moves (AdamW: read 16 + write 14
        # per parameter = a copy of 15 bytes/param, which reads 15 and writes 15)
        t_copy = _copy_seconds(n * upd)
        gc.collect()
        row = [n, round(n / t_mx), round(n / t_kernel), round(n / t_copy), round(t_copy / t_mx, 3),
               round(n * upd / t_copy / 1e9, 2)]
        if torch:
            row += [v if isinstance(v, str) else round(v) for v in (t_torch["foreach"], t_torch["fused"])]
        rows.append(row)
    cols = ["params", "MemoryX apply_gradient (params/s)", "AdamW kernel only (params/s)",
            "copy bound (params/s)", "apply / bound", "copy traffic (GB/s)"]
    if torch:
        cols += ["torch AdamW foreach (params/s)", "torch AdamW fused (params/s)"]
    note = ("apply_gradient = input checks (dtype, shape, NaN/Inf) + gradient landing + AdamW + bf16 copy "
            "(models.numerics.bf16_bits); bound = numpy copy of the 30 bytes/param the update moves")
    if not torch:
        note += "; torch not installed: torch.optim columns omitted (pip install -e '.[torch]')"
    return {"title": "AdamW update throughput (fp32, one layer, best of 3)", "columns": cols, "rows": rows,
            "note": note}


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


def run():
    sizes = [int(s) for s in os.environ.get("MEMORYX_BENCH_SIZES", "").split(",") if s] or SIZES
    upd = update_throughput(sizes)
    flash = flash_streaming()
    tables = [upd, flash, accounting_table(),
              timing_table(upd["rows"][-1][1], flash["rows"][1][3] * 1e6)]
    return {"tables": tables, "sizes": sizes, "notes": [t.get("note", "") for t in tables]}
