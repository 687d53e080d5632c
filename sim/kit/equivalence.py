"""Equivalence of two Verilog texts of one design, proved by YoWASP's Yosys.

``equivalent(gold, gate, top, work)`` reads each text, flattens module ``top`` (``prep -flatten``),
pairs the two designs' registers and outputs by name (``equiv_make``) and proves every pair equal
(``equiv_simple -seq 2``, then ``equiv_induct``). For checking that a rewrite of generated Verilog
(:mod:`hdl.module_merge`, :mod:`hdl.shared_block`) keeps the circuit; small designs only.
"""

import subprocess
from pathlib import Path

from sim.kit.toolchain import yosys

__all__ = ["equivalent"]


def equivalent(gold, gate, top, work):
    """``(True, log)`` when Yosys proves Verilog texts ``gold`` and ``gate`` the same circuit
    (top module ``top``; files written to folder ``work``), else ``(False, log)``."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    (work / "gold.v").write_text(gold)
    (work / "gate.v").write_text(gate)
    script = (f"read_verilog gold.v; prep -flatten -top {top}; rename {top} gold; design -stash gold; "
              f"read_verilog gate.v; prep -flatten -top {top}; rename {top} gate; design -stash gate; "
              "design -copy-from gold -as gold gold; design -copy-from gate -as gate gate; "
              "equiv_make gold gate equiv; hierarchy -top equiv; equiv_simple -seq 2; equiv_induct; "
              "equiv_status -assert")
    run = subprocess.run([yosys(), "-q", "-p", script], cwd=work, capture_output=True, text=True)
    return run.returncode == 0, run.stdout + run.stderr
