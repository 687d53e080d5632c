"""Closed-loop cycle simulation of one wafer phase (forward, backward-data, backward-weight) of the
RTL schedule: the cycle-exact fabric model (:class:`models.fabric.FabricModel`, stepped one cycle at a
time) joined to a timing model of every PE core (its wavelet engine and vector-unit FSM as
documented in ``hdl/pe/core.py``, no numbers) and to the wafer's weight and gradient links.

Used by :mod:`models.pipeline.rtl_schedule` where a closed formula would miss the contention:
the columns' results share the row links to the edge; stores wait for banks.

PE timing (``hdl/pe/core.py``): a wavelet received in cycle ``t`` steps the matching FMAC/STORE
at once (an FMAC's rows in groups of ``acc_rows``, ``arch.pe_map.fmac_order``); its write stage
writes SRAM in ``t + D`` (``D = arch.pe_map.fmac_write_delay(mul_stages, add_stages)``; an FMAC
row's last wavelet: the row, ``dst_base + n*L + 0:L``; STORE word ``j`` of vector ``n`` in
``[lo, hi)``: ``arch.pe_map.store_addr``) and the unit's ``done`` count rises at the end of
``t + D``. ``rx`` is not ready while the accumulator owner's next wavelet would read a partial sum
still in the adder (``_PeTiming.rx_ready``). Stage 1 below means the write stage. The store engine
does the same for a STORE wavelet received on ``rx2`` (the router's RAMP2 channel), except that
its stage 1 holds two words (``models.pe.StoreQueue``): the head waits while the wavelet engine's
stage 1 writes its bank, the word behind it is written with it in the same cycle when it can,
and ``rx2`` is not ready only while both are held and the head waits; the unit counts when its
last word is written. The vector unit
(``hdl/pe/vector_unit.py``): the fetch stage FIDLE (picks the lowest ready VEC, unless a DOT
executes, or it is a DOT and the execute stage is busy) -> FB -> FL (the unit is issued: the
count advances; the execute stage takes it if it is free at this edge) -> else FULL until it is;
the execute stage RUN (one element per cycle; after the last one the unit is done and the stage
is free), a DOT's next word ISSUE -> READ_B -> LATCH -> RUN. A RUN cycle steps only if ``tx`` is
free (its skid slot is empty) when it sends and, when it stores (at ``dst_base + (n-lo)*U + (k if DOT
else j)``, ``U = count`` for DOT else ``L``), only if neither stage 1 nor the store engine writes
the same bank that cycle (word ``a`` in bank ``a mod sram_banks``, one write port each); a stalled
cycle does nothing. With pipelined fp units (``mul_stages`` or ``add_stages`` > 0,
docs/pe.md#vector-unit-pipeline) a RUN cycle instead issues its element when a credit is free
(fewer than ``arch.pe_map.vec_fifo_depth(add_stages)`` words issued and not yet out; a DOT's
elements other than its words' last take none) and, for a DOT element after the first of its
word, ``add_stages + 1`` cycles after the previous one, for the others ``mul_stages + 2`` after
the last DOT element; the word heads the output FIFO ``models.pe.vec_out_cycles`` after its
issue, and the head goes out (tx, store, the unit done at its unit's last word) under the
conditions above; FIDLE picks from the readiness of the previous cycle (the count of a unit
issued then advanced) among the VECs still active, and picks none in the cycle after a
descriptor started. Configuration SRAM writes are not modeled: the compiler's phases write SRAM
before any descriptor commits. ``tx`` is a skid buffer (``hdl/skid_buffer.py``): a word put in
it in ``t`` is offered from ``t + 1``; it is free while its skid slot is empty (a word put in it
while the offered one is not taken waits there, and goes to the output register when that one
is taken). Weight links: the SwarmX leaf of column ``q`` offers its word ``i`` from cycle
``first + i`` (or the cycle after word ``i - 1`` was taken, if later) to the north input of
column ``q``; it waits while that input is not ready. Gradient links: the north outputs are
always ready (the SwarmX reduce inputs).
Descriptors that commit during the phase (backward-weight) act from the cycle after their commit
write.
"""

from collections import deque

from arch.pe_map import Op, VecMode, acc_rows, fmac_group_rows, fmac_write_delay, store_addr, vec_fifo_depth
from arch.ports import NUM_PORTS, RAMP2, Port
from arch.router_map import route_mask
from models.fabric import FabricModel
from models.pe import StoreQueue, vec_out_cycles
from models.skid_buffer import SkidBufferModel

__all__ = ["simulate_phase"]


class _PeTiming:
    """Timing state of one PE core (``descs``: ``{t: fields}`` as ``arch.pe_map.encode`` takes
    them; ``commits``: ``{t: cycle}`` for those committed during the phase)."""

    def __init__(self, descs, lanes, sram_banks, commits=None, *, mul_stages=0, add_stages=0):
        self.L, self.NB = lanes, sram_banks
        self.M, self.A = mul_stages, add_stages      # register stages of the PE's fp units
        self.d = {t: dict(f) for t, f in descs.items()}
        self.commits = dict(commits or {})     # {t: cycle it commits}; missing: before cycle 0
        self.legal = {t: t not in self.commits for t in self.d}
        self.active = {t: bool(f.get("enable")) and self.legal[t] for t, f in self.d.items()}
        self.pos = dict.fromkeys(self.d, 0)
        self.cnt = dict.fromkeys(self.d, 0)
        self.done = dict.fromkeys(self.d, 0)
        # The wavelet engine's writes, one entry per cycle of the last fmac_write_delay cycles
        # (oldest first): (descriptor whose done rises when it is written or None, banks written,
        # accumulator row of an FMAC wavelet or None); the oldest is written in this cycle.
        self.D = fmac_write_delay(mul_stages, add_stages)
        self.R = acc_rows(add_stages)
        self.wpipe = deque([(None, set(), None)] * self.D)
        self.sq = StoreQueue()             # the store engine's stage 1: (t, bank or None, unit end)
        self.fstate, self.f_t = "FIDLE", None       # the vector unit's fetch stage
        self.f_n = self.f_last = None               # the fetched unit's index, whether it is the last
        self.estate, self.vsel, self.vj, self.vk = "EIDLE", None, 0, 0   # its execute stage
        self.e_n = self.e_last = None
        self.txb = SkidBufferModel()       # tx: the colors of its words (offered, skid slot)
        # The pipelined vector unit (mul_stages + add_stages > 0): its words on their way out,
        # [(first cycle it heads the output FIFO, (t, send, store, bank, unit end, run end,
        # color))], the credits taken (issued, not yet out; at most out_fifo_depth), the cycle of
        # the last DOT element's issue, and this cycle's number.
        self.vpiped = bool(mul_stages or add_stages)
        self.vq = deque()
        self.vused = 0
        self.vlast_dot = None
        self.vcycle = 0
        # Its registered readiness (hdl/pe/vector_unit.py: ready_q): the VECs ready by the
        # previous cycle's counters (the count of a unit issued then advanced), and the
        # descriptors started at the last edge (any: no pick in this cycle).
        self.vrq = {t for t in self.d if self._ready(t)}      # (committed long before cycle 0)
        self.vstarted = set()
        self.vbank_waits = 0               # cycles the FIFO's head waited for its bank

    def _get(self, t, f):
        return self.d[t].get(f, 0)

    def _start(self, t):
        self.active[t] = True
        self.pos[t] = self.cnt[t] = self.done[t] = 0
        self.vstarted.add(t)

    def _run_end(self, t):
        self.active[t] = False
        nxt = self._get(t, "next")
        if self._get(t, "chain") and nxt in self.d and self.legal[nxt]:
            self._start(nxt)

    def commit(self, now):
        """Descriptors whose commit write is in cycle ``now - 1`` start in cycle ``now``."""
        for t, c in self.commits.items():
            if c == now:
                self.legal[t] = True
                if self._get(t, "enable"):
                    self._start(t)

    def _ready(self, t, issued=0):
        """VEC ``t`` has a unit to fetch (``issued``: one more was issued at this edge)."""
        if not (self.active[t] and self._get(t, "op") == Op.VEC):
            return False
        n = self.cnt[t] + issued
        if n == self._get(t, "reps"):
            return False
        for en, dep in (("dep_a_en", "dep_a"), ("dep_b_en", "dep_b")):
            if self._get(t, en) and not self.done.get(self._get(t, dep), 0) > n:
                return False
        return True

    def rx2_ready(self):
        """``rx2.ready`` in this cycle: low while the store engine holds two words and the first
        waits for its bank."""
        return self.sq.ready(self.wpipe[0][1])

    def _store_step(self, t):
        """Stage 0 of a STORE wavelet (either engine): ``(bank written in stage 1 or None, unit
        end)``; steps the descriptor's position and count."""
        n, lo, L = self.cnt[t], self._get(t, "lo"), self.L
        bank = None
        if lo <= n < self._get(t, "hi"):
            bank = store_addr(self.d[t], n, self.pos[t], L) % self.NB
        end = self.pos[t] + 1 == L
        return bank, end

    def _fmac_step(self, t, run_end):
        """Stage 0 of an FMAC wavelet: ``(t if it ends a row else None, banks of the row write,
        accumulator row)``; steps the group (``cnt``: its first row, ``pos``: the wavelet in it,
        ``arch.pe_map.fmac_order``)."""
        n0, s, count, reps = self.cnt[t], self.pos[t], self._get(t, "count"), self._get(t, "reps")
        ng = fmac_group_rows(reps - n0, self.R)
        r, i = s % ng, s // ng
        inc, banks = None, set()
        if i == count - 1:
            inc = t
            base = self._get(t, "dst_base") + (n0 + r) * self.L
            banks = {(base + lane) % self.NB for lane in range(self.L)}
        if s + 1 == ng * count:
            self.pos[t], self.cnt[t] = 0, n0 + ng
            if n0 + ng == reps:
                run_end.append(t)
        else:
            self.pos[t] = s + 1
        return inc, banks, r

    def rx_ready(self):
        """``rx.ready`` in this cycle: low while the accumulator owner's next wavelet (not its
        row's first) would read a partial sum still in the adder (stages 1..add_stages)."""
        for t, f in self.d.items():
            if f.get("op") == Op.FMAC and self.active[t] and self.pos[t]:
                ng = fmac_group_rows(f.get("reps", 0) - self.cnt[t], self.R)
                r, i = self.pos[t] % ng, self.pos[t] // ng
                recent = list(self.wpipe)[self.D - self.A:] if self.A else []
                return not (i and any(slot == r for _, _, slot in recent))
        return True

    def pending(self):
        """A wavelet-engine write is still ahead in stages 1..D-1, or a store-engine word stays
        after the next cycle (the core's ``busy`` holds)."""
        return any(inc is not None or banks or slot is not None
                   for inc, banks, slot in list(self.wpipe)[1:]) or self.sq.pending(self.wpipe[0][1])

    def _match(self, color, ops):
        match = [t for t in sorted(self.d) if self.active[t]
                 and self._get(t, "op") in ops and self._get(t, "color") == color]
        if len(match) != 1:
            raise ValueError(f"wavelet of color {color} matches descriptors {match}")
        return match[0]

    def cycle(self, rx_color, tx_taken, rx2_color=None):
        """Advance one cycle: ``rx_color`` / ``rx2_color`` (a wavelet received on ``rx`` / ``rx2``
        in this cycle, or None), ``tx_taken`` (the router took the tx word this cycle)."""
        L = self.L
        # Registered updates computed from the state at the start of the cycle.
        inc_now, s1_banks, _ = self.wpipe.popleft()
        w_inc, w_banks, w_slot = None, set(), None
        unit_done, run_end = [], []
        # Store engine, stage 0, then stage 1: its words are written in order, unless the
        # wavelet engine takes the bank (models.pe.StoreQueue).
        new2 = None
        if rx2_color is not None:         # (StoreQueue.cycle refuses it when rx2 is not ready)
            t = self._match(rx2_color, (Op.STORE,))
            bank, end = self._store_step(t)
            new2 = (t, bank, end)
            if end:
                self.pos[t] = 0
                if self.cnt[t] + 1 == self._get(t, "reps"):
                    run_end.append(t)
                self.cnt[t] += 1
            else:
                self.pos[t] += 1
        written2, inc2 = self.sq.cycle(s1_banks, new2)
        taken_banks = set(s1_banks) | written2
        # Wavelet engine.
        if rx_color is not None:
            t = self._match(rx_color, (Op.FMAC, Op.STORE))
            if self._get(t, "op") == Op.FMAC:
                w_inc, w_banks, w_slot = self._fmac_step(t, run_end)
            else:
                n = self.cnt[t]
                bank, _ = self._store_step(t)
                if bank is not None:
                    w_banks = {bank}
                if self.pos[t] + 1 == L:
                    self.pos[t] = 0
                    w_inc = t
                    if n + 1 == self._get(t, "reps"):
                        run_end.append(t)
                    self.cnt[t] += 1
                else:
                    self.pos[t] += 1
        self.wpipe.append((w_inc, w_banks, w_slot))
        # Vector unit, execute stage (it decides whether it can take a fetched unit).
        tx_free = self.txb.in_ready        # a register: the word may go whatever tx_taken is
        new_tx = None
        v_out = v_in = 0
        if self.vpiped:
            new_tx, v_out = self._vec_output(tx_free, taken_banks, unit_done, run_end)
        e_idle = self.estate == "EIDLE"
        e_dot_busy = self.estate in ("ISSUE", "READ_B", "LATCH") or (
            self.estate == "RUN" and self._get(self.vsel, "vmode") == VecMode.DOT)
        e_free = e_idle
        e_next = self.estate
        if self.estate == "ISSUE":
            e_next = "READ_B"
        elif self.estate == "READ_B":
            e_next = "LATCH"
        elif self.estate == "LATCH":
            self.vj = 0
            e_next = "RUN"
        elif self.estate == "RUN" and self.vpiped:
            v_in, free, nxt = self._vec_issue()
            e_free = e_free or free
            e_next = nxt or e_next
        elif self.estate == "RUN":
            t, n = self.vsel, self.e_n
            lo = self._get(t, "lo")
            dot = self._get(t, "vmode") == VecMode.DOT
            last = self.vj == L - 1
            emit = (not dot) or last
            send = emit and self._get(t, "send")
            store = emit and self._get(t, "store") and lo <= n < self._get(t, "hi")
            unit = self._get(t, "count") if dot else L
            addr = self._get(t, "dst_base") + (n - lo) * unit + (self.vk if dot else self.vj)
            if (not send or tx_free) and not (store and addr % self.NB in taken_banks):
                if send:
                    new_tx = self._get(t, "color")
                if last:
                    if dot and self.vk + 1 < self._get(t, "count"):
                        self.vk += 1
                        e_next = "ISSUE"
                    else:
                        unit_done.append(t)
                        if self.e_last:
                            run_end.append(t)
                        e_free = True
                        e_next = "EIDLE"
                else:
                    self.vj += 1
        # Vector unit, fetch stage.
        f_next = self.fstate
        take = False
        if self.fstate == "FIDLE":
            if self.vpiped:
                ready = [t for t in sorted(self.d) if self._ready_q(t)]
            else:
                ready = [t for t in sorted(self.d) if self._ready(t)]
            if ready and not e_dot_busy and (
                    e_idle or self._get(ready[0], "vmode") != VecMode.DOT):
                self.f_t = ready[0]
                f_next = "FB"
        elif self.fstate == "FB":
            f_next = "FL"
        elif self.fstate == "FL":
            t = self.f_t
            self.f_n = self.cnt[t]
            self.f_last = self.f_n + 1 == self._get(t, "reps")
            take = e_free
            f_next = "FIDLE" if take else "FULL"
        else:  # FULL
            take = e_free
            if take:
                f_next = "FIDLE"
        if self.vpiped:
            issued = self.f_t if self.fstate == "FL" else None
            self.vrq = {t for t in self.d if self._ready(t, int(t == issued))}
            self.vstarted = set()
        if take:
            self.vsel, self.e_n, self.e_last = self.f_t, self.f_n, self.f_last
            self.vj = self.vk = 0
            e_next = "RUN"
        # End of cycle.
        self.txb.cycle(new_tx is not None, new_tx, tx_taken)
        if inc_now is not None:
            self.done[inc_now] += 1
        if inc2 is not None:
            self.done[inc2] += 1
        if self.fstate == "FL":            # the fetched unit is issued
            self.cnt[self.f_t] += 1
        for t in unit_done:
            self.done[t] += 1
        for t in run_end:
            self._run_end(t)
        self.fstate, self.estate = f_next, e_next
        self.vused += v_in - v_out
        self.vcycle += 1

    def _ready_q(self, t):
        """The pipelined vector unit's view of VEC ``t`` in this cycle: ready by the previous
        cycle's counters and still active, unless a descriptor started at the last edge (then
        none is)."""
        return t in self.vrq and self.active[t] and not self.vstarted

    def _vec_output(self, tx_free, taken_banks, unit_done, run_end):
        """The pipelined vector unit's output (``hdl/pe/vector_unit.py``): the FIFO's head word
        goes out when ``tx`` is free (if it sends) and its bank is not taken (if it stores); its
        unit is done then. Returns ``(color put in tx or None, 1 if a word went out else 0)``."""
        if not self.vq or self.vq[0][0] > self.vcycle:
            return None, 0
        t, send, store, bank, unit_end, last, color = self.vq[0][1]
        if (send and not tx_free) or (store and bank in taken_banks):
            self.vbank_waits += not (send and not tx_free)
            return None, 0
        self.vq.popleft()
        if unit_end:
            unit_done.append(t)
            if last:
                run_end.append(t)
        return (color if send else None), 1

    def _vec_issue(self):
        """A RUN cycle of the pipelined vector unit: element ``vj`` is issued if a FIFO entry is
        free for it (a word that goes out) and, for DOT, its previous sum is back (``add_stages +
        1`` cycles after the previous element; not for the first), for the others no DOT element
        was issued in the last ``mul_stages + 1`` cycles. Returns ``(1 if it takes a credit else
        0, whether the execute stage is free at this edge, its next state or None)``."""
        L, t, n = self.L, self.vsel, self.e_n
        lo = self._get(t, "lo")
        dot = self._get(t, "vmode") == VecMode.DOT
        last = self.vj == L - 1
        emit = (not dot) or last
        count = self._get(t, "count")
        more = dot and self.vk + 1 < count
        since = None if self.vlast_dot is None else self.vcycle - self.vlast_dot
        credit = self.vused < vec_fifo_depth(self.A)
        if dot:
            ok = (self.vj == 0 or since is None or since > self.A) and (credit or not last)
        else:
            ok = credit and (since is None or since > self.M + 1)
        if not ok:
            return 0, False, None
        if dot:
            self.vlast_dot = self.vcycle
        if emit:
            send = bool(self._get(t, "send"))
            store = bool(self._get(t, "store")) and lo <= n < self._get(t, "hi")
            addr = self._get(t, "dst_base") + (n - lo) * (count if dot else L) + (self.vk if dot else self.vj)
            at = self.vcycle + vec_out_cycles(self.M, self.A, dot=dot)
            assert not self.vq or self.vq[-1][0] < at, "the vector unit's words overtook each other"
            self.vq.append((at, (t, send, store, addr % self.NB, last and not more, self.e_last,
                                 self._get(t, "color"))))
        if not last:
            self.vj += 1
            return int(emit), False, None
        if more:
            self.vk += 1
            return int(emit), False, "ISSUE"
        return int(emit), True, "EIDLE"


class _Player:
    """A host stream player's timing (``sim/harness/stream_player.py`` without stalls): word ``i``
    is offered at ``ports[i]`` from cycle ``first + i``, or the cycle after word ``i - 1`` was
    taken if later."""

    def __init__(self, ports, color, first):
        self.ports, self.color, self.first = deque(ports), color, first
        self.taken, self.at = 0, first

    def offer(self, t, inputs):
        if self.ports and t >= self.at:
            inputs[self.ports[0]] = [(0, self.color, 0)]

    def take(self, t, accepted):
        if self.ports and accepted.get(self.ports[0]):
            self.ports.popleft()
            self.taken += 1
            self.at = max(self.first + self.taken, t + 1)


def _fabric(rows, cols, num_colors, vc_depth, routes, ramp2):
    table = {(r, q): [[0] * NUM_PORTS for _ in range(num_colors)] for r in range(rows) for q in range(cols)}
    for (r, q), entries in routes.items():
        for color, inp, outs in entries:
            table[(r, q)][color][Port[inp]] |= route_mask(outs)
    return FabricModel(rows, cols, num_colors, vc_depth, routes=table, ramp2=ramp2)


def simulate_phase(plan, *, rows, cols, lanes, sram_banks, num_colors, vc_depth, streams=None,
                   weight_color=0, first=0, sinks=None, grads=None, commits=None,
                   west_in=None, west_first=0, barrier=True, max_cycles=1_000_000,
                   mul_stages=0, add_stages=0):
    """Simulate a phase; returns the cycle the phase is complete in the terms of a transfer out of
    the mesh: the last transfer out, or with ``barrier`` (the harness waits for every PE's
    ``busy`` to drop, docs/wafer.md#completion) the later of that and the cycle after the last one
    in which a PE still had an active descriptor (``busy`` is a register of it, so it drops a cycle
    later than a sink's count rises).

    ``plan``: ``{"pes": {(p, q): {"descs": ...}}, "routes": {(p, q): [(color, in, [outs])]},
    "ramp2": {(p, q): mask}}`` (the layer compiler's plan; ``ramp2`` may be missing);
    ``sram_banks``: SRAM banks per PE (``Config.sram_banks`` as the PE core is built);
    ``mul_stages``, ``add_stages``: the register stages of the PE core's fp units
    (``Config.mul_stages``, ``Config.add_stages``); ``streams``:
    ``{q: words}`` the weight link of column ``q`` carries (a :class:`_Player` from ``first`` each,
    color ``weight_color``); ``sinks``: ``{(p, q, port name): words}`` host-edge outputs (always
    ready) and the words each must deliver; ``grads``: ``{q: words}`` each column's gradient link
    (its north output, always ready) must deliver; ``commits``: ``{(p, q): {t: cycle}}`` descriptors
    that commit during the phase (from that cycle on they are legal, and active if enabled); the
    others are committed before cycle 0. ``west_in``: ``{p: (color, words)}`` the host plays into
    the west edge of row p (a :class:`_Player` from ``west_first``).
    """
    fabric = _fabric(rows, cols, num_colors, vc_depth, plan["routes"], plan.get("ramp2"))
    commits = commits or {}
    pes = {pq: _PeTiming(info["descs"], lanes, sram_banks, commits.get(pq), mul_stages=mul_stages,
                         add_stages=add_stages)
           for pq, info in plan["pes"].items()}
    left = {(p, q, Port[o]): n for (p, q, o), n in (sinks or {}).items()}
    left.update({(0, q, Port.N): n for q, n in (grads or {}).items()})
    ramp_out = {(p, q, Port.RAMP): pq for pq in pes for p, q in [pq]}
    ramp2_out = {(p, q, RAMP2): pq for pq in pes for p, q in [pq]}
    players = [_Player([(0, q, Port.N)] * n, weight_color, first) for q, n in (streams or {}).items()]
    players += [_Player([(p, 0, Port.W)] * n, color, west_first)
                for p, (color, n) in (west_in or {}).items()]
    last_out, last_busy = None, -1
    for t in range(max_cycles):
        for pe in pes.values():
            pe.commit(t)
        inputs = {}
        for player in players:
            player.offer(t, inputs)
        for (p, q), pe in pes.items():
            if pe.txb.out_valid:
                inputs[(p, q, Port.RAMP)] = [(0, pe.txb.out, 0)]
        rx_ready = {port: pes[pq].rx2_ready() for port, pq in ramp2_out.items()}
        rx_ready.update({port: pes[pq].rx_ready() for port, pq in ramp_out.items()})
        ready = {port: (lambda _t, v=v: v) for port, v in rx_ready.items()}
        accepted, delivered = fabric.run(inputs, ready=ready, max_cycles=1, until_idle=False)
        for player in players:
            player.take(t, accepted)
        rx, rx2 = {}, {}
        for _, port, (_, color, _) in delivered:
            if port in ramp_out:
                rx[ramp_out[port]] = color
            elif port in ramp2_out:
                rx2[ramp2_out[port]] = color
            elif port in left:
                left[port] -= 1
                last_out = t
            else:
                raise ValueError(f"a wavelet of color {color} left the mesh at {port}")
        for (p, q), pe in pes.items():
            pe.cycle(rx.get((p, q)), bool(accepted.get((p, q, Port.RAMP))), rx2.get((p, q)))
        if barrier and any(any(pe.active.values()) or pe.pending() for pe in pes.values()):
            last_busy = t
        if (all(n <= 0 for n in left.values()) and not any(player.ports for player in players)
                and last_busy < t):
            if any(n < 0 for n in left.values()):
                raise ValueError(f"sinks received extra words: {left}")
            return max(last_out, last_busy + 2)
    raise RuntimeError(f"phase did not finish within {max_cycles} cycles")
