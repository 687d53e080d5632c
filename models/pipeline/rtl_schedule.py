"""Timing model of the RTL system schedule (``make sim``, ``sim/bench_system_rtl.py``): the
configuration and run cycles of every phase of a training step on N RTL wafers of P x Q PE tiles
behind the SwarmX tree, with no stalls.

Unlike :mod:`models.pipeline.timing` (the architecture's pipelined step: backward-data and
backward-weight in one pass, a DRAM fill, no RAMP-port contention), this follows what the layer
compiler (``sim/wafer_compiler.py``) and the bench actually run, phase by phase:

* **configuration** (every phase): the configuration player writes one word per cycle after one
  idle cycle following ``start`` (:data:`PLAYER_START_CYCLES`): ``writes + 1`` cycles. Exact.
* **forward** (per layer): the weight player starts one cycle after ``go``, streams ``M*K`` words
  at one per cycle into the SwarmX tree (broadcast latency ``depth``), the weight demux puts the
  last one (row ``M-1``, column ``Q-1``) into the north router of column ``Q-1``; it reaches the
  RAMP of row ``P-1`` after ``(P-1) + 2`` cycles (``models.fabric.zero_load_latency``), completes
  the FMAC row, and the ADD (PASS for one column) that waited on it sends its first word
  ``DEP_TO_TX_CYCLES`` later and its last ``L-1`` after that; the results cross ``Q-1`` links west
  (hidden layer) or none (last layer: east edge of column ``Q-1``) to the edge (``+2``), and the
  recorder's count shows the word one cycle later. This is a **lower bound**: a PE's RAMP port
  delivers one wavelet per cycle, and the ``L`` psum words (east columns) and ``L`` result words
  (west columns) of an output row arrive while that column's weights of a later row stream, so
  the demux waits (README "The system simulation" gives the measured difference).
* **backward-data** (per layer > 0): the same path with the transposed stream (row ``k`` of
  ``W^T`` to the column owning ``k``, multicast down it), a VEC MASK after the FMAC row, results
  west over ``Q-1`` links. No other traffic shares these ports, so it is **exact** when the
  vector unit keeps up with the stream (``M >= unit_cycles(L)``: one VEC per ``M`` weight words),
  a lower bound otherwise.
* **backward-weight** (per layer): no stream; every PE's DOT descriptor starts when it commits
  during configuration (it is committed last in its tile, tiles north-west first, then the
  adapter registers). The north PE of column ``q`` runs ``M*|K_q|`` DOT words and then (for
  ``P > 1``) ``M*|K_q|/L`` chain ADDs, ``unit_cycles(L)`` each; the last word leaves the north
  edge through the gradient mux into the SwarmX reduce. The part of that work after ``go`` plus
  the path to the root recorder is a **lower bound**: the gradient mux takes row ``m`` of dW
  column by column, so a column's chain ADDs wait while the other columns' words of the same row
  are taken (back-pressure into the vector unit).

All figures count cycles as the harness does (``sim/system_rtl_harness.py``): configuration from
``start`` while a configuration player is busy; run from ``go`` until every recorder holds its
words. Plain Python: no amaranth/cocotb.
"""

from dataclasses import dataclass

from models.fabric import zero_load_latency
from models.pe import DEP_TO_TX_CYCLES, DESC_WORDS, unit_cycles
from models.swarmx import SwarmxTiming

__all__ = ["RtlHardware", "PhaseCycles", "PLAYER_START_CYCLES", "RECORDER_COUNT_CYCLES",
           "GO_CYCLES", "config_cycles", "forward_run_cycles", "backward_data_run_cycles",
           "backward_weight_run_cycles", "backward_weight_desc_counts", "step_schedule"]

# A stream player's first transfer comes two cycles after its ``start`` pulse cycle: busy rises
# at the edge ending the pulse, valid one cycle later (sim/stream_player.py). Counted in the
# configuration figure as the one busy cycle without a write; in the run figure as the cycle
# between ``go`` and the player's first busy cycle.
PLAYER_START_CYCLES = 1
# A recorder counts a transfer at the edge ending it; ``done``'s condition sees it one cycle on.
RECORDER_COUNT_CYCLES = 1
# Cycles from the configuration player's last write to the ``go`` pulse's cycle, at least: the
# harness registers ``cfg_done`` (one cycle after the players finish), the bench pulses ``go``.
GO_CYCLES = 2
# Adapter words a backward-weight phase writes besides one ``G_BOUND`` per column
# (``G_ROW_LEN``, ``G_COUNT``).
BW_ADAPTER_WORDS = 2


@dataclass(frozen=True)
class RtlHardware:
    """The RTL system: ``systems`` wafers of ``mesh_rows x mesh_cols`` PEs with ``lanes`` lanes
    behind a SwarmX tree whose adders have latency ``swarmx_adder_latency`` (``hdl.fp32_add``:
    2)."""
    mesh_rows: int
    mesh_cols: int
    lanes: int
    systems: int
    swarmx_adder_latency: int = 2

    def __post_init__(self):
        for name in ("mesh_rows", "mesh_cols", "lanes", "systems", "swarmx_adder_latency"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"RtlHardware.{name} must be an int >= 1, got {v!r}")

    @property
    def swarmx(self):
        return SwarmxTiming(self.systems, self.swarmx_adder_latency)


@dataclass(frozen=True)
class PhaseCycles:
    """One phase of a step: ``config`` (exact) and ``run`` cycles predicted with no stalls;
    ``run_exact`` says whether ``run`` is the exact figure or a lower bound."""
    phase: str
    layer: int
    config: int
    run: int
    run_exact: bool


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
    """Cycles from ``go`` until the last of ``words`` weight words reaches the RAMP of the last
    mesh row (stream at one word per cycle, broadcast, demux, ``P - 1`` links down)."""
    return (PLAYER_START_CYCLES + words + hw.swarmx.broadcast_latency
            + zero_load_latency(hw.mesh_rows - 1))


def _vector_out(hw, edge_links):
    """Cycles from the wavelet that completes a unit to the recorder counting the last of the
    ``L`` words its waiting VEC sends over ``edge_links`` links to a host edge."""
    return DEP_TO_TX_CYCLES + (hw.lanes - 1) + zero_load_latency(edge_links) + RECORDER_COUNT_CYCLES


def forward_run_cycles(m, k, hw, *, last=False):
    """Lower bound of the forward run cycles of an ``m x k`` layer (``last``: the logits layer,
    out of the east edge of column ``Q - 1``; otherwise out of the west edge, ``Q - 1`` links)."""
    _check_layer(m, k, hw)
    Q = hw.mesh_cols
    links = 0 if (last or Q == 1) else Q - 1
    return _stream_to_last_pe(hw, m * k) + _vector_out(hw, links)


def backward_data_run_cycles(m, k, hw):
    """``(cycles, exact)``: backward-data run cycles of an ``m x k`` layer (``W^T`` streamed,
    ``dZ_prev`` out of the west edge); exact when ``m >= unit_cycles(lanes)``."""
    _check_layer(m, k, hw)
    cycles = _stream_to_last_pe(hw, m * k) + _vector_out(hw, hw.mesh_cols - 1)
    return cycles, m >= unit_cycles(hw.lanes)


def backward_weight_desc_counts(hw):
    """Descriptors committed per PE in backward-weight: the south row 1 (DOT, sends north), the
    others 3 (DOT + STORE of the incoming sums + chain ADD)."""
    P = hw.mesh_rows
    return {(p, q): 1 if p == P - 1 else 3 for p in range(P) for q in range(hw.mesh_cols)}


def backward_weight_run_cycles(m, k, hw):
    """Lower bound of the backward-weight run cycles of an ``m x k`` layer: the north PE's
    vector work that remains after ``go`` plus the path of its last word to the root recorder.

    The north PE of column ``q`` commits its DOT as the last write of its tile's descriptors;
    after it come the other tiles' descriptors (raster order) and ``2 + Q`` adapter words, then
    :data:`GO_CYCLES` until ``go``. Its last ADD's last word leaves one firing after the firing
    starts, crosses to the north edge (``zero_load_latency(0)``), the reduce tree and the
    recorder count."""
    _check_layer(m, k, hw)
    P, Q, L = hw.mesh_rows, hw.mesh_cols, hw.lanes
    counts = backward_weight_desc_counts(hw)
    tiles = sorted(counts)
    adapters = BW_ADAPTER_WORDS + Q
    tail = zero_load_latency(0) + hw.swarmx.reduce_latency + RECORDER_COUNT_CYCLES
    best = 0
    for q, kq in enumerate(_split_sizes(k, Q)):
        words = m * kq
        work = words * unit_cycles(L) + (words // L * unit_cycles(L) if P > 1 else 0)
        after = sum(DESC_WORDS * counts[t] for t in tiles[tiles.index((0, q)) + 1:]) + adapters
        best = max(best, work - after - GO_CYCLES + tail)
    return max(best, 1)


def step_schedule(dims, hw, config_writes):
    """Every phase of one step in the bench's order (forward by layer, then from the last layer:
    backward-data (layers > 0), backward-weight) as :class:`PhaseCycles`. ``config_writes``
    maps ``(phase, layer)`` to the compiler's configuration words per wafer for that phase."""
    dims = [int(d) for d in dims]
    if len(dims) < 2 or min(dims) < 1:
        raise ValueError(f"dims must list >= 2 positive layer sizes, got {dims}")
    n = len(dims) - 1
    out = []

    def add(phase, layer, run, exact):
        key = (phase, layer)
        if key not in config_writes:
            raise ValueError(f"config_writes has no entry for {key}")
        out.append(PhaseCycles(phase, layer, config_cycles(config_writes[key]), run, exact))

    for l in range(n):
        add("forward", l, forward_run_cycles(dims[l + 1], dims[l], hw, last=l == n - 1), False)
    for l in range(n - 1, -1, -1):
        if l > 0:
            add("backward-data", l, *backward_data_run_cycles(dims[l + 1], dims[l], hw))
        add("backward-weight", l, backward_weight_run_cycles(dims[l + 1], dims[l], hw), False)
    return out
