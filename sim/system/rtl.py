"""The RTL-wafer system run: hardware configuration and memory sizes for a
:class:`~sim.system.config.SystemRunConfig`, checked by compiling every phase of the network
(:mod:`compiler.wafer`) before anything is built.

Choices (docs/system_simulation.md): the ``system`` preset (8 colors, 4 lanes, 8 tasks)
with the run's mesh and N; the batch per system must be ``mesh_rows * lanes`` (one batch slice of
``lanes`` samples per mesh row); ``sram_words`` is the smallest power of two that holds every
phase's working set.
"""

from compiler.wafer import (
    WaferCompileError,
    compile_backward_data,
    compile_backward_weight,
    compile_forward,
    resident_bases,
)
from hdl.config import preset

__all__ = ["rtl_config", "phase_plan", "harness_depths"]

MAX_SRAM_WORDS = 1 << 15


def phase_plan(cfg, dims, batch):
    """Every phase of one step in execution order: ``(kind, layer, WaferPhase)``, without data
    (the compiled writes have the structure of the real ones; loads of X and dZ left out), the
    activations resident (``compiler.wafer.resident_bases``)."""
    n = len(dims) - 1
    out = []

    def phase(kind, l, compile_phase, **kw):
        out.append((kind, l, compile_phase(cfg, m=dims[l + 1], k=dims[l], batch=batch, **kw,
                                           **resident_bases(cfg, dims, kind, l))))
    for l in range(n):
        phase("forward", l, compile_forward, last=l == n - 1)
    for l in range(n - 1, -1, -1):
        if l > 0:
            phase("backward-data", l, compile_backward_data)
        phase("backward-weight", l, compile_backward_weight)
    return out


def rtl_config(run):
    """The hardware ``Config`` for ``run`` (raises ``ValueError`` naming the limit it breaks)."""
    P, Q = run.mesh
    cfg = preset(run.preset, mesh_rows=P, mesh_cols=Q, swarmx_leaves=run.systems)
    if run.batch != P * cfg.lanes:
        raise ValueError(f"--batch {run.batch}: the RTL wafer gives each of its {P} mesh rows one "
                         f"batch slice of lanes={cfg.lanes} samples, so the batch per system must "
                         f"be {P * cfg.lanes} (or use --wafer model)")
    words = cfg.sram_words
    while True:
        try:
            phase_plan(cfg, run.dims, run.batch)
            return cfg
        except WaferCompileError as e:
            if "SRAM" not in str(e) or words >= MAX_SRAM_WORDS:
                raise ValueError(f"the RTL wafer cannot run {run.dims} on a {P}x{Q} mesh: {e}") \
                    from None
            words *= 2
            cfg = cfg.replace(sram_words=words)


def harness_depths(cfg, dims):
    """Memory depths of the harness: configuration writes, weight and gradient words per link,
    edge words and west-edge input words (backward-weight's dZ, the next input batch: per row)
    of the largest phase."""
    L = cfg.lanes
    plan = phase_plan(cfg, dims, cfg.mesh_rows * L)
    layers = list(zip(dims[1:], dims[:-1]))
    return {"cfg_depth": max(len(ph.writes) for _, _, ph in plan) + _max_loads(cfg, dims),
            "bcast_depth": max(max(ph.link_words) for _, _, ph in plan),
            "root_depth": max(max(ph.link_words) for _, _, ph in plan),
            "edge_depth": max(max(m, k) for m, k in layers) * L,
            "west_in_depth": max((n for _, _, ph in plan for _, n in ph.plan.get("west_in", {}).values()),
                                 default=1)}


def _max_loads(cfg, dims):
    """Upper bound of the SRAM words a phase loads per wafer (X and dZ of every PE)."""
    L, P, Q = cfg.lanes, cfg.mesh_rows, cfg.mesh_cols
    return max(P * Q * (-(-k // Q) * L + m * L) for m, k in zip(dims[1:], dims[:-1]))
