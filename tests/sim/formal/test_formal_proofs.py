"""The quick proofs of ``make formal`` (``sim.formal.QUICK``) run in ``make test`` too; the
others (fp units, SwarmX node and tree, router with links, mesh link) in ``make formal``."""

import pytest

from hdl.config import preset
from hdl.pe.descriptor_table import DescriptorTable
from sim.formal import PROOFS, QUICK
from sim.kit import formal


@pytest.mark.parametrize("name", QUICK)
def test_quick_proof(name, tmp_path):
    formal.require_yosys()      # raises naming what to install (the .venv brings it)
    p = next(p for p in PROOFS if p.name == name)
    r = formal.prove(p.make(), p.name, steps=p.steps, fair_stall=p.fair_stall, work=tmp_path / name,
                     covers=False)
    assert r["status"] == "proved", f"{name}: {r['status']} (see {tmp_path / name})"
    assert r["asserts"] > 0


class StopIgnored(DescriptorTable):
    """Broken on purpose: descriptor 0 stays active through STOP."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.stop_all & self.active[0]):
            m.d.sync += self.active[0].eq(1)
        return m


def test_broken_descriptor_table_fails(tmp_path):
    formal.require_yosys()
    top = StopIgnored(preset("tiny", num_tasks=2, sram_words=64))
    r = formal.prove(top, "stop_ignored", steps=6, work=tmp_path / "stop_ignored", covers=False)
    assert r["status"] == "failed"


def test_proof_names_unique():
    names = [p.name for p in PROOFS]
    assert len(names) == len(set(names)) and set(QUICK) <= set(names)
