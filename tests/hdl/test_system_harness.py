"""The system bench harness's phase protocol (sim/harness/rtl_system.py) on two ``tiny`` wafers
(``tiny_system``, tests/hdl/conftest.py): ``go`` after the first ``go_count`` configuration
writes, the others written while the phase runs, which ends no earlier than the last of them."""

import pytest

pytestmark = pytest.mark.xdist_group("tiny-system")     # one testbench build


def test_go_after_part_of_the_writes(tiny_system):
    """Phases of six route writes and nothing to run, ``go`` after all (None), 1, 2, 5 and 6 of
    them: the configuration counts the cycles until the writes before ``go`` are written (one
    idle cycle, then one per write); the run lasts until the last write (``go`` comes two cycles
    after write ``go_after``, the players' ``busy`` falls the cycle after the last one), at least
    one cycle (``models.pipeline.rtl_schedule``)."""
    s = tiny_system
    writes = [s.route(p, q, "W", "E") for p in range(2) for q in range(2)] + [s.route(0, 0, "N", "S")] * 2
    go_afters = [None, 1, 2, 5, 6]
    phases = [s.phase([writes] * 2) for _ in go_afters]
    for phase, g in zip(phases, go_afters):
        phase.go_after = g
    states, _ = s.run(*phases)
    for st, g in zip(states, go_afters):
        assert not (st["error"] or st["fault"] or st["timeout"]), st
        g = len(writes) if g is None else g
        assert (st["cfg_cycles"], st["run_cycles"]) == (g + 1, max(len(writes) - 1 - g, 1)), (g, st)
