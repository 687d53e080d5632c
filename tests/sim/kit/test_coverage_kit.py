"""``sim.kit.coverage``: cross bins, reachability, the report's empty reachable bins."""

import pytest

from sim.kit.coverage import Coverage, summary_row


def test_cross_bins_and_report():
    cov = Coverage("t", {"a": [0, 1], "b": ["x", "y"]}, lambda b: not (b["a"] == 1 and b["b"] == "y"))
    cov.hit(a=0, b="x")
    cov.hit(3, a=1, b="x")
    r = cov.report()
    assert (r["bins"], r["reachable"], r["hit"], r["unreachable"]) == (4, 3, 2, 1)
    assert r["empty_reachable"] == [{"a": 0, "b": "y"}]
    assert summary_row("bench", r) == ["bench", "t", "a x b", 4, 3, 2, 1, 1]


def test_unknown_bin_and_hit_unreachable_are_errors():
    cov = Coverage("t", {"a": [0, 1]}, lambda b: b["a"] == 0)
    with pytest.raises(KeyError):
        cov.hit(a=2)
    cov.hit(a=1)
    with pytest.raises(AssertionError, match="unreachable were hit"):
        cov.report()
