"""cocotb bench for PE tiles on the fabric: a ``tile`` top (router + core) or a ``Mesh`` of routers
with a :class:`~hdl.pe.core.PeCore` on every RAMP port, running the forward micro-kernel.

Parameters (``sim.kit.params()``), built by ``tests/hdl/test_tile.py``: ``writes`` ``[[addr, word]]``
(configuration, one per cycle, before traffic), ``inputs`` ``{port prefix: [wavelet words]}``
(driven with random gaps ``gap_prob``), ``outputs`` ``{port prefix: expected word count}``
(drained with random back-pressure ``stall_prob``), ``accept`` (top-level ``*_accept`` masks,
set to all ``num_colors`` ones), ``reads`` (configuration addresses read back
at the end), ``drain`` (idle cycles after the last expected word, to catch extra words).

Writes ``result.json``: ``outputs`` (words per prefix), ``out_cycles``, ``in_cycles`` (transfer
cycles per prefix) and ``reads``.
"""

import json
import random
import time
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from cocotb.utils import get_sim_time

from sim.benches.pe import cfg_read_all, cfg_write
from sim.kit import input_ports, params
from sim.kit.clocking import PERIOD_NS, reset
from sim.kit.stream import StreamDriver, StreamMonitor, bernoulli


@cocotb.test()
async def run_kernel(dut):
    p = params()
    rng = random.Random(cocotb.RANDOM_SEED)
    wall0 = time.perf_counter()
    dut.cfg__we.value = 0
    dut.cfg__addr.value = 0
    dut.cfg__wdata.value = 0
    for name in input_ports():                # unused links idle: valid and ready low
        if name.endswith(("__valid", "__ready", "__payload")):
            getattr(dut, name).value = 0
    for name in p.get("accept", []):          # top-level per-color accept masks: all colors
        getattr(dut, name).value = (1 << p["num_colors"]) - 1
    # Drivers and monitors first: inputs idle (valid low) from reset on.
    drivers = {name: StreamDriver(dut.clk, dut, name, gaps=bernoulli(p.get("gap_prob", 0.0), rng))
               for name in p["inputs"]}
    monitors = {name: StreamMonitor(dut.clk, dut, name,
                                    stall=bernoulli(p.get("stall_prob", 0.0), rng))
                for name in p["outputs"]}
    await reset(dut)
    await cfg_write(dut, p["writes"])
    for name, words in p["inputs"].items():
        drivers[name].send(words)
    for drv in drivers.values():
        await drv.wait_idle()
    budget = 2000 + 50 * sum(p["outputs"].values())
    waited = 0
    while (any(len(monitors[n].words) < c for n, c in p["outputs"].items())
           and waited < budget):
        await RisingEdge(dut.clk)
        waited += 1
    await ClockCycles(dut.clk, p.get("drain", 30))
    reads = await cfg_read_all(dut, p["reads"])
    Path("result.json").write_text(json.dumps({
        "outputs": {n: mon.words for n, mon in monitors.items()},
        "out_cycles": {n: mon.cycles for n, mon in monitors.items()},
        "in_cycles": {n: drv.accepted for n, drv in drivers.items()},
        "reads": reads, "sim_cycles": get_sim_time("ns") // PERIOD_NS,
        "sim_seconds": time.perf_counter() - wall0,
    }))


# ---- the forward micro-kernel as bench parameters (pytest side) ---------------------------------

def forward_kernel_setup(cfg, *, rows, cols, m, k, seed, mesh=True):
    """Bench parameters and expectations of the forward micro-kernel (models.pe.forward_kernel)
    on a ``rows x cols`` ``Mesh`` of PE cores (``mesh=True``, ``cfg.mesh_rows/cols`` must match,
    built with ``tile_addr_bits=mesh_tile_addr_bits(cfg.sram_words, cfg.num_tasks)``)
    or on one ``tile`` (``rows = cols = 1``, ``mesh=False``).

    Returns ``(params, expect)``; ``expect`` holds ``outputs`` (words per output prefix, from
    ``models.pipeline.kernels``), ``reads`` (expected value per read address, or None where the
    value is only recorded), ``plan``, ``w16``, ``x16``, ``a16`` (the bf16 results)."""
    import numpy as np

    from arch.pe_map import STATUS, desc_addr, descriptor_writes, encode, status_base
    from arch.ports import Port
    from arch.router_map import ADDR_RAMP2, route_addr, route_mask
    from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
    from arch.wavelet import pack_wavelet
    from models import pe
    from models.numerics import bf16_bits
    from models.pipeline import kernels

    L, S = cfg.lanes, cfg.sram_words
    rng = np.random.default_rng(seed)
    plan = pe.forward_kernel(lanes=L, sram_words=S, rows=rows, cols=cols, m=m, k=k)
    batch = rows * L
    w16 = bf16_bits((rng.standard_normal((m, k)) * 0.5).astype(np.float32))
    x16 = bf16_bits((rng.standard_normal((k, batch)) * 2).astype(np.float32))
    a16 = kernels.relu_bf16(kernels.forward(w16, x16, (rows, cols)))
    stat = status_base(S, cfg.num_tasks)

    bits = mesh_tile_addr_bits(S, cfg.num_tasks)

    def addr(p, q, local):
        return tile_address(cfg.mesh_cols, p, q, local, bits) if mesh else local

    def sfx(index):
        return f"__{index}" if mesh else ""

    writes, reads, expect_reads = [], [], []
    for (p, q), info in sorted(plan["pes"].items()):
        for color, inp, outs in plan["routes"][(p, q)]:
            writes.append([addr(p, q, route_addr(color, Port[inp])), route_mask(outs)])
        writes.append([addr(p, q, ADDR_RAMP2), plan["ramp2"][(p, q)]])
        xs = x16[info["k"].start:info["k"].stop, p * L:(p + 1) * L].astype(np.uint32) << 16
        for i, word in enumerate(xs.ravel()):
            writes.append([addr(p, q, CORE_BASE + info["x_base"] + i), int(word)])
        for t in sorted(info["descs"], reverse=True):
            writes += [list(w) for w in descriptor_writes(addr(p, q, CORE_BASE + desc_addr(S, t)),
                                                          encode(**info["descs"][t]))]
        own = info["own"]
        kept = a16[own.start:own.stop, p * L:(p + 1) * L].astype(np.uint32) << 16
        for i, word in enumerate(kept.ravel()):
            reads.append(addr(p, q, CORE_BASE + info["xn_base"] + i))
            expect_reads.append(int(word))
        reads.append(addr(p, q, CORE_BASE + stat + STATUS["FAULT"]))
        expect_reads.append(0)
        reads.append(addr(p, q, CORE_BASE + stat + STATUS["FMAC_CYCLES"]))
        expect_reads.append(m * len(info["k"]))
        reads.append(addr(p, q, CORE_BASE + stat + STATUS["ACTIVE"]))
        expect_reads.append(0)
    inputs = {}
    for q in range(cols):
        inputs[f"n_in{sfx(q)}"] = [pack_wavelet(int(w16[mm, kk]) << 16, pe.COLOR_W)
                                   for mm in range(m) for kk in plan["k_slices"][q]]
    side = plan["edge_out"].lower()
    outputs = {}
    for p in range(rows):
        outputs[f"{side}_out{sfx(p)}"] = [pack_wavelet(int(v) << 16, pe.COLOR_RESULT)
                                          for v in a16[:, p * L:(p + 1) * L].ravel()]
    accept = ([f"{sd}_accept{sfx(i)}" for sd, n in (("n", cols), ("s", cols), ("w", rows),
                                                    ("e", rows)) for i in range(n)])
    params = {"writes": writes, "inputs": inputs, "accept": accept, "num_colors": cfg.num_colors,
              "outputs": {n: len(w) for n, w in outputs.items()}, "reads": reads}
    return params, {"outputs": outputs, "reads": dict(zip(reads, expect_reads)), "plan": plan,
                    "w16": w16, "x16": x16, "a16": a16, "read_list": reads,
                    "read_values": expect_reads}
