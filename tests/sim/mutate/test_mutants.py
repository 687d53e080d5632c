"""Operator mutants (sim/mutate/mutants.py): every operator of a function that builds circuits is
found once, at its own characters, and applying a mutant changes that operator and nothing else."""

import ast
import dataclasses
import difflib
import textwrap

import pytest

from sim.mutate.mutants import SKIPPED_FUNCTIONS, SWAPS, _line_offsets, _qualified_functions, apply, mutants
from sim.mutate.targets import TARGETS

SOURCE = textwrap.dedent('''
    class Block:
        def __init__(self, n):
            self.n = n - 1                      # a constructor: not mutated

        def elaborate(self, platform):
            a = (x == 0) & (y != 1)             # parenthesised operands
            b = self.n << 2 < c                 # "<" next to "<<"
            d = ~(e | f) if g <= h else i >= j  # a comparison in a conditional expression
            k = [p + 1 for p in q if p > 3]     # inside a comprehension

            def helper(v):                      # nested: its own function
                return v - 1
            if active(platform):                # property code: not mutated
                f.check("p", a == b)
            return a, b, d, k, helper

        def _formal(self, m):
            m.d.comb += self.x.eq(self.y + 1)   # property code: not mutated
''')


@pytest.fixture
def source_file(tmp_path):
    (tmp_path / "block.py").write_text(SOURCE)
    return tmp_path


def test_every_operator_found_once_in_source_order(source_file):
    found = mutants("block.py", source_file)
    assert [(m.function, m.old, m.new) for m in found] == [
        ("Block.elaborate", "==", "!="), ("Block.elaborate", "&", "|"), ("Block.elaborate", "!=", "=="),
        ("Block.elaborate", "<", "<="),
        ("Block.elaborate", "~", ""), ("Block.elaborate", "|", "&"), ("Block.elaborate", "<=", "<"),
        ("Block.elaborate", ">=", ">"),
        ("Block.elaborate", "+", "-"), ("Block.elaborate", ">", ">="),
        ("Block.elaborate.helper", "-", "+"),
    ]
    assert [m.rank for m in found if m.function == "Block.elaborate"] == list(range(10))
    assert {"__init__", "_formal"} <= SKIPPED_FUNCTIONS


def test_a_mutant_changes_its_operator_only(source_file):
    for m in mutants("block.py", source_file):
        mutated = apply(SOURCE, m)
        ast.parse(mutated)
        diff = [d for d in difflib.ndiff(SOURCE.splitlines(), mutated.splitlines()) if d[0] in "+-"]
        assert diff[0][2:].strip() == m.text and len(diff) == 2, m.key
        assert mutated[:m.offset] == SOURCE[:m.offset]
        assert mutated[m.offset:].startswith(m.new) and mutated[m.offset + len(m.new):] == SOURCE[
            m.offset + len(m.old):], m.key


def test_a_stale_mutant_is_refused(source_file):
    m = mutants("block.py", source_file)[0]
    with pytest.raises(ValueError, match="the file changed"):
        apply(SOURCE.replace("(x == 0)", "(x  == 0)"), m)


def _functions(text):
    """``{qualified name: (first offset, end offset)}`` of every function of ``text``, decorators
    included."""
    starts = [*_line_offsets(text), len(text)]
    return {name: (starts[min([fn.lineno] + [d.lineno for d in fn.decorator_list]) - 1], starts[fn.end_lineno])
            for name, fn in _qualified_functions(ast.parse(text))}


def test_keys_are_unique_and_every_target_mutates():
    """Every mutant of every RTL source applies and parses; keys name one mutant each. (A mutant
    changes its function's text only, so that function is what is parsed again, on its own.)"""
    from sim.mutate.__main__ import ROOT
    keys = []
    for path in TARGETS:
        text = (ROOT / path).read_text()
        spans = _functions(text)
        found = mutants(path, ROOT)
        assert found, path
        for m in found:
            lo, hi = spans[m.function]
            assert lo <= m.offset and m.offset + len(m.old) <= hi, m.key
            ast.parse(textwrap.dedent(apply(text[lo:hi], dataclasses.replace(m, offset=m.offset - lo))))
            assert (m.old, m.new) in {*SWAPS.values(), ("~", "")}
        keys += [m.key for m in found]
    assert len(keys) == len(set(keys))
