"""Amaranth component -> Verilog -> Icarus Verilog -> cocotb, from pytest or a script.

Works around the toolchain traps of docs/verification.md#toolchain:

* Amaranth's Verilog has no ``timescale``: we build with ``timescale=("1ns", "1ps")``.
* Icarus compiles with ``-g2005`` (under ``-g2012`` the ``always @*`` blocks do not run at time 0).
* Waves: FST only when ``WAVES=1``, written by a small Verilog-2005 dump module of ours (the
  runner's own dump module needs SystemVerilog).
* Every parameter set gets its own build folder (named by a hash of the Verilog) and every test
  its own run folder, so pytest-xdist workers never collide.

Bench parameters travel to the cocotb module as JSON in ``WS_PARAMS``; read them with
:func:`sim.kit.params`.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from hdl.verilog import verilog_text

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "sim"
TIMESCALE = ("1ns", "1ps")

__all__ = ["ROOT", "BUILD", "build_dir_for", "run_bench", "config_verilog",
           "run_vvp", "waves_requested", "require_iverilog", "locked"]


def waves_requested():
    return os.environ.get("WAVES", "0") not in ("", "0")


def require_iverilog():
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        raise RuntimeError("Icarus Verilog (iverilog, vvp) is not on PATH: install Debian's "
                           "'iverilog' package (apt-get install iverilog), or run through make")


def build_dir_for(name, sources_text):
    digest = hashlib.sha1("\n".join(sources_text).encode()).hexdigest()[:12]
    return BUILD / f"{name}-{digest}"


@contextlib.contextmanager
def locked(directory):
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def _without_env(name):
    saved = os.environ.pop(name, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[name] = saved


def _dump_module(toplevel, fst_path):
    return (
        "module ws_waves;\n"
        "  initial begin\n"
        f'    $dumpfile("{fst_path}");\n'
        f"    $dumpvars(0, {toplevel});\n"
        "  end\n"
        "endmodule\n"
    )


def _safe(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[-120:]


def config_verilog(name, cfg, build):
    """Path of the Verilog of ``build(cfg)`` (a component of hardware configuration ``cfg``) as
    module ``name``, generated once per ``hdl.generate.build_key(name, cfg)`` (the ``hdl/`` and
    ``arch/`` sources, ``cfg``, the Python and Amaranth versions) into
    ``build/sim/verilog-<name>-<key>/``: benches of one design share it (Amaranth takes seconds
    for a router, about a minute for a wafer of 2 x 3 PE tiles)."""
    from hdl.generate import build_key
    folder = BUILD / f"verilog-{name}-{build_key(name, cfg)['key'][:16]}"
    path = folder / f"{name}.v"
    with locked(folder):
        if not path.exists():
            tmp = folder / f".{name}.v.tmp"
            tmp.write_text(verilog_text(build(cfg), name))
            tmp.replace(path)
    return path


def run_bench(component, name, test_module, *, params=None, testcase=None, extra_sources=(),
              toplevel=None, seed=None, run_name=None, console=False):
    """Build ``component`` as Verilog module ``name`` (or take ``component`` as the path of that
    module's Verilog, :func:`config_verilog`) and run cocotb ``test_module`` on it.

    ``extra_sources`` are additional Verilog files (e.g. a harness); ``toplevel`` names the
    simulated top when it is not ``name``. Raises ``AssertionError`` naming the failing cocotb
    tests and the log, when any test fails. Returns the run folder. ``console=True`` lets the
    simulator print to the terminal (progress) instead of ``sim.log``. With ``WAVES=1`` the FST
    is ``waves.fst`` in the run folder and its path is printed (``waves: <path>``).
    """
    from cocotb_tools.runner import get_results, get_runner

    require_iverilog()
    toplevel = toplevel or name
    text = component.read_text() if isinstance(component, Path) else verilog_text(component, name)
    extra_sources = [Path(p) for p in extra_sources]
    build_dir = build_dir_for(name, [text] + [p.read_text() for p in extra_sources])
    waves = waves_requested()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    current = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    test_dir = build_dir / _safe(run_name or f"{current or test_module}-{worker}")

    sources = [build_dir / f"{name}.v", *extra_sources]
    build_args = ["-g2005"]
    if waves:
        dump = build_dir / "ws_waves.v"
        sources.append(dump)
        build_args += ["-s", "ws_waves"]

    runner = get_runner("icarus")
    with locked(build_dir), _without_env("WAVES"):
        if not (build_dir / f"{name}.v").exists() or (build_dir / f"{name}.v").read_text() != text:
            (build_dir / f"{name}.v").write_text(text)
        if waves:
            dump.write_text(_dump_module(toplevel, test_dir / "waves.fst"))
        runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=build_dir,
                     build_args=build_args, timescale=TIMESCALE, always=waves)

    env = {"WS_PARAMS": json.dumps(params or {}), "PYTHONPATH": str(ROOT)}
    log_file = None if console else test_dir / "sim.log"
    try:
        results = runner.test(test_module=test_module, hdl_toplevel=toplevel, build_dir=build_dir,
                              test_dir=test_dir, testcase=testcase, seed=seed, extra_env=env,
                              waves=waves, timescale=TIMESCALE, log_file=log_file,
                              results_xml="results.xml" if not current else None)
    except SystemExit:
        results = None
    xml = results or next(test_dir.glob("*.xml"), None)
    failures = _failed_tests(xml) if xml else ["(no results file: the simulator crashed)"]
    if failures:
        tail = log_file.read_text().splitlines()[-40:] if log_file and log_file.exists() else []
        raise AssertionError(f"cocotb tests failed in {test_module}: {', '.join(failures)}\n"
                             f"log: {log_file}\n" + "\n".join(tail))
    if waves:
        print(f"waves: {test_dir / 'waves.fst'}", flush=True)
    n_tests, _ = get_results(xml)
    if n_tests == 0:
        raise AssertionError(f"cocotb ran no test from {test_module} (testcase={testcase!r})")
    return test_dir


def _failed_tests(xml_path):
    import xml.etree.ElementTree as ET
    failed = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(case.get("name"))
    return failed


def run_vvp(verilog_sources, toplevel, work_dir, *, plusargs=(), defines=None, timeout=None):
    """Compile and run a plain Verilog testbench under Icarus, without cocotb.

    For bulk checks that must keep Python off the per-cycle path. Returns vvp's stdout.
    Compilation is skipped when the sources are unchanged.
    """
    require_iverilog()
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    vvp_file = work_dir / f"{toplevel}.vvp"
    cmd = ["iverilog", "-g2005", "-o", str(vvp_file), "-s", toplevel]
    for key, value in (defines or {}).items():
        cmd.append(f"-D{key}={value}")
    cmd += [str(s) for s in verilog_sources]
    stamp = work_dir / f"{toplevel}.cmd"
    key = " ".join(cmd) + "\n" + "".join(Path(s).read_text() for s in verilog_sources)
    with locked(work_dir):
        if not vvp_file.exists() or not stamp.exists() or stamp.read_text() != key:
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            stamp.write_text(key)
    out = subprocess.run(["vvp", "-n", str(vvp_file), *plusargs], cwd=work_dir, check=True,
                         capture_output=True, text=True, timeout=timeout)
    return out.stdout
