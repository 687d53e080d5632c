"""Amaranth side of :class:`arch.layout.BitLayout`: the RTL builds its structs and status words
from the arch layouts, so each bit layout is defined once (in ``arch``)."""

from amaranth import Array, Cat, Const, Value
from amaranth.lib import data

__all__ = ["struct_layout", "cat_fields", "as_array"]


def struct_layout(layout):
    """The ``data.StructLayout`` of ``layout`` (same fields, same bits)."""
    return data.StructLayout(layout.as_dict())


def cat_fields(layout, **values):
    """The value of ``layout`` holding ``values`` (Amaranth values exactly as wide as their
    fields; missing fields are 0)."""
    parts = []
    for name, width in layout:
        v = Value.cast(values.pop(name)) if name in values else Const(0, width)
        if len(v) != width:
            raise ValueError(f"{layout.name} field {name!r} is {width} bits, got a {len(v)}-bit value")
        parts.append(v)
    if values:
        raise ValueError(f"unknown {layout.name} field(s) {', '.join(values)}")
    return Cat(*parts)


def as_array(view):
    """The elements of the array view ``view`` as an ``Array``: indexed by a signal it is a
    multiplexer, where a view's own part select can cost a multiplier of the index."""
    return Array(view[i] for i in range(len(view)))


