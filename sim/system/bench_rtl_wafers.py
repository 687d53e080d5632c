"""System co-simulation with RTL wafers (cocotb): MemoryX -> SwarmX RTL -> N RTL wafers of P x Q
PE tiles -> SwarmX RTL -> MemoryX. Top: :class:`sim.harness.rtl_system.RtlSystemHarness`.

Each training step, for every phase (compiled by :mod:`compiler.wafer`):

1. **Configure.** The host (Python, between phases) compiles the phase for every wafer: routes,
   descriptors, adapter registers and the SRAM inputs (the wafer's activations ``X`` of the layer,
   its ``dZ``); the words go into each wafer's configuration player, which writes one per cycle
   (no fabric traffic meanwhile, except backward-weight, which starts when its descriptors
   commit).
2. **Run.** The broadcast player sends the layer's bf16 weights from MemoryX (rows of W for the
   forward pass, rows of ``W^T`` for backward-data) into the SwarmX tree RTL, which broadcasts
   them to the N wafers; recorders take what leaves each wafer's host edges (hidden activations
   and ``dZ_prev`` west, logits east) and the tree's reduced gradients (backward-weight: every
   wafer's gradient mux -> SwarmX reduce -> root recorder).
3. **Host.** Softmax cross-entropy and its bf16 ``dZ`` (``kernels.softmax_xent``) on the logits
   each wafer produced; MemoryX applies the optimizer to the reduced gradients the RTL produced.
4. **Check.** A golden ``WaferTrainer`` takes the same step; the loss and every fp32 master
   weight must be equal bit for bit. The configuration and run cycles of every phase are checked
   against the timing model of this schedule (``models.pipeline.rtl_schedule`` on the compiler's
   configuration-word counts and plans): equal with ``stall = 0``, at least the model's with
   stalls. Each weight stream takes at least ``M*K`` cycles. The pipelined architecture model
   (``models.pipeline.timing``) is kept in ``results.json`` for reference.

Parameters: :class:`sim.system.config.SystemRunConfig` (``wafer = "rtl"``). Writes
``results.json`` and ``weights.safetensors`` into ``out_dir``.
"""

import json
import time
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout

from arch.wavelet import unpack_tagged, unpack_wavelet
from compiler.wafer import compile_backward_data, compile_backward_weight, compile_forward, split_dx
from hdl.fp32_add import Fp32Add
from models.memoryx import export_safetensors
from models.numerics import f32
from models.pipeline import kernels
from models.pipeline.rtl_schedule import RtlHardware, step_schedule
from models.pipeline.timing import TimingParams, step_timing
from models.pipeline.training import WaferTrainer, build_memoryx, layer_names
from sim.harness.rtl_system import cfg_word
from sim.kit import params
from sim.kit.clocking import reset
from sim.kit.player_memory import load_words, read_words, tagged_words
from sim.system.config import SystemRunConfig
from sim.system.rtl import rtl_config
from sim.system.run import DATA_FILE


async def _pulse(dut, name):
    getattr(dut, name).value = 1
    await RisingEdge(dut.clk)
    getattr(dut, name).value = 0
    await RisingEdge(dut.clk)


async def _wait(dut, name, cycles, what):
    if int(getattr(dut, name).value):
        return
    try:
        await with_timeout(RisingEdge(getattr(dut, name)), cycles * 10, "ns")
    except cocotb.triggers.SimTimeoutError:
        raise AssertionError(f"{what} did not finish within {cycles} cycles (fault="
                             f"{int(dut.fault.value)}, error={int(dut.error.value)}, overflow="
                             f"{int(dut.overflow.value)}){_faults(dut)}") from None


def _faults(dut):
    """PE faults (wafer, row, col, code, index) for an error message."""
    out = []
    for i in range(int(dut.system_leaves.value) if hasattr(dut, "system_leaves") else 16):
        wafer = getattr(dut.system, f"wafer{i}", None)
        if wafer is None:
            break
        for name in ("core_0_0", "core_0_1", "core_1_0", "core_1_1"):
            core = getattr(wafer.mesh, name, None)
            if core is not None and int(core.fault.value):
                out.append(f"wafer{i}.{name}: code {int(core.fault_code.value)} index "
                           f"{int(core.fault_index.value)}")
    return (": " + "; ".join(out)) if out else ""


async def _phase(dut, phases, stream, *, root=0, west=0, east=0, what):
    """Configure every wafer with its phase, then stream ``stream`` (tagged words) and wait.
    Returns (configuration cycles, run cycles, cycles from the first to the last weight word)."""
    stream_words = stream
    counts = {len(ph.writes) for ph in phases}
    assert len(counts) == 1, f"{what}: wafers got different write counts {counts}"
    for i, ph in enumerate(phases):
        load_words(getattr(dut, f"cfg_player{i}").mem, [cfg_word(a, v) for a, v in ph.writes])
    if len(stream):
        load_words(dut.bcast_player.mem, stream)
    dut.cfg_count.value = counts.pop()
    dut.bcast_count.value = len(stream)
    dut.root_count.value = root
    dut.west_count.value = west
    dut.east_count.value = east
    await _pulse(dut, "start")
    await _wait(dut, "cfg_done", 10 * len(phases[0].writes) + 100, f"{what} configuration")
    cfg_cycles = int(dut.cfg_cycles.value)
    await _pulse(dut, "go")
    budget = 200 * (len(stream) + root + west + east) + 20000
    await _wait(dut, "done", budget, what)
    assert not int(dut.fault.value), f"{what}: a PE core raised a fault"
    assert not int(dut.error.value), f"{what}: a router or SwarmX raised an error"
    assert not int(dut.overflow.value), f"{what}: a recorder overflowed (extra words)"
    stream = 0
    if len(stream_words):
        stream = int(dut.bcast_player.last_stamp.value) - int(dut.bcast_player.first_stamp.value) + 1
    return cfg_cycles, int(dut.run_cycles.value), stream


@cocotb.test()
async def train(dut):
    run = SystemRunConfig.from_dict(params())
    cfg = rtl_config(run)
    out_dir = Path(run.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n, names, dims = run.systems, layer_names(run.dims), run.dims
    nl, P, L, B = len(names), cfg.mesh_rows, cfg.lanes, run.batch
    optimizer = run.make_optimizer
    mx = build_memoryx(dims, optimizer=optimizer(), seed=run.seed)
    golden = WaferTrainer(dims, build_memoryx(dims, optimizer=optimizer(), seed=run.seed),
                          mesh=run.mesh, systems=n, batch=B)
    data = np.load(out_dir / DATA_FILE)
    x_tr, x_te, y_tr, y_te = data["x_train"], data["x_test"], data["y_train"], data["y_test"]
    rng = np.random.default_rng(run.seed)
    order = np.concatenate([rng.permutation(len(x_tr)) for _ in range(run.steps * golden.global_batch
                                                                      // len(x_tr) + 1)])
    model_step = step_timing(dims, B, n, TimingParams(
        mesh_rows=P, mesh_cols=cfg.mesh_cols, lanes=L, weight_words_per_cycle=1.0,
        grad_words_per_cycle=1.0, memoryx_optimizer=run.optimizer))
    hw = RtlHardware(mesh_rows=P, mesh_cols=cfg.mesh_cols, lanes=L, systems=n,
                     swarmx_adder_latency=Fp32Add.LATENCY, num_colors=cfg.num_colors,
                     vc_depth=cfg.vc_depth)

    dut.stall.value = run.stall
    for name in ("start", "go", "cfg_count", "bcast_count", "root_count", "west_count",
                 "east_count"):
        getattr(dut, name).value = 0
    await reset(dut)
    west = [[getattr(dut, f"west_rec{i}_{p}") for p in range(P)] for i in range(n)]
    east = [[getattr(dut, f"east_rec{i}_{p}") for p in range(P)] for i in range(n)]
    history, wall, sim_cycles = [], time.perf_counter(), 0

    def edge_words(recs, count):
        return [read_words(r.mem, count) for r in recs]

    for step in range(run.steps):
        idx = order[step * golden.global_batch:(step + 1) * golden.global_batch]
        x, labels = x_tr[idx], y_tr[idx]
        w16 = [mx.bf16(name) for name in names]
        acts = [[kernels.to_bf16(x[i * B:(i + 1) * B].T)] for i in range(n)]
        phases, logits = [], [None] * n

        # Forward, layer by layer: activations out of the west edge, logits out of the east.
        for l in range(nl):
            m, k, last = dims[l + 1], dims[l], l == nl - 1
            progs = [compile_forward(cfg, m=m, k=k, batch=B, x16=acts[i][l], last=last)
                     for i in range(n)]
            counts = {"east" if last else "west": m * L}
            c, r, st = await _phase(dut, progs, tagged_words([w16[l]]), what=f"forward layer {l}",
                                    **counts)
            phases.append(("forward", l, c, r, st, (len(progs[0].writes), progs[0].plan)))
            for i in range(n):
                words = edge_words(east[i] if last else west[i], m * L)
                rows = np.concatenate([unpack_wavelet(w)[0].astype(np.uint32).reshape(m, L)
                                       for w in words], axis=1)
                if last:
                    logits[i] = f32(rows)
                else:
                    acts[i].append((rows >> 16).astype(np.uint16))

        # Host: softmax cross-entropy.
        losses, dz = [], []
        for i in range(n):
            loss, d = kernels.softmax_xent(logits[i], labels[i * B:(i + 1) * B],
                                           golden.global_batch)
            losses.append(loss)
            dz.append(d)

        # Backward, last layer first: backward-data (W^T stream), then backward-weight (reduce).
        grads = {}
        for l in range(nl - 1, -1, -1):
            m, k = dims[l + 1], dims[l]
            dz_prev = None
            if l > 0:
                progs = [compile_backward_data(cfg, m=m, k=k, batch=B, x16=acts[i][l],
                                               dz16=dz[i]) for i in range(n)]
                c, r, st = await _phase(dut, progs, tagged_words([np.ascontiguousarray(w16[l].T)]),
                                        west=k * L, what=f"backward-data layer {l}")
                phases.append(("backward-data", l, c, r, st, (len(progs[0].writes),
                                                              progs[0].plan)))
                dz_prev = [np.concatenate([split_dx(cfg, w, k) for w in edge_words(west[i], k * L)],
                                          axis=1) for i in range(n)]
            progs = [compile_backward_weight(cfg, m=m, k=k, batch=B, x16=acts[i][l], dz16=dz[i])
                     for i in range(n)]
            c, r, st = await _phase(dut, progs, [], root=m * k,
                                    what=f"backward-weight layer {l}")
            phases.append(("backward-weight", l, c, r, st, (len(progs[0].writes),
                                                            progs[0].plan)))
            got, lasts = unpack_tagged(read_words(dut.root_rec.mem, m * k))
            assert lasts[-1] == 1 and not lasts[:-1].any(), \
                f"step {step}: layer {l}: reduced gradient 'last' flags wrong"
            grads[l] = f32(got.astype(np.uint32)).reshape(m, k)
            if dz_prev is not None:
                dz = dz_prev
        for l in range(nl - 1, -1, -1):
            mx.apply_gradient(names[l], grads[l])

        # Golden step and checks.
        ref = golden.step(x, labels)
        for name in names:
            a, b = mx.master(name).view(np.uint32), golden.mx.master(name).view(np.uint32)
            if not np.array_equal(a, b):
                raise AssertionError(f"step {step}: layer {name}: {int(np.sum(a != b))} master "
                                     f"weights differ from the golden pipeline model")
        loss = float(np.mean(losses))
        assert loss == ref.loss, (loss, ref.loss)
        # A weight stream can never beat one SwarmX word per cycle (the timing model's stream
        # term M * K); how far each one stays above it is recorded (docs/system_simulation.md explains why).
        for ph, l, _, _, st, _ in phases:
            if ph != "backward-weight":
                mk = dims[l + 1] * dims[l]
                assert st >= mk, f"step {step}: {ph} layer {l}: {mk} weights in {st} cycles"
        # Cycles against the timing model of this schedule: equal without stalls, else above.
        model = step_schedule(dims, hw, {(ph, l): w for ph, l, _, _, _, w in phases})
        for (ph, l, c, r, _, _), mp in zip(phases, model, strict=True):
            assert (mp.phase, mp.layer) == (ph, l), (mp, ph, l)
            where = f"step {step + 1}: {ph} layer {l}"
            if run.stall == 0:
                assert (c, r) == (mp.config, mp.run), \
                    f"{where}: {c} configuration + {r} run cycles, model {mp.config} + {mp.run}"
            else:
                assert c >= mp.config and r >= mp.run, \
                    f"{where}: {c} + {r} cycles below the model's {mp.config} + {mp.run}"
        step_cycles = sum(c + r for _, _, c, r, _, _ in phases)
        sim_cycles += step_cycles
        record = {"step": step + 1, "loss": loss, "cycles": step_cycles,
                  "phases": [{"phase": ph, "layer": l, "config_writes": w[0],
                              "config_cycles": c, "run_cycles": r, "stream_cycles": st,
                              "model_config_cycles": mp.config, "model_run_cycles": mp.run,
                              "model_run_formula": mp.run_formula}
                             for (ph, l, c, r, st, w), mp in zip(phases, model)]}
        if (step + 1) % run.eval_every == 0 or step + 1 == run.steps:
            record["test_accuracy"] = float(np.mean(golden.predict(x_te) == y_te))
        history.append(record)
        acc = f"  test acc {record['test_accuracy']:.3f}" if "test_accuracy" in record else ""
        print(f"step {step + 1:4d}/{run.steps}  loss {loss:.4f}{acc}  {step_cycles} cycles "
              f"(RTL wafers)  [bit-exact]", flush=True)

    seconds = time.perf_counter() - wall
    export_safetensors(mx, out_dir / "weights.safetensors")
    fmacs = sum(dims[l + 1] * dims[l] for l in range(nl)) * B * 3 - dims[0] * dims[1] * B
    pe_lanes = cfg.mesh_rows * cfg.mesh_cols * L
    last_phases = history[-1]["phases"]
    results = {
        "config": run.as_dict(), "wafer": "rtl", "hardware": cfg.as_dict(), "steps": history,
        "phases": last_phases,
        "wafer_model_step": {
            "cycles": model_step.cycles, "wafer_cycles": model_step.wafer_cycles,
            "utilization": model_step.utilization,
            "phases": [{"layer": p.layer, "phase": p.phase, "cycles": p.cycles,
                        "utilization": p.utilization}
                       for p in model_step.forward + model_step.backward],
        },
        "utilization": fmacs / (pe_lanes * history[-1]["cycles"]),
        "simulated_cycles": sim_cycles, "wall_seconds": seconds,
        "cycles_per_second": sim_cycles / seconds if seconds else 0.0,
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
