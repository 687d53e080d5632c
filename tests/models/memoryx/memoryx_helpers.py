"""Helpers shared by the MemoryX tests (not a test module)."""

import tracemalloc

import numpy as np


def assert_same_state(a, b):
    """Two ``MemoryX.snapshot()`` results are identical (bit for bit)."""
    assert a.keys() == b.keys()
    for k in a:
        if k != "layers":
            assert a[k] == b[k], k
    assert a["layers"].keys() == b["layers"].keys()
    for name, la in a["layers"].items():
        lb = b["layers"][name]
        assert la.keys() == lb.keys()
        for k in la:
            if isinstance(la[k], np.ndarray):
                assert la[k].dtype == lb[k].dtype
                np.testing.assert_array_equal(la[k].view(np.uint8), lb[k].view(np.uint8),
                                              err_msg=f"{name}.{k}")
            else:
                assert la[k] == lb[k], f"{name}.{k}"


def peak_heap(fn):
    """(result, peak heap bytes allocated while ``fn`` ran), by tracemalloc (numpy reports its buffers)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
