"""The PE core's banked SRAM (docs/pe.md): ``words`` 32-bit words in ``banks`` interleaved banks
(word ``a`` in bank ``a mod banks``), so a vector of ``lanes <= banks`` consecutive words at any
address is one access per bank.

The SRAM is held twice: copy 0 is read by the FMAC lanes and by configuration reads, copy 1 by the
vector unit; every write goes to both. Each bank of each copy is a ``lib.memory.Memory`` with one
read and one write port (block RAM).

Ports (addresses are word addresses below ``words``):

* ``lane_addr`` -> ``lane_data``, ``vec_addr`` -> ``vec_data``: the ``lanes`` words from the address
  (lane ``l`` = word ``addr + l``) of copy 0 / copy 1, the cycle after the address (registered).
* ``row_addr``, ``row_data``, ``row_mask``: lane ``l`` writes ``row_data[l]`` to ``row_addr + l``
  where ``row_mask[l]`` is set. Priority over the store and the word write.
* ``store_addr``, ``store_data``, ``store_en``: one word (the store engine's head); ``store_blocked``
  (combinational) is high when the row write uses its bank; it is then not written. Priority over
  the second store word and the word write.
* ``store2_addr``, ``store2_data``, ``store2_en``: a second word of the store engine (the one
  behind its head, in the same cycle); ``store2_blocked`` (combinational) is high when the row
  write or the first store word uses its bank; it is then not written. Priority over the word
  write. (Each bank still takes one write per cycle: the two store words go to two banks.)
* ``word_addr``, ``word_data``, ``word_en``: one word; with ``word_pair`` also ``word_data2`` to
  ``word_addr + 1`` (its bank is the next one, so ``banks >= 2``; not written past the last word).
  ``word_blocked`` (combinational) is high when the row write or a store uses the bank of a word
  of the write in this cycle; the words are then not written.

A read in the cycle of a write to the same word returns the old word.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PeSram"]


class PeSram(wiring.Component):
    def __init__(self, *, words, banks, lanes):
        assert lanes <= banks and words % banks == 0 and banks >= 2
        self._words, self._banks, self._lanes = words, banks, lanes
        vec = data.ArrayLayout(32, lanes)
        super().__init__({
            "lane_addr": In(16), "lane_data": Out(vec),
            "vec_addr": In(16), "vec_data": Out(vec),
            "row_addr": In(16), "row_data": In(vec), "row_mask": In(lanes),
            "store_addr": In(16), "store_data": In(32), "store_en": In(1), "store_blocked": Out(1),
            "store2_addr": In(16), "store2_data": In(32), "store2_en": In(1), "store2_blocked": Out(1),
            "word_addr": In(16), "word_data": In(32), "word_en": In(1), "word_blocked": Out(1),
            "word_pair": In(1), "word_data2": In(32),
        })

    def elaborate(self, platform):
        m = Module()
        S, NB, L = self._words, self._banks, self._lanes
        lb = NB.bit_length() - 1
        line_bits = max((S // NB - 1).bit_length(), 1)

        def split(addr):
            lo = addr[:lb] if lb else Const(0, 1)
            return lo, addr[lb:lb + line_bits]

        def line(b, lo, hi):
            """Bank ``b``'s line of the vector starting at ``hi * NB + lo``: banks below ``lo``
            hold the words that wrapped into the next line."""
            return hi + (lo > b) if b < NB - 1 else hi

        def lane_of(b, lo):
            return (Const(b, lb + 1) - lo)[:lb] if lb else Const(0, 1)

        # Per bank: the row write's lane (and whether it writes), else the word write.
        row_lo, row_hi = split(self.row_addr)
        store_lo, store_hi = split(self.store_addr)
        store2_lo, store2_hi = split(self.store2_addr)
        word_lo, word_hi = split(self.word_addr)
        # the pair's word word_addr + 1: the next bank, on the next line after the last bank
        pair_lo = (word_lo + 1)[:lb] if lb else Const(0, 1)
        pair_hi = word_hi + (word_lo == NB - 1)
        pair_en = Signal()      # (not from word_en: a store's word_en waits on word_blocked)
        m.d.comb += pair_en.eq(self.word_pair & (self.word_addr != S - 1))
        mask = Cat(self.row_mask, Const(0, NB - L)) if NB > L else self.row_mask
        row_en = Signal(NB)
        store_en = Signal(NB)       # per bank: the store writes it
        store2_en = Signal(NB)      # per bank: the second store word writes it
        wr_addr = [Signal(line_bits, name=f"wr_addr{b}") for b in range(NB)]
        wr_data = [Signal(32, name=f"wr_data{b}") for b in range(NB)]
        wr_en = [Signal(name=f"wr_en{b}") for b in range(NB)]
        lanes = Array(list(self.row_data) + [Const(0, 32)] * (NB - L))
        for b in range(NB):
            lane = Signal(max(lb, 1), name=f"row_lane{b}")
            m.d.comb += lane.eq(lane_of(b, row_lo))
            m.d.comb += row_en[b].eq(mask.bit_select(lane, 1) if NB > 1 else mask[0])
            m.d.comb += store_en[b].eq(self.store_en & (store_lo == b) & ~row_en[b])
            m.d.comb += store2_en[b].eq(self.store2_en & (store2_lo == b) & ~row_en[b] & ~store_en[b])
            word_here = self.word_en & (word_lo == b)
            pair_here = self.word_en & pair_en & (pair_lo == b)
            m.d.comb += [
                wr_en[b].eq(row_en[b] | store_en[b] | store2_en[b] | word_here | pair_here),
                wr_addr[b].eq(Mux(row_en[b], line(b, row_lo, row_hi),
                                  Mux(store_en[b], store_hi,
                                      Mux(store2_en[b], store2_hi, Mux(pair_here, pair_hi, word_hi))))),
                wr_data[b].eq(Mux(row_en[b], lanes[lane],
                                  Mux(store_en[b], self.store_data,
                                      Mux(store2_en[b], self.store2_data,
                                          Mux(pair_here, self.word_data2, self.word_data))))),
            ]
        taken = Signal(NB)
        m.d.comb += [
            taken.eq(row_en | store_en | store2_en),
            self.store_blocked.eq(row_en.bit_select(store_lo, 1)),
            self.store2_blocked.eq((row_en | store_en).bit_select(store2_lo, 1)),
            self.word_blocked.eq(taken.bit_select(word_lo, 1) | (pair_en & taken.bit_select(pair_lo, 1))),
        ]

        for copy, (addr, out) in enumerate([(self.lane_addr, self.lane_data),
                                            (self.vec_addr, self.vec_data)]):
            lo, hi = split(addr)
            lo_q = Signal(max(lb, 1), name=f"rd{copy}_lo")
            m.d.sync += lo_q.eq(lo)
            read = []
            for b in range(NB):
                mem = m.submodules[f"copy{copy}_bank{b}"] = memory.Memory(shape=32, depth=S // NB,
                                                                         init=[])
                rp, wp = mem.read_port(), mem.write_port()
                m.d.comb += [rp.addr.eq(line(b, lo, hi)),
                             wp.addr.eq(wr_addr[b]), wp.data.eq(wr_data[b]), wp.en.eq(wr_en[b])]
                read.append(rp.data)
            words = Array(read)
            for l in range(L):
                m.d.comb += out[l].eq(words[(lo_q + l)[:lb]] if lb else read[0])
        return m

