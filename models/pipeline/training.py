"""Data-parallel training through the exact kernels (docs/pipeline.md), with MemoryX as the weight
store and optimizer.

A network is a list of dense layers ``dims = (d_0, d_1, ..., d_L)``: layer ``l`` is named
``fc<l>`` and has ``W: d_{l+1} x d_l`` (out x in), no bias, ReLU after every layer but the last,
softmax cross-entropy at the host. One step of :class:`WaferTrainer` on a global batch of
``N * B`` samples:

1. Every layer's bf16 weights come from MemoryX (the same stream is broadcast to all N systems).
2. System ``n`` takes samples ``n*B .. n*B+B-1`` and runs the forward kernels layer by layer, the
   host's :func:`~models.pipeline.kernels.softmax_xent` with global batch ``N*B``, then the backward
   kernels from the last layer down (no dX for the first layer).
3. For each layer, last first (the order gradients reach MemoryX), the N fp32 dW are summed in
   SwarmX tree order (:func:`models.numerics.tree_sum`, system n = leaf n) and handed to
   ``MemoryX.apply_gradient``, which runs the optimizer on the fp32 master.

:class:`Float32Trainer` is the same network in plain float32 numpy (fp32 weights and activations,
matmuls, no bf16 anywhere) on the same optimizer, the reference the exact training is compared to.
"""

from dataclasses import dataclass

import numpy as np

from models.memoryx import AdamW, MemoryX
from models.numerics import tree_sum

from . import kernels

__all__ = ["layer_names", "build_memoryx", "system_gradients", "WaferTrainer", "Float32Trainer",
           "StepResult"]


def _check_dims(dims):
    dims = tuple(dims)
    if len(dims) < 2 or any(not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
        raise ValueError(f"dims must be >= 2 positive ints (inputs, ..., classes), got {dims!r}")
    return tuple(int(d) for d in dims)


def layer_names(dims):
    return [f"fc{i}" for i in range(len(_check_dims(dims)) - 1)]


def build_memoryx(dims, optimizer=None, init="kaiming_normal", seed=0, **memoryx_args):
    """A :class:`MemoryX` holding the layers of ``dims`` (layer l initialised with seed ``seed + l``);
    the optimizer defaults to ``AdamW(lr=1e-3)``."""
    dims = _check_dims(dims)
    mx = MemoryX(optimizer=optimizer if optimizer is not None else AdamW(lr=1e-3), **memoryx_args)
    for i, name in enumerate(layer_names(dims)):
        mx.add_layer(name, (dims[i + 1], dims[i]), init=init, seed=seed + i)
    return mx


def _check_batch(x, labels, dims):
    x = np.asarray(x)
    labels = np.asarray(labels)
    if x.ndim != 2 or x.shape[1] != dims[0]:
        raise ValueError(f"x must be samples x {dims[0]} features, got shape {x.shape}")
    if labels.shape != (x.shape[0],) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be {x.shape[0]} integers, got shape {labels.shape} dtype {labels.dtype}")
    return x, labels


def wafer_forward(w16s, x16, mesh):
    """Forward kernels through every layer: ``(inputs, z)`` with ``inputs[l]`` the bf16 input of
    layer l (K x B, kept on the wafer for the backward pass) and ``z`` the last layer's fp32 output."""
    inputs = []
    a = x16
    for i, w16 in enumerate(w16s):
        inputs.append(a)
        z = kernels.forward(w16, a, mesh)
        if i < len(w16s) - 1:
            a = kernels.relu_bf16(z)
    return inputs, z


def system_gradients(w16s, x16, labels, mesh, global_batch):
    """One system's part of a step: ``(loss, grads)`` with ``grads[l]`` its fp32 dW of layer l
    (after the column reduction), for bf16 inputs ``x16`` (features x B)."""
    inputs, z = wafer_forward(w16s, x16, mesh)
    loss, dz = kernels.softmax_xent(z, labels, global_batch)
    grads = [None] * len(w16s)
    for i in range(len(w16s) - 1, -1, -1):
        grads[i] = kernels.backward_weight(dz, inputs[i], mesh)
        if i > 0:
            dz = kernels.backward_data(w16s[i], dz, inputs[i])
    return loss, grads


@dataclass(frozen=True)
class StepResult:
    """``loss``: mean cross-entropy over the global batch (float64); ``system_losses``: per system;
    ``grads``: the reduced fp32 gradient applied to each layer (``tree_sum`` of the systems')."""

    loss: float
    system_losses: tuple
    grads: tuple


class WaferTrainer:
    """Training of ``dims`` through the exact kernels on ``systems`` wafers of ``mesh = (P, Q)``
    PEs, each with batch ``batch``, weights and optimizer in ``memoryx`` (layers ``fc0, fc1, ...``)."""

    def __init__(self, dims, memoryx, mesh=(2, 2), systems=1, batch=16):
        self.dims = _check_dims(dims)
        kernels._check_mesh(mesh)
        if not isinstance(systems, int) or not 1 <= systems <= 192:
            raise ValueError(f"systems must be an int in 1..192 (SwarmX leaves), got {systems!r}")
        if not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch (per system) must be an int >= 1, got {batch!r}")
        self.names = layer_names(self.dims)
        for i, name in enumerate(self.names):
            shape = tuple(memoryx.shape(name))
            if shape != (self.dims[i + 1], self.dims[i]):
                raise ValueError(f"MemoryX layer {name!r} has shape {shape}, the network needs "
                                 f"{(self.dims[i + 1], self.dims[i])}")
        self.mx, self.mesh, self.systems, self.batch = memoryx, tuple(mesh), systems, batch

    @property
    def global_batch(self):
        return self.systems * self.batch

    def weights(self):
        """The bf16 weights of every layer as MemoryX streams them (rows in order)."""
        return [np.concatenate(list(self.mx.stream(n, rows_per_chunk=64)), axis=0) for n in self.names]

    def step(self, x, labels):
        """One training step on ``N*B`` samples (``x``: samples x features, real values)."""
        x, labels = _check_batch(x, labels, self.dims)
        if x.shape[0] != self.global_batch:
            raise ValueError(f"a step takes systems*batch = {self.global_batch} samples, got {x.shape[0]}")
        w16s = self.weights()
        losses, per_system = [], []
        for n in range(self.systems):
            rows = slice(n * self.batch, (n + 1) * self.batch)
            loss, grads = system_gradients(w16s, kernels.to_bf16(x[rows].T), labels[rows], self.mesh,
                                           self.global_batch)
            losses.append(loss)
            per_system.append(grads)
        reduced = [None] * len(self.names)
        for i in range(len(self.names) - 1, -1, -1):       # last layer's gradient arrives first
            reduced[i] = tree_sum(np.stack([g[i] for g in per_system]))
            self.mx.apply_gradient(self.names[i], reduced[i])
        return StepResult(float(np.mean(losses)), tuple(losses), tuple(reduced))

    def logits(self, x):
        """fp32 logits (classes x samples) of the exact forward pass on one wafer."""
        x = np.asarray(x)
        return wafer_forward(self.weights(), kernels.to_bf16(x.T), self.mesh)[1]

    def predict(self, x):
        return np.argmax(self.logits(x), axis=0)


class Float32Trainer:
    """The same network in plain float32 numpy (single system, global batch at once), on the fp32
    master weights of its own ``memoryx``."""

    def __init__(self, dims, memoryx):
        self.dims = _check_dims(dims)
        self.names = layer_names(self.dims)
        self.mx = memoryx

    def _forward(self, x):
        ws = [self.mx.master(n) for n in self.names]
        acts = [np.asarray(x, np.float32).T]
        zs = []
        for i, w in enumerate(ws):
            z = w @ acts[-1]
            zs.append(z)
            if i < len(ws) - 1:
                acts.append(np.maximum(z, np.float32(0)))
        return ws, acts, zs

    def step(self, x, labels):
        x, labels = _check_batch(x, labels, self.dims)
        ws, acts, zs = self._forward(x)
        z = zs[-1]
        b = z.shape[1]
        e = np.exp(z - z.max(axis=0, keepdims=True))
        s = e / e.sum(axis=0, keepdims=True)
        loss = float(-np.mean(np.log(s[labels, np.arange(b)].astype(np.float64))))
        dz = s.copy()
        dz[labels, np.arange(b)] -= 1
        dz /= np.float32(b)
        for i in range(len(ws) - 1, -1, -1):
            grad = (dz @ acts[i].T).astype(np.float32)
            if i > 0:
                dz = (ws[i].T @ dz) * (zs[i - 1] > 0)
            self.mx.apply_gradient(self.names[i], grad)
        return loss

    def predict(self, x):
        return np.argmax(self._forward(x)[2][-1], axis=0)

