"""Operator mutants of the RTL sources: where they are, and the source with one applied.

A mutant swaps one operator of a function that builds hardware (:data:`SWAPS`: ``+``/``-``,
``&``/``|``, ``==``/``!=``, ``<``/``<=``, ``>``/``>=``) or drops one ``~``. Constructors, formal
property code (``_formal`` and the blocks ``if active(platform):``) and ``__eq__`` are not mutated:
they declare ports and parameters or state properties, they build no circuit. A mutant's
:attr:`Mutant.key` names it by file, function, operator and the operator's rank in its function, so
a key survives edits elsewhere in the file.
"""

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SWAPS", "SKIPPED_FUNCTIONS", "Mutant", "mutants", "apply"]

SWAPS = {
    ast.Add: ("+", "-"), ast.Sub: ("-", "+"),
    ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"),
    ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
    ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
}
INVERT = ("~", "")
SKIPPED_FUNCTIONS = {"__init__", "_formal", "__eq__"}


@dataclass(frozen=True)
class Mutant:
    """One operator replaced: ``old`` at ``offset`` (characters into the file) becomes ``new``."""

    path: str           # relative to the project root, e.g. "hdl/router.py"
    function: str       # the enclosing function's qualified name, e.g. "Router.elaborate"
    rank: int           # this operator's index among the function's mutable operators
    line: int
    offset: int
    old: str
    new: str
    text: str           # the source line, stripped

    @property
    def key(self):
        return f"{self.path}:{self.function}#{self.rank}:{self.old}->{self.new or 'drop'}"


def _line_offsets(source):
    offsets, total = [], 0
    for line in source.splitlines(keepends=True):
        offsets.append(total)
        total += len(line)
    return offsets


def _operator_offset(source, offsets, start, end, token):
    """Offset of ``token`` in ``source`` between two ``(line, col)`` positions, outside brackets
    and comments; the operator between two operands is the first such token there."""
    lo = offsets[start[0] - 1] + start[1]
    hi = offsets[end[0] - 1] + end[1]
    depth, i = 0, lo
    while i < hi:
        c = source[i]
        if c == "#":
            i = source.index("\n", i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)       # a left operand's own closing parentheses
        elif depth == 0 and source.startswith(token, i):
            after = source[i + len(token):i + len(token) + 1]
            before = source[i - 1] if i else ""
            # "<" must not be the start of "<=" or "<<", "=" of "==" inside "<=", etc.
            if not (after in "=<>" and after != "" and token in ("<", ">", "=="))\
                    and not (token in ("<", ">") and before in "<>"):
                return i
        i += 1
    raise ValueError(f"operator {token!r} not found between {start} and {end}")


def _qualified_functions(tree):
    """``(qualified name, FunctionDef)`` of every function, methods as ``Class.method``."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child))
                visit(child, prefix + child.name + ".")
    visit(tree, "")
    return out


def _is_property_block(node):
    """``if active(platform):``: formal properties (hdl/formal.py), present only in a proof."""
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Call)
            and isinstance(node.test.func, ast.Name) and node.test.func.id == "active")


def _sites(fn):
    """Mutable operator nodes of ``fn``'s own body (nested functions are their own), in source order:
    ``(node, left end, right start, old, new)``."""
    nested = {id(n) for n in ast.walk(fn) if n is not fn and isinstance(n, (ast.FunctionDef, ast.Lambda))}
    found = []

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if id(child) in nested and isinstance(child, ast.FunctionDef) or _is_property_block(child):
                continue
            if isinstance(child, ast.BinOp) and type(child.op) in SWAPS:
                old, new = SWAPS[type(child.op)]
                found.append((child, (child.left.end_lineno, child.left.end_col_offset),
                              (child.right.lineno, child.right.col_offset), old, new))
            elif isinstance(child, ast.Compare):
                left = child.left
                for op, right in zip(child.ops, child.comparators):
                    if type(op) in SWAPS:
                        old, new = SWAPS[type(op)]
                        found.append((child, (left.end_lineno, left.end_col_offset),
                                      (right.lineno, right.col_offset), old, new))
                    left = right
            elif isinstance(child, ast.UnaryOp) and isinstance(child.op, ast.Invert):
                found.append((child, (child.lineno, child.col_offset),
                              (child.operand.lineno, child.operand.col_offset), *INVERT))
            walk(child)
    walk(fn)
    return sorted(found, key=lambda s: (s[1], s[2]))


def mutants(path, root):
    """Every mutant of the file ``root / path``, in source order."""
    source = (Path(root) / path).read_text()
    offsets = _line_offsets(source)
    lines = source.splitlines()
    out = []
    for name, fn in _qualified_functions(ast.parse(source)):
        if name.rsplit(".", 1)[-1] in SKIPPED_FUNCTIONS or any(
                part in SKIPPED_FUNCTIONS for part in name.split(".")[:-1]):
            continue
        for rank, (_, start, end, old, new) in enumerate(_sites(fn)):
            offset = _operator_offset(source, offsets, start, end, old)
            line = source.count("\n", 0, offset) + 1
            out.append(Mutant(str(path), name, rank, line, offset, old, new, lines[line - 1].strip()))
    return out


def apply(source, mutant):
    """``source`` with ``mutant`` applied; the operator must be where the mutant says."""
    end = mutant.offset + len(mutant.old)
    if source[mutant.offset:end] != mutant.old:
        raise ValueError(f"{mutant.key}: {mutant.old!r} is not at offset {mutant.offset} (the file changed)")
    return source[:mutant.offset] + mutant.new + source[end:]
