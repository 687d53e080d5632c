"""The generator's programs are what they claim (model only): valid, legal ones without a fault, illegal
ones faulting, every kind of descriptor and injection drawn."""

from collections import Counter

import pytest

from arch.pe_map import desc_addr
from sim.pe_fuzz.configs import CONFIGS, make_config
from sim.pe_fuzz.generator import programs
from sim.pe_fuzz.model import expect, validate

SEED = 20


@pytest.mark.parametrize("spec", list(CONFIGS))
def test_generator_programs_are_what_they_claim(spec):
    """Every program is valid; a legal one raises no fault at all (every commit passes its checks, no
    run-time fault), an illegal one raises at least one and its sticky fault shows (the fault flag after
    a step); timed programs are legal; single-phase ones commit each descriptor once; both kinds and
    every injection occur, and the generator seldom redraws a step."""
    cfg = make_config(spec)
    commit_addrs = {desc_addr(cfg.sram_words, t) for t in range(cfg.num_tasks)}
    kinds, tags, rejected = Counter(), Counter(), Counter()
    for prog in programs(spec, 60, seed=SEED):
        assert validate(prog) == [], prog["seed"]
        exp = expect(prog)
        kinds[prog["kind"]] += 1
        tags.update(prog["tags"])
        rejected.update(prog["rejected"])
        if prog["kind"] == "legal":
            assert exp["attempts"] == [], (prog["seed"], exp["attempts"][:3])
            assert not any(s["fault"] for s in exp["steps"])
        else:
            assert exp["attempts"], prog["seed"]
            assert any(s["fault"] for s in exp["steps"]), prog["seed"]
        assert not prog["timed"] or prog["kind"] == "legal"
        if prog["tags"].get("one-phase"):
            commits = [a for s in prog["steps"] for a, _ in s["writes"] if a in commit_addrs]
            assert len(commits) == len(set(commits)), prog["seed"]
    assert kinds["legal"] > 25 and kinds["illegal"] > 8, kinds
    for what in ("op FMAC", "op STORE", "op STORE2", "op VEC PASS", "op VEC ADD", "op VEC MASK", "op VEC DOT",
                 "chain", "deps", "vec-reads-produced", "transposed-store", "stop"):
        assert tags[what] > 0, (what, tags)
    injected = {k.split()[1] for k in tags if k.startswith("inject")}
    if spec == "tiny":
        assert injected == {"commit", "unbound", "dup", "acc", "range", "midrun"}, injected
    else:
        assert len(injected) >= 5, injected
    assert sum(rejected.values()) <= 10, rejected
