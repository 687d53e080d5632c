"""Functional coverage: cross bins over named axes, filled from what the benches already record
(transfer logs, stimulus vectors, model runs) after a run, so Python stays off the per-cycle path.

``Coverage(name, axes, reachable=None)``: ``axes`` maps an axis name to its values; a bin is one
value per axis. ``reachable(bin) -> bool`` marks the bins the configuration can produce at all
(e.g. a router never sends a wavelet back out of the port it came from, a split node has no
``C`` unit); unreachable bins are listed apart and never count as holes. ``hit(**bin)`` or
``hit_many(rows)`` count hits; ``report()`` returns the JSON written beside a bench's results:
totals, the empty reachable bins (listed in full) and every bin's count.
"""

import itertools
import json
from pathlib import Path

__all__ = ["Coverage", "summary_row", "SUMMARY_COLUMNS", "write"]

SUMMARY_COLUMNS = ["bench", "coverage", "axes", "bins", "reachable", "hit", "empty reachable", "unreachable"]


class Coverage:
    def __init__(self, name, axes, reachable=None, *, note=""):
        self.name, self.axes, self.note = name, dict(axes), note
        self._reachable = reachable or (lambda b: True)
        self.counts = {key: 0 for key in itertools.product(*self.axes.values())}

    def _key(self, b):
        key = tuple(b[a] for a in self.axes)
        if key not in self.counts:
            raise KeyError(f"{self.name}: {b} is not a bin (axes {list(self.axes)})")
        return key

    def hit(self, count=1, **b):
        self.counts[self._key(b)] += count

    def hit_many(self, rows):
        for b in rows:
            self.counts[self._key(b)] += 1

    def bins(self):
        names = list(self.axes)
        return [dict(zip(names, key)) for key in self.counts]

    def report(self):
        names = list(self.axes)
        reach = {key: bool(self._reachable(dict(zip(names, key)))) for key in self.counts}
        empty = [dict(zip(names, k)) for k, n in self.counts.items() if reach[k] and n == 0]
        hit_unreachable = [dict(zip(names, k)) for k, n in self.counts.items() if not reach[k] and n]
        if hit_unreachable:
            raise AssertionError(f"{self.name}: bins declared unreachable were hit: {hit_unreachable[:5]}")
        return {
            "name": self.name, "note": self.note, "axes": {a: list(v) for a, v in self.axes.items()},
            "bins": len(self.counts), "reachable": sum(reach.values()),
            "hit": sum(1 for k, n in self.counts.items() if n),
            "unreachable": len(self.counts) - sum(reach.values()),
            "empty_reachable": empty,
            "counts": [[*k, n, reach[k]] for k, n in self.counts.items()],
        }


def summary_row(bench, report):
    return [bench, report["name"], " x ".join(report["axes"]), report["bins"], report["reachable"], report["hit"],
            len(report["empty_reachable"]), report["unreachable"]]


def write(path, reports):
    """Write ``reports`` (a list of ``Coverage.report()``) as JSON to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"coverage": reports}, indent=1, default=str))
    return path
