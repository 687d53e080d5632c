"""Checkpoints: exact round trip (also mid-accumulation and across tiers), checksum, and SIGKILL at
random moments during checkpointing never yields anything but the last completed checkpoint."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from memoryx_helpers import assert_same_state, peak_heap

from models.memoryx import (
    SGD,
    AdamW,
    CheckpointError,
    MemoryX,
    MemoryXError,
    Momentum,
    NonFiniteUpdateWarning,
    StorageError,
    read_checkpoint,
)
from models.memoryx.checkpoint import MAGIC

F = np.float32
ROOT = Path(__file__).resolve().parents[3]


def make(opt=None, **kw):
    mx = MemoryX(opt or AdamW(lr=1e-3), **kw)
    mx.add_layer("a", (16, 12), "normal", seed=1)
    mx.add_layer("b", (12,), "zeros")
    return mx


def feed(mx, rounds, seed):
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        for n in mx.layer_names():
            mx.apply_gradient(n, rng.standard_normal(mx.shape(n), dtype=F))


@pytest.mark.parametrize("opt, k", [(AdamW(lr=1e-3), 1), (Momentum(lr=0.1, nesterov=True), 3)],
                         ids=["adamw", "momentum-accum3"])
def test_round_trip_and_continued_training_is_identical(tmp_path, opt, k):
    mx = make(opt, accumulation_steps=k)
    feed(mx, 4, seed=1)                       # with k = 3: one step done, one micro-batch pending
    mx.apply_gradient("a", np.ones((16, 12), F))   # and a half-received round
    path = mx.save_checkpoint(tmp_path / "m.ckpt")
    back = MemoryX.load_checkpoint(path, dram_budget_bytes=500, flash_dir=tmp_path / "flash")
    assert_same_state(mx.snapshot(), back.snapshot())
    np.testing.assert_array_equal(back.bf16("a"), mx.bf16("a"))
    back.apply_gradient("b", np.ones(12, F))
    mx.apply_gradient("b", np.ones(12, F))
    feed(mx, 3, seed=2)
    feed(back, 3, seed=2)
    assert_same_state(mx.snapshot(), back.snapshot())
    assert not [p for p in tmp_path.iterdir() if ".tmp." in p.name]


def test_checkpoint_of_a_tiered_store_holds_the_dirty_cached_values(tmp_path):
    mx = make(dram_budget_bytes=10**6, flash_dir=tmp_path / "flash")   # everything cached, files stale
    feed(mx, 2, seed=3)
    back = MemoryX.load_checkpoint(mx.save_checkpoint(tmp_path / "c"))
    assert_same_state(mx.snapshot(), back.snapshot())


def test_a_diverged_run_is_checkpointed_and_restored_as_it_is(tmp_path):
    mx = MemoryX(Momentum(lr=1e30), on_nonfinite="apply")
    mx.add_layer("w", (3,), np.array([1.0, 2.0, 3.0]))
    with pytest.warns(NonFiniteUpdateWarning):
        mx.apply_gradient("w", np.full(3, 1e30, F))       # the weights overflow to -inf (applied, flagged)
    mx.apply_gradient("w", np.full(3, 1e30, F))           # and stay non-finite
    back = MemoryX.load_checkpoint(mx.save_checkpoint(tmp_path / "c"))
    assert back.nonfinite_layers() == {"w": 1}
    np.testing.assert_array_equal(back.master("w").view(np.uint32), mx.master("w").view(np.uint32))
    assert not np.isfinite(back.master("w")).any()
    np.testing.assert_array_equal(back.bf16("w"), mx.bf16("w"))


def test_corruption_and_truncation_are_detected(tmp_path):
    mx = make()
    feed(mx, 1, seed=0)
    path = mx.save_checkpoint(tmp_path / "c")
    data = path.read_bytes()
    assert data.startswith(MAGIC)
    for i in (len(data) // 2, len(data) - 40, 30):     # tensor bytes, last tensor byte, header
        bad = bytearray(data)
        bad[i] ^= 0x01
        (tmp_path / "bad").write_bytes(bytes(bad))
        with pytest.raises(CheckpointError, match="SHA-256"):
            MemoryX.load_checkpoint(tmp_path / "bad")
    (tmp_path / "short").write_bytes(data[:-1000])
    with pytest.raises(CheckpointError, match="SHA-256"):
        read_checkpoint(tmp_path / "short")
    (tmp_path / "tiny").write_bytes(data[:10])
    with pytest.raises(CheckpointError, match="truncated"):
        read_checkpoint(tmp_path / "tiny")
    (tmp_path / "other").write_bytes(b"PK\x03\x04" + data[4:])
    with pytest.raises(CheckpointError, match="not a MemoryX checkpoint"):
        read_checkpoint(tmp_path / "other")
    with pytest.raises(CheckpointError, match="cannot read"):
        read_checkpoint(tmp_path / "missing")


def test_failed_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    mx = make()
    path = mx.save_checkpoint(tmp_path / "c")
    before = path.read_bytes()
    feed(mx, 1, seed=4)

    def boom(*a):
        raise OSError("disk full")
    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        mx.save_checkpoint(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c"]


def test_save_into_a_missing_directory_names_the_path(tmp_path):
    mx = make()
    with pytest.raises(StorageError, match=r"cannot write .*nowhere/m\.ckpt: No such file") as e:
        mx.save_checkpoint(tmp_path / "nowhere" / "m.ckpt")
    assert isinstance(e.value, MemoryXError) and isinstance(e.value, OSError)


def test_a_failed_restore_leaves_no_flash_files(tmp_path):
    mx = make()
    path = mx.save_checkpoint(tmp_path / "c")
    header, _ = read_checkpoint(path)
    with pytest.raises(CheckpointError, match="bad optimizer"):
        # a checkpoint of another optimizer's state layout would not fit: simulate with a wrong kind
        from models.memoryx import checkpoint as ck
        data = path.read_bytes()
        hlen = ck._PREFIX.unpack_from(data)[2]
        hdr = data[ck._PREFIX.size:ck._PREFIX.size + hlen].replace(b'"kind": "adamw"', b'"kind": "adamx"')
        body = data[:ck._PREFIX.size] + hdr + data[ck._PREFIX.size + hlen:-32]
        import hashlib
        (tmp_path / "bad").write_bytes(body + hashlib.sha256(body).digest())
        MemoryX.load_checkpoint(tmp_path / "bad", dram_budget_bytes=0, flash_dir=tmp_path / "flash")
    flash = tmp_path / "flash"
    assert not flash.exists() or not list(flash.iterdir())
    assert header["layers"][0]["name"] == "a"



@pytest.mark.parametrize("opt", [AdamW(lr=1e-3), SGD(lr=0.1)], ids=lambda o: o.kind)
def test_store_8x_its_budget_is_saved_restored_and_trained_within_budget_plus_chunks(tmp_path, opt):
    budget, chunk = 1 << 20, 1 << 14                     # 1 MiB DRAM, 64 KiB chunks
    chunk_bytes = 4 * chunk
    kw = dict(dram_budget_bytes=budget, chunk_elems=chunk)
    mx = MemoryX(opt, flash_dir=tmp_path / "a", **kw)
    n_layers = 9 if opt.kind == "adamw" else 16
    for i in range(n_layers):
        mx.add_layer(f"l{i}", (256, 256), "normal", seed=i)
    assert mx.stored_bytes() >= 8 * budget
    feed(mx, 2, seed=5)
    path, save_peak = peak_heap(lambda: mx.save_checkpoint(tmp_path / "m.ckpt"))
    back, restore_peak = peak_heap(lambda: MemoryX.load_checkpoint(path, flash_dir=tmp_path / "b", **kw))
    limit = budget + 8 * chunk_bytes
    assert save_peak <= limit, save_peak
    assert restore_peak <= 8 * chunk_bytes, restore_peak    # nothing cached: the chunk buffers only
    assert back.counters()["dram"]["cached_bytes"] == 0
    # the first step on a restored store may JIT-compile kernels for its array types (a one-time
    # allocation of the compiler, not of the store): take that step on a second restored copy first
    feed(MemoryX.load_checkpoint(path, flash_dir=tmp_path / "warm", **kw), 1, seed=6)
    _, train_peak = peak_heap(lambda: feed(back, 1, seed=6))
    assert train_peak <= limit, train_peak
    feed(mx, 1, seed=6)
    assert_same_state(mx.snapshot(), back.snapshot())
    for n in mx.layer_names():
        np.testing.assert_array_equal(back.bf16(n), mx.bf16(n))


# -- SIGKILL at random moments -----------------------------------------------------------------
WORKER = r"""
import sys, numpy as np
from models.memoryx import MemoryX, AdamW
out, flash = sys.argv[1], sys.argv[2]
mx = MemoryX(AdamW(lr=1e-3), dram_budget_bytes=600_000, flash_dir=flash)
for i, shape in enumerate(SHAPES):
    mx.add_layer(f"l{i}", shape, "normal", seed=i)
step = 0
while True:
    step += 1
    rng = np.random.default_rng(step)
    for n in mx.layer_names():
        mx.apply_gradient(n, rng.standard_normal(mx.shape(n), dtype=np.float32))
    mx.save_checkpoint(out)
    print(step, flush=True)
"""
SHAPES = [(256, 256), (256, 128), (64, 256), (64,)]


def reference_states(steps):
    """State after each number of steps, computed here, independently of the killed process."""
    mx = MemoryX(AdamW(lr=1e-3))
    for i, shape in enumerate(SHAPES):
        mx.add_layer(f"l{i}", shape, "normal", seed=i)
    states = {0: mx.snapshot()}
    for step in range(1, max(steps) + 1):
        rng = np.random.default_rng(step)
        for n in mx.layer_names():
            mx.apply_gradient(n, rng.standard_normal(mx.shape(n), dtype=F))
        if step in steps:
            states[step] = mx.snapshot()
    return states


def test_sigkill_during_checkpointing_restores_the_last_completed_checkpoint(tmp_path):
    seed = int(os.environ.get("MEMORYX_KILL_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    code = WORKER.replace("SHAPES", repr(SHAPES))
    outcomes = []
    for trial in range(8):
        d = tmp_path / f"t{trial}"
        d.mkdir()
        ckpt = d / "model.ckpt"
        proc = subprocess.Popen([sys.executable, "-c", code, str(ckpt), str(d / "flash")], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # a quarter of the kills are timed from the start (often before any checkpoint), the rest
        # from the first completed checkpoint, so they land anywhere in later checkpoints
        if trial % 4:
            proc.stdout.readline()
            time.sleep(rnd.uniform(0.0, 0.3))
        else:
            time.sleep(rnd.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        assert proc.returncode == -signal.SIGKILL, f"worker ended by itself: {err[-2000:]}"
        reported = [int(x) for x in out.split()]
        if trial % 4:
            reported.insert(0, 1)
        last = reported[-1] if reported else 0
        tmp_left = [p.name for p in d.iterdir() if ".tmp." in p.name]
        if not ckpt.exists():
            assert last == 0, f"seed {seed}: step {last} reported complete but no checkpoint"
            outcomes.append((None, last, tmp_left))
            continue
        restored = MemoryX.load_checkpoint(ckpt)     # checksum verified
        steps = {restored.step_count(n) for n in restored.layer_names()}
        assert len(steps) == 1, f"seed {seed}: layers at different steps {steps}"
        got = steps.pop()
        # the kill may fall between the rename and the print: then the newer one is complete too
        assert got in (last, last + 1), f"seed {seed}: restored step {got}, last completed {last}"
        outcomes.append((got, last, tmp_left, restored.snapshot()))
    refs = reference_states({o[0] for o in outcomes if o[0]})
    for o in outcomes:
        if o[0]:
            assert_same_state(o[3], refs[o[0]])
    print(f"kill seed {seed}: (restored step, last reported, stray temp files) =",
          [(o[0], o[1], len(o[2])) for o in outcomes])
