"""arch.layout.BitLayout and the word formats of arch.wavelet: packing is LSB first, round trips
are exact for ints and numpy arrays, bad values and names are refused."""

import numpy as np
import pytest

from arch.layout import BitLayout
from arch.wavelet import (
    TAGGED,
    TAGGED_BITS,
    WAVELET,
    WAVELET_BITS,
    pack_tagged,
    pack_wavelet,
    unpack_tagged,
    unpack_wavelet,
)

L3 = BitLayout("demo", ("a", 3), ("b", 1), ("c", 12))


def test_offsets_and_width():
    assert L3.width == 16 and len(L3) == 3 and L3.names == ("a", "b", "c")
    assert [L3.offset(n) for n in L3.names] == [0, 3, 4]
    assert L3.field_slice("c") == slice(4, 16) and L3.field_width("c") == 12
    assert L3.as_dict() == {"a": 3, "b": 1, "c": 12}
    with pytest.raises(KeyError, match="no field 'd'"):
        L3.offset("d")


def test_pack_is_lsb_first_and_round_trips():
    assert L3.pack(a=5, b=1, c=0xABC) == (0xABC << 4) | (1 << 3) | 5
    assert L3.pack() == 0
    rng = np.random.default_rng(0)
    for _ in range(200):
        f = {n: int(rng.integers(0, 1 << w)) for n, w in L3}
        assert L3.unpack(L3.pack(**f)) == f
    assert L3.unpack(np.uint64(0x12345))["a"] == 5      # numpy scalars unpack like ints


def test_pack_refuses_overflow_negative_and_unknown_fields():
    with pytest.raises(ValueError, match="'a' = 8 does not fit in 3 bits"):
        L3.pack(a=8)
    with pytest.raises(ValueError, match="does not fit"):
        L3.pack(c=-1)
    with pytest.raises(ValueError, match="unknown demo field"):
        L3.pack(d=1)
    with pytest.raises(ValueError, match="duplicate"):
        BitLayout("bad", ("x", 1), ("x", 2))


def test_arrays_pack_and_unpack_elementwise():
    a = np.array([0, 7, 3], dtype=np.uint8)
    c = np.array([1, 2, 4095], dtype=np.uint32)
    words = L3.pack(a=a, b=1, c=c)
    assert words.dtype == np.uint64
    assert words.tolist() == [L3.pack(a=int(x), b=1, c=int(y)) for x, y in zip(a, c)]
    got = L3.unpack(words)
    assert got["a"].tolist() == a.tolist() and got["c"].tolist() == c.tolist()
    assert got["b"].tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match="do not fit in 3 bits"):
        L3.pack(a=np.array([8]))
    with pytest.raises(ValueError, match="negative"):
        L3.pack(a=np.array([-1]))


def test_wavelet_bits():
    assert WAVELET_BITS == 38 and TAGGED_BITS == 33
    assert [(n, WAVELET.offset(n), w) for n, w in WAVELET] == [("data", 0, 32), ("color", 32, 5),
                                                               ("ctrl", 37, 1)]
    word = pack_wavelet(0xDEADBEEF, 0x1F, 1)
    assert word == (1 << 37) | (0x1F << 32) | 0xDEADBEEF
    assert unpack_wavelet(word) == (0xDEADBEEF, 0x1F, 1)
    assert pack_wavelet(5, 2) == (2 << 32) | 5
    with pytest.raises(ValueError, match="color"):
        pack_wavelet(0, 32)
    with pytest.raises(ValueError, match="data"):
        pack_wavelet(1 << 32, 0)


def test_tagged_bits():
    assert [(n, TAGGED.offset(n), w) for n, w in TAGGED] == [("data", 0, 32), ("last", 32, 1)]
    assert pack_tagged(5, 1) == (1 << 32) | 5
    assert pack_tagged(0xFFFFFFFF) == 0xFFFFFFFF
    assert unpack_tagged((1 << 32) | 7) == (7, 1)
    data = np.array([1, 0xFFFFFFFF, 3], dtype=np.uint32)
    last = np.array([False, False, True])
    words = pack_tagged(data, last)
    assert words.tolist() == [1, 0xFFFFFFFF, (1 << 32) | 3]
    d, lst = unpack_tagged(words)
    assert d.tolist() == data.tolist() and lst.tolist() == [0, 0, 1]


def test_wavelet_arrays_round_trip():
    rng = np.random.default_rng(1)
    data = rng.integers(0, 1 << 32, 100, dtype=np.uint64)
    color = rng.integers(0, 32, 100)
    words = np.array([pack_wavelet(int(d), int(c), int(d) & 1) for d, c in zip(data, color)],
                     dtype=np.uint64)
    d, c, ctrl = unpack_wavelet(words)
    assert d.tolist() == data.tolist() and c.tolist() == color.tolist()
    assert ctrl.tolist() == (data & 1).tolist()
