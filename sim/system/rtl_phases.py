"""The phases of a training step on the N RTL wafers, one unit each (docs/system_simulation.md#how-a-step-runs):
what the host compiles and sends for it (:class:`PhaseRequest`), what comes back
(:class:`PhaseResult`), and what the host makes of that.

Each phase function is a generator: it yields one :class:`PhaseRequest` and is sent back the
:class:`PhaseResult`; it returns the phase's :class:`PhaseRecord` and what the step needs next
(activations, logits, ``dZ_prev``, ``dW``). :class:`Wafers` holds what the host knows of the
wafers during the run: each wafer's configuration registers (``compiler.config_state``) and the
activations of the step (``X`` of each layer, the next input batch).
"""

from dataclasses import dataclass, field

import numpy as np

from arch.wavelet import unpack_wavelet
from compiler.config_state import ConfigState
from compiler.multicast import multicast
from compiler.wafer import (
    compile_backward_data,
    compile_backward_weight,
    compile_forward,
    dx_edge_words,
    join_gradients,
    resident_bases,
    split_dx,
    weight_streams,
)
from models.numerics import f32

__all__ = ["PhaseRequest", "PhaseResult", "PhaseRecord", "Wafers", "forward", "backward_data",
           "backward_weight"]


@dataclass
class PhaseRequest:
    """One phase: ``writes[i]`` = wafer i's configuration writes ``[(addr, value)]`` (all the same length),
    ``go_after`` how many of them come before ``go`` (None: all; the others are written while the
    phase runs, ``compiler.wafer.WaferPhase.late``), ``streams[q]`` the tagged weight words to
    broadcast on link q (uint64, one array per mesh column, empty ones for none), ``west_in[i][p]``
    the wavelets the host sends into row p of wafer i at the west edge (all the same length; empty:
    none), ``roots[q]`` the words root recorder q must receive (one count per mesh column), ``west``
    / ``east`` the words every west / east edge recorder must receive; ``what`` names the phase in
    messages. :meth:`of` builds one from compiled phases."""
    what: str
    writes: list
    streams: list = field(default_factory=list)
    west_in: list = field(default_factory=list)
    roots: list = field(default_factory=list)
    west: int = 0
    east: int = 0
    go_after: int | None = None

    @classmethod
    def of(cls, what, progs, streams=(), roots=(), **counts):
        """The request of ``progs``, one :class:`compiler.wafer.WaferPhase` per wafer (the same
        write count each); ``streams`` / ``roots`` per mesh column (none given: empty, zero)."""
        counts_w = {(len(ph.writes), ph.go_after) for ph in progs}
        assert len(counts_w) == 1, f"{what}: wafers got different write counts {counts_w}"
        links = len(progs[0].plan["k_slices"])
        rows = len(progs[0].west_in)
        west_in = [[ph.west_in[p] for p in range(rows)] for ph in progs] if rows else []
        return cls(what=what, writes=[ph.writes for ph in progs],
                   streams=list(streams) or [np.zeros(0, np.uint64)] * links,
                   west_in=west_in, roots=list(roots) or [0] * links, go_after=progs[0].go_after, **counts)

    @property
    def go_count(self):
        """The configuration words before ``go``."""
        return len(self.writes[0]) if self.go_after is None else self.go_after

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

    def edge_words(self, i, p):
        """What row ``p`` of wafer ``i`` sent out of its west edge, then its east edge."""
        return np.concatenate([self.west_words[i][p], self.east_words[i][p]])


@dataclass
class PhaseRecord:
    """A phase that ran: ``phase`` (``"forward"``, ``"backward-data"``, ``"backward-weight"``),
    ``layer``, its :class:`PhaseResult` and, for the timing model, ``writes`` (the configuration
    words per wafer), ``go_after`` (those before ``go``) and ``plan`` (the compiler's plan of
    wafer 0)."""
    phase: str
    layer: int
    result: PhaseResult
    writes: int
    go_after: int
    plan: dict


class Wafers:
    """The host's view of the N wafers for a run: ``states[i]`` (wafer i's configuration
    registers, kept across phases and steps), and for the step in progress ``acts[i][l]`` (bf16
    ``X`` of layer ``l``, ``K x batch``; layer 0 the input batch), ``next_x[i]`` (the next step's
    input batch) and ``first`` (the run's first step: the input batch is loaded, not resident)."""

    def __init__(self, cfg, dims, batch, systems):
        self.cfg, self.dims, self.batch = cfg, dims, batch
        self.states = [ConfigState() for _ in range(systems)]
        self.acts, self.next_x, self.first = None, None, True

    def begin_step(self, x16, next_x16, *, first):
        """A step on input batches ``x16[i]`` (``K x batch`` bf16 per wafer), streaming in
        ``next_x16[i]`` for the next one."""
        self.acts, self.next_x, self.first = [[x] for x in x16], next_x16, first

    def programs(self, kind, l, compile_phase, dz=None, **kw):
        """Every wafer's phase ``kind`` of layer ``l``: ``X`` loaded only where the wafer does not
        keep it (the input batch: in the first step, later steps find it streamed in by the step
        before), the next input batch streamed in where the phase carries it, registers the wafer
        holds left out, writes several tiles share multicast."""
        cfg, dims = self.cfg, self.dims
        res_args = resident_bases(cfg, dims, kind, l)
        first_input = kind == "forward" and l == 0 and self.first
        out = []
        for i, state in enumerate(self.states):
            x16 = self.acts[i][l] if res_args["x_home"] is None or first_input else None
            data = {} if dz is None else {"dz16": dz[i]}
            if "next_input" in res_args:
                data["next_x16"] = self.next_x[i]
            out.append(multicast(cfg, state.program(compile_phase(
                cfg, m=dims[l + 1], k=dims[l], batch=self.batch, x16=x16, **data, **kw, **res_args))))
        return out


def _record(kind, l, res, progs):
    return PhaseRecord(kind, l, res, len(progs[0].writes), progs[0].go_after, progs[0].plan)


def forward(wafers, l, w16):
    """Forward of layer ``l`` (bf16 weights ``w16``, ``M x K``) on every wafer: the rows of ``W``
    on the weight links; a hidden layer's activations leave the west edges (kept in
    ``wafers.acts[i][l + 1]``, as the wafer keeps them), the last layer's fp32 logits the east
    edges. Returns ``(record, logits)`` (logits per wafer, ``M x batch``; None for a hidden layer)."""
    cfg, dims = wafers.cfg, wafers.dims
    m, last, L = dims[l + 1], l == len(dims) - 2, cfg.lanes
    progs = wafers.programs("forward", l, compile_forward, last=last)
    counts = {"east" if last else "west": m * L}
    res = yield PhaseRequest.of(f"forward layer {l}", progs, weight_streams(cfg, w16), **counts)
    logits = [] if last else None
    for i, acts in enumerate(wafers.acts):
        words = res.east_words[i] if last else res.west_words[i]
        rows = np.concatenate([unpack_wavelet(w)[0].astype(np.uint32).reshape(m, L) for w in words], axis=1)
        if last:
            logits.append(f32(rows))
        else:
            acts.append((rows >> 16).astype(np.uint16))
    return _record("forward", l, res, progs), logits


def backward_data(wafers, l, w16, dz):
    """Backward-data of layer ``l >= 1`` on every wafer: the rows of ``W^T`` on the weight links,
    ``dz[i]`` (bf16 ``M x batch``) loaded; ``dZ_prev`` leaves the west and east edges. Returns ``(record,
    dz_prev)`` (per wafer, bf16 ``K x batch``)."""
    cfg, k = wafers.cfg, wafers.dims[l]
    progs = wafers.programs("backward-data", l, compile_backward_data, dz)
    west, east = dx_edge_words(cfg, k)
    res = yield PhaseRequest.of(f"backward-data layer {l}", progs,
                                weight_streams(cfg, w16, transposed=True), west=west, east=east)
    dz_prev = [np.concatenate([split_dx(cfg, res.edge_words(i, p), k) for p in range(cfg.mesh_rows)], axis=1)
               for i in range(len(progs))]
    return _record("backward-data", l, res, progs), dz_prev


def backward_weight(wafers, l, dz):
    """Backward-weight of layer ``l`` on every wafer (``dz[i]``: bf16 ``M x batch``): each mesh
    column's partials summed down the column and, over the wafers, by its SwarmX tree. Returns
    ``(record, dW)`` (fp32 ``M x K``, the sum of every wafer's)."""
    m, k = wafers.dims[l + 1], wafers.dims[l]
    progs = wafers.programs("backward-weight", l, compile_backward_weight, dz)
    res = yield PhaseRequest.of(f"backward-weight layer {l}", progs, roots=progs[0].link_words)
    return _record("backward-weight", l, res, progs), f32(join_gradients(wafers.cfg, res.root_words, m=m, k=k))
