"""Shared checks of the system tests."""

from pathlib import Path

import pytest


def _check_rtl_results(results, run):
    """What every RTL-wafer run must show besides the training loop's own checks (loss and every
    master weight bit-exact after every step, cycles against ``models.pipeline.rtl_schedule``)."""
    assert [s["step"] for s in results["steps"]] == list(range(1, run.steps + 1))
    kinds = [(p["phase"], p["layer"]) for p in results["phases"]]
    n = len(run.dims) - 1
    assert kinds == ([("forward", l) for l in range(n)]
                     + [k for l in range(n - 1, -1, -1)
                        for k in ([("backward-data", l)] if l else []) + [("backward-weight", l)]])
    for s in results["steps"]:
        for p in s["phases"]:
            assert p["config_cycles"] == p["writes_before_go"] + 1 == p["model_config_cycles"]
            assert 0 < p["writes_before_go"] <= p["config_writes"]
            assert p["model_run_cycles"] >= p["model_run_formula"] > 0
            assert 0 < p["lane_utilization"] <= 1, p      # the layer's MACs fit in its run
            if run.stall == 0:
                assert p["run_cycles"] == p["model_run_cycles"]
            else:       # stalls can reorder the RAMP arbitration: only the formula bounds the run
                assert p["run_cycles"] >= p["model_run_formula"]
    assert (Path(run.out_dir) / "weights.safetensors").stat().st_size > 4 * run.words


@pytest.fixture
def check_rtl_results():
    return _check_rtl_results
