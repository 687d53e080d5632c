"""Scoreboards: compare what a DUT produced with what its golden model expects."""

from collections import defaultdict, deque

__all__ = ["InOrderScoreboard", "KeyedScoreboard"]


class InOrderScoreboard:
    """Items must arrive exactly in the expected order; nothing extra, nothing missing."""

    def __init__(self, name, fmt=hex):
        self.name = name
        self.fmt = fmt
        self.expected = deque()
        self.matched = 0

    def expect(self, items):
        self.expected.extend(items)

    def got(self, item):
        if not self.expected:
            raise AssertionError(f"{self.name}: unexpected extra item {self.fmt(item)} "
                                 f"after {self.matched} matched")
        want = self.expected.popleft()
        if item != want:
            raise AssertionError(f"{self.name}: item {self.matched}: got {self.fmt(item)}, "
                                 f"expected {self.fmt(want)}")
        self.matched += 1

    def check_done(self):
        if self.expected:
            raise AssertionError(f"{self.name}: {len(self.expected)} expected item(s) never arrived; "
                                 f"next is {self.fmt(self.expected[0])} ({self.matched} matched)")


class KeyedScoreboard:
    """Per-key in-order streams (e.g. per (source, color) flow): order kept within each key,
    any interleaving across keys."""

    def __init__(self, name, fmt=repr):
        self.name = name
        self.fmt = fmt
        self.flows = defaultdict(lambda: InOrderScoreboard("", fmt))

    def expect(self, key, items):
        self.flows[key].expect(items)

    def got(self, key, item):
        flow = self.flows.get(key)
        if flow is None:
            raise AssertionError(f"{self.name}: item {self.fmt(item)} on unexpected flow {key!r}")
        flow.name = f"{self.name} flow {key!r}"
        flow.got(item)

    @property
    def matched(self):
        return sum(flow.matched for flow in self.flows.values())

    def check_done(self):
        missing = {k: len(f.expected) for k, f in self.flows.items() if f.expected}
        if missing:
            raise AssertionError(f"{self.name}: expected items never arrived, per flow: {missing}")
