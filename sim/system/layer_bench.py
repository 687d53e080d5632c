"""Per-layer benchmark of the RTL wafer (docs/system_simulation.md#per-layer-benchmark): one
``M x K`` layer with a batch of ``P * lanes`` on ``N = cfg.swarmx_leaves`` wafers of ``P x Q``
tiles behind SwarmX, in forward, backward-data and backward-weight. Each phase is configured in
full (every input loaded, every register written, all before ``go``) and runs on the system testbench
(:class:`sim.system.rtl_host.PhaseRunner`, one process, Verilator or Icarus), is checked
bit for bit against ``models.pipeline.kernels`` (SwarmX's sum: ``models.numerics.tree_sum``) and
cycle for cycle against ``models.pipeline.rtl_schedule`` (configuration and run equal to the
model), and reports the FMAC lane utilization of its run: ``M K B`` FMACs over ``P Q lanes``
lane-cycles per run cycle.

Forward keeps, per PE, an accumulator row and an incoming partial-sum row per output row, and
backward-weight ``M |K_q|`` partials and as many incoming sums: where the whole layer does not fit a
PE's SRAM, these two run in blocks of output rows (:func:`row_blocks`: as few blocks as the largest
block that fits allows, their sizes differing by at most one row), each block a phase of its own
(its own configuration and weight rows); the records sum the blocks.
Backward-data sums over M and runs whole.
"""

import dataclasses

import numpy as np

from compiler.wafer import (
    WaferCompileError,
    compile_backward_data,
    compile_backward_weight,
    compile_forward,
    dx_edge_words,
    forward_expected_outputs,
    join_gradients,
    split_dx,
    weight_streams,
)
from models.numerics import bf16_bits, tree_sum
from models.pipeline import kernels
from models.pipeline.rtl_schedule import (
    RtlHardware,
    backward_data_run_cycles,
    backward_weight_run_cycles,
    config_cycles,
    forward_run_cycles,
    simulated_run_cycles,
)
from sim.system.rtl_host import PhaseRunner
from sim.system.rtl_phases import PhaseRequest

__all__ = ["run_layer", "row_block", "row_blocks", "layer_data"]


def layer_data(m, k, batch, seed):
    """Random bf16 ``W`` (M x K), activations ``X`` (K x batch, ReLU outputs: non-negative, some
    zeros) and ``dZ`` (M x batch)."""
    rng = np.random.default_rng(seed)
    w16 = bf16_bits((rng.standard_normal((m, k)) / np.sqrt(k)).astype(np.float32))
    x16 = bf16_bits(np.maximum(rng.standard_normal((k, batch)), 0).astype(np.float32))
    dz16 = bf16_bits((rng.standard_normal((m, batch)) * 0.01).astype(np.float32))
    return w16, x16, dz16


def row_block(cfg, kind, m, k, batch):
    """The most output rows (at most ``m``) whose ``kind`` phase (``"forward"`` or
    ``"backward-weight"``) the compiler fits on the wafer."""
    compile_phase = {"forward": compile_forward, "backward-weight": compile_backward_weight}[kind]
    for rows in range(m, 0, -1):
        try:
            compile_phase(cfg, m=rows, k=k, batch=batch)
            return rows
        except WaferCompileError as e:
            if "SRAM" not in str(e) and "multiple of lanes" not in str(e):
                raise
    raise WaferCompileError(f"{kind} of a {m}x{k} layer fits the wafer in no block of rows")


def row_blocks(cfg, kind, m, k, batch):
    """The blocks of output rows ``kind`` runs an ``m``-row layer in, as row counts in run order:
    as few as blocks of :func:`row_block` rows allow, ``n = ceil(m / row_block)``, the first
    ``n - m mod n`` of ``m // n`` rows, the rest one more (each block pays the phase's fill and
    drain, so fewer, larger blocks win; the largest that fits need not divide ``m``)."""
    n = -(-m // row_block(cfg, kind, m, k, batch))
    small, big = divmod(m, n)
    return [small] * (n - big) + [small + 1] * big


def _starts(blocks):
    """``(first row, rows)`` of each block."""
    out, r0 = [], 0
    for rows in blocks:
        out.append((r0, rows))
        r0 += rows
    return out


def _request(cfg, what, phase, streams=(), **counts):
    """Every wafer runs the same compiled phase, every write before ``go`` (none under the run:
    the run's lane utilization is the figure, the configuration is reported apart)."""
    return dataclasses.replace(PhaseRequest.of(what, [phase] * cfg.swarmx_leaves, streams, **counts),
                               go_after=None)


def _phases(cfg, m, k, w16, x16, dz16, blocks):
    """``(kind, rows, WaferPhase, PhaseRequest, check)`` in run order; ``check(result)`` raises
    ``AssertionError`` when the RTL's words differ from the kernels'."""
    P, L, n = cfg.mesh_rows, cfg.lanes, cfg.swarmx_leaves
    batch = P * L
    out = []

    a16 = kernels.relu_bf16(kernels.forward(w16, x16, (P, cfg.mesh_cols)))
    for r0, block in _starts(blocks["forward"]):
        rows = slice(r0, r0 + block)
        fwd = compile_forward(cfg, m=block, k=k, batch=batch, x16=x16)
        want = forward_expected_outputs(cfg, a16[rows])
        side = fwd.out_edge

        def check_forward(res, want=want, side=side, r0=r0, block=block):
            for p in range(P):
                got = (res.west_words if side == "west" else res.east_words)[0][p]
                assert np.array_equal(got, np.array(want[p], dtype=np.uint64)), \
                    f"forward: rows {r0}..{r0 + block - 1}, mesh row {p}: results differ from kernels.forward"
        out.append(("forward", block, fwd,
                    _request(cfg, f"forward rows {r0}..{r0 + block - 1}", fwd,
                             weight_streams(cfg, w16[rows]), **{side: block * L}), check_forward))

    bd = compile_backward_data(cfg, m=m, k=k, batch=batch, x16=x16, dz16=dz16)
    want_bd = kernels.backward_data(w16, dz16, x16)

    west, east = dx_edge_words(cfg, k)

    def check_backward_data(res):
        for p in range(P):
            got = split_dx(cfg, res.edge_words(0, p), k)
            assert np.array_equal(got, want_bd[:, p * L:(p + 1) * L]), \
                f"backward-data: row {p}: dZ_prev differs from kernels.backward_data"
    out.append(("backward-data", m, bd, _request(cfg, "backward-data", bd,
                                                 weight_streams(cfg, w16, transposed=True),
                                                 west=west, east=east), check_backward_data))

    for r0, block in _starts(blocks["backward-weight"]):
        rows = slice(r0, r0 + block)
        bw = compile_backward_weight(cfg, m=block, k=k, batch=batch, x16=x16, dz16=dz16[rows])
        part = kernels.backward_weight(dz16[rows], x16, (P, cfg.mesh_cols))
        want_bw = tree_sum([part] * n).view(np.uint32)

        def check_backward_weight(res, want=want_bw, r0=r0, block=block):
            got = join_gradients(cfg, res.root_words, m=block, k=k)
            assert np.array_equal(got, want), \
                f"backward-weight: rows {r0}..{r0 + block - 1}: dW differs from kernels.backward_weight"
        out.append(("backward-weight", block, bw,
                    _request(cfg, f"backward-weight rows {r0}..{r0 + block - 1}", bw,
                             roots=bw.link_words), check_backward_weight))
    return out


def run_layer(cfg, m, k, *, work, simulator=None, seed=0, log=None):
    """Run the three phases of an ``m x k`` layer on the RTL system ``cfg`` (files in ``work``);
    returns ``{"phases": [record per phase kind], "blocks": {kind: [rows of each block]}, ...}``. Raises
    ``AssertionError`` when a result differs from the kernels or a cycle count from the model."""
    P, Q, L = cfg.mesh_rows, cfg.mesh_cols, cfg.lanes
    batch = P * L
    w16, x16, dz16 = layer_data(m, k, batch, seed)
    blocks = {kind: row_blocks(cfg, kind, m, k, batch) for kind in ("forward", "backward-weight")}
    phases = _phases(cfg, m, k, w16, x16, dz16, blocks)
    depths = {"cfg_depth": max(len(ph.writes) for _, _, ph, _, _ in phases),
              "bcast_depth": max(max(ph.link_words) for kind, _, ph, _, _ in phases if kind != "backward-weight"),
              "root_depth": max(max(ph.link_words) for kind, _, ph, _, _ in phases if kind == "backward-weight"),
              "edge_depth": max(m, k) * L,
              "west_in_depth": max([len(ph.west_in[0]) for _, _, ph, _, _ in phases if ph.west_in] + [1])}
    runner = PhaseRunner(cfg, depths, work, simulator=simulator, log=log).build()
    hw = RtlHardware.from_config(cfg)
    lanes = phases[-1][2].plan["dw"] == "lanes"
    formulas = {"forward": lambda rows: forward_run_cycles(rows, k, hw),
                "backward-data": lambda rows: backward_data_run_cycles(rows, k, hw),
                "backward-weight": lambda rows: backward_weight_run_cycles(rows, k, hw, lanes=lanes)}
    totals = {}
    with runner:
        for kind, rows, phase, request, check in phases:
            res = runner(request)
            check(res)
            model_config = config_cycles(request.go_count)
            model_run = simulated_run_cycles(kind, phase.plan, rows, k, hw, writes=len(phase.writes),
                                             go_after=request.go_count)
            where = f"{request.what} ({m}x{k} on {P}x{Q})"
            assert (res.cfg_cycles, res.run_cycles) == (model_config, model_run), \
                f"{where}: RTL {res.cfg_cycles} + {res.run_cycles} cycles, model {model_config} + {model_run}"
            t = totals.setdefault(kind, {"phase": kind, "runs": 0, "config_cycles": 0, "run_cycles": 0,
                                         "run_formula": 0, "fmacs": 0})
            t["runs"] += 1
            t["config_cycles"] += res.cfg_cycles
            t["run_cycles"] += res.run_cycles
            t["run_formula"] += formulas[kind](rows)
            t["fmacs"] += rows * k * batch
            if log:
                log(f"{where}: {res.cfg_cycles} + {res.run_cycles} cycles, RTL == model, bit-exact")
    records = []
    for t in totals.values():
        t["lane_utilization"] = t["fmacs"] / (P * Q * L * t["run_cycles"])
        records.append(t)
    return {"layer": [m, k], "batch": batch, "mesh": [P, Q], "systems": cfg.swarmx_leaves,
            "blocks": blocks, "simulator": runner.simulator, "phases": records,
            "simulator_cycles": runner.cycles, "simulator_cpu_seconds": runner.cpu_seconds}
