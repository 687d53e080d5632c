"""``python -m models.pipeline [--config FILE] [--out DIR]``: the design answers of the timing model.

Reads a TOML configuration (example and reference: ``bench/configs/scaling.toml``), computes

* utilization of a training step against layer size and mesh size, and against batch size,
* the per-layer phases of each network (row bound, cycles, utilization),
* step time and scaling efficiency for N = 1..192 systems, weak (fixed batch per system) and
  strong (fixed global batch),
* the utilization of each network under named parameter variants (design alternatives),

prints the tables, and writes ``pipeline.json`` and PNG plots (matplotlib) into ``--out``.
"""

import argparse
import json
import sys
import tomllib
from pathlib import Path

from .timing import TimingError, TimingParams, scaling, step_timing

__all__ = ["load_config", "analyse", "write_plots", "main", "DEFAULT_CONFIG"]

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = ROOT / "bench" / "configs" / "scaling.toml"
_SECTIONS = {"params", "utilization", "scaling", "variants"}


class ConfigFileError(ValueError):
    """The configuration file is malformed (the message names the key)."""


def _get(table, key, kind, where):
    if key not in table:
        raise ConfigFileError(f"{where}: missing key {key!r}")
    v = table[key]
    ok = (isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v)
          if kind == "ints" else isinstance(v, int) and not isinstance(v, bool) and v > 0 if kind == "int"
          else isinstance(v, str) and v)
    if not ok:
        rule = {"ints": "a non-empty list of positive ints", "int": "a positive int"}.get(kind, "a non-empty string")
        raise ConfigFileError(f"{where}.{key} must be {rule}, got {v!r}")
    return v


def load_config(path):
    """Parse and validate a configuration file: ``(params, config dict)``."""
    path = Path(path)
    try:
        cfg = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigFileError(f"configuration file {path} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigFileError(f"{path}: {e}") from None
    unknown = set(cfg) - _SECTIONS
    if unknown:
        raise ConfigFileError(f"{path}: unknown section(s) {', '.join(sorted(unknown))}; "
                              f"known: {', '.join(sorted(_SECTIONS))}")
    try:
        params = TimingParams(**cfg.get("params", {}))
    except TypeError as e:
        raise ConfigFileError(f"{path} [params]: {e}") from None
    util = cfg.get("utilization", {})
    for key in ("layer_sizes", "meshes", "batches"):
        _get(util, key, "ints", "[utilization]")
    for key in ("layers", "batch", "batch_layer"):
        _get(util, key, "int", "[utilization]")
    sc = cfg.get("scaling", {})
    systems = _get(sc, "systems", "ints", "[scaling]")
    if max(systems) > 192:
        raise ConfigFileError(f"[scaling].systems must be <= 192 (SwarmX leaves), got {max(systems)}")
    nets = sc.get("network")
    if not isinstance(nets, list) or not nets:
        raise ConfigFileError("[scaling]: need at least one [[scaling.network]]")
    for i, net in enumerate(nets):
        where = f"[[scaling.network]] #{i}"
        _get(net, "name", "str", where)
        dims = _get(net, "dims", "ints", where)
        if len(dims) < 2:
            raise ConfigFileError(f"{where}.dims needs >= 2 entries, got {dims}")
        _get(net, "batch", "int", where)
        if "global_batch" in net:
            _get(net, "global_batch", "int", where)
    variants = cfg.get("variants", [])
    if not isinstance(variants, list):
        raise ConfigFileError("variants must be an array of tables ([[variants]])")
    for i, v in enumerate(variants):
        where = f"[[variants]] #{i}"
        _get(v, "name", "str", where)
        try:
            params.replace(**v.get("params", {}))
        except (TimingError, TypeError) as e:
            raise ConfigFileError(f"{where} ({v['name']}): {e}") from None
    return params, cfg


def _phase_rows(st):
    return [[p.phase, p.layer, f"{p.m}x{p.k}", p.bound, round(p.row_cycles, 2), p.exposed_fill_cycles,
             p.stream_cycles, p.drain_cycles, p.cycles, round(p.utilization, 4)] for p in st.forward + st.backward]


def analyse(params, cfg):
    """All answers as ``{"tables": [...], "utilization": ..., "scaling": ...}`` (JSON-ready)."""
    util = cfg["utilization"]
    tables = []
    meshes, sizes = util["meshes"], util["layer_sizes"]
    grid = []
    for size in sizes:
        dims = [size] * (util["layers"] + 1)
        grid.append([step_timing(dims, util["batch"], 1, params.replace(mesh_rows=m, mesh_cols=m)).utilization
                     for m in meshes])
    tables.append({"title": f"Step utilization: {util['layers']} square layers, batch {util['batch']}/system, "
                            f"{params.lanes} lanes, {params.weight_words_per_cycle:g} weight words/cycle",
                   "columns": ["layer M=K"] + [f"{m}x{m} PEs" for m in meshes],
                   "rows": [[s] + [round(u, 4) for u in row] for s, row in zip(sizes, grid)]})
    bdims = [util["batch_layer"]] * (util["layers"] + 1)
    batch_rows = []
    for b in util["batches"]:
        st = step_timing(bdims, b, 1, params)
        bounds = sorted({p.bound for p in st.forward + st.backward})
        batch_rows.append([b, st.cycles, round(st.utilization, 4), ",".join(bounds)])
    tables.append({"title": f"Utilization against batch: {util['layers']} layers {util['batch_layer']}^2 on "
                            f"{params.mesh_rows}x{params.mesh_cols} PEs",
                   "columns": ["batch/system", "step cycles", "utilization", "row bounds"], "rows": batch_rows})
    nets = []
    systems = cfg["scaling"]["systems"]
    for net in cfg["scaling"]["network"]:
        st = step_timing(net["dims"], net["batch"], 1, params)
        tables.append({"title": f"{net['name']}: phases on one system (batch {net['batch']}); step {st.cycles} "
                                f"cycles, utilization {st.utilization:.4f}, exposed weight load "
                                f"{st.exposed_weight_load_cycles}, exposed MemoryX {st.memoryx_exposed_cycles}",
                       "columns": ["phase", "layer", "MxK", "bound", "cycles/row", "exposed fill", "stream",
                                   "drain", "cycles", "utilization"],
                       "rows": _phase_rows(st)})
        weak = scaling(net["dims"], net["batch"], systems, params)
        strong = scaling(net["dims"], net["global_batch"], systems, params, strong=True) \
            if "global_batch" in net else None
        rows = []
        for i, w in enumerate(weak):
            row = [w["systems"], w["swarmx_depth"], w["step_cycles"], round(w["samples_per_cycle"] * 1e6, 2),
                   round(w["efficiency"], 6)]
            if strong:
                s = strong[i]
                row += [s["batch_per_system"], s["step_cycles"], round(s["efficiency"], 4)]
            rows.append(row)
        cols = ["N", "depth", "step cycles", "samples/Mcycle", "weak eff."]
        if strong:
            cols += ["strong: batch/sys", "step cycles", "strong eff."]
        tables.append({"title": f"{net['name']} {net['dims']}: scaling over N systems (weak: batch "
                                f"{net['batch']}/system"
                                + (f"; strong: global batch {net['global_batch']})" if strong else ")"),
                       "columns": cols, "rows": rows})
        nets.append({"name": net["name"], "dims": net["dims"], "batch": net["batch"],
                     "global_batch": net.get("global_batch"), "phases": _phase_rows(st),
                     "step_cycles": st.cycles, "utilization": st.utilization,
                     "exposed_weight_load": st.exposed_weight_load_cycles,
                     "memoryx_exposed": st.memoryx_exposed_cycles, "weak": weak, "strong": strong})
    variant_rows = []
    for v in cfg.get("variants", []):
        vp = params.replace(**v.get("params", {}))
        row = [v["name"]]
        for net in cfg["scaling"]["network"]:
            row.append(round(step_timing(net["dims"], net["batch"], 1, vp).utilization, 4))
        variant_rows.append(row)
    if variant_rows:
        tables.append({"title": "Step utilization of each network (one system) under parameter variants",
                       "columns": ["variant"] + [n["name"] for n in cfg["scaling"]["network"]],
                       "rows": variant_rows})
    return {"params": params.as_dict(), "tables": tables, "variants": variant_rows,
            "utilization": {"meshes": meshes, "layer_sizes": sizes, "grid": grid, "batch": batch_rows},
            "scaling": nets}


def write_plots(result, out):
    """PNG plots of :func:`analyse`'s result into ``out``; returns the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    u = result["utilization"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for j, m in enumerate(u["meshes"]):
        ax.plot(u["layer_sizes"], [row[j] for row in u["grid"]], marker="o", label=f"{m}x{m} PEs")
    ax.set(xscale="log", xlabel="layer size M = K", ylabel="step utilization", ylim=(0, 1.05),
           title="Utilization against layer and mesh size")
    ax.set_xticks(u["layer_sizes"], [str(s) for s in u["layer_sizes"]], rotation=45)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(out / "utilization.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    for kind, ylabel in (("weak", "weak-scaling efficiency"), ("strong", "strong-scaling efficiency")):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for net in result["scaling"]:
            rows = net[kind]
            if rows:
                ax.plot([r["systems"] for r in rows], [r["efficiency"] for r in rows], marker="o", label=net["name"])
        ax.set(xscale="log", xlabel="systems N", ylabel=ylabel, ylim=(0, 1.05),
               title=f"{kind.capitalize()} scaling, 1 to 192 systems through SwarmX")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        paths.append(out / f"scaling_{kind}.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for net in result["scaling"]:
        rows = net["weak"]
        ax.plot([r["systems"] for r in rows], [r["samples_per_cycle"] for r in rows], marker="o", label=net["name"])
    ax.set(xscale="log", yscale="log", xlabel="systems N", ylabel="samples (tokens) per cycle",
           title="Throughput, fixed batch per system")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(out / "throughput.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return [str(p) for p in paths]


def print_tables(tables, file=None):
    file = file if file is not None else sys.stdout
    for t in tables:
        print(f"\n{t['title']}", file=file)
        rows = [[str(c) for c in t["columns"]]] + [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in r]
                                                  for r in t["rows"]]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for k, r in enumerate(rows):
            print("  ".join(c.rjust(w) for c, w in zip(r, widths)), file=file)
            if k == 0:
                print("  ".join("-" * w for w in widths), file=file)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m models.pipeline", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=str(DEFAULT_CONFIG), help="TOML configuration (default: %(default)s)")
    ap.add_argument("--out", default=str(ROOT / "build" / "pipeline"), help="output folder (default: %(default)s)")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    args = ap.parse_args(argv)
    try:
        params, cfg = load_config(args.config)
        result = analyse(params, cfg)
    except (ConfigFileError, TimingError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_tables(result["tables"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.no_plots:
        result["plots"] = write_plots(result, out)
    (out / "pipeline.json").write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out / 'pipeline.json'}" + (f" and {len(result['plots'])} plots" if "plots" in result else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
