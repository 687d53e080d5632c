"""Timing model of the RTL system schedule (``make sim``, ``sim/system/bench_rtl_wafers.py``): the
configuration and run cycles of every phase of a training step on N RTL wafers of P x Q PE tiles
behind the SwarmX tree, with no stalls.

Unlike :mod:`models.pipeline.timing` (the architecture's pipelined step: backward-data and
backward-weight in one pass, a DRAM fill, no RAMP-port contention), this follows what the layer
compiler (``compiler/wafer/``) and the bench actually run, phase by phase. Two levels:

* **Configuration** (every phase): the configuration player writes one word per cycle after one
  idle cycle following ``start`` (:data:`PLAYER_START_CYCLES`); the run starts once the writes
  before ``go`` are written (``go_after`` of them: ``go_after + 1`` cycles), the late ones
  (what the run needs only once the PEs send: ``compiler.wafer.WaferPhase.late``) are written
  while it runs.
* **Run, closed formula without contention** (``forward_run_cycles``, ``backward_data_run_cycles``,
  ``backward_weight_run_cycles``): the weight players (one per mesh column, each on its own
  SwarmX tree) start one cycle after ``go`` and stream their column's ``M*|K_q|`` words at one
  per cycle (broadcast latency ``depth``) into the north router of their column; the last word
  reaches the RAMP of row ``P-1`` after ``(P-1) + 2`` cycles (``models.fabric.zero_load_latency``),
  completes the FMAC row, and the VEC that waited on it (forward: ADD, or PASS for one column;
  backward-data: MASK) sends its first word ``models.pe.dep_to_tx_cycles(mul_stages,
  add_stages)`` later (6 unpipelined) and its last ``L-1`` after that; the results cross the
  links west (the logits: none, east edge) to the edge (``+2``), and the recorder's count shows
  the word one cycle later. Backward-weight: the north PE's DOT words
  (``models.pe.dot_word_cycles`` each) and chain ADDs after its DOT commits during
  configuration, minus the writes after that commit, then router, reduce tree and recorder. These are lower bounds.
* **Run, exact** (:func:`simulated_run_cycles`): the closed-loop cycle simulation of the phase
  (:func:`models.pipeline.wafer_cycles.simulate_phase`: the cycle-exact fabric model stepped one
  cycle at a time + a timing model of each PE's wavelet engine and vector unit + the weight and
  gradient links) on the compiler's plan (descriptors, routes, RAMP2 registers). It adds what
  the formulas leave out: the columns' results sharing a row's links to the edge, a store
  engine's word waiting for the bank of an FMAC row write (``models.pe.StoreQueue``: the next
  word comes in behind it and the two are written together; ``rx2`` is not ready only while the
  head waits with both held), and
  vector-unit stores waiting on a stage-1 SRAM write to the same bank (``RtlHardware.sram_banks``).
  A closed formula for those would have to replay the same arbitration, so the model composes
  the cycle-level parts instead (fast: well under a second for the default step).

All figures count cycles as the harness does (``sim/harness/rtl_system.py``): configuration from
``start`` while a configuration player is busy; run from ``go`` until every recorder holds its
words. Plain Python: no amaranth/cocotb.
"""

from dataclasses import dataclass

from arch.pe_map import DESC_WORDS, Op
from models.fabric import zero_load_latency
from models.pe import COLOR_W as _COLOR_W
from models.pe import VEC_FETCH_CYCLES, dep_to_tx_cycles, dot_word_cycles, unit_cycles, vec_out_cycles
from models.pipeline.mapping import dx_west_columns
from models.pipeline.wafer_cycles import simulate_phase
from models.swarmx import SwarmxTiming

__all__ = ["RtlHardware", "PhaseCycles", "PLAYER_START_CYCLES", "RECORDER_COUNT_CYCLES",
           "GO_CYCLES", "config_cycles", "forward_run_cycles", "backward_data_run_cycles",
           "backward_weight_run_cycles", "backward_weight_desc_counts",
           "simulated_run_cycles", "step_schedule"]

# A stream player's first transfer comes two cycles after its ``start`` pulse cycle: busy rises
# at the edge ending the pulse, valid one cycle later (sim/harness/stream_player.py). Counted in the
# configuration figure as the one busy cycle without a write; in the run figure as the cycle
# between ``go`` and the player's first busy cycle.
PLAYER_START_CYCLES = 1
# A recorder counts a transfer at the edge ending it; ``done``'s condition sees it one cycle on.
RECORDER_COUNT_CYCLES = 1
# Cycles from the configuration player's last write to the ``go`` pulse's cycle, at least: the
# harness registers ``cfg_done`` (one cycle after the players finish), the bench pulses ``go``.
GO_CYCLES = 2


@dataclass(frozen=True)
class RtlHardware:
    """The RTL system: ``systems`` wafers of ``mesh_rows x mesh_cols`` PEs with ``lanes`` lanes
    and ``sram_banks`` SRAM banks (a power of two, ``Config.sram_banks`` as the PE core is built,
    default 8), routers of ``num_colors`` colors and ``vc_depth``-word channels, behind a SwarmX
    tree per mesh column whose adders have latency ``swarmx_adder_latency`` (``Config.fp_latency``,
    default 2); the PE cores' fp units have ``mul_stages`` / ``add_stages`` register stages
    (``Config.mul_stages`` / ``Config.add_stages``, 0..4, default 0)."""
    mesh_rows: int
    mesh_cols: int
    lanes: int
    systems: int
    swarmx_adder_latency: int = 2
    num_colors: int = 8
    vc_depth: int = 4
    sram_banks: int = 8
    mul_stages: int = 0
    add_stages: int = 0

    def __post_init__(self):
        for name in ("mesh_rows", "mesh_cols", "lanes", "systems", "swarmx_adder_latency",
                     "num_colors", "vc_depth", "sram_banks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"RtlHardware.{name} must be an int >= 1, got {v!r}")
        if self.sram_banks & (self.sram_banks - 1):
            raise ValueError(f"RtlHardware.sram_banks must be a power of two, got {self.sram_banks}")
        for name in ("mul_stages", "add_stages"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 4:
                raise ValueError(f"RtlHardware.{name} must be an int in 0..4, got {v!r}")

    @classmethod
    def from_config(cls, cfg):
        """The RTL system built from ``cfg`` (an ``hdl.config.Config``; ``System(cfg)`` as the
        system simulation builds it)."""
        return cls(mesh_rows=cfg.mesh_rows, mesh_cols=cfg.mesh_cols, lanes=cfg.lanes,
                   systems=cfg.swarmx_leaves, swarmx_adder_latency=cfg.fp_latency,
                   num_colors=cfg.num_colors, vc_depth=cfg.vc_depth, sram_banks=cfg.sram_banks,
                   mul_stages=cfg.mul_stages, add_stages=cfg.add_stages)

    @property
    def swarmx(self):
        return SwarmxTiming(self.systems, self.swarmx_adder_latency)


@dataclass(frozen=True)
class PhaseCycles:
    """One phase of a step with no stalls: ``config`` and ``run`` cycles (exact), and
    ``run_formula``, the closed formula without contention (a lower bound of ``run``)."""
    phase: str
    layer: int
    config: int
    run: int
    run_formula: int


def _split_sizes(n, parts):
    """Sizes of the contiguous split of ``n`` over ``parts`` (models.pe._split: earlier parts
    get the remainder)."""
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _check_layer(m, k, hw):
    if m < 1 or k < hw.mesh_cols:
        raise ValueError(f"layer {m}x{k}: needs M >= 1 and K >= mesh_cols={hw.mesh_cols}")


def config_cycles(writes):
    """Configuration cycles of a phase of ``writes`` configuration words per wafer (all wafers
    configure in parallel, one word per cycle)."""
    if writes < 0:
        raise ValueError(f"writes must be >= 0, got {writes}")
    return writes + PLAYER_START_CYCLES if writes else 0


def _stream_to_last_pe(hw, words):
    """Cycles from ``go`` until the last of a link's ``words`` weight words reaches the RAMP of
    the last mesh row (one word per cycle, broadcast, ``P - 1`` links down)."""
    return (PLAYER_START_CYCLES + words + hw.swarmx.broadcast_latency
            + zero_load_latency(hw.mesh_rows - 1))


def _vector_out(hw, edge_links):
    """Cycles from the wavelet that completes a unit to the recorder counting the last of the
    ``L`` words its waiting VEC sends over ``edge_links`` links to a host edge."""
    return (dep_to_tx_cycles(hw.mul_stages, hw.add_stages) + (hw.lanes - 1) + zero_load_latency(edge_links)
            + RECORDER_COUNT_CYCLES)


def forward_run_cycles(m, k, hw, *, last=False):
    """Lower bound of the forward run cycles of an ``m x k`` layer (``last``: the logits layer,
    out of the east edge of column ``Q - 1``; otherwise out of the west edge, ``Q - 1`` links):
    the last weight of column ``Q - 1``'s link completes the row chain at the east PE."""
    _check_layer(m, k, hw)
    Q = hw.mesh_cols
    links = 0 if (last or Q == 1) else Q - 1
    return _stream_to_last_pe(hw, m * _split_sizes(k, Q)[-1]) + _vector_out(hw, links)


def backward_data_run_cycles(m, k, hw):
    """Lower bound of the backward-data run cycles of an ``m x k`` layer (``W^T`` streamed, row
    ``k`` on the link of the column owning it; ``dZ_prev`` of column ``q`` out of the west edge,
    ``q`` links, or for ``q >= h`` (``models.pipeline.mapping.dx_west_columns``) the east edge,
    ``Q - 1 - q`` links): the slowest column's last row, its MASK and its links to the edge."""
    _check_layer(m, k, hw)
    Q = hw.mesh_cols
    h = dx_west_columns(Q)
    return max(_stream_to_last_pe(hw, m * kq) + _vector_out(hw, q if q < h else Q - 1 - q)
               for q, kq in enumerate(_split_sizes(k, Q)))


def backward_weight_desc_counts(hw):
    """Descriptors committed per PE in backward-weight: the south row 1 (DOT, sends north), the
    others 3 (DOT + STORE of the incoming sums + chain ADD)."""
    P = hw.mesh_rows
    return {(p, q): 1 if p == P - 1 else 3 for p in range(P) for q in range(hw.mesh_cols)}


def backward_weight_run_cycles(m, k, hw, *, lanes=False):
    """Lower bound of the backward-weight run cycles of an ``m x k`` layer: the vector work of one
    PE that remains after ``go`` plus the path of its last word to the root recorder.

    ``lanes=False`` (VEC DOT, ``compiler.wafer.dw_on_lanes`` false): the north PE of column ``q``
    commits its DOT; after it come at most the descriptors of the tiles after it in raster order
    (the compiler commits the DOTs last, slot by slot, tile by tile) and ``Q`` adapter words
    (``G_COUNT``), then :data:`GO_CYCLES` until ``go``;
    it makes ``M |K_q|`` DOT words (``models.pe.dot_word_cycles`` each, ``L + 3`` unpipelined; the
    last one's element pipeline after them) and, with ``P > 1``, ``M |K_q| / L`` chain ADDs (at
    least ``L`` each, fetches overlapped).
    ``lanes=True`` (partials on the lanes): the host's dZ stream starts at the west edge
    :data:`PLAYER_START_CYCLES` ``+ 1`` cycles after ``go``; a north PE then takes ``M |K_q|`` dZ
    wavelets through its RAMP port (one per cycle; the incoming partial sums arrive on the RAMP's
    second channel), and the last FMAC row waits for the last one (stage 1, then the vector that
    waited on it: ``unit_cycles(L, ...)``); its vector unit makes ``M C`` chain vectors (``C =
    |K_q| / L``; ADD, or PASS on one row), back to back at best (one fetch, then ``max(L, 3)``
    each, then the last one's element pipeline, ``models.pe.vec_out_cycles``).
    The larger of the two; then the last word crosses to the north edge (``zero_load_latency(0)``),
    the reduce tree and the recorder count. Without lanes the last vector's last word leaves
    likewise after the DOT and ADD work."""
    _check_layer(m, k, hw)
    P, Q, L = hw.mesh_rows, hw.mesh_cols, hw.lanes
    ms, ads = hw.mul_stages, hw.add_stages
    adapters = Q
    tail = zero_load_latency(0) + hw.swarmx.reduce_latency + RECORDER_COUNT_CYCLES
    if lanes:
        kq = max(_split_sizes(k, Q))
        fmac = m * kq + 1 + unit_cycles(L, ms, ads)
        vectors = VEC_FETCH_CYCLES + m * kq // L * max(L, VEC_FETCH_CYCLES) + vec_out_cycles(ms, ads)
        return PLAYER_START_CYCLES + 1 + max(fmac, vectors) + tail
    counts = backward_weight_desc_counts(hw)
    tiles = sorted(counts)
    best = 0
    for q, kq in enumerate(_split_sizes(k, Q)):
        words = m * kq
        work = (words * dot_word_cycles(L, ms, ads) + vec_out_cycles(ms, ads, dot=True)
                + (words // L * L if P > 1 else 0))
        after = sum(DESC_WORDS * counts[t] for t in tiles[tiles.index((0, q)) + 1:]) + adapters
        best = max(best, work - after - GO_CYCLES + tail)
    return max(best, 1)


def simulated_run_cycles(kind, plan, m, k, hw, *, writes=0, go_after=None, last=False):
    """Exact run cycles (no stalls) of a phase of ``kind`` (``"forward"``, ``"backward-data"``,
    ``"backward-weight"``) of an ``m x k`` layer from the compiler's ``plan``, by the closed-loop
    cycle simulation. ``writes``: the phase's configuration words, the first ``go_after`` of them
    (default all) before ``go``, the others written while it runs
    (``compiler.wafer.WaferPhase.late``). Where it matters (backward-weight, which starts during
    its configuration; a forward or backward-data phase with a VEC that waits on nothing,
    :func:`_starts_at_commit`, or with writes after ``go``) each descriptor acts from its commit,
    write ``plan["commits"][(p, q)][t]``, and the run ends no earlier than the last write.
    ``last``: the logits layer (results out of the east edge)."""
    _check_layer(m, k, hw)
    P, Q, L = hw.mesh_rows, hw.mesh_cols, hw.lanes
    go_after = writes if go_after is None else go_after
    if not 0 <= go_after <= writes:
        raise ValueError(f"{kind}: go_after={go_after} must be in 0..writes={writes}")
    per_link = {q: m * kq for q, kq in enumerate(_split_sizes(k, Q))}
    common = dict(rows=P, cols=Q, lanes=L, sram_banks=hw.sram_banks, num_colors=hw.num_colors,
                  vc_depth=hw.vc_depth, mul_stages=hw.mul_stages, add_stages=hw.add_stages)
    # Cycles count so that write ``i`` transfers in cycle ``i - 1`` (what it commits acts from
    # cycle ``i``); ``go`` comes GO_CYCLES after write ``go_after - 1`` (cycle ``go_after - 2``),
    # and the players' ``busy`` falls in the cycle after the last write (``writes - 1``).
    go = go_after - 2 + GO_CYCLES
    if kind == "backward-weight":
        done = simulate_phase(plan, grads=per_link, commits=plan["commits"],
                              west_in=plan.get("west_in"),
                              west_first=go + PLAYER_START_CYCLES + 1, **common)
        # ``done`` needs ``go`` low: at least one run cycle even if the words were all in before.
        return max(done + hw.swarmx.reduce_latency + RECORDER_COUNT_CYCLES, writes - 1, go + 1) - go
    if kind == "forward":
        edge = (Q - 1, "E") if (last or Q == 1) else (0, "W")
        sinks = {(p, *edge): m * L for p in range(P)}
    elif kind == "backward-data":
        h, sizes = dx_west_columns(Q), _split_sizes(k, Q)
        sinks = {(p, 0, "W"): sum(sizes[:h]) * L for p in range(P)}
        sinks.update({(p, Q - 1, "E"): sum(sizes[h:]) * L for p in range(P) if h < Q})
    else:
        raise ValueError(f"unknown phase kind {kind!r}")
    # Without a VEC that starts at its commit or a write after ``go`` nothing happens before
    # ``go``: cycle 0 is ``go``.
    commits = None
    if _starts_at_commit(plan) or go_after < writes:
        if writes < 1:
            raise ValueError(f"{kind}: a VEC starts at its commit, so the run depends on when: "
                             f"give the phase's configuration words (writes)")
        commits = plan["commits"]
    else:
        go = 0
    done = simulate_phase(plan, streams=per_link, weight_color=_COLOR_W,
                          first=go + PLAYER_START_CYCLES + 1 + hw.swarmx.broadcast_latency,
                          sinks=sinks, commits=commits,
                          west_in=plan.get("west_in"), west_first=go + PLAYER_START_CYCLES + 1,
                          **common)
    return max(done + RECORDER_COUNT_CYCLES, writes - 1 if commits else 0) - go


def _starts_at_commit(plan):
    """Whether some PE of ``plan`` has an enabled VEC that waits on no dependency (forward's
    ``X^T`` PASS, ``models.pe.forward_kernel``): it starts at its commit."""
    return any(d.get("op") == Op.VEC and d.get("enable") and not (d.get("dep_a_en") or d.get("dep_b_en"))
               for info in plan["pes"].values() for d in info["descs"].values())


def step_schedule(dims, hw, phases):
    """Every phase of one step in the bench's order (forward by layer, then from the last layer:
    backward-data (layers > 0), backward-weight) as :class:`PhaseCycles`. ``phases`` maps
    ``(phase, layer)`` to ``(writes, go_after, plan)``: the compiler's configuration words per
    wafer, how many of them come before ``go``, and its plan (descriptors and routes) for that
    phase."""
    dims = [int(d) for d in dims]
    if len(dims) < 2 or min(dims) < 1:
        raise ValueError(f"dims must list >= 2 positive layer sizes, got {dims}")
    n = len(dims) - 1
    out = []

    def add(phase, layer, formula):
        key = (phase, layer)
        if key not in phases:
            raise ValueError(f"phases has no entry for {key}")
        writes, go_after, plan = phases[key]
        m, k = dims[layer + 1], dims[layer]
        run = simulated_run_cycles(phase, plan, m, k, hw, writes=writes, go_after=go_after,
                                   last=layer == n - 1)
        out.append(PhaseCycles(phase, layer, config_cycles(go_after), run, formula))

    for l in range(n):
        add("forward", l, forward_run_cycles(dims[l + 1], dims[l], hw, last=l == n - 1))
    for l in range(n - 1, -1, -1):
        if l > 0:
            add("backward-data", l, backward_data_run_cycles(dims[l + 1], dims[l], hw))
        lanes = phases.get(("backward-weight", l), (0, 0, {}))[2].get("dw") == "lanes"
        add("backward-weight", l, backward_weight_run_cycles(dims[l + 1], dims[l], hw, lanes=lanes))
    return out
