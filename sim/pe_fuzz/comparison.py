"""The RTL's run of a program against the golden model's view of it: :func:`compare` (words, reads, faults,
hangs and, through :func:`replay_cycles`, cycles)."""

from collections import Counter

from arch.pe_map import DESC_STRIDE, DESC_WORDS, DONE_OFFSET, STATUS, Op, decode, status_base
from arch.wavelet import pack_wavelet, unpack_wavelet
from sim.pe_fuzz.configs import make_config


def _by_color(words):
    """``{color: [wavelet words, in order]}``."""
    out = {}
    for w in words:
        out.setdefault(unpack_wavelet(w)[1], []).append(w)
    return out


def compare(prog, exp, res, *, timing=True):
    """Differences between the RTL's run ``res`` (:func:`sim.pe_fuzz.rtl.run_rtl`) and the model's view
    ``exp`` (:func:`sim.pe_fuzz.model.expect`) of ``prog`` (a list of strings ``"<kind>: ..."``, kind
    ``hang``, ``words``, ``read``, ``fault`` or ``cycles``; empty when they agree) and what was compared
    (a ``Counter`` of ``words``, ``reads``, ``faults``, ``cycles``). ``timing``: compare cycles too (a
    result without cycles, :func:`sim.pe_fuzz.rtl.model_results`, has none to compare)."""
    cfg = make_config(prog["config"])
    diffs = []
    counts = Counter()
    if res["timeout"] is not None:
        s = res["timeout"]
        step = prog["steps"][s]
        diffs.append(f"hang: step {s} not finished within {res['cycles']} cycles (wavelets taken "
                     f"{len(res['rx'])}/{sum(len(x['wavelets']) for x in prog['steps'][:s + 1])} on rx, "
                     f"{len(res['rx2'])}/{sum(len(x['wavelets2']) for x in prog['steps'][:s + 1])} on rx2, words "
                     f"sent {len(res['tx'])}/{exp['steps'][s]['expect_tx']}, {len(step['writes'])} writes)")
    want = _by_color([pack_wavelet(d, c) for c, d in exp["out"]])
    got = _by_color(res["tx"])
    for c in sorted(set(want) | set(got)):
        e, g = want.get(c, []), got.get(c, [])
        n = min(len(e), len(g))
        counts["words"] += n
        bad = next((i for i in range(n) if e[i] != g[i]), None)
        if bad is not None:
            diffs.append(f"words: color {c}, word {bad}: RTL {g[bad]:#012x}, model {e[bad]:#012x} "
                         f"(data {unpack_wavelet(g[bad])[0]:#010x} / {unpack_wavelet(e[bad])[0]:#010x})")
        elif len(e) != len(g) and res["timeout"] is None:
            diffs.append(f"words: color {c}: RTL sent {len(g)} words, model {len(e)}")
    for s, (step, e, g) in enumerate(zip(prog["steps"], exp["steps"], res["reads"])):
        counts["reads"] += min(len(e["reads"]), len(g))
        bad = next((i for i in range(min(len(e["reads"]), len(g))) if e["reads"][i] != g[i]), None)
        if bad is not None:
            diffs.append(f"read: step {s}, {step['reads'][bad]:#06x} ({_addr_name(cfg, step['reads'][bad])}): "
                         f"RTL {g[bad]:#010x}, model {e['reads'][bad]:#010x}")
    for s, (step, e, g) in enumerate(zip(prog["steps"], exp["steps"], res.get("bg_reads", []))):
        counts["reads"] += min(len(e["bg_reads"]), len(g))
        bad = next((i for i in range(min(len(e["bg_reads"]), len(g))) if e["bg_reads"][i] != g[i]), None)
        if bad is not None:
            a = step["bg_reads"][bad]
            diffs.append(f"read: step {s}, {a:#06x} ({_addr_name(cfg, a)}) read while the wavelets flow: "
                         f"RTL {g[bad]:#010x}, model {e['bg_reads'][bad]:#010x}")
    want_f = [e["fault"] for e in exp["steps"]][:len(res["faults"])]
    counts["faults"] += len(want_f)
    if res["faults"] != want_f:
        s = next(i for i in range(len(want_f)) if res["faults"][i] != want_f[i])
        diffs.append(f"fault: step {s}: fault flag RTL {res['faults'][s]}, model {want_f[s]}")
    if res["timeout"] is None and timing:
        if prog.get("timed"):
            d, n = replay_cycles(cfg, prog, exp, res)
            diffs += d
            counts["cycles"] += n
        elif not exp["model"].short_groups and res["rx_wait"]:
            diffs.append(f"cycles: rx.ready fell in cycle {res['rx_wait'][0]} while a wavelet was offered "
                         f"(no FMAC group was shorter than acc_rows)")
    return diffs, counts


def _addr_name(cfg, a):
    S, T = cfg.sram_words, cfg.num_tasks
    base = status_base(S, T)
    if a < S:
        return "SRAM"
    if a < base:
        t, w = divmod(a - S, DESC_STRIDE)
        return f"descriptor {t} word {w}"
    names = {v: k for k, v in STATUS.items()}
    off = a - base
    if off in names:
        return names[off]
    if DONE_OFFSET <= off < DONE_OFFSET + T:
        return f"done[{off - DONE_OFFSET}]"
    return "unmapped"


def replay_cycles(cfg, prog, exp, res):
    """The RTL run replayed on the closed-loop PE timing model (``_PeTiming``, as
    ``tests/hdl/pe/test_pe_core.py``'s ``replay_tx_cycles``): every configuration write acts from the
    cycle after it (a descriptor word stops the descriptor, word 0 commits it and starts it when
    enabled, STOP stops them all), the words the RTL took are fed in the cycles it took them, ``tx``
    has the bench's back-pressure. In every cycle an input offered a wavelet, the RTL must take it
    exactly when the model says the input is ready; every ``tx`` transfer must be in the model's
    cycle. Returns the differences and the number of cycles compared. For fault-free programs whose
    descriptor writes come while the core is quiet (the generator's legal ones)."""
    from models.pipeline.wafer_cycles import _PeTiming
    S, T = cfg.sram_words, cfg.num_tasks
    base = status_base(S, T)
    acts = {}
    for step, cycles in zip(prog["steps"], res["write_cycles"]):
        for (addr, word), c in zip(step["writes"], cycles):
            if S <= addr < base and (addr - S) % DESC_STRIDE < DESC_WORDS or addr == base + STATUS["STOP"]:
                acts.setdefault(c + 1, []).append((addr, word))
    pe = _PeTiming({}, cfg.lanes, cfg.sram_banks, {}, mul_stages=cfg.mul_stages, add_stages=cfg.add_stages)
    words = [[0] * DESC_WORDS for _ in range(T)]

    def write(addr, word):
        if addr == base + STATUS["STOP"]:
            for t in pe.d:
                pe.active[t] = pe.legal[t] = False
            return
        t, k = divmod(addr - S, DESC_STRIDE)
        words[t][k] = word
        pe.d[t] = decode(words[t])
        for state in (pe.pos, pe.cnt, pe.done):
            state.setdefault(t, 0)
        pe.active[t] = pe.legal[t] = False
        if k == 0 and pe.d[t]["op"] != Op.NOP:      # a legal program's commits pass their checks
            pe.legal[t] = True
            if pe.d[t]["enable"]:
                pe._start(t)

    colors = [[c for s in prog["steps"] for c, *_ in s[key]] for key in ("wavelets", "wavelets2")]
    offered = []
    for acc, wait in ((res["rx"], res["rx_wait"]), (res["rx2"], res["rx2_wait"])):
        o = dict.fromkeys(wait, False)
        o.update(dict.fromkeys(acc, True))
        offered.append(o)
    taken_i = [0, 0]
    tx, diffs, n = [], [], 0
    for cycle in range(res["cycles"]):
        for addr, word in acts.get(cycle, ()):
            write(addr, word)
        taken = pe.txb.out_valid and res["stalls"][cycle] == "0"
        if taken:
            tx.append(cycle)
        ins = [None, None]
        for k, (name, ready) in enumerate((("rx", pe.rx_ready), ("rx2", pe.rx2_ready))):
            if cycle in offered[k]:
                want, got = ready(), offered[k][cycle]
                n += 1
                if want != got and not diffs:
                    diffs.append(f"cycles: {name} in cycle {cycle}: the RTL {'took' if got else 'refused'} the wavelet "
                                 f"offered, the timing model says {name} is {'' if want else 'not '}ready")
                if got:
                    ins[k] = colors[k][taken_i[k]]
                    taken_i[k] += 1
        try:
            pe.cycle(ins[0], taken, ins[1])
        except ValueError as e:
            diffs.append(f"cycles: cycle {cycle}: the timing model refuses the run: {e}")
            return diffs, n
    got = res["tx_cycles"]
    n += min(len(tx), len(got))
    bad = next((i for i in range(min(len(tx), len(got))) if tx[i] != got[i]), None)
    if bad is not None:
        diffs.append(f"cycles: tx word {bad} in cycle {got[bad]}, the timing model says cycle {tx[bad]}")
    elif len(tx) != len(got):
        diffs.append(f"cycles: tx: {len(got)} transfers, the timing model {len(tx)}")
    return diffs, n
