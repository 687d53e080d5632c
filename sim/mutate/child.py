"""One mutant's run, inside its sandbox (``python -m sim.mutate.child RESULT TOPS -- PYTEST_ARGS``).

First the probe: the tops named (comma-separated) are elaborated to Verilog at the ``tiny``
preset; an exception there makes the mutant stillborn and no test runs. Then pytest runs the
block's tests in this process. RESULT (JSON) gets ``{"stillborn": str | None, "verilog": {top:
sha1}, "exit": pytest exit code, "failed": [node ids]}``.
"""

import hashlib
import json
import sys
import traceback


class _Failures:
    def __init__(self):
        self.failed = []

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed.append(report.nodeid)

    def pytest_collectreport(self, report):
        if report.failed:
            self.failed.append(report.nodeid or "<collection>")


def main(argv):
    result_path, tops = argv[0], [t for t in argv[1].split(",") if t]
    pytest_args = argv[argv.index("--") + 1:]
    out = {"stillborn": None, "verilog": {}, "exit": None, "failed": []}
    try:
        from hdl.config import preset
        from sim.kit.runner import top_verilog
        for top in tops:             # cached in the shared build folder: the tests that build it reuse it
            text = top_verilog(top, preset("tiny")).read_text()
            out["verilog"][top] = hashlib.sha1(text.encode()).hexdigest()
    except Exception as exc:  # noqa: BLE001 - any elaboration error makes the mutant stillborn
        out["stillborn"] = "".join(traceback.format_exception_only(exc)).strip().splitlines()[-1][:300]
    if out["stillborn"] is None:
        import pytest
        failures = _Failures()
        out["exit"] = int(pytest.main(pytest_args, plugins=[failures]))
        out["failed"] = failures.failed
    with open(result_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1:])
