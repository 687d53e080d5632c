"""Exact capacity and bandwidth accounting of MemoryX, and a planner.

Bytes per parameter held by the store (what :class:`MemoryX` really stores, per parameter):

==========  ======  ========  =========  ==============  ==========  =====
optimizer   master  state     fp32 grad  bf16 copy       state names total
==========  ======  ========  =========  ==============  ==========  =====
SGD         4       0         4          2               -           10
Momentum    4       4         4          2               buffer      14
Adam        4       8         4          2               m, v        18
AdamW       4       8         4          2               m, v        18
==========  ======  ========  =========  ==============  ==========  =====

The seed's arithmetic (:data:`SEED_EXAMPLE`): MemoryX holds 4 TB to 2.4 PB for up to 120 T
parameters, i.e. ``2.4e15 / 120e12 = 20`` bytes per parameter (and 4 TB / 20 B = 200 G parameters
at the small end). AdamW needs 18 of those 20 bytes, so 120 T parameters fit with 2 bytes per
parameter (10 %) to spare: ``plan_capacity(120e12, AdamW(), dram_bytes=4e12, flash_bytes=2.396e15)``.

Traffic per training step (data parallel over ``N`` wafers behind SwarmX): the bf16 weights of
every layer stream out twice (forward and backward pass, 2 + 2 bytes per parameter), the reduced
fp32 gradient comes back once (4 bytes); SwarmX broadcasts and reduces, so MemoryX moves these
bytes once for all N wafers (without SwarmX, N times). The optimizer reads master, state and
gradient and writes master, state and the bf16 copy: for AdamW 16 + 14 = 30 bytes per parameter.
A wafer's compute per step is ``6 * P * B`` flops (2 forward, 4 backward: dX and dW) for ``B``
samples (tokens) per wafer; :func:`plan_bandwidth` sizes each link for the phase where it is
tightest, and :func:`models.memoryx.timing.step_timing` run with those rates exposes only the update
of the first layer.
"""

from dataclasses import dataclass

from .errors import ConfigError
from .optimizers import Optimizer

__all__ = ["bytes_per_parameter", "update_bytes_per_parameter", "plan_capacity", "plan_bandwidth",
           "max_parameters", "SEED_EXAMPLE", "CapacityPlan", "BandwidthPlan"]

MASTER_BYTES = 4
STATE_BYTES = 4
GRAD_BYTES = 4
BF16_BYTES = 2
STREAM_BYTES_PER_STEP = 2 * BF16_BYTES   # forward + backward pass
GRADIENT_BYTES_PER_STEP = GRAD_BYTES

SEED_EXAMPLE = {"capacity_bytes": 2.4e15, "parameters": 120e12, "bytes_per_parameter": 2.4e15 / 120e12,
                "dram_bytes": 4e12}


def _optimizer(opt):
    if not isinstance(opt, Optimizer):
        raise ConfigError(f"expected an optimizer instance (SGD, Momentum, Adam, AdamW), got {opt!r}")
    return opt


def bytes_per_parameter(optimizer):
    """``{"master": 4, <state name>: 4, ..., "grad": 4, "bf16": 2, "total": ...}`` for ``optimizer``."""
    opt = _optimizer(optimizer)
    parts = {"master": MASTER_BYTES, **{s: STATE_BYTES for s in opt.state_names},
             "grad": GRAD_BYTES, "bf16": BF16_BYTES}
    parts["total"] = sum(parts.values())
    return parts


def update_bytes_per_parameter(optimizer):
    """Bytes the optimizer step moves per parameter: reads master + state + gradient, writes
    master + state + bf16 copy (``{"read", "write", "total"}``)."""
    opt = _optimizer(optimizer)
    state = STATE_BYTES * len(opt.state_names)
    read = MASTER_BYTES + state + GRAD_BYTES
    write = MASTER_BYTES + state + BF16_BYTES
    return {"read": read, "write": write, "total": read + write}


def max_parameters(capacity_bytes, bytes_per_param):
    """Largest whole number of parameters that fit in ``capacity_bytes``."""
    if bytes_per_param <= 0:
        raise ConfigError(f"bytes_per_param must be > 0, got {bytes_per_param}")
    return int(capacity_bytes // bytes_per_param)


@dataclass(frozen=True)
class CapacityPlan:
    parameters: int
    bytes_per_parameter: float
    bytes_needed: float
    dram_bytes: float
    flash_bytes: float
    fits: bool
    fits_in_dram: bool
    dram_fraction: float       # share of the model's bytes the DRAM tier can hold (<= 1)
    headroom_bytes: float      # capacity - need (negative when it does not fit)


def plan_capacity(parameters, optimizer_or_bytes, dram_bytes, flash_bytes=0.0):
    """Does a model of ``parameters`` fit in DRAM + flash? ``optimizer_or_bytes`` is an optimizer
    (its exact bytes per parameter) or a number of bytes per parameter."""
    if parameters < 0 or dram_bytes < 0 or flash_bytes < 0:
        raise ConfigError("parameters and tier sizes must be >= 0")
    bpp = (bytes_per_parameter(optimizer_or_bytes)["total"] if isinstance(optimizer_or_bytes, Optimizer)
           else float(optimizer_or_bytes))
    if bpp <= 0:
        raise ConfigError(f"bytes per parameter must be > 0, got {bpp}")
    need = parameters * bpp
    cap = dram_bytes + flash_bytes
    return CapacityPlan(parameters=int(parameters), bytes_per_parameter=bpp, bytes_needed=need,
                        dram_bytes=dram_bytes, flash_bytes=flash_bytes, fits=need <= cap,
                        fits_in_dram=need <= dram_bytes,
                        dram_fraction=1.0 if need == 0 else min(1.0, dram_bytes / need),
                        headroom_bytes=cap - need)


@dataclass(frozen=True)
class BandwidthPlan:
    step_seconds: float            # wafer compute time of one training step
    forward_seconds: float         # of which the forward pass (2 P B flops)
    backward_seconds: float        # and the backward pass (4 P B flops)
    stream_out_bytes: float        # bf16 weights leaving MemoryX per step (both passes)
    gradient_in_bytes: float       # fp32 gradients arriving per step
    update_bytes: float            # bytes the optimizer moves per step
    stream_out_bw: float           # bytes/s so the weight stream keeps up in the forward pass
    gradient_in_bw: float          # bytes/s so gradients leave as fast as the backward pass makes them
    update_bw: float               # memory bandwidth so the update fits in the backward pass


def plan_bandwidth(parameters, optimizer, samples_per_wafer, wafer_flops, n_wafers=1, utilization=1.0,
                   swarmx=True):
    """Bandwidth MemoryX needs so ``n_wafers`` wafers never wait for it.

    A wafer computes ``2 P B`` flops in the forward and ``4 P B`` in the backward pass at
    ``wafer_flops * utilization``. The forward pass is the tighter one for the weight stream (the
    same ``2 P`` bf16 bytes as the backward pass in half the time): ``stream_out_bw = 2 P /
    forward_seconds``. Gradients (``4 P`` bytes) leave during the backward pass: ``gradient_in_bw =
    4 P / backward_seconds``. The near-memory update overlaps the backward pass (layer L is updated
    while L-1 computes): ``update_bw = update_bytes / backward_seconds``. With ``swarmx`` the tree
    broadcasts and reduces, so stream and gradient traffic do not grow with ``n_wafers``; without it
    each wafer is served separately (x N). For a fixed *global* batch ``G`` pass
    ``samples_per_wafer = G / n_wafers``.
    """
    if parameters <= 0 or samples_per_wafer <= 0 or wafer_flops <= 0 or not 0 < utilization <= 1 \
            or n_wafers < 1:
        raise ConfigError("need parameters, samples_per_wafer, wafer_flops > 0, n_wafers >= 1 and "
                         "0 < utilization <= 1")
    rate = wafer_flops * utilization
    fwd = 2.0 * parameters * samples_per_wafer / rate
    bwd = 4.0 * parameters * samples_per_wafer / rate
    fan = 1 if swarmx else n_wafers
    out_b = STREAM_BYTES_PER_STEP * parameters * fan
    in_b = GRADIENT_BYTES_PER_STEP * parameters * fan
    upd = update_bytes_per_parameter(optimizer)["total"] * parameters
    return BandwidthPlan(step_seconds=fwd + bwd, forward_seconds=fwd, backward_seconds=bwd,
                         stream_out_bytes=out_b, gradient_in_bytes=in_b, update_bytes=upd,
                         stream_out_bw=out_b / 2 / fwd, gradient_in_bw=in_b / bwd, update_bw=upd / bwd)
