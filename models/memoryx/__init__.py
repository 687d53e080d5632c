"""MemoryX golden model (docs/memoryx.md): tiered weight store, near-memory optimizers (fused numba
kernels, bit-identical to the documented float32 formulas), bf16 streaming, accounting and planner,
streamed checkpoints and safetensors (all-or-nothing under I/O errors), an exclusive lock on the flash
directory, timing model. Every error is a :class:`MemoryXError` subclass.

``from models.memoryx import MemoryX, SGD, Momentum, Adam, AdamW``
"""

from .accounting import (
                         SEED_EXAMPLE,
                         bytes_per_parameter,
                         max_parameters,
                         plan_bandwidth,
                         plan_capacity,
                         update_bytes_per_parameter,
)
from .checkpoint import read_checkpoint, save_checkpoint
from .errors import (
    CheckpointError,
    ConfigError,
    DirectoryLockedError,
    DuplicateGradientError,
    GradientError,
    MemoryXError,
    NonFiniteUpdateError,
    OptimizerConfigError,
    SafetensorsError,
    StorageError,
    TierError,
    UnknownLayerError,
)
from .initializers import initialize
from .optimizers import SGD, Adam, AdamW, Momentum, Optimizer, optimizer_from_config
from .safetensors_io import export_safetensors, import_safetensors, read_safetensors
from .schedules import constant, linear_warmup_cosine, step_decay
from .store import MemoryX, NonFiniteUpdateWarning
from .tiers import TieredStore
from .timing import MemoryXRates, StepTiming, step_timing

load_checkpoint = MemoryX.load_checkpoint

__all__ = [
    "MemoryX", "SGD", "Momentum", "Adam", "AdamW", "Optimizer", "optimizer_from_config",
    "MemoryXError", "UnknownLayerError", "GradientError", "DuplicateGradientError", "CheckpointError",
    "ConfigError", "OptimizerConfigError", "NonFiniteUpdateError", "NonFiniteUpdateWarning", "SafetensorsError",
    "StorageError", "DirectoryLockedError", "TierError",
    "TieredStore", "initialize", "bytes_per_parameter", "update_bytes_per_parameter", "plan_capacity",
    "plan_bandwidth", "max_parameters", "SEED_EXAMPLE", "save_checkpoint", "load_checkpoint",
    "read_checkpoint", "export_safetensors", "import_safetensors", "read_safetensors", "constant",
    "linear_warmup_cosine", "step_decay", "MemoryXRates", "StepTiming", "step_timing",
]
