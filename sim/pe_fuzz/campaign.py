"""A fuzzing run: :func:`fuzz` generates programs, runs them on the RTL in batches, compares each with the
golden model and shrinks the first failures into replay files; :class:`Stats` is what it did and found."""

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from arch.pe_map import FAULT_STATUS, STATUS, Fault, status_base
from sim.pe_fuzz.comparison import compare
from sim.pe_fuzz.configs import make_config
from sim.pe_fuzz.generator import generate, seeds
from sim.pe_fuzz.model import expect
from sim.pe_fuzz.replays import describe, write_replay
from sim.pe_fuzz.rtl import run_rtl
from sim.pe_fuzz.shrinker import shrink, size


class Stats:
    """What a fuzzing run did and found (:func:`fuzz`)."""

    def __init__(self):
        self.n = Counter()             # programs, legal, illegal, timed, steps, writes, wavelets, mismatches
        self.compared = Counter()      # words, reads, faults, cycles
        self.raised = Counter()        # sticky faults raised (by code), from the model
        self.fault_reads = Counter()   # FAULT register read-backs holding a fault (by code), compared
        self.tags = Counter()          # the generator's tags and redrawn steps, summed
        self.rejected = Counter()
        self.bins = []                 # the coverage bins of every program (sim.benches.pe_coverage)
        self.failures = []             # (program, differences)
        self.replays = []              # a dict per shrunk failure: path, command, size, shrunk, rounds, diffs, listing
        self.sim_cycles = 0
        self.rtl_seconds = 0.0

    def add(self, prog, exp, res, diffs, counts):
        """Count program ``prog``: the model's view ``exp``, the RTL's result ``res``, their differences
        and what was compared (:func:`sim.pe_fuzz.comparison.compare`)."""
        n = self.n
        n["programs"] += 1
        n[prog["kind"]] += 1
        n["timed"] += bool(prog.get("timed"))
        n["steps"] += len(prog["steps"])
        n["writes"] += sum(len(s["writes"]) for s in prog["steps"])
        n["wavelets"] += sum(len(s["wavelets"]) + len(s["wavelets2"]) for s in prog["steps"])
        n["mismatches"] += bool(diffs)
        self.compared.update(counts)
        self.sim_cycles += res["cycles"]
        for _, _, code, _, masked in exp["attempts"]:
            if not masked:
                self.raised[code] += 1
        cfg = make_config(prog["config"])
        fault_addr = status_base(cfg.sram_words, cfg.num_tasks) + STATUS["FAULT"]
        for step, e in zip(prog["steps"], exp["steps"]):
            for a, v in zip(step["reads"], e["reads"]):
                if a == fault_addr and v:
                    self.fault_reads[Fault(FAULT_STATUS.unpack(v)["code"]).name] += 1
        self.tags.update(prog.get("tags", {}))
        self.rejected.update(prog.get("rejected", {}))
        self.bins += exp["model"].bins
        if diffs:
            self.failures.append((prog, diffs))


def fuzz(spec, n, seed=1, *, batch=250, jobs=1, shrink_failures=1):
    """Generate ``n`` programs of configuration ``spec`` (:func:`sim.pe_fuzz.generator.seeds`), run them on
    the RTL in batches of ``batch`` (``jobs`` simulator processes at a time), compare each with the
    model; shrink the first ``shrink_failures`` failing ones and write them as replay files. Returns the
    :class:`Stats`."""
    stats = Stats()
    all_seeds = list(seeds(seed, n))
    chunks = [all_seeds[i:i + batch] for i in range(0, n, batch)]

    def one(chunk):
        progs = [generate(spec, s) for s in chunk]
        exps = [expect(p) for p in progs]
        t0 = time.perf_counter()
        res = run_rtl(progs, exps, name=f"fuzz{chunk[0]}")
        return progs, exps, res, time.perf_counter() - t0

    with ThreadPoolExecutor(max(1, jobs)) as ex:
        for progs, exps, res, secs in ex.map(one, chunks):
            stats.rtl_seconds += secs
            for p, e, r in zip(progs, exps, res):
                diffs, counts = compare(p, e, r)
                stats.add(p, e, r, diffs, counts)
    for prog, diffs in stats.failures[:shrink_failures]:
        small, sdiffs, info = shrink(prog)
        path, command = write_replay(small, sdiffs or diffs)
        stats.replays.append({"path": str(path), "command": command, "size": size(prog), "shrunk": size(small),
                              "rounds": info["rounds"], "diffs": sdiffs or diffs, "listing": describe(small)})
    return stats
