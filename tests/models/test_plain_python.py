"""docs/architecture.md#layout: the golden models are plain Python + numpy: importing every module under
models/ must not import amaranth or cocotb."""

import pkgutil
import subprocess
import sys

import models


def test_models_import_no_rtl_or_sim_framework():
    names = [m.name for m in pkgutil.walk_packages(models.__path__, "models.")
             if not m.name.endswith("__main__")]
    code = ("import importlib, sys\n"
            f"for n in {names!r}: importlib.import_module(n)\n"
            "bad = sorted({m.split('.')[0] for m in sys.modules} & {'amaranth', 'cocotb'})\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert len(names) > 10
    assert out.stdout.strip() == "", f"models import {out.stdout.strip()}"
