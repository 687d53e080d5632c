"""Training loop through the exact kernels: N systems reduce in SwarmX tree order, MemoryX applies
the optimizer, the loss falls, and on load_digits the result is close to plain float32 numpy."""

import numpy as np
import pytest

from models.memoryx import SGD, AdamW
from models.numerics import tree_sum
from models.pipeline import kernels
from models.pipeline.digits import digits_experiment, load
from models.pipeline.training import Float32Trainer, WaferTrainer, build_memoryx, system_gradients

DIMS = (64, 24, 16, 10)


def test_step_applies_tree_ordered_sum_of_system_gradients():
    """5 systems: what MemoryX applies is tree_sum over per-system gradients, each computed alone."""
    x_tr, _, y_tr, _ = load()
    n, b, mesh = 5, 4, (2, 3)
    x, y = x_tr[:n * b], y_tr[:n * b]
    mx = build_memoryx(DIMS, optimizer=SGD(lr=0.5), seed=3)
    twin = build_memoryx(DIMS, optimizer=SGD(lr=0.5), seed=3)
    trainer = WaferTrainer(DIMS, mx, mesh=mesh, systems=n, batch=b)
    w16s = [twin.bf16(f"fc{i}") for i in range(3)]
    per_system = [system_gradients(w16s, kernels.to_bf16(x[i * b:(i + 1) * b].T), y[i * b:(i + 1) * b],
                                   mesh, n * b)[1] for i in range(n)]
    result = trainer.step(x, y)
    for i in range(3):
        expect = tree_sum(np.stack([g[i] for g in per_system]))
        np.testing.assert_array_equal(result.grads[i].view(np.uint32), expect.view(np.uint32))
        twin.apply_gradient(f"fc{i}", expect)
        np.testing.assert_array_equal(mx.master(f"fc{i}").view(np.uint32),
                                      twin.master(f"fc{i}").view(np.uint32))
    # the gradient is that of the whole batch: close to one system holding all 20 samples
    one = system_gradients(w16s, kernels.to_bf16(x.T), y, mesh, n * b)[1]
    for i in range(3):
        np.testing.assert_allclose(result.grads[i], one[i], rtol=0, atol=1e-3 * np.abs(one[i]).max())


def test_single_system_gradient_matches_float64_backprop():
    """The exact gradient is the true gradient up to bf16 rounding of weights, activations, dZ."""
    x_tr, _, y_tr, _ = load()
    mx = build_memoryx(DIMS, seed=1)
    w = [mx.bf16(f"fc{i}") for i in range(3)]
    x16 = kernels.to_bf16(x_tr[:8].T)
    _, grads = system_gradients(w, x16, y_tr[:8], (2, 2), 8)
    w64 = [kernels.bf16_mul(wi, np.full_like(wi, 0x3F80)).astype(np.float64) for wi in w]  # exact values
    a = [kernels.bf16_mul(x16, np.full_like(x16, 0x3F80)).astype(np.float64)]
    zs = []
    for wi in w64:
        zs.append(wi @ a[-1])
        a.append(np.maximum(zs[-1], 0))
    s = np.exp(zs[-1] - zs[-1].max(0)) / np.exp(zs[-1] - zs[-1].max(0)).sum(0)
    dz = (s - np.eye(10)[:, y_tr[:8]]) / 8
    for i in (2, 1, 0):
        g = dz @ a[i].T
        np.testing.assert_allclose(grads[i], g, rtol=0, atol=0.03 * np.abs(g).max())
        dz = (w64[i].T @ dz) * (zs[i - 1] > 0) if i else None


def test_loss_falls_and_memoryx_steps_every_layer():
    x_tr, _, y_tr, _ = load()
    mx = build_memoryx(DIMS, optimizer=AdamW(lr=1e-2), seed=0)
    trainer = WaferTrainer(DIMS, mx, mesh=(3, 2), systems=3, batch=10)
    first = trainer.step(x_tr[:30], y_tr[:30]).loss
    for _ in range(30):
        last = trainer.step(x_tr[:30], y_tr[:30]).loss
    assert last < 0.5 * first
    assert all(mx.step_count(f"fc{i}") == 31 for i in range(3))


def test_digits_exact_training_close_to_float32():
    r = digits_experiment(hidden=(32,), mesh=(2, 2), systems=2, batch=16, epochs=3, seed=0)
    assert r["float32_accuracy"] > 0.9
    assert r["exact_accuracy"] > 0.9
    assert abs(r["exact_accuracy"] - r["float32_accuracy"]) <= 0.03
    assert r["exact_loss"][-1] < 0.5 * r["exact_loss"][0]
    assert abs(r["exact_loss"][-1] - r["float32_loss"][-1]) < 0.05


def test_float32_trainer_learns_too():
    x_tr, x_te, y_tr, y_te = load()
    ref = Float32Trainer(DIMS, build_memoryx(DIMS, optimizer=AdamW(lr=1e-2)))
    before = np.mean(ref.predict(x_te) == y_te)
    for _ in range(2):
        for s in range(0, len(x_tr) - 31, 32):
            ref.step(x_tr[s:s + 32], y_tr[s:s + 32])
    assert np.mean(ref.predict(x_te) == y_te) > max(0.85, before + 0.5)


@pytest.mark.parametrize("kwargs,match", [
    (dict(systems=0), "systems"), (dict(systems=193), "systems"), (dict(batch=0), "batch"),
    (dict(mesh=(2,)), "mesh"),
])
def test_bad_trainer_arguments(kwargs, match):
    args = dict(mesh=(2, 2), systems=1, batch=4) | kwargs
    with pytest.raises(ValueError, match=match):
        WaferTrainer(DIMS, build_memoryx(DIMS), **args)


def test_bad_step_input():
    trainer = WaferTrainer(DIMS, build_memoryx(DIMS), systems=2, batch=4)
    with pytest.raises(ValueError, match="systems"):
        trainer.step(np.zeros((6, 64)), np.zeros(6, int))
    with pytest.raises(ValueError, match="features"):
        trainer.step(np.zeros((8, 63)), np.zeros(8, int))
    with pytest.raises(ValueError, match="shape"):
        WaferTrainer((64, 10), build_memoryx((64, 12, 10)))
