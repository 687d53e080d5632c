"""``python -m sim.mutate`` (``make mutate``): mutation testing of the RTL.

Every operator mutant of the circuit sources (:mod:`sim.mutate.targets`, :mod:`sim.mutate.mutants`),
or a fixed sample of each file's (``--sample N``, seeded), runs against its block's tests
(:mod:`sim.mutate.campaign`). Prints a table per file and the survivors, writes
``build/mutate/mutate.json``; exits 1 when a survivor is not explained in
:mod:`sim.mutate.equivalent` or an explained one was killed.
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sim.mutate.campaign import run
from sim.mutate.equivalent import EQUIVALENT
from sim.mutate.mutants import mutants
from sim.mutate.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "mutate" / "mutate.json"
PLAIN = {"highlight": False, "soft_wrap": True, "markup": False}
COLUMNS = ["file", "mutants", "of", "killed", "timeout", "equivalent", "survived", "stillborn", "score"]


def select(paths, sample, seed):
    """The mutants of ``paths``: all of them (``sample`` 0), or ``sample`` per file drawn with ``seed``
    (in source order)."""
    chosen, totals = [], {}
    for path in paths:
        found = mutants(path, ROOT)
        totals[path] = len(found)
        if sample and len(found) > sample:
            rng = random.Random(f"{seed}:{path}")
            found = [found[i] for i in sorted(rng.sample(range(len(found)), sample))]
        chosen += found
    return chosen, totals


def summarize(results, totals):
    """One row per file and a total: counts by status; score = (killed + timeout) / (run -
    stillborn - equivalent)."""
    rows = []
    for path in list(totals) + [None]:
        mine = [r for r in results if path is None or r["path"] == path]
        n = {s: sum(r["status"] == s for r in mine) for s in ("killed", "timeout", "survived", "stillborn", "error")}
        equivalent = sum(r["status"] == "survived" and r["key"] in EQUIVALENT for r in mine)
        counted = len(mine) - n["stillborn"] - n["error"] - equivalent
        score = (n["killed"] + n["timeout"]) / counted if counted else 1.0
        rows.append([path or "all", len(mine), sum(totals.values()) if path is None else totals[path], n["killed"],
                     n["timeout"], equivalent, n["survived"] - equivalent, n["stillborn"], round(score, 3)])
    return rows


def _by_key(keys):
    """The current mutants named by ``keys`` (``None`` for a key no file has any more)."""
    every, _ = select(sorted({k.split(":", 1)[0] for k in keys} & set(TARGETS)), 0, 0)
    found = {m.key: m for m in every}
    return [found.get(k) for k in keys]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m sim.mutate", description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", metavar="FILE", help=f"sources to mutate (default: all {len(TARGETS)})")
    ap.add_argument("--sample", type=int, default=10, metavar="N",
                    help="mutants per file, drawn with --seed (0: every mutant; default 10)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="mutants run at a time (default 2)")
    ap.add_argument("--key", action="append", default=[], metavar="KEY",
                    help="run the mutant KEY (as printed; repeatable) and update mutate.json with it")
    ap.add_argument("--again", action="store_true",
                    help="run the unexplained survivors of mutate.json again (after new tests) and update it")
    ap.add_argument("--list", action="store_true", help="list the mutants chosen and stop")
    args = ap.parse_args(argv)
    unknown = [f for f in args.files if f not in TARGETS]
    if unknown:
        ap.error(f"not a mutated source: {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    if args.sample < 0 or args.jobs < 1:
        ap.error("--sample must be >= 0 and --jobs >= 1")
    previous = None
    if args.key or args.again:
        if not OUT.exists():
            ap.error(f"--key and --again update {OUT.relative_to(ROOT)}, which does not exist: run a campaign first")
        previous = json.loads(OUT.read_text())
        keys = args.key or [r["key"] for r in previous["mutants"]
                            if r["status"] == "error" or r["status"] == "survived" and r["key"] not in EQUIVALENT]
        chosen = _by_key(keys)
        missing = [k for k, m in zip(keys, chosen) if m is None]
        if missing:
            ap.error(f"no such mutant now: {', '.join(missing)} (--list --sample 0 FILE lists them)")
        totals, seed, sample = previous["totals"], previous["seed"], previous["sample"]
    else:
        chosen, totals = select(args.files or list(TARGETS), args.sample, args.seed)
        seed, sample = args.seed, args.sample
    console = Console(width=160)
    if args.list:
        for m in chosen:
            console.print(f"{m.key}  line {m.line}: {m.text}", **PLAIN)
        return 0
    t0 = time.perf_counter()
    results = run(ROOT, chosen, jobs=args.jobs, progress=lambda s: console.print(s, **PLAIN)) if chosen else []
    seconds = round(time.perf_counter() - t0)
    if previous:
        merged = {r["key"]: r for r in previous["mutants"]}
        merged.update({r["key"]: r for r in results})
        results, seconds = list(merged.values()), previous["seconds"] + seconds
    rows = summarize(results, totals)
    table = Table(title=f"mutation score (seed {seed}, {sample or 'all'} per file)")
    for c in COLUMNS:
        table.add_column(c, justify="right")
    for row in rows:
        table.add_row(*map(str, row))
    console.print(table)
    survivors = [r for r in results if r["status"] == "survived" and r["key"] not in EQUIVALENT]
    stale = [r for r in results if r["status"] != "survived" and r["key"] in EQUIVALENT]
    for r in survivors:
        console.print(f"survived: {r['key']}  line {r['line']}: {r['text']}"
                      f"  (tiny netlist {'changed' if r['tiny_netlist_changed'] else 'unchanged'})", **PLAIN)
    for r in stale:
        console.print(f"listed as equivalent but {r['status']}: {r['key']}", **PLAIN)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"seed": seed, "sample": sample, "totals": totals, "columns": COLUMNS, "rows": rows,
                               "seconds": seconds, "mutants": results,
                               "equivalent": {r["key"]: EQUIVALENT[r["key"]] for r in results
                                              if r["status"] == "survived" and r["key"] in EQUIVALENT}},
                              indent=1))
    console.print(f"wrote {OUT.relative_to(ROOT)}", **PLAIN)
    return 1 if survivors or stale else 0


if __name__ == "__main__":
    sys.exit(main())
