"""MemoryX store: layers, bf16 copy and streaming order, gradients, accumulation, schedules, bad input,
non-finite results refused (or applied and flagged), settings validated whenever set."""

import copy

import numpy as np
import pytest
from memoryx_helpers import assert_same_state

from models.memoryx import (
    SGD,
    Adam,
    AdamW,
    ConfigError,
    DuplicateGradientError,
    GradientError,
    MemoryX,
    MemoryXError,
    Momentum,
    NonFiniteUpdateError,
    NonFiniteUpdateWarning,
    OptimizerConfigError,
    UnknownLayerError,
    initialize,
    linear_warmup_cosine,
    step_decay,
)
from models.numerics import bf16_bits

F = np.float32


def small_store(opt=None, **kw):
    mx = MemoryX(optimizer=opt or AdamW(lr=1e-2), **kw)
    mx.add_layer("fc1", (6, 5), "xavier_uniform", seed=1)
    mx.add_layer("fc2", (3, 6), "normal", seed=2)
    mx.add_layer("bias", (3,), "zeros")
    return mx


def grads_for(mx, rng):
    return {n: rng.standard_normal(mx.shape(n), dtype=F) for n in mx.layer_names()}


def test_add_layer_master_and_bf16():
    mx = small_store()
    assert mx.layer_names() == ["fc1", "fc2", "bias"]
    w = initialize("xavier_uniform", (6, 5), 1)
    np.testing.assert_array_equal(mx.master("fc1"), w)
    np.testing.assert_array_equal(mx.bf16("fc1"), bf16_bits(w))
    assert mx.bf16("fc1").dtype == np.uint16
    # master returns a copy
    m = mx.master("fc1")
    m[:] = 0
    np.testing.assert_array_equal(mx.master("fc1"), w)
    # an explicit array, float64 converted with RNE
    init = np.linspace(-1, 1, 12).reshape(3, 4)
    mx.add_layer("x", (3, 4), init)
    np.testing.assert_array_equal(mx.master("x"), init.astype(F))


def test_initializers_are_deterministic_and_scaled():
    a = initialize("kaiming_normal", (256, 512), 3)
    np.testing.assert_array_equal(a, initialize("kaiming_normal", (256, 512), 3))
    assert not np.array_equal(a, initialize("kaiming_normal", (256, 512), 4))
    assert abs(a.std() - np.sqrt(2 / 512)) < 0.01 * np.sqrt(2 / 512) * 5
    x = initialize("xavier_uniform", (256, 512), 0)
    bound = np.sqrt(6 / (256 + 512))
    assert x.min() >= -bound and x.max() <= bound and x.max() > 0.99 * bound
    assert initialize("ones", (4,)).sum() == 4


def test_stream_yields_rows_in_wafer_order():
    mx = small_store()
    full = mx.bf16("fc1")
    chunks = list(mx.stream("fc1"))
    assert len(chunks) == 6 and all(c.shape == (1, 5) and c.dtype == np.uint16 for c in chunks)
    np.testing.assert_array_equal(np.concatenate(chunks), full)
    chunks = list(mx.stream("fc1", rows_per_chunk=4))
    assert [c.shape for c in chunks] == [(4, 5), (2, 5)]
    np.testing.assert_array_equal(np.concatenate(chunks), full)
    bias = list(mx.stream("bias", rows_per_chunk=8))
    assert len(bias) == 1 and bias[0].shape == (1, 3)
    assert mx.counters()["store"]["streamed_bytes"] == 2 * full.nbytes + 6


def test_stream_refuses_an_update_in_the_middle():
    mx = small_store()
    s = mx.stream("fc1")
    next(s)
    mx.apply_gradient("fc1", np.ones((6, 5), F))
    with pytest.raises(MemoryXError, match="updated while it was streaming"):
        next(s)


@pytest.mark.parametrize("opt", [SGD(lr=0.1), Momentum(lr=0.1, nesterov=True), Adam(lr=1e-2), AdamW(lr=1e-2)],
                         ids=lambda o: o.kind)
def test_apply_gradient_is_the_optimizer_step(opt):
    mx = small_store(opt)
    rng = np.random.default_rng(5)
    p = {n: mx.master(n) for n in mx.layer_names()}
    st = {n: opt.init_state(mx.shape(n)) for n in mx.layer_names()}
    for t in range(1, 4):
        g = grads_for(mx, rng)
        for n in reversed(mx.layer_names()):      # gradients arrive last layer first
            assert mx.apply_gradient(n, g[n]) is True
            opt.numpy_step(p[n], g[n], st[n], t, opt.lr)      # the NumPy reference path
            np.testing.assert_array_equal(mx.master(n), p[n])
            np.testing.assert_array_equal(mx.bf16(n), bf16_bits(p[n]))
            for k, v in mx.state(n).items():
                np.testing.assert_array_equal(v, st[n][k])
            assert mx.step_count(n) == t
    assert mx.micro_steps == 3
    assert mx.counters()["store"]["updates"] == 9


def test_gradient_accumulation_sums_in_arrival_order_then_divides():
    opt = SGD(lr=0.5)
    mx = MemoryX(opt, accumulation_steps=3)
    mx.add_layer("w", (2, 3), "ones")
    g = [np.full((2, 3), v, F) for v in (1.0, 2.0**-24, 2.0**-24)]
    assert mx.apply_gradient("w", g[0]) is False
    np.testing.assert_array_equal(mx.master("w"), np.ones((2, 3), F))
    assert mx.apply_gradient("w", g[1]) is False
    assert mx.apply_gradient("w", g[2]) is True
    # fp32 in arrival order: (1 + 2^-24) rounds to 1 (tie to even), + 2^-24 again -> 1; / 3
    mean = F(F(F(1.0) + F(2.0**-24)) + F(2.0**-24)) / F(3)
    np.testing.assert_array_equal(mx.master("w"), np.full((2, 3), F(1.0) - F(0.5) * mean))
    assert mx.step_count("w") == 1


def test_accumulation_matches_a_single_step_on_the_mean_for_exact_values():
    rng = np.random.default_rng(1)
    parts = [rng.integers(-8, 8, (4, 4)).astype(F) for _ in range(4)]
    a = MemoryX(AdamW(lr=1e-2), accumulation_steps=4)
    b = MemoryX(AdamW(lr=1e-2))
    for mx in (a, b):
        mx.add_layer("w", (4, 4), "normal", seed=9)
    for g in parts:
        a.apply_gradient("w", g)
    b.apply_gradient("w", (parts[0] + parts[1] + parts[2] + parts[3]) / F(4))  # small ints: exact sums
    np.testing.assert_array_equal(a.master("w"), b.master("w"))


def test_lr_schedule_hook_sets_each_steps_learning_rate():
    sched = step_decay(0.5, 0.5, every=2)      # 0.5, 0.5, 0.25, 0.25, ...
    mx = MemoryX(SGD(lr=123.0), lr_schedule=sched)
    mx.add_layer("w", (1,), np.zeros(1))
    for _ in range(4):
        mx.apply_gradient("w", np.ones(1, F))
    np.testing.assert_array_equal(mx.master("w"), [-(0.5 + 0.5 + 0.25 + 0.25)])
    w = linear_warmup_cosine(1.0, 2, 6, min_lr=0.1)
    assert [w(1), w(2)] == [0.5, 1.0] and w(6) == 0.1 and w(9) == 0.1
    assert abs(w(4) - (0.1 + 0.45 * (1 + np.cos(np.pi * 0.5)))) < 1e-15


def test_bad_schedule_value_is_rejected_without_change():
    mx = MemoryX(SGD(lr=0.1), lr_schedule=lambda t: float("nan"))
    mx.add_layer("w", (2,), "ones")
    before = mx.snapshot()
    with pytest.raises(MemoryXError, match="lr_schedule"):
        mx.apply_gradient("w", np.ones(2, F))
    assert_same_state(before, mx.snapshot())


def test_micro_step_rounds_and_end_step():
    mx = small_store()
    one = {n: np.ones(mx.shape(n), F) for n in mx.layer_names()}
    mx.apply_gradient("fc1", one["fc1"])
    mx.apply_gradient("fc2", one["fc2"])
    with pytest.raises(DuplicateGradientError, match="second gradient for layer 'fc2'"):
        mx.apply_gradient("fc2", one["fc2"])
    mx.apply_gradient("bias", one["bias"])          # round complete: all layers may go again
    assert mx.micro_steps == 1
    mx.apply_gradient("fc2", one["fc2"])
    mx.end_step()                                   # close early (fc1, bias frozen this step)
    mx.apply_gradient("fc2", one["fc2"])
    assert [mx.step_count(n) for n in mx.layer_names()] == [1, 3, 1]


BAD_GRADIENTS = [
    ("fc1", lambda: np.ones((5, 6), F), GradientError, r"shape \(5, 6\), expected \(6, 5\)"),
    ("fc1", lambda: np.ones((6, 5), np.float64), GradientError, "dtype float64, expected float32"),
    ("fc1", lambda: np.ones((6, 5), np.float16), GradientError, "dtype float16"),
    ("fc1", lambda: [[1.0] * 5] * 6, GradientError, "must be a numpy ndarray"),
    ("fc1", lambda: np.where(np.eye(6, 5) > 0, np.nan, 1).astype(F), GradientError,
     r"NaN/Inf.*index \(0, 0\)"),
    ("fc2", lambda: np.full((3, 6), np.inf, F), GradientError, "18 NaN/Inf"),
    ("bias", lambda: np.array([0, -np.inf, 0], F), GradientError, r"index \(1,\)"),
    ("fc9", lambda: np.ones((6, 5), F), UnknownLayerError, "unknown layer 'fc9'"),
]


@pytest.mark.parametrize("budget", [None, 900], ids=["dram", "tiered"])
@pytest.mark.parametrize("layer, make, exc, match", BAD_GRADIENTS, ids=[m for *_, m in BAD_GRADIENTS])
def test_bad_gradient_named_and_state_unchanged(layer, make, exc, match, budget):
    mx = small_store(dram_budget_bytes=budget)
    mx.add_layer("extra", (2, 2), "normal")
    rng = np.random.default_rng(0)
    for n, g in grads_for(mx, rng).items():     # some history, so state is non-trivial
        mx.apply_gradient(n, g)
    mx.apply_gradient("extra", rng.standard_normal((2, 2), dtype=F))   # mid-round
    before, counters = mx.snapshot(), mx.counters()
    with pytest.raises(exc, match=match):
        mx.apply_gradient(layer, make())
    assert_same_state(before, mx.snapshot())
    assert mx.counters()["store"] == counters["store"]


def test_duplicate_gradient_leaves_state_unchanged():
    mx = small_store()
    g = np.ones((6, 5), F)
    mx.apply_gradient("fc1", g)
    before = mx.snapshot()
    with pytest.raises(DuplicateGradientError, match="'fc1'"):
        mx.apply_gradient("fc1", g)
    assert_same_state(before, mx.snapshot())


def test_accumulation_overflow_is_rejected_without_change():
    mx = MemoryX(SGD(lr=0.1), accumulation_steps=2)
    mx.add_layer("w", (2,), "ones")
    mx.apply_gradient("w", np.full(2, 3e38, F))
    before = mx.snapshot()
    with pytest.raises(GradientError, match="overflows fp32"):
        mx.apply_gradient("w", np.full(2, 3e38, F))
    assert_same_state(before, mx.snapshot())


@pytest.mark.parametrize("call, match", [
    (lambda mx: mx.add_layer("fc1", (2, 2)), "already exists"),
    (lambda mx: mx.add_layer("", (2, 2)), "non-empty str"),
    (lambda mx: mx.add_layer("z", (2, 0)), "positive dimensions"),
    (lambda mx: mx.add_layer("z", (2, 2, 2)), "1 or 2"),
    (lambda mx: mx.add_layer("z", (2, 2), np.ones((2, 3))), r"init has shape \(2, 3\)"),
    (lambda mx: mx.add_layer("z", (2,), np.array([1.0, np.nan])), "NaN or Inf"),
    (lambda mx: mx.add_layer("z", (2,), np.array([1e39, 0.0])), "NaN or Inf"),
    (lambda mx: mx.add_layer("z", (2,), np.array([1, 2])), "float ndarray"),
    (lambda mx: mx.add_layer("z", (2,), "he"), "unknown initializer 'he'"),
    (lambda mx: mx.master("nope"), "unknown layer 'nope'"),
    (lambda mx: mx.bf16("nope"), "unknown layer"),
    (lambda mx: mx.stream("nope"), "unknown layer"),
    (lambda mx: mx.stream("fc1", rows_per_chunk=0), "rows_per_chunk"),
])
def test_bad_calls_are_named_and_change_nothing(call, match):
    mx = small_store()
    before = mx.snapshot()
    with pytest.raises(MemoryXError, match=match):
        call(mx)
    assert_same_state(before, mx.snapshot())


@pytest.mark.parametrize("kw, match", [
    ({"optimizer": "adamw"}, "optimizer must be"),
    ({"optimizer": AdamW(), "accumulation_steps": 0}, "accumulation_steps"),
    ({"optimizer": AdamW(), "dram_budget_bytes": -1}, "dram_budget_bytes"),
    ({"optimizer": AdamW(), "lr_schedule": 0.1}, "lr_schedule"),
])
def test_bad_construction(kw, match):
    with pytest.raises(MemoryXError, match=match):
        MemoryX(**kw)


def test_stored_bytes_equal_the_accounting():
    for opt, bpp in [(SGD(), 10), (Momentum(), 14), (Adam(), 18), (AdamW(), 18)]:
        mx = small_store(opt)
        assert mx.bytes_per_parameter()["total"] == bpp
        assert mx.num_parameters() == 30 + 18 + 3
        assert mx.stored_bytes() == mx.num_parameters() * bpp


# -- non-finite results ------------------------------------------------------------------------------
OVERFLOWS = [
    # finite inputs that overflow: SGD lr 2, gradient 2e38: p - 2 * 2e38 overflows
    (SGD(lr=2.0), np.ones(4), np.full(4, 2e38, F), "master"),
    (Momentum(lr=1e30), np.ones(4), np.full(4, 1e30, F), "master"),
    (Momentum(lr=0.1, momentum=0.9, nesterov=True), np.full(4, 1e3), np.full(4, 3e38, F), "master"),
    (Adam(lr=1e-3), np.ones(4), np.full(4, 2e19, F), "exp_avg_sq"),        # g * g overflows
    (AdamW(lr=1e38, weight_decay=0.0), np.ones(4), np.full(4, 1.0, F), "master"),   # c_step = inf
    (AdamW(lr=1e-3, weight_decay=1e4), np.full(4, 3e38), np.ones(4, F), "master"),   # |1 - lr wd| * p
]


@pytest.mark.parametrize("budget", [None, 64], ids=["dram", "flash"])
@pytest.mark.parametrize("opt, w, g, bad", OVERFLOWS, ids=[f"{o.kind}{i}" for i, (o, *_) in enumerate(OVERFLOWS)])
def test_a_step_that_would_overflow_is_refused_and_changes_nothing(opt, w, g, bad, budget):
    opt = copy.deepcopy(opt)                              # this test changes its hyper-parameters
    mx = MemoryX(opt, dram_budget_bytes=budget)
    mx.add_layer("w", w.shape, w)
    mx.add_layer("other", (3,), "ones")
    lr, opt.lr = opt.lr, 1e-3
    mx.apply_gradient("other", np.ones(3, F))             # some history: a mid-round state
    opt.lr = lr
    before, counters = mx.snapshot(), mx.counters()
    with pytest.raises(NonFiniteUpdateError, match=rf"step 1 of layer 'w' \({opt.kind}.*{bad}.*non-finite"):
        mx.apply_gradient("w", g)
    assert_same_state(before, mx.snapshot())
    assert mx.counters()["store"] == counters["store"]
    assert np.isfinite(mx.master("w")).all()
    mx.optimizer.lr, mx.optimizer.weight_decay = 1e-3, 0.0   # the store goes on with sane settings
    mx.apply_gradient("w", np.zeros_like(g))
    assert mx.step_count("w") == 1 and np.isfinite(mx.master("w")).all()


def test_overflow_refused_at_the_kth_micro_batch_keeps_the_accumulated_sum():
    mx = MemoryX(SGD(lr=1e30), accumulation_steps=2)
    mx.add_layer("w", (3,), "ones")
    mx.apply_gradient("w", np.full(3, 1e20, F))
    before = mx.snapshot()
    with pytest.raises(NonFiniteUpdateError, match="layer 'w'"):
        mx.apply_gradient("w", np.full(3, 1e20, F))
    assert_same_state(before, mx.snapshot())
    mx.optimizer.lr = 1e-20
    assert mx.apply_gradient("w", np.zeros(3, F)) is True      # (1e20 + 0) / 2, the refused one never landed
    np.testing.assert_array_equal(mx.master("w"), np.full(3, F(1) - F(1e-20) * (F(1e20) / F(2)), F))


def test_on_nonfinite_apply_applies_and_flags():
    mx = MemoryX(SGD(lr=2.0), on_nonfinite="apply")
    mx.add_layer("w", (4,), np.ones(4))
    mx.add_layer("ok", (2,), "ones")
    with pytest.warns(NonFiniteUpdateWarning, match="layer 'w'.*step 1"):
        assert mx.apply_gradient("w", np.full(4, 2e38, F)) is True
    assert np.isneginf(mx.master("w")).all()
    np.testing.assert_array_equal(mx.bf16("w"), np.full(4, 0xFF80, np.uint16))   # -inf in bf16
    assert mx.nonfinite_layers() == {"w": 1}
    assert mx.counters()["store"]["nonfinite_updates"] == 1
    mx.apply_gradient("ok", np.ones(2, F))
    mx.apply_gradient("w", np.ones(4, F))                 # stays flagged from step 1, no second warning
    assert mx.nonfinite_layers() == {"w": 1} and mx.counters()["store"]["nonfinite_updates"] == 2


def test_steps_are_proven_finite_without_an_extra_pass_in_normal_training(tmp_path):
    mx = small_store(AdamW(lr=1e-2))
    rng = np.random.default_rng(0)
    for _ in range(5):
        for n, g in grads_for(mx, rng).items():
            mx.apply_gradient(n, g)
    assert mx.counters()["store"]["checked_updates"] == 0      # the bound proved every step finite
    mx.export_safetensors(tmp_path / "w.safetensors", include_state=True)
    mx.import_safetensors(tmp_path / "w.safetensors")          # bounds unknown after an import:
    for n, g in grads_for(mx, rng).items():
        mx.apply_gradient(n, g)
    assert mx.counters()["store"]["checked_updates"] == 3      # one exact check per layer, then
    for n, g in grads_for(mx, rng).items():
        mx.apply_gradient(n, g)
    assert mx.counters()["store"]["checked_updates"] == 3      # proven again


def test_values_near_the_float32_limit_take_the_exact_path_and_stay_bit_identical():
    opt = SGD(lr=1.0)
    w = np.array([3e38, -3e38, 1.0, 0.0])
    g = np.array([1e38, -1e38, 1e38, 0.0], F)
    mx = MemoryX(opt)
    mx.add_layer("w", (4,), w)
    mx.apply_gradient("w", g)                                   # finite: 3e38 - 1e38 etc.
    ref = w.astype(F)
    opt.numpy_step(ref, g, {}, 1, 1.0)
    np.testing.assert_array_equal(mx.master("w"), ref)
    assert mx.counters()["store"]["checked_updates"] == 1


# -- settings validated whenever set -------------------------------------------------------------
@pytest.mark.parametrize("field, value, exc, match", [
    ("accumulation_steps", 0, ConfigError, "accumulation_steps must be an int >= 1"),
    ("lr_schedule", 0.1, ConfigError, "lr_schedule must be callable"),
    ("chunk_elems", 0, ConfigError, "chunk_elems"),
    ("on_nonfinite", "ignore", ConfigError, "on_nonfinite"),
    ("optimizer", "sgd", ConfigError, "optimizer must be"),
    ("optimizer", SGD(), ConfigError, "keeps state"),
])
def test_store_settings_are_validated_whenever_set(field, value, exc, match):
    mx = small_store(AdamW(lr=1e-2))
    before = getattr(mx, field)
    with pytest.raises(exc, match=match):
        setattr(mx, field, value)
    assert getattr(mx, field) is before


def test_optimizer_hyper_parameters_set_on_a_live_store_are_validated_and_used():
    mx = small_store(SGD(lr=0.1))
    with pytest.raises(OptimizerConfigError, match="lr must be >= 0"):
        mx.optimizer.lr = -1e-2
    assert mx.optimizer.lr == 0.1
    mx.optimizer.lr = 0.5
    w = mx.master("bias")
    mx.apply_gradient("bias", np.ones(3, F))
    np.testing.assert_array_equal(mx.master("bias"), w - F(0.5))


def test_accumulation_steps_cannot_change_with_pending_micro_batches():
    mx = MemoryX(SGD(lr=0.1), accumulation_steps=2)
    mx.add_layer("w", (2,), "ones")
    mx.apply_gradient("w", np.ones(2, F))
    with pytest.raises(ConfigError, match=r"layers \['w'\] hold pending"):
        mx.accumulation_steps = 1
    assert mx.accumulation_steps == 2
