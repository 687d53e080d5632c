"""System co-simulation (cocotb): MemoryX -> SwarmX RTL -> N systems -> SwarmX RTL -> MemoryX.

Each training step:

1. **Broadcast.** The bf16 weights of every layer (MemoryX, rows in order, one bf16 per 32-bit
   word in the low half, ``last`` on each layer's final word) are loaded into the broadcast
   player; the SwarmX tree RTL delivers them to N leaf recorders. Every leaf must receive exactly
   the stream, and each system computes with the weights *its leaf received*.
2. **Systems.** Each system runs the exact wafer kernels (``models.pipeline``) on its batch:
   forward, host softmax cross-entropy, backward (``--wafer model``: golden wafer kernels, only
   SwarmX in RTL; the RTL wafers run in ``sim/system/bench_rtl_wafers.py``).
3. **Reduce.** The N fp32 weight gradients (last layer first, row order) are loaded into the
   leaf players; the tree RTL sums them; the root recorder must hold ``tree_sum`` bit for bit,
   and MemoryX applies the optimizer to what the RTL produced.
4. **Check.** A golden ``WaferTrainer`` with its own MemoryX takes the same step; every fp32
   master weight must be equal bit for bit, and the cycles of both SwarmX phases must equal
   ``models.swarmx.SwarmxTiming`` when nothing stalls (with stalls: at least the model's).

Parameters (``sim.kit.params()``): see :class:`sim.system.config.SystemRunConfig`.
Writes ``results.json`` (and ``weights.safetensors``) into ``params["out_dir"]``.
"""

import json
import time
from pathlib import Path

import cocotb
import numpy as np

from arch.wavelet import unpack_tagged
from hdl.fp.fp32_add import Fp32Add
from models.memoryx import export_safetensors
from models.numerics import bits, f32, tree_sum
from models.pipeline import kernels
from models.pipeline.timing import TimingParams, step_timing
from models.pipeline.training import WaferTrainer, build_memoryx, layer_names, system_gradients
from models.swarmx import SwarmxTiming
from sim.kit import params
from sim.kit.clocking import reset
from sim.kit.player_memory import load_words, read_words, tagged_words
from sim.kit.swarmx_phase import run_swarmx_phase
from sim.system.config import DATA_FILE, SystemRunConfig


@cocotb.test()
async def train(dut):
    run = SystemRunConfig.from_dict(params())
    out_dir = Path(run.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n, names = run.systems, layer_names(run.dims)
    optimizer = run.make_optimizer
    mx = build_memoryx(run.dims, optimizer=optimizer(), seed=run.seed)
    golden = WaferTrainer(run.dims, build_memoryx(run.dims, optimizer=optimizer(), seed=run.seed),
                          mesh=run.mesh, systems=n, batch=run.batch)
    data = np.load(out_dir / DATA_FILE)
    x_tr, x_te, y_tr, y_te = data["x_train"], data["x_test"], data["y_train"], data["y_test"]
    rng = np.random.default_rng(run.seed)
    order = np.concatenate([rng.permutation(len(x_tr)) for _ in range(run.steps * golden.global_batch
                                                                      // len(x_tr) + 1)])
    timing = SwarmxTiming(n, Fp32Add.LATENCY)
    sizes = [run.dims[i + 1] * run.dims[i] for i in range(len(names))]
    words = sum(sizes)
    # The wafer timing of this system: its mesh, one SwarmX word per cycle each way, its optimizer.
    model_step = step_timing(run.dims, run.batch, n, TimingParams(
        mesh_rows=run.mesh[0], mesh_cols=run.mesh[1], weight_words_per_cycle=1.0,
        grad_words_per_cycle=1.0, memoryx_optimizer=run.optimizer))

    dut.src_stall.value = run.stall
    dut.sink_stall.value = run.stall
    await reset(dut)
    bcast_player = dut.bcast_player.mem
    leaf_recs = [getattr(dut, f"leaf_rec{i}") for i in range(n)]
    leaf_players = [getattr(dut, f"reduce_player{i}").mem for i in range(n)]
    root = dut.root_rec
    history = []
    wall = time.perf_counter()
    sim_cycles = 0
    timeout = 50 * words + 1000

    for step in range(run.steps):
        idx = order[step * golden.global_batch:(step + 1) * golden.global_batch]
        x, labels = x_tr[idx], y_tr[idx]

        # 1. broadcast through the SwarmX RTL
        w16s = [np.concatenate(list(mx.stream(name, rows_per_chunk=64)), axis=0) for name in names]
        stream = tagged_words(w16s)
        load_words(bcast_player, stream)
        await run_swarmx_phase(dut, words, 0, timeout)
        received = []
        for i, rec in enumerate(leaf_recs):
            got = read_words(rec.mem, words)
            if not np.array_equal(got, stream):
                bad = int(np.flatnonzero(got != stream)[0])
                raise AssertionError(f"step {step}: leaf {i} word {bad}: got {int(got[bad]):#x}, "
                                     f"sent {int(stream[bad]):#x}")
            flat = (unpack_tagged(got)[0] & 0xFFFF).astype(np.uint16)     # bf16 in the low half
            received.append([a.reshape(run.dims[l + 1], run.dims[l]) for l, a in
                             enumerate(np.split(flat, np.cumsum(sizes)[:-1]))])
        first_in = int(dut.bcast_player.first_stamp.value)
        stamps = [read_words(rec.stamps, words) for rec in leaf_recs]
        bcast_latency = min(int(s[0]) for s in stamps) - first_in
        bcast_cycles = max(int(s[-1]) for s in stamps) - first_in + 1

        # 2. the N systems (exact wafer kernels) on the weights their leaf received
        losses, grads = [], []
        for i in range(n):
            rows = slice(i * run.batch, (i + 1) * run.batch)
            loss, g = system_gradients(received[i], kernels.to_bf16(x[rows].T), labels[rows],
                                       run.mesh, golden.global_batch)
            losses.append(loss)
            grads.append(g)

        # 3. reduce through the SwarmX RTL, last layer first, into MemoryX
        back = list(range(len(names) - 1, -1, -1))
        for i in range(n):
            load_words(leaf_players[i], tagged_words([bits(grads[i][l]) for l in back]))
        await run_swarmx_phase(dut, 0, words, timeout)
        got = read_words(root.mem, words)
        expected = tagged_words([bits(tree_sum(np.stack([g[l] for g in grads]))) for l in back])
        if not np.array_equal(got, expected):
            bad = int(np.flatnonzero(got != expected)[0])
            raise AssertionError(f"step {step}: reduced word {bad}: RTL {int(got[bad]):#x}, "
                                 f"tree_sum {int(expected[bad]):#x}")
        first_in = min(int(getattr(dut, f"reduce_player{i}").first_stamp.value) for i in range(n))
        root_stamps = read_words(root.stamps, words)
        reduce_latency = int(root_stamps[0]) - first_in
        reduce_cycles = int(root_stamps[-1]) - first_in + 1
        sums = np.split(unpack_tagged(got)[0].astype(np.uint32), np.cumsum([sizes[l] for l in back])[:-1])
        for l, s in zip(back, sums):
            mx.apply_gradient(names[l], f32(s).reshape(run.dims[l + 1], run.dims[l]))

        # 4. golden step and checks
        ref = golden.step(x, labels)
        for name in names:
            a, b = bits(mx.master(name)), bits(golden.mx.master(name))
            if not np.array_equal(a, b):
                raise AssertionError(f"step {step}: layer {name}: {int(np.sum(a != b))} master weights "
                                     f"differ from the golden pipeline model")
        if run.stall == 0:
            assert bcast_latency == timing.broadcast_latency, (bcast_latency, timing.broadcast_latency)
            assert bcast_cycles == timing.broadcast_cycles(words), (bcast_cycles, timing.broadcast_cycles(words))
            assert reduce_latency == timing.reduce_latency, (reduce_latency, timing.reduce_latency)
            assert reduce_cycles == timing.reduce_cycles(words), (reduce_cycles, timing.reduce_cycles(words))
        else:
            assert bcast_cycles >= timing.broadcast_cycles(words)
            assert reduce_cycles >= timing.reduce_cycles(words)
        sim_cycles += bcast_cycles + reduce_cycles
        loss = float(np.mean(losses))
        assert loss == ref.loss, (loss, ref.loss)
        record = {
            "step": step + 1, "loss": loss,
            "swarmx_broadcast_cycles": bcast_cycles, "swarmx_broadcast_latency": bcast_latency,
            "swarmx_reduce_cycles": reduce_cycles, "swarmx_reduce_latency": reduce_latency,
            "model_broadcast_cycles": timing.broadcast_cycles(words),
            "model_reduce_cycles": timing.reduce_cycles(words),
        }
        if (step + 1) % run.eval_every == 0 or step + 1 == run.steps:
            record["test_accuracy"] = float(np.mean(golden.predict(x_te) == y_te))
        history.append(record)
        acc = f"  test acc {record['test_accuracy']:.3f}" if "test_accuracy" in record else ""
        print(f"step {step + 1:4d}/{run.steps}  loss {loss:.4f}{acc}  swarmx bcast {bcast_cycles} cy"
              f"  reduce {reduce_cycles} cy  [bit-exact]", flush=True)

    seconds = time.perf_counter() - wall
    export_safetensors(mx, out_dir / "weights.safetensors")
    results = {
        "config": run.as_dict(), "words_per_phase": words, "swarmx_depth": timing.depth,
        "adder_latency": Fp32Add.LATENCY, "steps": history,
        "wafer_model_step": model_step.summary(),
        "simulated_cycles": sim_cycles, "wall_seconds": seconds,
        "cycles_per_second": sim_cycles / seconds if seconds else 0.0,
        "simulator": "cocotb+" + ("verilator" if "verilator" in cocotb.SIM_NAME.lower() else "icarus"),
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
