"""``python -m sim.system`` (``make sim``): the system simulation.

MemoryX (model) streams bf16 weights into the SwarmX tree RTL, which broadcasts them to N
wafers (RTL PE tiles by default, ``--wafer model`` for the golden kernels); each trains on its
share of scikit-learn's digits; the SwarmX RTL sums the weight gradients in tree order; MemoryX
applies the optimizer. After every step every weight is compared with the golden pipeline model
bit for bit and every phase's cycles with its timing model. The RTL runs under Verilator by
default (one testbench process per phase, ``sim/system/rtl_host.py``), ``--sim icarus`` or
``--sim cocotb``; the flow: ``sim/system/rtl_training.py``; the output: docs/system_simulation.md.
"""

import argparse
import sys
import time
from pathlib import Path

from sim.kit.runner import ROOT
from sim.system.config import OPTIMIZERS, SIMULATORS, SystemRunConfig, default_threads
from sim.system.run import run_system
from sim.system.timeline import draw_timeline


def _ints(text, sep, what):
    try:
        return tuple(int(v) for v in text.split(sep))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: expected integers separated by {sep!r}, got {text!r}") from None


def parse_args(argv):
    d = SystemRunConfig()
    ap = argparse.ArgumentParser(prog="make sim ARGS=... / python -m sim", description=__doc__.splitlines()[0])
    ap.add_argument("--dims", type=lambda t: _ints(t, ",", "--dims"), default=d.dims,
                    help="layer widths, e.g. 64,32,10 (default %(default)s)")
    ap.add_argument("--mesh", type=lambda t: _ints(t.lower(), "x", "--mesh"), default=d.mesh,
                    help="PEs per wafer as PxQ (default 2x2)")
    ap.add_argument("--systems", type=int, default=d.systems, help="wafers N (default %(default)s)")
    ap.add_argument("--batch", type=int, default=d.batch, help="samples per system per step (default %(default)s)")
    ap.add_argument("--steps", type=int, default=d.steps, help="training steps (default %(default)s)")
    ap.add_argument("--optimizer", default=d.optimizer, help=f"{', '.join(OPTIMIZERS)} (default %(default)s)")
    ap.add_argument("--lr", type=float, default=d.lr, help="learning rate (default %(default)s)")
    ap.add_argument("--stall", type=int, default=d.stall,
                    help="random gaps/back-pressure on every SwarmX port, 0..255 (default %(default)s)")
    ap.add_argument("--eval-every", type=int, default=d.eval_every, help="steps between test evaluations")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--wafer", default=d.wafer, choices=("rtl", "model"),
                    help="rtl: RTL wafers of PE tiles (batch must be mesh rows x 4 lanes); model: "
                         "golden wafer kernels, only SwarmX in RTL (default %(default)s)")
    ap.add_argument("--sim", default=d.simulator, choices=SIMULATORS,
                    help="RTL simulator: verilator or icarus (plain-Verilog testbench, one process per "
                         "phase), cocotb (cocotb + Verilator); auto: verilator "
                         "(default %(default)s)")
    ap.add_argument("--preset", default=d.preset, choices=("hardware", "system"),
                    help="RTL configuration: hardware (the PE's fp units pipelined to close timing, "
                         "docs/synthesis.md) or system (combinational fp units) (default %(default)s)")
    ap.add_argument("--threads", type=int, default=default_threads(),
                    help="threads of the Verilator model (--sim verilator; default %(default)s: 2 on a "
                         "machine of two cores or more); the results do not depend on it")
    ap.add_argument("--out", default=str(ROOT / d.out_dir), help="output folder (default build/sim)")
    args = ap.parse_args(argv)
    try:
        run = SystemRunConfig(dims=args.dims, mesh=args.mesh, systems=args.systems, batch=args.batch,
                               steps=args.steps, optimizer=args.optimizer, lr=args.lr, stall=args.stall,
                               eval_every=args.eval_every, seed=args.seed, wafer=args.wafer,
                               simulator=args.sim, preset=args.preset, threads=args.threads,
                               out_dir=str(Path(args.out).resolve()))
        if run.wafer == "rtl":
            from sim.system.rtl import rtl_config
            rtl_config(run)             # the wafer hardware must be able to run it
        return run
    except ValueError as e:
        ap.error(str(e))


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = [s["step"] for s in results["steps"]]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax1.plot(steps, [s["loss"] for s in results["steps"]], label="training loss")
    acc = [(s["step"], s["test_accuracy"]) for s in results["steps"] if "test_accuracy" in s]
    ax1b = ax1.twinx()
    ax1b.plot(*zip(*acc), "o-", color="tab:green", label="held-out accuracy")
    ax1.set_xlabel("step"), ax1.set_ylabel("loss"), ax1b.set_ylabel("accuracy")
    ax1.set_title("training (bit-exact with the golden model)")
    ax1.legend(handles=ax1.get_lines() + ax1b.get_lines(), loc="upper center", bbox_to_anchor=(0.5, -0.14),
               ncol=2, frameon=False)
    if results.get("wafer") == "rtl":
        phases = results["phases"]
        short = {"forward": "fwd", "backward-data": "bwd-data", "backward-weight": "bwd-wgt"}
        labels = [f"L{p['layer']} {short[p['phase']]}" for p in phases]
        xs = range(len(phases))
        ax2.bar([x - 0.2 for x in xs], [p["run_cycles"] for p in phases], 0.4, label="RTL run")
        ax2.bar([x + 0.2 for x in xs], [p["config_cycles"] for p in phases], 0.4,
                label="RTL configuration")
        ax2.set_xticks(list(xs), labels, rotation=20, ha="right")
        ax2.set_ylabel("cycles"), ax2.legend()
        ax2.set_title(f"RTL wafer phases (utilization {results['utilization']:.3f})")
    else:
        phases = results["wafer_model_step"]["phases"]
        labels = [f"L{p['layer']} {p['phase'][:3]}" for p in phases]
        ax2.bar(labels, [p["utilization"] for p in phases])
        ax2.set_ylim(0, 1), ax2.set_ylabel("FMAC utilization (timing model)")
        ax2.set_title("wafer phases")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _print_network(run):
    print(f"  network          {'-'.join(map(str, run.dims))} on digits, {run.systems} systems x batch "
          f"{run.batch}, {run.mesh[0]}x{run.mesh[1]} PEs per wafer, {run.optimizer} lr {run.lr}")


def summary_rtl(run, results, wall):
    steps = results["steps"]
    last = steps[-1]
    accs = [s["test_accuracy"] for s in steps if "test_accuracy" in s]
    hw = results["hardware"]
    print("\nweightstream system simulation (RTL wafers)")
    _print_network(run)
    print(f"  RTL in the loop  {run.mesh[1]} SwarmX trees (one per mesh column) + {run.systems} wafers of "
          f"{run.mesh[0]}x{run.mesh[1]} PE "
          f"tiles ({hw['lanes']} lanes, {hw['sram_words']} SRAM words, {hw['num_colors']} colors) "
          f"under {SIM_NAMES[results['simulator']]}; MemoryX and the host are Python")
    if len(steps) <= 20:
        print("  loss per step    " + " ".join(f"{s['loss']:.3f}" for s in steps))
    else:
        print(f"  loss             {steps[0]['loss']:.3f} (step 1), then every {run.eval_every} steps: "
              + " ".join(f"{s['loss']:.3f}" for s in steps if "test_accuracy" in s))
    print(f"  held-out acc     {accs[0]:.3f} -> {accs[-1]:.3f} ({len(accs)} evaluations: "
          + " ".join(f"{a:.2f}" for a in accs) + ")")
    print("  bit-exact        loss and every master weight equal to the golden pipeline model "
          "after every step")
    print(f"  cycles per phase (step {last['step']}), RTL vs the schedule's timing model "
          f"(models.pipeline.rtl_schedule; formula: no contention; lanes: FMAC lane-cycles busy "
          f"of the run):")
    print(f"    {'':24} {'config':>6} {'model':>6}   {'run':>6} {'model':>6} {'formula':>7}   "
          f"{'lanes':>5}   weights streamed in")
    for p in results["phases"]:
        stream = f"{p['stream_cycles']}" if p["stream_cycles"] else "-"
        print(f"    layer {p['layer']} {p['phase']:<16} {p['config_cycles']:6d} "
              f"{p['model_config_cycles']:6d}   {p['run_cycles']:6d} {p['model_run_cycles']:6d} "
              f"{p['model_run_formula']:7d}   {p['lane_utilization']:5.3f}   {stream}")
    config = sum(p["config_cycles"] for p in results["phases"])
    print(f"  step             {last['cycles']} cycles, FMAC lane utilization "
          f"{results['utilization']:.3f}, configuration {config} cycles "
          f"({config / last['cycles']:.1%} of the step)")
    tl = results["timeline"]
    print(f"  with MemoryX     {tl['overlap']['step_cycles']} cycles per step with the seed's overlap "
          f"(MemoryX exposed {tl['overlap']['memoryx_exposed_cycles']}), "
          f"{tl['no_overlap']['step_cycles']} without ({tl['no_overlap']['memoryx_exposed_cycles']}): "
          f"timeline.png")
    speed = f"{results['cycles_per_second']:,.0f} cycles/s with the host"
    if "cycles_per_cpu_second" in results:
        speed += (f", {results['cycles_per_cpu_second']:,.0f} cycles/CPU-s in the simulator "
                  f"({results['pe_cycles_per_cpu_second']:,.0f} PE-cycles/CPU-s: "
                  f"{results['simulated_pe_tiles']} PE tiles)")
    if "simulator_phases" in results:
        threads = results.get("simulator_threads", 1)
        speed += (f" ({results['simulator_phases']} phases in one process"
                  + (f" of {threads} threads" if threads > 1 else "") + ")")
    print(f"  simulation       {results['simulated_cycles']} RTL cycles, {speed}; wall {wall:.1f} s")
    print(f"  outputs          {Path(run.out_dir) / 'results.json'}, loss.png, timeline.png, "
          f"weights.safetensors")


SIM_NAMES = {"verilator": "Verilator", "icarus": "Icarus", "cocotb+icarus": "cocotb + Icarus",
             "cocotb+verilator": "cocotb + Verilator"}


def summary(run, results, wall):
    if results.get("wafer") == "rtl":
        return summary_rtl(run, results, wall)
    steps = results["steps"]
    last = steps[-1]
    accs = [s["test_accuracy"] for s in steps if "test_accuracy" in s]
    model = results["wafer_model_step"]
    print("\nweightstream system simulation")
    _print_network(run)
    print(f"  RTL in the loop  SwarmX tree ({results['swarmx_depth']} level(s), fp32_add latency "
          f"{results['adder_latency']}) under {SIM_NAMES[results['simulator']]}; MemoryX, host and wafers "
          "are golden models")
    print(f"  loss             {steps[0]['loss']:.4f} (step 1) -> {last['loss']:.4f} (step {last['step']})")
    print(f"  held-out acc     {accs[0]:.3f} -> {accs[-1]:.3f} ({len(accs)} evaluations)")
    print("  bit-exact        every master weight equal to the golden pipeline model after every step")
    print(f"  SwarmX cycles    broadcast {last['swarmx_broadcast_cycles']} (model "
          f"{last['model_broadcast_cycles']}), reduce {last['swarmx_reduce_cycles']} (model "
          f"{last['model_reduce_cycles']}) for {results['words_per_phase']} words")
    print(f"  wafer (model)    {model['wafer_cycles']} cycles per step, utilization {model['utilization']:.3f}")
    print(f"  simulation       {results['simulated_cycles']} RTL cycles, "
          f"{results['cycles_per_second']:,.0f} cycles/s in phases; wall {wall:.1f} s")
    print(f"  outputs          {Path(run.out_dir) / 'results.json'}, loss.png, weights.safetensors")


def main(argv=None):
    run = parse_args(argv)
    start = time.perf_counter()
    results = run_system(run, console=True, run_name="make-sim")
    plot(results, Path(run.out_dir) / "loss.png")
    if results.get("wafer") == "rtl":
        draw_timeline(results["timeline"], Path(run.out_dir) / "timeline.png")
    summary(run, results, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
