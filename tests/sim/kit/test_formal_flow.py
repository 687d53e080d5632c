"""The formal flow (``sim.kit.formal``): statements reach the prover, a correct block is proved,
a deliberately broken one fails its proof, covers are reported, simulation Verilog carries no
formal statements."""

import pytest
from amaranth.lib import data

from hdl.formal import FormalPlatform, active
from hdl.skid_buffer import SkidBuffer
from hdl.verilog import verilog_text
from sim.kit import formal


@pytest.fixture(scope="module", autouse=True)
def _yosys():
    formal.require_yosys()      # raises naming what to install (the .venv brings it)


class OverwritingSkid(SkidBuffer):
    """Broken on purpose: always ready, so a word arriving while the output stalls and the skid
    slot is full overwrites the skid slot (a word is lost)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.i.ready.eq(1)
        return m


class DroppingSkid(SkidBuffer):
    """Broken on purpose: the output withdraws its word after one stalled cycle."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.o.valid & ~self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m


def test_correct_block_is_proved(tmp_path):
    r = formal.prove(SkidBuffer(8), "skid", work=tmp_path / "skid", steps=10)
    assert r["status"] == "proved"
    assert r["asserts"] == r["netlist_asserts"] == 4          # every statement reached the netlist
    assert r["assumes"] == 1
    assert all(c["reached"] for c in r["covers"].values()) and len(r["covers"]) == 2


@pytest.mark.parametrize("broken", [OverwritingSkid, DroppingSkid])
def test_broken_block_fails_its_proof(tmp_path, broken):
    r = formal.prove(broken(8), broken.__name__, work=tmp_path / "b", steps=10, covers=False)
    assert r["status"] == "failed"


def test_struct_payload_and_statements_registered():
    skid = SkidBuffer(data.StructLayout({"a": 3, "b": 5}))
    platform = FormalPlatform(skid)
    assert active(platform) and platform == "formal"
    from amaranth.back import rtlil
    rtlil.convert(skid, platform=platform)
    kinds = [k for k, *_ in platform.statements]
    assert kinds.count("assume") == 1 and kinds.count("assert") == 4 and kinds.count("cover") == 2


def test_simulation_verilog_has_no_formal_statements():
    text = verilog_text(SkidBuffer(8), "skid")
    assert "fp_" not in text and "assert" not in text
