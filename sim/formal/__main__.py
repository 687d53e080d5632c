"""``python -m sim.formal [NAME ...]`` (``make formal``): prove the stream properties of the
listed blocks (default all of ``sim.formal.PROOFS``), print a table, write
``build/formal/formal.json``. Exits 1 when a proof fails or does not close."""

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from sim.formal import PROOFS
from sim.kit.formal import BUILD, prove, require_yosys


def summary_rows(results):
    rows = []
    for r in results:
        covers = r["covers"].values()
        reached = sum(1 for c in covers if c["reached"])
        never = sum(1 for c in covers if c["unreachable"])
        rows.append([r["name"], r["what"], r["asserts"], r["assumes"], r["netlist_asserts"],
                     r["status"], r["steps"], f"{reached} / {never} / {len(r['covers']) - reached - never}",
                     r["seconds"]])
    return rows


COLUMNS = ["proof", "top", "asserts", "assumes", "netlist asserts", "result", "k",
           "covers reached / proved unreachable / open", "s"]


def print_table(console, results):
    table = Table(title="formal: stream properties (BMC + k-induction, Yosys sat)")
    for c in COLUMNS:
        table.add_column(c, justify="right")
    for row in summary_rows(results):
        table.add_row(*(str(v) for v in row))
    console.print(table)


def main(argv=None):
    names = [p.name for p in PROOFS]
    ap = argparse.ArgumentParser(prog="python -m sim.formal", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"proofs (default all: {', '.join(names)})")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.names) - set(names))
    if unknown:
        ap.error(f"unknown proof(s) {', '.join(unknown)}; known: {', '.join(names)}")
    require_yosys()
    console = Console()
    results = []
    for p in PROOFS:
        if args.names and p.name not in args.names:
            continue
        r = prove(p.make(), p.name, steps=p.steps, fair_stall=p.fair_stall, covers=p.covers,
                  cover_steps=p.cover_steps, cache=False)
        r["what"] = p.what
        results.append(r)
        never = [k for k, c in r["covers"].items() if c["unreachable"]]
        missed = [k for k, c in r["covers"].items() if not c["reached"] and not c["unreachable"]]
        console.print(f"{p.name}: {r['status']} (k = {r['steps']}, {r['seconds']} s)"
                      + (f"; covers proved unreachable: {', '.join(never)}" if never else "")
                      + (f"; covers not reached within the bound: {', '.join(missed)}" if missed else ""))
    print_table(console, results)
    BUILD.mkdir(parents=True, exist_ok=True)
    out = BUILD / "formal.json"
    previous = json.loads(out.read_text()) if out.exists() and args.names else {"proofs": []}
    kept = [r for r in previous.get("proofs", []) if r["name"] not in {x["name"] for x in results}]
    order = {p.name: k for k, p in enumerate(PROOFS)}
    proofs = sorted(kept + results, key=lambda r: order.get(r["name"], len(order)))
    out.write_text(json.dumps({"columns": COLUMNS, "proofs": proofs}, indent=2))
    console.print(f"wrote {out}")
    return 0 if all(r["status"] == "proved" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
