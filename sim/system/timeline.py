"""Timeline of one training step of the RTL system (``make sim`` writes ``timeline.png`` and the
numbers into ``results.json``): the wafer phases as the RTL ran them, SwarmX's broadcast and
reduce, and MemoryX's stream-out and optimizer update from its timing model, once with the seed's
overlap and once without it.

Lanes (cycles from the start of the step's first phase):

* **wafers**: every phase's configuration then its run, back to back (the last step's RTL cycles);
* **SwarmX**: *broadcast* while a forward or backward-data phase streams its weights (its
  ``stream_cycles`` from the run's start); *reduce* over a backward-weight phase's run (its
  gradient words climb the tree while the run lasts);
* **MemoryX**: *stream-out* of the weights the broadcast carries; *update* of layer ``l``:
  ``M K`` parameters at ``update_bytes_per_parameter / memoryx_update_bytes_per_cycle`` cycles
  each (:class:`models.pipeline.timing.TimingParams`, the rule of
  :func:`models.pipeline.timing.step_timing`), one layer at a time in gradient arrival order.
  With overlap (the seed) layer ``l``'s update starts when its gradient is in (the end of its
  backward-weight run), while the wafers run the layers below; without, after the last backward
  phase. The next step's first weight stream (layer 0) waits until layer 0 is updated plus
  ``memoryx_update_latency``: the step's length is the start of that stream minus the start of
  this step's, and the wait is the *exposed* MemoryX time.
"""

import math

__all__ = ["step_timeline", "draw_timeline"]

_SHORT = {"forward": "fwd", "backward-data": "bwd-data", "backward-weight": "bwd-wgt"}
_COLORS = {"config": "#b0b0b0", "forward": "#4c72b0", "backward-data": "#dd8452",
           "backward-weight": "#55a868", "broadcast": "#8172b3", "reduce": "#937860",
           "stream-out": "#8172b3", "update": "#c44e52", "wait": "#ffffff"}


def _segment(lane, kind, label, start, length):
    return {"lane": lane, "kind": kind, "label": label, "start": int(start), "cycles": int(length)}


def step_timeline(phases, dims, params):
    """``{"overlap": ..., "no_overlap": ...}``, each ``{"segments": [...], "step_cycles",
    "memoryx_exposed_cycles", "update_cycles": {layer: cycles}}``; ``phases``: the step's phase
    records (``results["phases"]``: ``phase``, ``layer``, ``config_cycles``, ``run_cycles``,
    ``stream_cycles``), ``params``: the :class:`~models.pipeline.timing.TimingParams` of the
    MemoryX rates."""
    wafer, swarmx, stream_out, arrivals = [], [], [], []
    t = 0
    first_run = None
    for p in phases:
        name = f"L{p['layer']} {_SHORT[p['phase']]}"
        wafer.append(_segment("wafers", "config", "", t, p["config_cycles"]))
        t += p["config_cycles"]
        first_run = t if first_run is None else first_run
        wafer.append(_segment("wafers", p["phase"], name, t, p["run_cycles"]))
        if p["phase"] == "backward-weight":
            swarmx.append(_segment("SwarmX", "reduce", f"reduce L{p['layer']}", t, p["run_cycles"]))
            arrivals.append((p["layer"], t + p["run_cycles"]))
        elif p["stream_cycles"]:
            swarmx.append(_segment("SwarmX", "broadcast", f"W L{p['layer']}", t, p["stream_cycles"]))
            stream_out.append(_segment("MemoryX", "stream-out", f"W L{p['layer']}", t, p["stream_cycles"]))
        t += p["run_cycles"]
    wafer_end = t
    work = {layer: math.ceil(dims[layer + 1] * dims[layer] * params.update_bytes_per_parameter
                             / params.memoryx_update_bytes_per_cycle) for layer, _ in arrivals}
    first_cfg = phases[0]["config_cycles"]
    out = {}
    for key, overlap in (("overlap", True), ("no_overlap", False)):
        engine, updates = 0, []
        for layer, done in arrivals:
            begin = max(done if overlap else arrivals[-1][1], engine)
            engine = begin + work[layer]
            updates.append(_segment("MemoryX", "update", f"upd L{layer}", begin, work[layer]))
        ready = engine + params.memoryx_update_latency
        next_run = max(wafer_end + first_cfg, ready)
        nxt = [_segment("wafers", "config", "", wafer_end, first_cfg),
               _segment("wafers", "wait", "wait", wafer_end + first_cfg, next_run - wafer_end - first_cfg),
               _segment("wafers", "forward", "next L0 fwd", next_run, phases[0]["run_cycles"])]
        out[key] = {"segments": wafer + nxt + swarmx + stream_out + updates,
                    "step_cycles": next_run - first_run,
                    "memoryx_exposed_cycles": next_run - wafer_end - first_cfg,
                    "update_cycles": {str(layer): c for layer, c in work.items()}}
    return out


def draw_timeline(timeline, path):
    """Two Gantt panels (with / without overlap) on one cycle axis, saved as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.patches
    import matplotlib.pyplot as plt
    lanes = ["MemoryX", "SwarmX", "wafers"]
    span = max(s["start"] + s["cycles"] for tl in timeline.values() for s in tl["segments"])
    fig, axes = plt.subplots(2, 1, figsize=(12, 5), sharex=True)
    for ax, (key, title) in zip(axes, (("overlap", "with the seed's overlap (update of layer l while "
                                                   "the wafers run the layers below)"),
                                        ("no_overlap", "without overlap (updates after the backward pass)"))):
        tl = timeline[key]
        short = 0
        for s in tl["segments"]:
            if s["cycles"] <= 0:
                continue
            y = lanes.index(s["lane"])
            ax.barh(y, s["cycles"], left=s["start"], height=0.6, color=_COLORS[s["kind"]],
                    edgecolor="black" if s["kind"] == "wait" else "none",
                    hatch="//" if s["kind"] == "wait" else None, linewidth=0.5)
            if s["label"] and s["cycles"] > 0.04 * span:
                ax.text(s["start"] + s["cycles"] / 2, y, s["label"], ha="center", va="center",
                        fontsize=7, color="white" if s["kind"] != "wait" else "black")
            elif s["kind"] == "update":           # short: its cycles beside it, above or below
                up = short % 2 == 0
                short += 1
                ax.text(s["start"] + s["cycles"], y + (0.1 if up else -0.1), f" {s['label']} ({s['cycles']})",
                        ha="left", va="bottom" if up else "top", fontsize=7)
        ax.set_yticks(range(len(lanes)), lanes)
        ax.set_title(f"{title}: step {tl['step_cycles']} cycles, MemoryX exposed "
                     f"{tl['memoryx_exposed_cycles']}", fontsize=9)
    kinds = ["config", "forward", "backward-data", "backward-weight", "broadcast", "reduce", "update"]
    axes[0].legend(handles=[matplotlib.patches.Patch(color=_COLORS[k], label=k) for k in kinds],
                   loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(kinds), fontsize=7,
                   frameon=False)
    axes[-1].set_xlabel("cycles (wafer phases: RTL; MemoryX update: timing model)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
