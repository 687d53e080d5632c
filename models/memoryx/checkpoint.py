"""Crash-safe checkpoints of a MemoryX store, streamed chunk by chunk.

File format (little endian)::

    b"WSMXCKPT"  u32 version (1)  u64 header length  header (UTF-8 JSON)  tensor bytes  sha256 (32 bytes)

The header holds the optimizer configuration, accumulation settings, the micro-step bookkeeping,
and per layer its name, shape, optimizer step count, pending micro-batches and non-finite flag; then a
table of tensors (layer, kind, dtype, shape, offset into the tensor bytes). Saved per layer: the fp32
master, every optimizer state tensor and the fp32 gradient buffer (so a checkpoint taken between
micro-batches resumes exactly); the bf16 copy is derived from the master on load. The trailing
SHA-256 covers every byte before it and is verified before anything is used.

Memory: saving and restoring stream each tensor in chunks of ``chunk_elems`` elements of the store
(tensors that are not cached in DRAM are read from, and restored into, their flash files directly),
so the peak heap is the DRAM budget plus a bounded number of chunks (one of them the read buffer of
the checksum pass), whatever the size of the store. Restoring reads the file twice (checksum, then tensors),
from one open file descriptor.

Durability: written through :func:`models.memoryx.atomic.atomic_write` (temporary file, fsync,
atomic rename, directory fsync): a crash leaves either the previous checkpoint or the new one at
``path``, and an I/O error (EIO, ENOSPC, ...) at any write, fsync or rename leaves the previous one (or
none) and no temporary file. Saving only reads the store, which stays as it was.

Restore: the tensors are staged into the new store's tiers and switched in at the end
(:mod:`models.memoryx.staging`); a failure (a bad file, an I/O error) leaves no store, no files in the
flash directory it was given, and releases the directory's lock.

Errors: :class:`~models.memoryx.errors.CheckpointError` (missing, truncated, corrupt, malformed or not
matching), :class:`~models.memoryx.errors.StorageError` (the file cannot be written or read), both
naming the path, and for an I/O error the file it failed on and the cause.
"""

import hashlib
import json
import os
import struct
from pathlib import Path

import numpy as np

from . import kernels
from .atomic import atomic_write
from .errors import CheckpointError, MemoryXError, StorageError
from .optimizers import optimizer_from_config

__all__ = ["save_checkpoint", "read_checkpoint", "load_checkpoint", "MAGIC", "VERSION"]

MAGIC = b"WSMXCKPT"
VERSION = 1
_PREFIX = struct.Struct("<8sIQ")
_DIGEST = 32
_DTYPES = {"float32": np.float32}
_MIN_READ_BUFFER = 1 << 16


class _HashingWriter:
    def __init__(self, f):
        self.f = f
        self.h = hashlib.sha256()

    def write(self, data):
        self.h.update(data)
        self.f.write(data)


def save_checkpoint(mx, path):
    """Write a checkpoint of ``mx`` to ``path`` (atomically, streamed; see the module docstring)."""
    tensors = []
    offset = 0
    layers = []
    for name in mx.layer_names():
        layer = mx._layers[name]
        layers.append({"name": name, "shape": list(layer.shape), "t": layer.t, "micro": layer.micro,
                       "version": layer.version, "nonfinite": layer.nonfinite})
        for kind in ("master", *mx.optimizer.state_names, "grad"):
            nbytes = layer.size * 4
            tensors.append({"layer": name, "kind": kind, "dtype": "float32", "shape": list(layer.shape),
                            "offset": offset, "nbytes": nbytes})
            offset += nbytes
    header = {"format": "weightstream.memoryx.checkpoint", "optimizer": mx.optimizer.config(),
              "accumulation_steps": mx.accumulation_steps, "micro_steps": mx.micro_steps,
              "received": sorted(mx._received), "layers": layers, "tensors": tensors, "data_bytes": offset}
    hjson = json.dumps(header, sort_keys=True).encode()

    def write(f):
        w = _HashingWriter(f)
        w.write(_PREFIX.pack(MAGIC, VERSION, len(hjson)))
        w.write(hjson)
        for t in tensors:
            for chunk in mx.tiers.iter_chunks((t["layer"], t["kind"]), mx.chunk_elems):
                w.write(chunk)
        f.write(w.h.digest())

    atomic_write(path, write)
    return Path(path)


def _open(path):
    try:
        return open(path, "rb")
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint {path}: {e.strerror or e}") from None


def _read_exact(f, n, path):
    data = f.read(n)
    if len(data) != n:
        raise CheckpointError(f"checkpoint {path} is truncated")
    return data


def _verify(f, path, buffer_bytes=_MIN_READ_BUFFER):
    """Check magic, version and the SHA-256 of an open checkpoint (read through a buffer of
    ``buffer_bytes``); return ``(header, data offset)``."""
    size = os.fstat(f.fileno()).st_size
    if size < _PREFIX.size + _DIGEST:
        raise CheckpointError(f"checkpoint {path} is truncated ({size} bytes)")
    magic, version, hlen = _PREFIX.unpack(_read_exact(f, _PREFIX.size, path))
    if magic != MAGIC:
        raise CheckpointError(f"{path} is not a MemoryX checkpoint (magic {magic!r})")
    if version != VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {version}, this reader knows {VERSION}")
    h = hashlib.sha256()
    buf = bytearray(max(buffer_bytes, _MIN_READ_BUFFER))
    view = memoryview(buf)
    f.seek(0)
    remaining = size - _DIGEST
    while remaining:
        n = f.readinto(view[:min(len(buf), remaining)])
        if not n:
            raise CheckpointError(f"checkpoint {path} is truncated")
        h.update(view[:n])
        remaining -= n
    if h.digest() != _read_exact(f, _DIGEST, path):
        raise CheckpointError(f"checkpoint {path} fails its SHA-256 checksum (corrupt or truncated)")
    if _PREFIX.size + hlen > size - _DIGEST:
        raise CheckpointError(f"checkpoint {path}: header length {hlen} exceeds the file")
    f.seek(_PREFIX.size)
    try:
        header = json.loads(_read_exact(f, hlen, path))
    except ValueError as e:
        raise CheckpointError(f"checkpoint {path}: header is not valid JSON ({e})") from None
    base = _PREFIX.size + hlen
    if not isinstance(header, dict) or base + header.get("data_bytes", -1) != size - _DIGEST:
        raise CheckpointError(f"checkpoint {path}: tensor data size does not match the header")
    try:
        for t in header["tensors"]:
            dtype = _DTYPES.get(t["dtype"])
            count = int(np.prod(t["shape"], dtype=np.int64))
            if dtype is None or count * np.dtype(dtype).itemsize != t["nbytes"] or t["offset"] < 0 \
                    or t["offset"] + t["nbytes"] > header["data_bytes"]:
                raise CheckpointError(f"checkpoint {path}: bad tensor entry {t}")
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, MemoryXError):
            raise
        raise CheckpointError(f"checkpoint {path}: malformed tensor table ({e!r})") from None
    return header, base


def read_checkpoint(path):
    """Verify and parse a checkpoint: ``(header, {(layer, kind): ndarray})``. The arrays are read-only
    memory maps of the file (nothing is loaded into memory). Raises :class:`CheckpointError` naming
    what is wrong (missing, truncated, checksum, format)."""
    path = Path(path)
    with _open(path) as f:
        header, base = _verify(f, path)
        tensors = {}
        for t in header["tensors"]:
            tensors[(t["layer"], t["kind"])] = np.memmap(f, dtype=_DTYPES[t["dtype"]], mode="r",
                                                         offset=base + t["offset"], shape=tuple(t["shape"]))
    return header, tensors


def load_checkpoint(cls, path, **kwargs):
    """A new ``cls`` (MemoryX) store restored from ``path``: verified, then streamed chunk by chunk
    into the tiers of a store built with ``kwargs`` (dram_budget_bytes, flash_dir, lr_schedule,
    chunk_elems, on_nonfinite)."""
    path = Path(path)
    with _open(path) as f:
        ce = kwargs.get("chunk_elems")
        header, base = _verify(f, path, 4 * ce if isinstance(ce, int) and ce > 0 else _MIN_READ_BUFFER)
        try:
            opt = optimizer_from_config(header["optimizer"])
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"checkpoint {path}: bad optimizer configuration ({e})") from None
        mx = cls(optimizer=opt, accumulation_steps=header.get("accumulation_steps", 1), **kwargs)
        try:
            _restore(mx, header, f, base, path)
        except BaseException:
            mx.tiers.destroy()
            raise
    return mx


def _restore(mx, header, f, base, path):
    try:
        table = {(t["layer"], t["kind"]): t for t in header["tensors"]}
        layers = [(l["name"], tuple(int(s) for s in l["shape"]), int(l["t"]), int(l["micro"]), int(l["version"]),
                   l.get("nonfinite")) for l in header["layers"]]
        micro_steps, received = int(header["micro_steps"]), set(header["received"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path}: malformed header ({e!r})") from None
    c = mx.chunk_elems
    buf = np.empty(c, np.float32)
    out16 = np.empty(c, np.uint16)
    kinds = ("master", *mx.optimizer.state_names, "grad")
    restored = {}
    with mx.tiers.transaction(f"restore of checkpoint {path}", "no store was restored") as tx:
        for name, shape, t, micro, version, nonfinite in layers:
            missing = [k for k in kinds if (name, k) not in table]
            if missing:
                raise CheckpointError(f"checkpoint {path}: layer {name!r} lacks tensors {missing}")
            if any(tuple(table[(name, k)]["shape"]) != shape for k in kinds):
                raise CheckpointError(f"checkpoint {path}: layer {name!r} tensors do not match its shape")
            if name in restored:
                raise CheckpointError(f"checkpoint {path}: layer {name!r} appears twice")
            try:
                shape = mx._check_new_layer(name, shape)
            except MemoryXError as e:
                raise CheckpointError(f"checkpoint {path}: {e}") from None
            restored[name] = (shape, t, micro, version, nonfinite)
            for kind in (*kinds, "bf16"):
                tx.stage((name, kind), shape, np.uint16 if kind == "bf16" else np.float32)
            # restored as saved, even non-finite weights (a diverged run must still be inspectable)
            n = int(np.prod(shape, dtype=np.int64))
            for kind in kinds:
                f.seek(base + table[(name, kind)]["offset"])
                for s in range(0, n, c):
                    chunk = buf[:min(c, n - s)]
                    try:
                        got = f.readinto(memoryview(chunk).cast("B"))
                    except OSError as e:
                        raise StorageError(f"cannot read checkpoint {path}: {e.strerror or e}") from None
                    if got != chunk.nbytes:
                        raise CheckpointError(f"checkpoint {path} is truncated")
                    tx.write((name, kind), s, chunk)
                    if kind == "master":
                        kernels.bf16_into(chunk, out16[:chunk.size])
                        tx.write((name, "bf16"), s, out16[:chunk.size])
        tx.commit()
    for name, (shape, t, micro, version, nonfinite) in restored.items():      # committed: bookkeeping
        layer = mx._register_layer(name, shape)
        layer.t, layer.micro, layer.version, layer.nonfinite = t, micro, version, nonfinite
    mx.micro_steps = micro_steps
    mx._received = received
    return mx
