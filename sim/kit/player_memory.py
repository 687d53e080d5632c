"""Bulk access to the memories of the harness players and recorders (``sim.harness.stream_player``)
from a cocotb bench: written and read through VPI while no simulated time passes."""

import numpy as np

from arch.wavelet import pack_tagged

__all__ = ["load_words", "read_words", "tagged_words"]


def load_words(mem, words):
    """Write ``words`` into player memory ``mem`` from address 0."""
    for i, w in enumerate(words):
        mem[i].value = int(w)


def read_words(mem, count):
    """The first ``count`` words of recorder memory ``mem`` (uint64)."""
    return np.array([int(mem[i].value) for i in range(count)], dtype=np.uint64)


def tagged_words(arrays):
    """Concatenate per-layer word arrays into tagged words (uint64), ``last`` on each array's
    final word."""
    out = []
    for a in arrays:
        a = np.asarray(a).ravel()
        out.append(pack_tagged(a, np.arange(len(a)) == len(a) - 1))
    return np.concatenate(out)
