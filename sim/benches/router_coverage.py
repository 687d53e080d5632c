"""Coverage-directed router run: a standalone router in the plain-Verilog fabric harness
(``sim/benches/mesh.py``), ten phases with rewritten route tables, random gaps and random
back-pressure on every port, scoreboarded and cycle-exact against ``models.fabric`` like every
fabric run, then binned from the transfer log (no Python on the per-cycle path).

Bins: input port x output port x color class x back-pressure x fan-out, where

* color class: ``first`` (color 0), ``inner`` (1 .. C-2), ``last`` (C-1): the edges of the
  router's wide per-channel vectors (channel ``k = input * C + color``) where slicing errors show;
* back-pressure: ``stalled`` when the output's ``ready`` was low in the cycle before the
  transfer (the output register held a word or waited), else ``free``;
* fan-out: ``unicast`` (route mask of one port) or ``multicast`` (two or more).

Every bin is reachable in a standalone router (a route may send a color back out of the port it
came in on). The stimulus: in phase ``j`` (0..9) the route of (input ``i``, color ``c``) is
unicast to port ``(i + j // 2 + c) mod 5`` when ``j + c`` is even, else multicast to that port
and the next one (and, for odd ``c``, the one after), so over the ten phases every input sends
every color class both ways to every output.
"""

from arch.ports import NUM_PORTS, Port
from hdl.config import Config
from sim.kit.coverage import Coverage

from .mesh import Scenario, random_timing

__all__ = ["coverage_scenario", "router_coverage", "PHASES"]

PHASES = 10
PORTS = list(Port)


def _color_class(c, colors):
    return "first" if c == 0 else "last" if c == colors - 1 else "inner"


def _mask(i, c, j):
    base = (i + j // 2 + c) % NUM_PORTS
    if (j + c) % 2 == 0:
        return 1 << base
    span = 3 if c % 2 else 2
    return sum(1 << ((base + d) % NUM_PORTS) for d in range(span))


def coverage_scenario(rng, *, colors=4, vc_depth=2, words=96, cycles=6000):
    """The scenario (``Scenario`` of ``sim.benches.mesh``) and its sent wavelets per phase."""
    cfg = Config(num_colors=colors, vc_depth=vc_depth)
    sc = Scenario("router", cfg, 1, 1, cycles, mesh=False)
    random_timing(rng, sc.ports, sc.traffic, max_gap=0.5, max_stall=0.45)
    for p in sc.ports.ports:          # every output stalls now and then, none all the time
        sc.traffic.stall[p] = [rng.random() < 0.3 for _ in range(cycles)]
    sent = {}
    for j in range(PHASES):
        routes = {(0, 0): [[_mask(i, c, j) for i in range(NUM_PORTS)] for c in range(colors)]}
        sc.set_routes(routes)
        inputs = {}
        for i, src in enumerate(sc.ports.inputs):
            inputs[src] = [((i << 24) | (j << 16) | k, rng.randrange(colors), rng.getrandbits(1))
                           for k in range(words)]
        ph = sc.phase(inputs)
        sent[ph] = inputs
    return sc, sent


def router_coverage(sc, sent, log):
    """Coverage report of a run of :func:`coverage_scenario` (``log`` = ``sc.run(...)``)."""
    colors = sc.cfg.num_colors
    cov = Coverage(f"router, {colors} colors",
                   {"input": [p.name for p in PORTS], "output": [p.name for p in PORTS],
                    "color": ["first", "inner", "last"], "backpressure": ["free", "stalled"],
                    "fanout": ["unicast", "multicast"]},
                   note="stalled = the output's ready was low the cycle before the transfer")
    for ph, inputs in sent.items():
        source = {}
        for src, ws in inputs.items():
            for w in ws:
                source[w[0]] = src
        table = sc.routes_history[ph] if hasattr(sc, "routes_history") else None
        for cycle, out, (data, color, _) in log.delivered[ph]:
            src = source[data]
            i = src[2]
            j = ph
            mask = table[color][i] if table else _mask(int(i), color, j)
            stall = sc.traffic.stall.get(out, [])
            bp = "stalled" if 0 < cycle <= len(stall) and stall[cycle - 1] else "free"
            cov.hit(input=Port(i).name, output=Port(out[2]).name, color=_color_class(color, colors),
                    backpressure=bp, fanout="unicast" if bin(mask).count("1") == 1 else "multicast")
    return cov.report()
