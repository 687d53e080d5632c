"""Import and export of MemoryX weights in the ``safetensors`` format (what the usual tools read),
streamed chunk by chunk.

Format (as the ``safetensors`` library writes it): u64 little-endian header length, a JSON header
(``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}``, padded with
spaces to a multiple of 8 bytes), then the tensor bytes, contiguous, in header order.

Export: one tensor per layer, named after the layer: the fp32 master (``F32``) or the bf16 copy
(``BF16``, the exact bits MemoryX streams); with ``include_state`` also ``<layer>.<state>`` for each
optimizer state tensor (``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``) in F32. The metadata
records the format and the optimizer configuration. Written atomically (temporary file, fsync,
rename), like checkpoints, and chunk by chunk from the tiers: the peak heap is the DRAM budget plus a
bounded number of chunks.

Import: tensors named after layers (F32, F16, BF16 or F64, converted to fp32 with round to
nearest even) replace the masters; ``<layer>.<state>`` tensors replace optimizer state. All-or-nothing:
names, shapes, dtypes and offsets are validated first; then one streamed pass checks every value
(NaN/Inf) and stages it, with the bf16 copies, beside the live tensors (new flash tier files, fsync-ed;
new arrays without a flash tier), and only when every tensor is staged does the store switch to them
(:mod:`models.memoryx.staging`). Any error (a bad value, an I/O error such as EIO or ENOSPC while
writing or syncing a staged file, an error reading the source) leaves the store as it was: weights,
optimizer state, step counters, the files of its flash directory. Peak heap: a few chunks (without a
flash tier the imported tensors are staged in DRAM); flash space: the imported tensors twice until
the switch.

Errors: :class:`~models.memoryx.errors.SafetensorsError` naming the path and the tensor,
:class:`~models.memoryx.errors.StorageError` when a file cannot be written, naming it and the cause.
"""

import json
import os
from pathlib import Path

import numpy as np

from models.numerics import bf16_to_fp32

from . import fsio, kernels
from .atomic import atomic_write
from .errors import MemoryXError, SafetensorsError

__all__ = ["export_safetensors", "import_safetensors", "read_safetensors"]

# file dtype -> (numpy dtype of the stored elements, bytes per element)
_READ_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"), "BF16": np.dtype("<u2")}
_MAX_HEADER = 100 << 20


def export_safetensors(mx, path, dtype="float32", include_state=False):
    """Write the layers of ``mx`` to ``path``; ``dtype`` is ``"float32"`` (masters) or ``"bfloat16"``."""
    if dtype not in ("float32", "bfloat16"):
        raise SafetensorsError(f"export dtype must be 'float32' or 'bfloat16', got {dtype!r}")
    entries = []      # (tensor name, store key, file dtype, shape, bytes)
    names = set(mx.layer_names())
    for name in mx.layer_names():
        shape, size = list(mx.shape(name)), mx._layers[name].size
        if dtype == "float32":
            entries.append((name, (name, "master"), "F32", shape, size * 4))
        else:
            entries.append((name, (name, "bf16"), "BF16", shape, size * 2))
        if include_state:
            for s in mx.optimizer.state_names:
                key = f"{name}.{s}"
                if key in names:
                    raise SafetensorsError(f"cannot export to {path}: state tensor name {key!r} collides with a "
                                           f"layer name")
                names.add(key)
                entries.append((key, (name, s), "F32", shape, size * 4))
    header, offset = {}, 0
    for name, _, st_dtype, shape, nbytes in entries:
        header[name] = {"dtype": st_dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header["__metadata__"] = {"format": "weightstream.memoryx", "optimizer": json.dumps(mx.optimizer.config()),
                              "dtype": dtype}
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-(8 + len(hjson)) % 8)

    def write(f):
        f.write(len(hjson).to_bytes(8, "little"))
        f.write(hjson)
        for _, key, *_ in entries:
            for chunk in mx.tiers.iter_chunks(key, mx.chunk_elems):
                f.write(chunk)

    atomic_write(path, write)
    return Path(path)


class _File:
    """An open safetensors file: validated header, and chunked fp32 reads of its tensors."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            self.f = open(self.path, "rb")
        except OSError as e:
            raise SafetensorsError(f"cannot read safetensors file {self.path}: {e.strerror or e}") from None
        try:
            self._parse()
        except BaseException:
            self.f.close()
            raise

    def _bad(self, why):
        return SafetensorsError(f"{self.path} is not a valid safetensors file: {why}")

    def _parse(self):
        size = os.fstat(self.f.fileno()).st_size
        head = self.f.read(8)
        if len(head) < 8:
            raise self._bad("shorter than 8 bytes")
        n = int.from_bytes(head, "little")
        if n > min(size - 8, _MAX_HEADER):
            raise self._bad(f"header length {n} exceeds the file")
        try:
            header = json.loads(self.f.read(n))
        except ValueError as e:
            raise self._bad(f"header is not JSON ({e})") from None
        if not isinstance(header, dict):
            raise self._bad("header is not a JSON object")
        meta = header.pop("__metadata__", {}) or {}
        if not isinstance(meta, dict):
            raise self._bad("__metadata__ is not an object")
        self.meta, self.base, data = meta, 8 + n, size - 8 - n
        self.entries = {}
        for name, v in header.items():
            try:
                st_dtype, shape, (begin, end) = v["dtype"], tuple(v["shape"]), v["data_offsets"]
                ok = all(isinstance(s, int) and s >= 0 for s in shape) and isinstance(begin, int) \
                    and isinstance(end, int) and 0 <= begin <= end <= data
            except (KeyError, TypeError, ValueError):
                ok = False
            if not ok:
                raise self._bad(f"bad entry for tensor {name!r}: {v!r}")
            dt = _READ_DTYPES.get(st_dtype)
            if dt is None:
                raise SafetensorsError(f"{self.path}: tensor {name!r} has dtype {st_dtype}; supported: "
                                       f"{', '.join(_READ_DTYPES)}")
            if end - begin != int(np.prod(shape, dtype=np.int64)) * dt.itemsize:
                raise self._bad(f"tensor {name!r}: {end - begin} bytes for shape {list(shape)} of {st_dtype}")
            self.entries[name] = (st_dtype, shape, begin)

    def chunks(self, name, chunk_elems):
        """Yield ``(start, fp32 chunk)`` of tensor ``name`` (the chunk buffer is reused)."""
        st_dtype, shape, begin = self.entries[name]
        dt = _READ_DTYPES[st_dtype]
        count = int(np.prod(shape, dtype=np.int64))
        raw = np.empty(min(chunk_elems, max(count, 1)) * dt.itemsize, np.uint8)
        out = np.empty(min(chunk_elems, max(count, 1)), np.float32)
        self.f.seek(self.base + begin)
        for s in range(0, count, chunk_elems):
            n = min(chunk_elems, count - s)
            try:
                got = self.f.readinto(memoryview(raw)[:n * dt.itemsize])
            except OSError as e:
                raise fsio.storage_error(f"cannot read safetensors file {self.path} (tensor {name!r}): "
                                         f"{e.strerror or e}", e) from e
            if got != n * dt.itemsize:
                raise SafetensorsError(f"{self.path}: tensor {name!r} is truncated")
            src = raw[:n * dt.itemsize].view(dt)
            dst = out[:n]
            if st_dtype == "BF16":
                u = dst.view(np.uint32)
                u[...] = src
                u <<= 16
            else:
                with np.errstate(over="ignore"):
                    np.copyto(dst, src, casting="same_kind")
            yield s, dst

    def close(self):
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_safetensors(path):
    """``(metadata, {name: ndarray})`` of a safetensors file, loaded into memory; BF16 comes back as fp32
    (exact). For large files use :func:`import_safetensors`, which streams."""
    with _File(path) as sf:
        out = {}
        for name, (st_dtype, shape, begin) in sf.entries.items():
            sf.f.seek(sf.base + begin)
            dt = _READ_DTYPES[st_dtype]
            count = int(np.prod(shape, dtype=np.int64))
            arr = np.frombuffer(sf.f.read(count * dt.itemsize), dtype=dt).reshape(shape)
            out[name] = bf16_to_fp32(arr) if st_dtype == "BF16" else arr.astype(dt.newbyteorder("="))
        return sf.meta, out


def import_safetensors(mx, path, strict=True, create_missing=False):
    """Load weights (and optimizer state, when present) from ``path`` into ``mx``.

    ``strict``: every layer of ``mx`` must be in the file. ``create_missing``: tensors named after
    no layer (and not ``<layer>.<state>``) become new layers; otherwise they are an error.
    Returns the names of the layers whose weights were loaded, in the store's layer order.
    """
    with _File(path) as sf:
        states = set(mx.optimizer.state_names)
        weights, state_updates, new_layers = [], [], []
        for name in sf.entries:
            base, _, suffix = name.rpartition(".")
            if name in mx._layers:
                weights.append(name)
            elif base in mx._layers and suffix in states:
                state_updates.append(name)
            elif create_missing:
                new_layers.append(name)
            else:
                raise SafetensorsError(f"{path}: tensor {name!r} matches no layer of the store "
                                       f"(pass create_missing=True to add it)")
        if strict:
            missing = [n for n in mx.layer_names() if n not in weights]
            if missing:
                raise SafetensorsError(f"{path}: no tensor for layer(s) {missing} (strict import)")
        for name in [*weights, *state_updates, *new_layers]:
            shape = sf.entries[name][1]
            if name in new_layers:
                if len(shape) not in (1, 2) or 0 in shape:
                    raise SafetensorsError(f"{path}: tensor {name!r} has shape {shape}; "
                                           "layers are 1-D or 2-D, non-empty")
                try:
                    mx._check_new_layer(name, shape)
                except MemoryXError as e:
                    raise SafetensorsError(f"{path}: {e}") from None
            else:
                expected = mx._layers[name.rpartition(".")[0] if name in state_updates else name].shape
                if shape != expected:
                    raise SafetensorsError(f"{path}: tensor {name!r} has shape {shape}, expected {expected}")
        # (tensor in the file, layer, tensor of the layer it replaces)
        plan = [(n, n, "master") for n in weights] + [(n, *n.rsplit(".", 1)) for n in state_updates] \
            + [(n, n, "master") for n in new_layers]
        fresh = set(new_layers)
        c = mx.chunk_elems
        out16 = np.empty(c, np.uint16)
        with mx.tiers.transaction(f"safetensors import from {path}") as tx:    # one pass: check and stage
            for name in new_layers:
                for kind in mx._kinds():
                    tx.stage((name, kind), sf.entries[name][1], np.uint16 if kind == "bf16" else np.float32)
            for name, layer, kind in plan:
                if name not in fresh:
                    tx.stage((layer, kind), sf.entries[name][1], np.float32)
                    if kind == "master":
                        tx.stage((layer, "bf16"), sf.entries[name][1], np.uint16)
                for start, chunk in sf.chunks(name, c):
                    if int(kernels.absmax_bits(chunk)[0]) >= kernels.INF_BITS:
                        raise SafetensorsError(f"{path}: tensor {name!r} has NaN or Inf elements (in fp32)")
                    tx.write((layer, kind), start, chunk)
                    if kind == "master":
                        kernels.bf16_into(chunk, out16[:chunk.size])
                        tx.write((layer, "bf16"), start, out16[:chunk.size])
            tx.commit()
        # committed: the bookkeeping (memory only)
        for name in new_layers:
            mx._register_layer(name, sf.entries[name][1])
        for name in weights:
            mx._layers[name].version += 1
        for _, layer, _ in plan:
            mx._layers[layer].bounds = None
    return [n for n in mx.layer_names() if n in weights or n in new_layers]
