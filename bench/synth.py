"""Synthesis: area and Fmax of every Verilog top on a Lattice iCE40 HX8K (``make synth``).

``python -m bench.synth [--jobs N] [--timeout S] [NAME ...]``; ``make bench ARGS=synth`` runs it
too (it is not part of a plain ``make bench``: it takes minutes).

For every entry of :data:`ENTRIES` (a top at a configuration):

1. ``hdl.generate`` writes its Verilog into ``build/synth/<entry>/``;
2. Debian's yosys runs ``synth_ice40`` on the top alone: LUT4s, flip-flops, block RAMs
   (``SB_RAM40_4K``), carry cells, and the longest flip-flop-to-flip-flop path counted in LUT
   levels (carry cells count 0; computed from the netlist by :func:`lut_levels`);
3. when the top fits an HX8K (7,680 LUT4s, 7,680 flip-flops, 32 block RAMs), it is synthesized
   again inside a *pin wrapper* (every input bit from a shift register fed by one pin, every output
   bit into a register and a registered XOR tree to one pin, so no logic is optimised away and an
   HX8K's pins suffice) and placed and routed by ``nextpnr-ice40 --hx8k --package ct256``; its
   reported Fmax of ``clk`` is the figure. The wrapper's paths are register to register and
   shallow (at most 2 LUT levels each), so the top's own paths set the Fmax.

Results: a table printed, ``build/synth/synth.json``. Tops that do not fit (e.g. the mesh) get LUT
levels only; a step that exceeds ``--timeout`` seconds is reported as ``timeout``.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "synth"

HX8K = {"lut4": 7680, "ff": 7680, "bram": 32}
DEVICE = ["--hx8k", "--package", "ct256"]

# (entry name, top, preset, configuration changes)
ENTRIES = [
    ("skid_buffer", "skid_buffer", "tiny", {}),
    ("fp32_add", "fp32_add", "tiny", {}),
    ("bf16_mul", "bf16_mul", "tiny", {}),
    ("fp32_add_l4", "fp32_add", "tiny", {"fp_latency": 4}),
    ("fp32_add_l5", "fp32_add", "tiny", {"fp_latency": 5}),
    ("fp32_add_l6", "fp32_add", "tiny", {"fp_latency": 6}),
    ("bf16_mul_l3", "bf16_mul", "tiny", {"fp_latency": 3}),
    ("bf16_mul_l4", "bf16_mul", "tiny", {"fp_latency": 4}),
    ("router", "router", "tiny", {}),
    ("router_d2", "router", "tiny", {"vc_depth": 2}),
    ("router_c2", "router", "tiny", {"num_colors": 2, "vc_depth": 2}),
    ("swarmx", "swarmx", "tiny", {"swarmx_leaves": 4}),
    ("swarmx_l6", "swarmx", "tiny", {"swarmx_leaves": 4, "fp_latency": 6}),
    ("pe_core", "pe_core", "tiny", {}),
    ("tile", "tile", "tiny", {}),
    ("mesh4x4", "mesh4x4", "tiny", {}),
    ("wafer", "wafer", "tiny", {}),
    ("system", "system", "tiny", {}),
]

COLUMNS = ["entry", "top", "configuration", "LUT4", "FF", "BRAM", "carry", "LUT levels", "fits HX8K",
           "Fmax MHz", "synth s", "pnr s"]


def entries():
    """The entries whose configuration this code accepts (so the flow also runs on older trees)."""
    from hdl.config import Config

    fields = set(Config().as_dict())
    return [e for e in ENTRIES if set(e[3]) <= fields]


def _run(cmd, log, timeout, cwd=None):
    """Run ``cmd`` writing its output to ``log``; True on success, False on failure, None on timeout."""
    with open(log, "w") as f:
        try:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, cwd=cwd)
        except subprocess.TimeoutExpired:
            return None
    return p.returncode == 0


def _ports(netlist, top):
    """[(name, direction, width)] of module ``top`` in a yosys JSON netlist."""
    mod = netlist["modules"][top]
    return [(n, p["direction"], len(p["bits"])) for n, p in mod["ports"].items()]


def lut_levels(netlist, top):
    """Longest combinational path of module ``top`` (a synth_ice40 netlist) counted in SB_LUT4s.

    Paths start at flip-flops, block RAM outputs and module inputs and end at their inputs or at
    module outputs; an SB_CARRY passes its level on without adding one (its logic is the carry
    chain's, beside a LUT)."""
    mod = netlist["modules"][top]
    driver = {}     # net bit -> (cell name, weight)
    sinks = {}      # cell -> list of input bits
    for name, cell in mod["cells"].items():
        kind = cell["type"]
        if kind not in ("SB_LUT4", "SB_CARRY"):
            continue
        dirs = cell.get("port_directions", {})
        ins, outs = [], []
        for port, bits in cell["connections"].items():
            (outs if dirs.get(port) == "output" else ins).extend(b for b in bits if isinstance(b, int))
        sinks[name] = ins
        for b in outs:
            driver[b] = (name, 1 if kind == "SB_LUT4" else 0)
    depth = {}
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def level(cell):
        # iterative DFS to stay clear of Python's recursion limit on long carry chains
        stack = [(cell, False)]
        while stack:
            c, done = stack.pop()
            if c in depth and not done:
                continue
            preds = [driver[b][0] for b in sinks[c] if b in driver]
            if not done:
                stack.append((c, True))
                stack.extend((p, False) for p in preds if p not in depth)
                continue
            weight = 1 if mod["cells"][c]["type"] == "SB_LUT4" else 0
            depth[c] = weight + max((depth.get(p, 0) for p in preds), default=0)
        return depth[cell]

    return max((level(c) for c in sinks), default=0)


def _stats(netlist, top):
    counts = {}
    for cell in netlist["modules"][top]["cells"].values():
        counts[cell["type"]] = counts.get(cell["type"], 0) + 1
    ff = sum(v for k, v in counts.items() if k.startswith("SB_DFF"))
    return {
        "lut4": counts.get("SB_LUT4", 0),
        "ff": ff,
        "bram": sum(v for k, v in counts.items() if k.startswith("SB_RAM")),
        "carry": counts.get("SB_CARRY", 0),
        "cells": counts,
    }


def wrapper_verilog(top, ports):
    """A module ``synth_wrap`` with pins ``clk``, ``din``, ``dout`` around ``top``: every input bit
    (``rst`` too) from a shift register fed by ``din``, every output bit registered and folded by a
    registered XOR tree (4 inputs per LUT level) into ``dout``."""
    ins = [(n, w) for n, d, w in ports if d == "input" and n != "clk"]
    outs = [(n, w) for n, d, w in ports if d == "output"]
    n_in = sum(w for _, w in ins)
    n_out = sum(w for _, w in outs)
    lines = ["module synth_wrap(input wire clk, input wire din, output wire dout);",
             f"  reg [{max(n_in, 1) - 1}:0] sr;",
             "  always @(posedge clk) sr <= {sr, din};" if n_in > 1 else "  always @(posedge clk) sr <= din;",
             f"  wire [{n_out - 1}:0] y;",
             f"  reg [{n_out - 1}:0] y_r;",
             "  always @(posedge clk) y_r <= y;"]
    conns = [".clk(clk)"]
    pos = 0
    for n, w in ins:
        conns.append(f".{n}(sr[{pos + w - 1}:{pos}])")
        pos += w
    pos = 0
    for n, w in outs:
        conns.append(f".{n}(y[{pos + w - 1}:{pos}])")
        pos += w
    lines.append(f"  {top} dut ({', '.join(conns)});")
    level, width, prev = 0, n_out, "y_r"
    while width > 1:
        nxt = (width + 3) // 4
        name = f"x{level}"
        lines.append(f"  reg [{nxt - 1}:0] {name};")
        lines.append("  integer i_" + name + ";")
        lines.append(f"  always @(posedge clk) for (i_{name} = 0; i_{name} < {nxt}; i_{name} = i_{name} + 1)")
        terms = " ^ ".join(f"((i_{name} * 4 + {j} < {width}) ? {prev}[i_{name} * 4 + {j}] : 1'b0)"
                           for j in range(4))
        lines.append(f"    {name}[i_{name}] <= {terms};")
        level, width, prev = level + 1, nxt, name
    lines.append(f"  assign dout = {prev}[0];" if n_out > 1 else "  assign dout = y_r[0];")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def _generate(entry, top, preset_name, changes):
    from hdl.config import preset
    from hdl.generate import generate

    folder = OUT / entry
    folder.mkdir(parents=True, exist_ok=True)
    generate([top], preset(preset_name, **changes), folder, jobs=1)
    return folder / f"{top}.v"


def synth_entry(entry, top, preset_name, changes, timeout):
    """Synthesize one entry; returns its result dictionary."""
    res = {"entry": entry, "top": top, "preset": preset_name, "changes": changes}
    folder = OUT / entry
    verilog = folder / f"{top}.v"       # written by run() before the tools start
    t0 = time.perf_counter()
    netlist_path = folder / "synth.json"
    ok = _run(["yosys", "-q", "-l", str(folder / "yosys.log"), "-p",
               f"read_verilog -sv {verilog}; synth_ice40 -top {top}; write_json {netlist_path}"],
              folder / "yosys.out", timeout)
    res["synth_seconds"] = round(time.perf_counter() - t0, 1)
    if ok is None:
        res["status"] = "synth timeout"
        return res
    if not ok:
        res["status"] = "synth failed (see " + str(folder / "yosys.log") + ")"
        return res
    netlist = json.loads(netlist_path.read_text())
    res.update(_stats(netlist, top))
    res["lut_levels"] = lut_levels(netlist, top)
    res["fits"] = all(res[k] <= HX8K[k] for k in HX8K)
    if not res["fits"]:
        res["status"] = "does not fit HX8K"
        return res
    (folder / "wrap.v").write_text(wrapper_verilog(top, _ports(netlist, top)))
    wrapped = folder / "wrap.json"
    t0 = time.perf_counter()
    ok = _run(["yosys", "-q", "-l", str(folder / "yosys_wrap.log"), "-p",
               f"read_verilog -sv {verilog} {folder / 'wrap.v'}; synth_ice40 -top synth_wrap; "
               f"write_json {wrapped}"], folder / "yosys_wrap.out", timeout)
    if ok:
        log = folder / "nextpnr.log"
        ok = _run(["nextpnr-ice40", *DEVICE, "--json", str(wrapped), "--pcf-allow-unconstrained",
                   "--freq", "12", "--timing-allow-fail", "--seed", "1", "--report", str(folder / "pnr.json")],
                  log, timeout)
    res["pnr_seconds"] = round(time.perf_counter() - t0, 1)
    if ok is None:
        res["status"] = "place and route timeout"
        return res
    if not ok:
        text = (folder / "nextpnr.log").read_text(errors="replace")
        cells = re.findall(r"ICESTORM_LC:\s+(\d+)/\s*(\d+)", text)
        if cells and int(cells[-1][0]) > int(cells[-1][1]):
            # LUT4s and flip-flops that cannot share logic cells: more cells than the device has
            res["status"] = f"does not fit HX8K ({cells[-1][0]}/{cells[-1][1]} logic cells with the pin wrapper)"
        else:
            res["status"] = "place and route failed (see " + str(folder / "nextpnr.log") + ")"
        res["fits"] = False
        return res
    found = re.findall(r"Max frequency for clock\s+'[^']*clk[^']*':\s+([0-9.]+) MHz",
                       (folder / "nextpnr.log").read_text())
    res["fmax_mhz"] = float(found[-1]) if found else None
    res["status"] = "ok"
    return res


def _row(r):
    conf = r["preset"] + "".join(f" {k}={v}" for k, v in r["changes"].items())
    fits = {True: "yes", False: "no"}.get(r.get("fits"), "-")
    fmax = r.get("fmax_mhz")
    return [r["entry"], r["top"], conf, r.get("lut4", "-"), r.get("ff", "-"), r.get("bram", "-"),
            r.get("carry", "-"), r.get("lut_levels", "-"), fits,
            f"{fmax:.1f}" if fmax else (r["status"] if r["status"] != "ok" else "-"),
            r.get("synth_seconds", "-"), r.get("pnr_seconds", "-")]


def tools_missing():
    return [t for t in ("yosys", "nextpnr-ice40") if shutil.which(t) is None]


def run(names=None, jobs=2, timeout=900):
    todo = [e for e in entries() if not names or e[0] in names]
    OUT.mkdir(parents=True, exist_ok=True)
    # Verilog first, serially (elaboration is Python; it keeps the workers to the tools).
    for entry, top, preset_name, changes in todo:
        _generate(entry, top, preset_name, changes)

    def one(e):
        r = synth_entry(*e, timeout)
        print(f"synth {r['entry']}: {r['status']}"
              + (f", {r['lut4']} LUT4, {r['ff']} FF, {r['bram']} BRAM, {r['lut_levels']} LUT levels"
                 if "lut4" in r else "")
              + (f", Fmax {r['fmax_mhz']} MHz" if r.get("fmax_mhz") else ""), flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, todo))
    for r in results:
        r.pop("cells", None)
    result = {
        "device": "iCE40 HX8K, ct256 (nextpnr-ice40)",
        "tools": {"yosys": _version(["yosys", "-V"]), "nextpnr": _version(["nextpnr-ice40", "--version"])},
        "results": results,
        "tables": [{"title": "Synthesis on iCE40 HX8K (yosys synth_ice40, nextpnr-ice40)", "columns": COLUMNS,
                    "rows": [_row(r) for r in results]}],
    }
    return result


def _version(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "?"


def main(argv=None):
    global OUT
    ap = argparse.ArgumentParser(prog="python -m bench.synth", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help=f"entries (default all: {', '.join(e[0] for e in entries())})")
    ap.add_argument("--jobs", type=int, default=2, help="entries synthesized at a time (default 2)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per tool run (default 900)")
    ap.add_argument("--out", default=str(OUT), help=f"output folder (default {OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    OUT = Path(args.out).resolve()
    missing = tools_missing()
    if missing:
        print(f"error: {', '.join(missing)} not found (Debian: apt-get install yosys nextpnr-ice40)",
              file=sys.stderr)
        return 2
    known = [e[0] for e in entries()]
    unknown = [n for n in args.names if n not in known]
    if unknown:
        ap.error(f"unknown entries {', '.join(unknown)}; known: {', '.join(known)}")
    from rich.console import Console

    from bench.__main__ import print_tables

    result = run(args.names, args.jobs, args.timeout)
    Console().print()
    print_tables(Console(width=200), result)
    path = OUT / "synth.json"
    if args.names and path.exists():      # a partial run updates its entries only
        old = json.loads(path.read_text())
        merged = {r["entry"]: r for r in old.get("results", [])}
        merged.update({r["entry"]: r for r in result["results"]})
        order = [e[0] for e in entries()]
        result["results"] = sorted(merged.values(), key=lambda r: order.index(r["entry"])
                                   if r["entry"] in order else len(order))
        result["tables"][0]["rows"] = [_row(r) for r in result["results"]]
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
