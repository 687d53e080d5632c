"""Reference check on real data: scikit-learn's ``load_digits`` (8x8 images, 10 classes, shipped
with the package), trained through the exact kernels (:class:`WaferTrainer`) and in plain float32
numpy (:class:`Float32Trainer`) from the same initial weights, the same optimizer and the same
sample order."""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from models.memoryx import AdamW

from .training import Float32Trainer, WaferTrainer, build_memoryx

__all__ = ["load", "digits_experiment"]


def load(seed=0, test_fraction=0.2):
    """``(x_train, x_test, y_train, y_test)``: pixels scaled to [0, 1], stratified split."""
    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    return train_test_split(x, data.target.astype(np.int64), test_size=test_fraction,
                            random_state=seed, stratify=data.target)


def digits_experiment(hidden=(64,), mesh=(2, 2), systems=2, batch=16, epochs=4, lr=3e-3, seed=0):
    """Train both ways; returns a dict with per-epoch mean losses and final test accuracies."""
    x_tr, x_te, y_tr, y_te = load(seed)
    dims = (x_tr.shape[1], *hidden, 10)

    def make():
        return build_memoryx(dims, optimizer=AdamW(lr=lr, weight_decay=1e-4), seed=seed)

    exact = WaferTrainer(dims, make(), mesh=mesh, systems=systems, batch=batch)
    ref = Float32Trainer(dims, make())
    g = exact.global_batch
    rng = np.random.default_rng(seed)
    history = {"exact_loss": [], "float32_loss": []}
    for _ in range(epochs):
        order = rng.permutation(len(x_tr))
        le, lf = [], []
        for s in range(0, len(order) - g + 1, g):
            idx = order[s:s + g]
            le.append(exact.step(x_tr[idx], y_tr[idx]).loss)
            lf.append(ref.step(x_tr[idx], y_tr[idx]))
        history["exact_loss"].append(float(np.mean(le)))
        history["float32_loss"].append(float(np.mean(lf)))
    return {
        "dims": list(dims), "mesh": list(mesh), "systems": systems, "batch_per_system": batch,
        "epochs": epochs, "lr": lr, "steps": epochs * (len(x_tr) // g),
        "exact_accuracy": float(np.mean(exact.predict(x_te) == y_te)),
        "float32_accuracy": float(np.mean(ref.predict(x_te) == y_te)),
        "test_samples": int(len(y_te)), **history,
    }
