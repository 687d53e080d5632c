"""Named weight initializers: ``initialize(name, shape, seed) -> float32 ndarray``.

Deterministic for a given (name, shape, seed): numpy's PCG64 ``default_rng(seed)`` drawing float32
directly. ``fan_out, fan_in = shape`` for a 2-D weight W (M x K, out x in); a 1-D shape has
``fan_in = fan_out = shape[0]``.

- ``zeros``, ``ones``
- ``normal``: N(0, 0.02^2) (the GPT-2 convention)
- ``xavier_uniform``: U(-a, a), ``a = sqrt(6 / (fan_in + fan_out))``
- ``kaiming_normal``: N(0, 2 / fan_in)
"""

import math

import numpy as np

from .errors import ConfigError

__all__ = ["INITIALIZERS", "initialize"]


def _fans(shape):
    if len(shape) == 1:
        return shape[0], shape[0]
    return shape[1], shape[0]


def _normal(shape, rng, std):
    out = rng.standard_normal(size=shape, dtype=np.float32)
    out *= np.float32(std)
    return out


def _zeros(shape, rng):
    return np.zeros(shape, np.float32)


def _ones(shape, rng):
    return np.ones(shape, np.float32)


def _gpt_normal(shape, rng):
    return _normal(shape, rng, 0.02)


def _xavier_uniform(shape, rng):
    fan_in, fan_out = _fans(shape)
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=shape).astype(np.float32)


def _kaiming_normal(shape, rng):
    fan_in, _ = _fans(shape)
    return _normal(shape, rng, math.sqrt(2.0 / fan_in))


INITIALIZERS = {"zeros": _zeros, "ones": _ones, "normal": _gpt_normal,
                "xavier_uniform": _xavier_uniform, "kaiming_normal": _kaiming_normal}


def initialize(name, shape, seed=0):
    """float32 array of ``shape`` from initializer ``name`` with ``seed``."""
    if name not in INITIALIZERS:
        raise ConfigError(f"unknown initializer {name!r}; known: {', '.join(INITIALIZERS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"initializer seed must be a non-negative int, got {seed!r}")
    return INITIALIZERS[name](tuple(shape), np.random.default_rng(int(seed)))
