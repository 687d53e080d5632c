"""cocotb testbench support: the runner, stream drivers and monitors, scoreboards."""

import json
import os


def params():
    """Parameters the pytest entry point handed to this cocotb bench (``sim.kit.runner.run_bench``)."""
    return json.loads(os.environ.get("WS_PARAMS", "{}"))
