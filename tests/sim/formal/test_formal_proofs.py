"""The quick proofs of ``make formal`` (``sim.formal.QUICK``) run in ``make test`` too; the
others (fp units, SwarmX node and tree, router with links) in ``make formal``."""

import pytest

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


def test_proof_names_unique():
    names = [p.name for p in PROOFS]
    assert len(names) == len(set(names)) and set(QUICK) <= set(names)
