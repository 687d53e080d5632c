"""Fused single-pass optimizer kernels of MemoryX (numba), and the small helper kernels around them.

Why numba: the update is a handful of fp32 operations per element over five to seven arrays; in
NumPy every operation is a separate pass over memory with a temporary (AdamW: ~12 passes), so the
update runs far below the memory bandwidth. One compiled loop that reads master, state and gradient
once and writes master, state and the bf16 copy once is memory-bound instead. numba compiles plain
Python loops with LLVM at run time (no C toolchain needed at install time, wheels on PyPI), keeps
IEEE semantics unless ``fastmath`` is asked for, and caches the machine code on disk
(``cache=True``: ``__pycache__`` beside this file, or numba's user-wide cache directory when that
is not writable, or ``NUMBA_CACHE_DIR``).

Bit-exactness: every kernel performs, per element, exactly the float32 operations of the documented
formulas (:mod:`models.memoryx.optimizers`) in the documented order: ``fastmath`` is off (no
reassociation, no reciprocal approximations, no FMA contraction: LLVM contracts ``a * b + c`` only
under fast-math flags), and ``error_model="numpy"`` (IEEE division, no Python zero-division check, which
also lets LLVM vectorize the loop). Loop-invariant choices (weight decay on/off, first momentum step,
Nesterov, micro-batch mean) are selects, which pick one exactly computed value. Tests compare the
kernels with the NumPy reference path bit for bit.

Compilation happens on the first call with a new argument signature (about 3 s for all kernels; a
cached process loads them in about 0.3 s). numba's disk cache is not safe against two processes
compiling different signatures of one function at once (its index file can then name the wrong
machine code), which pytest-xdist workers would do on a cold cache: every kernel here is therefore
called with compilation disabled, and a call that needs a new signature compiles (or loads it from the
cache) while holding an exclusive ``flock`` on a lock file in the temporary directory, so processes
take turns.

Kernels per optimizer family (SGD, Momentum, Adam/AdamW):

- ``*_dry``: computes the step without writing anything and returns the largest magnitudes (as
  float32 bit patterns, ``uint32``) of the effective gradient, the new weights and the new state,
  plus the OR of the sign bits of the new second moment (Adam). Non-finite results show up as bit
  patterns ``>= 0x7F800000``. Used to refuse a step before anything changes.
- ``*_commit``: computes the step in place and writes the bf16 copy (round to nearest even, NaN ->
  0x7FC0, as :func:`models.numerics.bf16_bits`); no reductions, so it runs at memory speed.

The gradient operand is either ``a`` (one gradient, ``acc=False``) or ``(a + b) / kf`` (the buffered
sum of the first k - 1 micro-batches plus the k-th, then one division by k, ``acc=True``).
"""

import fcntl
import os
import tempfile
from contextlib import contextmanager

import numpy as np
from numba import njit

__all__ = ["absmax_bits", "add_absmax", "add_into", "bf16_into", "sgd_dry", "sgd_commit", "momentum_dry",
           "momentum_commit", "adam_dry", "adam_commit", "INF_BITS"]

INF_BITS = 0x7F800000
_ABS = np.uint32(0x7FFFFFFF)
_SIGN = np.uint32(0x80000000)
_KW = dict(nogil=True, boundscheck=False, error_model="numpy", cache=True)


_LOCK = os.path.join(tempfile.gettempdir(), "weightstream-memoryx-numba.lock")


@contextmanager
def _compile_lock():
    try:
        fd = os.open(_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:             # pragma: no cover - no usable temporary directory: compile unlocked
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)            # releases the lock


class _Kernel:
    """A numba dispatcher whose compilations (and cache loads) are serialized across processes."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self.__name__ = dispatcher.__name__
        self.__doc__ = dispatcher.__doc__

    def __call__(self, *args):
        d = self.dispatcher
        if d.signatures:
            d._can_compile = False          # (numba's public disable_compile() refuses an empty dispatcher)
            try:
                return d(*args)
            except TypeError:               # no compiled version for these argument types in this process
                pass
            finally:
                d._can_compile = True
        with _compile_lock():
            return d(*args)


def _jit(fn):
    try:
        dispatcher = njit(**_KW)(fn)
    except Exception:           # pragma: no cover - no writable cache location: compile per process
        dispatcher = njit(**{**_KW, "cache": False})(fn)
    return _Kernel(dispatcher)


def _jit_inline(fn):
    try:
        return njit(inline="always", **_KW)(fn)
    except Exception:           # pragma: no cover
        return njit(inline="always", **{**_KW, "cache": False})(fn)


@_jit_inline
def _bits(x):
    return np.float32(x).view(np.uint32)


@_jit_inline
def _bf16(p):
    u = np.float32(p).view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return np.uint16(0x7FC0) if (u & _ABS) > np.uint32(INF_BITS) else np.uint16(r)


@_jit_inline
def _grad(a, b, i, kf, acc):
    return (a[i] + b[i]) / kf if acc else a[i]


# -- helpers ----------------------------------------------------------------------------------------
@_jit
def absmax_bits(x):
    """``(max |x| as float32 bits, OR of the sign bits)`` of a float32 array (NaN/Inf: >= 0x7F800000)."""
    u = x.view(np.uint32)
    mx = np.uint32(0)
    neg = np.uint32(0)
    for i in range(u.size):
        mx = max(mx, u[i] & _ABS)
        neg |= u[i] & _SIGN
    return mx, neg


@_jit
def add_absmax(buf, g):
    """Largest magnitude (float32 bits) of ``buf + g`` (fp32 adds), without writing anything."""
    mx = np.uint32(0)
    for i in range(buf.size):
        mx = max(mx, _bits(buf[i] + g[i]) & _ABS)
    return mx


@_jit
def add_into(buf, g):
    """``buf += g`` (fp32 adds)."""
    for i in range(buf.size):
        buf[i] = buf[i] + g[i]


@_jit
def bf16_into(src, dst):
    """``dst = bf16_bits(src)`` without temporaries."""
    for i in range(src.size):
        dst[i] = _bf16(src[i])


# -- SGD --------------------------------------------------------------------------------------------
@_jit_inline
def _sgd(p, g, has_wd, c_wd, c_lr):
    if has_wd:
        g = g + c_wd * p
    return p - c_lr * g, g


@_jit
def sgd_dry(p, a, b, kf, acc, has_wd, c_wd, c_lr):
    gm = np.uint32(0)
    pm = np.uint32(0)
    for i in range(p.size):
        g = _grad(a, b, i, kf, acc)
        pn, g = _sgd(p[i], g, has_wd, c_wd, c_lr)
        gm = max(gm, _bits(g) & _ABS)
        pm = max(pm, _bits(pn) & _ABS)
    return gm, pm, np.uint32(0), np.uint32(0), np.uint32(0)


@_jit
def sgd_commit(p, a, b, kf, acc, out16, has_wd, c_wd, c_lr):
    if acc:
        for i in range(p.size):
            pn, _ = _sgd(p[i], (a[i] + b[i]) / kf, has_wd, c_wd, c_lr)
            p[i] = pn
            out16[i] = _bf16(pn)
    else:
        for i in range(p.size):
            pn, _ = _sgd(p[i], a[i], has_wd, c_wd, c_lr)
            p[i] = pn
            out16[i] = _bf16(pn)


# -- Momentum ---------------------------------------------------------------------------------------
@_jit_inline
def _momentum(p, buf, g, has_wd, first, nesterov, c_wd, c_mu, c_d, c_lr):
    if has_wd:
        g = g + c_wd * p
    bn = g if first else c_mu * buf + c_d * g
    u = g + c_mu * bn if nesterov else bn
    return p - c_lr * u, bn, g


@_jit
def momentum_dry(p, mb, a, b, kf, acc, has_wd, first, nesterov, c_wd, c_mu, c_d, c_lr):
    gm = np.uint32(0)
    pm = np.uint32(0)
    bm = np.uint32(0)
    for i in range(p.size):
        g = _grad(a, b, i, kf, acc)
        pn, bn, g = _momentum(p[i], mb[i], g, has_wd, first, nesterov, c_wd, c_mu, c_d, c_lr)
        gm = max(gm, _bits(g) & _ABS)
        pm = max(pm, _bits(pn) & _ABS)
        bm = max(bm, _bits(bn) & _ABS)
    return gm, pm, bm, np.uint32(0), np.uint32(0)


@_jit
def momentum_commit(p, mb, a, b, kf, acc, out16, has_wd, first, nesterov, c_wd, c_mu, c_d, c_lr):
    if acc:
        for i in range(p.size):
            pn, bn, _ = _momentum(p[i], mb[i], (a[i] + b[i]) / kf, has_wd, first, nesterov, c_wd, c_mu, c_d,
                                  c_lr)
            p[i] = pn
            mb[i] = bn
            out16[i] = _bf16(pn)
    else:
        for i in range(p.size):
            pn, bn, _ = _momentum(p[i], mb[i], a[i], has_wd, first, nesterov, c_wd, c_mu, c_d, c_lr)
            p[i] = pn
            mb[i] = bn
            out16[i] = _bf16(pn)


# -- Adam / AdamW -----------------------------------------------------------------------------------
@_jit_inline
def _adam(p, m, v, g, wd_mode, c_wd, c_decay, c_b1, c_1b1, c_b2, c_1b2, c_sb2, c_eps, c_step):
    # wd_mode: 0 no weight decay, 1 L2 (Adam: added to the gradient), 2 decoupled (AdamW: on the weights)
    if wd_mode == 1:
        g = g + c_wd * p
    elif wd_mode == 2:
        p = c_decay * p
    m = c_b1 * m + c_1b1 * g
    v = c_b2 * v + c_1b2 * (g * g)
    d = np.sqrt(v) / c_sb2 + c_eps
    return p - c_step * (m / d), m, v, g


@_jit
def adam_dry(p, m, v, a, b, kf, acc, wd_mode, c_wd, c_decay, c_b1, c_1b1, c_b2, c_1b2, c_sb2, c_eps, c_step):
    gm = np.uint32(0)
    pm = np.uint32(0)
    mm = np.uint32(0)
    vm = np.uint32(0)
    vneg = np.uint32(0)
    for i in range(p.size):
        g = _grad(a, b, i, kf, acc)
        pn, mn, vn, g = _adam(p[i], m[i], v[i], g, wd_mode, c_wd, c_decay, c_b1, c_1b1, c_b2, c_1b2, c_sb2,
                              c_eps, c_step)
        gm = max(gm, _bits(g) & _ABS)
        pm = max(pm, _bits(pn) & _ABS)
        mm = max(mm, _bits(mn) & _ABS)
        vu = _bits(vn)
        vm = max(vm, vu & _ABS)
        vneg |= vu & _SIGN
    return gm, pm, mm, vm, vneg


@_jit
def adam_commit(p, m, v, a, b, kf, acc, out16, wd_mode, c_wd, c_decay, c_b1, c_1b1, c_b2, c_1b2, c_sb2, c_eps,
                c_step):
    if acc:
        for i in range(p.size):
            pn, mn, vn, _ = _adam(p[i], m[i], v[i], (a[i] + b[i]) / kf, wd_mode, c_wd, c_decay, c_b1, c_1b1,
                                  c_b2, c_1b2, c_sb2, c_eps, c_step)
            p[i] = pn
            m[i] = mn
            v[i] = vn
            out16[i] = _bf16(pn)
    else:
        for i in range(p.size):
            pn, mn, vn, _ = _adam(p[i], m[i], v[i], a[i], wd_mode, c_wd, c_decay, c_b1, c_1b1, c_b2, c_1b2,
                                  c_sb2, c_eps, c_step)
            p[i] = pn
            m[i] = mn
            v[i] = vn
            out16[i] = _bf16(pn)
