"""hdl.module_merge: identical modules are written once, instances point at the kept one, and the
merged design is the same circuit (a yosys equivalence proof)."""

import re
import subprocess

import pytest
from amaranth import Cat, Module
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.config import preset
from hdl.module_merge import merge_identical_modules
from sim.kit import toolchain
from sim.kit.runner import top_verilog


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
    """yosys proves the merged Verilog the same circuit as Amaranth's (flattened, equiv_*)."""
    raw = _convert(Quad(), "quad")
    (tmp_path / "gold.v").write_text(raw)
    (tmp_path / "gate.v").write_text(merge_identical_modules(raw))
    script = ("read_verilog gold.v; prep -flatten -top quad; rename quad gold; design -stash gold; "
              "read_verilog gate.v; prep -flatten -top quad; rename quad gate; design -stash gate; "
              "design -copy-from gold -as gold gold; design -copy-from gate -as gate gate; "
              "equiv_make gold gate equiv; hierarchy -top equiv; equiv_simple -seq 2; equiv_induct; "
              "equiv_status -assert")
    run = subprocess.run([toolchain.yosys(), "-q", "-p", script], cwd=tmp_path, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_mesh_keeps_one_router_per_link_set():
    """The Verilog of the 4 x 4 mesh of routers (as every bench takes it): 16 routers, 9 distinct
    sets of neighbour links (corners, edges, the inner four), so 9 router modules."""
    cfg = preset("tiny")
    merged = top_verilog("mesh4x4", cfg).read_text()
    routers = [m for m in _modules(merged) if re.fullmatch(r"\\mesh4x4\.router_\d_\d", m)]
    assert len(routers) == 9
    instances = re.findall(r"^  (\S+) +router_\d_\d \($", merged, re.M)
    assert len(instances) == 16 and set(instances) == set(routers)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no endmodule"):
        merge_identical_modules("module m(a);\n  input a;\n")
