"""MemoryX optimizers against hand-derived values, an independent per-element reference (binary64
arithmetic rounded to binary32 after every operation, which is exactly binary32 RNE for + - * / sqrt
because 53 >= 2*24 + 2), the fused kernels against the NumPy reference path bit for bit (random,
subnormal and huge values), the overflow bound's soundness, hyper-parameter validation, and optax
(jax on the CPU) as an established library."""

import math
import os

import numpy as np
import pytest

from models.memoryx import (
    SGD,
    Adam,
    AdamW,
    MemoryXError,
    Momentum,
    OptimizerConfigError,
    optimizer_from_config,
)
from models.memoryx.kernels import INF_BITS
from models.numerics import bf16_bits

F = np.float32


def r32(x):
    """Round a binary64 value to binary32 (RNE) and back to a Python float."""
    return float(np.float32(x))


def ref_step(opt, p, g, st, t, lr):
    """Straightforward scalar implementation of the documented formulas, one element at a time."""
    p, g = float(p), float(g)
    if isinstance(opt, SGD):
        if opt.weight_decay:
            g = r32(g + r32(r32(opt.weight_decay) * p))
        return r32(p - r32(r32(lr) * g)), st
    if isinstance(opt, Momentum):
        mu = r32(opt.momentum)
        if opt.weight_decay:
            g = r32(g + r32(r32(opt.weight_decay) * p))
        b = g if t == 1 else r32(r32(mu * st["momentum_buffer"]) + r32(r32(1 - opt.dampening) * g))
        u = r32(g + r32(mu * b)) if opt.nesterov else b
        return r32(p - r32(r32(lr) * u)), {"momentum_buffer": b}
    b1, b2 = opt.betas
    if isinstance(opt, AdamW):
        if opt.weight_decay:
            p = r32(r32(1 - lr * opt.weight_decay) * p)
    elif opt.weight_decay:
        g = r32(g + r32(r32(opt.weight_decay) * p))
    m = r32(r32(r32(b1) * st["exp_avg"]) + r32(r32(1 - b1) * g))
    v = r32(r32(r32(b2) * st["exp_avg_sq"]) + r32(r32(1 - b2) * r32(g * g)))
    d = r32(r32(r32(math.sqrt(v)) / r32(math.sqrt(1 - b2 ** t))) + r32(opt.eps))
    step = r32(lr / (1 - b1 ** t))
    return r32(p - r32(step * r32(m / d))), {"exp_avg": m, "exp_avg_sq": v}


OPTIMIZERS = [
    SGD(lr=0.05),
    SGD(lr=0.05, weight_decay=0.1),
    Momentum(lr=0.05, momentum=0.9),
    Momentum(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    Momentum(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    Adam(lr=1e-2),
    Adam(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05),
    AdamW(lr=1e-2),
    AdamW(lr=3e-3, betas=(0.85, 0.995), eps=1e-7, weight_decay=0.1),
]


@pytest.mark.parametrize("opt", OPTIMIZERS, ids=[f"{o.kind}{i}" for i, o in enumerate(OPTIMIZERS)])
def test_matches_scalar_reference_bit_exactly(opt):
    rng = np.random.default_rng(7)
    n = 48
    p = rng.standard_normal(n).astype(F)
    # include tiny, huge-ratio and zero gradients to exercise rounding and eps
    grads = [rng.standard_normal(n).astype(F) * F(10.0) ** rng.integers(-6, 3, n).astype(F) for _ in range(5)]
    grads[2][:4] = 0.0
    st = opt.init_state(p.shape)
    ref_p = [float(x) for x in p]
    ref_st = [{k: 0.0 for k in opt.state_names} for _ in range(n)]
    for t, g in enumerate(grads, start=1):
        lr = opt.lr * (1.0 if t < 3 else 0.5)   # a changing learning rate (as a schedule would)
        opt.numpy_step(p, g, st, t, lr)
        for i in range(n):
            ref_p[i], ref_st[i] = ref_step(opt, ref_p[i], g[i], ref_st[i], t, lr)
        np.testing.assert_array_equal(p, np.array(ref_p, F), err_msg=f"step {t}")
        for k in opt.state_names:
            np.testing.assert_array_equal(st[k], np.array([s[k] for s in ref_st], F), err_msg=f"{k} step {t}")


def test_sgd_hand_derived():
    p = np.array([1.0, -2.0], F)
    SGD(lr=0.25).step(p, np.array([0.5, 4.0], F), {}, 1, 0.25)
    np.testing.assert_array_equal(p, [0.875, -3.0])
    p = np.array([1.0], F)   # L2: g = 0.5 + 0.5 * 1 = 1, p = 1 - 0.25
    SGD(lr=0.25, weight_decay=0.5).step(p, np.array([0.5], F), {}, 1, 0.25)
    np.testing.assert_array_equal(p, [0.75])


def test_momentum_and_nesterov_hand_derived():
    opt = Momentum(lr=0.25, momentum=0.5)
    p, st = np.array([1.0], F), opt.init_state((1,))
    opt.step(p, np.array([1.0], F), st, 1, 0.25)     # b = 1, p = 0.75
    opt.step(p, np.array([2.0], F), st, 2, 0.25)     # b = 0.5 + 2 = 2.5, p = 0.75 - 0.625
    np.testing.assert_array_equal(st["momentum_buffer"], [2.5])
    np.testing.assert_array_equal(p, [0.125])
    opt = Momentum(lr=0.25, momentum=0.5, nesterov=True)
    p, st = np.array([1.0], F), opt.init_state((1,))
    opt.step(p, np.array([1.0], F), st, 1, 0.25)     # b = 1, u = 1 + 0.5 = 1.5, p = 1 - 0.375
    np.testing.assert_array_equal(p, [0.625])
    opt.step(p, np.array([2.0], F), st, 2, 0.25)     # b = 2.5, u = 2 + 1.25 = 3.25, p -= 0.8125
    np.testing.assert_array_equal(p, [-0.1875])


def test_adam_adamw_hand_derived_first_step():
    # betas (0.5, 0.75): m = 0.5 g, v = 0.25 g^2, sqrt(1 - 0.75) = 0.5, step = lr / 0.5; eps 2^-30
    # vanishes next to 2 in fp32, so the update is exactly lr * sign(g) (the textbook Adam property)
    eps = 2.0 ** -30
    for opt, p_after in [(Adam(lr=0.25, betas=(0.5, 0.75), eps=eps), 0.75),
                         (AdamW(lr=0.25, betas=(0.5, 0.75), eps=eps, weight_decay=0.0), 0.75),
                         # decoupled: p = (1 - 0.25 * 0.5) * 1 = 0.875, then - 0.25
                         (AdamW(lr=0.25, betas=(0.5, 0.75), eps=eps, weight_decay=0.5), 0.625),
                         # L2: g = 2 + 0.5 = 2.5, m = 1.25, v = 1.5625, d = 1.25 / 0.5 = 2.5,
                         # p = 1 - 0.5 * 0.5
                         (Adam(lr=0.25, betas=(0.5, 0.75), eps=eps, weight_decay=0.5), 0.75)]:
        p, st = np.array([1.0], F), opt.init_state((1,))
        opt.step(p, np.array([2.0], F), st, 1, 0.25)
        np.testing.assert_array_equal(p, [p_after], err_msg=repr(opt))


def test_adam_second_step_hand_derived():
    # step 2 with g = 2 again: m = 0.5*1 + 0.5*2 = 1.5, v = 0.75*1 + 0.25*4 = 1.75,
    # d = sqrt(1.75)/sqrt(1 - 0.5625) + eps = 2 (exactly: sqrt(1.75/0.4375) = sqrt(4)) up to rounding,
    # step = 0.25 / 0.75; p = 0.75 - (1/3) * 0.75 = 0.5
    opt = Adam(lr=0.25, betas=(0.5, 0.75), eps=2.0 ** -30)
    p, st = np.array([1.0], F), opt.init_state((1,))
    opt.step(p, np.array([2.0], F), st, 1, 0.25)
    opt.step(p, np.array([2.0], F), st, 2, 0.25)
    assert abs(float(p[0]) - 0.5) <= 2 * np.spacing(F(0.5))


def test_epsilon_is_outside_the_square_root():
    # with v = 0 (zero gradient history) the update is m / eps: eps inside the root would give m / sqrt(eps)
    opt = Adam(lr=1.0, betas=(0.5, 0.75), eps=0.25)
    p, st = np.array([0.0], F), opt.init_state((1,))
    st["exp_avg"][:] = 1.0   # as if an earlier step left m = 1 and v = 0 (possible for subnormal g)
    opt.step(p, np.array([0.0], F), st, 1, 1.0)
    # m = 0.5, d = 0 / 0.5 + 0.25, step = 1 / 0.5 = 2: p = -2 * 0.5 / 0.25 = -4
    np.testing.assert_array_equal(p, [-4.0])


def test_chunking_does_not_change_results():
    rng = np.random.default_rng(3)
    opt = AdamW(lr=1e-2)
    p1 = rng.standard_normal(1000).astype(F)
    p2 = p1.copy()
    s1, s2 = opt.init_state(p1.shape), opt.init_state(p2.shape)
    for t in range(1, 4):
        g = rng.standard_normal(1000).astype(F)
        opt.step(p1, g, s1, t, 1e-2)
        for a in range(0, 1000, 77):
            opt.step(p2[a:a + 77], g[a:a + 77], {k: v[a:a + 77] for k, v in s2.items()}, t, 1e-2)
    np.testing.assert_array_equal(p1, p2)


def wild(rng, n, low=-45, high=38, signed=True):
    """float32 values spread over the whole exponent range: subnormals, huge values, zeros, -0.0."""
    x = (10.0 ** rng.uniform(low, high, n)).astype(F)
    if signed:
        x *= rng.choice(np.array([-1, 1], F), n)
    x[rng.integers(0, n, n // 16)] = 0.0
    if signed:
        x[rng.integers(0, n, n // 16)] = -0.0
    return x


def assert_bits_equal(a, b, what):
    na, nb = np.isnan(a), np.isnan(b)
    np.testing.assert_array_equal(na, nb, err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(a.view(np.uint32)[~na], b.view(np.uint32)[~nb], err_msg=what)


@pytest.mark.parametrize("opt", OPTIMIZERS, ids=[f"{o.kind}{i}" for i, o in enumerate(OPTIMIZERS)])
@pytest.mark.parametrize("scale", ["normal", "wild", "tiny"])
def test_fused_kernel_equals_numpy_path_bit_for_bit(opt, scale):
    rng = np.random.default_rng(21)
    n = 20011                                    # odd size: vector loop tails are exercised too
    if scale == "normal":
        p = rng.standard_normal(n).astype(F)
        grads = [rng.standard_normal(n).astype(F) for _ in range(4)]
    elif scale == "wild":
        p = wild(rng, n)
        grads = [wild(rng, n) for _ in range(4)]
    else:                                        # subnormal territory
        p = wild(rng, n, -45, -30)
        grads = [wild(rng, n, -45, -36) for _ in range(4)]
    st_np = {k: (wild(rng, n, signed=k != "exp_avg_sq") if scale == "wild" else np.zeros(n, F))
             for k in opt.state_names}
    p_np, p_fu = p.copy(), p.copy()
    st_fu = {k: v.copy() for k, v in st_np.items()}
    with np.errstate(all="ignore"):
        for t, g in enumerate(grads, start=1):
            lr = opt.lr * (1.0 if t < 3 else 0.37)
            opt.numpy_step(p_np, g, st_np, t, lr)
            opt.step(p_fu, g, st_fu, t, lr)
            assert_bits_equal(p_fu, p_np, f"param step {t}")
            for k in opt.state_names:
                assert_bits_equal(st_fu[k], st_np[k], f"{k} step {t}")


@pytest.mark.parametrize("opt", OPTIMIZERS, ids=[f"{o.kind}{i}" for i, o in enumerate(OPTIMIZERS)])
def test_fused_commit_and_dry_run_agree_with_numpy(opt):
    """The kernels MemoryX calls: the bf16 copy written in the same pass, the micro-batch mean formed on
    the fly ((buffer + grad) / k), and the dry run's maxima equal to those of the committed result."""
    rng = np.random.default_rng(5)
    n = 4099
    with np.errstate(all="ignore"):
        for k, scale in [(1, "wild"), (3, "wild"), (3, "normal")]:
            p = wild(rng, n) if scale == "wild" else rng.standard_normal(n).astype(F)
            st = {s: (np.abs(wild(rng, n)) if s == "exp_avg_sq" else wild(rng, n)) for s in opt.state_names}
            buf, g = wild(rng, n, high=20), wild(rng, n, high=20)
            for t in (1, 2):
                ref_p, ref_st = p.copy(), {s: v.copy() for s, v in st.items()}
                mean = np.add(buf, g, dtype=F) / F(k) if k > 1 else g
                opt.numpy_step(ref_p, mean, ref_st, t, 0.3)
                out16 = np.zeros(n, np.uint16)
                _, pm, s1, s2, neg = opt.dry(p, [st[s] for s in opt.state_names], buf if k > 1 else g, g, k, t, 0.3)
                opt.commit(p, [st[s] for s in opt.state_names], buf if k > 1 else g, g, k, out16, t, 0.3)
                assert_bits_equal(p, ref_p, f"k={k} t={t} param")
                for s in opt.state_names:
                    assert_bits_equal(st[s], ref_st[s], f"k={k} t={t} {s}")
                np.testing.assert_array_equal(out16, bf16_bits(ref_p))
                tops = [pm, s1, s2][:1 + len(opt.state_names)]
                for top, arr in zip(tops, [ref_p, *(ref_st[s] for s in opt.state_names)]):
                    assert int(top) == int((arr.view(np.uint32) & 0x7FFFFFFF).max())


@pytest.mark.parametrize("opt", OPTIMIZERS + [SGD(lr=1e30), AdamW(lr=1e20, eps=1e-30), Momentum(lr=3e19)],
                         ids=lambda o: o.kind)
def test_overflow_bound_is_sound(opt):
    """Whenever Optimizer.bound says "finite", the step is finite and within the returned bounds."""
    rng = np.random.default_rng(9)
    proven = 0
    for trial in range(60):
        top = rng.uniform(-10, 38)
        n = 257
        p = wild(rng, n, top - 8, top)
        g = wild(rng, n, top - 8, top)
        st = {s: (np.abs(wild(rng, n, top - 8, top)) if s == "exp_avg_sq" else wild(rng, n, top - 8, top))
              for s in opt.state_names}
        t = int(rng.integers(1, 4))
        stats = {"master": float(np.abs(p).max()), **{s: float(np.abs(v).max()) for s, v in st.items()}}
        bounds = opt.bound(stats, float(np.abs(g).max()), t, opt.lr)
        with np.errstate(all="ignore"):
            opt.numpy_step(p, g, st, t, opt.lr)
        if bounds is None:
            continue
        proven += 1
        for name, arr in [("master", p), *st.items()]:
            assert np.isfinite(arr).all(), (trial, name)
            assert float(np.abs(arr).max()) <= bounds[name], (trial, name)
    if any(opt is o for o in OPTIMIZERS):       # the extreme ones may never be provable
        assert proven >= 10


def test_bound_refuses_when_it_cannot_prove():
    assert SGD(lr=2.0).bound({"master": 1.0}, 2e38, 1, 2.0) is None
    assert AdamW(lr=1e-3).bound({"master": 3e38, "exp_avg": 0.0, "exp_avg_sq": 0.0}, 1.0, 1, 1e-3) is None
    assert AdamW(lr=1e-3).bound({"master": 1.0, "exp_avg": 0.0, "exp_avg_sq": 0.0}, 1.0, 1, 1e-3) is not None
    assert INF_BITS == 0x7F800000


def test_numpy_fallback_for_non_contiguous_arrays():
    opt = AdamW(lr=1e-2)
    rng = np.random.default_rng(0)
    p = rng.standard_normal((8, 6)).astype(F)
    g = rng.standard_normal((8, 6)).astype(F)
    a, b = np.asfortranarray(p), p.copy()
    sa, sb = opt.init_state(p.shape), opt.init_state(p.shape)
    sa = {k: np.asfortranarray(v) for k, v in sa.items()}
    opt.step(a, np.asfortranarray(g), sa, 1, 1e-2)
    opt.step(b, g, sb, 1, 1e-2)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad, match", [
    (lambda: SGD(lr=-1.0), "lr"),
    (lambda: SGD(lr=float("nan")), "lr"),
    (lambda: Momentum(momentum=0.0), "momentum"),
    (lambda: Momentum(nesterov=True, dampening=0.1), "Nesterov"),
    (lambda: Adam(betas=(1.0, 0.999)), "beta1"),
    (lambda: Adam(betas=(0.9,)), "betas"),
    (lambda: AdamW(eps=0.0), "eps"),
    (lambda: AdamW(weight_decay=-0.1), "weight_decay"),
    (lambda: optimizer_from_config({"kind": "adamw", "lr": -1}), "lr"),
    (lambda: optimizer_from_config({"kind": "adamw", "momentum": 0.9}), "adamw"),
])
def test_bad_hyper_parameters_are_named(bad, match):
    with pytest.raises(OptimizerConfigError, match=match) as e:
        bad()
    assert isinstance(e.value, MemoryXError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("opt, field, value, match", [
    (SGD(), "lr", -1e-2, "lr must be >= 0"),
    (SGD(), "weight_decay", float("inf"), "weight_decay must be a finite number"),
    (Momentum(), "momentum", 0.0, "momentum must be > 0"),
    (Momentum(nesterov=True), "dampening", 0.5, "Nesterov"),
    (Momentum(dampening=0.5), "nesterov", True, "Nesterov"),
    (Momentum(), "nesterov", 1, "nesterov must be a bool"),
    (Adam(), "betas", (0.9, 1.0), "beta2 must be < 1"),
    (Adam(), "eps", -1.0, "eps must be > 0"),
    (AdamW(), "lr", "0.1", "lr must be a finite number"),
    (AdamW(), "lerning_rate", 0.1, "no hyper-parameter 'lerning_rate'"),
])
def test_hyper_parameters_are_validated_whenever_set(opt, field, value, match):
    before = opt.config()
    with pytest.raises(OptimizerConfigError, match=match):
        setattr(opt, field, value)
    assert opt.config() == before


def test_valid_assignment_takes_effect():
    opt = Adam()
    opt.lr = 3e-4
    opt.betas = [0.8, 0.99]
    assert opt.lr == 3e-4 and opt.betas == (0.8, 0.99)
    m = Momentum(nesterov=True)
    m.nesterov = False
    m.dampening = 0.5
    assert m.config()["dampening"] == 0.5


def test_config_round_trip():
    for opt in OPTIMIZERS:
        assert optimizer_from_config(opt.config()) == opt
    with pytest.raises(OptimizerConfigError, match="unknown optimizer kind"):
        optimizer_from_config({"kind": "lamb"})


# -- cross-check against optax (jax on the CPU) ---------------------------------------------------
# optax expresses every configuration above except Momentum with dampening != 0 (optax.trace has no
# dampening); that one is covered by the scalar reference test.
CROSS = [o for o in OPTIMIZERS if not (isinstance(o, Momentum) and o.dampening)]


def _optax_for(optax, opt):
    if isinstance(opt, AdamW):
        return optax.adamw(opt.lr, b1=opt.betas[0], b2=opt.betas[1], eps=opt.eps, weight_decay=opt.weight_decay)
    if isinstance(opt, Adam):
        core = optax.adam(opt.lr, b1=opt.betas[0], b2=opt.betas[1], eps=opt.eps)
    elif isinstance(opt, Momentum):
        core = optax.sgd(opt.lr, momentum=opt.momentum, nesterov=opt.nesterov)
    else:
        core = optax.sgd(opt.lr)
    # L2 weight decay (torch.optim semantics): added to the gradient before the optimizer
    return optax.chain(optax.add_decayed_weights(opt.weight_decay), core) if opt.weight_decay else core


@pytest.mark.parametrize("opt", CROSS, ids=[f"{o.kind}{i}" for i, o in enumerate(CROSS)])
def test_matches_optax(opt):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import optax

    steps = 5
    rng = np.random.default_rng(11)
    p = rng.standard_normal(4096).astype(F)
    tx = _optax_for(optax, opt)
    jp = jnp.asarray(p)
    state = tx.init(jp)
    update = jax.jit(tx.update)
    st = opt.init_state(p.shape)
    for t in range(1, steps + 1):
        g = rng.standard_normal(4096).astype(F)
        opt.step(p, g, st, t, opt.lr)
        u, state = update(jnp.asarray(g), state, jp)
        jp = optax.apply_updates(jp, u)
    ref = np.asarray(jp)
    assert ref.dtype == F
    # Tolerances from the operation order. Per step, optax rounds some operations differently (XLA may
    # contract a * b + c into one FMA; sqrt(v / c) instead of sqrt(v) / sqrt(c)): a few ulps of |p|, so
    # rtol 2e-6 over 5 steps. Adam/AdamW: optax forms the bias corrections 1 - beta**t in float32
    # (beta rounded to fp32, then the power), whose relative error is up to t * 2**-24 * beta**t / (1 -
    # beta**t), 6e-5 for beta2 = 0.999 at t = 1; the update (~lr per step) inherits it: atol
    # steps * lr * 1e-4. SGD and Momentum have no such term (atol: an ulp of the update per step).
    adam = isinstance(opt, Adam)
    np.testing.assert_allclose(p, ref, rtol=2e-6, atol=steps * opt.lr * (1e-4 if adam else 1e-6))
