"""MemoryX: the weight store with near-memory optimizers (docs/memoryx.md).

Per layer it holds, in a :class:`~models.memoryx.tiers.TieredStore`, the fp32 master weights, the
optimizer state (one fp32 tensor per ``optimizer.state_names``), the fp32 gradient buffer (where
the reduced gradient lands and micro-batch gradients accumulate) and the bf16 copy that streams
to the wafers (``models.numerics.bf16_bits`` of the master, round to nearest even, refreshed by
every update). Those are exactly the bytes :func:`models.memoryx.accounting.bytes_per_parameter`
counts, and :meth:`MemoryX.stored_bytes` reports.

Protocol of one training step (what the pipeline and the system simulation do):

1. ``stream(name)`` per layer: bf16 rows of W (M x K, out x in), row 0 first.
2. ``apply_gradient(name, grad)`` per layer, in any order, at most once per layer per micro-step:
   the gradient lands in the buffer; with ``accumulation_steps = k`` the k-th micro-batch gradient
   of a layer triggers its optimizer step on ``sum / k`` (sum in arrival order, fp32 adds, then one
   fp32 division by k; nothing is divided when k = 1). The layer is updated at once, so it can
   stream out again while the next layer's gradient is still on its way.
3. A micro-step ends when every layer has received its gradient (or at ``end_step()``, which
   closes it early, e.g. for frozen layers); then each layer may receive the next one.

Every bad input raises a :class:`~models.memoryx.errors.MemoryXError` subclass naming the problem
*before* anything changes: weights, optimizer state and step bookkeeping stay as they were.
"""

import math

import numpy as np

from models.numerics import bf16_bits

from .accounting import bytes_per_parameter
from .checkpoint import read_checkpoint, restore_layers, save_checkpoint
from .errors import CheckpointError, DuplicateGradientError, GradientError, MemoryXError, UnknownLayerError
from .initializers import initialize
from .optimizers import Optimizer, optimizer_from_config
from .safetensors_io import export_safetensors, import_safetensors
from .tiers import TieredStore

__all__ = ["MemoryX"]

F32 = np.float32
DEFAULT_CHUNK_ELEMS = 1 << 15


class _Layer:
    __slots__ = ("name", "shape", "t", "micro", "version")

    def __init__(self, name, shape):
        self.name = name
        self.shape = shape
        self.t = 0          # optimizer steps applied
        self.micro = 0      # micro-batch gradients accumulated toward the next step
        self.version = 0    # bumped whenever the master (and bf16 copy) change

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))


class MemoryX:
    """The MemoryX weight store.

    Parameters
    ----------
    optimizer : Optimizer
        :class:`SGD`, :class:`Momentum`, :class:`Adam` or :class:`AdamW` (hyper-parameters only).
    dram_budget_bytes : int or None
        Byte budget of the DRAM tier (``None``: unlimited).
    flash_dir : path or None
        Directory of the flash tier (memory-mapped files). With a budget and no directory, a
        private temporary directory is used.
    accumulation_steps : int
        Micro-batch gradients summed per optimizer step (default 1).
    lr_schedule : callable or None
        ``lr_schedule(t) -> lr`` for the 1-based optimizer step ``t`` of a layer; ``None`` uses
        ``optimizer.lr``. See :mod:`models.memoryx.schedules`.
    chunk_elems : int
        Elements per chunk of the update loop (bounds temporaries; results do not depend on it).
    """

    def __init__(self, optimizer, dram_budget_bytes=None, flash_dir=None, accumulation_steps=1,
                 lr_schedule=None, chunk_elems=DEFAULT_CHUNK_ELEMS):
        if not isinstance(optimizer, Optimizer):
            raise MemoryXError(f"optimizer must be an SGD, Momentum, Adam or AdamW instance, "
                               f"got {optimizer!r}")
        if isinstance(accumulation_steps, bool) or not isinstance(accumulation_steps, (int, np.integer)) \
                or accumulation_steps < 1:
            raise MemoryXError(f"accumulation_steps must be an int >= 1, got {accumulation_steps!r}")
        if lr_schedule is not None and not callable(lr_schedule):
            raise MemoryXError(f"lr_schedule must be callable (t -> lr) or None, got {lr_schedule!r}")
        if isinstance(chunk_elems, bool) or not isinstance(chunk_elems, (int, np.integer)) or chunk_elems < 1:
            raise MemoryXError(f"chunk_elems must be an int >= 1, got {chunk_elems!r}")
        self.optimizer = optimizer
        self.accumulation_steps = int(accumulation_steps)
        self.lr_schedule = lr_schedule
        self.chunk_elems = int(chunk_elems)
        try:
            self.tiers = TieredStore(dram_budget_bytes, flash_dir)
        except ValueError as e:
            raise MemoryXError(str(e)) from None
        self._layers = {}
        self._received = set()     # layers that got a gradient in the current micro-step
        self.micro_steps = 0       # completed micro-steps (rounds of gradients)
        self.stats = {"gradients": 0, "gradient_bytes": 0, "updates": 0, "updated_params": 0,
                      "streamed_chunks": 0, "streamed_bytes": 0}

    # -- layers --------------------------------------------------------------------------------
    def _kinds(self):
        return ("master", *self.optimizer.state_names, "grad", "bf16")

    def _layer(self, name):
        try:
            return self._layers[name]
        except (KeyError, TypeError):
            known = ", ".join(map(repr, self._layers)) or "none"
            raise UnknownLayerError(f"unknown layer {name!r} (layers: {known})") from None

    def layer_names(self):
        """Layer names in the order they were added."""
        return list(self._layers)

    def shape(self, name):
        return self._layer(name).shape

    def step_count(self, name):
        """Optimizer steps applied to layer ``name``."""
        return self._layer(name).t

    def add_layer(self, name, shape, init="normal", seed=0):
        """Add a layer of ``shape`` (1-D or 2-D; W is M x K, out x in).

        ``init`` is a float ndarray of that shape (converted to fp32 with RNE; must be finite) or an
        initializer name from :mod:`models.memoryx.initializers` used with ``seed``.
        """
        if not isinstance(name, str) or not name:
            raise MemoryXError(f"layer name must be a non-empty str, got {name!r}")
        if name in self._layers:
            raise MemoryXError(f"layer {name!r} already exists")
        try:
            shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        except (TypeError, ValueError):
            raise MemoryXError(f"layer {name!r}: shape must be a tuple of ints, got {shape!r}") from None
        if len(shape) not in (1, 2) or any(s < 1 for s in shape):
            raise MemoryXError(f"layer {name!r}: shape must have 1 or 2 positive dimensions, got {shape}")
        if isinstance(init, str):
            try:
                w = initialize(init, shape, seed)
            except ValueError as e:
                raise MemoryXError(f"layer {name!r}: {e}") from None
        else:
            if not isinstance(init, np.ndarray) or init.dtype.kind != "f":
                raise MemoryXError(f"layer {name!r}: init must be a float ndarray or an initializer name, "
                                   f"got {type(init).__name__}"
                                   + (f" of dtype {init.dtype}" if isinstance(init, np.ndarray) else ""))
            if init.shape != shape:
                raise MemoryXError(f"layer {name!r}: init has shape {init.shape}, expected {shape}")
            with np.errstate(over="ignore"):
                w = init.astype(F32)
            if not np.isfinite(w).all():
                raise MemoryXError(f"layer {name!r}: init has NaN or Inf elements (in fp32)")
        layer = _Layer(name, shape)
        self.tiers.put((name, "master"), w)
        for s, arr in self.optimizer.init_state(shape).items():
            self.tiers.put((name, s), arr)
        self.tiers.put((name, "grad"), np.zeros(shape, F32))
        self.tiers.put((name, "bf16"), bf16_bits(w))
        self._layers[name] = layer
        return name

    # -- reading -------------------------------------------------------------------------------
    def master(self, name):
        """A copy of the fp32 master weights of ``name``."""
        self._layer(name)
        return self.tiers.read((name, "master"))

    def bf16(self, name):
        """The bf16 copy (``uint16`` bit patterns, RNE of the master) of the whole layer."""
        self._layer(name)
        return self.tiers.read((name, "bf16"))

    def state(self, name):
        """Copies of the optimizer state tensors of ``name`` (dict by state name)."""
        self._layer(name)
        return {s: self.tiers.read((name, s)) for s in self.optimizer.state_names}

    def stream(self, name, rows_per_chunk=1):
        """Yield the bf16 copy of ``name`` as ``uint16`` chunks of ``rows_per_chunk`` rows of W
        (M x K; a 1-D layer is one row), row 0 first: the order the wafer consumes it. Each chunk is
        a copy. Raises :class:`MemoryXError` if the layer is updated while the stream is open."""
        layer = self._layer(name)
        if isinstance(rows_per_chunk, bool) or not isinstance(rows_per_chunk, (int, np.integer)) \
                or rows_per_chunk < 1:
            raise MemoryXError(f"rows_per_chunk must be an int >= 1, got {rows_per_chunk!r}")
        return self._stream(layer, int(rows_per_chunk))

    def _stream(self, layer, rows):
        key = (layer.name, "bf16")
        version = layer.version
        m = layer.shape[0] if len(layer.shape) == 2 else 1
        for r in range(0, m, rows):
            if layer.version != version:
                raise MemoryXError(f"layer {layer.name!r} was updated while it was streaming")
            chunk = self.tiers.read_rows(key, r, r + rows)
            self.stats["streamed_chunks"] += 1
            self.stats["streamed_bytes"] += chunk.nbytes
            yield chunk

    # -- gradients -----------------------------------------------------------------------------
    def _check_gradient(self, name, grad):
        layer = self._layer(name)
        if not isinstance(grad, np.ndarray):
            raise GradientError(f"gradient for layer {name!r} must be a numpy ndarray, "
                                f"got {type(grad).__name__}")
        if grad.dtype != F32:
            raise GradientError(f"gradient for layer {name!r} has dtype {grad.dtype}, expected float32")
        if grad.shape != layer.shape:
            raise GradientError(f"gradient for layer {name!r} has shape {grad.shape}, expected {layer.shape}")
        if name in self._received:
            raise DuplicateGradientError(
                f"second gradient for layer {name!r} in micro-step {self.micro_steps} "
                f"(each layer takes one gradient per micro-step; call end_step() to close a step early)")
        flat = grad.reshape(-1)
        c = self.chunk_elems * 8
        for s in range(0, flat.size, c):          # chunked: no layer-sized temporary
            if not np.isfinite(flat[s:s + c]).all():
                finite = np.isfinite(grad)
                bad = np.argwhere(~finite)
                raise GradientError(f"gradient for layer {name!r} has {len(bad)} NaN/Inf element(s), "
                                    f"first at "
                                    f"index {tuple(int(i) for i in bad[0])}")
        return layer

    def _lr(self, t):
        if self.lr_schedule is None:
            return float(self.optimizer.lr)
        lr = self.lr_schedule(t)
        if isinstance(lr, bool) or not isinstance(lr, (int, float, np.floating)) or not math.isfinite(lr) \
                or lr < 0:
            raise MemoryXError(f"lr_schedule({t}) returned {lr!r}; expected a finite float >= 0")
        return float(lr)

    def apply_gradient(self, name, grad):
        """Take the reduced fp32 gradient of layer ``name`` (shape of the layer, float32, finite).

        Returns True when this gradient triggered an optimizer step of the layer (always with
        ``accumulation_steps == 1``), False when it was only accumulated.
        """
        layer = self._check_gradient(name, grad)
        k = self.accumulation_steps
        completes = layer.micro + 1 == k
        lr = self._lr(layer.t + 1) if completes else None
        gkey = (name, "grad")
        if k == 1:
            pass                                  # lands in the buffer chunk by chunk in _update
        elif layer.micro > 0:
            gbuf = self.tiers.acquire(gkey)
            try:
                with np.errstate(over="ignore"):
                    total = np.add(gbuf, grad, dtype=F32)
                if not np.isfinite(total).all():
                    raise GradientError(f"accumulated gradient for layer {name!r} overflows fp32 "
                                        f"(micro-batch {layer.micro + 1} of {k})")
                gbuf[...] = total
            finally:
                self.tiers.release(gkey, dirty=True)
        else:
            self.tiers.write(gkey, grad)
        layer.micro += 1
        self.stats["gradients"] += 1
        self.stats["gradient_bytes"] += grad.nbytes
        if completes:
            self._update(layer, lr, incoming=grad if k == 1 else None)
            layer.micro = 0
        self._received.add(name)
        if len(self._received) == len(self._layers):
            self.end_step()
        return completes

    def end_step(self):
        """Close the current micro-step: every layer may take its next gradient."""
        self._received.clear()
        self.micro_steps += 1

    def _update(self, layer, lr, incoming=None):
        """One optimizer step of ``layer``; ``incoming`` (k == 1) is copied into the gradient buffer
        chunk by chunk as the update goes (the same bytes land there as with a separate copy)."""
        name = layer.name
        kinds = self._kinds()
        arrays = {}
        try:
            for kind in kinds:
                arrays[kind] = self.tiers.acquire((name, kind)).reshape(-1)
            t = layer.t + 1
            k = self.accumulation_steps
            p, g, b = arrays["master"], arrays["grad"], arrays["bf16"]
            src = None if incoming is None else incoming.reshape(-1)
            states = {s: arrays[s] for s in self.optimizer.state_names}
            n = p.size
            c = self.chunk_elems
            with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
                for s in range(0, n, c):
                    e = min(n, s + c)
                    if src is not None:
                        g[s:e] = src[s:e]
                    gs = g[s:e] if k == 1 else g[s:e] / F32(k)
                    self.optimizer.step(p[s:e], gs, {n_: a[s:e] for n_, a in states.items()}, t, lr)
                    b[s:e] = bf16_bits(p[s:e])
        finally:
            for kind in arrays:
                self.tiers.release((name, kind), dirty=kind != "grad" or incoming is not None)
        layer.t = t
        layer.version += 1
        self.stats["updates"] += 1
        self.stats["updated_params"] += layer.size

    # -- accounting ----------------------------------------------------------------------------
    def num_parameters(self):
        return sum(l.size for l in self._layers.values())

    def bytes_per_parameter(self):
        """Bytes per parameter of this store's optimizer, by component (see accounting)."""
        return bytes_per_parameter(self.optimizer)

    def stored_bytes(self):
        """Bytes held for all layers across the tiers (= parameters x bytes per parameter)."""
        return self.tiers.total_bytes()

    def counters(self):
        """Counters: per tier (hits, misses, bytes moved) and of the store (gradients, updates, streams)."""
        return {**self.tiers.counters(), "store": dict(self.stats, micro_steps=self.micro_steps)}

    def flush(self):
        """Write dirty DRAM-cached tensors back to the flash tier."""
        self.tiers.flush()

    def close(self):
        self.tiers.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- durability and interchange ------------------------------------------------------------
    def save_checkpoint(self, path):
        """Crash-safe checkpoint to ``path`` (new file, fsync, atomic rename, SHA-256)."""
        return save_checkpoint(self, path)

    @classmethod
    def load_checkpoint(cls, path, **kwargs):
        """A store restored from ``path`` (checksum verified); ``kwargs``: dram_budget_bytes,
        flash_dir, lr_schedule, chunk_elems (run-time settings the checkpoint does not hold)."""
        header, tensors = read_checkpoint(path)
        try:
            opt = optimizer_from_config(header["optimizer"])
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"checkpoint {path}: bad optimizer configuration ({e})") from None
        mx = cls(optimizer=opt, accumulation_steps=header["accumulation_steps"], **kwargs)
        return restore_layers(mx, header, tensors, path)

    def export_safetensors(self, path, dtype="float32", include_state=False):
        """Write the weights (``float32`` masters or ``bfloat16`` copies) to a safetensors file."""
        return export_safetensors(self, path, dtype=dtype, include_state=include_state)

    def import_safetensors(self, path, strict=True, create_missing=False):
        """Load weights (and optimizer state) from a safetensors file; all-or-nothing."""
        return import_safetensors(self, path, strict=strict, create_missing=create_missing)

    # -- snapshot (used by tests and checkpoints) ----------------------------------------------
    def snapshot(self):
        """Everything that defines the store's training state, as plain copies (for comparisons)."""
        return {
            "optimizer": self.optimizer.config(),
            "accumulation_steps": self.accumulation_steps,
            "micro_steps": self.micro_steps,
            "received": sorted(self._received),
            "layers": {n: {"shape": l.shape, "t": l.t, "micro": l.micro,
                           **{k: self.tiers.read((n, k)) for k in self._kinds()}}
                       for n, l in self._layers.items()},
        }
