"""Errors raised by MemoryX (docs/memoryx.md).

Contract: every error that :mod:`models.memoryx` raises on purpose is a :class:`MemoryXError`
subclass, and its message names what is wrong: the layer, the file path or the field (hyper-parameter,
argument) concerned. :class:`MemoryXError` is also a ``ValueError`` (bad input), and
:class:`StorageError` is also an ``OSError`` (a file could not be read or written), so code that
catches the built-in classes keeps working. Unless a method documents otherwise, an error leaves the
store exactly as it was (weights, optimizer state, gradient buffers, step bookkeeping).
"""

__all__ = ["MemoryXError", "ConfigError", "OptimizerConfigError", "UnknownLayerError", "GradientError",
           "DuplicateGradientError", "NonFiniteUpdateError", "CheckpointError", "SafetensorsError",
           "StorageError", "TierError"]


class MemoryXError(ValueError):
    """Bad input to MemoryX (the store's state is unchanged)."""


class ConfigError(MemoryXError):
    """A bad constructor argument or setting (the message names the field)."""


class OptimizerConfigError(ConfigError):
    """A bad optimizer hyper-parameter, at construction or when it is set later (names the field)."""


class UnknownLayerError(MemoryXError):
    """A layer name the store does not hold."""


class GradientError(MemoryXError):
    """A gradient of the wrong type, dtype or shape, or with NaN/Inf elements (or whose accumulated
    sum overflows fp32)."""


class DuplicateGradientError(GradientError):
    """A second gradient for a layer within one (micro-)step."""


class NonFiniteUpdateError(MemoryXError):
    """An optimizer step whose result (weights or optimizer state) would have NaN/Inf elements although
    its inputs are finite (e.g. an overflow). The step was not applied."""


class CheckpointError(MemoryXError):
    """A checkpoint file that is missing, truncated, corrupt or does not match."""


class SafetensorsError(MemoryXError):
    """A safetensors file that is missing, malformed or does not match the store."""


class StorageError(MemoryXError, OSError):
    """A file (checkpoint, safetensors, flash tier) could not be read or written; names the path and
    keeps the operating system's reason in the message."""


class TierError(MemoryXError):
    """Misuse of the memory tiers (unknown tensor key, release without acquire, duplicate tensor)."""
