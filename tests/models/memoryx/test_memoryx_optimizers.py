"""MemoryX optimizers against hand-derived values, an independent per-element reference (binary64
arithmetic rounded to binary32 after every operation, which is exactly binary32 RNE for + - * / sqrt
because 53 >= 2*24 + 2) and, where installed, torch.optim on the CPU."""

import math

import numpy as np
import pytest

from models.memoryx import SGD, Adam, AdamW, Momentum, optimizer_from_config

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
        opt.step(p, g, st, t, lr)
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


@pytest.mark.parametrize("bad, match", [
    (lambda: SGD(lr=-1.0), "lr"),
    (lambda: SGD(lr=float("nan")), "lr"),
    (lambda: Momentum(momentum=0.0), "momentum"),
    (lambda: Momentum(nesterov=True, dampening=0.1), "Nesterov"),
    (lambda: Adam(betas=(1.0, 0.999)), "beta1"),
    (lambda: Adam(betas=(0.9,)), "betas"),
    (lambda: AdamW(eps=0.0), "eps"),
    (lambda: AdamW(weight_decay=-0.1), "weight_decay"),
])
def test_bad_hyper_parameters_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


def test_config_round_trip():
    for opt in OPTIMIZERS:
        assert optimizer_from_config(opt.config()) == opt
    with pytest.raises(ValueError, match="unknown optimizer kind"):
        optimizer_from_config({"kind": "lamb"})


# -- optional cross-check against torch.optim ---------------------------------------------------
def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed (optional extra: pip install -e '.[torch]'); "
                    "optimizers are checked against the scalar reference above instead")
    return torch


@pytest.mark.parametrize("opt", OPTIMIZERS, ids=[f"{o.kind}{i}" for i, o in enumerate(OPTIMIZERS)])
def test_matches_torch_optim(opt):
    torch = _torch()
    rng = np.random.default_rng(11)
    p = rng.standard_normal(4096).astype(F)
    tp = torch.nn.Parameter(torch.from_numpy(p.copy()))
    if isinstance(opt, SGD):
        topt = torch.optim.SGD([tp], lr=opt.lr, weight_decay=opt.weight_decay)
    elif isinstance(opt, Momentum):
        topt = torch.optim.SGD([tp], lr=opt.lr, momentum=opt.momentum, dampening=opt.dampening,
                               nesterov=opt.nesterov, weight_decay=opt.weight_decay)
    else:
        cls = torch.optim.AdamW if isinstance(opt, AdamW) else torch.optim.Adam
        topt = cls([tp], lr=opt.lr, betas=opt.betas, eps=opt.eps, weight_decay=opt.weight_decay,
                   foreach=False)
    st = opt.init_state(p.shape)
    for t in range(1, 6):
        g = rng.standard_normal(4096).astype(F)
        opt.step(p, g, st, t, opt.lr)
        tp.grad = torch.from_numpy(g.copy())
        topt.step()
    # torch orders some operations differently (lerp, addcdiv): equal within a few fp32 ulps
    np.testing.assert_allclose(p, tp.detach().numpy(), rtol=2e-6, atol=1e-7)
