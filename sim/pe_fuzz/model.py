"""The golden model as the fuzzer runs it: :class:`FuzzModel` notes what decides whether a program is
valid, :func:`expect` is the model's view of a program, :func:`validate` says why a program is not a
valid fuzz program.

The golden model is transaction level (per configuration write, per wavelet, ``rx`` before ``rx2``)
while the RTL runs its engines at once: a program is valid only when nothing observable depends on
that interleaving nor on SRAM words the program did not write (the RTL keeps the previous program's
SRAM across its reset).
"""

import numpy as np

from arch.config_bus import WORD_MASK
from arch.pe_map import DESC_STRIDE, DESC_WORDS, STATUS, Op, VecMode, fmac_group_rows
from sim.benches.pe_coverage import CoveredPeModel
from sim.pe_fuzz.configs import make_config

# A program whose VECs chain into each other without dependencies never ends (on the RTL neither):
# the model gives up after this many firings.
MAX_FIRINGS = 20_000


def _poison(S, which):
    """Garbage a validation model's SRAM starts with (``which`` 0 or 1: different in every word)."""
    a = (np.arange(S, dtype=np.uint64) * 2654435761 + 0x9E3779B9) & WORD_MASK
    return (a if which == 0 else a ^ WORD_MASK).astype(np.uint32)


class _Mem:
    """A :class:`FuzzModel`'s SRAM: numpy words, every access by the engines noted for the race check."""
    __slots__ = ("a", "m")

    def __init__(self, a, m):
        self.a, self.m = a, m

    def __getitem__(self, k):
        self.m._touch("R", k)
        return self.a[k]

    def __setitem__(self, k, v):
        self.m._touch("W", k)
        self.a[k] = v


class FuzzModel(CoveredPeModel):
    """``CoveredPeModel`` (the golden model, with the coverage bins) that notes what the validity
    checks of a program need, step by step (:meth:`begin_step`, :meth:`end_writes`,
    :meth:`end_step`): who accessed which SRAM word (an *agent*: the configuration bus, the wavelet
    engine or store engine stepping descriptor ``t`` in unit ``n`` of its run ``r``, VEC ``t`` firing unit
    ``n``), which descriptors each input's processing started or stopped, who sent on which color, every
    fault attempt (also those the sticky fault masks) and its source. ``problems`` lists, per step,
    why the RTL's interleaving of the step's activity could change what is observed."""

    def __init__(self, cfg, poison=0):
        super().__init__(lanes=cfg.lanes, sram_words=cfg.sram_words, num_tasks=cfg.num_tasks,
                         num_colors=cfg.num_colors, acc_rows=cfg.acc_rows, mul_stages=cfg.mul_stages,
                         add_stages=cfg.add_stages)
        self.mem = _Mem(self.mem, self)
        self.mem.a[:] = _poison(self.S, poison)
        self.agent = ("cfg",)
        self.source = "cfg"
        self.runs = [0] * self.T
        self.attempts = []           # (step, source, code, index, masked)
        self.problems = []           # (step, text)
        self.step_no = -1
        self._quiet = False
        self.firings = 0
        self._dummy_b = False
        self._completing = None
        self.begin_step()

    # -- step bookkeeping --

    def begin_step(self):
        self.step_no += 1
        self.access = {}             # word -> [(agent, kind)]
        self.sends = {}              # color -> [vec t] in send order
        self.changes = []            # (t, source, "start" | "stop")
        self.chained_by = {}         # t -> the descriptor whose end started it in this step
        self.colors = {"rx": set(), "rx2": set()}
        self.in_writes = True
        # descriptors a VEC that fired during this step's writes concerns (itself, its dependencies,
        # its chain's next): the RTL fires it while the writes go on, so none of them may be written
        self.hot = set()
        self.clears = 0
        self.fault_at_start = self.fault
        self.step_attempts = []

    def end_writes(self):
        self.in_writes = False

    def _problem(self, text):
        self.problems.append((self.step_no, text))

    def end_step(self):
        """Check the step's activity; returns this step's problems."""
        n0 = len(self.problems)
        self._check_races()
        if self.colors["rx"] & self.colors["rx2"]:
            self._problem(f"colors {sorted(self.colors['rx'] & self.colors['rx2'])} on rx and rx2 in one step")
        for t, src, what in self.changes:
            if src == "cfg" or self.desc[t]["op"] not in (Op.FMAC, Op.STORE):
                continue
            c = self.desc[t]["color"]
            for chan in ("rx", "rx2"):
                if c in self.colors[chan] and src != chan:
                    self._problem(f"{src} {what}s descriptor {t} whose color {c} comes on {chan} in the step")
        for c, seq in self.sends.items():
            runs = [t for i, t in enumerate(seq) if i == 0 or seq[i - 1] != t]
            for i in range(1, len(runs)):
                x, y = runs[i - 1], runs[i]
                if self.chained_by.get(y) != x or x in runs[i + 1:]:
                    self._problem(f"VECs {x} and {y} send on color {c} in one step, not chained")
                    break
        sources = {a[0] for a in self.step_attempts}
        if len(sources) > 1 and (self.fault_at_start is None or self.clears):
            self._problem(f"fault attempts from {sorted(sources)} in one step (the sticky one depends on timing)")
        return [p for _, p in self.problems[n0:]]

    def _check_races(self):
        for w, accs in self.access.items():
            if len({a[0][:2] for a in accs}) < 2:
                continue
            for i, (pa, pk) in enumerate(accs):
                for qa, qk in accs[i + 1:]:
                    if pa[:2] == qa[:2] or (pk == "R" and qk == "R") or (pa[0] == "cfg" and pk == "W"):
                        continue
                    if pk == "W" and qk == "R" and qa[0] == "vec" and self._ordered(pa, qa):
                        continue
                    self._problem(f"SRAM word {w}: {self._name(pa)} {'writes' if pk == 'W' else 'reads'} it, "
                                  f"then {self._name(qa)} {'writes' if qk == 'W' else 'reads'} it, unordered")
                    return

    @staticmethod
    def _ordered(p, q):
        """Write ``p`` of descriptor X happens before VEC read ``q`` in the RTL too: the VEC depends on X,
        and the word was written in an earlier run of X or in a unit it waits for."""
        x = p[1]
        deps = q[4]
        if x not in deps:
            return False
        return p[3] < deps[x] or (p[3] == deps[x] and p[2] <= q[2])

    @staticmethod
    def _name(a):
        return "configuration" if a[0] == "cfg" else f"{a[0]} (descriptor {a[1]}, unit {a[2]})"

    def _touch(self, kind, k):
        if self._quiet:
            return
        if isinstance(k, slice):
            lo, hi = k.start or 0, self.S if k.stop is None else k.stop
        else:
            lo, hi = int(k), int(k) + 1
        entry = (self.agent, kind)
        for w in range(lo, min(hi, self.S)):
            self.access.setdefault(w, []).append(entry)

    # -- the model's entry points, noted --

    def cfg_write(self, addr, word):
        S, base = self.S, self.status_base
        if self.hot and S <= addr < base and (addr - S) % DESC_STRIDE < DESC_WORDS \
                and (addr - S) // DESC_STRIDE in self.hot:
            self._problem(f"descriptor {(addr - S) // DESC_STRIDE} written after a VEC it concerns fired "
                          f"during the step's writes")
        if self.hot and addr == base + STATUS["STOP"]:
            self._problem("STOP written after a VEC fired during the step's writes")
        if addr == base + STATUS["FAULT"]:
            self.clears += 1
            if any(a[0] != "cfg" for a in self.step_attempts):
                self._problem("FAULT cleared after a fault attempt of a VEC in the step")
        self.agent, self.source = ("cfg",), "cfg"
        super().cfg_write(addr, word)

    def cfg_read(self, addr):
        self._quiet = True
        try:
            return super().cfg_read(addr)
        finally:
            self._quiet = False

    def wavelet(self, color, data, *, rx2=False):
        self.in_writes = False
        src = "rx2" if rx2 else "rx"
        self.colors[src].add(color)
        ops = (Op.STORE,) if rx2 else (Op.FMAC, Op.STORE)
        m = [t for t in range(self.T)
             if self.active[t] and self.desc[t]["op"] in ops and self.desc[t]["color"] == color]
        unit = None
        if len(m) == 1:
            t = m[0]
            d = self.desc[t]
            if d["op"] == Op.FMAC:
                ng = fmac_group_rows(d["reps"] - self.n[t], self.R)
                unit = self.n[t] + self.pos[t] % ng
            else:
                unit = self.n[t]
            self.agent = (src, t, unit, self.runs[t], {})
        else:
            self.agent = (src, None, None, None, {})
        self.source = src
        super().wavelet(color, data, rx2=rx2)

    def _fire(self, t):
        saved = self.agent, self.source
        d = self.desc[t]
        deps = {d[k]: self.runs[d[k]] for en, k in (("dep_a_en", "dep_a"), ("dep_b_en", "dep_b")) if d[en]}
        self.agent, self.source = ("vec", t, self.n[t], self.runs[t], deps), f"vec{t}"
        n_out = len(self.out)
        if self.in_writes:
            self.hot |= {t, *deps} | ({d["next"]} if d["chain"] else set())
        self.firings += 1
        if self.firings > MAX_FIRINGS:
            raise RuntimeError(f"more than {MAX_FIRINGS} VEC firings: a chain of VECs that never ends")
        self._dummy_b = d["vmode"] == VecMode.PASS       # PASS reads B and ignores it
        try:
            super()._fire(t)
        finally:
            self._dummy_b = False
            for c, _ in self.out[n_out:]:
                self.sends.setdefault(c, []).append(t)
            self.agent, self.source = saved

    def _vector(self, addr):
        if self._dummy_b:               # the first vector a firing reads is B
            self._dummy_b, self._quiet = False, True
            try:
                return super()._vector(addr)
            finally:
                self._quiet = False
        return super()._vector(addr)

    def _complete(self, t):
        saved = self._completing
        self._completing = t
        try:
            super()._complete(t)
        finally:
            self._completing = saved

    def _activate(self, t):
        self.runs[t] += 1
        self.changes.append((t, self.source, "start"))
        if self._completing is not None:
            self.chained_by[t] = self._completing
        super()._activate(t)

    def _range_fault(self, t):
        self.changes.append((t, self.source, "stop"))
        super()._range_fault(t)

    def _raise(self, code, index):
        a = (self.source, code, index, self.fault is not None)
        self.step_attempts.append(a)
        self.attempts.append((self.step_no, *a))
        super()._raise(code, index)


def apply_step(model, step):
    """Run one program step on ``model`` (a :class:`FuzzModel`): writes, ``rx`` then ``rx2`` wavelets;
    returns the step's problems (reads are not made: see :func:`expect`)."""
    model.begin_step()
    for a, w in step["writes"]:
        model.cfg_write(int(a), int(w))
    model.end_writes()
    for c, d, *_ in step["wavelets"]:
        model.wavelet(int(c), int(d))
    for c, d, *_ in step["wavelets2"]:
        model.wavelet(int(c), int(d), rx2=True)
    return model.end_step()


def expect(prog, model_cls=None):
    """The golden model's view of ``prog``: per step the words sent so far (``expect_tx``), its
    ``vec_cycles``, the read-back values and the fault flag; the sent words ``out`` (color, data) in
    order; the model (bins, counters); ``problems`` (validity, :class:`FuzzModel`) and ``attempts``
    (every fault attempt)."""
    cfg = make_config(prog["config"])
    model = (model_cls or FuzzModel)(cfg)
    steps = []
    for step in prog["steps"]:
        apply_step(model, step)
        steps.append({"expect_tx": len(model.out), "vec_cycles": model.vec_cycles & WORD_MASK,
                      "reads": [model.cfg_read(int(a)) for a in step["reads"]],
                      "bg_reads": [model.cfg_read(int(a)) for a in step.get("bg_reads", [])],
                      "fault": int(model.fault is not None)})
    return {"steps": steps, "out": list(model.out), "model": model, "problems": list(model.problems),
            "attempts": list(model.attempts)}


def validate(prog):
    """Why ``prog`` is not a valid fuzz program (empty when it is): the validity problems of
    :class:`FuzzModel`, and any word sent, value read or fault flag that differs between two models
    whose SRAMs start with different garbage."""
    cfg = make_config(prog["config"])
    problems = []
    views = []
    for which in (0, 1):
        m = FuzzModel(cfg, poison=which)
        reads, faults = [], []
        for s, step in enumerate(prog["steps"]):
            try:
                problems += [f"step {s}: {p}" for p in apply_step(m, step)]
            except RuntimeError as e:           # VECs chained in a circle, firing for ever
                return [f"step {s}: {e}"]
            reads.append([m.cfg_read(int(a)) for a in step["reads"] + step.get("bg_reads", [])])
            faults.append(m.fault)
        views.append((m.out, reads, faults))
        if problems:
            return problems
    (o0, r0, f0), (o1, r1, f1) = views
    if o0 != o1:
        problems.append("sent words depend on SRAM words the program did not write")
    for s, (a, b) in enumerate(zip(r0, r1)):
        addrs = prog["steps"][s]["reads"] + prog["steps"][s].get("bg_reads", [])
        bad = [addrs[i] for i in range(len(a)) if a[i] != b[i]]
        if bad:
            problems.append(f"step {s}: reads of {bad[:4]} depend on SRAM words the program did not write")
    if f0 != f1:
        problems.append("faults depend on SRAM words the program did not write")
    return problems
