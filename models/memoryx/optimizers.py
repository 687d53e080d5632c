"""Near-memory optimizers of MemoryX: SGD, Momentum (optionally Nesterov), Adam, AdamW.

Every formula is float32 arithmetic, one IEEE-754 rounding (round to nearest even) per operation,
applied elementwise in exactly the order written in each class docstring. Scalar coefficients
(``lr``, ``1 - beta1``, the bias corrections, ...) are computed in Python float (binary64) from the
hyper-parameters and rounded to float32 once, per step, before they touch an array; they are
listed as ``c_*`` in each docstring. Because every operation is elementwise, the result does not
depend on how a layer is split into chunks, nor on which memory tier holds it.

An optimizer object holds only hyper-parameters; the per-parameter state (``state_names``, one
float32 array of the layer's shape each) lives in the MemoryX store. ``step`` updates ``param``
and the state arrays *in place* from the fp32 gradient ``grad``, for the 1-based optimizer step
``t`` of that layer and the learning rate ``lr`` of that step (a schedule may change it).
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "AdamW", "optimizer_from_config"]

F32 = np.float32


def _check_hyper(name, value, low=None, high=None, low_open=False, high_open=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"optimizer hyper-parameter {name} must be a finite number, got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"optimizer hyper-parameter {name} must be {'>' if low_open else '>='} {low}, "
                         f"got {value!r}")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"optimizer hyper-parameter {name} must be {'<' if high_open else '<='} {high}, "
                         f"got {value!r}")


class Optimizer:
    """Base class. Subclasses define ``state_names``, ``kind`` and ``step``."""

    state_names: tuple = ()
    kind = "optimizer"
    lr: float

    def config(self):
        """JSON-serialisable description (kind + hyper-parameters), used by checkpoints."""
        return {"kind": self.kind, **{k: (list(v) if isinstance(v, tuple) else v)
                                      for k, v in self.__dict__.items()}}

    def step(self, param, grad, state, t, lr):  # pragma: no cover - abstract
        raise NotImplementedError

    def init_state(self, shape):
        """Fresh state arrays (zeros) for a parameter of ``shape``."""
        return {n: np.zeros(shape, dtype=F32) for n in self.state_names}


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

    def __post_init__(self):
        _check_hyper("lr", self.lr, 0.0)
        _check_hyper("weight_decay", self.weight_decay, 0.0)

    def step(self, param, grad, state, t, lr):
        g = grad
        if self.weight_decay != 0.0:
            g = grad + F32(self.weight_decay) * param
        param -= F32(lr) * g


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

    def __post_init__(self):
        _check_hyper("lr", self.lr, 0.0)
        _check_hyper("momentum", self.momentum, 0.0, low_open=True)
        _check_hyper("dampening", self.dampening, 0.0, 1.0)
        _check_hyper("weight_decay", self.weight_decay, 0.0)
        if not isinstance(self.nesterov, bool):
            raise ValueError(f"optimizer hyper-parameter nesterov must be a bool, got {self.nesterov!r}")
        if self.nesterov and self.dampening != 0.0:
            raise ValueError("Nesterov momentum requires dampening == 0")

    def step(self, param, grad, state, t, lr):
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

    def __post_init__(self):
        _check_hyper("lr", self.lr, 0.0)
        if not (isinstance(self.betas, (tuple, list)) and len(self.betas) == 2):
            raise ValueError(f"optimizer hyper-parameter betas must be a pair, got {self.betas!r}")
        self.betas = tuple(self.betas)
        _check_hyper("beta1", self.betas[0], 0.0, 1.0, high_open=True)
        _check_hyper("beta2", self.betas[1], 0.0, 1.0, high_open=True)
        _check_hyper("eps", self.eps, 0.0, low_open=True)
        _check_hyper("weight_decay", self.weight_decay, 0.0)

    def coefficients(self, t, lr):
        """The float32 scalar coefficients of step ``t`` (see the class docstring)."""
        b1, b2 = self.betas
        return {
            "wd": F32(self.weight_decay), "decay": F32(1.0 - lr * self.weight_decay),
            "b1": F32(b1), "1b1": F32(1.0 - b1), "b2": F32(b2), "1b2": F32(1.0 - b2),
            "sb2": F32(math.sqrt(1.0 - b2 ** t)), "step": F32(lr / (1.0 - b1 ** t)),
            "eps": F32(self.eps),
        }

    def step(self, param, grad, state, t, lr):
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
    config = dict(config)
    kind = config.pop("kind", None)
    if kind not in KINDS:
        raise ValueError(f"unknown optimizer kind {kind!r}; known: {', '.join(KINDS)}")
    if "betas" in config:
        config["betas"] = tuple(config["betas"])
    return KINDS[kind](**config)
