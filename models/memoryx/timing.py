"""Timing model of MemoryX inside the weight-streaming pipeline (the overlap of the seed).

Stated bandwidths (:class:`MemoryXRates`): ``stream_bw`` bytes/s of bf16 weights out of MemoryX,
``gradient_bw`` bytes/s of fp32 gradients in, ``update_bw`` bytes/s of memory traffic of the
near-memory optimizer (it moves ``update_bytes_per_parameter(optimizer)`` bytes per parameter),
``wafer_flops`` effective flops/s of a wafer. For layer ``l`` with ``P_l`` parameters and ``B``
samples per wafer::

    S_l = 2 P_l / stream_bw        stream the bf16 weights (once per pass)
    F_l = 2 P_l B / wafer_flops    forward compute       Bk_l = 4 P_l B / wafer_flops  backward
    G_l = 4 P_l / gradient_bw      gradient in           U_l = P_l * u / update_bw     update

Weight streaming is row-pipelined, so a pass over a layer takes ``fwd_l = max(S_l, F_l)`` and
``bwd_l = max(S_l, Bk_l, G_l)`` (weights in, gradients out, compute, all overlapped). One step
runs forward 1..L then backward L..1 back to back. The seed's overlap (``overlap=True``): as soon
as layer l's gradient is in (end of ``bwd_l``) MemoryX updates l (the update engine does one layer
at a time, in arrival order) while the wafer computes the next layer's backward pass, and the
forward pass of layer l in the next step may start only when l's update is done (it streams out
again). Without overlap, updates start after the whole backward pass. The exposed latency per
step is the time the wafer waits for MemoryX: step time minus the sum of the ``fwd``/``bwd``
phases. :func:`step_timing` simulates three steps and reports the steady (last) one.
"""

from dataclasses import dataclass, field

from .accounting import update_bytes_per_parameter
from .errors import ConfigError

__all__ = ["MemoryXRates", "LayerTiming", "StepTiming", "step_timing"]


@dataclass(frozen=True)
class MemoryXRates:
    stream_bw: float
    gradient_bw: float
    update_bw: float
    wafer_flops: float

    def __post_init__(self):
        for k in ("stream_bw", "gradient_bw", "update_bw", "wafer_flops"):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or not v > 0:
                raise ConfigError(f"MemoryXRates.{k} must be a number > 0, got {v!r}")


@dataclass
class LayerTiming:
    params: int
    stream: float       # S_l
    forward: float      # fwd_l = max(S_l, F_l)
    backward: float     # bwd_l = max(S_l, Bk_l, G_l)
    gradient: float     # G_l
    update: float       # U_l
    grad_in_at: float = 0.0       # end of bwd_l in the reported step (from its start)
    update_start: float = 0.0
    update_end: float = 0.0
    next_forward_at: float = 0.0  # start of fwd_l in the following step
    slack: float = 0.0            # next_forward_at - update_end (>= 0)


@dataclass
class StepTiming:
    step_seconds: float
    busy_seconds: float         # sum of forward and backward phases
    exposed_seconds: float      # wafer waiting for MemoryX per step
    utilization: float          # busy / step
    layers: list = field(default_factory=list)

    def table(self):
        """Rows for printing: layer, params, S, fwd, bwd, G, U, update start/end, slack."""
        return [[i, l.params, l.stream, l.forward, l.backward, l.gradient, l.update, l.update_start,
                 l.update_end, l.slack] for i, l in enumerate(self.layers)]


def step_timing(layer_params, samples_per_wafer, rates, optimizer, overlap=True, steps=3):
    """Steady-state timing of one training step for layers of ``layer_params`` parameters."""
    if not layer_params or any(p <= 0 for p in layer_params):
        raise ConfigError("layer_params must be a non-empty list of positive parameter counts")
    if samples_per_wafer <= 0:
        raise ConfigError(f"samples_per_wafer must be > 0, got {samples_per_wafer}")
    if steps < 2:
        raise ConfigError("steps must be >= 2 to reach a steady state")
    u = update_bytes_per_parameter(optimizer)["total"]
    B = samples_per_wafer
    L = len(layer_params)
    lay = []
    for p in layer_params:
        s = 2.0 * p / rates.stream_bw
        f = 2.0 * p * B / rates.wafer_flops
        bk = 4.0 * p * B / rates.wafer_flops
        g = 4.0 * p / rates.gradient_bw
        lay.append(LayerTiming(params=int(p), stream=s, forward=max(s, f), backward=max(s, bk, g), gradient=g,
                               update=p * u / rates.update_bw))
    ready = [0.0] * L          # when layer l's weights are up to date for the next forward pass
    engine_free = 0.0
    t = 0.0
    starts = []
    record = []
    for _ in range(steps):
        fwd_start = []
        for i in range(L):
            t = max(t, ready[i])
            fwd_start.append(t)
            t += lay[i].forward
        starts.append(fwd_start[0])
        grad_in = [0.0] * L
        for i in reversed(range(L)):
            t += lay[i].backward
            grad_in[i] = t
        record = [{} for _ in range(L)]
        for i in reversed(range(L)):
            begin = max(grad_in[i] if overlap else grad_in[0], engine_free)
            engine_free = begin + lay[i].update
            ready[i] = engine_free
            record[i].update(grad_in_at=grad_in[i], update_start=begin, update_end=engine_free)
    # the reported step is the last one simulated: its forward pass started at starts[-1]; the
    # step ends when the next forward pass starts (layer 1 waits for its update)
    t2 = t
    for i in range(L):
        t2 = max(t2, ready[i])
        record[i]["next_forward_at"] = t2
        t2 += lay[i].forward
    step_start = starts[-1]
    next_start = record[0]["next_forward_at"]
    step_seconds = next_start - step_start
    busy = sum(l.forward + l.backward for l in lay)
    for i, l in enumerate(lay):
        for k, v in record[i].items():
            setattr(l, k, v - step_start)
        l.slack = l.next_forward_at - l.update_end
    return StepTiming(step_seconds=step_seconds, busy_seconds=busy, exposed_seconds=step_seconds - busy,
                      utilization=busy / step_seconds, layers=lay)
