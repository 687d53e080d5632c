"""Fuzz programs on the RTL equal the golden model word for word, register for register, fault for fault
and, for timed programs, cycle for cycle (``make bench ARGS=pe_fuzz`` runs 10,000)."""

import pytest

from sim.pe_fuzz.campaign import fuzz

RTL_PROGRAMS = 150          # per configuration, one simulator process each
SEED = 20


@pytest.mark.parametrize("spec", ["tiny", "pipe"])
def test_fuzz_rtl_equals_model(spec):
    """No difference in ``RTL_PROGRAMS`` programs; a failure prints the first failing program shrunk and
    the command that replays it."""
    stats = fuzz(spec, RTL_PROGRAMS, SEED, batch=RTL_PROGRAMS)
    if stats.failures:
        seeds = [p["seed"] for p, _ in stats.failures]
        pytest.fail(f"{len(stats.failures)} of {stats.n['programs']} programs differ (seeds {seeds[:10]}): "
                    f"{stats.failures[0][1][:3]}\n"
                    + "\n".join(f"shrunk from size {r['size']} to {r['shrunk']} in {r['rounds']} rounds: "
                                f"{r['diffs'][:3]}\n{r['listing']}\nreplay: {r['command']}" for r in stats.replays))
    n, c = stats.n, stats.compared
    assert n["programs"] == RTL_PROGRAMS and n["illegal"] > 20 and n["timed"] > 40
    assert c["words"] > 500 and c["reads"] > 3000 and c["cycles"] > 500, (n, c)
    assert set(stats.raised) >= {"COUNT", "COLOR", "INDEX", "UNBOUND", "RANGE"}, stats.raised
