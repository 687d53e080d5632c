"""``python -m bench [NAME ...]``: run benchmarks, print their tables, write ``build/bench/<name>.json``.

A benchmark is a module ``bench/<name>.py`` with ``run() -> dict`` returning at least
``{"tables": [{"title": str, "columns": [...], "rows": [[...], ...]}, ...]}``; every other key is
saved in the JSON as well, except ``coverage`` (a list of ``sim.kit.coverage.Coverage.report()``),
which goes to ``build/bench/<name>.coverage.json``. After the benchmarks, a coverage summary (one
row per coverage of the benchmarks run, with their empty reachable bins listed) is printed and
written to ``build/bench/coverage.json``.
"""

import argparse
import importlib
import json
import pkgutil
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import bench
from sim.kit.coverage import SUMMARY_COLUMNS, summary_row, write

OUT = Path(__file__).resolve().parents[1] / "build" / "bench"


# Run only when named (``make bench ARGS=synth``; ``make synth``): minutes of synthesis.
ON_REQUEST = {"synth"}


def available():
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))


def print_tables(console, result):
    for t in result.get("tables", []):
        table = Table(title=t["title"])
        for col in t["columns"]:
            table.add_column(str(col), justify="right")
        for row in t["rows"]:
            table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
        console.print(table)


def main(argv=None):
    names = available()
    ap = argparse.ArgumentParser(prog="python -m bench", description="weightstream benchmarks")
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run (default all: {', '.join(names)})")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in names]
    if unknown:
        ap.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(names)}")
    console = Console()
    OUT.mkdir(parents=True, exist_ok=True)
    summary = []
    for name in args.names or [n for n in names if n not in ON_REQUEST]:
        console.rule(f"bench {name}")
        start = time.perf_counter()
        result = importlib.import_module(f"bench.{name}").run()
        result["wall_seconds"] = round(time.perf_counter() - start, 3)
        print_tables(console, result)
        reports = result.pop("coverage", None)
        if reports:
            cov_path = write(OUT / f"{name}.coverage.json", reports)
            summary += [(name, r) for r in reports]
            console.print(f"wrote {cov_path}")
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(result, indent=2, default=float))
        console.print(f"wrote {path} ({result['wall_seconds']} s)")
    if summary:
        print_coverage(console, summary)
    return 0


def print_coverage(console, summary):
    """The coverage summary of the benchmarks run, and every empty reachable bin."""
    rows = [summary_row(name, r) for name, r in summary]
    console.rule("coverage")
    print_tables(console, {"tables": [{"title": "functional coverage (bins the stimulus can reach)",
                                       "columns": SUMMARY_COLUMNS, "rows": rows}]})
    for name, r in summary:
        for b in r["empty_reachable"]:
            console.print(f"empty reachable bin: {name} / {r['name']}: {b}")
    (OUT / "coverage.json").write_text(json.dumps({"columns": SUMMARY_COLUMNS, "rows": rows,
                                                   "empty_reachable": {f"{n} / {r['name']}": r["empty_reachable"]
                                                                       for n, r in summary}}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
