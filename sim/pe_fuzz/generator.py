"""Random programs of the PE core (:func:`generate`), legal by construction or with faults injected, and
valid (:func:`sim.pe_fuzz.model.validate`).

A program is a JSON-able dict ``{"config", "seed", "kind" ("legal" | "illegal"), "timed", "gap", "gap2",
"stall", "tags", "rejected", "steps"}``; a step is ``{"writes": [[addr, word]...], "wavelets": [[color,
data, ctrl]...] (rx), "wavelets2": [...] (rx2), "reads": [addr...], "bg_reads": [addr...]}`` (``bg_reads``
optional): the writes one per cycle, then both streams (``bg_reads`` of registers that cannot change
meanwhile read while they flow), then, once the core is quiet, the reads. ``gap``, ``gap2``: the
probability of an idle input cycle on ``rx``, ``rx2``; ``stall``: of back-pressure on ``tx``. A *timed*
program's cycles are compared (:func:`sim.pe_fuzz.comparison.replay_cycles`).
"""

import copy
from collections import Counter

import numpy as np

from arch.config_bus import WORD_MASK
from arch.pe_map import (
    DESC_STRIDE,
    DESC_WORDS,
    DONE_OFFSET,
    STATUS,
    Op,
    VecMode,
    desc_addr,
    encode,
    fmac_group_rows,
    pack_pair,
    status_base,
)
from sim.benches.pe import desc_writes
from sim.pe_fuzz.configs import make_config, rand_words
from sim.pe_fuzz.model import FuzzModel, apply_step

KINDS = ("FMAC", "STORE", "STORE2", "VEC")          # STORE: on rx (wavelet engine), STORE2: on rx2
KIND_P = (0.3, 0.15, 0.2, 0.35)
INJECTIONS = ("commit", "unbound", "dup", "acc", "range", "midrun")


class _Plan:
    """A descriptor of a phase being generated."""

    def __init__(self, t, kind):
        self.t, self.kind = t, kind
        self.chan = {"FMAC": "rx", "STORE": "rx", "STORE2": "rx2"}.get(kind)
        self.f = {}
        self.color = None
        self.prev = self.next = None
        self.data = None         # (base, unit stride, stored units): its results as vectors for a VEC
        self.deps = []
        self.dead_next = None    # a chain into a descriptor that is not legal

    @property
    def wavelet(self):
        return self.kind != "VEC"


class Builder:
    """Builds one program step by step on two live :class:`FuzzModel` (SRAMs starting with different
    garbage): a step is kept only if it is valid (:meth:`add`), so the generator knows the core's
    state (active descriptors, done counters, the fault, which SRAM words are defined) while it
    draws the next step."""

    def __init__(self, spec, rng):
        self.spec, self.rng = spec, rng
        self.cfg = cfg = make_config(spec)
        self.L, self.S, self.T, self.C, self.R = cfg.lanes, cfg.sram_words, cfg.num_tasks, cfg.num_colors, cfg.acc_rows
        self.base = status_base(self.S, self.T)
        self.models = [FuzzModel(cfg, 0), FuzzModel(cfg, 1)]
        self.steps = []
        self.rejected = Counter()
        self.tags = Counter()
        self.dst_regions = []    # (base, size) of results, read back at the end

    @property
    def m(self):
        return self.models[0]

    def r(self, lo, hi):
        """A random integer in ``[lo, hi]``."""
        return int(self.rng.integers(lo, hi + 1))

    def p(self, prob):
        return bool(self.rng.random() < prob)

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    # -- steps --

    def add(self, writes=(), wavelets=(), wavelets2=(), *, reads=True, why="step"):
        """Append a step if it is valid (its reads drawn afterwards, among the defined SRAM words and
        the registers); else leave the program as it was and return False."""
        step = {"writes": [[int(a), int(w) & WORD_MASK] for a, w in writes],
                "wavelets": [[int(c), int(d) & WORD_MASK, int(x)] for c, d, x in wavelets],
                "wavelets2": [[int(c), int(d) & WORD_MASK, int(x)] for c, d, x in wavelets2], "reads": []}
        if not (step["writes"] or step["wavelets"] or step["wavelets2"] or reads):
            return True
        saved = copy.deepcopy(self.models)
        problems = []
        try:
            for m in self.models:
                problems += apply_step(m, step)
        except RuntimeError as e:           # VECs chained in a circle, firing for ever
            problems.append(str(e))
        a, b = self.models
        if not problems and (a.out != b.out or a.fault != b.fault or a.done != b.done or a.active != b.active):
            problems.append("depends on SRAM words not written")
        if problems:
            self.models = saved
            self.rejected[why] += 1
            return False
        if reads:
            step["reads"] = self.pick_reads(final=reads == "final")
        if (step["wavelets"] or step["wavelets2"]) and self.p(0.5):
            step["bg_reads"] = self.stable_reads()
        self.steps.append(step)
        return True

    def stable_reads(self):
        """Addresses whose value does not change while wavelets flow (descriptor words, PARAMS, PACK,
        STOP, unused and unmapped addresses): read in the middle of the traffic."""
        S, T, base = self.S, self.T, self.base
        out = []
        for _ in range(self.r(1, 8)):
            k = self.r(0, 3)
            if k == 0:
                out.append(desc_addr(S, self.r(0, T - 1), self.r(0, DESC_STRIDE - 1)))
            elif k == 1:
                out.append(base + self.pick([STATUS["PARAMS"], STATUS["PACK"], STATUS["STOP"], 9, 12, 15]))
            elif k == 2:
                out.append(self.r(base + DONE_OFFSET + T, 0xFFFF))
            else:
                out.append(base + STATUS["PARAMS"])
        return out

    def defined(self):
        return self.models[0].mem.a == self.models[1].mem.a

    def pick_reads(self, final=False):
        S, T, base = self.S, self.T, self.base
        regs = [base + STATUS[k] for k in STATUS] + [base + DONE_OFFSET + t for t in range(T)]
        defined = np.flatnonzero(self.defined())
        if final:
            out = list(regs)
            words = sorted({w for b, n in self.dst_regions for w in range(b, b + n)} & set(defined.tolist()))
            if len(words) > 16:
                words = sorted(self.rng.choice(words, 16, replace=False).tolist())
            return out + words + [int(w) for w in self.rng.choice(defined, min(4, len(defined)), replace=False)] \
                if len(defined) else out + words
        out = []
        for _ in range(self.r(1, 6)):
            k = self.r(0, 9)
            if k <= 3:
                out.append(self.pick(regs))
            elif k <= 6 and len(defined):
                out.append(int(self.pick(defined)))
            elif k == 7:
                out.append(desc_addr(S, self.r(0, T - 1), self.r(0, DESC_STRIDE - 1)))
            elif k == 8:
                out.append(base + self.pick([9, 10, 11, 12, 13, 14, 15, DONE_OFFSET + T + self.r(0, 15)]))
            else:
                out.append(self.r(base + DONE_OFFSET + T, 0xFFFF))
        return out

    def harmless_writes(self, free=None):
        """Writes that change nothing a run depends on: FAULT (clears it), PACK, read-only registers,
        descriptor words 6 and 7, unmapped addresses, SRAM words outside every region (``free``)."""
        S, T, base = self.S, self.T, self.base
        out = []
        for _ in range(self.r(1, 4)):
            k = self.r(0, 5)
            w = self.r(0, WORD_MASK)
            if k == 0:
                out.append([base + STATUS["FAULT"], w])
                self.tags["fault-clear"] += 1
            elif k == 1:
                out.append([base + STATUS["PACK"], self.r(0, 1) | (w & ~1)])
            elif k == 2:
                out.append([base + self.pick([1, 2, 3, 4, 5, 6, 9, 12, 15, DONE_OFFSET + self.r(0, T - 1)]), w])
                self.tags["write-read-only"] += 1
            elif k == 3:
                out.append([desc_addr(S, self.r(0, T - 1), self.r(DESC_WORDS, DESC_STRIDE - 1)), w])
            elif k == 4:
                out.append([self.r(base + DONE_OFFSET + T, 0xFFFF), w])
                self.tags["write-unmapped"] += 1
            elif free:
                a = self.pick(free)
                out.append([a, w])
        return out

    # -- SRAM regions of a phase --

    def _alloc(self, size):
        """A free region of ``size`` words (its base), or None; regions of a phase never overlap."""
        if size <= 0:
            return self.r(0, self.S - 1)
        fits = [(lo, hi) for lo, hi in self.free if hi - lo >= size]
        if not fits:
            return None
        lo, hi = self.pick(fits)
        base = lo + self.r(0, min(hi - lo - size, 12))
        self.free.remove((lo, hi))
        self.free += [iv for iv in ((lo, base), (base + size, hi)) if iv[1] > iv[0]]
        return base

    def _operands(self, size, kind=None):
        """A read-only region of ``size`` words with random contents, written in the phase's setup."""
        base = self._alloc(size)
        if base is None:
            return None
        if size > 0:
            words = rand_words(self.rng, size, kind)
            if self.p(0.25) and size % 2 == 0:       # packed writes: two bf16 per write
                words = [w & 0xFFFF0000 for w in words]
                self.sram_init.append(("pack", base, words))
            else:
                self.sram_init.append(("plain", base, words))
        return base

    def _init_writes(self):
        base = self.base + STATUS["PACK"]
        out, pack = [], self.m.pack
        for mode, a, words in self.sram_init:
            want = int(mode == "pack")
            if pack != want:
                out.append([base, want])
                pack = want
            if want:
                out += [[a + i, pack_pair(words[i], words[i + 1])] for i in range(0, len(words), 2)]
                self.tags["packed-writes"] += 1
            else:
                out += [[a + i, w] for i, w in enumerate(words)]
        if pack and self.p(0.7):
            out.append([base, 0])
        return out

    # -- a phase: descriptors, their operands, their streams --

    def _fields(self, p, first):
        """Legal fields of plan ``p`` with its regions (None when SRAM is full)."""
        L, R = self.L, self.R
        if p.kind == "FMAC":
            count = self.r(1, 6)
            reps = self.r(1, max(4, 2 * R + 2))
            reps = max(1, min(reps, 48 // count))
            group = self.pick([0, 1, 1, 1, 2, 3])
            stride = self.pick([L, L, L, 0, 1, L + 1, 2 * L, self.r(0, 8)])
            rows = min(max(group, 1), reps)
            a = self._operands((rows - 1) * L + (count - 1) * stride + L, "bf16")
            dst = self._alloc(reps * L)
            if a is None or dst is None:
                return None
            p.f = dict(op=Op.FMAC, color=p.color, a_base=a, a_stride=stride, count=count, reps=reps,
                       dst_base=dst, group=group)
            p.data = (dst, L, reps)
            self.dst_regions.append((dst, reps * L))
            return p.f
        if p.kind in ("STORE", "STORE2"):
            reps = self.r(1, 7)
            lo, hi = (0, reps) if self.p(0.6) else (self.r(0, reps), None)
            if hi is None:
                hi = self.r(lo, reps + 1)
            nvec = max(0, min(hi, reps) - lo)
            f = dict(op=Op.STORE, color=p.color, reps=reps, lo=lo, hi=hi)
            if self.p(0.2) and nvec:
                bs = self.r(nvec, nvec + 2)
                size = (nvec - 1) + (L - 1) * bs + 1
                f["b_stride"] = bs
                self.tags["transposed-store"] += 1
            else:
                size = nvec * L
            dst = self._alloc(size)
            if dst is None:
                return None
            f["dst_base"] = dst
            p.f = f
            if size:
                self.dst_regions.append((dst, size))
            if lo == 0 and "b_stride" not in f and nvec:
                p.data = (dst, L, nvec)
            return f
        # VEC
        mode = VecMode(self.r(0, 3))
        dot = mode == VecMode.DOT
        reps = self.r(1, 6)
        count = self.r(1, 4 if L > 1 else 3) if not dot else self.r(1, max(4, L + 1))
        count = count if dot else 1
        f = dict(op=Op.VEC, vmode=mode, color=p.color, relu=self.r(0, 1), round=self.r(0, 1), count=count)
        # dependencies: earlier plans (acyclic), whose done counter starts at 0 in this phase
        cands = [q for q in self.plans[:self.plans.index(p)]
                 if (first or (q.wavelet and q.prev is None) or self.m.done[q.t] == 0)
                 and not self._reaches(p.next, q)]
        deps = []
        for key in ("dep_a", "dep_b"):
            if cands and self.p(0.55):
                q = self.pick(cands)
                f[key + "_en"], f[key] = 1, q.t
                deps.append(q)
        p.deps = deps
        sources = [q for q in deps if q.data]
        # operand A
        if not dot and sources and self.p(0.6):
            q = self.pick(sources)
            base, unit, units = q.data
            f["a_base"], f["a_stride"], f["group"] = base, self.pick([unit, unit, 0]), self.pick([0, 1, 1, 2])
            reps = min(reps, units)
            self.tags["vec-reads-produced"] += 1
        else:
            stride = self.pick([L, L, 1, 0, L + 1, self.r(0, 6)])
            group = self.pick([0, 1, 1, 2])
            size = ((count - 1) * stride + L) if dot else (((reps - 1) // max(group, 1)) * stride + L)
            a = self._operands(size, "act" if mode == VecMode.MASK else None)
            if a is None:
                return None
            f["a_base"], f["a_stride"], f["group"] = a, stride, group
        if mode != VecMode.PASS:
            if sources and self.p(0.6):
                q = self.pick(sources)
                base, unit, units = q.data
                f["b_base"], f["b_stride"] = base, self.pick([unit, unit, 0])
                reps = min(reps, units)
                self.tags["vec-reads-produced"] += 1
            else:
                stride = self.pick([L, L, 0, 1, L + 1])
                b = self._operands((reps - 1) * stride + L)
                if b is None:
                    return None
                f["b_base"], f["b_stride"] = b, stride
        send, store = self.pick([(1, 0), (1, 1), (0, 1), (1, 1)])
        f.update(send=send, store=store, reps=reps)
        if not send and self.p(0.3):
            f["color"] = self.r(0, 31)            # COLOR is checked only for a sending VEC
            self.tags["vec-store-only-any-color"] += 1
        if store:
            lo, hi = (0, reps) if self.p(0.6) else (self.r(0, reps), None)
            if hi is None:
                hi = self.r(lo, reps + 2)
            unit = count if dot else L
            size = max(0, min(hi, reps) - lo) * unit
            dst = self._alloc(size)
            if dst is None:
                return None
            f.update(lo=lo, hi=hi, dst_base=dst)
            if size:
                self.dst_regions.append((dst, size))
            if lo == 0 and min(hi, reps) and (not dot or count >= L):
                p.data = (dst, unit, min(hi, reps))
        else:
            f.update(lo=self.r(0, 3), hi=self.r(3, 6), dst_base=self.r(0, 0xFFFF))   # unused
        p.f = f
        return f

    def _plan_phase(self, first, stop=False):
        rng, T, C = self.rng, self.T, self.C
        k = self.r(2, T) if T > 1 and self.p(0.85) else 1
        slots = [int(t) for t in rng.permutation(T)[:k]]
        plans = [_Plan(t, str(rng.choice(KINDS, p=KIND_P))) for t in slots]
        colors = [int(c) for c in rng.permutation(C)]
        for p in plans:
            if p.wavelet:
                if colors:
                    p.color = colors.pop()
                else:
                    p.kind, p.chan = "VEC", None
        vec_colors = [int(c) for c in rng.permutation(C)]
        for p in plans:
            if not p.wavelet:
                p.color = vec_colors.pop() if vec_colors else None
        plans = [p for p in plans if p.color is not None]
        # chains (acyclic): a wavelet descriptor into one on its input, or into a VEC; a VEC into either
        for p in [plans[i] for i in rng.permutation(len(plans))]:
            if p.next is not None or not self.p(0.35):
                continue
            cands = [q for q in plans if q is not p and q.prev is None and not self._reaches(q, p)
                     and (not (p.wavelet and q.wavelet) or p.chan == q.chan)]
            if not cands:
                continue
            q = self.pick(cands)
            p.next, q.prev = q, p
            if p.wavelet and q.wavelet and self.p(0.5):
                q.color = p.color                   # a chain on one color: q takes over when p ends
            if not p.wavelet and not q.wavelet and self.p(0.3):
                q.color = p.color                   # a chained VEC goes on after the first on its color
            self.tags["chain"] += 1
        # a chain into a descriptor that is not legal (never committed, or stopped) starts nothing
        dead = [t for t in range(T) if t not in {p.t for p in plans} and (stop or not self.m.legal[t])]
        for p in plans:
            if p.next is None and dead and self.p(0.12):
                p.dead_next = self.pick(dead)
                self.tags["chain into a descriptor not legal"] += 1
        return plans

    @staticmethod
    def _reaches(a, b):
        while a is not None:
            if a is b:
                return True
            a = a.next
        return False

    def _stream(self, p):
        """The chunks of ``p``'s run: an FMAC group (``acc_rows`` rows, wavelet-major) is atomic for
        other FMACs; STORE words are single chunks."""
        f = p.f
        if p.kind == "FMAC":
            chunks, n0 = [], 0
            while n0 < f["reps"]:
                ng = fmac_group_rows(f["reps"] - n0, self.R)
                chunks.append(("F", self._wavelets(p.color, ng * f["count"])))
                n0 += ng
            return chunks
        return [("S", [w]) for w in self._wavelets(p.color, f["reps"] * self.L)]

    def _wavelets(self, color, n):
        ctrl = self.rng.random(n) < 0.1
        return [(color, d, int(x)) for d, x in zip(rand_words(self.rng, n, "bf16" if self.p(0.7) else None), ctrl)]

    def _interleave(self, seqs):
        """Merge chunk sequences at random, each in order; STORE words now and then inside an FMAC
        group (STOREs do not use the accumulator)."""
        seqs = [list(s) for s in seqs if s]
        out = []
        while seqs:
            i = int(self.rng.integers(len(seqs)))
            kind, words = seqs[i].pop(0)
            if kind == "F" and len(seqs) > 1 and self.p(0.3):
                for w in words:
                    out.append(w)
                    others = [s for j, s in enumerate(seqs) if j != i and s and s[0][0] == "S"]
                    if others and self.p(0.3):
                        out += self.pick(others).pop(0)[1]
                        self.tags["store-inside-fmac-group"] += 1
            else:
                out += words
            seqs = [s for s in seqs if s]
        return out

    def phase(self, first, simple=False, illegal=False):
        """One phase: every active descriptor stopped (after the first), the operands written, the
        descriptors committed (chain targets first, then FMAC/STORE, then VECs in dependency order,
        so no VEC fires while a descriptor it concerns is still being written), their streams on
        ``rx`` and ``rx2`` cut into 1..3 steps (with harmless writes between them; in illegal programs
        also descriptors rewritten or stopped in the middle), then the streams of descriptors a VEC's
        chain started."""
        for _ in range(6):
            self.free = [(0, self.S)]
            self.sram_init = []
            n_regions = len(self.dst_regions)
            stop = not first and (any(self.m.active) or self.p(0.3))
            self.plans = plans = self._plan_phase(first, stop)
            ok = all(self._fields(p, first) is not None for p in plans)
            if not ok:
                del self.dst_regions[n_regions:]
                self.rejected["sram-full"] += 1
                continue
            for p in plans:
                p.f["enable"] = int(p.prev is None)
                if p.next is not None:
                    p.f.update(chain=1, next=p.next.t)
                elif p.dead_next is not None:
                    p.f.update(chain=1, next=p.dead_next)
            pre = []
            if not first:
                if stop:
                    pre.append([self.base + STATUS["STOP"], self.r(0, WORD_MASK)])
                    self.tags["stop"] += 1
                if self.m.fault is not None and self.p(0.8):
                    pre.append([self.base + STATUS["FAULT"], 0])
            order = ([p for p in plans if p.prev is not None] + [p for p in plans if p.prev is None and p.wavelet]
                     + [p for p in plans if p.prev is None and not p.wavelet])
            writes = pre + self._init_writes()
            for p in order:
                writes += desc_writes(self.cfg, p.t, **p.f)
            if not simple and self.p(0.3):
                # SRAM writes while the VECs that started at their commit store: theirs wait (the
                # timing model does not model it, so not in timed programs)
                free = [a for lo, hi in self.free for a in range(lo, hi - 1)]
                if free:
                    pick = self.rng.choice(free, min(len(free), self.r(1, 6)), replace=False)
                    writes += [[a, self.r(0, WORD_MASK)] for a in sorted(pick.tolist())]
                    self.tags["sram-writes-beside-vec"] += 1
            if self.add(writes, why="phase setup"):
                break
            del self.dst_regions[n_regions:]
        else:
            return False
        for p in plans:
            self.tags[f"op {p.kind}" if p.kind != "VEC" else f"op VEC {VecMode(p.f['vmode']).name}"] += 1
            self.tags["deps"] += len(p.deps)
        # the streams: each chain of wavelet descriptors on its input, one after the other
        main, post = {"rx": [], "rx2": []}, []
        for p in plans:
            if not p.wavelet or (p.prev is not None and p.prev.wavelet):
                continue
            seq, q = [], p
            while q is not None and q.wavelet:
                seq += self._stream(q)
                q = q.next
            (post if p.prev is not None else main[p.chan]).append((p, seq))
        w1 = self._interleave([s for _, s in main["rx"]])
        w2 = self._interleave([s for _, s in main["rx2"]])
        n = self.pick([1, 1, 2, 2, 3])
        c1 = sorted(int(x) for x in self.rng.integers(0, len(w1) + 1, n - 1))
        c2 = sorted(int(x) for x in self.rng.integers(0, len(w2) + 1, n - 1))
        c1, c2 = [0] + c1 + [len(w1)], [0] + c2 + [len(w2)]
        for i in range(n):
            if i:
                if illegal and self.p(0.35):
                    self.midrun(plans)
                elif self.p(0.4):
                    free = [a for lo, hi in self.free for a in range(lo, hi - 1)]
                    self.add(self.harmless_writes(free), reads=False, why="harmless writes")
            a1, a2 = w1[c1[i]:c1[i + 1]], w2[c2[i]:c2[i + 1]]
            if a1 or a2 or self.p(0.2):         # (an empty one: a read-back in the middle of the phase)
                self.traffic(a1, a2)
        for p, seq in post:
            if self.m.active[p.t]:
                words = [w for _, ws in seq for w in ws]
                if p.chan == "rx":
                    self.traffic(words, [])
                else:
                    self.traffic([], words)
                self.tags["vec-chain-into-wavelet"] += 1
        return True

    def traffic(self, w1, w2):
        """A step with ``w1`` on rx and ``w2`` on rx2; when that is not valid (faults from both inputs,
        say) the two in steps of their own, then halves."""
        if self.add((), w1, w2, why="traffic"):
            return
        if w1 and w2:
            self.traffic(w1, [])
            self.traffic([], w2)
        elif len(w1) + len(w2) > 1:
            h1, h2 = len(w1) // 2, len(w2) // 2
            self.traffic(w1[:h1], w2[:h2])
            self.traffic(w1[h1:], w2[h2:])
        else:
            self.rejected["wavelet dropped"] += 1

    # -- illegal programs --

    def _free_slots(self, n):
        free = [t for t in range(self.T) if not self.m.active[t]]
        if len(free) < n:
            return None
        return [int(t) for t in self.rng.permutation(free)[:n]]

    def _clear(self):
        return [[self.base + STATUS["FAULT"], 0]] if self.p(0.85) else []

    def midrun(self, plans):
        """A descriptor of the running phase rewritten (one word: it stops; all of them: it restarts)
        or every descriptor stopped, between two steps of its streams."""
        live = [p for p in plans if self.m.active[p.t]]
        fmacs = [p for p in live if p.kind == "FMAC"]
        if fmacs and self.p(0.2):               # an active FMAC's color on rx2: the store engine has no STORE
            ok = self.add(self._clear(), [], self._wavelets(self.pick(fmacs).color, 1), why="midrun")
            self.tags["inject midrun FMAC color on rx2"] += ok
            return
        if not live or self.p(0.25):
            stop = [[self.base + STATUS["STOP"], self.r(0, WORD_MASK)]]
            if live and self.p(0.5):            # then one of them committed again: its chain may not start the rest
                p = self.pick(live)
                stop += desc_writes(self.cfg, p.t, **dict(p.f, enable=1))
            ok = self.add(self._clear() + stop, why="midrun")
            self.tags["inject midrun STOP"] += ok
            return
        p = self.pick(live)
        if self.p(0.5):
            w = self.r(1, DESC_WORDS - 1)
            words = encode(**p.f)
            ok = self.add(self._clear() + [[desc_addr(self.S, p.t, w), words[w]]], why="midrun")
            self.tags["inject midrun stop one"] += ok
        else:
            ok = self.add(self._clear() + desc_writes(self.cfg, p.t, **dict(p.f, enable=1)), why="midrun")
            self.tags["inject midrun restart"] += ok

    def inject(self, kind=None):
        kind = kind or self.pick(INJECTIONS[:-1])
        ok = getattr(self, f"_inj_{kind}")()
        if ok:
            self.tags[f"inject {kind}"] += 1
        return ok

    def _small(self, op, color, t):
        """Fields of a small legal descriptor of ``op`` that touches no SRAM (not enabled)."""
        L = self.L
        if op == Op.FMAC:
            return dict(op=op, color=color, a_base=0, a_stride=L, count=self.r(1, 3), reps=self.r(1, 3), dst_base=0)
        if op == Op.STORE:
            reps = self.r(1, 3)
            return dict(op=op, color=color, reps=reps, lo=0, hi=reps, dst_base=0)
        mode = VecMode(self.r(0, 3))
        reps = self.r(1, 3)
        return dict(op=op, vmode=mode, color=color, count=self.r(1, 3) if mode == VecMode.DOT else 1, reps=reps,
                    send=1, store=self.r(0, 1), lo=0, hi=reps)

    def _inj_commit(self):
        """A descriptor with an illegal field (or two: the first check wins), committed in a free slot
        or over a running one; or a VEC that is legal although it looks wrong (color >= num_colors
        without send, an index >= num_tasks without its enable)."""
        T, C = self.T, self.C
        t = self.r(0, T - 1)
        if self.m.active[t] and self.p(0.5):
            slots = self._free_slots(1)
            t = slots[0] if slots else t
        op = self.pick([Op.FMAC, Op.STORE, Op.VEC, Op.VEC])
        f = self._small(op, self.r(0, C - 1), t)
        f["enable"] = self.r(0, 1)
        faults = []
        for _ in range(1 if self.p(0.7) else 2):
            k = self.pick(["COUNT", "COLOR", "INDEX"] + (["NO_ACTION"] if op == Op.VEC else []))
            faults.append(k)
            if k == "COUNT":
                choices = ["reps"] + (["lohi"] if op != Op.FMAC else ["count"]) + (["vcount"] if op == Op.VEC else [])
                c = self.pick(choices)
                if c == "reps":
                    f["reps"] = 0
                elif c == "lohi":
                    f["lo"], f["hi"] = self.r(1, 6), 0
                elif c == "count":
                    f["count"] = 0
                else:
                    f["count"] = 0 if f["vmode"] == VecMode.DOT else self.pick([0, 2, 3])
            elif k == "COLOR":
                f["color"] = self.r(C, 31) if C < 32 else f["color"]
                if op == Op.VEC:
                    f["send"] = 1
            elif k == "INDEX":
                c = self.pick(["next"] + (["dep_a", "dep_b"] if op == Op.VEC else []))
                if c == "next":
                    f.update(chain=1, next=t if self.p(0.4) or T >= 32 else self.r(T, 31))
                elif T < 32:
                    f.update({c + "_en": 1, c: self.r(T, 31)})
            else:
                f.update(send=0, store=0)
        if op == Op.VEC and self.p(0.15):          # legal look-alikes
            f = self._small(op, self.r(C, 31) if C < 32 else 0, t)
            f.update(send=0, store=1, enable=0, dep_a_en=0, dep_a=self.r(0, 31))
            faults = ["none"]
        ok = self.add(self._clear() + desc_writes(self.cfg, t, **f), why="inject commit")
        if ok:
            for k in faults:
                self.tags[f"commit {k}"] += 1
        return ok

    def _inj_unbound(self):
        """Wavelets on a color nobody listens on (on rx2: no STORE; an FMAC's color qualifies): often the
        color of a descriptor whose run ended (a wavelet too many), else any."""
        rx2 = self.p(0.4)
        ops = (Op.STORE,) if rx2 else (Op.FMAC, Op.STORE)
        m = self.m
        bound = {m.desc[t]["color"] for t in range(self.T) if m.active[t] and m.desc[t]["op"] in ops}
        ended = [m.desc[t]["color"] for t in range(self.T) if m.legal[t] and not m.active[t]
                 and m.desc[t]["op"] in (Op.FMAC, Op.STORE) and m.desc[t]["color"] not in bound]
        free = [c for c in range(32) if c not in bound]
        c = self.pick(ended) if ended and self.p(0.6) else self.pick(free)
        w = self._wavelets(c, self.r(1, 3))
        return self.add(self._clear(), [] if rx2 else w, w if rx2 else [], why="inject unbound")

    def _inj_dup(self):
        """Two active descriptors on one color, then a wavelet of it: DUP_COLOR names the lower."""
        slots = self._free_slots(2)
        if not slots:
            return False
        busy = {self.m.desc[t]["color"] for t in range(self.T) if self.m.active[t]}
        colors = [c for c in range(self.C) if c not in busy]
        if not colors:
            return False
        c = self.pick(colors)
        rx2 = self.p(0.3)
        writes = self._clear()
        for t in slots:
            op = Op.STORE if rx2 or self.p(0.5) else Op.FMAC
            writes += desc_writes(self.cfg, t, **dict(self._small(op, c, t), enable=1))
        w = self._wavelets(c, 1)
        ok = self.add(writes, [] if rx2 else w, w if rx2 else [], why="inject dup")
        if ok:       # stop them again (the next phase would anyway)
            self.add([[desc_addr(self.S, t, 1), 0] for t in slots], reads=False, why="inject dup")
        return ok

    def _inj_acc(self):
        """FMAC X in the middle of a group when a wavelet of FMAC Y arrives: ACC_CONFLICT names Y."""
        slots = self._free_slots(2)
        busy = {self.m.desc[t]["color"] for t in range(self.T) if self.m.active[t]}
        colors = [c for c in range(self.C) if c not in busy]
        if not slots or len(colors) < 2:
            return False
        L = self.L
        self.free, self.sram_init = [(0, self.S)], []
        fs = []
        for c in self.rng.permutation(colors)[:2]:
            count, reps = self.r(2, 4), self.r(1, 3)
            a = self._operands((count - 1) * L + L, "bf16")
            fs.append(dict(op=Op.FMAC, enable=1, color=int(c), a_base=a, a_stride=L, count=count, reps=reps,
                           dst_base=self._alloc(reps * L)))
        if self.p(0.3):                         # Y chains out
            fs[1].update(chain=1, next=slots[0])
        writes = self._clear() + self._init_writes()
        for t, f in zip(slots, fs):
            writes += desc_writes(self.cfg, t, **f)
        x, y = fs
        ng = fmac_group_rows(x["reps"], self.R)
        k = self.r(1, ng * x["count"] - 1)
        ok = self.add(writes, self._wavelets(x["color"], k) + self._wavelets(y["color"], 1), why="inject acc")
        if ok:
            self.add([[desc_addr(self.S, t, 1), 0] for t in slots], reads=False, why="inject acc")
        return ok

    def _inj_range(self):
        """An access past the end of SRAM at run time: an FMAC operand or row, a STORE word (rx or
        rx2), a VEC's A, B, DOT row or destination; the words read before it are defined."""
        slots = self._free_slots(1)
        if not slots:
            return False
        t = slots[0]
        L, S = self.L, self.S
        busy = {self.m.desc[u]["color"] for u in range(self.T) if self.m.active[u]}
        colors = [c for c in range(self.C) if c not in busy]
        if not colors:
            return False
        c = self.pick(colors)
        tail = 4 * L + 8
        writes = self._clear() + [[a, w] for a, w in zip(range(S - tail, S), rand_words(self.rng, tail, "bf16"))]
        if self.m.pack:
            writes.insert(0, [self.base + STATUS["PACK"], 0])
        what = self.pick(["fmac-a", "fmac-dst", "store", "vec-a", "vec-b", "vec-dst", "dot-row"])
        w1 = w2 = []
        if what.startswith("fmac"):
            count, reps = self.r(1, 3), self.r(1, 3)
            stride = self.r(1, L + 1)
            if what == "fmac-a":
                i = self.r(0, count - 1)
                f = dict(op=Op.FMAC, enable=1, color=c, a_base=S - L - i * stride + 1, a_stride=stride, count=count,
                         reps=reps, dst_base=0)
            else:
                n = self.r(0, reps - 1)
                f = dict(op=Op.FMAC, enable=1, color=c, a_base=S - tail, a_stride=stride, count=count, reps=reps,
                         dst_base=S - (n + 1) * L + self.r(1, L))
            w1 = self._wavelets(c, count * reps + self.r(0, 2))
        elif what == "store":
            reps = self.r(1, 3)
            f = dict(op=Op.STORE, enable=1, color=c, reps=reps, lo=0, hi=reps, dst_base=S - self.r(1, reps * L))
            w = self._wavelets(c, reps * L)
            w1, w2 = (w, []) if self.p(0.5) else ([], w)
        else:
            mode = VecMode.DOT if what == "dot-row" else VecMode(self.r(0, 2) if what != "vec-b" else self.r(1, 2))
            reps = self.r(1, 3)
            n = self.r(0, reps - 1)
            count = self.r(2, 4) if mode == VecMode.DOT else 1
            f = dict(op=Op.VEC, vmode=mode, enable=1, send=1, store=0, color=c, a_base=S - tail, a_stride=L,
                     b_base=S - tail + 1, b_stride=1, count=count, reps=reps)
            if what == "vec-a":
                f.update(a_base=S - L - n * L + 1)
            elif what == "vec-b":
                f.update(b_base=S - L - n + 1)
            elif what == "vec-dst":
                f.update(store=1, lo=0, hi=reps, dst_base=S - (n + 1) * L + self.r(1, L))
            else:
                k = self.r(1, count - 1)
                f.update(a_base=S - L - k * L + 1, b_base=S - tail)
        others = [u for u in range(self.T) if u != t and not self.m.active[u]]
        heads = [x for x in colors if x != c]
        if others and self.p(0.5):
            u = self.pick(others)
            if self.p(0.5) or not heads:        # it chains out (RANGE ends the run without the chain)
                f.update(chain=1, next=u)
                self.tags["range chains-out"] += 1
            else:                                # a STORE of one vector starts it (chained into), on its input
                h = self.pick(heads)
                f["enable"] = 0
                writes += desc_writes(self.cfg, t, **f)
                t, f = u, dict(op=Op.STORE, enable=1, color=h, reps=1, lo=0, hi=1, dst_base=S - tail - L, chain=1,
                               next=t)
                start = self._wavelets(h, L)
                if w2:
                    w2 = start + w2
                else:
                    w1 = start + w1
                self.tags["range chained-into"] += 1
        ok = self.add(writes + desc_writes(self.cfg, t, **f), w1, w2, why="inject range")
        if ok:
            self.tags[f"range {what}"] += 1
            self.add([[desc_addr(self.S, t, 1), 0]], reads=False, why="inject range")
        return ok

    def program(self, seed, kind, timed):
        return {"config": self.spec, "seed": seed, "kind": kind, "timed": timed,
                "gap": 0.0, "gap2": 0.0, "stall": 0.0, "tags": dict(self.tags), "steps": self.steps}


def generate(spec, seed, *, illegal=0.3, one_phase=0.4):
    """Program ``seed`` of configuration ``spec``: with probability ``illegal`` an illegal one (faults
    injected), else legal: then with probability ``one_phase / (1 - illegal)`` of a single phase (every
    descriptor committed once), else of 1 to 3 phases. A legal program is *timed* (its cycles compared)
    unless SRAM was written while a VEC stored (the timing model does not model it)."""
    rng = np.random.default_rng([seed, 0x5EED])
    b = Builder(spec, rng)
    bad = rng.random() < illegal
    single = not bad and rng.random() < one_phase / max(1e-9, 1 - illegal)
    phases = 1 if single else b.r(1, 3)
    for i in range(phases):
        b.phase(first=i == 0, simple=single, illegal=bad)
        if bad and b.p(0.6):
            b.inject()
    if bad and not b.m.attempts:
        for _ in range(4):
            if b.inject(b.pick(["unbound", "commit", "range"])) and b.m.attempts:
                break
    b.add(reads="final", why="final reads")
    timed_ok = not bad and not b.tags["sram-writes-beside-vec"]
    prog = b.program(seed, "illegal" if bad else "legal", timed_ok)
    prog["tags"]["one-phase"] = int(single)
    prog["gap"], prog["gap2"], prog["stall"] = (0.0 if b.p(0.3) else round(float(rng.random()) * 0.6, 2)
                                                for _ in range(3))
    prog["rejected"] = dict(b.rejected)
    return prog


def seeds(seed, n):
    """The seeds of the first ``n`` programs of a run of seed ``seed``."""
    return range(seed * 1_000_003, seed * 1_000_003 + n)


def programs(spec, n, seed=1, **kw):
    """The first ``n`` programs of configuration ``spec`` of a run of seed ``seed`` (:func:`seeds`)."""
    return [generate(spec, s, **kw) for s in seeds(seed, n)]
