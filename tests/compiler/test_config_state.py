"""compiler/config_state.py: a phase programmed onto a wafer whose registers the host knows
writes only what changed, and leaves the wafer's configuration as the full phase would."""

import numpy as np

from arch.pe_map import desc_addr
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
from compiler.config_state import ConfigState
from compiler.wafer import compile_backward_data, compile_backward_weight, compile_forward
from hdl.config import preset

CFG = preset("system", mesh_rows=2, mesh_cols=2).replace(sram_words=4096)
B = 8


def _phases(rng):
    x = rng.integers(0, 1 << 15, (32, B), dtype=np.uint16)
    dz = rng.integers(0, 1 << 15, (10, B), dtype=np.uint16)
    return [compile_forward(CFG, m=32, k=64, batch=B, x16=rng.integers(0, 1 << 15, (64, B), dtype=np.uint16)),
            compile_forward(CFG, m=10, k=32, batch=B, x16=x, last=True),
            compile_backward_data(CFG, m=10, k=32, batch=B, x16=x, dz16=dz),
            compile_backward_weight(CFG, m=10, k=32, batch=B, x16=x, dz16=dz)]


def _replay(registers, writes):
    for addr, value in writes:
        registers[addr] = value
    return registers


def test_programmed_phases_leave_the_configuration_of_the_full_ones():
    """Two steps of phases: the programmed writes, replayed, give every address the value the
    full writes give; the SRAM loads, STOPs, commits and adapters are all still there, in order."""
    rng = np.random.default_rng(3)
    state, full, short = ConfigState(), {}, {}
    dropped = []
    for phase in _phases(rng) + _phases(rng):
        got = state.program(phase)
        _replay(full, phase.writes)
        _replay(short, got.writes)
        assert short == full
        always = [w for w, s in zip(phase.writes, phase.settable) if not s]
        assert [w for w, s in zip(got.writes, got.settable) if not s] == always
        dropped.append(len(phase.writes) - len(got.writes))
    assert dropped[:1] == [0]                   # a fresh wafer: everything written
    assert all(d > 0 for d in dropped[4:])      # the second step finds most registers set


def test_commit_indices_point_at_each_descriptors_word_0():
    rng = np.random.default_rng(4)
    state = ConfigState()
    bits = mesh_tile_addr_bits(CFG.sram_words, CFG.num_tasks)
    for phase in _phases(rng) * 2:
        got = state.program(phase)
        for (p, q), commits in got.plan["commits"].items():
            for t, i in commits.items():
                assert got.writes[i][0] == tile_address(CFG.mesh_cols, p, q,
                                                        CORE_BASE + desc_addr(CFG.sram_words, t), bits)
                assert not got.settable[i]
        assert phase.plan["commits"] is not got.plan["commits"]


def test_a_changed_register_is_written_again():
    phase = compile_forward(CFG, m=32, k=64, batch=B)
    state = ConfigState()
    state.program(phase)
    i = phase.settable.index(True)
    addr, value = phase.writes[i]
    changed = phase.writes.copy()
    changed[i] = (addr, value ^ 1)
    again = state.program(type(phase)(phase.name, changed, phase.plan, settable=phase.settable))
    assert (addr, value ^ 1) in again.writes
    assert sum(again.settable) == 1
