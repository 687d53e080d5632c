"""The shrinker reduces a failing program to a small one that still fails in the same way."""

from sim.pe_fuzz.model import validate
from sim.pe_fuzz.replays import describe
from sim.pe_fuzz.rtl import model_results
from sim.pe_fuzz.shrinker import FlipAddModel, shrink, size


def test_shrinker_reduces_a_synthetic_mismatch(synthetic_mismatch):
    """The correct model stands in for the RTL, the wrong model ``FlipAddModel`` is the reference: the
    program shrinks to a few descriptors and wavelets, valid, that still show a words difference."""
    prog = synthetic_mismatch
    small, diffs, _ = shrink(prog, run=lambda ps, es: model_results(ps), model_cls=FlipAddModel, timing=False)
    assert diffs and diffs[0].startswith("words:"), diffs
    assert validate(small) == []
    assert size(small) <= min(40, size(prog) // 2), (size(prog), size(small), describe(small))
    assert sum(len(s["wavelets"]) + len(s["wavelets2"]) for s in small["steps"]) <= 8, describe(small)
    assert sum(len(s["reads"]) for s in small["steps"]) == 0
