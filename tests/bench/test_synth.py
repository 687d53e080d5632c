"""The parts of ``make synth`` (bench/synth.py) that read the tools' outputs: the post-route Fmax
of a nextpnr log, its critical path from the ``--report`` JSON, and the tables they go into."""

import json

from bench.synth import ECP5_ARCS, _assemble, critical_path, deepest_path, fmax, lut_levels


def _seg(kind, delay, src, dst, net=None):
    seg = {"type": kind, "delay": delay, "from": {"cell": src, "port": "Q", "loc": [1, 1]},
           "to": {"cell": dst, "port": "D", "loc": [2, 2]}}
    if net:
        seg["net"] = net
    return seg


# The shape nextpnr 0.11's --report writes (taken from the report of pe_core_hw, shortened):
# clock-to-out, then routing and logic alternating, then setup.
REPORT = {
    "fmax": {"clk": {"achieved": 52.14, "constraint": 75}},
    "critical_paths": [{
        "from": "clk", "to": "clk",
        "path": [
            _seg("clk-to-q", 0.525, "table.desc_FF", "table.desc_FF"),
            _seg("routing", 0.728, "table.desc_FF", "match_LUT", net="desc[2][14]"),
            _seg("logic", 0.236, "match_LUT", "match_LUT"),
            _seg("routing", 3.42, "match_LUT", "step_LUT", net="step"),
            _seg("logic", 0.262, "step_LUT", "step_LUT"),
            _seg("routing", 0.38, "step_LUT", "table.aptr_FF", net="aptr_next"),
            _seg("setup", 0.0, "table.aptr_FF", "table.aptr_FF"),
        ],
    }],
}


def test_critical_path_splits_logic_and_routing():
    c = critical_path(REPORT)
    assert c == {"ns": 5.55, "logic_ns": 1.02, "routing_ns": 4.53, "logic_cells": 2,
                 "from": "table.desc_FF", "to": "table.aptr_FF", "net": "step", "net_ns": 3.42}


def test_critical_path_of_a_report_without_one():
    assert critical_path({"fmax": {}, "critical_paths": []}) is None
    assert critical_path({}) is None


def test_fmax_is_the_last_figure_of_the_log(tmp_path):
    log = tmp_path / "nextpnr.log"
    log.write_text("Info: Max frequency for clock 'clk': 40.10 MHz (FAIL at 75.00 MHz)\n"
                   "Info: Max frequency for clock 'clk': 52.14 MHz (FAIL at 75.00 MHz)\n")
    assert fmax(log) == 52.14
    log.write_text("Info: no timing\n")
    assert fmax(log) is None


def test_critical_paths_table_lists_routed_entries_only():
    routed = {"device": "ecp5", "entry": "pe_core_hw", "top": "pe_core", "preset": "tiny", "changes": {},
              "status": "ok", "critical_path": critical_path(REPORT), "lut_levels": 11,
              "lut_path": ["rx2__payload", "table.aptr_next"]}
    packed = {"device": "ecp5", "entry": "router_c2_d2", "top": "router", "preset": "tiny", "changes": {},
              "status": "ok"}
    tables = _assemble({}, [routed, packed])["tables"]
    paths = [t for t in tables if t["title"].startswith("Critical paths")]
    assert len(paths) == 1
    assert paths[0]["rows"] == [["ecp5", "pe_core_hw", 5.55, 1.02, 4.53, 2, "step (3.42)", "table.desc_FF",
                                 "table.aptr_FF", "11: rx2__payload -> table.aptr_next"]]
    json.dumps(tables)      # the result goes into synth.json


def _lut(a, z):
    return {"type": "LUT4", "port_directions": {"A": "input", "Z": "output"}, "connections": {"A": [a], "Z": [z]}}


def test_deepest_path_names_where_it_starts_and_ends():
    """Input ``a`` through two LUTs into a flip-flop, input ``b`` through one: the deepest path is
    two levels from ``a``; its last net is named by the user's name, not yosys' ``$`` one."""
    netlist = {"modules": {"top": {
        "cells": {"l1": _lut(2, 3), "l2": _lut(3, 4), "l3": _lut(5, 6),
                  "ff": {"type": "TRELLIS_FF", "port_directions": {"DI": "input", "Q": "output"},
                         "connections": {"DI": [4], "Q": [7]}}},
        "netnames": {"a": {"bits": [2]}, "$abc$1": {"bits": [3]}, "$abc$2": {"bits": [4]},
                     "q_next": {"bits": [4]}, "b": {"bits": [5]}, "n6": {"bits": [6]}, "q": {"bits": [7]}},
    }}}
    assert deepest_path(netlist, "top", ECP5_ARCS) == (2, "a", "q_next")
    assert lut_levels(netlist, "top", ECP5_ARCS) == 2
    assert deepest_path({"modules": {"top": {"cells": {}, "netnames": {}}}}, "top", ECP5_ARCS) == (0, "", "")
