"""Partition of a dense layer over a ``P x Q`` wafer (docs/architecture.md#layer-mapping).

A layer ``Y = W X`` has ``W: M x K`` (streamed from MemoryX) and ``X: K x B`` (resident). Column ``q``
owns a contiguous slice ``K_q`` of the input features, row ``p`` owns a contiguous slice ``B_p`` of
the batch, so PE(p, q) holds ``X[K_q, B_p]``.

Uneven sizes: ``n`` items over ``parts`` owners give the first ``n mod parts`` owners
``ceil(n / parts)`` items and the rest ``floor(n / parts)``, in ascending order (the split of
``numpy.array_split``). When ``n < parts`` the last owners get empty slices: such a PE contributes
nothing (its accumulator stays +0.0, which leaves every chain sum unchanged).
"""

from dataclasses import dataclass

__all__ = ["split", "dx_west_columns", "LayerMapping"]


def split(n, parts):
    """Contiguous slices of ``range(n)`` for ``parts`` owners (first ``n mod parts`` one longer)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"cannot split {n!r} items: need an int >= 1")
    if not isinstance(parts, int) or parts < 1:
        raise ValueError(f"cannot split over {parts!r} owners: need an int >= 1")
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(slice(start, start + size))
        start += size
    return out


def dx_west_columns(cols):
    """Backward-data on ``cols`` mesh columns: columns ``0 .. h-1`` send ``dZ_prev`` out of the
    west edge and ``h .. cols-1`` out of the east edge, ``h = ceil(cols / 2)``, so each edge link
    of a row carries about half of the row's results. Returns ``h``."""
    return (cols + 1) // 2


@dataclass(frozen=True)
class LayerMapping:
    """Where the pieces of one ``M x K`` layer with batch ``B`` live on a ``rows x cols`` wafer.

    ``k_slices[q]``: input features held by column q; ``b_slices[p]``: batch columns held by row p;
    ``m_slices[q]``: outputs (= next layer's inputs) kept by column q after the result broadcast.
    """

    rows: int
    cols: int
    m: int
    k: int
    batch: int

    def __post_init__(self):
        for name in ("rows", "cols", "m", "k", "batch"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"LayerMapping.{name} must be an int >= 1, got {v!r}")

    @property
    def k_slices(self):
        return split(self.k, self.cols)

    @property
    def b_slices(self):
        return split(self.batch, self.rows)

    @property
    def m_slices(self):
        return split(self.m, self.cols)

    @property
    def k_per_col(self):
        """Largest ``|K_q|`` (the column that sets the pace)."""
        return -(-self.k // self.cols)

    @property
    def b_per_row(self):
        """Largest ``|B_p|``."""
        return -(-self.batch // self.rows)
