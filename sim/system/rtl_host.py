"""The RTL-wafer system run on a plain-Verilog testbench, one simulator process for the whole run
(``make sim``'s default; docs/system_simulation.md#simulators).

The wafers are reset once and keep their state (routes, descriptors, SRAM) from one phase to the
next, as under cocotb. For every phase the host (this module, Python, between phases) writes the
configuration and weight words as hex files and sends ``system_tb`` (``sim/harness/system_tb.py``,
under Verilator, a binary cached per configuration (``sim/kit/verilator.py``), or Icarus) one
command line; the testbench runs the phase and answers with its status line, after dumping the
recorders. The training loop and every check are
:func:`sim.system.rtl_training.training`'s, the same as under cocotb.
"""

import json
import shutil
from pathlib import Path

import numpy as np

from arch.config_bus import ADDR_BITS, WORD_BITS
from sim.harness.system_tb import END_COMMAND, STATUS_FIELDS, STATUS_PREFIX, TB_TOP, phase_command
from sim.kit.testbench import Testbench
from sim.system.config import DATA_FILE
from sim.system.rtl import harness_depths, rtl_config
from sim.system.rtl_build import system_sources
from sim.system.rtl_phases import PhaseResult
from sim.system.rtl_training import simulator_speed, training

__all__ = ["PhaseRunner", "run_rtl_host", "write_hex", "read_hex"]

_START = 4          # cycles of a phase besides its budget (the start pulse)


def write_hex(path, words):
    """One hex word per line, as ``$readmemh`` reads it."""
    words = np.asarray(words, dtype=np.uint64)
    Path(path).write_text("".join(f"{int(w):x}\n" for w in words))


def read_hex(path, count):
    """The ``count`` words of a ``$writememh`` dump (uint64); comments and ``@`` addresses skipped."""
    words = [int(t, 16) for line in Path(path).read_text().splitlines()
             for t in line.split("//")[0].split() if not t.startswith("@")]
    if len(words) != count:
        raise AssertionError(f"{path}: {len(words)} words, expected {count}")
    return np.array(words, dtype=np.uint64)


def cfg_words(writes):
    """Configuration player words (``sim.harness.rtl_system.CFG_WRITE``: addr low, data above)
    for ``[(addr, value)]``, vectorised."""
    a = np.array([w[0] for w in writes], dtype=np.uint64) & np.uint64((1 << ADDR_BITS) - 1)
    d = np.array([w[1] for w in writes], dtype=np.uint64) & np.uint64((1 << WORD_BITS) - 1)
    return a | (d << np.uint64(ADDR_BITS))


class PhaseRunner:
    """Runs :class:`~sim.system.rtl_training.PhaseRequest`s, one after the other, on one
    ``system_tb`` process for hardware ``cfg`` with harness memory ``depths``
    (``sim.system.rtl.harness_depths``) in folder ``work`` (inputs and outputs of the last phase
    stay there), under Verilator on ``threads`` threads; the wafers' state carries from one phase
    to the next. A context manager: the
    process starts with the first phase and ends on :meth:`close`. Keeps the simulator's totals:
    ``cycles`` (clock cycles simulated), ``phases`` (run so far), ``cpu_seconds`` (the process's CPU,
    known after :meth:`close`)."""

    def __init__(self, cfg, depths, work, *, stall=0, simulator=None, threads=1, log=None):
        self.cfg, self.stall = cfg, stall
        self.work = Path(work).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        self.tb = Testbench(system_sources(cfg, depths, log=log), TB_TOP, simulator=simulator,
                            threads=threads, log=log)
        self.simulator = self.tb.simulator
        self.cycles, self.cpu_seconds, self.phases = 0, 0.0, 0
        self._session = None

    def build(self):
        self.tb.build()
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """End the testbench process (if it runs) and add its CPU time to ``cpu_seconds``."""
        if self._session is not None:
            session, self._session = self._session, None
            self.cpu_seconds += session.close(END_COMMAND).cpu_seconds

    def status(self, req):
        """Run ``req`` and return the testbench's status line as a dict (``STATUS_FIELDS``, and
        ``budget``: the cycles the phase was given), without checking it; the recorders' dumps
        stay in ``work``. After a timeout the testbench process has ended (the next phase starts
        a new one, from reset)."""
        for old in self.work.glob("*.hex"):
            old.unlink()
        for i, writes in enumerate(req.writes):
            write_hex(self.work / f"cfg{i}.hex", cfg_words(writes))
        for q, words in enumerate(req.streams):
            if len(words):
                write_hex(self.work / f"bcast{q}.hex", words)
        for i, rows in enumerate(req.west_in):
            for p, words in enumerate(rows):
                write_hex(self.work / f"west_in{i}_{p}.hex", words)
        cfg_count = len(req.writes[0])
        budget = (_START + 10 * cfg_count + 100
                  + 200 * (max(map(len, req.streams)) + req.west_in_count + max(req.roots) + req.west
                           + req.east)
                  + 20000)
        if self._session is None:
            self._session = self.tb.session([f"+data={self.work}"], cwd=self.work)
        self._session.send(phase_command(
            cfg_count=cfg_count, go_count=req.go_count, west_in_count=req.west_in_count, west_count=req.west,
            east_count=req.east, stall=self.stall, budget=budget,
            bcast_counts=[len(words) for words in req.streams], root_counts=req.roots))
        st = dict(zip(STATUS_FIELDS, map(int, self._session.read_until(STATUS_PREFIX).split()[1:]),
                      strict=True))
        self.phases += 1
        self.cycles += st["cycles"]
        st["budget"] = budget
        if st["timeout"]:
            self.close()
        return st

    def __call__(self, req):
        """Run ``req``, check that it finished without a fault, an error or an overflow, and
        return its :class:`~sim.system.rtl_training.PhaseResult`."""
        n, P = self.cfg.swarmx_leaves, self.cfg.mesh_rows
        st = self.status(req)
        where = f"{req.what} ({self.simulator}, files in {self.work})"
        if st["timeout"]:
            raise AssertionError(f"{where} did not finish within {st['budget']} cycles (fault={st['fault']}, "
                                 f"error={st['error']}, overflow={st['overflow']})")
        assert not st["fault"], f"{where}: a PE core raised a fault"
        assert not st["error"], f"{where}: a router or SwarmX raised an error"
        assert not st["overflow"], f"{where}: a recorder overflowed (extra words)"
        stream = st["bcast_last"] - st["bcast_first"] + 1 if req.has_weights else 0

        def edge(side, count):
            if not count:
                return [[np.zeros(0, np.uint64) for _ in range(P)] for _ in range(n)]
            return [[read_hex(self.work / f"{side}{i}_{p}.hex", count) for p in range(P)]
                    for i in range(n)]

        root = [read_hex(self.work / f"root{q}.hex", count) if count else np.zeros(0, np.uint64)
                for q, count in enumerate(req.roots)]
        return PhaseResult(st["cfg_cycles"], st["run_cycles"], stream, root,
                           edge("west", req.west), edge("east", req.east))


def run_rtl_host(run, *, simulator=None, log=print):
    """Simulate ``run`` (``wafer = "rtl"``) on one testbench process; writes and
    returns ``results.json`` (the digits split must be in ``run.out_dir``, ``sim.system.run``)."""
    out = Path(run.out_dir)
    cfg = rtl_config(run)
    work = out / "phase"
    shutil.rmtree(work, ignore_errors=True)
    data = np.load(out / DATA_FILE)
    with PhaseRunner(cfg, harness_depths(cfg, run.dims), work, stall=run.stall,
                     simulator=simulator, threads=run.threads, log=log).build() as runner:
        loop = training(run, cfg, data, log=log)
        try:
            request = next(loop)
            while True:
                request = loop.send(runner(request))
        except StopIteration as stop:
            results = stop.value
    results["simulator"] = runner.simulator
    results["simulator_threads"] = run.threads if runner.simulator == "verilator" else 1
    results["simulator_phases"] = runner.phases
    results.update(simulator_speed(cfg, runner.cycles, runner.cpu_seconds))
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return results
