"""The system bench harness's phase protocol (sim/harness/rtl_system.py) on two ``tiny`` wafers
(``tiny_system``, tests/hdl/conftest.py): ``go`` after the first ``go_count`` configuration
writes, the others written while the phase runs, which ends no earlier than the last of them."""

import pytest

pytestmark = pytest.mark.xdist_group("tiny-system")     # one testbench build


@pytest.mark.parametrize("go_after", [None, 1, 2, 5, 6])
def test_go_after_part_of_the_writes(tiny_system, go_after):
    """Six route writes and nothing to run: the configuration counts the cycles until the writes
    before ``go`` are written (one idle cycle, then one per write); the run lasts until the last
    write (``go`` comes two cycles after write ``go_after``, the players' ``busy`` falls the
    cycle after the last one), at least one cycle (``models.pipeline.rtl_schedule``)."""
    s = tiny_system
    writes = [s.route(p, q, "W", "E") for p in range(2) for q in range(2)] + [s.route(0, 0, "N", "S")] * 2
    phase = s.phase([writes] * 2)
    phase.go_after = go_after
    (st,), _ = s.run(phase)
    assert not (st["error"] or st["fault"] or st["timeout"]), st
    g = len(writes) if go_after is None else go_after
    assert (st["cfg_cycles"], st["run_cycles"]) == (g + 1, max(len(writes) - 1 - g, 1)), st
