"""Crash-safe checkpoints of a MemoryX store.

File format (little endian)::

    b"WSMXCKPT"  u32 version (1)  u64 header length  header (UTF-8 JSON)  tensor bytes  sha256 (32 bytes)

The header holds the optimizer configuration, accumulation settings, the micro-step bookkeeping,
and per layer its name, shape, optimizer step count and pending micro-batches; then a table of
tensors (layer, kind, dtype, shape, offset into the tensor bytes). Saved per layer: the fp32
master, every optimizer state tensor and the fp32 gradient buffer (so a checkpoint taken between
micro-batches resumes exactly); the bf16 copy is derived from the master on load. The trailing
SHA-256 covers every byte before it and is verified before anything is used.

Durability: written through :func:`models.memoryx.atomic.atomic_write` (temporary file, fsync,
atomic rename): a crash leaves either the previous checkpoint or the new one at ``path``.
"""

import hashlib
import json
import struct
from pathlib import Path

import numpy as np

from models.numerics import bf16_bits

from .atomic import atomic_write
from .errors import CheckpointError

__all__ = ["save_checkpoint", "read_checkpoint", "restore_layers", "MAGIC", "VERSION"]

MAGIC = b"WSMXCKPT"
VERSION = 1
_PREFIX = struct.Struct("<8sIQ")
_DIGEST = 32
_DTYPES = {"float32": np.float32, "uint16": np.uint16}




class _HashingWriter:
    def __init__(self, f):
        self.f = f
        self.h = hashlib.sha256()

    def write(self, data):
        self.h.update(data)
        self.f.write(data)


def save_checkpoint(mx, path):
    """Write a checkpoint of ``mx`` to ``path`` (atomically; see the module docstring)."""
    tensors = []
    offset = 0
    layers = []
    for name in mx.layer_names():
        layer = mx._layers[name]
        layers.append({"name": name, "shape": list(layer.shape), "t": layer.t, "micro": layer.micro,
                       "version": layer.version})
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
            key = (t["layer"], t["kind"])
            arr = mx.tiers.acquire(key)
            try:
                w.write(np.ascontiguousarray(arr, dtype=np.float32).tobytes())
            finally:
                mx.tiers.release(key)
        f.write(w.h.digest())

    atomic_write(path, write)
    return Path(path)


def read_checkpoint(path):
    """Verify and parse a checkpoint: ``(header, {(layer, kind): ndarray})``.
    Raises :class:`CheckpointError` naming what is wrong (missing, truncated, checksum, format)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint {path}: {e.strerror or e}") from None
    if len(data) < _PREFIX.size + _DIGEST:
        raise CheckpointError(f"checkpoint {path} is truncated ({len(data)} bytes)")
    magic, version, hlen = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointError(f"{path} is not a MemoryX checkpoint (magic {magic!r})")
    if version != VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {version}, this reader knows {VERSION}")
    body, digest = memoryview(data)[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise CheckpointError(f"checkpoint {path} fails its SHA-256 checksum (corrupt or truncated)")
    start = _PREFIX.size
    try:
        header = json.loads(bytes(body[start:start + hlen]))
    except ValueError as e:
        raise CheckpointError(f"checkpoint {path}: header is not valid JSON ({e})") from None
    base = start + hlen
    if base + header.get("data_bytes", -1) != len(body):
        raise CheckpointError(f"checkpoint {path}: tensor data size does not match the header")
    tensors = {}
    for t in header["tensors"]:
        dtype = _DTYPES.get(t["dtype"])
        count = int(np.prod(t["shape"], dtype=np.int64))
        if dtype is None or count * np.dtype(dtype).itemsize != t["nbytes"] \
                or t["offset"] + t["nbytes"] > header["data_bytes"]:
            raise CheckpointError(f"checkpoint {path}: bad tensor entry {t}")
        tensors[(t["layer"], t["kind"])] = np.frombuffer(data, dtype=dtype, count=count,
                                                         offset=base + t["offset"]).reshape(t["shape"])
    return header, tensors


def restore_layers(mx, header, tensors, path):
    """Fill the empty store ``mx`` (built with the checkpoint's optimizer) with the layers and
    bookkeeping of a checkpoint read by :func:`read_checkpoint` from ``path``."""
    for layer in header["layers"]:
        name = layer["name"]
        kinds = ("master", *mx.optimizer.state_names, "grad")
        missing = [k for k in kinds if (name, k) not in tensors]
        if missing:
            raise CheckpointError(f"checkpoint {path}: layer {name!r} lacks tensors {missing}")
        if tuple(tensors[(name, "master")].shape) != tuple(layer["shape"]):
            raise CheckpointError(f"checkpoint {path}: layer {name!r} tensors do not match its shape")
        # restored as saved, even non-finite weights (a diverged run must still be inspectable)
        mx.add_layer(name, tuple(layer["shape"]), init="zeros")
        for kind in kinds:
            mx.tiers.write((name, kind), tensors[(name, kind)])
        mx.tiers.write((name, "bf16"), bf16_bits(tensors[(name, "master")]))
        rec = mx._layers[name]
        rec.t, rec.micro, rec.version = layer["t"], layer["micro"], layer["version"]
    mx.micro_steps = header["micro_steps"]
    mx._received = set(header["received"])
    return mx
