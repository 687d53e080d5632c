"""Run mutants against their blocks' tests: killed, survived, stillborn or timed out.

:func:`run` first runs every block's tests on the unmutated sources (the baseline: they must
pass, and their time sets each mutant's time limit), then every mutant in its own sandbox, ``jobs``
at a time. A mutant is *killed* when a test fails (pytest ``-x`` stops at the first failure),
*timeout* when its tests run past the limit (a hang is noticed too: counted as killed),
*stillborn* when its block no longer elaborates (not counted), *survived* when every test passes.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sim.kit.toolchain import icarus_available
from sim.mutate.mutants import apply
from sim.mutate.sandbox import Sandbox, project_files
from sim.mutate.targets import TARGETS

__all__ = ["run", "pytest_args", "TIME_LIMIT_FACTOR"]

# A mutant's tests may take this many times the baseline's, plus a minute, before it is a hang.
TIME_LIMIT_FACTOR = 3


def pytest_args(target):
    """pytest arguments of one mutant run: the block's tests, stop at the first failure, no
    plugins that reorder or cache, quiet."""
    return ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist", "-o", "addopts=",
            *target.tests]


def _child(sandbox, target, worker, time_limit):
    """Run sim.mutate.child in ``sandbox``: ``(outcome dict, seconds)``; outcome None on timeout."""
    env = dict(os.environ, PYTHONPATH=str(sandbox.where), PYTEST_XDIST_WORKER=f"mutate{worker}")
    env.pop("PYTEST_CURRENT_TEST", None)
    if "WS_SIM" not in env and icarus_available():
        env["WS_SIM"] = "icarus"     # a mutated wafer under Verilator would be a C++ build per mutant
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result = Path(f.name)
    cmd = [sys.executable, "-m", "sim.mutate.child", str(result), ",".join(target.tops), "--",
           *pytest_args(target)]
    t0 = time.perf_counter()
    # Its own process group: a hang is ended with everything it started (a simulator under
    # cocotb outlives a killed pytest otherwise).
    proc = subprocess.Popen(cmd, cwd=sandbox.where, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.wait(timeout=time_limit)
        outcome = json.loads(result.read_text()) if result.stat().st_size else {"exit": -1, "failed": [],
                                                                                  "stillborn": None, "verilog": {}}
    except subprocess.TimeoutExpired:
        outcome = None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)     # whatever of the group is left
        proc.wait()
        result.unlink(missing_ok=True)
    return outcome, time.perf_counter() - t0


def _classify(outcome):
    if outcome is None:
        return "timeout", None
    if outcome["stillborn"]:
        return "stillborn", outcome["stillborn"]
    if outcome["exit"] == 0:
        return "survived", None
    if outcome["exit"] in (1, 2):
        return "killed", (outcome["failed"] or ["?"])[0]
    return "error", f"pytest exit {outcome['exit']}"


def run(root, mutants, *, jobs=2, work=None, progress=None):
    """Results of ``mutants`` (a list of :class:`~sim.mutate.mutants.Mutant`), one dict each:
    the mutant's fields, ``key``, ``status``, ``detail`` (the killing test, the elaboration error),
    ``tiny_netlist_changed`` (the probe's Verilog differs from the baseline's at ``tiny``) and
    ``seconds``. Raises ``RuntimeError`` when a block's baseline tests fail."""
    root = Path(root)
    work = Path(work or root / "build" / "mutate")
    files = project_files(root)
    sandboxes = [Sandbox(root, files, work / f"sandbox{i}", work / "build") for i in range(jobs)]
    free = list(range(jobs))
    lock = threading.Lock()

    def sandbox():
        with lock:
            return free.pop()

    def release(i):
        with lock:
            free.append(i)

    def base(target):
        i = sandbox()
        try:
            outcome, seconds = _child(sandboxes[i], target, i, None)
        finally:
            release(i)
        status, detail = _classify(outcome)
        if status != "survived":
            raise RuntimeError(f"the unmutated tests {' '.join(target.tests)} do not pass ({status}: {detail})")
        if progress:
            progress(f"baseline  {seconds:5.0f} s  {' '.join(target.tests)}")
        return target, {"seconds": seconds, "verilog": outcome["verilog"]}

    targets = {TARGETS[m.path] for m in mutants}        # files sharing tests share one baseline
    with ThreadPoolExecutor(jobs) as pool:
        baseline = dict(pool.map(base, sorted(targets, key=lambda t: t.tests)))

    def one(mutant):
        i = sandbox()
        try:
            ref = baseline[TARGETS[mutant.path]]
            sandboxes[i].mutate(mutant.path, apply((root / mutant.path).read_text(), mutant))
            limit = TIME_LIMIT_FACTOR * ref["seconds"] + 60
            outcome, seconds = _child(sandboxes[i], TARGETS[mutant.path], i, limit)
            status, detail = _classify(outcome)
            changed = None if not outcome or outcome["stillborn"] else outcome["verilog"] != ref["verilog"]
        finally:
            sandboxes[i].restore(mutant.path)
            release(i)
        result = {**mutant.__dict__, "key": mutant.key, "status": status, "detail": detail,
                  "tiny_netlist_changed": changed, "seconds": round(seconds, 1)}
        if progress:
            progress(f"{status:9s} {seconds:5.0f} s  {mutant.key}  ({mutant.text})")
        return result

    try:
        with ThreadPoolExecutor(jobs) as pool:
            return list(pool.map(one, mutants))
    finally:
        for s in sandboxes:
            s.remove()
