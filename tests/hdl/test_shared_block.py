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

from hdl.shared_block import blocks_written_once, shared
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
