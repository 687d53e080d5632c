"""Errors raised by MemoryX (docs/memoryx.md).

Contract: every error that :mod:`models.memoryx` raises on purpose is a :class:`MemoryXError`
subclass, and its message names what is wrong: the layer, the file path or the field (hyper-parameter,
argument) concerned. :class:`MemoryXError` is also a ``ValueError`` (bad input), and
:class:`StorageError` is also an ``OSError`` (a file could not be read or written), so code that
catches the built-in classes keeps working. Unless a method documents otherwise, an error leaves the
store exactly as it was (weights, optimizer state, gradient buffers, step bookkeeping).
"""

import os
import socket

__all__ = ["MemoryXError", "ConfigError", "OptimizerConfigError", "UnknownLayerError", "GradientError",
           "DuplicateGradientError", "NonFiniteUpdateError", "CheckpointError", "SafetensorsError",
           "StorageError", "DirectoryLockedError", "TierError"]


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


class DirectoryLockedError(StorageError):
    """A directory (flash tier) that another open MemoryX store holds, in this process or another;
    names the directory and the holder (``pid``, ``host``) recorded in its lock file."""

    def __init__(self, directory, pid, host, owner="MemoryX flash directory"):
        self.directory, self.pid, self.host = directory, pid, host
        if pid is None:
            who = "a holder that has not recorded itself yet"
        else:
            who = f"pid {pid} on host {host}"
            if pid == os.getpid() and host == socket.gethostname():
                who += ", that is this process"
        super().__init__(f"{owner} {directory} is in use by another MemoryX store ({who}); each directory "
                         f"serves one open store: close the other store or give this one another directory")


class TierError(MemoryXError):
    """Misuse of the memory tiers (unknown tensor key, release without acquire, duplicate tensor)."""
