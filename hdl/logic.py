"""Small combinational building blocks the blocks share: reductions and one-hot selection (written
out so that the tools see trees of LUTs, not carry chains or priority multiplexers)."""

from amaranth import Cat, Const

__all__ = ["or_all", "and_all", "or_tree", "and_or", "onehot_index", "two_or_more"]


def or_all(values):
    """OR of ``values`` (a chain: the tools balance it); 0 when there are none."""
    values = list(values)
    if not values:
        return Const(0)
    acc = values[0]
    for v in values[1:]:
        acc = acc | v
    return acc


def and_all(values):
    """AND of ``values``."""
    values = list(values)
    acc = values[0]
    for v in values[1:]:
        acc = acc & v
    return acc


def or_tree(values, width):
    """OR of ``values`` (each ``width`` bits) as a balanced tree."""
    values = list(values)
    if not values:
        return Const(0, width)
    while len(values) > 1:
        values = [values[i] | values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def and_or(select, words, width):
    """OR of ``words[k]`` (each ``width`` bits) over the set bits ``k`` of ``select``."""
    return or_tree((w & select[k].replicate(width) for k, w in enumerate(words)), width)


def onehot_index(select, values, width):
    """``values[k]`` for the one set bit ``k`` of ``select`` (0 when none), as AND-OR: bit ``b`` of
    the result is the OR of the ``select`` bits whose value has bit ``b`` set."""
    bits = []
    for b in range(width):
        terms = [select[k] for k, v in enumerate(values) if (v >> b) & 1]
        bits.append(Cat(terms).any() if terms else Const(0))
    return Cat(bits)


def two_or_more(bits):
    """Whether at least two bits of ``bits`` are set, as a tree: two halves have two or more when
    either has or both have one (``bits & (bits - 1)`` would be a carry chain, a prefix a chain)."""
    def node(lo, n):        # (any, two or more) of bits[lo:lo + n]
        if n == 1:
            return bits[lo], Const(0)
        a_any, a_two = node(lo, n // 2)
        b_any, b_two = node(lo + n // 2, n - n // 2)
        return a_any | b_any, a_two | b_two | (a_any & b_any)
    return node(0, len(bits))[1]
