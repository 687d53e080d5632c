"""hdl.module_merge: identical modules are written once, instances point at the kept one, and the
merged design is the same circuit (a yosys equivalence proof)."""

import re

import pytest
from amaranth import Cat, Module
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.config import preset
from hdl.mesh import Mesh
from hdl.module_merge import merge_identical_modules
from sim.kit.equivalence import equivalent
from sim.kit.runner import cached_verilog


class Accumulate(wiring.Component):
    """``total += x`` every cycle; ``width`` bits."""

    def __init__(self, width):
        self._width = width
        super().__init__({"x": In(width), "total": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.total.eq(self.total + self.x)
        return m


class Pair(wiring.Component):
    """Two accumulators of ``widths`` fed by slices of ``x`` (so Amaranth numbers their ports
    design-wide, ``\\port$N$M``), outputs concatenated."""

    def __init__(self, widths):
        self._widths = widths
        super().__init__({"x": In(16), "y": Out(sum(widths))})

    def elaborate(self, platform):
        m = Module()
        outs = []
        for i, w in enumerate(self._widths):
            acc = m.submodules[f"acc{i}"] = Accumulate(w)
            m.d.comb += acc.x.eq(self.x[i:i + w - 1] + i)     # an expression: a numbered port
            outs.append(acc.total)
        m.d.comb += self.y.eq(Cat(*outs))
        return m


class Quad(wiring.Component):
    """Two :class:`Pair` of the same widths: identical modules two levels deep."""

    def __init__(self):
        super().__init__({"x": In(16), "y": Out(24)})

    def elaborate(self, platform):
        m = Module()
        a = m.submodules.a = Pair((6, 6))
        b = m.submodules.b = Pair((6, 6))
        m.d.comb += [a.x.eq(self.x), b.x.eq(~self.x), self.y.eq(Cat(a.y, b.y))]
        return m


def _modules(text):
    return re.findall(r"^module (\\\S+|\w+)", text, re.M)


def _convert(component, name):
    return verilog.convert(component, name=name, emit_src=False)


def test_identical_modules_are_written_once():
    raw = _convert(Quad(), "quad")
    assert len(_modules(raw)) == 7                   # quad, a, a.acc0, a.acc1, b, b.acc0, b.acc1
    merged = merge_identical_modules(raw)
    assert _modules(merged) == ["quad", r"\quad.a", r"\quad.a.acc0"]
    instances = re.findall(r"^  (\S+) +(\S+) \($", merged, re.M)
    assert instances == [(r"\quad.a", "a"), (r"\quad.a", "b"),
                         (r"\quad.a.acc0", "acc0"), (r"\quad.a.acc0", "acc1")]


def test_different_modules_are_kept():
    merged = merge_identical_modules(_convert(Pair((6, 7)), "pair"))
    assert _modules(merged) == ["pair", r"\pair.acc0", r"\pair.acc1"]


def test_merged_design_is_equivalent(tmp_path):
    """yosys proves the merged Verilog the same circuit as Amaranth's."""
    raw = _convert(Quad(), "quad")
    same, log = equivalent(raw, merge_identical_modules(raw), "quad", tmp_path)
    assert same, log


def test_mesh_keeps_one_router_per_link_set():
    """The Verilog of a 4 x 4 mesh of routers (made as every bench makes it): 16 routers, 9 distinct
    sets of neighbour links (corners, edges, the inner four), so 9 router modules, each named for
    its links (hdl.shared_block)."""
    cfg = preset("tiny", mesh_rows=4, mesh_cols=4, num_colors=2)     # 2 colors: a cheap router
    merged = cached_verilog("mesh", Mesh, cfg).read_text()
    routers = [m for m in _modules(merged) if m.startswith("router_")]
    assert sorted(routers) == ["router_es", "router_esw", "router_ne", "router_nes", "router_nesw",
                               "router_new", "router_nsw", "router_nw", "router_sw"]
    instances = re.findall(r"^  (\S+) +router_\d_\d \($", merged, re.M)
    assert len(instances) == 16 and set(instances) == set(routers)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no endmodule"):
        merge_identical_modules("module m(a);\n  input a;\n")
