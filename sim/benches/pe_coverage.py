"""PE core functional coverage: operation x fault outcome x chaining, and the programs that fill it.

Bins (``pe_coverage()``):

* operation: ``FMAC``, ``STORE``, ``STORE rx2`` (a STORE whose wavelets come on ``rx2``, the store
  engine; its commit checks are binned as ``STORE``), ``VEC PASS``, ``VEC ADD``, ``VEC MASK``,
  ``VEC DOT``;
* fault: ``none`` (a run of the descriptor finished all ``reps`` units) or the code of the fault
  the descriptor raised (``arch.pe_map.Fault``): the commit checks ``COUNT``, ``COLOR``, ``INDEX``,
  ``NO_ACTION`` and the run-time ``UNBOUND``, ``DUP_COLOR``, ``ACC_CONFLICT``, ``RANGE``. Only a
  fault that became the sticky one is binned (the RTL reports only that one, and the bench checks
  it). A run-time fault is binned on the descriptor it names (``DUP_COLOR``: the lower of the two;
  ``ACC_CONFLICT``: the descriptor whose wavelet arrived); ``UNBOUND`` names a color, and is binned
  on the lowest legal, stopped FMAC/STORE descriptor bound to that color (a wavelet after its run
  ended, or before a chain started it); an ``UNBOUND`` on a color nothing was bound to is counted
  apart (``CoveredPeModel.unattributed``);
* chaining: ``chained-into`` (the run was started by another descriptor's chain), else
  ``chains-out`` (the descriptor has ``chain`` set: its end starts ``next``), else ``standalone``.

The bins are taken from the golden model's view of a program (``CoveredPeModel``, a
:class:`models.pe.PeModel` that notes the bin of every finished run and every raised fault, per
configuration write and wavelet: nothing on the RTL's per-cycle path). A bench credits them only
after the RTL run of the program matched the model (``Program.check``: sent words, read-backs of
status, done counters and the FAULT register, the fault flag per step).

``directed_programs(cfg)`` fills every reachable bin; ``random_programs(cfg, n, seed)`` draws the
same scenarios with random colors, sizes, data, orders and timing.
"""

import numpy as np

from arch.pe_map import DESC_STRIDE, DESC_WORDS, STATUS, Fault, Op, VecMode, done_addr, status_base
from models.pe import PeModel
from sim.kit.coverage import Coverage

__all__ = ["OPS", "FAULTS", "CHAINING", "COMMIT_FAULTS", "WAVELET_FAULTS", "RUN_FAULTS", "op_name",
           "unreachable_reason", "pe_coverage", "CoveredPeModel", "directed_programs", "random_programs", "fill",
           "coverage_table"]

OPS = ("FMAC", "STORE", "STORE rx2", "VEC PASS", "VEC ADD", "VEC MASK", "VEC DOT")
WAVELET_OPS = ("FMAC", "STORE", "STORE rx2")
COMMIT_FAULTS = ("COUNT", "COLOR", "INDEX", "NO_ACTION")
WAVELET_FAULTS = ("UNBOUND", "DUP_COLOR", "ACC_CONFLICT")
RUN_FAULTS = WAVELET_FAULTS + ("RANGE",)
FAULTS = ("none",) + COMMIT_FAULTS + RUN_FAULTS
assert set(FAULTS[1:]) == {f.name for f in Fault if f != Fault.NONE}
CHAINING = ("standalone", "chained-into", "chains-out")


def op_name(d):
    """Operation bin of descriptor fields ``d`` (None for NOP, which neither runs nor faults)."""
    if d["op"] == Op.VEC:
        return f"VEC {VecMode(d['vmode']).name}"
    return {Op.FMAC: "FMAC", Op.STORE: "STORE"}.get(Op(d["op"]))


def unreachable_reason(b):
    """Why bin ``b`` cannot occur, or None when it can."""
    op, fault, chaining = b["op"], b["fault"], b["chaining"]
    vec = op.startswith("VEC")
    if fault in COMMIT_FAULTS and op == "STORE rx2":
        return "commit checks do not depend on the input the wavelets will come on (binned as STORE)"
    if fault in COMMIT_FAULTS and chaining == "chained-into":
        return ("commit checks run when word 0 is written, which stops the descriptor; a chain starts only "
                "a descriptor whose commit passed")
    if fault == "NO_ACTION" and not vec:
        return "NO_ACTION is a VEC check (neither send nor store)"
    if fault == "INDEX" and not vec and chaining == "standalone":
        return "FMAC and STORE have no dependencies: their only INDEX check is on next, with chain set"
    if fault in WAVELET_FAULTS and vec:
        return "these faults come from the wavelet engine; VEC is counter-triggered and listens on no color"
    if fault == "ACC_CONFLICT" and op.startswith("STORE"):
        return "only an FMAC wavelet uses the accumulator"
    return None


def pe_coverage(name="PE core"):
    return Coverage(name, {"op": list(OPS), "fault": list(FAULTS), "chaining": list(CHAINING)},
                    lambda b: unreachable_reason(b) is None,
                    note="operation x fault outcome x chaining, from the golden model's view of programs "
                         "whose RTL run matched it (sim/benches/pe_coverage.py)")


class CoveredPeModel(PeModel):
    """``PeModel`` that notes bins: ``bins`` (dicts ``op, fault, chaining``), one per finished run
    and per raised (sticky) fault; ``unattributed``: UNBOUND faults on colors nothing was bound to."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.started = [None] * self.T    # "commit" / "chain": how the current (or last) run started
        self.bins = []
        self.unattributed = 0
        self._chaining = False
        self._rx2 = False                 # the wavelet being processed came on rx2

    def _op(self, t):
        name = op_name(self.desc[t])
        return "STORE rx2" if name == "STORE" and self._rx2 else name

    def _wavelet(self, color, data, ops):
        self._rx2 = Op.FMAC not in ops
        try:
            super()._wavelet(color, data, ops)
        finally:
            self._rx2 = False

    def _chain_class(self, t):
        if self.started[t] == "chain":
            return "chained-into"
        return "chains-out" if self.desc[t]["chain"] else "standalone"

    def cfg_write(self, addr, word):
        if self.S <= addr < self.status_base:
            t, w = divmod(addr - self.S, DESC_STRIDE)
            if w < DESC_WORDS:
                self.started[t] = None    # writing a descriptor stops it
        super().cfg_write(addr, word)

    def _activate(self, t):
        self.started[t] = "chain" if self._chaining else "commit"
        super()._activate(t)

    def _complete(self, t):
        self.bins.append({"op": self._op(t), "fault": "none", "chaining": self._chain_class(t)})
        self._chaining = True
        try:
            super()._complete(t)
        finally:
            self._chaining = False

    def _raise(self, code, index):
        if self.fault is None:
            if code in COMMIT_FAULTS:
                d = self.desc[index]
                self.bins.append({"op": op_name(d), "fault": code,
                                  "chaining": "chains-out" if d["chain"] else "standalone"})
            else:
                t = index
                if code == "UNBOUND":
                    ops = (Op.STORE,) if self._rx2 else (Op.FMAC, Op.STORE)
                    bound = [u for u in range(self.T) if self.legal[u] and not self.active[u]
                             and self.desc[u]["op"] in ops and self.desc[u]["color"] == index]
                    t = bound[0] if bound else None
                if t is None:
                    self.unattributed += 1
                else:
                    self.bins.append({"op": self._op(t), "fault": code, "chaining": self._chain_class(t)})
        super()._raise(code, index)


def fill(cov, programs):
    """Hit ``cov`` with the bins of ``programs`` (each a ``sim.benches.pe.Program``)."""
    for prog in programs:
        cov.hit_many(prog.model.bins)
    return cov


# ---- programs -------------------------------------------------------------------------------

def _rand_words(rng, n):
    """bf16 values in the upper halves (garbage low halves), mixed signs, a few zeros."""
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-4, 4, n))).astype(np.float32).view(np.uint32)
    v = np.where(rng.random(n) < 0.1, 0, v)
    return [int(x) for x in v]


class _Builder:
    """Scenario helpers on one ``Program``; with ``randomize`` sizes, colors, fault values and
    descriptor indices are drawn from ``rng`` (data always is)."""

    def __init__(self, cfg, rng, randomize):
        from sim.benches.pe import Program
        self.cfg, self.rng, self.randomize = cfg, rng, randomize
        self.prog = Program(cfg, model=CoveredPeModel)
        self.L, self.S, self.T, self.C = cfg.lanes, cfg.sram_words, cfg.num_tasks, cfg.num_colors
        base = status_base(self.S, self.T)
        self.fault_addr, self.active_addr = base + STATUS["FAULT"], base + STATUS["ACTIVE"]

    def n(self, lo, hi):
        """A size: ``lo`` in directed programs, random in ``[lo, hi]`` in random ones."""
        return int(self.rng.integers(lo, hi + 1)) if self.randomize else lo

    def colors(self, k):
        if self.randomize:
            return [int(c) for c in self.rng.permutation(self.C)[:k]]
        return list(range(k))

    def desc(self, t, **fields):
        from sim.benches.pe import desc_writes
        return desc_writes(self.cfg, t, **fields)

    def reset(self, sram=False):
        """Every descriptor NOP (stopped, not legal), the fault cleared; with ``sram`` fresh operands
        in ``[0, 128)``."""
        from sim.benches.pe import sram_writes
        w = [x for t in range(self.T) for x in self.desc(t, op=Op.NOP)] + [[self.fault_addr, 0]]
        return w + (sram_writes(0, _rand_words(self.rng, 128)) if sram else [])

    def reads(self, results=False):
        """FAULT, ACTIVE, the done counters; with ``results`` the destinations ``[128, 128 + 9L)``."""
        return ([self.fault_addr, self.active_addr] + [done_addr(self.S, self.T, t) for t in range(self.T)]
                + (list(range(128, 128 + 9 * self.L)) if results else []))

    def fields(self, op, color, *, dst=128):
        """Legal fields of ``op`` (an ``OPS`` name), enabled, small operands in ``[0, 128)``."""
        L = self.L
        reps = self.n(1, 3)
        if op == "FMAC":
            return dict(op=Op.FMAC, enable=1, color=color, a_base=self.n(0, 5), a_stride=L, count=self.n(2, 4),
                        reps=reps, dst_base=dst)
        if op.startswith("STORE"):
            return dict(op=Op.STORE, enable=1, color=color, reps=reps, lo=0, hi=reps, dst_base=dst)
        mode = VecMode[op.split()[1]]
        dot = mode == VecMode.DOT
        return dict(op=Op.VEC, vmode=mode, enable=1, send=1, store=int(self.n(0, 1)), color=color,
                    relu=self.n(0, 1), round=self.n(0, 1), a_base=self.n(0, 5), a_stride=L if not dot else L + 1,
                    b_base=64 + self.n(0, 3), b_stride=L, count=self.n(2, 3) if dot else 1, reps=reps,
                    lo=0, hi=reps, dst_base=dst)

    def units(self, f, color):
        """The wavelets of one full run of wavelet descriptor ``f``."""
        per = f["count"] if f["op"] == Op.FMAC else self.L
        return [(color, w) for w in _rand_words(self.rng, per * f["reps"])]

    def step(self, writes=(), wavelets=(), results=False, op=None):
        """A program step; the wavelets go on ``rx2`` when ``op`` is ``STORE rx2``."""
        key = "wavelets2" if op == "STORE rx2" else "wavelets"
        self.prog.step(writes=writes, reads=self.reads(results), **{key: wavelets})

    def chain_head(self, nxt, color):
        """Writes of STORE t3 (one vector on ``color``, ``chain`` into ``nxt``) and that vector."""
        head = dict(op=Op.STORE, enable=1, color=color, reps=1, lo=0, hi=1, dst_base=192, chain=1, next=nxt)
        return self.desc(3, **head), [(color, w) for w in _rand_words(self.rng, self.L)]

    # -- scenarios --

    def runs(self, op):
        """``op`` standalone (t0), a chain head (t1, chains out) and the descriptor it starts (t2)."""
        c = self.colors(3)
        f0, f1, f2 = (self.fields(op, c[i], dst=128 + 3 * i * self.L) for i in range(3))   # <= 3 rows each
        f1.update(chain=1, next=2)
        f2.update(enable=0)
        if op in WAVELET_OPS:
            self.step(self.reset(sram=True) + self.desc(2, **f2) + self.desc(0, **f0) + self.desc(1, **f1))
            order = [self.units(f0, c[0]), self.units(f1, c[1]), self.units(f2, c[2])]
            if self.randomize:
                order[0], order[1] = order[1], order[0]
            for wav in order:
                self.step(wavelets=wav, results=True, op=op)
        else:
            for f in (f0, f1, f2):
                f["store"] = 0
            self.step(self.reset(sram=True) + self.desc(2, **f2) + self.desc(0, **f0), results=True)
            self.step(self.desc(1, **f1), results=True)

    def commit_fault(self, op, fault, chaining):
        """Descriptor t commits legal fields of ``op`` but for the one field ``fault`` checks."""
        t = int(self.rng.integers(self.T)) if self.randomize else 0
        f = self.fields(op, self.colors(1)[0])
        if chaining == "chains-out":
            f.update(chain=1, next=(t + 1) % self.T)
        if fault == "COUNT":
            f["reps"] = 0
        elif fault == "COLOR":
            f["color"] = self.C + (self.n(0, 31 - self.C))
        elif fault == "INDEX":
            if chaining == "chains-out":
                f["next"] = t if self.randomize and self.rng.random() < 0.5 else self.T
            else:
                f.update(dep_a_en=1, dep_a=self.T)
        elif fault == "NO_ACTION":
            f.update(send=0, store=0)
        self.step(self.reset() + self.desc(t, **f))

    def range_fault(self, op):
        """A run past the end of SRAM (FMAC and VEC: operand A, STORE: the destination) standalone,
        as a chain head and chained into by STORE t3; FMAC/STORE get a full run of wavelets."""
        c = self.colors(3)
        for chaining in CHAINING:
            f = self.fields(op, c[0])
            f["dst_base" if op.startswith("STORE") else "a_base"] = self.S - 1
            writes = self.reset(sram=op.startswith("VEC"))
            if chaining == "chains-out":
                f.update(chain=1, next=1)
            if chaining == "chained-into":
                f["enable"] = 0
                head, start = self.chain_head(0, c[2])
                writes += head
            self.step(writes + self.desc(0, **f))
            if chaining == "chained-into":
                self.step(wavelets=start)
            if op in WAVELET_OPS:
                self.step(wavelets=self.units(f, c[0]), op=op)

    def unbound(self, op):
        """A wavelet after a standalone run ended, after a chain head's run ended (chains out) and
        after the run a chain started ended (chained into)."""
        c = self.colors(2)
        f0 = self.fields(op, c[0])
        f0.update(chain=1, next=1)
        f1 = self.fields(op, c[1], dst=160)
        f1.update(enable=0)
        g = self.fields(op, c[0])
        self.step(self.reset() + self.desc(0, **g), self.units(g, c[0]), op=op)
        self.step(wavelets=[(c[0], 0x3F800000)], op=op)                # standalone
        self.step(self.reset() + self.desc(1, **f1) + self.desc(0, **f0), self.units(f0, c[0]), op=op)
        self.step(wavelets=[(c[0], 0x3F800000)], op=op)                # chains-out
        self.step([[self.fault_addr, 0]], self.units(f1, c[1]), op=op)
        self.step(wavelets=[(c[1], 0x3F800000)], op=op)                # chained-into

    def dup_color(self, op):
        c = self.colors(2)
        for chaining in ("standalone", "chains-out"):
            f0, f1 = self.fields(op, c[0]), self.fields(op, c[0], dst=160)
            if chaining == "chains-out":
                f0.update(chain=1, next=2)
            self.step(self.reset() + self.desc(0, **f0) + self.desc(1, **f1))
            self.step(wavelets=[(c[0], 0x3F800000)], op=op)
        # chained-into: STORE t3 (color c1) chains into t0, which shares its color with active t1
        f0, f1 = self.fields(op, c[0]), self.fields(op, c[0], dst=160)
        f0["enable"] = 0
        head, start = self.chain_head(0, c[1])
        self.step(self.reset() + self.desc(0, **f0) + self.desc(1, **f1) + head, start)
        self.step(wavelets=[(c[0], 0x3F800000)], op=op)

    def acc_conflict(self):
        """FMAC t0 holds half a row when a wavelet of FMAC t1 arrives (t1 standalone, chains out,
        chained into by STORE t3)."""
        c = self.colors(3)
        for chaining in CHAINING:
            f0, f1 = self.fields("FMAC", c[0]), self.fields("FMAC", c[1], dst=160)
            writes = self.reset()
            if chaining == "chains-out":
                f1.update(chain=1, next=2)
            if chaining == "chained-into":
                f1["enable"] = 0
                head, start = self.chain_head(1, c[2])
                writes += head
            self.step(writes + self.desc(1, **f1) + self.desc(0, **f0), [(c[0], 0x3F800000)])
            if chaining == "chained-into":
                self.step(wavelets=start)
            self.step(wavelets=[(c[1], 0x3F800000)])


PARTS = ("runs", "commit", "run-time")


def _scenarios(b, part):
    """Add the scenarios of ``part`` (one of ``PARTS``) to builder ``b``'s program."""
    if part == "runs":
        for op in OPS:
            b.runs(op)
    elif part == "commit":
        for op in OPS:
            for fault in COMMIT_FAULTS:
                for chaining in ("standalone", "chains-out"):
                    if unreachable_reason({"op": op, "fault": fault, "chaining": chaining}) is None:
                        b.commit_fault(op, fault, chaining)
    else:
        for op in WAVELET_OPS:
            b.unbound(op)
            b.dup_color(op)
        b.acc_conflict()
        for op in OPS:
            b.range_fault(op)


def directed_programs(cfg):
    """Programs (``sim.benches.pe.Program``) that together reach every reachable bin, one per
    ``PARTS``: every operation's runs, every commit fault, the run-time faults."""
    if cfg.num_tasks < 4 or cfg.num_colors < 3 or cfg.sram_words < 256:
        raise ValueError("the PE coverage programs need num_tasks >= 4, num_colors >= 3, sram_words >= 256")
    rng = np.random.default_rng(1)
    programs = []
    for part in PARTS:
        b = _Builder(cfg, rng, randomize=False)
        _scenarios(b, part)
        programs.append((f"directed {part}", b.prog))
    return programs


def random_programs(cfg, n, seed=1):
    """``n`` programs, each every scenario with random colors, sizes, data and descriptor indices."""
    rng = np.random.default_rng(seed)
    programs = []
    for i in range(n):
        b = _Builder(cfg, rng, randomize=True)
        for part in PARTS:
            _scenarios(b, part)
        programs.append((f"random {i}", b.prog))
    return programs


def coverage_table(report):
    """Rows ``[op, fault, count per chaining...]`` of a report, ``-`` for unreachable bins, only the
    (op, fault) pairs with a reachable bin."""
    cell = {(o, f, c): (n if reach else "-") for o, f, c, n, reach in report["counts"]}
    rows = []
    for o in report["axes"]["op"]:
        for f in report["axes"]["fault"]:
            row = [cell[(o, f, c)] for c in report["axes"]["chaining"]]
            if any(v != "-" for v in row):
                rows.append([o, f, *row])
    return rows
