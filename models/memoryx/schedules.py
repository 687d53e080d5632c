"""Learning-rate schedules for ``MemoryX(lr_schedule=...)``: callables ``t -> lr`` where ``t`` is
the 1-based optimizer step of a layer. Any callable with that contract works; these are the
common ones, computed in binary64 (the optimizer rounds its coefficients to fp32 once per step).
"""

import math

from .errors import ConfigError

__all__ = ["constant", "linear_warmup_cosine", "step_decay"]


def _check(name, value, low=0.0):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < low:
        raise ConfigError(f"schedule parameter {name} must be a finite number >= {low}, got {value!r}")


def constant(lr):
    """``lr`` at every step."""
    _check("lr", lr)
    return lambda t: float(lr)


def linear_warmup_cosine(base_lr, warmup_steps, total_steps, min_lr=0.0):
    """Linear warm-up ``base_lr * t / warmup_steps`` for ``t <= warmup_steps``, then cosine decay
    from ``base_lr`` to ``min_lr`` at ``t = total_steps`` (and ``min_lr`` after)."""
    _check("base_lr", base_lr)
    _check("min_lr", min_lr)
    if not (isinstance(warmup_steps, int) and isinstance(total_steps, int)
            and 0 <= warmup_steps < total_steps):
        raise ConfigError(f"need ints 0 <= warmup_steps < total_steps, got {warmup_steps!r}, {total_steps!r}")

    def lr(t):
        if t <= warmup_steps:
            return base_lr * t / warmup_steps
        if t >= total_steps:
            return float(min_lr)
        progress = (t - warmup_steps) / (total_steps - warmup_steps)
        return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    return lr


def step_decay(base_lr, gamma, every):
    """``base_lr * gamma ** ((t - 1) // every)``."""
    _check("base_lr", base_lr)
    _check("gamma", gamma)
    if not (isinstance(every, int) and every >= 1):
        raise ConfigError(f"every must be an int >= 1, got {every!r}")
    return lambda t: base_lr * gamma ** ((t - 1) // every)
