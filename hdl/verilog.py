"""Amaranth component -> Verilog text: the one conversion every generator, bench and harness uses.

No source locations are emitted, so the text is stable across runs and can key build caches.
Files are written atomically (a temporary file renamed into place).
"""

import os
from pathlib import Path

__all__ = ["verilog_text", "write_verilog"]


def verilog_text(component, name):
    """Verilog for ``component`` as module ``name``."""
    from amaranth.back import verilog
    return verilog.convert(component, name=name, emit_src=False)


def write_verilog(component, name, out_dir):
    """Write ``out_dir/<name>.v`` and return its path."""
    return write_text(verilog_text(component, name), Path(out_dir) / f"{name}.v")


def write_text(text, path):
    """Write ``text`` to ``path`` atomically (parents created); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path
