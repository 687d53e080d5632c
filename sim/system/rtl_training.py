"""The training loop of the RTL-wafer system, independent of how the RTL is simulated:
MemoryX -> SwarmX RTL -> N RTL wafers of P x Q PE tiles -> SwarmX RTL -> MemoryX
(docs/system_simulation.md#how-a-step-runs).

:func:`training` is a generator: it yields one :class:`~sim.system.rtl_phases.PhaseRequest` per
phase (what every wafer's configuration player writes, the weight words the broadcast player
streams, how many words each recorder must receive) and is sent back the
:class:`~sim.system.rtl_phases.PhaseResult` (cycle counts and the recorders' words); it returns
the ``results.json`` dictionary. Each phase is a unit of :mod:`sim.system.rtl_phases`. Two drivers run it:
``sim/system/bench_rtl_wafers.py`` (cocotb + Icarus, one simulation for the whole run) and
``sim/system/rtl_host.py`` (one plain-Verilog testbench process per phase, Verilator or Icarus).

Each training step, for every phase (compiled by :mod:`compiler.wafer`):

1. **Configure.** The host compiles the phase for every wafer: routes, descriptors, adapter
   registers and the SRAM inputs the wafer does not hold (``dZ``, the input batch in the first
   step, and ``X^T`` of the input where the forward cannot transpose it; activations and their
   transposes stay resident, ``compiler.wafer.resident_bases``, and the phases of
   ``compiler.wafer.input_stream_columns`` stream the next step's input batch in at the west
   edges while they run), leaving out register writes of values the wafer already holds
   (``compiler.config_state.ConfigState``, one per wafer, kept for the run) and writing registers
   and loads that several tiles share once (``compiler.multicast``); the words go
   into each wafer's configuration player, which writes one per cycle (no fabric traffic
   meanwhile, except backward-weight, which starts when its descriptors commit).
2. **Run.** The broadcast players send the layer's bf16 weights from MemoryX, one per mesh
   column (``compiler.wafer.weight_streams``: rows of ``W[:, K_q]`` for the forward pass, rows
   of ``W^T`` for backward-data), each into its SwarmX tree RTL, which broadcasts them to the N
   wafers; recorders take what leaves each wafer's host edges (hidden activations and
   ``dZ_prev`` west, logits east) and the trees' reduced gradients (backward-weight: every
   wafer's column q -> SwarmX reduce of tree q -> root recorder q).
3. **Host.** Softmax cross-entropy and its bf16 ``dZ`` (``kernels.softmax_xent``) on the logits
   each wafer produced; MemoryX applies the optimizer to the reduced gradients the RTL produced.
4. **Check.** A golden ``WaferTrainer`` takes the same step; the loss and every fp32 master
   weight must be equal bit for bit. The configuration and run cycles of every phase are checked
   against the timing model of this schedule (``models.pipeline.rtl_schedule`` on the compiler's
   configuration-word counts and plans): equal with ``stall = 0``; with stalls the configuration
   still equal and the run at least the contention-free formula (a lower bound under any stalls;
   the exact model is not one: stalls can reorder the arbitration of a router output or the
   vector unit's picks so that a phase ends earlier). Each weight link
   takes at least its ``M*|K_q|`` cycles. The pipelined architecture model
   (``models.pipeline.timing``) is kept in the results for reference.
"""

import time
from pathlib import Path

import numpy as np

from hdl.config import Config
from models.memoryx import export_safetensors
from models.pipeline import kernels
from models.pipeline.rtl_schedule import RtlHardware, step_schedule
from models.pipeline.timing import TimingParams, step_timing
from models.pipeline.training import WaferTrainer, build_memoryx, layer_names
from sim.system import rtl_phases
from sim.system.rtl_phases import Wafers
from sim.system.timeline import step_timeline

__all__ = ["training", "simulator_speed"]


def training(run, cfg: Config, data, *, log=print):
    """Generator of the whole run (see the module docstring): yields each phase's
    :class:`~sim.system.rtl_phases.PhaseRequest` and is sent its
    :class:`~sim.system.rtl_phases.PhaseResult`; ``data``: the ``digits.npz`` split (``x_train,
    x_test, y_train, y_test``). Returns the results dictionary (without the simulator's speed,
    which the driver adds) and writes ``weights.safetensors``."""
    out_dir = Path(run.out_dir)
    n, names, dims = run.systems, layer_names(run.dims), run.dims
    nl, P, L, B = len(names), cfg.mesh_rows, cfg.lanes, run.batch
    optimizer = run.make_optimizer
    mx = build_memoryx(dims, optimizer=optimizer(), seed=run.seed)
    golden = WaferTrainer(dims, build_memoryx(dims, optimizer=optimizer(), seed=run.seed),
                          mesh=run.mesh, systems=n, batch=B)
    x_tr, x_te, y_tr, y_te = data["x_train"], data["x_test"], data["y_train"], data["y_test"]
    rng = np.random.default_rng(run.seed)
    # One batch more than the steps take: the last step streams in the batch after it too.
    order = np.concatenate([rng.permutation(len(x_tr)) for _ in range((run.steps + 1) * golden.global_batch
                                                                      // len(x_tr) + 1)])
    timing_params = TimingParams(mesh_rows=P, mesh_cols=cfg.mesh_cols, lanes=L,
                                 weight_words_per_cycle=cfg.mesh_cols,
                                 grad_words_per_cycle=cfg.mesh_cols,
                                 memoryx_optimizer=run.optimizer)
    model_step = step_timing(dims, B, n, timing_params)
    hw = RtlHardware.from_config(cfg)
    history, wall, sim_cycles = [], time.perf_counter(), 0
    pe_lanes = cfg.mesh_rows * cfg.mesh_cols * L         # FMAC lanes of one wafer
    schedules = {}      # the timing model per configuration-word counts
    wafers = Wafers(cfg, dims, B, n)

    def samples(step):
        """The training-set indices of the step's global batch."""
        return order[step * golden.global_batch:(step + 1) * golden.global_batch]

    def per_wafer(x):
        """A global batch as each wafer's bf16 ``K x B``."""
        return [kernels.to_bf16(x[i * B:(i + 1) * B].T) for i in range(n)]

    for step in range(run.steps):
        idx = samples(step)
        x, labels = x_tr[idx], y_tr[idx]
        wafers.begin_step(per_wafer(x), per_wafer(x_tr[samples(step + 1)]), first=step == 0)
        w16 = [mx.bf16(name) for name in names]
        phases = []

        # Forward, layer by layer: activations out of the west edge, logits out of the east.
        for l in range(nl):
            ph, logits = yield from rtl_phases.forward(wafers, l, w16[l])
            phases.append(ph)

        # Host: softmax cross-entropy.
        losses, dz = [], []
        for i in range(n):
            loss, d = kernels.softmax_xent(logits[i], labels[i * B:(i + 1) * B], golden.global_batch)
            losses.append(loss)
            dz.append(d)

        # Backward, last layer first: backward-data (W^T stream), then backward-weight (reduce).
        grads = {}
        for l in range(nl - 1, -1, -1):
            dz_prev = None
            if l > 0:
                ph, dz_prev = yield from rtl_phases.backward_data(wafers, l, w16[l], dz)
                phases.append(ph)
            try:
                ph, grads[l] = yield from rtl_phases.backward_weight(wafers, l, dz)
            except ValueError as e:
                raise AssertionError(f"step {step + 1}: layer {l}: reduced gradients: {e}") from None
            phases.append(ph)
            if dz_prev is not None:
                dz = dz_prev
        for l in range(nl - 1, -1, -1):
            mx.apply_gradient(names[l], grads[l])

        # Golden step and checks.
        ref = golden.step(x, labels)
        loss = float(np.mean(losses))
        _check_bits(step, mx, golden, names, loss, ref.loss)
        key = tuple((r.phase, r.layer, r.writes, r.go_after) for r in phases)
        if key not in schedules:
            schedules[key] = step_schedule(dims, hw, {(r.phase, r.layer): (r.writes, r.go_after, r.plan)
                                                      for r in phases})
        model = schedules[key]
        _check_cycles(step, phases, model, dims, stall=run.stall)
        step_cycles = sum(r.result.cfg_cycles + r.result.run_cycles for r in phases)
        sim_cycles += step_cycles
        record = {"step": step + 1, "loss": loss, "cycles": step_cycles,
                  "phases": [{"phase": r.phase, "layer": r.layer, "config_writes": r.writes,
                              "writes_before_go": r.go_after,
                              "config_cycles": r.result.cfg_cycles, "run_cycles": r.result.run_cycles,
                              "stream_cycles": r.result.stream_cycles,
                              "model_config_cycles": mp.config, "model_run_cycles": mp.run,
                              "model_run_formula": mp.run_formula,
                              "lane_utilization": dims[r.layer + 1] * dims[r.layer] * B
                              / (pe_lanes * r.result.run_cycles)}
                             for r, mp in zip(phases, model)]}
        if (step + 1) % run.eval_every == 0 or step + 1 == run.steps:
            record["test_accuracy"] = float(np.mean(golden.predict(x_te) == y_te))
        history.append(record)
        acc = f"  test acc {record['test_accuracy']:.3f}" if "test_accuracy" in record else ""
        log(f"step {step + 1:4d}/{run.steps}  loss {loss:.4f}{acc}  {step_cycles} cycles "
            f"(RTL wafers)  [bit-exact]")

    seconds = time.perf_counter() - wall
    export_safetensors(mx, out_dir / "weights.safetensors")
    fmacs = sum(dims[l + 1] * dims[l] for l in range(nl)) * B * 3 - dims[0] * dims[1] * B
    last_phases = history[-1]["phases"]
    return {
        "config": run.as_dict(), "wafer": "rtl", "hardware": cfg.as_dict(), "steps": history,
        "phases": last_phases,
        "wafer_model_step": model_step.summary(),
        "timeline": step_timeline(last_phases, dims, timing_params),
        "utilization": fmacs / (pe_lanes * history[-1]["cycles"]),
        "simulated_cycles": sim_cycles, "wall_seconds": seconds,
        "cycles_per_second": sim_cycles / seconds if seconds else 0.0,
    }


def _check_bits(step, mx, golden, names, loss, golden_loss):
    """Every fp32 master weight and the loss equal the golden pipeline model's, bit for bit."""
    for name in names:
        a, b = mx.master(name).view(np.uint32), golden.mx.master(name).view(np.uint32)
        if not np.array_equal(a, b):
            raise AssertionError(f"step {step + 1}: layer {name}: {int(np.sum(a != b))} master "
                                 f"weights differ from the golden pipeline model")
    assert loss == golden_loss, (loss, golden_loss)


def _check_cycles(step, phases, model, dims, *, stall):
    """Each phase's cycles against the timing model of this schedule (``model``: its
    ``PhaseCycles`` in the same order): equal without stalls; with stalls the configuration equal
    and the run at least the contention-free formula. A weight link can never beat one SwarmX
    word per cycle (the timing model's stream term ``M * |K_q|`` of the fullest link); how far
    each stays above it is recorded (docs/system_simulation.md explains why)."""
    for r in phases:
        if r.phase != "backward-weight":
            words = dims[r.layer + 1] * max(len(sl) for sl in r.plan["k_slices"])
            assert r.result.stream_cycles >= words, (f"step {step + 1}: {r.phase} layer {r.layer}: {words} "
                                                     f"weights on a link in {r.result.stream_cycles} cycles")
    for r, mp in zip(phases, model, strict=True):
        assert (mp.phase, mp.layer) == (r.phase, r.layer), (mp, r.phase, r.layer)
        where = f"step {step + 1}: {r.phase} layer {r.layer}"
        c, run = r.result.cfg_cycles, r.result.run_cycles
        if stall == 0:
            assert (c, run) == (mp.config, mp.run), \
                f"{where}: {c} configuration + {run} run cycles, model {mp.config} + {mp.run}"
        else:
            assert c == mp.config and run >= mp.run_formula, \
                f"{where}: {c} + {run} cycles, the model's {mp.config} + at least {mp.run_formula}"


def simulator_speed(cfg, cycles, cpu_seconds):
    """The ``results.json`` fields of the simulator's speed: ``simulator_cycles`` (clock cycles it
    ran), ``simulator_cpu_seconds``, ``cycles_per_cpu_second`` and ``pe_cycles_per_cpu_second``
    (PE tiles x cycles / CPU-s: the system's ``swarmx_leaves`` wafers of ``mesh_rows x
    mesh_cols`` tiles, ``simulated_pe_tiles``), 0 without CPU time."""
    tiles = cfg.swarmx_leaves * cfg.mesh_rows * cfg.mesh_cols
    rate = cycles / cpu_seconds if cpu_seconds else 0.0
    return {"simulator_cycles": cycles, "simulator_cpu_seconds": cpu_seconds,
            "simulated_pe_tiles": tiles, "cycles_per_cpu_second": rate,
            "pe_cycles_per_cpu_second": tiles * rate}
