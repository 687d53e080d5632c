"""PE core differential fuzzing (docs/fuzzing.md): random legal and illegal programs on the RTL ``pe_core``
and the golden model, compared word for word, register for register, fault for fault and, for timed
programs, cycle for cycle; mismatches shrunk and written as replayable cases.

``make bench ARGS=pe_fuzz`` runs :data:`PROGRAMS` programs (``WS_PE_FUZZ_PROGRAMS``) spread over the
configurations of ``sim.pe_fuzz.CONFIGS``, seed :data:`SEED` (``WS_PE_FUZZ_SEED``), two
simulator processes at a time (``WS_PE_FUZZ_JOBS``), and shrinks one synthetic mismatch on the RTL to
show the shrinker at work. ``python -m bench.pe_fuzz [--programs N] [--seed S] [--configs a,b]``
does the same from the command line; ``python -m bench.pe_fuzz --replay FILE`` runs a replay file.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from arch.pe_map import STATUS, Op
from sim import pe_fuzz as F
from sim.benches.pe_coverage import coverage_table, pe_coverage

PROGRAMS = int(os.environ.get("WS_PE_FUZZ_PROGRAMS", "10000"))
SEED = int(os.environ.get("WS_PE_FUZZ_SEED", "1"))
JOBS = int(os.environ.get("WS_PE_FUZZ_JOBS", "2"))
BATCH = 250


# ---- how sensitive the fuzzing is: wrong models (mutants) the programs must tell apart ----------------

class _ColorAlways(F.FuzzModel):
    """COLOR checked for a VEC without send too."""

    def check(self, t):
        d = self.desc[t]
        if d["op"] == Op.VEC and not d["send"] and d["color"] >= self.C and super().check(t) is None:
            return "COLOR"
        return super().check(t)


class _ChainIllegal(F.FuzzModel):
    """A chain starts ``next`` even when it is not legal."""

    def _complete(self, t):
        d = self.desc[t]
        if d["chain"] and not self.legal[d["next"]] and d["next"] < self.T:
            self.legal[d["next"]] = self.desc[d["next"]]["op"] != Op.NOP
        super()._complete(t)


class _ReadyEarly(F.FuzzModel):
    """A VEC fires unit ``n`` when ``done >= n`` (one unit early)."""

    def _ready(self, t):
        d = self.desc[t]
        if not (self.active[t] and d["op"] == Op.VEC):
            return False
        n = self.n[t]
        return ((not d["dep_a_en"] or self.done[d["dep_a"]] >= n)
                and (not d["dep_b_en"] or self.done[d["dep_b"]] >= n)) and n < d["reps"]


class _RoundTruncates(F.FuzzModel):
    """bf16 rounding truncates (toward zero) instead of rounding to nearest even."""

    def _post(self, d, e):
        e = np.asarray(e, dtype=np.uint32)
        if d["relu"]:
            e = np.where(e >> 31 == 1, np.uint32(0), e)
        if d["round"]:
            e = e & np.uint32(0xFFFF0000)
        return e.astype(np.uint32)


class _ReluKeepsNegativeZero(F.FuzzModel):
    """ReLU zeroes negative values but keeps -0.0."""

    def _post(self, d, e):
        e = np.asarray(e, dtype=np.uint32)
        keep = e == 0x80000000
        out = super()._post(d, e)
        return np.where(keep & bool(d["relu"]) & (not d["round"]), np.uint32(0x80000000), out).astype(np.uint32)


class _StoreCountsStored(F.FuzzModel):
    """A STORE's done counts only the vectors it stored (``lo <= n < hi``)."""

    def _finish_unit(self, t, d):
        stored = d["lo"] <= self.n[t] < d["hi"]
        super()._finish_unit(t, d)
        if not stored:
            self.done[t] -= 1


class _Rx2TakesFmac(F.FuzzModel):
    """The store engine steps an FMAC bound to the color too."""

    def wavelet(self, color, data, *, rx2=False):
        if rx2 and not any(self.active[t] and self.desc[t]["op"] == Op.STORE and self.desc[t]["color"] == color
                           for t in range(self.T)):
            rx2 = False
        super().wavelet(color, data, rx2=rx2)


class _RangeKeepsRunning(F.FuzzModel):
    """RANGE does not stop the descriptor."""

    def _range_fault(self, t):
        active = self.active[t]
        super()._range_fault(t)
        self.active[t] = active


class _LastFaultWins(F.FuzzModel):
    """The fault is not sticky: the last one is kept."""

    def _raise(self, code, index):
        self.fault = None
        super()._raise(code, index)


class _StopKeepsLegal(F.FuzzModel):
    """STOP stops the descriptors but keeps them legal (a chain still starts them)."""

    def cfg_write(self, addr, word):
        legal = list(self.legal)
        super().cfg_write(addr, word)
        if addr == self.status_base + STATUS["STOP"]:
            self.legal = legal


class _RxCountOneInput(F.FuzzModel):
    """RX_COUNT counts rx only."""

    def wavelet(self, color, data, *, rx2=False):
        super().wavelet(color, data, rx2=rx2)
        if rx2:
            self.rx_count -= 1


class _DoneNotReset(F.FuzzModel):
    """A (re)started descriptor keeps its done counter."""

    def _activate(self, t):
        done = self.done[t]
        super()._activate(t)
        self.done[t] = done


class _AccKeptOnRewrite(F.FuzzModel):
    """Writing a descriptor does not drop its half-accumulated FMAC group."""

    def _release_acc(self, t):
        pass


MUTANTS = [_ColorAlways, _ChainIllegal, _ReadyEarly, _RoundTruncates, _ReluKeepsNegativeZero, _StoreCountsStored,
           _Rx2TakesFmac, _RangeKeepsRunning, _LastFaultWins, _StopKeepsLegal, _RxCountOneInput, _DoneNotReset,
           _AccKeptOnRewrite]


def mutation_score(programs=400, seed=SEED, specs=("tiny", "pipe")):
    """Each wrong model against the golden one over the same fuzz programs (model only): the programs
    that tell them apart, by what differs. A mutant no program kills is a blind spot."""
    progs = [p for spec in specs for p in F.programs(spec, programs // len(specs), seed)]
    truth = F.model_results(progs)
    rows = []
    for mutant in MUTANTS:
        killed, kinds = 0, {}
        for p, r in zip(progs, truth):
            try:
                diffs = F.compare(p, F.expect(p, mutant), r, timing=False)[0]
            except RuntimeError:            # the wrong model runs away
                diffs = ["hang: runaway"]
            if diffs:
                killed += 1
                k = diffs[0].split(":", 1)[0]
                kinds[k] = kinds.get(k, 0) + 1
        rows.append([mutant.__name__.strip("_"), mutant.__doc__.strip().split("\n")[0], killed, len(progs),
                     ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))])
    return rows


def shrink_demo(spec="tiny", seed=SEED):
    """Shrink, on the RTL, the first program of ``spec`` that the wrong model
    ``sim.pe_fuzz.FlipAddModel`` gets wrong (a synthetic mismatch): a row of the table."""
    for s in F.seeds(seed, 500):
        prog = F.generate(spec, s, illegal=0.0)
        if F.expect(prog, F.FlipAddModel)["out"] != F.expect(prog)["out"]:
            break
    else:
        return None
    t0 = time.perf_counter()
    small, diffs, info = F.shrink(prog, model_cls=F.FlipAddModel)
    path, command = F.write_replay(small, diffs, F.WORK / "replays" / f"synthetic-{spec}-{prog['seed']}.json")
    return {"config": spec, "seed": prog["seed"], "size": F.size(prog), "shrunk": F.size(small),
            "steps": [len(prog["steps"]), len(small["steps"])],
            "wavelets": [sum(len(x["wavelets"]) + len(x["wavelets2"]) for x in p["steps"]) for p in (prog, small)],
            "rounds": info["rounds"], "candidates": info["candidates"], "seconds": round(time.perf_counter() - t0, 1),
            "diffs": diffs, "path": str(path), "listing": F.describe(small)}


def run(programs=PROGRAMS, seed=SEED, configs=tuple(F.CONFIGS), jobs=JOBS, demo=True):
    start = time.perf_counter()
    per = {c: programs // len(configs) + (i < programs % len(configs)) for i, c in enumerate(configs)}
    rows, total, fault_rows = [], F.Stats(), []
    for spec in configs:
        t0 = time.perf_counter()
        st = F.fuzz(spec, per[spec], seed, batch=BATCH, jobs=jobs)
        secs = time.perf_counter() - t0
        n, c = st.n, st.compared
        rows.append([spec, n["programs"], round(n["illegal"] / max(1, n["programs"]), 3), n["timed"],
                     n["wavelets"], c["words"], c["reads"], c["faults"], c["cycles"], n["mismatches"],
                     st.sim_cycles, round(n["programs"] / secs, 1)])
        for k in ("n", "compared", "raised", "fault_reads", "tags", "rejected"):
            getattr(total, k).update(getattr(st, k))
        total.bins += st.bins
        total.failures += st.failures
        total.replays += st.replays
        total.sim_cycles += st.sim_cycles
        total.rtl_seconds += st.rtl_seconds
    wall = time.perf_counter() - start
    n, c = total.n, total.compared
    rows.append(["all", n["programs"], round(n["illegal"] / max(1, n["programs"]), 3), n["timed"], n["wavelets"],
                 c["words"], c["reads"], c["faults"], c["cycles"], n["mismatches"], total.sim_cycles,
                 round(n["programs"] / wall, 1)])
    for code in sorted(set(total.raised) | set(total.fault_reads)):
        fault_rows.append([code, total.raised[code], total.fault_reads[code]])
    cov = pe_coverage("PE core, fuzz programs (every configuration)")
    cov.hit_many(b for b in total.bins)
    report = cov.report()
    demo_row = shrink_demo() if demo else None
    mutants = mutation_score()
    tables = [
        {"title": f"PE core differential fuzzing, seed {seed} (RTL under "
                  f"{_simulator()} vs models/pe.py)",
         "columns": ["config", "programs", "illegal fraction", "timed", "wavelets in", "words compared",
                     "reads compared", "fault flags compared", "cycles compared", "mismatches", "sim cycles",
                     "programs/s"],
         "rows": rows},
        {"title": "faults: sticky faults the programs raised (model) and FAULT read-backs holding them (compared)",
         "columns": ["code", "raised", "FAULT reads compared"], "rows": fault_rows},
        {"title": "generator: what the programs contain (counts over all programs)",
         "columns": ["what", "count"], "rows": [[k, v] for k, v in sorted(total.tags.items())]
         + [[f"rejected: {k}", v] for k, v in sorted(total.rejected.items())]},
        {"title": "PE core coverage bins hit by the fuzz programs (op x fault x chaining; '-' unreachable)",
         "columns": ["op", "fault", "standalone", "chained-into", "chains-out"], "rows": coverage_table(report)},
    ]
    tables.append({"title": "sensitivity: wrong models (mutants of models/pe.py) against the golden one over the "
                            "same fuzz programs (model only; killed = programs that tell them apart)",
                   "columns": ["mutant", "what is wrong", "killed", "programs", "first difference"],
                   "rows": mutants})
    if demo_row:
        cols = ["config", "seed", "size", "shrunk", "steps", "wavelets", "rounds", "candidates", "seconds"]
        tables.append({"title": "shrinker on the RTL: a synthetic mismatch (a model that flips a bit of VEC ADD "
                                "unit 1's first word)",
                       "columns": cols,
                       "rows": [[" -> ".join(map(str, demo_row[k])) if isinstance(demo_row[k], list) else demo_row[k]
                                 for k in cols]]})
    if total.replays:
        tables.append({"title": "MISMATCHES (shrunk, replayable)",
                       "columns": ["command", "size", "shrunk", "first difference"],
                       "rows": [[r["command"], r["size"], r["shrunk"], r["diffs"][0]] for r in total.replays]})
    return {"tables": tables, "programs": n["programs"], "seed": seed, "configs": list(configs),
            "counts": dict(n), "compared": dict(c), "raised": dict(total.raised),
            "fault_reads": dict(total.fault_reads),
            "tags": dict(total.tags), "rejected": dict(total.rejected), "sim_cycles": total.sim_cycles,
            "rtl_seconds": round(total.rtl_seconds, 1), "seconds": round(wall, 1),
            "programs_per_second": round(n["programs"] / wall, 2),
            "failures": [{"seed": p["seed"], "config": p["config"], "diffs": d} for p, d in total.failures],
            "replays": total.replays, "shrink_demo": demo_row, "mutants": mutants, "coverage": [report]}


def _simulator():
    from sim.kit.runner import bench_simulator
    return bench_simulator("pe_core")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.pe_fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=PROGRAMS)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--configs", default=",".join(F.CONFIGS), help=f"of {', '.join(F.CONFIGS)}")
    ap.add_argument("--jobs", type=int, default=JOBS)
    ap.add_argument("--no-demo", action="store_true", help="skip the shrinker demonstration")
    ap.add_argument("--replay", metavar="FILE", help="run one replay file and print its differences")
    args = ap.parse_args(argv)
    if args.replay:
        prog, diffs = F.replay(args.replay)
        print(F.describe(prog))
        print("\n".join(diffs) if diffs else "RTL == model: no difference")
        return 1 if diffs else 0
    from rich.console import Console

    from bench.__main__ import OUT, print_tables
    result = run(args.programs, args.seed, tuple(args.configs.split(",")), args.jobs, demo=not args.no_demo)
    print_tables(Console(), result)
    OUT.mkdir(parents=True, exist_ok=True)
    result.pop("coverage", None)
    (OUT / "pe_fuzz.json").write_text(json.dumps(result, indent=2, default=float))
    return 1 if result["counts"].get("mismatches") else 0


if __name__ == "__main__":
    sys.exit(main())
