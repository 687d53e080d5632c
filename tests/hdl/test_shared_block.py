"""hdl.shared_block: where Verilog is written, a shared block is converted once per key and
instantiated by name; the design is the same circuit as without sharing (a yosys proof); outside
``blocks_written_once`` a component is itself."""

import re

import pytest
from amaranth import Cat, Module
from amaranth.back import verilog
from amaranth.hdl import Fragment, Instance
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl import shared_block
from hdl.shared_block import blocks_written_once, shared
from hdl.skid_buffer import SkidBuffer
from hdl.verilog import verilog_text
from sim.kit.equivalence import equivalent


class Counter(wiring.Component):
    """``count`` advances by ``step`` while ``en``; ``width`` bits."""

    def __init__(self, width):
        super().__init__({"en": In(1), "step": In(width), "count": Out(width)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + self.step)
        return m


class Counters(wiring.Component):
    """One :class:`Counter` per width of ``widths`` (shared per width), enabled by bits of ``en``,
    stepped by slices of ``step``; the counts concatenated."""

    def __init__(self, widths):
        self._widths = widths
        super().__init__({"en": In(len(widths)), "step": In(16), "counts": Out(sum(widths))})

    def elaborate(self, platform):
        m = Module()
        counts = []
        for i, w in enumerate(self._widths):
            c = m.submodules[f"c{i}"] = shared(Counter(w), "counter", w)
            m.d.comb += [c.en.eq(self.en[i]), c.step.eq(self.step[i:i + w] ^ i)]
            counts.append(c.count)
        m.d.comb += self.counts.eq(Cat(*counts))
        return m


def _modules(text):
    return re.findall(r"^module (\\\S+|\w+)", text, re.M)


def test_outside_the_context_a_component_is_itself():
    c = Counter(4)
    assert shared(c, "counter", 4) is c
    Fragment.get(c, None)


def test_one_module_per_key():
    text = verilog_text(Counters((6, 6, 7, 6)), "counters")
    assert _modules(text) == ["counters", "counter", "counter_1"]
    instances = re.findall(r"^  (\w+) (c\d) \($", text, re.M)
    assert instances == [("counter", "c0"), ("counter", "c1"), ("counter_1", "c2"), ("counter", "c3")]


def test_shared_design_is_equivalent(tmp_path):
    """yosys proves the design with shared blocks the same circuit as Amaranth's own Verilog."""
    gold = verilog.convert(Counters((6, 6, 7)), name="counters", emit_src=False)
    same, log = equivalent(gold, verilog_text(Counters((6, 6, 7)), "counters"), "counters", tmp_path)
    assert same, log


def test_blocks_made_in_a_constructor_need_the_context_around_it():
    with blocks_written_once() as library:
        stand_in = shared(Counter(5), "counter", 5)
        assert set(library.texts) == {"counter"}
        assert set(stand_in.signature.members) == {"en", "step", "count"}
        instance = Fragment.get(stand_in, None)
        assert isinstance(instance, Instance) and instance.type == "counter"


def test_top_named_like_a_block_is_refused():
    with pytest.raises(ValueError, match="has the name of one of its shared blocks"):
        verilog_text(Counters((4,)), "counter")


class Pair(wiring.Component):
    """Two shared skid buffers of ``width`` bits in a row (a block of hdl/ inside a test's block)."""

    def __init__(self, width):
        self._width = width
        super().__init__({"i": In(width), "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        a = m.submodules.a = shared(SkidBuffer(self._width), "skid", self._width)
        b = m.submodules.b = shared(SkidBuffer(self._width), "skid", self._width)
        m.d.comb += [a.i.payload.eq(self.i), a.i.valid.eq(1), b.i.payload.eq(a.o.payload),
                     b.i.valid.eq(a.o.valid), a.o.ready.eq(b.i.ready), b.o.ready.eq(1),
                     self.o.eq(b.o.payload)]
        return m


def test_leaf_blocks_of_hdl_are_kept_on_disk(tmp_path, monkeypatch):
    """A block of hdl/ without shared blocks of its own is written to BLOCK_CACHE once and read
    from there by the next design; a block defined elsewhere (its source is not in the key) and a
    block holding shared blocks are not kept."""
    monkeypatch.setattr(shared_block, "BLOCK_CACHE", tmp_path)
    first = verilog_text(Pair(5), "pair")
    kept = list(tmp_path.iterdir())
    assert [p.name.split("-")[0] for p in kept] == ["skid"]
    kept[0].write_text(kept[0].read_text().replace("module skid(", "module skid( /* from disk */"))
    again = verilog_text(Pair(5), "pair")
    assert "/* from disk */" in again and again == first.replace("module skid(", "module skid( /* from disk */")
    verilog_text(Pair(6), "pair")
    assert len(list(tmp_path.iterdir())) == 2
    verilog_text(Counters((6, 7)), "counters")              # Counter is a test's class
    assert len(list(tmp_path.iterdir())) == 2
