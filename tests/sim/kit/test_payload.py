import pytest

from hdl.wavelet import TaggedWord, Wavelet
from sim.kit.payload import pack, unpack


def test_wavelet_packing_first_field_lsb():
    word = pack(Wavelet, data=0xDEADBEEF, color=0x1F, ctrl=1)
    assert word == (1 << 37) | (0x1F << 32) | 0xDEADBEEF
    assert unpack(Wavelet, word) == {"data": 0xDEADBEEF, "color": 0x1F, "ctrl": 1}
    assert pack(TaggedWord, data=5, last=1) == (1 << 32) | 5


def test_pack_rejects_overflow_and_unknown_field():
    with pytest.raises(ValueError, match="color"):
        pack(Wavelet, color=32)
    with pytest.raises(ValueError, match="unknown field"):
        pack(Wavelet, colour=1)
