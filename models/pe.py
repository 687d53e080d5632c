"""Golden model of the PE core (docs/pe.md): the same descriptors executed on numpy state.

It mirrors :mod:`hdl.pe.core` value for value (SRAM words, output wavelets per color, done
counters, faults) and states the cycle cost of every descriptor. It is transaction level: one
call per configuration write and per input wavelet; the vector unit runs every firing whose
dependencies are met after each wavelet (the RTL runs it concurrently; outputs per color, SRAM
and counters do not depend on that interleaving for kernels that do not race on SRAM and do not
fault).

Faults: a commit checks COUNT, COLOR, INDEX, NO_ACTION (:meth:`PeModel.check`). At run time a
wavelet raises UNBOUND, DUP_COLOR, ACC_CONFLICT or RANGE, in that order, and a vector firing (or
DOT word) RANGE: SRAM ranges are checked with the running addresses of each access as it happens
(:meth:`PeModel._wavelet`, :meth:`PeModel._fire`). Addresses are unbounded integers (no wrap);
the RTL's 17-bit running pointers agree while no pointer passes ``2**17``.

Words are 32 bits. A bf16 value in a word occupies the upper 16 bits (the word is then its exact
fp32 value); bf16 consumers (the multipliers, the ReLU mask) ignore the low 16 bits.

Descriptor format and configuration address map: :mod:`arch.pe_map`, shared with the RTL.
"""

import numpy as np

from arch.config_bus import WORD_MASK
from arch.pe_map import (
    DESC_STRIDE,
    DESC_WORDS,
    DONE_OFFSET,
    FAULT_STATUS,
    PE_PARAMS,
    STATUS,
    Fault,
    Op,
    VecMode,
    decode,
    desc_addr,
    descriptor_writes,
    encode,
    fmac_group_rows,
    fmac_write_delay,
    status_base,
    store_addr,
    unpack_pair,
)
from arch.ports import OPPOSITE, STEP
from models.numerics import bf16_bits, bf16_mul, bits, f32, fp32_add
from models.pipeline.mapping import split

__all__ = ["PeModel", "fmac_cycles", "unit_cycles", "VEC_FETCH_CYCLES", "DEP_TO_TX_CYCLES", "forward_kernel",
           "run_forward_kernel",
           "ramp2_colors", "COLOR_W", "COLOR_PSUM", "COLOR_RESULT", "COLOR_RESULT_T",
           "COLOR_X_T", "vec_out_cycles", "vec_pick_delay", "vec_done_to_tx_cycles", "dep_to_tx_cycles",
           "dot_word_cycles", "STORE_QUEUE_DEPTH", "StoreQueue"]


# The vector unit's fetch stage: pick and read A, latch A and read B, latch B. It overlaps the
# execution of the previous vector, so only a vector whose dependencies were not met while the
# previous one ran pays it (hdl/pe/vector_unit.py). The same at every pipeline depth.
VEC_FETCH_CYCLES = 3


def vec_out_cycles(mul_stages=0, add_stages=0, *, dot=False):
    """Cycles from the vector unit's issue of an element (its RUN cycle) to the cycle its word goes
    out (written to SRAM, put in the tx register; the unit is done at its end), no stall:
    unpipelined (``mul_stages = add_stages = 0``) 0, the element goes out in its RUN cycle;
    pipelined ``add_stages + 2`` (the adder or the registers beside it, ``yreg``, the output
    FIFO), and for a DOT word's last element ``mul_stages + 1`` more (the multiplier and the
    product register)."""
    if not (mul_stages or add_stages):
        return 0
    return add_stages + 2 + (mul_stages + 1 if dot else 0)


def vec_pick_delay(mul_stages=0, add_stages=0):
    """Cycles the vector unit's pick lags the counters it reads: 0 unpipelined; pipelined 1 (its
    readiness flags are registered, so a unit counted at the end of cycle ``w`` is seen in
    ``w + 2``, a VEC committed in ``c`` is picked from ``c + 2``)."""
    return 1 if (mul_stages or add_stages) else 0


def vec_done_to_tx_cycles(mul_stages=0, add_stages=0):
    """Cycles from the cycle a unit is written and counted (its ``done`` rises at the end) to the
    tx transfer of the first word of an idle VEC that waited only on it, tx always ready: the
    vector unit picks the VEC (:func:`vec_pick_delay` later) and reads A (+1), latches A and
    reads B (+2), latches B (+3), issues the first element (+4), which goes out
    :func:`vec_out_cycles` later into the tx register, which transfers (+5): ``5`` unpipelined,
    ``add_stages + 8`` pipelined."""
    return 5 + vec_pick_delay(mul_stages, add_stages) + vec_out_cycles(mul_stages, add_stages)


def dep_to_tx_cycles(mul_stages=0, add_stages=0):
    """Cycles from the rx transfer of the wavelet that completes a unit of the wavelet engine (an
    FMAC row, a STORE vector on ``rx``) to the tx transfer of the first word of an idle VEC that
    waited only on it, tx always ready: the engine writes the unit and counts it
    :func:`arch.pe_map.fmac_write_delay` cycles after the transfer, then
    :func:`vec_done_to_tx_cycles`. (A STORE on ``rx2`` writes one cycle after its transfer unless
    its bank is taken then: :class:`StoreQueue`.)"""
    return fmac_write_delay(mul_stages, add_stages) + vec_done_to_tx_cycles(mul_stages, add_stages)


# Unpipelined (``mul_stages = add_stages = 0``): stage 1 writes SRAM and counts the unit (+1), the
# vector unit picks the VEC and issues the read of A (+2), latches A and issues the read of B (+3),
# latches B (+4), puts the first word in its tx register (+5), which transfers (+6).
DEP_TO_TX_CYCLES = dep_to_tx_cycles()      # 6


def dot_word_cycles(lanes, mul_stages=0, add_stages=0):
    """Cycles between the starts of two DOT words back to back (the read of the row, of B, the
    latch, then the ``lanes`` elements): ``lanes + 3`` unpipelined; pipelined each element after
    the first waits for the previous sum, ``add_stages + 1`` cycles apart, so
    ``(lanes - 1) * (add_stages + 1) + 4``. The last word of a DOT goes out
    ``vec_out_cycles(..., dot=True)`` after its last element."""
    return (lanes - 1) * (add_stages + 1) + 1 + VEC_FETCH_CYCLES


def fmac_cycles(count, rows, acc_rows):
    """Cycles an FMAC of ``rows`` rows of ``count`` wavelets takes at full input rate: a group of
    ``g`` rows (``arch.pe_map.fmac_group_rows``) takes ``g`` cycles per wavelet index, at least
    ``acc_rows`` (a row's partial sum must be back from the adder before its next wavelet: the
    wavelet engine stalls ``rx`` meanwhile), and ``g`` for the last index."""
    total, n0 = 0, 0
    while n0 < rows:
        g = fmac_group_rows(rows - n0, acc_rows)
        total += (count - 1) * max(g, acc_rows) + g
        n0 += g
    return total


def unit_cycles(lanes, mul_stages=0, add_stages=0):
    """Cycles of one isolated vector-unit firing (one vector of PASS, ADD or MASK) without stalls,
    from its pick to the cycle its last word goes out (its unit is done at the end): the fetch
    (:data:`VEC_FETCH_CYCLES`), one element (lane) per cycle, and the element pipeline
    (:func:`vec_out_cycles`: 0 unpipelined). Back to back, vectors take ``lanes`` cycles each
    (``lanes >= 3``); a DOT word :func:`dot_word_cycles` (unpipelined also ``lanes + 3``)."""
    return lanes + VEC_FETCH_CYCLES + vec_out_cycles(mul_stages, add_stages)


# The store engine's stage 1 holds up to two words (hdl/pe/store_engine.py).
STORE_QUEUE_DEPTH = 2


class StoreQueue:
    """Cycle model of the store engine's stage 1 (``hdl/pe/store_engine.py``,
    docs/pe.md#second-input): up to :data:`STORE_QUEUE_DEPTH` words taken from ``rx2``, written in
    order, the head and the word behind it in the same cycle when they can. An entry is
    ``(t, bank or None, unit_end)`` (``bank``: the SRAM bank its word goes to, None when its vector
    is outside ``[lo, hi)`` and nothing is written). In a cycle whose wavelet-engine write takes
    the banks ``row``:

    * the head goes (is written, or dropped when it writes nothing) unless its bank is in ``row``;
    * the second goes with it (the second store word of that cycle, one write per bank still)
      unless its bank is in ``row`` or is the head's, or both end a unit (``done`` counts one
      unit per engine and cycle); else it becomes the head;
    * ``rx2.ready`` is low only while both entries are full and the head waits
      (:meth:`ready`): one word waits for its bank while ``rx2`` keeps flowing, and the two
      drain together once the bank is free;
    * a unit is counted in the cycle its last word goes; ``pending``: a word stays after this
      cycle (the core's ``busy`` holds the next cycle).

    A word taken in cycle ``t`` into an empty queue is written in ``t + 1`` unless its bank is
    taken then, as before the second entry."""

    def __init__(self):
        self.q = []
        self.waits = 0          # cycles the head waited for its bank

    def _goes(self, row):
        """``(head goes, second goes)`` in a cycle whose row write takes banks ``row``."""
        if not self.q:
            return False, False
        (_, hb, he) = self.q[0]
        h_go = hb is None or hb not in row
        if len(self.q) < 2 or not h_go:
            return h_go, False
        (_, bb, be) = self.q[1]
        b_go = (bb is None or (bb not in row and bb != hb)) and not (he and be)
        return h_go, b_go

    def ready(self, row):
        """``rx2.ready`` in a cycle whose row write takes banks ``row``."""
        return len(self.q) < STORE_QUEUE_DEPTH or self._goes(row)[0]

    def pending(self, row):
        """A word stays in the queue after a cycle whose row write takes banks ``row``."""
        return len(self.q) > sum(self._goes(row))

    def cycle(self, row, new=None):
        """One cycle: the entries that go, then ``new`` (the word taken from ``rx2`` in this cycle,
        an entry, or None) enters. Returns ``(banks written, t of the unit counted or None)``."""
        if new is not None and not self.ready(row):
            raise ValueError("a wavelet arrived on rx2 while it was not ready")
        goes = sum(self._goes(row))
        self.waits += bool(self.q) and not goes
        written, inc = set(), None
        for t, bank, end in self.q[:goes]:
            if bank is not None:
                written.add(bank)
            if end:
                inc = t
        del self.q[:goes]
        if new is not None:
            self.q.append(new)
        return written, inc


class PeModel:
    """One PE core. ``out`` collects the sent wavelets as ``(color, data)`` in send order."""

    def __init__(self, *, lanes, sram_words, num_tasks, num_colors, acc_rows=1, mul_stages=0,
                 add_stages=0):
        self.L, self.S, self.T, self.C = lanes, sram_words, num_tasks, num_colors
        # the fp units' register stages (Config.mul_stages / add_stages): the vector unit's cycles
        self.mul_stages, self.add_stages = mul_stages, add_stages
        self.R = acc_rows              # FMAC rows per group (Config.acc_rows)
        self.mem = np.zeros(sram_words, dtype=np.uint32)
        self.words = [[0] * DESC_WORDS for _ in range(num_tasks)]
        self.desc = [decode(w) for w in self.words]
        self.active = [False] * num_tasks
        self.legal = [False] * num_tasks     # committed without fault, not rewritten since
        self.pos = [0] * num_tasks     # FMAC: wavelet of its group; STORE: word of its vector
        self.n = [0] * num_tasks       # FMAC: first row of its group; STORE, VEC: unit
        self.done = [0] * num_tasks
        self.acc = np.zeros((2 * acc_rows - 1, lanes), dtype=np.float32)   # a group's partial rows
        self.acc_owner = None          # descriptor with a half-accumulated group, or None
        self.fault = None              # (code, index) of the first fault, sticky
        self.out = []
        self.fmac_cycles = self.vec_cycles = self.rx_count = 0
        self.short_groups = 0          # FMAC groups of fewer than acc_rows rows (the RTL stalls)
        self.pack = 0                  # the PACK register: packed configuration SRAM writes

    # ---- configuration bus -------------------------------------------------------------------

    @property
    def status_base(self):
        return status_base(self.S, self.T)

    def cfg_write(self, addr, word):
        word &= WORD_MASK
        base = self.status_base
        if addr < self.S:
            if self.pack:
                first, second = unpack_pair(word)
                self.mem[addr] = first
                if addr + 1 < self.S:
                    self.mem[addr + 1] = second
            else:
                self.mem[addr] = word
        elif self.S <= addr < base:
            t, w = divmod(addr - self.S, DESC_STRIDE)
            if w < DESC_WORDS:
                self.words[t][w] = word
                self.desc[t] = decode(self.words[t])
                self.active[t] = self.legal[t] = False    # a descriptor being written stops
                self._release_acc(t)
                if w == 0:
                    self._commit(t)
        elif addr == base + STATUS["FAULT"]:
            self.fault = None
        elif addr == base + STATUS["PACK"]:
            self.pack = word & 1
        elif addr == base + STATUS["STOP"]:
            for t in range(self.T):                   # as a write to every descriptor
                self.active[t] = self.legal[t] = False
                self._release_acc(t)
        self.run_vec()

    def cfg_read(self, addr):
        base = self.status_base
        if addr < self.S:
            return int(self.mem[addr])
        if self.S <= addr < base:
            t, w = divmod(addr - self.S, DESC_STRIDE)
            return self.words[t][w] if w < DESC_WORDS else 0
        regs = {
            STATUS["FAULT"]: self.fault_word(),
            STATUS["ACTIVE"]: sum(1 << t for t in range(self.T) if self.active[t]),
            STATUS["FMAC_CYCLES"]: self.fmac_cycles & WORD_MASK,
            STATUS["VEC_CYCLES"]: self.vec_cycles & WORD_MASK,
            STATUS["RX_COUNT"]: self.rx_count & WORD_MASK,
            STATUS["TX_COUNT"]: len(self.out) & WORD_MASK,
            STATUS["PARAMS"]: PE_PARAMS.pack(lanes=self.L, num_tasks=self.T, num_colors=self.C),
            STATUS["PACK"]: self.pack,
        }
        off = addr - base
        if off in regs:
            return regs[off]
        if DONE_OFFSET <= off < DONE_OFFSET + self.T:
            return self.done[off - DONE_OFFSET] & 0xFFFF
        return 0

    def fault_word(self):
        if self.fault is None:
            return 0
        code, index = self.fault
        return FAULT_STATUS.pack(flag=1, code=code, index=index)

    def _raise(self, code, index):
        if self.fault is None:
            self.fault = (Fault[code], index)

    # ---- descriptors -------------------------------------------------------------------------

    def check(self, t):
        """Fault name of descriptor ``t`` as committed, or None when legal (same order as RTL);
        SRAM ranges are checked at run time, not here."""
        d = self.desc[t]
        op = d["op"]
        if op == Op.NOP:
            return None
        dot = op == Op.VEC and d["vmode"] == VecMode.DOT
        if (d["reps"] == 0 or (op in (Op.STORE, Op.VEC) and d["lo"] > d["hi"])
                or (op == Op.FMAC and d["count"] == 0)
                or (op == Op.VEC and (d["count"] == 0 if dot else d["count"] != 1))):
            return "COUNT"
        if d["color"] >= self.C and (op != Op.VEC or d["send"]):
            return "COLOR"
        if ((d["chain"] and (d["next"] >= self.T or d["next"] == t))
                or (op == Op.VEC and d["dep_a_en"] and d["dep_a"] >= self.T)
                or (op == Op.VEC and d["dep_b_en"] and d["dep_b"] >= self.T)):
            return "INDEX"
        if op == Op.VEC and not (d["send"] or d["store"]):
            return "NO_ACTION"
        return None

    def _release_acc(self, t):
        if self.acc_owner == t:       # a (re)started descriptor drops its half-accumulated group
            self.acc_owner = None

    def _commit(self, t):
        self._release_acc(t)
        problem = self.check(t)
        if problem is not None:
            self.active[t] = False
            self._raise(problem, t)
            return
        self.legal[t] = self.desc[t]["op"] != Op.NOP
        if self.legal[t] and self.desc[t]["enable"]:
            self._activate(t)

    def _activate(self, t):
        self._release_acc(t)
        self.active[t] = True
        self.pos[t] = self.n[t] = self.done[t] = 0

    def _range_fault(self, t):
        """Run-time RANGE of descriptor ``t``: it stops (no chain) and drops its half-accumulated
        row; the access that faulted does nothing."""
        self._raise("RANGE", t)
        self.active[t] = False
        self._release_acc(t)

    def _complete(self, t):
        """The run of ``t`` ended: it stops and, with ``chain``, starts ``next`` if that is legal
        and idle (a running ``next`` keeps running)."""
        self.active[t] = False
        d = self.desc[t]
        if d["chain"] and self.legal[d["next"]] and not self.active[d["next"]]:
            self._activate(d["next"])

    def cycles(self, t):
        """Cycles descriptor ``t`` keeps its engine busy, at full input rate and no back-pressure:
        FMAC one per wavelet (every lane busy) and the stalls of a group of fewer than
        ``acc_rows`` rows (:func:`fmac_cycles`), STORE one per wavelet, VEC one fetch, then
        ``L`` per vector (vectors back to back, ``L >= 3``) and the element pipeline of the last
        one (:func:`vec_out_cycles`), DOT :func:`dot_word_cycles` per word and the pipeline of
        the last (``L + 3`` per word unpipelined). VEC: from the first pick to the cycle the last
        word goes out."""
        d, L = self.desc[t], self.L
        if d["op"] == Op.FMAC:
            return fmac_cycles(d["count"], d["reps"], self.R)
        if d["op"] == Op.STORE:
            return L * d["reps"]
        if d["op"] == Op.VEC:
            ms, ads = self.mul_stages, self.add_stages
            if d["vmode"] == VecMode.DOT:
                return d["reps"] * d["count"] * dot_word_cycles(L, ms, ads) + vec_out_cycles(ms, ads, dot=True)
            return VEC_FETCH_CYCLES + d["reps"] * max(L, VEC_FETCH_CYCLES) + vec_out_cycles(ms, ads)
        return 0

    # ---- wavelet engine ----------------------------------------------------------------------

    def wavelet(self, color, data, *, rx2=False):
        """Process one input wavelet (from ``rx``, or with ``rx2`` from the store engine's
        ``rx2``), then run every vector firing that became ready."""
        self.rx_count += 1
        self._wavelet(color, int(data) & WORD_MASK, (Op.STORE,) if rx2 else (Op.FMAC, Op.STORE))
        self.run_vec()

    def _wavelet(self, color, data, ops):
        """One wavelet on the wavelet engine (``ops``: FMAC and STORE) or the store engine (STORE
        only). RANGE (after UNBOUND, DUP_COLOR, ACC_CONFLICT): FMAC
        wavelet ``i`` of row ``n`` when ``a_base + (n mod group)*L + i*a_stride + L > S`` (its
        operands), or, for the row's last wavelet, ``dst_base + n*L + L > S``; STORE wavelet ``j``
        of vector ``n`` in ``[lo, hi)`` when its word (``arch.pe_map.store_addr``) is ``>= S``."""
        matches = [t for t in range(self.T) if self.active[t]
                   and self.desc[t]["op"] in ops and self.desc[t]["color"] == color]
        if not matches:
            self._raise("UNBOUND", color)
            return
        t = matches[0]
        if len(matches) > 1:
            self._raise("DUP_COLOR", t)
            return
        d, L, S = self.desc[t], self.L, self.S
        if d["op"] == Op.FMAC:
            if self.acc_owner is not None and self.acc_owner != t:
                self._raise("ACC_CONFLICT", t)
                return
            n0, s, count = self.n[t], self.pos[t], d["count"]
            ng = fmac_group_rows(d["reps"] - n0, self.R)      # rows of this group
            r, i = s % ng, s // ng
            if s == 0 and ng < self.R and count > 1:
                self.short_groups += 1
            n = n0 + r
            row = d["a_base"] + (n % max(d["group"], 1)) * L + i * d["a_stride"]
            dst = d["dst_base"] + n * L
            last = i == count - 1
            if row + L > S or (last and dst + L > S):
                self._range_fault(t)
                return
            x16 = (self.mem[row:row + L] >> 16).astype(np.uint16)
            w16 = np.uint16(data >> 16)
            product = bf16_mul(w16, x16)
            self.acc[r] = fp32_add(np.zeros(L, dtype=np.float32) if i == 0 else self.acc[r], product)
            self.fmac_cycles += 1
            self.acc_owner = t
            if last:
                self.mem[dst:dst + L] = bits(self.acc[r])
                self.done[t] += 1
            if s + 1 == ng * count:                   # the group is complete
                self.acc_owner = None
                self.pos[t] = 0
                self.n[t] = n0 + ng
                if self.n[t] == d["reps"]:
                    self._complete(t)
            else:
                self.pos[t] = s + 1
        else:  # STORE
            v, j = self.n[t], self.pos[t]
            if d["lo"] <= v < d["hi"]:
                addr = store_addr(d, v, j, L)
                if addr >= S:
                    self._range_fault(t)
                    return
                self.mem[addr] = data
            if j == L - 1:
                self._finish_unit(t, d)
            else:
                self.pos[t] = j + 1

    def _finish_unit(self, t, d):
        """A STORE vector of descriptor ``t`` is complete."""
        self.pos[t] = 0
        self.n[t] += 1
        self.done[t] += 1
        if self.n[t] == d["reps"]:
            self._complete(t)

    # ---- vector unit -------------------------------------------------------------------------

    def _ready(self, t):
        d = self.desc[t]
        if not (self.active[t] and d["op"] == Op.VEC):
            return False
        n = self.n[t]
        return ((not d["dep_a_en"] or self.done[d["dep_a"]] > n)
                and (not d["dep_b_en"] or self.done[d["dep_b"]] > n))

    def run_vec(self):
        """Fire ready vector descriptors (lowest index first) until none is ready."""
        while True:
            ready = [t for t in range(self.T) if self._ready(t)]
            if not ready:
                return
            self._fire(ready[0])

    def _vector(self, addr):
        return self.mem[addr:addr + self.L].copy()

    def _post(self, d, e):
        """ReLU on the sign bit, then bf16 RNE (upper half), per the descriptor flags."""
        e = np.asarray(e, dtype=np.uint32)
        if d["relu"]:
            e = np.where(e >> 31 == 1, np.uint32(0), e)
        if d["round"]:
            e = bf16_bits(f32(e)).astype(np.uint32) << 16
        return e.astype(np.uint32)

    def _fire(self, t):
        """Vector ``n`` of VEC ``t``. RANGE when it is issued: A (row 0 for DOT) or B (ADD, MASK,
        DOT) runs past SRAM, or, with ``store`` and ``lo <= n < hi``, the destination of its
        ``U`` words (``U = count`` for DOT, else ``L``); for DOT word ``k > 0``, when row ``k`` of
        A runs past SRAM (the words before it stay sent and stored)."""
        d, L, S = self.desc[t], self.L, self.S
        n, mode = self.n[t], d["vmode"]
        dot = mode == VecMode.DOT
        unit = d["count"] if dot else L
        a = d["a_base"] + (0 if dot else n // max(d["group"], 1) * d["a_stride"])
        b = d["b_base"] + n * d["b_stride"]
        store = d["store"] and d["lo"] <= n < d["hi"]
        dst = d["dst_base"] + (n - d["lo"]) * unit
        if a + L > S or (mode != VecMode.PASS and b + L > S) or (store and dst + unit > S):
            self._range_fault(t)
            return
        B = self._vector(b)
        for k in range(d["count"] if dot else 1):
            if dot:
                row = d["a_base"] + k * d["a_stride"]
                if row + L > S:
                    self._range_fault(t)
                    return
                A = self._vector(row)
                s = np.float32(0.0)
                for j in range(L):
                    s = fp32_add(s, bf16_mul(np.uint16(A[j] >> 16), np.uint16(B[j] >> 16)))
                results = [bits(s)]
            else:
                A = self._vector(a)
                if mode == VecMode.PASS:
                    results = A
                elif mode == VecMode.ADD:
                    results = bits(fp32_add(f32(A), f32(B)))
                else:  # MASK: the bf16 of A is > +0
                    a16 = A >> 16
                    results = np.where((a16 != 0) & (a16 < 0x8000), B, np.uint32(0))
            for j, e in enumerate(self._post(d, results), start=k):
                if d["send"]:
                    self.out.append((d["color"], int(e)))
                if store:
                    self.mem[dst + j] = e
            self.vec_cycles += L
        self.n[t] = n + 1
        self.done[t] += 1
        if self.n[t] == d["reps"]:
            self._complete(t)


# ---- the forward micro-kernel of docs/architecture.md#layer-mapping as PE programs ----

COLOR_W, COLOR_PSUM, COLOR_RESULT = 0, 1, 2
COLOR_RESULT_T = 3      # the results again, for their owners' transposed copy
COLOR_X_T = 4           # a PE's own X, sent to itself for its transposed copy


def ramp2_colors(descs):
    """The router's ``RAMP2`` register for a PE running ``descs``: the colors of its STORE
    descriptors (partial sums, results), which then come on the RAMP's second channel into the
    store engine and never take a slot of the FMAC's wavelets."""
    mask = 0
    for d in descs.values():
        if d.get("op") == Op.STORE:
            mask |= 1 << d["color"]
    return mask


def _split(n, parts):
    """Contiguous slices of ``n`` over ``parts`` owners, as ranges (the pipeline model's partition)."""
    return [range(s.start, s.stop) for s in split(n, parts)]


def forward_kernel(*, lanes, sram_words, rows, cols, m, k, x_base=None, keep_base=None,
                   keep_t_base=None, x_t_base=None):
    """Programs of the forward micro-kernel ``Z = W X`` on a ``rows x cols`` mesh of PEs.

    SRAM of each PE: ``X[K_q, B_p]`` at ``x_base`` (one L-word vector per k; ``None``: at 0, before
    the working set), the working set (FMAC sums, incoming partial sums) from 0 (or after X), the
    kept outputs at ``keep_base`` (``None``: after the working set); ``sram_words`` bounds the
    working set, and X and the kept outputs when they are placed after it. With ``keep_t_base``
    every PE also keeps its outputs transposed there, ``A^T[B_p, own]`` (``|own|`` words per
    sample, what backward-weight on the lanes reads): the east PE sends every result row a second
    time on :data:`COLOR_RESULT_T` (a second VEC, no store), which reaches every PE of the row, its
    own included, and a transposed STORE (``b_stride = |own|``) keeps the own rows. With
    ``x_t_base`` every PE also keeps its ``X`` transposed there, ``X^T[B_p, K_q]``: a VEC PASS
    sends its ``X`` vectors on :data:`COLOR_X_T` to its own RAMP and a transposed STORE keeps
    them. The PASS waits on nothing (``X`` is in SRAM before the phase's descriptors commit), so
    it starts at its commit, during the configuration, and is done, or nearly, before the first
    FMAC group ends (it used to send vector k once FMAC row k was done, which put the last
    group's ``X`` vectors into the phase's tail and needed ``|K_q| <= m``).

    Partition (models.pipeline.mapping): column q holds ``X[K_q]``, row p the batch slice
    ``B_p`` of ``lanes`` columns (batch = ``rows * lanes``); the outputs of row m are kept by the
    column owning m in the split of M over the columns. Colors: :data:`COLOR_W` (weights, in at
    the north edge, multicast down each column), :data:`COLOR_PSUM` (the partial-sum chain, west
    to east), :data:`COLOR_RESULT` (ReLU'd bf16 results, east to west; they also leave the mesh
    at the west edge, or at the east edge of a one-column mesh).

    Returns a dict with ``pes[(p, q)] = {"descs": {t: fields}, "x_base", "k": range,
    "own": range, "xn_base", "xn_t_base"}`` (``xn_base``: where the kept outputs ``A[own, B_p]``
    land, one vector per output row; ``xn_t_base``: ``keep_t_base``),
    ``routes[(p, q)] = [(color, in_port, [out_ports])]`` (port names ``N E S W RAMP``),
    ``ramp2[(p, q)]`` (:func:`ramp2_colors`) and ``edge_out`` (``"W"`` or ``"E"``: where results
    leave row p).
    """
    L = lanes
    k_slices, m_slices = _split(k, cols), _split(m, cols)
    if min(len(s) for s in k_slices) == 0:
        raise ValueError(f"every column needs at least one input feature: K={k} < cols={cols}")
    pes, routes = {}, {}
    for p in range(rows):
        for q in range(cols):
            kq, own = k_slices[q], m_slices[q]
            xb, snap = (0, len(kq) * L) if x_base is None else (x_base, 0)
            psum = snap + m * L
            xn = psum + m * L if keep_base is None else keep_base
            need = psum + m * L if keep_base is not None else xn + m * L
            if need > sram_words:
                raise ValueError(f"the kernel needs {need} SRAM words, PE has {sram_words}")
            first, last = q == 0, q == cols - 1
            descs = {0: dict(op=Op.FMAC, enable=1, color=COLOR_W, a_base=xb, a_stride=L,
                             count=len(kq), reps=m, dst_base=snap)}
            keep = dict(lo=own.start, hi=own.stop, dst_base=xn)
            if first and last:      # one column: the PE's own sums are complete
                descs[1] = dict(op=Op.VEC, vmode=VecMode.PASS, enable=1, relu=1, round=1,
                                send=1, store=1, color=COLOR_RESULT, dep_a_en=1, dep_a=0,
                                a_base=snap, a_stride=L, count=1, reps=m, **keep)
            elif first:
                descs[1] = dict(op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1,
                                color=COLOR_PSUM, dep_a_en=1, dep_a=0, a_base=snap, a_stride=L,
                                count=1, reps=m)
            else:
                descs[1] = dict(op=Op.STORE, enable=1, color=COLOR_PSUM, reps=m, lo=0, hi=m,
                                dst_base=psum)
                post = dict(relu=1, round=1, color=COLOR_RESULT, store=1, **keep) if last else \
                    dict(color=COLOR_PSUM)
                descs[2] = dict(op=Op.VEC, vmode=VecMode.ADD, enable=1, send=1, dep_a_en=1,
                                dep_a=0, dep_b_en=1, dep_b=1, a_base=snap, a_stride=L,
                                b_base=psum, b_stride=L, count=1, reps=m, **post)
            if not last:
                descs[3] = dict(op=Op.STORE, enable=1, color=COLOR_RESULT, reps=m, **keep)
            if keep_t_base is not None:
                if last:                # the row's results again, not stored here
                    finish = descs[1] if first else descs[2]
                    descs[4] = {f: v for f, v in finish.items() if f not in ("store", "lo", "hi", "dst_base")}
                    descs[4]["color"] = COLOR_RESULT_T
                descs[5] = dict(op=Op.STORE, enable=1, color=COLOR_RESULT_T, reps=m, lo=own.start,
                                hi=own.stop, dst_base=keep_t_base, b_stride=len(own))
            if x_t_base is not None:
                descs[6] = dict(op=Op.STORE, enable=1, color=COLOR_X_T, reps=len(kq), lo=0,
                                hi=len(kq), dst_base=x_t_base, b_stride=len(kq))
                descs[7] = dict(op=Op.VEC, vmode=VecMode.PASS, enable=1, send=1, color=COLOR_X_T,
                                a_base=xb, a_stride=L, count=1, reps=len(kq))
            pes[(p, q)] = {"descs": descs, "x_base": xb, "k": kq, "own": own, "xn_base": xn,
                           "xn_t_base": keep_t_base}
            w_out = ["RAMP"] + (["S"] if p < rows - 1 else [])
            r = [(COLOR_W, "N", w_out)]
            if not last:
                r.append((COLOR_PSUM, "RAMP", ["E"]))
            if not first:
                r.append((COLOR_PSUM, "W", ["RAMP"]))
            if cols == 1:
                r.append((COLOR_RESULT, "RAMP", ["E"]))
            elif last:
                r.append((COLOR_RESULT, "RAMP", ["W"]))
            else:
                r.append((COLOR_RESULT, "E", ["RAMP", "W"]))
            if keep_t_base is not None:         # to every PE of the row, not out of the mesh
                r.append((COLOR_RESULT_T, "RAMP" if last else "E", ["RAMP"] + (["W"] if not first else [])))
            if x_t_base is not None:            # back into the PE itself
                r.append((COLOR_X_T, "RAMP", ["RAMP"]))
            routes[(p, q)] = r
    return {"pes": pes, "routes": routes, "edge_out": "E" if cols == 1 else "W",
            "ramp2": {pq: ramp2_colors(info["descs"]) for pq, info in pes.items()},
            "k_slices": k_slices, "m_slices": m_slices}


_STEP = {p.name: (*STEP[p], OPPOSITE[p].name) for p in STEP}   # "E": (0, 1, "W"): step, input there


def run_forward_kernel(plan, *, lanes, sram_words, num_tasks, num_colors, w16, x16, rng=None):
    """Run ``plan`` (:func:`forward_kernel`) on a mesh of :class:`PeModel` joined by an ideal
    fabric (routes of the plan, no delay, no loss). ``w16`` (M x K) and ``x16`` (K x batch) are
    bf16 bit patterns. With ``rng`` the PEs take their next wavelet in random order (any arrival
    interleaving must give the same numbers). Returns ``(models, edges)``; ``edges[(p, side)]``
    lists the words that left row/column p at that edge."""
    from collections import deque
    pes = plan["pes"]
    rows = 1 + max(p for p, _ in pes)
    cols = 1 + max(q for _, q in pes)
    L = lanes
    models, queues, edges = {}, {}, {}
    for (p, q), pe in pes.items():
        mdl = PeModel(lanes=L, sram_words=sram_words, num_tasks=num_tasks, num_colors=num_colors)
        xs = x16[pe["k"].start:pe["k"].stop, p * L:(p + 1) * L].astype(np.uint32) << 16
        for i, row in enumerate(xs):
            for j, v in enumerate(row):
                mdl.cfg_write(pe["x_base"] + i * L + j, int(v))
        for t in sorted(pe["descs"], reverse=True):   # consumers first, then their producers
            for addr, word in descriptor_writes(desc_addr(sram_words, t), encode(**pe["descs"][t])):
                mdl.cfg_write(addr, word)
        models[(p, q)], queues[(p, q)] = mdl, deque()
    table = {pq: {(c, i): outs for c, i, outs in r} for pq, r in plan["routes"].items()}

    def deliver(p, q, port, color, data):
        for out in table[(p, q)].get((color, port), []):
            if out == "RAMP":
                queues[(p, q)].append((color, data))
                continue
            dp, dq, arrive = _STEP[out]
            if 0 <= p + dp < rows and 0 <= q + dq < cols:
                deliver(p + dp, q + dq, arrive, color, data)
            else:
                edges.setdefault((p if out in "EW" else q, out), []).append(data)

    sent = {pq: 0 for pq in models}

    def flush(pq):
        out = models[pq].out
        for color, data in out[sent[pq]:]:
            deliver(*pq, "RAMP", color, data)
        sent[pq] = len(out)

    for pq in models:
        flush(pq)
    for m in range(w16.shape[0]):
        for q in range(cols):
            for k in plan["k_slices"][q]:
                deliver(0, q, "N", COLOR_W, int(w16[m, k]) << 16)
    while True:
        busy = [pq for pq in models if queues[pq]]
        if not busy:
            break
        pq = busy[int(rng.integers(len(busy)))] if rng is not None else busy[0]
        models[pq].wavelet(*queues[pq].popleft())
        flush(pq)
    return models, edges
