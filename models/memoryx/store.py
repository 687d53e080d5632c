"""MemoryX: the weight store with near-memory optimizers (docs/memoryx.md).

Per layer it holds, in a :class:`~models.memoryx.tiers.TieredStore`, the fp32 master weights, the
optimizer state (one fp32 tensor per ``optimizer.state_names``), the fp32 gradient buffer (where
micro-batch gradients accumulate) and the bf16 copy that streams to the wafers
(``models.numerics.bf16_bits`` of the master, round to nearest even, refreshed by every update).
Those are exactly the bytes :func:`models.memoryx.accounting.bytes_per_parameter` counts, and
:meth:`MemoryX.stored_bytes` reports.

Protocol of one training step (what the pipeline and the system simulation do):

1. ``stream(name)`` per layer: bf16 rows of W (M x K, out x in), row 0 first.
2. ``apply_gradient(name, grad)`` per layer, in any order, at most once per layer per micro-step.
   With ``accumulation_steps = k`` the first k - 1 micro-batch gradients of a layer are summed into
   its buffer (arrival order, fp32 adds) and the k-th triggers the optimizer step on
   ``(buffer + grad) / k`` (one fp32 division; nothing is divided when k = 1, and then the gradient
   goes straight from the caller's array into the fused kernel: the buffer is not written, its
   content after a completed step is unspecified). The layer is updated at once, so it can stream
   out again while the next layer's gradient is still on its way.
3. A micro-step ends when every layer has received its gradient (or at ``end_step()``, which
   closes it early, e.g. for frozen layers); then each layer may receive the next one.

The update is one fused pass per layer (:mod:`models.memoryx.kernels`): weights, state and gradient
are read once, weights, state and the bf16 copy written once, bit-identical to the documented
formulas (:mod:`models.memoryx.optimizers`).

Non-finite results: a step whose result (weights or optimizer state) would have a NaN or Inf element
although the gradient is finite (an overflow: a huge learning rate or gradient) raises
:class:`~models.memoryx.errors.NonFiniteUpdateError` and changes nothing (``on_nonfinite="raise"``,
the default). With ``on_nonfinite="apply"`` it is applied and the layer is flagged
(:meth:`MemoryX.nonfinite_layers`, the ``nonfinite_updates`` counter, one
:class:`NonFiniteUpdateWarning` per layer), e.g. to inspect a diverged run. The check costs no extra
pass over the layer in the common case: the store keeps upper bounds of each layer's ``|weights|`` and
``|state|`` (exact after add_layer and after any exactly checked step, propagated otherwise) and
:meth:`models.memoryx.optimizers.Optimizer.bound` proves the step finite from them and the gradient's
largest magnitude (found by the gradient check, which reads only the gradient). Only when it cannot
(values near the float32 range, bounds unknown after an import or a restore) does the exact check run
first: the same arithmetic, reading everything, writing nothing.

Files: the store locks its flash directory until :meth:`MemoryX.close` (or garbage collection, or the
death of its process); a second store on it, in this process or another, is refused with
:class:`~models.memoryx.errors.DirectoryLockedError` naming the holder (:mod:`models.memoryx.lock`).
Checkpoint save and restore and safetensors export and import are all-or-nothing, also when a write or
fsync fails with EIO or ENOSPC (:mod:`models.memoryx.atomic`, :mod:`models.memoryx.staging`).

Every bad input raises a :class:`~models.memoryx.errors.MemoryXError` subclass naming the layer, the
path or the field *before* anything changes: weights, optimizer state, gradient buffers and step
bookkeeping stay as they were. Settings (``optimizer``, ``accumulation_steps``, ``lr_schedule``,
``chunk_elems``, ``on_nonfinite``) and the optimizer's hyper-parameters are validated whenever they are
set.
"""

import math
import warnings

import numpy as np

from . import kernels
from .accounting import bytes_per_parameter
from .checkpoint import load_checkpoint, save_checkpoint
from .errors import (
    ConfigError,
    DuplicateGradientError,
    GradientError,
    MemoryXError,
    NonFiniteUpdateError,
    UnknownLayerError,
)
from .initializers import initialize
from .optimizers import Optimizer
from .safetensors_io import export_safetensors, import_safetensors
from .tiers import TieredStore

__all__ = ["MemoryX", "NonFiniteUpdateWarning"]

F32 = np.float32
DEFAULT_CHUNK_ELEMS = 1 << 15
INF_BITS = kernels.INF_BITS
ON_NONFINITE = ("raise", "apply")


class NonFiniteUpdateWarning(RuntimeWarning):
    """A layer received non-finite weights or state under ``on_nonfinite="apply"``."""


def _bits_value(bits):
    """The float value of a float32 bit pattern (a magnitude: sign bit clear)."""
    return float(np.uint32(bits).view(np.float32))


def _int_setting(name, value, low):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


class _Layer:
    __slots__ = ("name", "shape", "t", "micro", "version", "bounds", "gbuf_max", "nonfinite")

    def __init__(self, name, shape):
        self.name = name
        self.shape = shape
        self.t = 0            # optimizer steps applied
        self.micro = 0        # micro-batch gradients accumulated toward the next step
        self.version = 0      # bumped whenever the master (and bf16 copy) change
        self.bounds = None    # upper bounds {"master": |p|, <state>: |s|} (None: unknown)
        self.gbuf_max = None  # upper bound of |gradient buffer| while micro > 0 (None: unknown)
        self.nonfinite = None  # first step that left non-finite values (on_nonfinite="apply")

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
        private temporary directory is used. The store locks the directory until :meth:`close`: a
        second store on it is refused (:class:`~models.memoryx.errors.DirectoryLockedError`).
    accumulation_steps : int
        Micro-batch gradients summed per optimizer step (default 1).
    lr_schedule : callable or None
        ``lr_schedule(t) -> lr`` for the 1-based optimizer step ``t`` of a layer; ``None`` uses
        ``optimizer.lr``. See :mod:`models.memoryx.schedules`.
    chunk_elems : int
        Elements per chunk of streamed I/O (checkpoints, safetensors, restore, initial values): peak
        memory of those is the DRAM budget plus a few chunks. Results do not depend on it.
    on_nonfinite : "raise" or "apply"
        What a step whose result would be non-finite does (see the module docstring).
    """

    def __init__(self, optimizer, dram_budget_bytes=None, flash_dir=None, accumulation_steps=1,
                 lr_schedule=None, chunk_elems=DEFAULT_CHUNK_ELEMS, on_nonfinite="raise"):
        self._layers = {}
        self._received = set()     # layers that got a gradient in the current micro-step
        self._optimizer = None
        self.optimizer = optimizer
        self.accumulation_steps = accumulation_steps
        self.lr_schedule = lr_schedule
        self.chunk_elems = chunk_elems
        self.on_nonfinite = on_nonfinite
        self.tiers = TieredStore(dram_budget_bytes, flash_dir)
        self.micro_steps = 0       # completed micro-steps (rounds of gradients)
        self.stats = {"gradients": 0, "gradient_bytes": 0, "updates": 0, "updated_params": 0,
                      "streamed_chunks": 0, "streamed_bytes": 0, "checked_updates": 0, "nonfinite_updates": 0}

    # -- settings (validated whenever set) -----------------------------------------------------
    @property
    def optimizer(self):
        """The optimizer (hyper-parameters). May be replaced by one with the same state tensors."""
        return self._optimizer

    @optimizer.setter
    def optimizer(self, opt):
        if not isinstance(opt, Optimizer):
            raise ConfigError(f"optimizer must be an SGD, Momentum, Adam or AdamW instance, got {opt!r}")
        if self._optimizer is not None and self._layers and opt.state_names != self._optimizer.state_names:
            raise ConfigError(f"optimizer: a {opt.kind} optimizer keeps state {list(opt.state_names)}, the "
                              f"store holds {list(self._optimizer.state_names)}")
        self._optimizer = opt

    @property
    def accumulation_steps(self):
        return self._accumulation_steps

    @accumulation_steps.setter
    def accumulation_steps(self, k):
        k = _int_setting("accumulation_steps", k, 1)
        pending = [l.name for l in self._layers.values() if l.micro]
        if pending:
            raise ConfigError(f"accumulation_steps cannot change while layers {pending} hold pending "
                              f"micro-batch gradients")
        self._accumulation_steps = k

    @property
    def lr_schedule(self):
        return self._lr_schedule

    @lr_schedule.setter
    def lr_schedule(self, schedule):
        if schedule is not None and not callable(schedule):
            raise ConfigError(f"lr_schedule must be callable (t -> lr) or None, got {schedule!r}")
        self._lr_schedule = schedule

    @property
    def chunk_elems(self):
        return self._chunk_elems

    @chunk_elems.setter
    def chunk_elems(self, n):
        self._chunk_elems = _int_setting("chunk_elems", n, 1)

    @property
    def on_nonfinite(self):
        return self._on_nonfinite

    @on_nonfinite.setter
    def on_nonfinite(self, mode):
        if mode not in ON_NONFINITE:
            raise ConfigError(f"on_nonfinite must be one of {ON_NONFINITE}, got {mode!r}")
        self._on_nonfinite = mode

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

    def nonfinite_layers(self):
        """``{layer: first step that left NaN/Inf values}`` (only under ``on_nonfinite="apply"``)."""
        return {n: l.nonfinite for n, l in self._layers.items() if l.nonfinite is not None}

    def _check_new_layer(self, name, shape):
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
        return shape

    def _create_layer(self, name, shape):
        """Register ``name`` with zero tensors (no array of the layer's size is allocated on flash)."""
        made = []
        try:
            for kind in self._kinds():
                self.tiers.create((name, kind), shape, np.uint16 if kind == "bf16" else F32)
                made.append(kind)
        except BaseException:
            for kind in made:
                self.tiers.delete((name, kind))
            raise
        return self._register_layer(name, shape)

    def _register_layer(self, name, shape):
        """Add the bookkeeping of layer ``name`` whose tensors the tiers already hold (memory only)."""
        layer = _Layer(name, shape)
        self._layers[name] = layer
        return layer

    def _write_master(self, name, source):
        """Write fp32 ``source`` (flat, any length-matching array) to the master and bf16 copy of
        ``name``, chunk by chunk; returns the largest magnitude written."""
        c = self.chunk_elems
        out16 = np.empty(min(c, source.size), np.uint16)
        top = 0
        for s in range(0, source.size, c):
            chunk = np.ascontiguousarray(source[s:s + c], dtype=F32)
            self.tiers.write_range((name, "master"), s, chunk)
            kernels.bf16_into(chunk, out16[:chunk.size])
            self.tiers.write_range((name, "bf16"), s, out16[:chunk.size])
            top = max(top, int(kernels.absmax_bits(chunk)[0]))
        for kind in ("master", "bf16"):
            self.tiers.sync((name, kind))
        return _bits_value(top)

    def add_layer(self, name, shape, init="normal", seed=0):
        """Add a layer of ``shape`` (1-D or 2-D; W is M x K, out x in).

        ``init`` is a float ndarray of that shape (converted to fp32 with RNE; must be finite) or an
        initializer name from :mod:`models.memoryx.initializers` used with ``seed``.
        """
        shape = self._check_new_layer(name, shape)
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
            w = init
        flat = w.reshape(-1)
        c = self.chunk_elems
        with np.errstate(over="ignore"):
            for s in range(0, flat.size, c):           # validated first, in chunks (fp32 conversion)
                if int(kernels.absmax_bits(np.ascontiguousarray(flat[s:s + c], dtype=F32))[0]) >= INF_BITS:
                    raise MemoryXError(f"layer {name!r}: init has NaN or Inf elements (in fp32)")
            layer = self._create_layer(name, shape)
            try:
                top = self._write_master(name, flat)
            except BaseException:
                self._drop_layer(name)
                raise
        layer.bounds = {"master": top, **{s: 0.0 for s in self.optimizer.state_names}}
        return name

    def _drop_layer(self, name):
        self._layers.pop(name, None)
        for kind in self._kinds():
            if (name, kind) in self.tiers:
                self.tiers.delete((name, kind))

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
        """``(layer, flat gradient, largest |element|)``, or a GradientError naming the problem."""
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
        flat = np.ascontiguousarray(grad).view(np.ndarray).reshape(-1)
        top = int(kernels.absmax_bits(flat)[0])
        if top >= INF_BITS:
            bad = np.argwhere(~np.isfinite(grad))
            raise GradientError(f"gradient for layer {name!r} has {len(bad)} NaN/Inf element(s), first at "
                                f"index {tuple(int(i) for i in bad[0])}")
        return layer, flat, _bits_value(top)

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
        ``accumulation_steps == 1``), False when it was only accumulated. Raises (changing nothing)
        :class:`GradientError` for a bad gradient (or an accumulated sum that overflows fp32) and
        :class:`NonFiniteUpdateError` for a step whose result would be non-finite.
        """
        layer, flat, g_max = self._check_gradient(name, grad)
        completes = layer.micro + 1 == self.accumulation_steps
        if completes:
            self._update(layer, self._lr(layer.t + 1), flat, g_max)
        else:
            self._accumulate(layer, flat, g_max)
        self.stats["gradients"] += 1
        self.stats["gradient_bytes"] += grad.nbytes
        self._received.add(name)
        if len(self._received) == len(self._layers):
            self.end_step()
        return completes

    def end_step(self):
        """Close the current micro-step: every layer may take its next gradient."""
        self._received.clear()
        self.micro_steps += 1

    def _gbuf_max(self, layer, gbuf):
        if layer.gbuf_max is None:
            layer.gbuf_max = _bits_value(kernels.absmax_bits(gbuf)[0])
        return layer.gbuf_max

    def _sum_overflows(self, layer, gbuf, flat, g_max):
        """Would ``gbuf + grad`` overflow fp32? (bound first, exact check only when it cannot tell)"""
        bound = (self._gbuf_max(layer, gbuf) + g_max) * (1 + 2.0 ** -22)
        if bound <= float(np.finfo(F32).max) / 4:
            return False, bound
        top = int(kernels.add_absmax(gbuf, flat))
        return top >= INF_BITS, _bits_value(top)

    def _accumulate(self, layer, flat, g_max):
        key = (layer.name, "grad")
        gbuf = self.tiers.acquire(key).view(np.ndarray).reshape(-1)
        dirty = False
        try:
            if layer.micro == 0:
                gbuf[...] = flat
                layer.gbuf_max = g_max
            else:
                overflow, bound = self._sum_overflows(layer, gbuf, flat, g_max)
                if overflow:
                    raise GradientError(f"accumulated gradient for layer {layer.name!r} overflows fp32 "
                                        f"(micro-batch {layer.micro + 1} of {self.accumulation_steps})")
                kernels.add_into(gbuf, flat)
                layer.gbuf_max = bound
            dirty = True
        finally:
            self.tiers.release(key, dirty=dirty)
        layer.micro += 1

    def _update(self, layer, lr, flat, g_max):
        """One optimizer step of ``layer`` (fused kernel), refused before any change when its result
        would be non-finite (unless ``on_nonfinite == "apply"``)."""
        name, opt, k = layer.name, self.optimizer, self.accumulation_steps
        kinds = ("master", *opt.state_names, "bf16") + (("grad",) if k > 1 else ())
        arrays, dirty, t = {}, False, layer.t + 1
        try:
            for kind in kinds:
                arrays[kind] = self.tiers.acquire((name, kind)).view(np.ndarray).reshape(-1)
            p, out16 = arrays["master"], arrays["bf16"]
            states = [arrays[s] for s in opt.state_names]
            if k > 1:
                gbuf = arrays["grad"]
                overflow, g_bound = self._sum_overflows(layer, gbuf, flat, g_max)
                if overflow:
                    raise GradientError(f"accumulated gradient for layer {name!r} overflows fp32 "
                                        f"(micro-batch {k} of {k})")
                a, b, g_bound = gbuf, flat, g_bound / k * (1 + 2.0 ** -22)
            else:
                a = b = flat
                g_bound = g_max
            bounds = opt.bound(layer.bounds, g_bound, t, lr) if layer.bounds is not None else None
            nonfinite, checked = False, bounds is None
            if checked:                                        # exact check: same arithmetic, no writes
                _, pm, s1, s2, neg = opt.dry(p, states, a, b, k, t, lr)
                tops = (pm, s1, s2)[:1 + len(opt.state_names)]
                bad = [n for n, top in zip(("master", *opt.state_names), tops) if top >= INF_BITS]
                if bad:
                    if self.on_nonfinite == "raise":
                        raise NonFiniteUpdateError(
                            f"optimizer step {t} of layer {name!r} ({opt.kind}, lr={lr!r}) would make "
                            f"{' and '.join(bad)} non-finite (overflow); nothing was changed. Lower the "
                            f"learning rate or scale the gradient, or use MemoryX(on_nonfinite='apply') to "
                            f"apply such steps and flag the layer")
                    nonfinite = True
                elif not neg:
                    bounds = {n: _bits_value(top) for n, top in zip(("master", *opt.state_names), tops)}
            with np.errstate(all="ignore"):
                opt.commit(p, states, a, b, k, out16, t, lr)
            dirty = True
        finally:
            for kind in arrays:
                self.tiers.release((name, kind), dirty=dirty and kind != "grad")
        layer.bounds = bounds
        layer.gbuf_max = None
        layer.t = t
        layer.micro = 0
        layer.version += 1
        self.stats["updates"] += 1
        self.stats["updated_params"] += layer.size
        self.stats["checked_updates"] += checked
        if nonfinite:
            self.stats["nonfinite_updates"] += 1
            if layer.nonfinite is None:
                layer.nonfinite = t
                warnings.warn(f"MemoryX layer {name!r}: optimizer step {t} left NaN/Inf weights or state "
                              f"(on_nonfinite='apply')", NonFiniteUpdateWarning, stacklevel=3)

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

    @property
    def closed(self):
        return self.tiers.closed

    def close(self):
        """Release the store: drop its caches and memory maps and the lock on its flash directory
        (which another store may then take). Idempotent; also done by ``with MemoryX(...) as mx:``,
        when the store is garbage collected and when its process dies. A closed store cannot be used."""
        self.tiers.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- durability and interchange ------------------------------------------------------------
    def save_checkpoint(self, path):
        """Crash-safe checkpoint to ``path`` (new file, fsync, atomic rename, SHA-256), streamed chunk by
        chunk; an I/O error leaves the previous file at ``path`` (see :mod:`models.memoryx.checkpoint`)."""
        return save_checkpoint(self, path)

    @classmethod
    def load_checkpoint(cls, path, **kwargs):
        """A store restored from ``path`` (checksum verified), streamed chunk by chunk; ``kwargs``:
        dram_budget_bytes, flash_dir, lr_schedule, chunk_elems, on_nonfinite (run-time settings the
        checkpoint does not hold)."""
        return load_checkpoint(cls, path, **kwargs)

    def export_safetensors(self, path, dtype="float32", include_state=False):
        """Write the weights (``float32`` masters or ``bfloat16`` copies) to a safetensors file."""
        return export_safetensors(self, path, dtype=dtype, include_state=include_state)

    def import_safetensors(self, path, strict=True, create_missing=False):
        """Load weights (and optimizer state) from a safetensors file; all-or-nothing, also under I/O
        errors (see :mod:`models.memoryx.safetensors_io`)."""
        return import_safetensors(self, path, strict=strict, create_missing=create_missing)

    # -- snapshot (used by tests and checkpoints) ----------------------------------------------
    def snapshot(self):
        """Everything that defines the store's training state, as plain copies (for comparisons)."""
        return {
            "optimizer": self.optimizer.config(),
            "accumulation_steps": self.accumulation_steps,
            "micro_steps": self.micro_steps,
            "received": sorted(self._received),
            "layers": {n: {"shape": l.shape, "t": l.t, "micro": l.micro, "nonfinite": l.nonfinite,
                           **{k: self.tiers.read((n, k)) for k in self._kinds()}}
                       for n, l in self._layers.items()},
        }
