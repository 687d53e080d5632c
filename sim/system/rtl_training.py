"""The training loop of the RTL-wafer system, independent of how the RTL is simulated:
MemoryX -> SwarmX RTL -> N RTL wafers of P x Q PE tiles -> SwarmX RTL -> MemoryX
(docs/system_simulation.md#how-a-step-runs).

:func:`training` is a generator: it yields one :class:`PhaseRequest` per phase (what every
wafer's configuration player writes, the weight words the broadcast player streams, how many
words each recorder must receive) and is sent back the :class:`PhaseResult` (cycle counts and
the recorders' words); it returns the ``results.json`` dictionary. Two drivers run it:
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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from arch.wavelet import unpack_wavelet
from compiler.config_state import ConfigState
from compiler.multicast import multicast
from compiler.wafer import (
    compile_backward_data,
    compile_backward_weight,
    compile_forward,
    join_gradients,
    resident_bases,
    split_dx,
    weight_streams,
)
from hdl.config import Config
from models.memoryx import export_safetensors
from models.numerics import f32
from models.pipeline import kernels
from models.pipeline.rtl_schedule import RtlHardware, step_schedule
from models.pipeline.timing import TimingParams, step_timing
from models.pipeline.training import WaferTrainer, build_memoryx, layer_names
from sim.system.timeline import step_timeline

__all__ = ["PhaseRequest", "PhaseResult", "training"]


@dataclass
class PhaseRequest:
    """One phase: ``writes[i]`` = wafer i's configuration writes ``[(addr, value)]`` (all the
    same length), ``streams[q]`` the tagged weight words to broadcast on link q (uint64, one
    array per mesh column, empty ones for none), ``west_in[i][p]`` the wavelets the host sends
    into row p of wafer i at the west edge (all the same length; empty: none), ``roots[q]`` the
    words root recorder q must receive (one count per mesh column), ``west`` / ``east`` the words
    every west / east edge recorder must receive; ``what`` names the phase in messages.
    :meth:`of` builds one from compiled phases."""
    what: str
    writes: list
    streams: list = field(default_factory=list)
    west_in: list = field(default_factory=list)
    roots: list = field(default_factory=list)
    west: int = 0
    east: int = 0

    @classmethod
    def of(cls, what, progs, streams=(), roots=(), **counts):
        """The request of ``progs``, one :class:`compiler.wafer.WaferPhase` per wafer (the same
        write count each); ``streams`` / ``roots`` per mesh column (none given: empty, zero)."""
        counts_w = {len(ph.writes) for ph in progs}
        assert len(counts_w) == 1, f"{what}: wafers got different write counts {counts_w}"
        links = len(progs[0].plan["k_slices"])
        rows = len(progs[0].west_in)
        west_in = [[ph.west_in[p] for p in range(rows)] for ph in progs] if rows else []
        return cls(what=what, writes=[ph.writes for ph in progs],
                   streams=list(streams) or [np.zeros(0, np.uint64)] * links,
                   west_in=west_in, roots=list(roots) or [0] * links, **counts)

    @property
    def has_weights(self):
        return any(len(words) for words in self.streams)

    @property
    def west_in_count(self):
        return len(self.west_in[0][0]) if self.west_in else 0


@dataclass
class PhaseResult:
    """``cfg_cycles``, ``run_cycles`` (the harness's counters), ``stream_cycles`` (first to last
    weight word on any link, 0 without weights); the recorders' words (uint64):
    ``root_words[q]``, ``west_words[i][p]``, ``east_words[i][p]`` (empty when not expected)."""
    cfg_cycles: int
    run_cycles: int
    stream_cycles: int
    root_words: list = field(default_factory=list)
    west_words: list = field(default_factory=list)
    east_words: list = field(default_factory=list)


def training(run, cfg: Config, data, *, log=print):
    """Generator of the whole run (see the module docstring); ``data``: the ``digits.npz`` split
    (``x_train, x_test, y_train, y_test``). Returns the results dictionary (without the
    simulator's speed, which the driver adds) and writes ``weights.safetensors``."""
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
    states = [ConfigState() for _ in range(n)]      # each wafer's registers, kept across phases

    def programs(kind, l, compile_phase, acts, dz=None, **kw):
        """Every wafer's phase: X loaded only where the wafer does not keep it (the input batch:
        in the first step, later steps find it streamed in by the step before), the next input
        batch streamed in where the phase carries it, registers the wafer holds left out."""
        res_args = resident_bases(cfg, dims, kind, l)
        first_input = kind == "forward" and l == 0 and step == 0
        out = []
        for i, state in enumerate(states):
            x16 = acts[i][l] if res_args["x_home"] is None or first_input else None
            data = {} if dz is None else {"dz16": dz[i]}
            if "next_input" in res_args:
                data["next_x16"] = next_x[i]
            out.append(multicast(cfg, state.program(compile_phase(
                cfg, m=dims[l + 1], k=dims[l], batch=B, x16=x16, **data, **kw, **res_args))))
        return out

    for step in range(run.steps):
        idx = order[step * golden.global_batch:(step + 1) * golden.global_batch]
        x, labels = x_tr[idx], y_tr[idx]
        x_next = x_tr[order[(step + 1) * golden.global_batch:(step + 2) * golden.global_batch]]
        next_x = [kernels.to_bf16(x_next[i * B:(i + 1) * B].T) for i in range(n)]
        w16 = [mx.bf16(name) for name in names]
        acts = [[kernels.to_bf16(x[i * B:(i + 1) * B].T)] for i in range(n)]
        phases, logits = [], [None] * n

        # Forward, layer by layer: activations out of the west edge, logits out of the east.
        for l in range(nl):
            m, k, last = dims[l + 1], dims[l], l == nl - 1
            progs = programs("forward", l, compile_forward, acts, last=last)
            counts = {"east" if last else "west": m * L}
            res = yield PhaseRequest.of(f"forward layer {l}", progs, weight_streams(cfg, w16[l]),
                                        **counts)
            phases.append(("forward", l, res, (len(progs[0].writes), progs[0].plan)))
            for i in range(n):
                words = res.east_words[i] if last else res.west_words[i]
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
                progs = programs("backward-data", l, compile_backward_data, acts, dz)
                res = yield PhaseRequest.of(f"backward-data layer {l}", progs,
                                            weight_streams(cfg, w16[l], transposed=True), west=k * L)
                phases.append(("backward-data", l, res, (len(progs[0].writes), progs[0].plan)))
                dz_prev = [np.concatenate([split_dx(cfg, w, k) for w in res.west_words[i]], axis=1)
                           for i in range(n)]
            progs = programs("backward-weight", l, compile_backward_weight, acts, dz)
            res = yield PhaseRequest.of(f"backward-weight layer {l}", progs,
                                        roots=progs[0].link_words)
            phases.append(("backward-weight", l, res, (len(progs[0].writes), progs[0].plan)))
            try:
                grads[l] = f32(join_gradients(cfg, res.root_words, m=m, k=k))
            except ValueError as e:
                raise AssertionError(f"step {step + 1}: layer {l}: reduced gradients: {e}") from None
            if dz_prev is not None:
                dz = dz_prev
        for l in range(nl - 1, -1, -1):
            mx.apply_gradient(names[l], grads[l])

        # Golden step and checks.
        ref = golden.step(x, labels)
        for name in names:
            a, b = mx.master(name).view(np.uint32), golden.mx.master(name).view(np.uint32)
            if not np.array_equal(a, b):
                raise AssertionError(f"step {step + 1}: layer {name}: {int(np.sum(a != b))} master "
                                     f"weights differ from the golden pipeline model")
        loss = float(np.mean(losses))
        assert loss == ref.loss, (loss, ref.loss)
        # A weight link can never beat one SwarmX word per cycle (the timing model's stream term
        # M * |K_q| of the fullest link); how far each stays above it is recorded
        # (docs/system_simulation.md explains why).
        for ph, l, res, (_, plan) in phases:
            if ph != "backward-weight":
                words = dims[l + 1] * max(len(sl) for sl in plan["k_slices"])
                assert res.stream_cycles >= words, \
                    f"step {step + 1}: {ph} layer {l}: {words} weights on a link in {res.stream_cycles} cycles"
        # Cycles against the timing model of this schedule: equal without stalls, else above.
        # The model depends only on the configuration-word counts and plans, the same every step
        # for a network: computed once per distinct set.
        key = tuple((ph, l, w[0]) for ph, l, _, w in phases)
        if key not in schedules:
            schedules[key] = step_schedule(dims, hw, {(ph, l): w for ph, l, _, w in phases})
        model = schedules[key]
        for (ph, l, res, _), mp in zip(phases, model, strict=True):
            assert (mp.phase, mp.layer) == (ph, l), (mp, ph, l)
            where = f"step {step + 1}: {ph} layer {l}"
            c, r = res.cfg_cycles, res.run_cycles
            if run.stall == 0:
                assert (c, r) == (mp.config, mp.run), \
                    f"{where}: {c} configuration + {r} run cycles, model {mp.config} + {mp.run}"
            else:
                assert c == mp.config and r >= mp.run_formula, \
                    f"{where}: {c} + {r} cycles, the model's {mp.config} + at least {mp.run_formula}"
        step_cycles = sum(res.cfg_cycles + res.run_cycles for _, _, res, _ in phases)
        sim_cycles += step_cycles
        record = {"step": step + 1, "loss": loss, "cycles": step_cycles,
                  "phases": [{"phase": ph, "layer": l, "config_writes": w[0],
                              "config_cycles": res.cfg_cycles, "run_cycles": res.run_cycles,
                              "stream_cycles": res.stream_cycles,
                              "model_config_cycles": mp.config, "model_run_cycles": mp.run,
                              "model_run_formula": mp.run_formula,
                              "lane_utilization": dims[l + 1] * dims[l] * B / (pe_lanes * res.run_cycles)}
                             for (ph, l, res, w), mp in zip(phases, model)]}
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
