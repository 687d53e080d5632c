"""sim/kit/runner.py without a simulator: the simulator choice and the cross-simulator comparison
(``compare_simulators`` fails on any difference in tests run, simulated time or trace)."""

import pytest

from sim.kit import runner

_XML = """<testsuites><testsuite>{cases}</testsuite></testsuites>"""
_CASE = ('<testcase name="{name}"><properties><property name="sim_time_duration" value="{ns}" />'
         '</properties></testcase>')


def _run_dir(path, times, trace):
    path.mkdir()
    cases = "".join(_CASE.format(name=n, ns=ns) for n, ns in times.items())
    (path / "results.xml").write_text(_XML.format(cases=cases))
    (path / "trace.txt").write_text("".join(f"{line}\n" for line in trace))
    return path


TRACE = ["0 256 aa", "0 300 bb end", "1 12 cc end"]


def _pair(tmp_path, times=None, trace=None):
    return {"icarus": _run_dir(tmp_path / "icarus", {"a": 3000.0, "b": 120.0}, TRACE),
            "verilator": _run_dir(tmp_path / "verilator", times or {"a": 3000.0, "b": 120.0}, trace or TRACE)}


def test_equal_runs_pass(tmp_path):
    runner._same_runs(_pair(tmp_path), "bench")
    assert runner.test_times(tmp_path / "icarus") == {"a": 3000.0, "b": 120.0}


@pytest.mark.parametrize("times,trace,message", [
    ({"a": 3000.0, "b": 130.0}, None, "simulated ns per test differ"),
    ({"a": 3000.0}, None, "simulated ns per test differ"),
    (None, ["0 256 aa", "0 300 bX end", "1 12 cc end"], "in trace line 1"),
    (None, TRACE[:2], "traces differ in length"),
])
def test_any_difference_fails(tmp_path, times, trace, message):
    with pytest.raises(AssertionError, match=message):
        runner._same_runs(_pair(tmp_path, times, trace), "bench")


def test_empty_trace_fails(tmp_path):
    dirs = {"icarus": _run_dir(tmp_path / "i", {"a": 1.0}, []), "verilator": _run_dir(tmp_path / "v", {"a": 1.0}, [])}
    with pytest.raises(AssertionError, match="empty trace"):
        runner._same_runs(dirs, "bench")


def test_simulator_choice(monkeypatch):
    monkeypatch.delenv(runner.SIM_ENV, raising=False)
    monkeypatch.setattr(runner, "icarus_available", lambda: True)
    assert runner.bench_simulator("wafer") == "verilator"
    assert runner.bench_simulator("router") == runner.DEFAULT_SIMULATOR == "icarus"
    monkeypatch.setattr(runner, "icarus_available", lambda: False)
    assert runner.bench_simulator("router") == "verilator"
    monkeypatch.setenv(runner.SIM_ENV, "verilator")
    assert runner.bench_simulator("router") == "verilator"
    monkeypatch.setenv(runner.SIM_ENV, "xcelium")
    with pytest.raises(ValueError, match="simulator must be one of"):
        runner.bench_simulator("router")


def test_cached_verilog_converts_once_per_key(tmp_path, monkeypatch):
    """The Verilog of one (top, builder, arguments) is converted once and then read from its
    folder; other arguments get another folder."""
    from hdl.config import Config

    monkeypatch.setattr(runner, "BUILD", tmp_path)
    calls = []
    real = runner.verilog_text
    monkeypatch.setattr(runner, "verilog_text", lambda c, name: calls.append(name) or real(c, name))
    first = runner.top_verilog("skid_buffer", Config())
    assert runner.top_verilog("skid_buffer", Config()) == first and calls == ["skid_buffer"]
    other = runner.top_verilog("skid_buffer", Config(num_colors=4))
    assert other != first and calls == ["skid_buffer", "skid_buffer"]
    assert "module skid_buffer" in first.read_text()


def test_public_vlt_names_the_top_and_its_children():
    text = ("module top(clk, o);\n  input clk;\n  output o;\n"
            "  \\top.player0  player0 (\n    .clk(clk)\n  );\n"
            "  \\top.rec  rec (\n    .clk(clk)\n  );\n"
            "  always @(posedge clk)\n    if (clk) begin\n    end\nendmodule\n"
            "module \\top.player0 (clk);\n  input clk;\n  \\top.player0.mem  mem (\n  );\nendmodule\n")
    assert runner.public_vlt(runner.bench_modules(text, "top")).splitlines() == [
        "`verilator_config",
        'public_flat_rw -module "top" -var "*"',
        'public_flat_rw -module "top.player0" -var "*"',
        'public_flat_rw -module "top.rec" -var "*"']
    with pytest.raises(ValueError, match="module wafer is not in the sources"):
        runner.bench_modules(text, "wafer")
