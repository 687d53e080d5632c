"""The flash directory belongs to one open store: a second store on it (this process or another) is
refused naming the holder before it touches anything; close, garbage collection and the death of the
holder (SIGKILL) release it; different directories do not conflict."""

import fcntl
import gc
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from memoryx_helpers import assert_same_state

from models.memoryx import (
    SGD,
    AdamW,
    DirectoryLockedError,
    MemoryX,
    MemoryXError,
    StorageError,
    TieredStore,
    TierError,
)
from models.memoryx import lock as lock_module
from models.memoryx.lock import LOCK_NAME

F = np.float32
ROOT = Path(__file__).resolve().parents[3]


def build(flash_dir=None, budget="default"):
    """A two-layer store; with a flash directory (or a budget) a 600-byte DRAM tier over flash."""
    if budget == "default":
        budget = 600 if flash_dir else None
    mx = MemoryX(AdamW(lr=1e-2), dram_budget_bytes=budget, flash_dir=flash_dir)
    mx.add_layer("a", (16, 12), "normal", seed=1)
    mx.add_layer("b", (12,), "normal", seed=2)
    return mx


def step(mx, seed):
    rng = np.random.default_rng(seed)
    for n in mx.layer_names():
        mx.apply_gradient(n, rng.standard_normal(mx.shape(n), dtype=F))


def files(d):
    """Every file of ``d``: name -> (bytes, mtime_ns, inode)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino) for p in sorted(d.iterdir())}


def holder_of(d):
    return json.loads((d / LOCK_NAME).read_text())


def test_second_store_on_the_same_directory_is_refused_naming_the_holder(tmp_path):
    d = tmp_path / "flash"
    mx, ref = build(d), build()
    step(mx, 0)
    step(ref, 0)
    ckpt = mx.save_checkpoint(tmp_path / "m.ckpt")
    before = files(d)
    assert LOCK_NAME in before and holder_of(d) == {"pid": os.getpid(), "host": socket.gethostname()}
    alias = tmp_path / "alias"
    alias.symlink_to(d)
    attempts = [lambda: build(d), lambda: MemoryX(SGD(lr=0.1), flash_dir=alias),       # another spelling
                lambda: TieredStore(dram_budget_bytes=0, flash_dir=d),
                lambda: MemoryX.load_checkpoint(ckpt, dram_budget_bytes=0, flash_dir=d)]
    for attempt in attempts:
        with pytest.raises(DirectoryLockedError) as e:
            attempt()
        msg = str(e.value)
        assert f"pid {os.getpid()} on host {socket.gethostname()}, that is this process)" in msg, msg
        assert str(d) in msg or str(alias) in msg
        assert (e.value.pid, e.value.host) == (os.getpid(), socket.gethostname())
        assert isinstance(e.value, StorageError) and isinstance(e.value, OSError) and isinstance(e.value, MemoryXError)
    assert files(d) == before                       # nothing of the first store was touched
    step(mx, 1)                                     # and it trains on, bit for bit
    step(ref, 1)
    assert_same_state(mx.snapshot(), ref.snapshot())


def test_close_and_context_exit_release_the_directory(tmp_path):
    d = tmp_path / "flash"
    with build(d) as mx:
        assert (d / LOCK_NAME).exists() and not mx.closed
    assert mx.closed and not (d / LOCK_NAME).exists()
    with pytest.raises(TierError, match="closed"):
        mx.master("a")
    mx.close()                                      # idempotent
    again = build(d)                                # the directory is free: taken again
    assert sorted(p.name for p in d.iterdir()) == [LOCK_NAME] + [f"t{i:06d}.bin" for i in range(10)]
    again.close()
    assert sorted(p.name for p in d.iterdir()) == [f"t{i:06d}.bin" for i in range(10)]


def test_a_garbage_collected_store_releases_the_directory(tmp_path):
    d = tmp_path / "flash"
    mx = build(d)
    step(mx, 0)
    with pytest.raises(DirectoryLockedError):
        build(d)
    del mx
    gc.collect()
    assert not (d / LOCK_NAME).exists()
    build(d).close()


def test_different_directories_do_not_conflict(tmp_path):
    dirs = [tmp_path / "x", tmp_path / "y", tmp_path / "x" / "sub"]       # siblings, and one inside another
    stores = [build(d) for d in dirs]
    stores.append(build(None, budget=600))                                 # a private temporary directory
    ref = build()
    for s in range(2):
        for mx in [*stores, ref]:
            step(mx, s)
    for mx in stores:
        assert_same_state(mx.snapshot(), ref.snapshot())
    with pytest.raises(DirectoryLockedError):                              # the private directory is locked too
        MemoryX(SGD(lr=0.1), flash_dir=stores[-1].tiers.flash_dir)
    for mx in stores:
        mx.close()


CHILD = r"""
import sys, time
from models.memoryx import MemoryX, SGD
mx = MemoryX(SGD(lr=0.1), dram_budget_bytes=0, flash_dir=sys.argv[1])
for i in range(6):                      # 18 tensor files: more than the next store makes
    mx.add_layer(f"w{i}", (4, 4), "ones")
print("ready", flush=True)
time.sleep(120)
"""


def test_lock_of_a_process_killed_with_sigkill_is_recovered(tmp_path):
    d = tmp_path / "flash"
    d.mkdir()
    (d / "notes.txt").write_text("not a tensor file")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(d)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        before = files(d)
        with pytest.raises(DirectoryLockedError) as e:          # held by another process
            build(d)
        assert (e.value.pid, e.value.host) == (proc.pid, socket.gethostname())
        assert f"pid {proc.pid} on host {socket.gethostname()}" in str(e.value)
        assert "this process" not in str(e.value)
        assert files(d) == before
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert holder_of(d)["pid"] == proc.pid                      # the dead holder's lock file is still there
    assert sum(p.name.endswith(".bin") for p in d.iterdir()) == 18
    mx, ref = build(d), build()                                 # recovered without any manual step
    assert holder_of(d)["pid"] == os.getpid()
    names = sorted(p.name for p in d.iterdir())                 # the dead store's tensor files are gone
    assert names == sorted([LOCK_NAME, "notes.txt"] + [f"t{i:06d}.bin" for i in range(10)])
    assert (d / "notes.txt").read_text() == "not a tensor file"
    step(mx, 0)
    step(ref, 0)
    assert_same_state(mx.snapshot(), ref.snapshot())
    mx.close()


def test_an_opener_racing_a_release_locks_the_file_the_path_names(tmp_path, monkeypatch):
    d = tmp_path / "flash"
    first = build(d)
    calls = []

    class Fcntl:                    # fcntl as models.memoryx.lock sees it: the holder releases between
        LOCK_EX, LOCK_NB = fcntl.LOCK_EX, fcntl.LOCK_NB     # the next opener's open and its flock

        @staticmethod
        def flock(fd, op):
            calls.append(os.fstat(fd).st_ino)
            if len(calls) == 1:
                first.close()       # unlinks the lock file the opener has open, then unlocks it
            fcntl.flock(fd, op)

    monkeypatch.setattr(lock_module, "fcntl", Fcntl)
    second = build(d)
    monkeypatch.undo()
    assert len(calls) == 2                              # locked the removed file, saw it, retried
    assert holder_of(d)["pid"] == os.getpid()
    with pytest.raises(DirectoryLockedError):           # so a third store is refused
        build(d)
    second.close()


def test_a_store_never_removes_a_lock_file_it_does_not_hold(tmp_path):
    d = tmp_path / "flash"
    first = build(d)
    os.unlink(d / LOCK_NAME)                  # someone removed the lock file: the next store makes its own
    second = build(d)
    first.close()                             # must leave the second store's lock file alone
    assert holder_of(d)["pid"] == os.getpid()
    with pytest.raises(DirectoryLockedError):
        build(d)
    second.close()
    assert not (d / LOCK_NAME).exists()


def test_a_holder_that_has_not_recorded_itself_is_reported_as_such(tmp_path):
    d = tmp_path / "flash"
    d.mkdir()
    fd = os.open(d / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(DirectoryLockedError, match="has not recorded itself") as e:
            build(d)
        assert e.value.pid is None and str(d) in str(e.value)
    finally:
        os.close(fd)
    build(d).close()
