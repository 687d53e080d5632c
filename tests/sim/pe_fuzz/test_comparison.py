"""The comparison is not blind: a difference in any compared quantity of a correct RTL result is reported."""

from sim.pe_fuzz.comparison import compare
from sim.pe_fuzz.generator import programs
from sim.pe_fuzz.model import expect
from sim.pe_fuzz.rtl import run_rtl


def test_compare_sees_differences():
    """A word, a read-back, a fault flag, a ``tx`` cycle and an ``rx`` accept changed in a correct result
    are each reported."""
    prog = next(p for p in programs("tiny", 40, seed=3) if p["timed"] and expect(p)["out"])
    exp = expect(prog)
    res = run_rtl([prog], [exp], name="compare")[0]
    assert compare(prog, exp, res)[0] == []
    for change in ("word", "read", "fault", "tx cycle", "rx refused"):
        bad = {k: (list(v) if isinstance(v, list) else v) for k, v in res.items()}
        if change == "word":
            bad["tx"][-1] ^= 1 << 4
        elif change == "read":
            bad["reads"] = [list(r) for r in bad["reads"]]
            s = next(i for i, r in enumerate(bad["reads"]) if r)
            bad["reads"][s][0] ^= 1
        elif change == "fault":
            bad["faults"][-1] ^= 1
        elif change == "tx cycle":
            bad["tx_cycles"][-1] += 1
        elif bad["rx"]:
            bad["rx_wait"] = sorted(bad["rx_wait"] + bad["rx"][:1])
            bad["rx"] = bad["rx"][1:]
        else:
            continue
        diffs, _ = compare(prog, exp, bad)
        assert diffs, change
