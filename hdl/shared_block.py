"""Blocks elaborated once per design where Verilog is written.

A wafer holds ``P x Q`` identical PE cores and a system identical wafers; Amaranth elaborates
every copy (minutes for a system). Inside :func:`blocks_written_once`, :func:`shared` returns,
instead of the component it is given, a stand-in with the same signature that elaborates to an
``Instance`` of one Verilog module per ``(name, key)``: the component is converted the first time
(:func:`convert_text`, inside the same context, so its own shared blocks are written once too)
and every later request reuses that module. Outside the context ``shared`` returns the component itself
(simulation in Python, formal flows, synthesis of RTLIL), so a design means the same circuit
either way. ``hdl.verilog.verilog_text`` of a top whose blocks were shared appends their modules.

A block of ``hdl/`` that holds no shared block of its own (a router, a PE core, a SwarmX tree) is
also kept on disk, in :data:`BLOCK_CACHE` (``build/blocks/``), keyed by its module name, ``name``,
``key`` and what :func:`hdl.build_key.build_key` covers (the ``hdl/`` and ``arch/`` sources, the
Python and Amaranth versions): another process writing a design with the same block (a test, a
bench, ``make verilog``) reads its Verilog instead of converting it again.
"""

import contextlib
import contextvars
import functools
import os
import re
from pathlib import Path

from amaranth import ClockSignal, Instance, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from .build_key import build_key, source_digest
from .module_merge import merge_identical_modules

__all__ = ["shared", "blocks_written_once", "convert_text", "BLOCK_CACHE"]

_LIBRARY = contextvars.ContextVar("hdl_shared_blocks", default=None)
BLOCK_CACHE = Path(__file__).resolve().parents[1] / "build" / "blocks"


def convert_text(component, name):
    """Amaranth's Verilog of ``component`` as module ``name``, each set of identical modules
    written once (:func:`hdl.module_merge.merge_identical_modules`)."""
    from amaranth.back import verilog
    return merge_identical_modules(verilog.convert(component, name=name, emit_src=False))


class _Library:
    def __init__(self):
        self.modules = {}           # (name, key) -> module name
        self.texts = {}             # module name -> Verilog text
        self.clocked = {}           # module name -> (has clk, has rst)

    def module(self, component, name, key):
        found = self.modules.get((name, key))
        if found is not None:
            return found
        taken = sum(1 for n, _ in self.modules if n == name)
        module = name if taken == 0 else f"{name}_{taken}"
        self.modules[(name, key)] = module
        text = self._converted(component, module, name, key)
        header = re.search(rf"^module {re.escape(module)}\s*\((.*?)\);", text, re.S | re.M)
        ports = {p.strip() for p in header.group(1).split(",")}
        self.texts[module] = text
        self.clocked[module] = ("clk" in ports, "rst" in ports)
        return module


    def _converted(self, component, module, name, key):
        """``convert_text(component, module)``, from :data:`BLOCK_CACHE` where it may be."""
        if not type(component).__module__.startswith("hdl."):
            return convert_text(component, module)     # its source is not in the key
        path = BLOCK_CACHE / f"{module}-{_block_key(module, name, key)}.v"
        if path.exists():
            return path.read_text()
        before = len(self.modules)
        text = convert_text(component, module)
        if len(self.modules) == before:                 # a leaf: its text is all of it
            BLOCK_CACHE.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
        return text


@functools.cache
def _sources():
    return source_digest()


def _stable(key):
    """``repr`` of ``key`` with the elements of sets in sorted order (a set's order varies per run)."""
    if isinstance(key, (set, frozenset)):
        return "{" + ", ".join(sorted(map(_stable, key))) + "}"
    if isinstance(key, tuple):
        return "(" + ", ".join(map(_stable, key)) + ")"
    return repr(key)


def _block_key(module, name, key):
    inputs = build_key(name, sources=_sources(), module=module, block_key=_stable(key))
    return inputs["key"][:20]


class _StandIn(wiring.Component):
    """``component``'s signature; elaborates to an instance of Verilog module ``module``."""

    def __init__(self, signature, module, clocked):
        self._module = module
        self._clocked = clocked
        super().__init__(signature)

    def elaborate(self, platform):
        clk, rst = self._clocked
        ports = {}
        if clk:
            ports["i_clk"] = ClockSignal()
        if rst:
            ports["i_rst"] = ResetSignal()
        for path, member, value in self.signature.flatten(self):
            ports[("i_" if member.flow == In else "o_") + "__".join(map(str, path))] = value
        return Instance(self._module, **ports)      # the instance itself: no wrapper module


def shared(component, name, key):
    """``component``, or inside :func:`blocks_written_once` a stand-in for it: an instance of the
    Verilog module of ``component`` written once per ``(name, key)`` (``key``: everything the
    component's hardware depends on, e.g. its ``Config``; hashable)."""
    library = _LIBRARY.get()
    if library is None:
        return component
    module = library.module(component, name, key)
    component._MustUse__used = True            # converted on its own, or a copy of one that was
    return _StandIn(component.signature, module, library.clocked[module])


@contextlib.contextmanager
def blocks_written_once():
    """Inside, :func:`shared` hands out stand-ins; yields the library, whose ``texts`` are the
    modules written so far (``{module name: Verilog}``). Nested uses share the outer library."""
    if _LIBRARY.get() is not None:
        yield _LIBRARY.get()
        return
    library = _Library()
    token = _LIBRARY.set(library)
    try:
        yield library
    finally:
        _LIBRARY.reset(token)
