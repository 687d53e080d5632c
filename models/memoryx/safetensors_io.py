"""Import and export of MemoryX weights in the ``safetensors`` format (what the usual tools read).

Export: one tensor per layer, named after the layer: the fp32 master (``F32``) or the bf16 copy
(``BF16``, the exact bits MemoryX streams); with ``include_state`` also ``<layer>.<state>`` for each
optimizer state tensor (``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``) in F32. The metadata
records the format and the optimizer configuration. Written atomically (temporary file, fsync,
rename), like checkpoints.

Import: tensors named after layers (F32, F16, BF16 or F64, converted to fp32 with round to
nearest even) replace the masters; ``<layer>.<state>`` tensors replace optimizer state. Everything
is validated first (unknown names, shapes, dtypes, NaN/Inf); on any error nothing changes.
"""

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import safetensors
from safetensors.numpy import save

from models.numerics import bf16_bits, bf16_to_fp32

from .atomic import atomic_write
from .errors import MemoryXError

__all__ = ["export_safetensors", "import_safetensors", "read_safetensors"]

_READ_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "BF16": np.uint16}


def export_safetensors(mx, path, dtype="float32", include_state=False):
    """Write the layers of ``mx`` to ``path``; ``dtype`` is ``"float32"`` (masters) or ``"bfloat16"``."""
    if dtype not in ("float32", "bfloat16"):
        raise MemoryXError(f"export dtype must be 'float32' or 'bfloat16', got {dtype!r}")
    tensors = {}
    for name in mx.layer_names():
        if dtype == "float32":
            tensors[name] = mx.master(name)
        else:
            tensors[name] = mx.bf16(name).view(ml_dtypes.bfloat16)
        if include_state:
            for s, arr in mx.state(name).items():
                key = f"{name}.{s}"
                if key in tensors:
                    raise MemoryXError(f"cannot export: state tensor name {key!r} collides with a layer name")
                tensors[key] = arr
    meta = {"format": "weightstream.memoryx", "optimizer": json.dumps(mx.optimizer.config()),
            "dtype": dtype}
    blob = save(tensors, metadata=meta)
    atomic_write(path, lambda f: f.write(blob))
    return Path(path)


def read_safetensors(path):
    """``(metadata, {name: ndarray})`` of a safetensors file; BF16 comes back as fp32 (exact)."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as e:
        raise MemoryXError(f"cannot read safetensors file {path}: {e.strerror or e}") from None
    try:
        header_len = int.from_bytes(blob[:8], "little")
        meta = json.loads(blob[8:8 + header_len]).get("__metadata__", {}) if len(blob) >= 8 else {}
        views = safetensors.deserialize(blob)
    except Exception as e:  # safetensors raises its own error types
        raise MemoryXError(f"{path} is not a valid safetensors file: {e}") from None
    out = {}
    for name, v in views:
        dt = _READ_DTYPES.get(v["dtype"])
        if dt is None:
            raise MemoryXError(f"{path}: tensor {name!r} has dtype {v['dtype']}; supported: "
                               f"{', '.join(_READ_DTYPES)}")
        arr = np.frombuffer(v["data"], dtype=dt).reshape(v["shape"])
        out[name] = bf16_to_fp32(arr) if v["dtype"] == "BF16" else arr
    return meta, out


def import_safetensors(mx, path, strict=True, create_missing=False):
    """Load weights (and optimizer state, when present) from ``path`` into ``mx``.

    ``strict``: every layer of ``mx`` must be in the file. ``create_missing``: tensors named after
    no layer (and not ``<layer>.<state>``) become new layers; otherwise they are an error.
    Returns the names of the layers whose weights were loaded, in the store's layer order.
    """
    _, tensors = read_safetensors(path)
    states = set(mx.optimizer.state_names)
    weights, state_updates, new_layers = {}, {}, {}
    for name, arr in tensors.items():
        base, _, suffix = name.rpartition(".")
        if name in mx._layers:
            weights[name] = arr
        elif base in mx._layers and suffix in states:
            state_updates[(base, suffix)] = arr
        elif create_missing:
            new_layers[name] = arr
        else:
            raise MemoryXError(f"{path}: tensor {name!r} matches no layer of the store "
                               f"(pass create_missing=True to add it)")
    if strict:
        missing = [n for n in mx.layer_names() if n not in weights]
        if missing:
            raise MemoryXError(f"{path}: no tensor for layer(s) {missing} (strict import)")
    converted = {}
    for key, arr in [*weights.items(), *state_updates.items(), *new_layers.items()]:
        label = key if isinstance(key, str) else f"{key[0]}.{key[1]}"
        owner = key if isinstance(key, str) else key[0]
        shape = arr.shape if key in new_layers else mx._layers[owner].shape
        if arr.shape != shape:
            raise MemoryXError(f"{path}: tensor {label!r} has shape {arr.shape}, expected {shape}")
        if len(shape) not in (1, 2) or 0 in shape:
            raise MemoryXError(f"{path}: tensor {label!r} has shape {shape}; "
                               "layers are 1-D or 2-D, non-empty")
        with np.errstate(over="ignore"):
            a32 = arr.astype(np.float32)
        if not np.isfinite(a32).all():
            raise MemoryXError(f"{path}: tensor {label!r} has NaN or Inf elements (in fp32)")
        converted[key] = a32
    # validated: commit
    for name in weights:
        mx.tiers.write((name, "master"), converted[name])
        mx.tiers.write((name, "bf16"), bf16_bits(converted[name]))
        mx._layers[name].version += 1
    for key in state_updates:
        mx.tiers.write(key, converted[key])
    for name in new_layers:
        mx.add_layer(name, converted[name].shape, init=converted[name])
    return [n for n in mx.layer_names() if n in weights or n in new_layers]
