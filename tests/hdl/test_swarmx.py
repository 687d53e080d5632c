"""SwarmX RTL: the cocotb benches (tree for N = 1, 2, 4, 7, 16 and a split node; the deep trees
N = 20, depth 3, and N = 65, depth 4, in the memory-backed harness; N = 192 in ``make bench``)
and the structural contracts (tree shape, ports, parameter checks)."""

import json
import re

import pytest

from hdl.config import Config
from hdl.fp.fp32_add import Fp32Add
from hdl.swarmx import SwarmxNode, SwarmxReduceUnit, SwarmxTree, tree_shape
from hdl.tops import build_top
from hdl.verilog import verilog_text
from models.swarmx import SwarmxTiming, node_children, node_reduce_latency, tree_depth
from sim.harness.swarmx_system import SwarmxSystemHarness
from sim.kit.runner import cached_verilog, compare_simulators, run_bench, top_verilog

# Words per random run: the per-cycle Python cost grows with the number of streams.
WORDS = {1: 1500, 2: 1200, 4: 1000, 7: 700, 16: 400}


@pytest.mark.parametrize("leaves", [1, 2, 4, 7, 16])
def test_swarmx_tree_bench(leaves):
    cfg = Config(swarmx_leaves=leaves)
    run_bench(top_verilog("swarmx", cfg), "swarmx", "sim.benches.swarmx",
              params={"leaves": leaves, "fifo_depth": cfg.swarmx_fifo_depth,
                      "adder_latency": Fp32Add.LATENCY, "words": WORDS[leaves], "full_words": 64})


def test_swarmx_split_node_bench():
    run_bench(cached_verilog("swarmx_split", SwarmxNode, 4, split=True, fifo_depth=4), "swarmx_split",
              "sim.benches.swarmx",
              params={"leaves": 4, "split": 1, "fifo_depth": 4,
                      "adder_latency": Fp32Add.LATENCY, "words": 400, "full_words": 64})


def test_swarmx_shallow_fifo_bench():
    """The least legal child FIFO depth (2) still runs at one word per cycle."""
    run_bench(cached_verilog("swarmx", SwarmxTree, 7, fifo_depth=2), "swarmx", "sim.benches.swarmx",
              params={"leaves": 7, "fifo_depth": 2, "adder_latency": Fp32Add.LATENCY,
                      "words": 200, "full_words": 48}, testcase=["random_traffic", "full_rate"])


def run_deep_tree(leaves, words, *, run_name=None):
    """The reduced deep-tree bench (``sim/benches/swarmx_deep.py``); returns its run folder."""
    return run_bench(cached_verilog("swarmx_deep", SwarmxSystemHarness, leaves, words), "swarmx_deep",
                     "sim.benches.swarmx_deep",
                     params={"leaves": leaves, "words": words, "adder_latency": Fp32Add.LATENCY, "stall": 96},
                     run_name=run_name)


# Depth 3 and the smallest depth-4 tree; N = 192 (the seed's deployment, ~2 min, mostly elaboration)
# runs the same bench in ``make bench ARGS=swarmx``.
@pytest.mark.parametrize("leaves, depth", [(20, 3), (65, 4)])
def test_swarmx_deep_tree_bench(leaves, depth):
    """Depth 3 and 4 in RTL: broadcast order, tree-order sums bit for bit, latency = depth x node
    (checked in the bench against ``SwarmxTiming``), with and without stalls."""
    assert SwarmxTiming(leaves, Fp32Add.LATENCY).depth == depth == len(tree_shape(leaves))
    test_dir = run_deep_tree(leaves, 48 if leaves < 64 else 24)
    stats = json.loads((test_dir / "stats.json").read_text())
    assert stats["depth"] == depth
    assert stats["reduce_latency"] == depth * SwarmxNode.reduce_latency()
    hits = json.loads((test_dir / "coverage.json").read_text())["hits"]
    bins = {(h["leaf"], h["dir"], h["last"], h["backpressure"]) for h in hits}
    assert len(bins) == leaves * 2 * 2 * 2, "a leaf x direction x last x back-pressure bin stayed empty"


def test_swarmx_deeper_adders_bench():
    """Config.fp_latency = 4: the reduce units' adders, output FIFOs and credits follow it, and
    the tree still matches the cycle model (adder_latency 4) at one word per cycle."""
    cfg = Config(swarmx_leaves=7, fp_latency=4)
    tree = build_top("swarmx", cfg)
    assert tree.reduce_latency == tree_depth(7) * node_reduce_latency(4)
    run_bench(top_verilog("swarmx", cfg), "swarmx", "sim.benches.swarmx",
              params={"leaves": 7, "fifo_depth": cfg.swarmx_fifo_depth, "adder_latency": 4,
                      "words": 300, "full_words": 48})


@pytest.mark.parametrize("leaves", [1, 2, 3, 4, 5, 7, 16, 17, 64, 65, 192])
def test_tree_shape_matches_model(leaves):
    assert tree_shape(leaves) == node_children(leaves)
    tree = SwarmxTree(leaves)
    tree._MustUse__silence = True       # inspected, not elaborated (Amaranth's unused-warning switch)
    assert tree.depth == tree_depth(leaves)
    assert tree.reduce_latency == tree_depth(leaves) * node_reduce_latency(Fp32Add.LATENCY)
    assert tree.broadcast_latency == tree_depth(leaves)


def test_unit_latency_constants():
    assert SwarmxReduceUnit.FIFO_DEPTH == Fp32Add.LATENCY + 2
    assert SwarmxNode.reduce_latency(split=True) == node_reduce_latency(Fp32Add.LATENCY, split=True)


def test_top_ports_follow_design_section_8():
    text = verilog_text(build_top("swarmx", Config(swarmx_leaves=16)), "swarmx")
    assert re.search(r"^module swarmx\(", text, re.M)
    ports = set(re.findall(r"^\s*(?:input|output)\s+(?:\[\d+:0\]\s+)?(\w+);", text, re.M))
    want = {"clk", "rst", "error"}
    for s in ["bcast_in", "reduce_out"] + [f"{p}__{i}" for p in ("bcast_out", "reduce_in")
                                           for i in range(16)]:
        want |= {f"{s}__payload", f"{s}__valid", f"{s}__ready"}
    assert want <= ports
    assert "input [32:0] bcast_in__payload;" in text
    assert "output [32:0] reduce_out__payload;" in text
    assert "input [32:0] reduce_in__15__payload;" in text
    assert "reduce_in__16__payload" not in text


@pytest.mark.parametrize("make, message", [
    (lambda: SwarmxNode(0), "1..4 children"),
    (lambda: SwarmxNode(5), "1..4 children"),
    (lambda: SwarmxNode(2, split=True), "3 or 4 children"),
    (lambda: SwarmxNode(4, fifo_depth=1), "fifo_depth must be an int >= 2"),
    (lambda: SwarmxTree(0), "leaves >= 1"),
    (lambda: SwarmxTree(4, fifo_depth=1), "fifo_depth must be an int >= 2"),
    (lambda: SwarmxReduceUnit(3), "1 or 2 inputs"),
])
def test_bad_parameters(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


@pytest.mark.slow
def test_swarmx_benches_same_under_icarus_and_verilator(icarus):
    """The tree, split-node and deep-tree benches under both simulators: the same outputs at every
    cycle (sim.kit.trace)."""
    with compare_simulators():
        test_swarmx_tree_bench(4)
        test_swarmx_split_node_bench()
        run_deep_tree(20, 24)
