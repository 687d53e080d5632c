"""Pack and unpack struct payloads the way Amaranth's ``StructLayout`` does (first field LSB)."""

from amaranth.lib import data

__all__ = ["pack", "unpack"]


def _layout(shape):
    return data.Layout.cast(shape)


def pack(shape, **fields):
    """The integer payload of ``shape`` (a ``data.Struct`` or layout) holding ``fields``."""
    layout = _layout(shape)
    word = 0
    for name, field in layout:
        value = fields.pop(name, 0)
        width = field.width
        if not 0 <= value < (1 << width):
            raise ValueError(f"field {name!r} = {value} does not fit in {width} bits")
        word |= value << field.offset
    if fields:
        raise ValueError(f"unknown field(s) {', '.join(fields)} for layout {layout!r}")
    return word


def unpack(shape, word):
    """A dict of the fields of ``shape`` in the integer payload ``word``."""
    return {name: (word >> field.offset) & ((1 << field.width) - 1) for name, field in _layout(shape)}
