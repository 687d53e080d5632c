"""Near-memory optimizers of MemoryX: SGD, Momentum (optionally Nesterov), Adam, AdamW.

Arithmetic contract: every formula is float32 arithmetic, one IEEE-754 rounding (round to nearest
even) per operation, applied elementwise in exactly the order written in each class docstring. Scalar
coefficients (``lr``, ``1 - beta1``, the bias corrections, ...) are computed in Python float
(binary64) from the hyper-parameters and rounded to float32 once, per step, before they touch an
array; they are listed as ``c_*`` in each docstring. Because every operation is elementwise, the
result does not depend on how a layer is split into chunks, nor on which memory tier holds it.

Two implementations of that contract, equal bit for bit (tested over random, subnormal and huge
values):

- :meth:`Optimizer.step`: the fused single-pass kernel (:mod:`models.memoryx.kernels`, numba): one
  read of weights, state and gradient and one write of weights and state per element. MemoryX uses
  it (with the bf16 copy written in the same pass).
- :meth:`Optimizer.numpy_step`: the NumPy reference, one array operation per formula line.

An optimizer object holds only hyper-parameters; the per-parameter state (``state_names``, one float32
array of the layer's shape each) lives in the MemoryX store. ``step`` updates ``param`` and the state
arrays *in place* from the fp32 gradient ``grad``, for the 1-based optimizer step ``t`` of that layer
and the learning rate ``lr`` of that step (a schedule may change it).

Hyper-parameters are validated whenever they are set, at construction and afterwards
(``opt.lr = -1e-2`` raises :class:`~models.memoryx.errors.OptimizerConfigError` naming the field and
leaves the old value); unknown attribute names are refused the same way.

:meth:`Optimizer.bound` is the overflow guard MemoryX uses to skip its exact pre-check: from upper
bounds of ``|weights|``, ``|state|`` and ``|gradient|`` it bounds every intermediate of the step in
binary64 (each float32 rounding inflates a magnitude by at most ``2**-24`` relative plus ``2**-126``
absolute; the guard inflates by ``2**-22`` and ``2**-126``) and answers "provably finite" only when all
stay below a quarter of the float32 maximum. It never answers wrongly; when it cannot prove
finiteness MemoryX runs the exact check (:func:`models.memoryx.kernels.adam_dry` and siblings).
"""

import math
from dataclasses import dataclass, fields

import numpy as np

from . import kernels
from .errors import OptimizerConfigError

__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "AdamW", "optimizer_from_config"]

F32 = np.float32
_FMAX = float(np.finfo(np.float32).max)
_LIMIT = _FMAX / 4
_R = 1.0 + 2.0 ** -22
_TINY = 2.0 ** -126


def _up(x):
    """Upper bound of the magnitude of float32(x) for a magnitude bound x (see the module docstring)."""
    return x * _R + _TINY


def _ok(*values):
    return all(v <= _LIMIT for v in values)     # False for NaN and inf too


def _number(name, value, low=None, high=None, low_open=False, high_open=False):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise OptimizerConfigError(f"optimizer hyper-parameter {name} must be a finite number, got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        raise OptimizerConfigError(f"optimizer hyper-parameter {name} must be {'>' if low_open else '>='} {low}, "
                                   f"got {value!r}")
    if high is not None and (value > high or (high_open and value == high)):
        raise OptimizerConfigError(f"optimizer hyper-parameter {name} must be {'<' if high_open else '<='} "
                                   f"{high}, got {value!r}")
    return float(value)


def _contiguous_f32(*arrays):
    return all(isinstance(a, np.ndarray) and a.dtype == F32 and a.flags.c_contiguous for a in arrays)


def _flat(a):
    return a.view(np.ndarray).reshape(-1)


class Optimizer:
    """Base class. Subclasses define ``state_names``, ``kind``, ``_check`` (field validation),
    ``numpy_step``, ``kernel_args``, ``bound`` and the kernel pair ``_dry`` / ``_commit``."""

    state_names: tuple = ()
    kind = "optimizer"
    lr: float

    def __setattr__(self, name, value):
        names = {f.name for f in fields(self)}
        if name not in names:
            raise OptimizerConfigError(f"{type(self).__name__} has no hyper-parameter {name!r} "
                                       f"(known: {', '.join(sorted(names))})")
        object.__setattr__(self, name, self._check(name, value))

    def _check(self, name, value):  # pragma: no cover - every subclass overrides
        return value

    def config(self):
        """JSON-serialisable description (kind + hyper-parameters), used by checkpoints."""
        return {"kind": self.kind, **{f.name: (list(v) if isinstance(v, tuple) else v)
                                      for f in fields(self) for v in [getattr(self, f.name)]}}

    def init_state(self, shape):
        """Fresh state arrays (zeros) for a parameter of ``shape``."""
        return {n: np.zeros(shape, dtype=F32) for n in self.state_names}

    # -- the two implementations -------------------------------------------------------------
    def step(self, param, grad, state, t, lr):
        """One step in place with the fused kernel (bit-identical to :meth:`numpy_step`). Arrays that
        are not C-contiguous float32 go through :meth:`numpy_step`."""
        arrays = [param, grad, *(state[s] for s in self.state_names)]
        if not _contiguous_f32(*arrays) or len({a.shape for a in arrays}) != 1:
            return self.numpy_step(param, grad, state, t, lr)
        p, g = _flat(param), _flat(grad)
        out16 = np.empty(p.size, np.uint16)
        with np.errstate(all="ignore"):
            self.commit(p, [_flat(state[s]) for s in self.state_names], g, g, 1, out16, t, lr)

    def numpy_step(self, param, grad, state, t, lr):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- kernel interface used by MemoryX -------------------------------------------------------
    def kernel_args(self, t, lr):  # pragma: no cover - abstract
        raise NotImplementedError

    def dry(self, p, states, a, b, k, t, lr):
        """Exact pre-check of a step (writes nothing): ``(g, param, state1, state2)`` largest magnitudes
        as float32 bit patterns and the OR of the second state's sign bits (see kernels)."""
        return self._dry(p, *states, a, b, F32(k), k > 1, *self.kernel_args(t, lr))

    def commit(self, p, states, a, b, k, out16, t, lr):
        """The step in place; ``out16`` receives the bf16 copy of the new weights."""
        self._commit(p, *states, a, b, F32(k), k > 1, out16, *self.kernel_args(t, lr))

    def bound(self, stats, g_max, t, lr):  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass
class SGD(Optimizer):
    """Plain stochastic gradient descent with L2 weight decay (``torch.optim.SGD``, momentum 0).

    float32, in order (``c_wd = f32(weight_decay)``, ``c_lr = f32(lr)``)::

        g = grad + c_wd * p          (only when weight_decay != 0)
        p = p - c_lr * g

    State: none. Bytes per parameter: 4 master + 4 gradient + 2 bf16 copy = 10.
    """

    lr: float = 0.01
    weight_decay: float = 0.0

    state_names = ()
    kind = "sgd"
    _dry = staticmethod(kernels.sgd_dry)
    _commit = staticmethod(kernels.sgd_commit)

    def _check(self, name, value):
        return _number(name, value, 0.0)

    def numpy_step(self, param, grad, state, t, lr):
        g = grad
        if self.weight_decay != 0.0:
            g = grad + F32(self.weight_decay) * param
        param -= F32(lr) * g

    def kernel_args(self, t, lr):
        return (self.weight_decay != 0.0, F32(self.weight_decay), F32(lr))

    def bound(self, stats, g_max, t, lr):
        wd = float(F32(self.weight_decay))
        c_lr = float(F32(lr))
        P = stats["master"]
        g = _up(g_max + _up(wd * P)) if wd else g_max
        u = _up(c_lr * g)
        p = _up(P + u)
        return {"master": p} if _ok(g, u, p) else None


@dataclass
class Momentum(Optimizer):
    """SGD with momentum, optionally Nesterov (``torch.optim.SGD`` with ``momentum > 0``).

    float32, in order (``c_wd = f32(weight_decay)``, ``c_mu = f32(momentum)``,
    ``c_d = f32(1 - dampening)``, ``c_lr = f32(lr)``)::

        g = grad + c_wd * p          (only when weight_decay != 0)
        b = g                        (first step, t == 1: the buffer starts as the gradient)
        b = c_mu * b + c_d * g       (t > 1)
        u = g + c_mu * b             (nesterov)     u = b   (otherwise)
        p = p - c_lr * u

    State: ``momentum_buffer``. Bytes per parameter: 4 master + 4 buffer + 4 gradient + 2 bf16 = 14.
    """

    lr: float = 0.01
    momentum: float = 0.9
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0

    state_names = ("momentum_buffer",)
    kind = "momentum"
    _dry = staticmethod(kernels.momentum_dry)
    _commit = staticmethod(kernels.momentum_commit)

    def _check(self, name, value):
        if name == "nesterov":
            if not isinstance(value, (bool, np.bool_)):
                raise OptimizerConfigError(f"optimizer hyper-parameter nesterov must be a bool, got {value!r}")
            if value and self.dampening != 0.0:
                raise OptimizerConfigError("optimizer hyper-parameter nesterov: Nesterov momentum requires "
                                           f"dampening == 0 (dampening is {self.dampening!r})")
            return bool(value)
        if name == "momentum":
            return _number(name, value, 0.0, low_open=True)
        if name == "dampening":
            value = _number(name, value, 0.0, 1.0)
            if value != 0.0 and self.nesterov:
                raise OptimizerConfigError(f"optimizer hyper-parameter dampening: Nesterov momentum requires "
                                           f"dampening == 0, got {value!r}")
            return value
        return _number(name, value, 0.0)

    def numpy_step(self, param, grad, state, t, lr):
        b = state["momentum_buffer"]
        g = grad
        if self.weight_decay != 0.0:
            g = grad + F32(self.weight_decay) * param
        if t == 1:
            b[...] = g
        else:
            b *= F32(self.momentum)
            b += F32(1.0 - self.dampening) * g
        u = g + F32(self.momentum) * b if self.nesterov else b
        param -= F32(lr) * u

    def kernel_args(self, t, lr):
        return (self.weight_decay != 0.0, t == 1, self.nesterov, F32(self.weight_decay), F32(self.momentum),
                F32(1.0 - self.dampening), F32(lr))

    def bound(self, stats, g_max, t, lr):
        wd, mu = float(F32(self.weight_decay)), float(F32(self.momentum))
        c_d, c_lr = float(F32(1.0 - self.dampening)), float(F32(lr))
        P, B = stats["master"], stats["momentum_buffer"]
        g = _up(g_max + _up(wd * P)) if wd else g_max
        b = g if t == 1 else _up(_up(mu * B) + _up(c_d * g))
        u = _up(g + _up(mu * b)) if self.nesterov else b
        p = _up(P + _up(c_lr * u))
        return {"master": p, "momentum_buffer": b} if _ok(g, b, u, p) else None


@dataclass
class Adam(Optimizer):
    """Adam (Kingma & Ba) with L2 weight decay added to the gradient (``torch.optim.Adam``).

    float32, in order, for step ``t`` (``c_wd = f32(weight_decay)``, ``c_b1 = f32(beta1)``,
    ``c_1b1 = f32(1 - beta1)``, ``c_b2 = f32(beta2)``, ``c_1b2 = f32(1 - beta2)``,
    ``c_sb2 = f32(sqrt(1 - beta2**t))``, ``c_step = f32(lr / (1 - beta1**t))``, ``c_eps = f32(eps)``;
    the bias corrections are formed in binary64 and rounded once)::

        g = grad + c_wd * p                    (only when weight_decay != 0)
        m = c_b1 * m + c_1b1 * g
        v = c_b2 * v + c_1b2 * (g * g)
        d = sqrt(v) / c_sb2 + c_eps            (epsilon outside the square root, after correction)
        p = p - c_step * (m / d)

    State: ``exp_avg`` (m), ``exp_avg_sq`` (v). Bytes per parameter: 4 master + 4 m + 4 v
    + 4 gradient + 2 bf16 copy = 18.
    """

    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    state_names = ("exp_avg", "exp_avg_sq")
    kind = "adam"
    decoupled = False
    _dry = staticmethod(kernels.adam_dry)
    _commit = staticmethod(kernels.adam_commit)

    def _check(self, name, value):
        if name == "betas":
            if not (isinstance(value, (tuple, list)) and len(value) == 2):
                raise OptimizerConfigError(f"optimizer hyper-parameter betas must be a pair, got {value!r}")
            return (_number("beta1", value[0], 0.0, 1.0, high_open=True),
                    _number("beta2", value[1], 0.0, 1.0, high_open=True))
        if name == "eps":
            return _number(name, value, 0.0, low_open=True)
        return _number(name, value, 0.0)

    def coefficients(self, t, lr):
        """The float32 scalar coefficients of step ``t`` (see the class docstring)."""
        b1, b2 = self.betas
        with np.errstate(over="ignore"):         # a coefficient beyond float32 becomes inf (then refused)
            return self._coefficients(b1, b2, t, lr)

    def _coefficients(self, b1, b2, t, lr):
        return {
            "wd": F32(self.weight_decay), "decay": F32(1.0 - lr * self.weight_decay),
            "b1": F32(b1), "1b1": F32(1.0 - b1), "b2": F32(b2), "1b2": F32(1.0 - b2),
            "sb2": F32(math.sqrt(1.0 - b2 ** t)), "step": F32(lr / (1.0 - b1 ** t)),
            "eps": F32(self.eps),
        }

    def numpy_step(self, param, grad, state, t, lr):
        c = self.coefficients(t, lr)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        g = grad
        if self.decoupled:
            if self.weight_decay != 0.0:
                param *= c["decay"]
        elif self.weight_decay != 0.0:
            g = grad + c["wd"] * param
        m *= c["b1"]
        m += c["1b1"] * g
        v *= c["b2"]
        v += c["1b2"] * (g * g)
        d = np.sqrt(v)
        d /= c["sb2"]
        d += c["eps"]
        np.divide(m, d, out=d)
        d *= c["step"]
        param -= d

    def _wd_mode(self):
        return 0 if self.weight_decay == 0.0 else (2 if self.decoupled else 1)

    def kernel_args(self, t, lr):
        c = self.coefficients(t, lr)
        return (self._wd_mode(), c["wd"], c["decay"], c["b1"], c["1b1"], c["b2"], c["1b2"], c["sb2"], c["eps"],
                c["step"])

    def bound(self, stats, g_max, t, lr):
        c = {k: float(v) for k, v in self.coefficients(t, lr).items()}
        if not (c["eps"] > 0.0 and c["sb2"] > 0.0):
            return None
        P, M, V = stats["master"], stats["exp_avg"], stats["exp_avg_sq"]
        mode = self._wd_mode()
        g = _up(g_max + _up(c["wd"] * P)) if mode == 1 else g_max
        p0 = _up(abs(c["decay"]) * P) if mode == 2 else P
        m = _up(_up(c["b1"] * M) + _up(c["1b1"] * g))
        gg = _up(g * g)
        v = _up(_up(c["b2"] * V) + _up(c["1b2"] * gg))
        d_hi = _up(_up(_up(math.sqrt(v)) / c["sb2"]) + c["eps"]) if _ok(v) else math.inf
        q = _up(m / c["eps"])                    # d >= c_eps: |m / d| <= |m| / c_eps
        s = _up(c["step"] * q)
        p = _up(p0 + s)
        ok = _ok(g, p0, m, gg, v, d_hi, q, s, p)
        return {"master": p, "exp_avg": m, "exp_avg_sq": v} if ok else None


@dataclass
class AdamW(Adam):
    """AdamW (Loshchilov & Hutter): Adam with decoupled weight decay (``torch.optim.AdamW``).

    float32, in order, for step ``t`` (coefficients as in :class:`Adam`, plus
    ``c_decay = f32(1 - lr * weight_decay)``)::

        p = c_decay * p                        (decoupled decay first, on the old weights)
        m = c_b1 * m + c_1b1 * grad
        v = c_b2 * v + c_1b2 * (grad * grad)
        d = sqrt(v) / c_sb2 + c_eps            (epsilon outside the square root, after correction)
        p = p - c_step * (m / d)

    State: ``exp_avg`` (m), ``exp_avg_sq`` (v). Bytes per parameter: 18, as Adam.
    """

    weight_decay: float = 1e-2

    kind = "adamw"
    decoupled = True


KINDS = {cls.kind: cls for cls in (SGD, Momentum, Adam, AdamW)}


def optimizer_from_config(config):
    """Rebuild an optimizer from :meth:`Optimizer.config` output."""
    if not isinstance(config, dict):
        raise OptimizerConfigError(f"optimizer configuration must be a dict, got {type(config).__name__}")
    config = dict(config)
    kind = config.pop("kind", None)
    if kind not in KINDS:
        raise OptimizerConfigError(f"unknown optimizer kind {kind!r}; known: {', '.join(KINDS)}")
    if "betas" in config and isinstance(config["betas"], list):
        config["betas"] = tuple(config["betas"])
    try:
        return KINDS[kind](**config)
    except TypeError as e:
        raise OptimizerConfigError(f"bad {kind} optimizer configuration: {e}") from None
