"""Programs on the RTL: :func:`run_rtl` runs programs of one configuration in one simulator process (the
cocotb test :func:`sim.pe_fuzz.batch.run_batch`) and returns their results (``_run_program`` there states
their form); :func:`model_results` makes results of that form, without cycles, from the golden model."""

import json
import os
import shutil
import threading
from collections import Counter
from pathlib import Path

from arch.config_bus import WORD_MASK
from arch.pe_map import STATUS, status_base
from arch.wavelet import pack_wavelet
from sim.pe_fuzz.configs import config_name, drain_cycles, make_config
from sim.pe_fuzz.model import expect

# Batch and result files, replays (``WS_PE_FUZZ_KEEP=1`` keeps the batch and result files and the
# simulator's run folder of every batch).
WORK = Path(__file__).resolve().parents[2] / "build" / "pe_fuzz"
_runs = Counter()
_lock = threading.Lock()


def bench_form(prog, exp):
    """The program as :func:`sim.pe_fuzz.batch.run_batch` runs it: wavelets packed, and per step what the
    model says the bench waits for (``expect_tx`` words out, ``vec_cycles``) and a cycle limit (a hang)."""
    steps, tx0, vec0 = [], 0, 0
    slow = 1 / (1 - max(prog["gap"], prog["gap2"], prog["stall"]))
    for s, e in zip(prog["steps"], exp["steps"]):
        n_in = len(s["wavelets"]) + len(s["wavelets2"])
        new_tx, new_vec = e["expect_tx"] - tx0, (e["vec_cycles"] - vec0) & WORD_MASK
        tx0, vec0 = e["expect_tx"], e["vec_cycles"]
        limit = int(400 + 2 * (len(s["writes"]) + len(s["reads"])) + slow * (20 * (n_in + new_tx) + 12 * new_vec))
        steps.append({"writes": s["writes"], "reads": s["reads"], "bg_reads": s.get("bg_reads", []),
                      "expect_tx": e["expect_tx"], "vec_cycles": e["vec_cycles"], "limit": limit,
                      "wavelets": [pack_wavelet(d, c, x[0] if x else 0) for c, d, *x in s["wavelets"]],
                      "wavelets2": [pack_wavelet(d, c, x[0] if x else 0) for c, d, *x in s["wavelets2"]]})
    return {"seed": prog["seed"], "gap": prog["gap"], "gap2": prog["gap2"], "stall": prog["stall"], "steps": steps}


def run_rtl(progs, exps=None, *, name="run"):
    """Run ``progs`` (one configuration) on the RTL in one simulator process (the runner's choice for
    ``pe_core``; ``WS_SIM`` switches); their results, in order. ``exps``: their
    :func:`sim.pe_fuzz.model.expect` (computed when not given); ``name`` names the run folder."""
    from hdl.pe.core import PeCore
    from sim.kit.runner import config_verilog, run_bench
    if not progs:
        return []
    spec = progs[0]["config"]
    assert all(p["config"] == spec for p in progs), "one configuration per batch"
    cfg = make_config(spec)
    exps = exps or [expect(p) for p in progs]
    with _lock:
        _runs[name] += 1
        n = _runs[name]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    run_name = f"pe_fuzz-{name}-{config_name(spec)}-{worker}-{os.getpid()}-{n}"
    folder = WORK / run_name
    folder.mkdir(parents=True, exist_ok=True)
    batch = {"programs": [bench_form(p, e) for p, e in zip(progs, exps)], "drain": drain_cycles(cfg),
             "poll_addr": status_base(cfg.sram_words, cfg.num_tasks) + STATUS["VEC_CYCLES"]}
    (folder / "batch.json").write_text(json.dumps(batch))
    out = folder / "results.json"
    out.unlink(missing_ok=True)
    test_dir = run_bench(config_verilog("pe_core", cfg, PeCore), "pe_core", "sim.pe_fuzz.batch",
                         params={"batch": str(folder / "batch.json"), "out": str(out)}, run_name=run_name)
    results = json.loads(out.read_text())["results"]
    if not os.environ.get("WS_PE_FUZZ_KEEP"):         # a run that failed keeps its folders (the log)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(test_dir, ignore_errors=True)
    return results


def model_results(progs, model_cls=None):
    """Results of ``progs`` in :func:`run_rtl`'s form made by the golden model (``model_cls``, default
    :class:`sim.pe_fuzz.model.FuzzModel`), without cycles: a stand-in for the RTL."""
    out = []
    for p in progs:
        e = expect(p, model_cls)
        out.append({"tx": [pack_wavelet(d, c) for c, d in e["out"]], "tx_cycles": [], "rx": [], "rx_wait": [],
                    "rx2": [], "rx2_wait": [], "write_cycles": [], "stalls": "", "timeout": None, "cycles": 0,
                    "reads": [x["reads"] for x in e["steps"]], "faults": [x["fault"] for x in e["steps"]],
                    "bg_reads": [x["bg_reads"] for x in e["steps"]]})
    return out
