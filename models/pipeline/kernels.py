"""The exact kernels of a dense layer on a ``P x Q`` wafer (docs/architecture.md#layer-mapping):
the numbers the RTL must produce, bit for bit. Everything here is fixed; the PE tile, the mesh and the system simulation
implement exactly these partitions, rounding points and summation orders.

Notation: a layer is ``Z = W X`` with ``W: M x K`` (out x in, streamed from MemoryX as bf16, row m
in ascending k), ``X: K x B`` (bf16 activations, resident), batch ``B`` per system, ``N`` systems.
Values travel as bit patterns: bf16 as ``uint16``, fp32 as ``float32`` (numerics in
:mod:`models.numerics`, docs/architecture.md#numerics). Mesh rows are numbered ``p = 0`` (north) .. ``P-1`` (south),
columns ``q = 0`` (west) .. ``Q-1`` (east).

Partition (:mod:`models.pipeline.mapping`)
    K over the Q columns and B over the P rows in contiguous ascending slices; with uneven sizes
    the first ``n mod parts`` owners get ``ceil(n/parts)`` items, the rest ``floor(n/parts)``
    (``numpy.array_split``); owners beyond ``n`` get empty slices. PE(p, q) holds ``X[K_q, B_p]``.
    After a forward pass the outputs ``A[m, B_p]`` are kept by the PE of row p whose column owns
    ``m`` in the next layer's split of its ``K`` (= this layer's ``M``) over Q.

Forward (:func:`forward`)
    Every PE accumulates, for each streamed row m, from +0.0 in ascending k of its slice:
    ``acc = fp32_add(acc, bf16_mul(W[m,k], X[k,b]))`` for each b of its slice (one accumulator per
    b: the lanes of an FMAC broadcast ``acc[0:L] += w * X[k][0:L]``). The Q partial sums of row
    p are added west to east, ``Z[m,b] = chain_sum(acc_0, acc_1, ..., acc_{Q-1})``: the west PE's
    partial is the first term, each PE adds the incoming sum to its own (``fp32_add(in, acc_q)``)
    and forwards it east. A PE with an empty slice contributes +0.0. No bias: a bias is an extra
    input feature fixed at 1.0 (the network adds none). Values depend on Q only, not on P.

Activation (:func:`relu_bf16`)
    Hidden layers: on the fp32 Z at the east PE, ReLU selects on the sign bit (sign set, including
    -0.0 and -inf -> +0.0; otherwise Z unchanged, so the canonical NaN passes), then ``bf16_bits``
    (RNE) and the bf16 result is sent west to its owner. The last layer has **no** ReLU: its fp32
    Z leaves at the east edge for the host unrounded.

Host (:func:`softmax_xent`)
    On the last layer's fp32 Z (classes x batch) in numpy float32: ``e = exp(z - max_c z)``,
    ``s = e / chain_sum(e over classes ascending)``, ``dZ = (s - onehot) / (N*B)`` (N*B = global
    batch), each step one fp32 operation; dZ is rounded to bf16 (RNE) where it is sent back in at
    the east edge. The loss (reported only) is the float64 mean of ``-log s[label]``.

Backward-data (:func:`backward_data`)
    Row m of W streams again (ascending m) and ``dZ[m, B_p]`` is multicast along row p. Each PE
    accumulates ``dX[k,b] = fp32_add(dX[k,b], bf16_mul(W[m,k], dZ[m,b]))`` locally, from +0.0, in
    ascending m; no reduction between PEs, so the values depend on neither P nor Q. Then the ReLU
    mask of the previous layer, taken from the bf16 activation the PE already holds
    (``X[k,b]``, the previous layer's output): where X has sign 0 and is not +0.0 (``x16 not in
    {0x0000} and x16 < 0x8000``), ``dZ_prev = bf16_bits(dX)`` (RNE); elsewhere ``+0.0``
    (``0x0000``, a select, not a multiply). The first layer computes no dX.

Backward-weight (:func:`backward_weight`)
    Per PE(p, q): ``partial_p[m,k] = sum over b of B_p ascending, from +0.0, of
    fp32_add(acc, bf16_mul(dZ[m,b], X[k,b]))`` (a dot product over SRAM, or an FMAC broadcast of
    the scalar dZ[m,b] over the PE's k; a dot product must run over the whole slice in one
    ascending accumulation, which the L-element DOT of ``hdl/pe/core.py`` does when
    ``|B_p| <= lanes``). The P partials of column q are added **south to north**,
    because they leave at the north edge toward SwarmX: ``dW[m,k] = chain_sum(partial_{P-1},
    partial_{P-2}, ..., partial_0)`` (the south PE's partial is the first term). Values depend
    on P only. dW stays fp32.

Systems and MemoryX (:mod:`models.pipeline.training`)
    The N per-system dW are summed in SwarmX tree order, ``tree_sum([dW_0, ..., dW_{N-1}])``
    (system n = leaf n), and MemoryX applies its optimizer to the fp32 master with that sum.
    All forward and backward passes of a step use the bf16 weights from before the step.
"""

import numpy as np

from models.numerics import bf16_bits, bf16_mul, chain_sum, fp32_add

from .mapping import split

__all__ = ["forward", "forward_partials", "weight_partials", "relu_bf16", "relu_pass", "softmax_xent",
           "backward_data", "backward_data_acc",
           "backward_weight", "to_bf16"]

# Elements per vectorized slab (bounds memory for big layers; the order does not depend on it).
_SLAB = 1 << 22


def to_bf16(values):
    """bf16 bit patterns (RNE) of real values (e.g. input data)."""
    return bf16_bits(np.asarray(values, dtype=np.float32))


def _check_mesh(mesh):
    try:
        rows, cols = mesh
    except (TypeError, ValueError):
        raise ValueError(f"mesh must be a (rows, cols) pair, got {mesh!r}") from None
    for name, v in (("rows", rows), ("cols", cols)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"mesh {name} must be an int >= 1, got {v!r}")
    return int(rows), int(cols)


def _check_bf16(name, a, ndim=2):
    a = np.asarray(a)
    if a.dtype != np.uint16:
        raise TypeError(f"{name} must be bf16 bit patterns (uint16), got dtype {a.dtype}")
    if a.ndim != ndim or 0 in a.shape:
        raise ValueError(f"{name} must be a non-empty {ndim}-D array, got shape {a.shape}")
    return a


def _starts_lens(slices):
    return (np.array([s.start for s in slices], dtype=np.intp),
            np.array([s.stop - s.start for s in slices], dtype=np.intp))


def _check_forward(w16, x16, mesh):
    _, cols = _check_mesh(mesh)
    w16, x16 = _check_bf16("W", w16), _check_bf16("X", x16)
    if x16.shape[0] != w16.shape[1]:
        raise ValueError(f"W is {w16.shape[0]} x {w16.shape[1]} but X has {x16.shape[0]} rows "
                         f"(need {w16.shape[1]})")
    return w16, x16, cols


def _column_partials(w16, x16, starts, lens):
    """``acc[q]`` (Q x M x B): column q's FMACs over its k slice, ascending, from +0.0."""
    acc = np.zeros((len(lens), w16.shape[0], x16.shape[1]), dtype=np.float32)
    for j in range(int(lens.max())):
        qs = np.nonzero(lens > j)[0]
        kk = starts[qs] + j                           # the j-th input of each active column
        acc[qs] = fp32_add(acc[qs], bf16_mul(w16[:, kk].T[:, :, None], x16[kk][:, None, :]))
    return acc


def forward_partials(w16, x16, mesh):
    """The partial sums entering the row chain, ``Q x M x B`` fp32 (``[q, m, b]``: what column q of
    the row owning b adds for output m). :func:`forward` is their ``chain_sum`` over q. For
    checking PE-level RTL at small sizes."""
    w16, x16, cols = _check_forward(w16, x16, mesh)
    return _column_partials(w16, x16, *_starts_lens(split(w16.shape[1], cols)))


def forward(w16, x16, mesh):
    """fp32 ``Z`` (M x B) of ``W X`` on a ``mesh = (P, Q)`` wafer, in the order documented above."""
    w16, x16, cols = _check_forward(w16, x16, mesh)
    m, b = w16.shape[0], x16.shape[1]
    starts, lens = _starts_lens(split(w16.shape[1], cols))
    z = np.empty((m, b), dtype=np.float32)
    chunk = max(1, _SLAB // (cols * b))
    for m0 in range(0, m, chunk):
        acc = _column_partials(w16[m0:m0 + chunk], x16, starts, lens)
        z[m0:m0 + chunk] = chain_sum(acc, axis=0)     # west (q = 0) to east
    return z


def relu_bf16(z):
    """Hidden-layer output: ReLU on the sign bit of fp32 ``z`` (sign set -> +0.0), then bf16 RNE."""
    z = np.asarray(z, dtype=np.float32)
    negative = (z.view(np.uint32) >> 31).astype(bool)
    return bf16_bits(np.where(negative, np.float32(0.0), z))


def relu_pass(x16):
    """Where the backward ReLU mask passes: the stored bf16 activation has sign 0 and is not +0.0."""
    x16 = np.asarray(x16, dtype=np.uint16)
    return (x16 != 0) & (x16 < 0x8000)


def softmax_xent(z, labels, global_batch):
    """Host: ``(loss, dz16)`` for fp32 logits ``z`` (classes x batch) and integer ``labels``.

    ``dz16`` is the bf16 ``(softmax - onehot) / global_batch`` sent back to the wafer; ``loss`` is
    the float64 mean cross-entropy of this batch (for reporting only).
    """
    z = np.asarray(z, dtype=np.float32)
    labels = np.asarray(labels)
    if z.ndim != 2:
        raise ValueError(f"logits must be classes x batch, got shape {z.shape}")
    classes, b = z.shape
    if labels.shape != (b,) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be {b} integers, got shape {labels.shape} dtype {labels.dtype}")
    if labels.min() < 0 or labels.max() >= classes:
        raise ValueError(f"labels must be in 0..{classes - 1}, got {labels.min()}..{labels.max()}")
    if not isinstance(global_batch, (int, np.integer)) or global_batch < b:
        raise ValueError(f"global_batch must be an int >= the batch {b}, got {global_batch!r}")
    with np.errstate(all="ignore"):
        shifted = np.subtract(z, z.max(axis=0, keepdims=True), dtype=np.float32)
        e = np.exp(shifted, dtype=np.float32)
        s = np.divide(e, chain_sum(e, axis=0)[None, :], dtype=np.float32)
        onehot = np.zeros_like(s)
        onehot[labels, np.arange(b)] = 1.0
        dz = np.divide(np.subtract(s, onehot, dtype=np.float32), np.float32(global_batch),
                       dtype=np.float32)
        loss = float(-np.mean(np.log(s[labels, np.arange(b)].astype(np.float64))))
    return loss, bf16_bits(dz)


def backward_data_acc(w16, dz16):
    """fp32 ``dX = W^T dZ`` (K x B), accumulated per element from +0.0 in ascending m."""
    w16, dz16 = _check_bf16("W", w16), _check_bf16("dZ", dz16)
    m, k = w16.shape
    if dz16.shape[0] != m:
        raise ValueError(f"W is {m} x {k} but dZ has {dz16.shape[0]} rows (need {m})")
    acc = np.zeros((k, dz16.shape[1]), dtype=np.float32)
    for i in range(m):
        acc = fp32_add(acc, bf16_mul(w16[i][:, None], dz16[i][None, :]))
    return acc


def backward_data(w16, dz16, x16):
    """bf16 ``dZ`` of the previous layer: :func:`backward_data_acc`, ReLU mask from the stored
    activation ``x16`` (this layer's input, K x B), bf16 RNE."""
    acc = backward_data_acc(w16, dz16)
    x16 = _check_bf16("X", x16)
    if x16.shape != acc.shape:
        raise ValueError(f"X has shape {x16.shape}, need {acc.shape} (K x B)")
    return np.where(relu_pass(x16), bf16_bits(acc), np.uint16(0)).astype(np.uint16)


def _check_weight(dz16, x16, mesh):
    rows, _ = _check_mesh(mesh)
    dz16, x16 = _check_bf16("dZ", dz16), _check_bf16("X", x16)
    if x16.shape[1] != dz16.shape[1]:
        raise ValueError(f"dZ has batch {dz16.shape[1]} but X has batch {x16.shape[1]}")
    return dz16, x16, rows


def _row_partials(dz16, x16, starts, lens):
    """``part[p]`` (P x M x K): row p's FMACs over its batch slice, ascending, from +0.0."""
    part = np.zeros((len(lens), dz16.shape[0], x16.shape[0]), dtype=np.float32)
    for j in range(int(lens.max())):
        ps = np.nonzero(lens > j)[0]
        bb = starts[ps] + j                           # the j-th batch column of each active row
        part[ps] = fp32_add(part[ps], bf16_mul(dz16[:, bb].T[:, :, None], x16[:, bb].T[:, None, :]))
    return part


def weight_partials(dz16, x16, mesh):
    """The dW partials entering the column chain, ``P x M x K`` fp32 (``[p, m, k]``: what row p
    adds for ``dW[m, k]``). :func:`backward_weight` chains them south to north. For checking
    PE-level RTL at small sizes."""
    dz16, x16, rows = _check_weight(dz16, x16, mesh)
    return _row_partials(dz16, x16, *_starts_lens(split(dz16.shape[1], rows)))


def backward_weight(dz16, x16, mesh):
    """fp32 ``dW = dZ X^T`` (M x K) of one system: per-PE partials over its batch slice (b
    ascending), then the column chain south to north."""
    dz16, x16, rows = _check_weight(dz16, x16, mesh)
    m, k = dz16.shape[0], x16.shape[0]
    starts, lens = _starts_lens(split(dz16.shape[1], rows))
    dw = np.empty((m, k), dtype=np.float32)
    chunk = max(1, _SLAB // (rows * k))
    for m0 in range(0, m, chunk):
        part = _row_partials(dz16[m0:m0 + chunk], x16, starts, lens)
        dw[m0:m0 + chunk] = chain_sum(part[::-1], axis=0)   # south (p = P-1) to north
    return dw
