"""What the host sends on each weight link (compiler/wafer/streams.py): K split over the links,
the rows in the FMAC's order."""

import numpy as np
import pytest

from arch.wavelet import unpack_tagged
from compiler.wafer import WaferCompileError, weight_streams
from hdl.config import preset

CFG = preset("system", mesh_rows=2, mesh_cols=3)


def test_weight_streams_split_k_over_the_links():
    w = np.arange(4 * 7, dtype=np.uint16).reshape(4, 7)          # K = 7 over 3 columns: 3, 2, 2
    links = weight_streams(CFG, w)
    data = [unpack_tagged(words) for words in links]
    assert [d.tolist() for d, _ in data] == [w[:, 0:3].ravel().tolist(), w[:, 3:5].ravel().tolist(),
                                             w[:, 5:7].ravel().tolist()]
    assert all(last[-1] == 1 and not last[:-1].any() for _, last in data)
    back = [unpack_tagged(words)[0] for words in weight_streams(CFG, w, transposed=True)]
    assert back[1].tolist() == w[:, 3:5].T.ravel().tolist()      # rows k = 3, 4 of W^T
    with pytest.raises(WaferCompileError, match="cannot be split over 3 mesh columns"):
        weight_streams(CFG, w[:, :2])


def test_weight_streams_follow_the_fmac_order():
    """With pipelined lanes (acc_rows R = 5) each link carries its rows in groups of R, the
    wavelets i-major inside a group; the last group takes the rest when fewer than 2R are left
    (12 rows: 5 + 7; 3 rows of W^T: one group): written out here, not taken from fmac_order."""
    cfg = CFG.replace(add_stages=4)
    assert cfg.acc_rows == 5
    w = np.arange(12 * 7, dtype=np.uint16).reshape(12, 7)
    got = unpack_tagged(weight_streams(cfg, w)[0])[0].tolist()          # W[:, 0:3]
    want = [int(w[n, k]) for k in range(3) for n in range(5)]
    want += [int(w[n, k]) for k in range(3) for n in range(5, 12)]
    assert got == want
    got_t = unpack_tagged(weight_streams(cfg, w, transposed=True)[0])[0].tolist()
    assert got_t == [int(w[m, k]) for m in range(12) for k in range(3)]   # 3 rows k: one group
