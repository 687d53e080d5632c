"""Bulk access to the memories of the harness players and recorders (``sim.harness.stream_player``)
from a cocotb bench: written and read through VPI while no simulated time passes."""

import numpy as np

__all__ = ["LAST", "load_words", "read_words", "tagged_words"]

LAST = 1 << 32  # the ``last`` bit of a tagged word ``{data: 32, last: 1}``


def load_words(mem, words):
    """Write ``words`` into player memory ``mem`` from address 0."""
    for i, w in enumerate(words):
        mem[i].value = int(w)


def read_words(mem, count):
    """The first ``count`` words of recorder memory ``mem`` (uint64)."""
    return np.array([int(mem[i].value) for i in range(count)], dtype=np.uint64)


def tagged_words(arrays):
    """Concatenate per-layer word arrays into tagged words, ``last`` on each array's final word."""
    out = []
    for a in arrays:
        w = np.asarray(a, dtype=np.uint64).ravel().copy()
        w[-1] |= LAST
        out.append(w)
    return np.concatenate(out)
