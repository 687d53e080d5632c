"""Bit layouts: named fields packed LSB first (the first field in the least significant bits, as
Amaranth's ``data.StructLayout`` packs them). Every word format shared by the RTL, the models, the
benches and the compiler is a :class:`BitLayout`, packed and unpacked only through it; the RTL
builds its ``StructLayout`` from :meth:`BitLayout.as_dict`.
"""

import operator

import numpy as np

__all__ = ["BitLayout"]


class BitLayout:
    """Fields ``(name, width)``, LSB first, of a word called ``name`` (used in error messages).

    :meth:`pack` and :meth:`unpack` take Python ints (exact, any width) or numpy integer arrays
    (elementwise, as ``uint64``; only for layouts of at most 64 bits).
    """

    def __init__(self, name, *fields):
        self.name = name
        self._fields = tuple((str(n), operator.index(w)) for n, w in fields)
        names = [n for n, _ in self._fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{name}: duplicate field names in {names}")
        self._offset, offset = {}, 0
        for n, w in self._fields:
            if w < 1:
                raise ValueError(f"{name}: field {n!r} has width {w}, must be >= 1")
            self._offset[n] = offset
            offset += w
        self._width = dict(self._fields)
        self.width = offset

    def __iter__(self):
        return iter(self._fields)

    def __len__(self):
        return len(self._fields)

    def __repr__(self):
        return f"BitLayout({self.name!r}, {', '.join(f'{n}:{w}' for n, w in self._fields)})"

    @property
    def names(self):
        return tuple(n for n, _ in self._fields)

    def as_dict(self):
        """``{name: width}`` in field order (what ``amaranth.lib.data.StructLayout`` takes)."""
        return dict(self._fields)

    def offset(self, name):
        """Bit offset of field ``name``."""
        return self._offset[self._known(name)]

    def field_width(self, name):
        return self._width[self._known(name)]

    def field_slice(self, name):
        """``slice`` of the bits of field ``name`` (indexes an Amaranth value or a bit string)."""
        off = self.offset(name)
        return slice(off, off + self._width[name])

    def _known(self, name):
        if name not in self._width:
            raise KeyError(f"{self.name} has no field {name!r}; fields: {', '.join(self.names)}")
        return name

    def pack(self, **values):
        """The word holding ``values`` (missing fields are 0). A value that does not fit its field,
        or an unknown field name, raises ``ValueError`` naming it. Returns an int, or a ``uint64``
        array when any value is a numpy array."""
        unknown = sorted(set(values) - set(self._width))
        if unknown:
            raise ValueError(f"unknown {self.name} field(s) {', '.join(unknown)}; "
                             f"known: {', '.join(self.names)}")
        if any(isinstance(v, np.ndarray) for v in values.values()):
            return self._pack_array(values)
        word = 0
        for n, w in self._fields:
            v = operator.index(values.get(n, 0))
            if not 0 <= v < (1 << w):
                raise ValueError(f"{self.name} field {n!r} = {v} does not fit in {w} bits")
            word |= v << self._offset[n]
        return word

    def _pack_array(self, values):
        self._check_array_width()
        arrays = {n: np.asarray(v) for n, v in values.items()}
        word = np.zeros(np.broadcast_shapes(*(a.shape for a in arrays.values())), dtype=np.uint64)
        for n, a in arrays.items():
            w = self._width[n]
            if a.dtype.kind not in "biu":
                raise TypeError(f"{self.name} field {n!r}: integer values expected, got {a.dtype}")
            if a.dtype.kind == "i" and (a < 0).any():
                raise ValueError(f"{self.name} field {n!r} has negative values")
            u = a.astype(np.uint64)
            if w < 64 and (u >> np.uint64(w)).any():
                raise ValueError(f"{self.name} field {n!r} has values that do not fit in {w} bits")
            word |= u << np.uint64(self._offset[n])
        return word

    def unpack(self, word):
        """``{name: value}`` of the fields of ``word`` (an int; or an integer array, giving
        ``uint64`` arrays). Bits above the layout are ignored."""
        if isinstance(word, (int, np.integer)):
            word = int(word)
            return {n: (word >> self._offset[n]) & ((1 << w) - 1) for n, w in self._fields}
        self._check_array_width()
        a = np.asarray(word).astype(np.uint64)
        return {n: (a >> np.uint64(self._offset[n])) & np.uint64((1 << w) - 1)
                for n, w in self._fields}

    def _check_array_width(self):
        if self.width > 64:
            raise TypeError(f"{self.name} is {self.width} bits wide: numpy arrays hold 64 at most")
