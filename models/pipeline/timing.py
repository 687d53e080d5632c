"""Cycle-level timing model of weight streaming (docs/pipeline.md): every phase of a training step of
a dense network on N data-parallel wafers of ``P x Q`` PEs, fed by MemoryX through SwarmX.

All parameters live in one validated dataclass, :class:`TimingParams`; their defaults are the
documented cycle counts of this project's RTL where it exists (router, fp32 adder, SwarmX) and
stated assumptions elsewhere (MemoryX, host, link latencies).

Per layer ``l`` (``W: M x K``), per-system batch ``B``, ``Kq = ceil(K/Q)``, ``Bp = ceil(B/P)``,
``L`` FMAC lanes, ``e`` words per cycle of one fabric link, ``pk`` bf16 values per wavelet:

Weight stream-in (every pass)
    Row m of W (K bf16 words) enters at the north edge, column q takes its ``Kq`` words over one
    link: ``t_w = max(K / weight_words_per_cycle, Kq / e)`` cycles per row. The first word of a
    layer reaches the south PE of its column ``fill = memoryx_stream_latency + link_latency +
    depth * swarmx_bcast_latency + router_io_latency + (P - 1) * hop_latency`` cycles after the
    request: the *weight-load latency*.
PE engines (``hdl/pe/core.py``)
    The *wavelet engine* takes one wavelet per cycle: a weight wavelet is one FMAC broadcast over
    the PE's Bp activations (``ceil(Bp / L)`` cycles on L lanes), a dZ wavelet one cycle. The
    *store engine* takes the partial sums and results, one per cycle, on the RAMP's second
    channel. The *vector unit* runs in parallel and fetches a vector while the previous one runs:
    ``V = max(L, vector_overhead_cycles)`` cycles per vector of L words back to back (chain
    add-and-forward, ReLU/round/send, mask), ``(L - 1) * (add_stages + 1) + 1 +
    vector_overhead_cycles`` per word of a dot product (``L + vector_overhead_cycles`` with
    combinational fp units: with ``add_stages`` each product waits for the previous sum).
Forward, per row (the row pipeline runs at the slowest of)
    wavelet engine ``Kq * ceil(Bp / L)`` FMAC; store engine ``Bp`` incoming partials (Q > 1) +
    ``ceil(Bp / pk)`` incoming results (hidden layers); vector unit ``ceil(Bp / L) * V`` (the
    chain add, fused with ReLU/round/send at the east PE); reduction chain link ``Bp / e``; result
    broadcast link ``ceil(Bp / pk) / e``; weights ``t_w``.
    Drain after the last row: chain ``(Q - 1) * (hop_latency + chain_add_latency) + Bp / e``, then
    the result broadcast ``router_io_latency + (Q - 1) * hop_latency + ceil(Bp / pk) / e`` (hidden
    layers) or one hop to the host at the east edge (last layer).
Host
    ``host_loss_cycles``: softmax cross-entropy and dZ back in at the east edge (Python host).
Backward, per row
    wavelet engine ``Kq * ceil(Bp / L)`` FMAC for dX (not for the first layer) + ``ceil(Bp / pk)``
    dZ wavelets; store engine ``Kq`` incoming column partials (P > 1); the dW partials either as
    dot products on the vector unit (``dw_dot_product``, the PE RTL's fallback DOT: ``Kq *
    ceil(Bp / L)`` dot-product words) or
    as FMAC broadcasts of each dZ[m, b] over the PE's Kq inputs on the lanes (the PE RTL's kernel
    where ``Kq`` is a multiple of L; ``Bp * ceil(Kq / L)`` more wavelet-engine cycles); vector unit
    also ``ceil(Kq / L) * V`` for the column add-and-forward;
    links: dZ multicast ``ceil(Bp / pk) / e``, dW column chain ``Kq / e``, gradient stream-out
    ``K / grad_words_per_cycle``; weights ``t_w``. Drain of a layer with dX: the mask and bf16
    rounding of the PE's dX tile, ``Kq * ceil(Bp / L) * V``. The gradient of a row reaches MemoryX
    ``grad_path = (P - 1) * (hop_latency + chain_add_latency) + router_io_latency +
    depth * swarmx_reduce_latency + link_latency`` cycles after its row finishes on the wafer.
Exposed weight-load latency
    The forward pass of layer 0 waits for the whole ``fill`` (its weights are the last to be
    updated). With ``prefetch_weights`` every other layer's weights are requested early and queue
    behind the previous layer's stream, so its fill is hidden (the backward pass still waits
    ``router_io_latency + (Q - 1) * hop_latency`` for the first dZ to cross its row, and the last
    layer's backward fill is hidden behind the forward drain and the host when they are long
    enough); without it, every phase waits ``fill``.
MemoryX update (the seed's overlap; same rule as :mod:`models.memoryx.timing`)
    One update engine moving ``update_bytes_per_parameter(optimizer)`` bytes per parameter at
    ``memoryx_update_bytes_per_cycle``, layers in arrival order (last layer first). With
    ``memoryx_update_overlap`` layer l is updated as soon as its whole gradient is in (while the
    wafer runs the backward pass of the layers below); without it, updates start after the whole
    backward pass. The next step starts when layer 0 (the last gradient) is updated, plus
    ``memoryx_update_latency``; the wait after the backward pass is the *exposed MemoryX time*.
Input
    The next batch (``K_0`` x ``Bp`` bf16 per mesh row, entering at the west edge) loads during the
    step when ``input_double_buffered``; only what does not fit under the backward pass is exposed.

Step time = forward phases + host + backward phases + exposed MemoryX + exposed input load; the
N systems run in lockstep (same weights, same schedule); SwarmX runs at line rate, so N changes
only its depth ``ceil(log4 N)`` (1 for N = 1) and thus latencies. Utilization = useful FMAC
lane-cycles / (P * Q * L * cycles), useful = M*K*B per pass (2 M*K*B backward, M*K*B for layer 0).
"""

import dataclasses
import math
from dataclasses import dataclass

from models.memoryx.accounting import update_bytes_per_parameter
from models.memoryx.optimizers import optimizer_from_config
from models.pe import vec_out_cycles, vec_pick_delay
from models.swarmx import node_reduce_latency, tree_depth

__all__ = ["TimingError", "TimingParams", "PhaseTiming", "StepTiming", "step_timing", "swarmx_depth",
           "scaling"]


class TimingError(ValueError):
    """A timing parameter or scenario is invalid (the message names it)."""


_INTS_GE1 = ("mesh_rows", "mesh_cols", "lanes", "bf16_per_wavelet", "fp_add_latency")
_INTS_GE0 = ("hop_latency", "router_io_latency", "chain_add_latency", "vector_overhead_cycles",
             "mul_stages", "add_stages", "swarmx_bcast_latency",
             "swarmx_reduce_latency", "link_latency", "memoryx_stream_latency", "memoryx_update_latency",
             "host_loss_cycles")
_RATES = ("weight_words_per_cycle", "grad_words_per_cycle", "link_words_per_cycle",
          "memoryx_update_bytes_per_cycle")
_BOOLS = ("dw_dot_product", "prefetch_weights", "memoryx_update_overlap", "input_double_buffered")


@dataclass(frozen=True, kw_only=True)
class TimingParams:
    """Parameters of the timing model (cycles of the wafer clock; rates in words per cycle).

    Attributes
    ----------
    mesh_rows, mesh_cols : int
        Wafer size P x Q in PEs (``Config.mesh_rows/mesh_cols``).
    lanes : int
        FMAC lanes per PE (``Config.lanes``), 1..16.
    weight_words_per_cycle : float
        bf16 weights per cycle that MemoryX -> SwarmX -> one wafer delivers (every tree link carries
        the whole stream, SwarmX broadcasts at line rate). Default 64: one word per cycle into each
        of 64 north-edge columns.
    grad_words_per_cycle : float
        fp32 gradient words per cycle from one wafer through SwarmX to MemoryX (the same link
        width as the weights: 32 fp32 = 64 bf16 per cycle).
    link_words_per_cycle : float
        Words per cycle on one fabric link (router: one wavelet per output per cycle).
    bf16_per_wavelet : int
        bf16 activations / dZ values packed per wavelet on the fabric (1, or 2 halves).
    hop_latency : int
        Router cycles per link crossed at zero load (``hdl/router.py``: 1).
    router_io_latency : int
        Extra cycles to enter and leave the fabric at boundary ports (``hdl/router.py``: a word in
        at ``t`` through ``h`` links is offered at ``t + h + 2``: 2).
    vector_overhead_cycles : int
        The PE vector unit's fetch (``hdl/pe/vector_unit.py``: 3, ``models.pe.VEC_FETCH_CYCLES``):
        with combinational fp units an isolated vector and every dot-product word cost ``lanes +
        vector_overhead_cycles`` (``models.pe.unit_cycles``), vectors back to back ``max(lanes,
        vector_overhead_cycles)`` (the fetch overlaps the previous vector) at every depth.
    mul_stages, add_stages : int
        Register stages of the PE core's bf16 multipliers and fp32 adders (``Config.mul_stages``,
        ``Config.add_stages``, 0..4; default 0): with any, the vector unit's element pipeline
        delays every word by ``models.pe.vec_out_cycles`` (``add_stages + 2``; an isolated
        vector costs that much more, a chain hop one more: the pick sees the counters a cycle
        late, ``models.pe.vec_pick_delay``) and a dot-product word's elements come
        ``add_stages + 1`` cycles apart.
    chain_add_latency : int
        Cycles a PE adds to an add-and-forward chain hop (one vector-unit ADD; ``None`` derives
        ``lanes + vector_overhead_cycles + vec_pick_delay + vec_out_cycles``, ``models.pe``).
    dw_dot_product : bool
        Weight-gradient partials as dot products on the vector unit (True: the PE RTL's fallback,
        VEC DOT) or as FMAC broadcasts on the lanes (False: the RTL's kernel where every column's
        ``Kq`` is a multiple of ``lanes``, ``compiler.wafer.dw_on_lanes``).
    fp_add_latency : int
        Latency of the SwarmX adders: ``Config.fp_latency`` (``hdl/fp/fp32_add.py``; default 2).
    swarmx_bcast_latency, swarmx_reduce_latency : int
        Cycles per SwarmX tree level (``hdl/swarmx.py``: broadcast 1, reduce ``2 L + 3`` = 7 with
        ``L = fp_add_latency``; ``None`` derives it from ``fp_add_latency``).
    link_latency : int
        MemoryX <-> SwarmX root link, each way (assumption: 64).
    memoryx_stream_latency : int
        MemoryX request to the first bf16 word on its port (assumption: 256).
    memoryx_update_bytes_per_cycle : float
        Memory bandwidth of the near-memory optimizer (assumption: 2048 bytes/cycle).
    memoryx_optimizer : str
        Optimizer kind (``sgd``, ``momentum``, ``adam``, ``adamw``): bytes moved per parameter per
        update come from :func:`models.memoryx.accounting.update_bytes_per_parameter`.
    memoryx_update_latency : int
        Last gradient word in -> its updated weights streamable (assumption: 64).
    memoryx_update_overlap : bool
        Update layer l while the wafer computes the backward pass of the layers below (the seed).
    host_loss_cycles : int
        Host turnaround for the loss and dZ (assumption: 2000; the host is the Python testbench).
    prefetch_weights : bool
        Request the next layer's weights while the current one still streams.
    input_double_buffered : bool
        Load the next batch during the step.
    """

    mesh_rows: int = 64
    mesh_cols: int = 64
    lanes: int = 4
    weight_words_per_cycle: float = 64.0
    grad_words_per_cycle: float = 32.0
    link_words_per_cycle: float = 1.0
    bf16_per_wavelet: int = 1
    hop_latency: int = 1
    router_io_latency: int = 2
    vector_overhead_cycles: int = 3
    mul_stages: int = 0
    add_stages: int = 0
    chain_add_latency: int = None
    dw_dot_product: bool = False
    fp_add_latency: int = 2
    swarmx_bcast_latency: int = 1
    swarmx_reduce_latency: int = None
    link_latency: int = 64
    memoryx_stream_latency: int = 256
    memoryx_update_bytes_per_cycle: float = 2048.0
    memoryx_optimizer: str = "adamw"
    memoryx_update_latency: int = 64
    memoryx_update_overlap: bool = True
    host_loss_cycles: int = 2000
    prefetch_weights: bool = True
    input_double_buffered: bool = True

    def __post_init__(self):
        if self.swarmx_reduce_latency is None:
            if isinstance(self.fp_add_latency, int) and self.fp_add_latency >= 1:
                object.__setattr__(self, "swarmx_reduce_latency", node_reduce_latency(self.fp_add_latency))
        if self.chain_add_latency is None:
            if all(isinstance(getattr(self, n), int)
                   for n in ("lanes", "vector_overhead_cycles", "mul_stages", "add_stages")):
                object.__setattr__(self, "chain_add_latency", self.lanes + self.vector_overhead_cycles
                                   + vec_pick_delay(self.mul_stages, self.add_stages)
                                   + vec_out_cycles(self.mul_stages, self.add_stages))
        for name in _INTS_GE1 + _INTS_GE0:
            v = getattr(self, name)
            low = 1 if name in _INTS_GE1 else 0
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise TimingError(f"TimingParams.{name} must be an int >= {low}, got {v!r}")
        for name in _RATES:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
                raise TimingError(f"TimingParams.{name} must be a finite number > 0, got {v!r}")
        for name in _BOOLS:
            if not isinstance(getattr(self, name), bool):
                raise TimingError(f"TimingParams.{name} must be a bool, got {getattr(self, name)!r}")
        if not 1 <= self.lanes <= 16:
            raise TimingError(f"TimingParams.lanes must be in 1..16, got {self.lanes}")
        for name in ("mul_stages", "add_stages"):
            if getattr(self, name) > 4:
                raise TimingError(f"TimingParams.{name} must be in 0..4, got {getattr(self, name)}")
        if self.bf16_per_wavelet not in (1, 2):
            raise TimingError(f"TimingParams.bf16_per_wavelet must be 1 or 2, got {self.bf16_per_wavelet}")
        if self.link_words_per_cycle > 1:
            raise TimingError("TimingParams.link_words_per_cycle must be <= 1 (one wavelet per link "
                              f"per cycle), got {self.link_words_per_cycle}")
        try:
            opt = optimizer_from_config({"kind": self.memoryx_optimizer})
        except (ValueError, TypeError) as e:
            raise TimingError(f"TimingParams.memoryx_optimizer: {e}") from None
        object.__setattr__(self, "_update_bytes", update_bytes_per_parameter(opt)["total"])

    @property
    def update_bytes_per_parameter(self):
        return self._update_bytes

    def replace(self, **changes):
        """A validated copy with ``changes``; unknown names raise :class:`TimingError`."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TimingError(f"unknown timing parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        if "fp_add_latency" in changes and "swarmx_reduce_latency" not in changes:
            changes["swarmx_reduce_latency"] = None
        if ({"lanes", "vector_overhead_cycles", "mul_stages", "add_stages"} & set(changes)
                and "chain_add_latency" not in changes):
            changes["chain_add_latency"] = None
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_config(cls, cfg, **changes):
        """Parameters for an ``hdl.config.Config`` (mesh size, lanes and the PE's fp stages taken
        from it)."""
        changes = {"mul_stages": cfg.mul_stages, "add_stages": cfg.add_stages, **changes}
        return cls(mesh_rows=cfg.mesh_rows, mesh_cols=cfg.mesh_cols, lanes=cfg.lanes, **changes)

    def as_dict(self):
        return dataclasses.asdict(self)


def swarmx_depth(systems):
    """Levels of the SwarmX tree serving ``systems`` wafers (``models.swarmx.tree_depth``)."""
    if isinstance(systems, bool) or not isinstance(systems, int) or not 1 <= systems <= 192:
        raise TimingError(f"systems must be an int in 1..192, got {systems!r}")
    return tree_depth(systems)


@dataclass(frozen=True)
class PhaseTiming:
    """One pass over one layer on one wafer (cycles)."""

    layer: int
    phase: str               # "forward" or "backward"
    m: int
    k: int
    row_cycles: float        # steady-state cycles per streamed row of W
    bound: str               # what sets row_cycles: weights, fmac (wavelet engine), vector (unit),
    #                          chain, broadcast, dz, column, gradient
    fill_cycles: int         # weight-load latency of this layer
    exposed_fill_cycles: int  # the part of it the wafer waits for
    stream_cycles: int       # M * row_cycles
    drain_cycles: int        # after the last row, until the results are where the next phase needs them
    cycles: int              # exposed_fill + stream + drain
    useful_fmacs: int
    utilization: float


@dataclass(frozen=True)
class StepTiming:
    """One training step (cycles); the N systems run in lockstep."""

    dims: tuple
    batch: int               # per system
    systems: int
    swarmx_depth: int
    forward: tuple           # PhaseTiming per layer, layer 0 first
    backward: tuple          # PhaseTiming per layer, last layer first (execution order)
    host_cycles: int
    memoryx_update_cycles: int   # total update work of the step
    memoryx_exposed_cycles: int  # wait for MemoryX after the backward pass
    input_load_cycles: int
    input_exposed_cycles: int
    cycles: int
    useful_fmacs: int        # per system
    utilization: float
    exposed_weight_load_cycles: int  # sum of the phases' exposed fills

    @property
    def samples_per_cycle(self):
        return self.systems * self.batch / self.cycles

    @property
    def wafer_cycles(self):
        return sum(p.cycles for p in self.forward + self.backward)

    def summary(self):
        """Step cycles, wafer cycles, utilization and per-phase cycles as plain JSON values."""
        return {"cycles": self.cycles, "wafer_cycles": self.wafer_cycles, "utilization": self.utilization,
                "phases": [{"layer": p.layer, "phase": p.phase, "cycles": p.cycles, "utilization": p.utilization}
                           for p in self.forward + self.backward]}


def _bound(parts):
    name = max(parts, key=lambda k: parts[k])
    return parts[name], name


def _check_dims(dims, batch):
    dims = tuple(dims)
    if len(dims) < 2 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        raise TimingError(f"dims must be >= 2 positive ints (inputs, ..., outputs), got {dims!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise TimingError(f"batch (per system) must be an int >= 1, got {batch!r}")
    return dims


def step_timing(dims, batch, systems=1, params=None):
    """Cycle timing of one training step of the network ``dims`` (layer l: ``dims[l+1] x dims[l]``)
    with ``batch`` samples per system on ``systems`` wafers."""
    tp = params if params is not None else TimingParams()
    if not isinstance(tp, TimingParams):
        raise TimingError(f"params must be a TimingParams, got {type(tp).__name__}")
    dims = _check_dims(dims, batch)
    depth = swarmx_depth(systems)
    P, Q, L, e, pk = tp.mesh_rows, tp.mesh_cols, tp.lanes, tp.link_words_per_cycle, tp.bf16_per_wavelet
    bp = -(-batch // P)
    bf16_words = math.ceil(bp / pk)
    vec = max(L, tp.vector_overhead_cycles)                              # a vector, back to back
    dot = (L - 1) * (tp.add_stages + 1) + 1 + tp.vector_overhead_cycles  # a dot-product word
    bvec = math.ceil(bp / L)                                             # vectors per batch slice
    pes = P * Q * L
    fill = (tp.memoryx_stream_latency + tp.link_latency + depth * tp.swarmx_bcast_latency
            + tp.router_io_latency + (P - 1) * tp.hop_latency)
    row_cross = tp.router_io_latency + (Q - 1) * tp.hop_latency          # a vector across one row
    grad_path = ((P - 1) * (tp.hop_latency + tp.chain_add_latency) + tp.router_io_latency
                 + depth * tp.swarmx_reduce_latency + tp.link_latency)
    layers = [(dims[i + 1], dims[i]) for i in range(len(dims) - 1)]
    n_layers = len(layers)

    def phase(i, name, parts, exposed, drain, useful):
        m, k = layers[i]
        row, bound = _bound(parts)
        stream = math.ceil(m * row)
        cycles = exposed + stream + drain
        return PhaseTiming(i, name, m, k, row, bound, fill, exposed, stream, drain, cycles, useful,
                           useful / (pes * cycles))

    forward = []
    for i, (m, k) in enumerate(layers):
        kq = -(-k // Q)
        t_w = max(k / tp.weight_words_per_cycle, kq / e)
        last = i == n_layers - 1
        store = (bp if Q > 1 else 0) + (0 if last else bf16_words)
        parts = {"weights": t_w, "fmac": kq * bvec, "store": store, "vector": bvec * vec,
                 "chain": bp / e}
        chain = (Q - 1) * (tp.hop_latency + tp.chain_add_latency) + math.ceil(bp / e)
        if last:
            drain = chain + tp.hop_latency + tp.router_io_latency
        else:
            parts["broadcast"] = bf16_words / e
            drain = chain + row_cross + math.ceil(bf16_words / e)
        exposed = fill if (i == 0 or not tp.prefetch_weights) else 0
        forward.append(phase(i, "forward", parts, exposed, drain, m * k * batch))

    host = tp.host_loss_cycles
    backward = []
    hidden_window = forward[-1].drain_cycles + host
    for i in range(n_layers - 1, -1, -1):
        m, k = layers[i]
        kq = -(-k // Q)
        t_w = max(k / tp.weight_words_per_cycle, kq / e)
        rx = (kq * bvec if i > 0 else 0) + bf16_words
        vector = math.ceil(kq / L) * vec
        if tp.dw_dot_product:
            vector += kq * bvec * dot
        else:
            rx += bp * math.ceil(kq / L)
        parts = {"weights": t_w, "fmac": rx, "store": kq if P > 1 else 0, "vector": vector,
                 "dz": bf16_words / e, "column": kq / e, "gradient": k / tp.grad_words_per_cycle}
        if not tp.prefetch_weights:
            exposed = max(fill, row_cross)
        elif i == n_layers - 1:
            exposed = max(fill - hidden_window, row_cross)
        else:
            exposed = row_cross
        useful = m * k * batch * (2 if i > 0 else 1)
        backward.append(phase(i, "backward", parts, exposed, kq * bvec * vec if i > 0 else 0, useful))

    t_fwd = sum(p.cycles for p in forward)
    t = t_fwd + host
    # gradient arrival windows at MemoryX and the update engine
    update = {}
    engine = 0.0
    arrivals = []
    for p in backward:
        start = t + p.exposed_fill_cycles
        t += p.cycles
        arrivals.append((p.layer, start + grad_path, t + grad_path))
    backward_end = t
    last_arrival = arrivals[-1][2]
    for layer, _, done in arrivals:
        m, k = layers[layer]
        work = m * k * tp.update_bytes_per_parameter / tp.memoryx_update_bytes_per_cycle
        begin = max(done if tp.memoryx_update_overlap else last_arrival, engine)
        engine = begin + work
        update[layer] = work
    ready = engine + tp.memoryx_update_latency
    mx_exposed = max(0, math.ceil(ready - backward_end))
    input_load = row_cross + math.ceil(dims[0] * bf16_words / e)
    t_bwd = sum(p.cycles for p in backward)
    input_exposed = max(0, input_load - t_bwd) if tp.input_double_buffered else input_load
    cycles = t_fwd + host + t_bwd + mx_exposed + input_exposed
    useful = sum(p.useful_fmacs for p in forward + backward)
    return StepTiming(dims, batch, systems, depth, tuple(forward), tuple(backward), host,
                      math.ceil(sum(update.values())), mx_exposed, input_load, input_exposed, cycles,
                      useful, useful / (pes * cycles),
                      sum(p.exposed_fill_cycles for p in forward + backward))


def scaling(dims, batch, systems_list, params=None, strong=False):
    """Step time and scaling efficiency over ``systems_list``.

    Weak scaling (``strong=False``): ``batch`` samples per system; efficiency
    ``T(1) / T(N)`` (throughput over N times the one-system throughput). Strong scaling: ``batch``
    is the global batch, split ``ceil(batch / N)`` per system; efficiency
    ``throughput(N) / (N * throughput(1))``. Rows are dicts.
    """
    rows = []
    base = None
    for n in systems_list:
        b = -(-batch // n) if strong else batch
        st = step_timing(dims, b, n, params)
        thr = batch / st.cycles if strong else n * b / st.cycles
        if base is None:
            base = (n, thr)
        rows.append({"systems": n, "batch_per_system": b, "swarmx_depth": st.swarmx_depth,
                     "step_cycles": st.cycles, "samples_per_cycle": thr,
                     "efficiency": thr / (base[1] * n / base[0]), "utilization": st.utilization,
                     "exposed_weight_load": st.exposed_weight_load_cycles,
                     "memoryx_exposed": st.memoryx_exposed_cycles})
    return rows
