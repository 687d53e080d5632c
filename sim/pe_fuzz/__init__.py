"""Differential fuzzing of the PE core (docs/fuzzing.md): random programs run on the RTL ``pe_core`` and on
``models.pe.PeModel`` agree in every word sent, every register read back, the fault flag and the sticky
fault, and, for timed programs, the cycle of every transfer; a failing program is shrunk and written as a
replay file.

A program (:func:`generate`) is valid (:func:`validate`) when nothing observable depends on the RTL's
interleaving of concurrent activity nor on SRAM it did not write; :func:`expect` is the model's view
of it, :func:`run_rtl` the RTL's run, :func:`compare` their differences, :func:`fuzz` a run of many,
:func:`shrink` and :func:`write_replay` what follows a failure.

The names below load their module on first use: the simulator imports :mod:`sim.pe_fuzz.batch` alone.
"""

import importlib

_MODULES = {
    "configs": ("CONFIGS", "make_config", "config_name"),
    "model": ("FuzzModel", "expect", "validate"),
    "generator": ("Builder", "generate", "programs", "seeds"),
    "rtl": ("WORK", "run_rtl", "model_results"),
    "comparison": ("compare", "replay_cycles"),
    "campaign": ("Stats", "fuzz"),
    "shrinker": ("FlipAddModel", "shrink", "size"),
    "replays": ("write_replay", "read_replay", "replay", "describe"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}

__all__ = list(_HOME)


def __getattr__(name):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
