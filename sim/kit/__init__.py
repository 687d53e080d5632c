"""cocotb testbench support: the runner, stream drivers and monitors, scoreboards."""

import json
import os


def params():
    """Parameters the pytest entry point handed to this cocotb bench (``sim.kit.runner.run_bench``)."""
    return json.loads(os.environ.get("WS_PARAMS", "{}"))


def input_ports():
    """The names of the top's input ports (``sim.kit.runner.run_bench`` lists them), for a bench
    that drives every input it does not use to an idle 0 (Icarus starts undriven inputs at ``z``,
    Verilator at 0)."""
    return [n for n in os.environ.get("WS_INPUT_PORTS", "").split(",") if n]
