"""dW back from the gradient links' words (compiler/wafer/backward_weight.py), without RTL
(the phase itself runs on the RTL wafer in tests/hdl/test_wafer.py)."""

import numpy as np
import pytest

from arch.wavelet import pack_tagged
from compiler.wafer import join_gradients
from hdl.config import preset

CFG = preset("system", mesh_rows=2, mesh_cols=3)


def test_join_gradients_inverts_the_column_split():
    dw = np.arange(4 * 7, dtype=np.uint32).reshape(4, 7) * 0x01010101
    links = [pack_tagged(dw[:, sl].ravel().astype(np.uint64), np.arange(4 * n) == 4 * n - 1)
             for sl, n in ((slice(0, 3), 3), (slice(3, 5), 2), (slice(5, 7), 2))]
    assert np.array_equal(join_gradients(CFG, links, m=4, k=7), dw)
    with pytest.raises(ValueError, match="gradient link 1: 7 words, expected 8"):
        join_gradients(CFG, [links[0], links[1][:7], links[2]], m=4, k=7)
    early = links[2].copy()
    early[3] |= np.uint64(1 << 32)
    with pytest.raises(ValueError, match="gradient link 2: 'last' must mark only the final word"):
        join_gradients(CFG, [links[0], links[1], early], m=4, k=7)
    with pytest.raises(ValueError, match="2 gradient links, the wafer has 3 columns"):
        join_gradients(CFG, links[:2], m=4, k=7)
