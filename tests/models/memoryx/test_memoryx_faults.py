"""All-or-nothing under I/O errors: checkpoint save and restore, safetensors export and import fail at
every write and fsync point in turn (EIO, then ENOSPC) and leave the store exactly as it was: tensors
bit-equal, optimizer state and step counters, every byte of every file; the error is a StorageError
naming the file and the cause, and the next training step equals a reference store's bit for bit.

The faults are injected below :mod:`models.memoryx.fsio`: its ``os`` is replaced by :class:`FaultyOS`,
which counts the points where a write can fail (creating a file, write, pwrite, posix_fallocate, fsync,
link, replace) and fails the k-th one instead of making the call. A first run of each operation counts
its points; then it is run failing at each point k."""

import errno
import os
import shutil
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from memoryx_helpers import assert_same_state
from safetensors.numpy import save_file

from models.memoryx import AdamW, MemoryX, SafetensorsError, StorageError, fsio
from models.memoryx import safetensors_io as sio

F = np.float32
CHUNK = 64                        # elements: layer "a" (192) takes 3 chunks
SHAPES = {"a": (16, 12), "b": (12,), "c": (8, 8)}
BUDGET = 1200                     # bytes of DRAM: some tensors cached (dirty), the others served from flash
ERRNOS = [errno.EIO, errno.ENOSPC]


@pytest.fixture
def tmp_path(tmp_path):
    """A scratch directory on tmpfs (/dev/shm) when there is one: the same file-system calls in the same
    order, but the hundreds of fsync, msync and unlink calls of these runs cost microseconds instead of
    milliseconds each on a busy disk."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    d = Path(tempfile.mkdtemp(prefix="memoryx-faults-", dir=shm))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


class FaultyOS:
    """``os`` for :mod:`models.memoryx.fsio`: records each write point as ``(operation, file)`` and
    raises ``OSError(err)`` at point number ``fail_at`` instead of making the call."""

    def __init__(self, fail_at=None, err=errno.EIO):
        self.fail_at, self.err, self.points = fail_at, err, []

    def __getattr__(self, name):
        return getattr(os, name)

    def _point(self, op, target):
        self.points.append((op, str(target)))
        if len(self.points) - 1 == self.fail_at:
            raise OSError(self.err, os.strerror(self.err))

    @staticmethod
    def _file(fd):
        return os.readlink(f"/proc/self/fd/{fd}")

    def open(self, path, flags, *args, **kw):
        if flags & os.O_CREAT:
            self._point("create", path)
        return os.open(path, flags, *args, **kw)

    def write(self, fd, data):
        self._point("write", self._file(fd))
        return os.write(fd, data)

    def pwrite(self, fd, data, offset):
        self._point("pwrite", self._file(fd))
        return os.pwrite(fd, data, offset)

    def posix_fallocate(self, fd, offset, length):
        self._point("fallocate", self._file(fd))
        return os.posix_fallocate(fd, offset, length)

    def fsync(self, fd):
        self._point("fsync", self._file(fd))
        return os.fsync(fd)

    def link(self, src, dst, **kw):
        self._point("link", dst)
        return os.link(src, dst, **kw)

    def replace(self, src, dst, **kw):
        self._point("replace", dst)
        return os.replace(src, dst, **kw)


def build(flash_dir=None):
    """The store under test (DRAM over flash) or, without ``flash_dir``, a DRAM-only reference."""
    mx = MemoryX(AdamW(lr=1e-2, weight_decay=0.01), dram_budget_bytes=BUDGET if flash_dir else None,
                 flash_dir=flash_dir, chunk_elems=CHUNK)
    for i, (name, shape) in enumerate(SHAPES.items()):
        mx.add_layer(name, shape, "normal", seed=i)
    return mx


def step(mx, seed):
    rng = np.random.default_rng(seed)
    for n in mx.layer_names():
        mx.apply_gradient(n, rng.standard_normal(mx.shape(n), dtype=F))


def files(d):
    """name -> bytes of every file in ``d`` (nothing when it does not exist)."""
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())} if d.exists() else {}


def count_points(monkeypatch, operation):
    fos = FaultyOS()
    monkeypatch.setattr(fsio, "os", fos)
    try:
        operation()
    finally:
        monkeypatch.setattr(fsio, "os", os)
    return fos.points


def fail_at(monkeypatch, k, err, operation, points):
    """Run ``operation`` failing at point ``k`` with ``err``: the StorageError it must raise, checked to
    name the file of the failing point and the cause, after the same points as the counting run."""
    fos = FaultyOS(k, err)
    monkeypatch.setattr(fsio, "os", fos)
    try:
        with pytest.raises(StorageError) as e:
            operation()
    finally:
        monkeypatch.setattr(fsio, "os", os)
    assert [p[0] for p in fos.points[:k + 1]] == [p[0] for p in points[:k + 1]], k
    msg = str(e.value)
    assert e.value.errno == err and os.strerror(err) in msg, msg
    assert Path(fos.points[k][1]).name in msg, (fos.points[k], msg)
    return e.value


@pytest.mark.parametrize("kind", ["checkpoint", "safetensors-export"])
def test_save_fails_cleanly_at_every_write_and_fsync_point(tmp_path, monkeypatch, kind):
    mx, ref = build(tmp_path / "flash"), build()
    step(mx, 0)
    step(ref, 0)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "m.ckpt"
    save = (lambda p: mx.save_checkpoint(p)) if kind == "checkpoint" else \
        (lambda p: mx.export_safetensors(p, include_state=True))
    seed, tested = 1, 0
    for previous in (False, True):              # a new file, then replacing an earlier one
        if previous:
            save(target)
        (tmp_path / "count").mkdir(exist_ok=True)
        if previous:
            save(tmp_path / "count" / "m.ckpt")
        points = count_points(monkeypatch, lambda: save(tmp_path / "count" / "m.ckpt"))
        ops = {p[0] for p in points}
        assert ops == {"create", "write", "fsync", "link", "replace"}, ops     # link: keep the previous file
        for err in ERRNOS:
            for k in range(len(points)):
                state, flash, saved = mx.snapshot(), files(tmp_path / "flash"), files(out)
                e = fail_at(monkeypatch, k, err, lambda: save(target), points)
                assert str(target) in str(e) and f"{target} is unchanged" in str(e)
                assert files(out) == saved                    # previous file (or none), no temporary file
                assert files(tmp_path / "flash") == flash
                assert_same_state(state, mx.snapshot())
                step(mx, seed)                                # the next step is the reference's
                step(ref, seed)
                assert_same_state(mx.snapshot(), ref.snapshot())
                seed += 1
                tested += 1
        print(f"{kind} ({'replacing' if previous else 'new file'}): {len(points)} failure points")
    assert tested >= 2 * 2 * 20
    save(target)
    if kind == "checkpoint":
        assert_same_state(MemoryX.load_checkpoint(target).snapshot(), mx.snapshot())
    assert sorted(p.name for p in out.iterdir()) == ["m.ckpt"]


def test_checkpoint_restore_fails_cleanly_at_every_write_and_fsync_point(tmp_path, monkeypatch):
    src, ref = build(tmp_path / "src"), build()
    for s in range(2):
        step(src, s)
        step(ref, s)
    ckpt = src.save_checkpoint(tmp_path / "m.ckpt")
    d = tmp_path / "restore"

    def restore():
        return MemoryX.load_checkpoint(ckpt, dram_budget_bytes=BUDGET, flash_dir=d, chunk_elems=CHUNK)

    points = count_points(monkeypatch, lambda: restore().close())
    assert {p[0] for p in points} == {"create", "fallocate", "pwrite", "fsync"}
    for err in ERRNOS:
        for k in range(len(points)):
            e = fail_at(monkeypatch, k, err, restore, points)
            assert str(ckpt) in str(e) and "no store was restored" in str(e)
            assert files(d) == {}                     # no tensor file, and the lock released (file removed)
    print(f"restore: {len(points)} failure points")
    back = restore()                                  # the directory is free and clean: a restore works
    assert_same_state(back.snapshot(), ref.snapshot())
    step(back, 7)
    step(ref, 7)
    assert_same_state(back.snapshot(), ref.snapshot())


def write_import_file(path):
    """Weights of every layer (one as BF16, one as F16), AdamW state of "a", and a new layer "n"."""
    rng = np.random.default_rng(42)
    tensors = {"a": rng.standard_normal(SHAPES["a"], dtype=F),
               "b": rng.standard_normal(SHAPES["b"], dtype=F).astype(ml_dtypes.bfloat16),
               "c": rng.standard_normal(SHAPES["c"], dtype=F).astype(np.float16),
               "a.exp_avg": rng.standard_normal(SHAPES["a"], dtype=F),
               "a.exp_avg_sq": rng.random(SHAPES["a"], dtype=F),
               "n": rng.standard_normal((4, 8), dtype=F)}
    save_file(tensors, path)
    return path


def test_safetensors_import_fails_cleanly_at_every_write_and_fsync_point(tmp_path, monkeypatch):
    mx, ref = build(tmp_path / "flash"), build()
    step(mx, 0)
    step(ref, 0)
    src = write_import_file(tmp_path / "w.safetensors")
    counter = build(tmp_path / "count")
    step(counter, 0)
    points = count_points(monkeypatch, lambda: counter.import_safetensors(src, create_missing=True))
    assert {p[0] for p in points} == {"create", "fallocate", "pwrite", "fsync"}
    seed = 1
    for err in ERRNOS:
        for k in range(len(points)):
            state, flash = mx.snapshot(), files(tmp_path / "flash")
            e = fail_at(monkeypatch, k, err, lambda: mx.import_safetensors(src, create_missing=True), points)
            assert f"safetensors import from {src}" in str(e) and "the store is unchanged" in str(e)
            assert files(tmp_path / "flash") == flash             # not a byte of any live file changed
            assert mx.layer_names() == ["a", "b", "c"]
            assert_same_state(state, mx.snapshot())
            step(mx, seed)
            step(ref, seed)
            assert_same_state(mx.snapshot(), ref.snapshot())
            seed += 1
    print(f"safetensors import: {len(points)} failure points")
    for store in (mx, ref):                           # and then the import works, identically
        assert store.import_safetensors(src, create_missing=True) == ["a", "b", "c", "n"]
    assert_same_state(mx.snapshot(), ref.snapshot())
    np.testing.assert_array_equal(mx.state("a")["exp_avg"], counter.state("a")["exp_avg"])
    step(mx, 99)
    step(ref, 99)
    assert_same_state(mx.snapshot(), ref.snapshot())


@pytest.mark.parametrize("tiered", [True, False], ids=["flash", "dram"])
def test_import_stopped_late_in_its_pass_changes_nothing(tmp_path, monkeypatch, tiered):
    """A bad value in the last tensor, or a read error of the source at any chunk, comes after other
    tensors were staged: nothing of them reaches the store."""
    mx = build(tmp_path / "flash" if tiered else None)
    step(mx, 0)
    src = write_import_file(tmp_path / "w.safetensors")
    bad = dict(zip(["a", "b", "c"], [mx.master(n) + 1 for n in ["a", "b", "c"]]))
    bad["n"] = np.full((4, 8), np.inf, F)
    save_file(bad, tmp_path / "bad.safetensors")
    state, flash = mx.snapshot(), files(tmp_path / "flash")
    with pytest.raises(SafetensorsError, match="'n' has NaN or Inf"):
        mx.import_safetensors(tmp_path / "bad.safetensors", create_missing=True)
    assert_same_state(state, mx.snapshot())
    assert files(tmp_path / "flash") == flash

    reads = []

    class Source:                   # the source file as the import opens it: readinto fails at call `fail`
        def __init__(self, path, mode):
            self.f = open(path, mode)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def readinto(self, buf):
            reads.append(1)
            if len(reads) == fail:
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return self.f.readinto(buf)

    monkeypatch.setattr(sio, "open", Source, raising=False)
    fail = 0
    n_reads = sum(1 for name in ["a", "b", "c", "a.exp_avg", "a.exp_avg_sq", "n"]
                  for _ in range(0, int(np.prod(SHAPES.get(name.split(".")[0], (4, 8)))), CHUNK))
    for fail in range(1, n_reads + 1):  # noqa: B007 (read by Source.readinto)
        reads.clear()
        with pytest.raises(StorageError, match=r"cannot read safetensors file .*w\.safetensors.*Input/output"):
            mx.import_safetensors(src, create_missing=True)
        assert_same_state(state, mx.snapshot())
        assert files(tmp_path / "flash") == flash
    reads.clear()
    fail = 0
    mx.import_safetensors(src, create_missing=True)
    assert len(reads) == n_reads and mx.layer_names() == ["a", "b", "c", "n"]
