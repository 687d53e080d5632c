"""The Verilog of the RTL-wafer system harness and its plain-Verilog testbench, generated once per
configuration.

Amaranth takes about half a minute to elaborate and convert the system (2 wafers of 2 x 2 PE
tiles, SwarmX, players and recorders), so the files are kept in
``build/sim/system_rtl-<key>/`` (``system_rtl.v``, ``system_tb.v``), the key a hash of what they
depend on: the ``hdl/`` and ``arch/`` sources, the harness sources, the hardware ``Config``, the
memory depths and the Python and Amaranth versions (as ``make verilog``'s stamps).
"""

import hashlib
import json
from pathlib import Path

from sim.kit.runner import BUILD, locked

__all__ = ["DUT", "system_sources"]

DUT = "system_rtl"
_HARNESS_SOURCES = ("sim/harness/rtl_system.py", "sim/harness/stream_player.py", "sim/harness/system_tb.py")


def _key(cfg, depths):
    from hdl.build_key import ROOT, build_key
    h = hashlib.sha256()
    for rel in _HARNESS_SOURCES:
        h.update(rel.encode() + b"\0" + (Path(ROOT) / rel).read_bytes() + b"\0")
    inputs = build_key(DUT, cfg)
    inputs.update(depths=depths, harness=h.hexdigest())
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def system_sources(cfg, depths, *, log=None):
    """``[system_rtl.v, system_tb.v]`` for hardware ``cfg`` and the harness memory ``depths``
    (``sim.system.rtl.harness_depths``; generated when missing; ``log(text)`` is told when that
    happens)."""
    from sim.harness.system_tb import system_tb_text
    folder = BUILD / f"{DUT}-{_key(cfg, depths)}"
    design, tb = folder / f"{DUT}.v", folder / "system_tb.v"
    with locked(folder):
        if not design.exists():
            from hdl.verilog import verilog_text
            from sim.harness.rtl_system import RtlSystemHarness
            if log:
                log(f"generating the Verilog of the system into {folder}")
            tmp = folder / f".{DUT}.v.tmp"
            tmp.write_text(verilog_text(RtlSystemHarness(cfg, **depths), DUT))
            tmp.replace(design)
        text = system_tb_text(DUT, cfg.swarmx_leaves, cfg.mesh_rows, cfg.mesh_cols)
        if not tb.exists() or tb.read_text() != text:
            tb.write_text(text)
    return [design, tb]
