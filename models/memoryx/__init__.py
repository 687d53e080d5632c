"""MemoryX golden model (DESIGN.md 5.6): tiered weight store, near-memory optimizers, bf16
streaming, accounting and planner, checkpoints, safetensors, timing model.

``from models.memoryx import MemoryX, SGD, Momentum, Adam, AdamW``
"""

from .accounting import (SEED_EXAMPLE, bytes_per_parameter, max_parameters, plan_bandwidth, plan_capacity,
                         update_bytes_per_parameter)
from .errors import CheckpointError, DuplicateGradientError, GradientError, MemoryXError, UnknownLayerError
from .initializers import initialize
from .optimizers import SGD, Adam, AdamW, Momentum, Optimizer, optimizer_from_config
from .store import MemoryX
from .tiers import TieredStore

__all__ = [
    "MemoryX", "SGD", "Momentum", "Adam", "AdamW", "Optimizer", "optimizer_from_config",
    "MemoryXError", "UnknownLayerError", "GradientError", "DuplicateGradientError", "CheckpointError",
    "TieredStore", "initialize", "bytes_per_parameter", "update_bytes_per_parameter", "plan_capacity",
    "plan_bandwidth", "max_parameters", "SEED_EXAMPLE",
]
