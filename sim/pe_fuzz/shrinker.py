"""Shrinking a failing program (:func:`shrink`) to a small one that is still valid and still fails in the
same way; :class:`FlipAddModel`, a wrong model, makes a failure to shrink without an RTL bug."""

import copy
import itertools

from arch.pe_map import DESC_STRIDE, DESC_WORDS, VecMode, decode, encode, status_base
from sim.pe_fuzz.comparison import compare
from sim.pe_fuzz.configs import make_config
from sim.pe_fuzz.model import FuzzModel, expect, validate
from sim.pe_fuzz.rtl import run_rtl


class FlipAddModel(FuzzModel):
    """A wrong golden model, a synthetic mismatch for the shrinker's test and the bench's demonstration:
    it flips the lowest bit of the first word a VEC ADD sends for its unit 1."""

    def _fire(self, t):
        n0, k = self.n[t], len(self.out)
        super()._fire(t)
        if self.desc[t]["vmode"] == VecMode.ADD and n0 == 1 and len(self.out) > k:
            c, w = self.out[k]
            self.out[k] = (c, w ^ 1)


def size(prog):
    """A program's size for the shrinker: steps, writes, wavelets (twice), reads (a quarter)."""
    return sum(4 + len(s["writes"]) + 2 * (len(s["wavelets"]) + len(s["wavelets2"])) + len(s["reads"]) // 4
               for s in prog["steps"])


def _weight(prog):
    """What the shrinker makes smaller: :func:`size`, then reads, plain data, timing and simpler fields."""
    cfg = make_config(prog["config"])
    fields = 0
    for _, _, _, words in _commits(prog, cfg):
        f = decode(words)
        fields += sum(f.get(name, v) != v for name, v in _SIMPLER)
    data = sum(d != 0x3F800000 or bool(x and x[0])
               for s in prog["steps"] for _, d, *x in s["wavelets"] + s["wavelets2"])
    reads = sum(len(s["reads"]) for s in prog["steps"])
    return (size(prog), reads + data + fields + bool(prog["gap"]) + bool(prog["gap2"]) + bool(prog["stall"]))


def _kind(diffs):
    return {d.split(":", 1)[0] for d in diffs}


def _without(prog, key, lo, hi):
    q = copy.deepcopy(prog)
    if key[0] == "steps":
        del q["steps"][lo:hi]
    else:
        del q["steps"][key[1]][key[2]][lo:hi]
    return q


def _descriptor_writes(prog, cfg):
    """``{(step, t): {word: index of the write}}`` for the descriptor writes of each step."""
    S, base = cfg.sram_words, status_base(cfg.sram_words, cfg.num_tasks)
    out = {}
    for s, step in enumerate(prog["steps"]):
        for i, (a, _) in enumerate(step["writes"]):
            if S <= a < base and (a - S) % DESC_STRIDE < DESC_WORDS:
                out.setdefault((s, (a - S) // DESC_STRIDE), {})[(a - S) % DESC_STRIDE] = i
    return out


def _commits(prog, cfg):
    """``(step, index of the write, t, the descriptor's words)`` of every commit (a write of word 0)."""
    S, base = cfg.sram_words, status_base(cfg.sram_words, cfg.num_tasks)
    words = [[0] * DESC_WORDS for _ in range(cfg.num_tasks)]
    for s, step in enumerate(prog["steps"]):
        for i, (a, w) in enumerate(step["writes"]):
            if S <= a < base and (a - S) % DESC_STRIDE < DESC_WORDS:
                t, k = divmod(a - S, DESC_STRIDE)
                words[t][k] = w
                if k == 0:
                    yield s, i, t, list(words[t])


def _recommit(prog, cfg, s, i, t, fields):
    """``prog`` with the commit of descriptor ``t`` at write ``i`` of step ``s`` made a full write of
    ``fields`` (the step's earlier writes of that descriptor dropped)."""
    q = copy.deepcopy(prog)
    S = cfg.sram_words
    lo, hi = S + DESC_STRIDE * t, S + DESC_STRIDE * t + DESC_WORDS
    before = [0] * DESC_WORDS       # the descriptor's words before step s
    for step in prog["steps"][:s]:
        for a, w in step["writes"]:
            if lo <= a < hi:
                before[a - lo] = w
    writes = q["steps"][s]["writes"]
    mine = {j for j in range(i) if lo <= writes[j][0] < hi}
    enc = encode(**fields)
    new = [[lo + w, enc[w]] for w in range(1, DESC_WORDS) if enc[w] != before[w]] + [[lo, enc[0]]]
    q["steps"][s]["writes"] = [w for j, w in enumerate(writes[:i]) if j not in mine] + new + writes[i + 1:]
    return q


_SIMPLER = (("reps", 1), ("count", 1), ("group", 0), ("chain", 0), ("dep_a_en", 0), ("dep_b_en", 0), ("relu", 0),
            ("round", 0), ("b_stride", 0), ("lo", 0), ("send", 0), ("store", 0))


def _candidates(prog, done, max_lists=200, kind=None):
    """Smaller variants of ``prog``: ``(key, program)``. Lists (the steps; each step's writes,
    wavelets, wavelets2, reads) lose one chunk: halves first, then quarters, ... down to single
    elements, at most ``max_lists`` variants in all; the other keys (a descriptor's writes dropped, a
    field of a commit made simpler, timing or data made plain) are tried once (``done``) until the
    program changes."""
    cfg = make_config(prog["config"])
    lists = [("steps",)] + [("w", s, f) for s in range(len(prog["steps"]))
                            for f in ("wavelets", "wavelets2", "writes", "reads")]
    sizes = {key: len(prog["steps"] if key[0] == "steps" else prog["steps"][key[1]][key[2]]) for key in lists}
    seen, count, level = set(), 0, 1
    while count < max_lists and any(n >> (level - 1) for n in sizes.values()):
        for key, n in sizes.items():
            c = max(1, -(-n // (1 << level)))
            if n == 0 or (key, c) in seen:
                continue
            seen.add((key, c))
            for lo in range(0, n, c):
                if count >= max_lists:
                    break
                count += 1
                yield (*key, lo, lo + c), _without(prog, key, lo, lo + c)
        level += 1
    if kind != "read" and ("noreads",) not in done and any(s["reads"] or s.get("bg_reads") for s in prog["steps"]):
        q = copy.deepcopy(prog)
        for s in q["steps"]:
            s["reads"], s["bg_reads"] = [], []
        yield ("noreads",), q
    dw = _descriptor_writes(prog, cfg)
    for t in sorted({t for _, t in dw}):
        key = ("desc", t)
        if key not in done:
            q = copy.deepcopy(prog)
            for (s, u), words in dw.items():
                if u == t:
                    idx = set(words.values())
                    q["steps"][s]["writes"] = [w for i, w in enumerate(q["steps"][s]["writes"]) if i not in idx]
            yield key, q
    for s, i, t, words in _commits(prog, cfg):
        fields = decode(words)
        for name, v in _SIMPLER:
            key = ("field", s, t, name)
            if key in done or fields.get(name, v) == v or (name == "reps" and fields["reps"] == 0):
                continue
            yield key, _recommit(prog, cfg, s, i, t, dict(fields, **{name: v}))
    if ("timing",) not in done and (prog["gap"] or prog["gap2"] or prog["stall"]):
        yield ("timing",), dict(copy.deepcopy(prog), gap=0.0, gap2=0.0, stall=0.0)
    for s, step in enumerate(prog["steps"]):
        key = ("data", s)
        plain = all(d == 0x3F800000 and not (x and x[0]) for _, d, *x in step["wavelets"] + step["wavelets2"])
        if key not in done and not plain:
            q = copy.deepcopy(prog)
            for f in ("wavelets", "wavelets2"):
                q["steps"][s][f] = [[c, 0x3F800000, 0] for c, *_ in q["steps"][s][f]]
            yield key, q


def shrink(prog, *, run=None, model_cls=None, timing=True, max_rounds=40, max_batch=200):
    """Reduce failing program ``prog`` while it stays valid (:func:`validate`; a timed program also
    fault free) and still fails with a difference of the kind of its first one: each round runs every
    candidate of :func:`_candidates` in one batch (``run(programs, expectations)``, default the RTL)
    and keeps the smallest that still fails; a list whose chunks all pass is tried in chunks half as
    long. Returns ``(program, its differences, {"rounds", "candidates"})``; the program is returned as
    it was when it does not fail."""
    run = run or (lambda ps, es: run_rtl(ps, es, name="shrink"))

    def check(progs):
        exps = [expect(p, model_cls) for p in progs]
        return [compare(p, e, r, timing=timing)[0] for p, e, r in zip(progs, exps, run(progs, exps))]

    diffs = check([prog])[0]
    info = {"rounds": 0, "candidates": 0}
    if not diffs:
        return prog, [], info
    kind = diffs[0].split(":", 1)[0]
    done = set()
    combined = None
    while info["rounds"] < max_rounds:
        cands = []
        more = [(("combined",), combined)] if combined else []
        for key, q in itertools.chain(more, _candidates(prog, done, max_batch, kind)):
            if key[0] not in ("steps", "w", "combined"):
                done.add(key)
            if validate(q) or (q.get("timed") and expect(q)["attempts"]):
                continue
            cands.append((key, q))
        if not cands:
            break
        info["rounds"] += 1
        info["candidates"] += len(cands)
        results = check([q for _, q in cands])
        now = _weight(prog)
        fails = [(w, i) for i, ((_, q), d) in enumerate(zip(cands, results))
                 if kind in _kind(d) and (w := _weight(q)) < now]
        if not fails:
            break
        combined = _combine(prog, [cands[i][0] for _, i in fails])
        _, i = min(fails)
        prog, diffs = cands[i][1], results[i]
        done = set()
    return prog, diffs, info


def _combine(prog, keys):
    """``prog`` with every edit of ``keys`` that each kept the failure applied at once: list chunks
    removed (per list the longest first, none overlapping), timing and data made plain, reads dropped;
    None unless that is more than one edit."""
    chunks = {}
    for key in keys:
        if key[0] in ("steps", "w"):
            chunks.setdefault(key[:-2], []).append((key[-2], key[-1]))
    keep, n = {}, 0
    for lst, cs in chunks.items():
        for lo, hi in sorted(cs, key=lambda c: c[0] - c[1]):
            if all(hi <= a or lo >= b for a, b in keep.get(lst, [])):
                keep.setdefault(lst, []).append((lo, hi))
                n += 1
    plain = [k for k in keys if k[0] in ("timing", "data", "noreads")]
    if n + len(plain) < 2:
        return None
    q = copy.deepcopy(prog)
    for k in plain:                      # timing and data made plain, reads dropped: no list changes length
        if k[0] == "timing":
            q.update(gap=0.0, gap2=0.0, stall=0.0)
        elif k[0] == "data":
            for f in ("wavelets", "wavelets2"):
                q["steps"][k[1]][f] = [[c, 0x3F800000, 0] for c, *_ in q["steps"][k[1]][f]]
        else:
            for step in q["steps"]:
                step["reads"], step["bg_reads"] = [], []
    for lst, cs in sorted(keep.items(), key=lambda kv: kv[0][0] == "steps"):     # the steps list last
        items = q["steps"] if lst[0] == "steps" else q["steps"][lst[1]][lst[2]]
        for lo, hi in sorted(cs, reverse=True):
            del items[lo:hi]
    return q
