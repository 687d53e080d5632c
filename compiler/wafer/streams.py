"""What the host (MemoryX) sends on each weight link: the layer's bf16 weights split over the mesh
columns, each link's rows in the order its PEs' FMACs take them."""

import numpy as np

from arch.pe_map import fmac_order
from arch.wavelet import pack_tagged
from models import pe

from .phase import WaferCompileError

__all__ = ["weight_streams", "fmac_stream"]


def weight_streams(cfg, w16, *, transposed=False):
    """What the host sends on each weight link for bf16 weights ``w16`` (``M x K`` bit patterns):
    a list of ``Q`` tagged-word arrays (uint64, ``arch.wavelet.pack_tagged``: the bf16 in the low
    half, ``last`` on each link's final word). Link ``q`` carries ``W[:, K_q]`` row by row
    (forward), or with ``transposed`` the rows ``k`` of ``W^T`` for ``k`` in ``K_q``, m ascending
    (backward-data); the rows in the FMAC's order, groups of ``cfg.acc_rows`` rows interleaved
    (``arch.pe_map.fmac_order``)."""
    w16 = np.asarray(w16)
    if w16.ndim != 2 or w16.shape[1] < cfg.mesh_cols:
        raise WaferCompileError(f"weights of shape {w16.shape} cannot be split over "
                                f"{cfg.mesh_cols} mesh columns")
    out = []
    for sl in pe._split(w16.shape[1], cfg.mesh_cols):
        part = fmac_stream(cfg, w16[:, sl].T if transposed else w16[:, sl])
        out.append(pack_tagged(part.astype(np.uint64), np.arange(len(part)) == len(part) - 1))
    return out


def fmac_stream(cfg, rows):
    """The wavelets of an FMAC whose row ``n`` takes ``rows[n]`` (a 2-D array, one row per FMAC
    row), in the order the PE takes them (``arch.pe_map.fmac_order`` with ``cfg.acc_rows``)."""
    rows = np.asarray(rows)
    order = np.array(fmac_order(rows.shape[0], rows.shape[1], cfg.acc_rows), dtype=np.int64)
    return rows[order[:, 0], order[:, 1]] if len(order) else rows.ravel()
