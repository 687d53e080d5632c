"""Errors raised by MemoryX. Every one names the problem; none leaves the store half-changed."""

__all__ = ["MemoryXError", "UnknownLayerError", "GradientError", "DuplicateGradientError",
           "CheckpointError"]


class MemoryXError(ValueError):
    """Bad input to MemoryX (the store's state is unchanged)."""


class UnknownLayerError(MemoryXError):
    """A layer name the store does not hold."""


class GradientError(MemoryXError):
    """A gradient of the wrong type, dtype or shape, or with NaN/Inf elements."""


class DuplicateGradientError(GradientError):
    """A second gradient for a layer within one (micro-)step."""


class CheckpointError(MemoryXError):
    """A checkpoint or safetensors file that is missing, truncated, corrupt or does not match."""
