"""Layer compiler for the RTL wafer (:class:`hdl.wafer.Wafer`): from a layer shape, a mesh
(``Config``) and a batch, the configuration writes (route tables, SRAM contents, descriptors,
adapter registers) of a phase for every tile, following docs/architecture.md#layer-mapping and the
orders of ``models/pipeline/kernels.py`` (the per-PE programs come from ``models.pe``).

The addresses and word formats come from the architecture's maps (``arch.tile_map``,
``arch.router_map``, ``arch.pe_map``, ``arch.wafer_map``, ``arch.wavelet``). Configurations the
hardware cannot honour raise :class:`WaferCompileError` naming the limit.

One module per phase, each readable alone (docs/wafer.md):

* **forward** (:mod:`.forward`, :func:`compile_forward`): ``Z = W X``, FMAC over ``X[K_q, B_p]``,
  psum chain west to east, ReLU + bf16 at the east PE of each row; results leave row ``p`` at its
  west edge (east for a one-column mesh) and each PE keeps ``A[own_q, B_p]`` where the next layer
  finds its ``X[K_q, B_p]``; the last layer sends fp32 logits out of the east edge unrounded.
* **backward-data** (:mod:`.backward_data`, :func:`compile_backward_data`): ``W`` streamed
  transposed, FMAC over the stored ``dZ[M, B_p]``, VEC MASK + bf16; ``dZ_prev`` of column ``q``
  leaves the west edge, or the east edge for the east half of the columns (:func:`dx_edge_words`).
* **backward-weight** (:mod:`.backward_weight`, :func:`compile_backward_weight`): partials per
  output row (FMAC broadcasts on the lanes, or VEC DOT), summed south to north down each column,
  out of the north edge on that column's gradient link.

What they share: :mod:`.phase` (the compiled phase, the kernels' colors and limits),
:mod:`.writes` (a plan's configuration words), :mod:`.residency` (what stays on the wafer between
phases, the next input batch streamed in), :mod:`.streams` (what the host sends on each weight
link). Every mesh column has its own weight link and gradient link (a SwarmX tree each):
:func:`weight_streams` gives what the host (MemoryX) sends on each weight link,
:func:`join_gradients` puts the gradient links' words back into ``dW``.
"""

from .backward_data import compile_backward_data, dx_edge_words, split_dx
from .backward_weight import backward_weight_west_in, compile_backward_weight, join_gradients
from .forward import compile_forward, forward_expected_outputs, logits_expected_outputs
from .phase import COLOR_DX0, COLOR_DZ, COLOR_GRAD, WaferCompileError, WaferPhase
from .residency import (
    activation_homes,
    can_transpose_x,
    dw_on_lanes,
    input_stream_columns,
    next_input_west_in,
    resident_bases,
    transposes_own_x,
)
from .streams import fmac_stream, weight_streams

__all__ = ["WaferCompileError", "WaferPhase", "compile_forward", "compile_backward_weight",
           "compile_backward_data", "forward_expected_outputs", "logits_expected_outputs",
           "COLOR_GRAD", "COLOR_DX0", "COLOR_DZ", "dw_on_lanes", "backward_weight_west_in",
           "dx_edge_words", "split_dx", "weight_streams", "fmac_stream", "join_gradients",
           "activation_homes", "resident_bases",
           "can_transpose_x", "transposes_own_x", "input_stream_columns", "next_input_west_in"]
